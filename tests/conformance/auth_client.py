#!/usr/bin/env python3
"""mcpmux as the client under test of the official conformance suite's *auth* scenarios.

The suite starts its test MCP server (and authorization server) and runs
`COMMAND ARGS... SERVER_URL` with env MCP_CONFORMANCE_SCENARIO and, for some scenarios,
MCP_CONFORMANCE_CONTEXT (JSON: a pre-registered client id and secret, a client-credentials key).

    python auth_client.py --mcpmux PATH/TO/mcpmux [--sign-in inband|cli] SERVER_URL

This writes a config whose only upstream is `[servers.t] url = SERVER_URL, namespace = ""` with
the `auth` the scenario calls for:
  * `{ mode = "oauth" }` (discovery, CIMD or dynamic registration, authorization code + PKCE);
  * `{ mode = "oauth", client_id, client_secret }` when the context pre-registers a client;
  * `{ mode = "client_credentials", client_id, client_secret }` or `private_key_jwt = "key.pem"`
    (the context's PEM written to a file) for the client-credentials extensions;
and a `[vault] path` in a temporary directory. Then it signs in the way a user would:
  * `--sign-in inband` (default): `mcpmux serve`, and a real host (auth_host.py, the Python `mcp`
    client declaring URL elicitation) that calls the upstream's authorize tool, opens the link it
    is given in the test browser (browser.py; the suite's authorization endpoint redirects
    straight to mcpmux's /oauth/callback), then lists and calls the real tools;
  * `--sign-in cli`: first `mcpmux login t --config F` with BROWSER set to the test browser (the
    gateway not running), then `mcpmux serve` and the same host, which must find the real tools.
Client credentials need no person: the host just lists and calls the tools.

mcpmux's log and the host's go to this process's stderr. Exit 0 when every tool call was answered
without an error, 1 otherwise (some scenarios expect the client to fail, e.g. a retry limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import auth_host
from browser import visit
from harness import Mcpmux, logger, toml_inline, toml_string

LOGIN_TIMEOUT_S = 60.0
PASTE_AFTER_S = 5.0  # how long the person waits for a browser window before pasting the link
HERE = os.path.dirname(os.path.abspath(__file__))
# The client metadata URL the suite's basic-cimd scenario expects (it does not fetch it).
SUITE_CIMD_URL = "https://conformance-test.local/client-metadata.json"

log = logger("auth-client")


def auth_table(scenario: str, context: dict[str, Any], directory: str) -> dict[str, Any]:
    """The upstream's `auth = {...}` for a scenario and its context."""
    client_id = context.get("client_id")
    if "client-credentials" in scenario or context.get("private_key_pem"):
        table: dict[str, Any] = {"mode": "client_credentials", "client_id": client_id}
        if context.get("private_key_pem"):
            pem = os.path.join(directory, "client-key.pem")
            with open(pem, "w") as f:
                f.write(context["private_key_pem"])
            os.chmod(pem, 0o600)
            table["private_key_jwt"] = pem
        else:
            table["client_secret"] = context.get("client_secret", "")
        return table
    if client_id:
        table = {"mode": "oauth", "client_id": client_id}
        if context.get("client_secret"):
            table["client_secret"] = context["client_secret"]
        return table
    if scenario == "auth/basic-cimd":
        # The suite's authorization server expects its own document URL as the client id: an
        # operator hosting mcpmux's Client ID Metadata Document elsewhere says where it is.
        return {"mode": "oauth", "client_metadata_url": SUITE_CIMD_URL}
    return {"mode": "oauth"}


def servers_toml(server_url: str, auth: dict[str, Any], directory: str) -> str:
    vault = os.path.join(directory, "vault")
    return (
        f"[servers.t]\nurl = {toml_string(server_url)}\nnamespace = \"\"\nauth = {toml_inline(auth)}\n\n"
        f"[vault]\npath = {toml_string(vault)}\n"
    )


def browser_command(directory: str) -> str:
    """An executable that opens its argument in the test browser (for `BROWSER`)."""
    path = os.path.join(directory, "browser.sh")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.join(HERE, "browser.py")}" "$@"\n')
    os.chmod(path, 0o755)
    return path


def login_cli(binary: str, config: str, directory: str) -> None:
    """`mcpmux login t --config F` with the test browser as BROWSER; raises unless it signed in.

    Should the browser not be started, the person copies the link mcpmux printed into it."""
    opened = os.path.join(directory, "browser.log")
    env = dict(os.environ, BROWSER=browser_command(directory), MCPMUX_TEST_BROWSER_LOG=opened)
    env["RUST_LOG"] = env.get("RUST_LOG", "mcpmux=info")
    log("mcpmux login t --config ...")
    proc = subprocess.Popen(
        [binary, "login", "t", "--config", config],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr,
        stderr=subprocess.PIPE,  # where it prints the link
        text=True,
    )
    pasted: list[str] = []

    def read_output() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log(f"login says: {line.rstrip()}")
            links = auth_host.LINK.findall(line)
            if links and not pasted:
                time.sleep(PASTE_AFTER_S)
                if not os.path.exists(opened):
                    pasted.append(links[0])
                    status, final, _ = visit(links[0], "alice")
                    log(f"the browser was not started: pasted the link, landed on {final} ({status})")

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=LOGIN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"mcpmux login still waiting after {LOGIN_TIMEOUT_S} s")
    reader.join(timeout=5)
    browsed = open(opened).read().strip() if os.path.exists(opened) else "(BROWSER was not run)"
    log(f"login exited {code}; the browser: {browsed}")
    if code != 0:
        raise RuntimeError(f"mcpmux login exited {code}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mcpmux", required=True, help="path to the mcpmux binary")
    ap.add_argument("--sign-in", choices=["inband", "cli"], default="inband")
    ap.add_argument("server_url")
    opts = ap.parse_args()
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="mcpmux-conformance-auth-") as tmp:
        auth = auth_table(scenario, context, tmp)
        shown = {k: ("***" if k == "client_secret" else v) for k, v in auth.items()}
        log(f"scenario {scenario}: upstream {opts.server_url}, auth {shown}, sign-in {opts.sign_in}")
        gw = Mcpmux(opts.mcpmux, servers_toml(opts.server_url, auth, tmp), tmp, log)
        try:
            if opts.sign_in == "cli" and auth["mode"] == "oauth":
                login_cli(opts.mcpmux, gw.config, tmp)
            with gw:
                obs = asyncio.run(auth_host.run(gw.url, "legacy", "alice", [], logger("auth-host")))
            log(f"host saw: {json.dumps(obs)}")
            if opts.sign_in == "cli" and obs["links"]:
                log("the host was asked to sign in although `mcpmux login` had")
                obs["ok"] = False
            code = 0 if obs["ok"] else 1
        except Exception as exc:
            log(f"failed: {type(exc).__name__}: {exc}")
            code = 1
    log(f"done, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
