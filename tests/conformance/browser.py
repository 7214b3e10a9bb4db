#!/usr/bin/env python3
"""The tests' "browser": a person who opens a sign-in link and does what the pages ask.

    python browser.py URL          # what `BROWSER` runs for `mcpmux login`

It GETs URL and follows every redirect, keeping cookies. A page with a POST form (an
authorization server's login or consent page, e.g. oidc-provider's) is filled in: `login` is
MCPMUX_TEST_LOGIN (default "alice"), `password` anything, every other input as the page set it,
and submitted. It stops at the first page without a form (where the authorization server sent the
browser back: mcpmux's /oauth/callback) and prints that page's status and URL. With
MCPMUX_TEST_BROWSER_LOG=FILE it also appends `STATUS URL-OPENED -> FINAL-URL` there (the tests
read it to know the browser ran). Exit 0 when the last page answered 2xx.

stdlib only, so any python3 runs it. Importable: `visit(url, login) -> (status, final_url, body)`.
"""

from __future__ import annotations

import http.cookiejar
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from typing import Any

MAX_PAGES = 20
TIMEOUT_S = 60


class Forms(HTMLParser):
    """The forms of a page: action, method and every input's name and value."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get").lower(), "inputs": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["inputs"][a["name"]] = a.get("value", "")


def visit(url: str, login: str = "alice") -> tuple[int, str, str]:
    """Open `url`, follow redirects and fill forms; the last page's status, URL and body."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    request: urllib.request.Request | str = url
    for _ in range(MAX_PAGES):
        try:
            with opener.open(request, timeout=TIMEOUT_S) as response:
                status, final, body = response.status, response.geturl(), response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            return err.code, err.geturl(), err.read().decode("utf-8", "replace")
        parser = Forms()
        parser.feed(body)
        posts = [f for f in parser.forms if f["method"] == "post"]
        if not posts:
            return status, final, body
        form = posts[0]
        data = dict(form["inputs"])
        if "login" in data:
            data["login"] = login
        if "password" in data:
            data["password"] = "any-password"
        action = urllib.parse.urljoin(final, form["action"])
        request = urllib.request.Request(action, data=urllib.parse.urlencode(data).encode(), method="POST")
    raise RuntimeError(f"still on forms after {MAX_PAGES} pages")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: browser.py URL", file=sys.stderr)
        return 2
    url = sys.argv[1]
    status, final, body = visit(url, os.environ.get("MCPMUX_TEST_LOGIN", "alice"))
    print(f"{status} {final}")
    if status >= 300:
        print(body[:2000], file=sys.stderr)
    record = os.environ.get("MCPMUX_TEST_BROWSER_LOG")
    if record:
        with open(record, "a") as f:
            f.write(f"{status} {url} -> {final}\n")
    return 0 if 200 <= status < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
