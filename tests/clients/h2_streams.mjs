// A browser host over HTTP/2: Debian's chromium (playwright-core) opens mcpmux's admin page over
// HTTPS, then from the page opens N MCP sessions and one GET stream for each, all at once, and
// while every stream stays open lists the tools of the first session. Over HTTP/1.1 a browser
// keeps six connections per origin, so the seventh stream and the call would wait; over HTTP/2
// they share one connection. Prints one JSON line: {"streams", "tools", "protocols"}.
// Usage: node h2_streams.mjs ADMIN_URL MCP_URL N SPKI
//   SPKI: base64 SHA-256 of the server certificate's public key, the one certificate chromium is
//   told to accept (--ignore-certificate-errors-spki-list); nothing else is trusted blindly.
//   env MCPMUX_PLAYWRIGHT: the playwright-core package directory.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [adminUrl, mcpUrl, n, spki] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(path.join(process.env.MCPMUX_PLAYWRIGHT, "index.mjs")).href);
const browser = await chromium.launch({
  executablePath: process.env.MCPMUX_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", `--ignore-certificate-errors-spki-list=${spki}`],
});
try {
  const page = await browser.newPage();
  await page.goto(adminUrl);
  const seen = await page.evaluate(
    async ({ mcp, n }) => {
      const headers = {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
      };
      const post = (sid, body) =>
        fetch(mcp, { method: "POST", headers: sid ? { ...headers, "mcp-session-id": sid } : headers, body: JSON.stringify(body) });
      const init = {
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "chromium-h2", version: "0" } },
      };
      const sessions = [];
      for (let i = 0; i < n; i++) {
        const r = await post(null, init);
        await r.text();
        const sid = r.headers.get("mcp-session-id");
        await (await post(sid, { jsonrpc: "2.0", method: "notifications/initialized" })).text();
        sessions.push(sid);
      }
      // Every session's GET stream, all at once; each is answered (its head arrives) and stays open.
      const within = (ms, what, p) =>
        Promise.race([p, new Promise((_, no) => setTimeout(() => no(new Error(`${what}: no answer within ${ms} ms`)), ms))]);
      const streams = await within(
        20000,
        "the GET streams",
        Promise.all(
          sessions.map((sid) =>
            fetch(mcp, { headers: { accept: "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } }),
          ),
        ),
      );
      const open = streams.filter((r) => r.status === 200).length;
      // With every stream open, a call.
      const list = await within(20000, "tools/list beside the open streams", post(sessions[0], { jsonrpc: "2.0", id: 1, method: "tools/list" }));
      const text = await list.text();
      const json = JSON.parse(text.split("\n").find((l) => l.startsWith("data: "))?.slice(6) ?? text);
      const protocols = [...new Set(performance.getEntriesByType("resource").map((e) => e.nextHopProtocol))];
      for (const r of streams) r.body.cancel();
      return { streams: open, tools: json.result?.tools?.length ?? 0, protocols };
    },
    { mcp: mcpUrl, n: Number(n) },
  );
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
