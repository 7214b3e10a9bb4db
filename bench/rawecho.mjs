// Dependency-free minimal MCP upstream for the benchmarks in bench/run.py (node >= 18): the same
// echo server behind mcpmux, behind every peer gateway, and called directly.
//   node rawecho.mjs stdio                 newline-delimited JSON-RPC on stdin/stdout
//   PORT=3300 node rawecho.mjs http        Streamable HTTP at http://127.0.0.1:PORT/mcp, plain JSON replies
// Tools: echo {message}, sleep {ms} (answers after ms), both return text content.
import http from "node:http";
import readline from "node:readline";
import { randomUUID } from "node:crypto";

const TOOLS = [
  { name: "echo", description: "Echo the message", inputSchema: { type: "object", properties: { message: { type: "string" } } } },
  { name: "sleep", description: "Reply after ms milliseconds", inputSchema: { type: "object", properties: { ms: { type: "number" } } } },
];
const VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

async function handle(msg) {            // returns a response object, or null for notifications
  if (msg.id === undefined || msg.id === null) return null;
  const ok = (result) => ({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize": {
      const v = VERSIONS.includes(msg.params?.protocolVersion) ? msg.params.protocolVersion : VERSIONS[0];
      return ok({ protocolVersion: v, capabilities: { tools: {} }, serverInfo: { name: "rawecho", version: "0.1.0" } });
    }
    case "ping": return ok({});
    case "tools/list": return ok({ tools: TOOLS });
    case "tools/call": {
      const a = msg.params?.arguments ?? {};
      if (msg.params?.name === "echo") return ok({ content: [{ type: "text", text: `Echo: ${a.message ?? ""}` }] });
      if (msg.params?.name === "sleep") { await new Promise((r) => setTimeout(r, Number(a.ms ?? 0))); return ok({ content: [{ type: "text", text: `slept ${a.ms}` }] }); }
      return ok({ isError: true, content: [{ type: "text", text: `unknown tool ${msg.params?.name}` }] });
    }
    default: return { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `Method not found: ${msg.method}` } };
  }
}

if ((process.argv[2] || "stdio") === "stdio") {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on("line", async (line) => {
    if (!line.trim()) return;
    const r = await handle(JSON.parse(line));
    if (r) process.stdout.write(JSON.stringify(r) + "\n");
  });
  rl.on("close", () => process.exit(0));
} else {
  const port = Number(process.env.PORT || 3300);
  const sessions = new Set();
  http.createServer((req, res) => {
    if (req.url !== "/mcp") { res.writeHead(404).end(); return; }
    if (req.method === "GET") { res.writeHead(405, { Allow: "POST, DELETE" }).end(); return; }
    const sid = req.headers["mcp-session-id"];
    if (req.method === "DELETE") { sessions.delete(sid); res.writeHead(200).end(); return; }
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      let msg;
      try { msg = JSON.parse(body); } catch { res.writeHead(400).end(); return; }
      const headers = { "Content-Type": "application/json" };
      if (msg.method === "initialize") { const s = randomUUID(); sessions.add(s); headers["Mcp-Session-Id"] = s; }
      else if (sid && !sessions.has(sid)) { res.writeHead(404, headers).end(JSON.stringify({ jsonrpc: "2.0", id: msg.id ?? null, error: { code: -32001, message: "Session not found" } })); return; }
      const r = await handle(msg);
      if (!r) { res.writeHead(202).end(); return; }
      res.writeHead(200, headers).end(JSON.stringify(r));
    });
  }).listen(port, "127.0.0.1", () => console.error(`rawecho listening on http://127.0.0.1:${port}/mcp`));
}
