#!/usr/bin/env node
// mcpmux's conformance target: an MCP server, written for this project on the TypeScript SDK's low-level `Server`
// (@modelcontextprotocol/sdk 1.32.2), that exposes exactly the names the official conformance suite
// (@modelcontextprotocol/conformance 0.1.16, `server` side) expects. It lets us run that suite against mcpmux
// with this target behind it (stdio or HTTP upstream), and directly against the target as a baseline.
// Plain ESM JavaScript; runs on node 22 (what we use) and node 20.
//
// Usage:
//   node target.mjs stdio           MCP over stdin/stdout; logs go to stderr only; exits on stdin EOF
//   node target.mjs http PORT       Streamable HTTP at http://127.0.0.1:PORT/mcp (binds 127.0.0.1 only);
//                                   prints "conformance-target listening on http://127.0.0.1:PORT/mcp" to stderr
// Both exit 0 on SIGTERM / SIGINT.
//
// HTTP mode:
//   - stateful: one transport + Server per session (random UUID session id); POST, GET (standalone SSE stream)
//     and DELETE; unknown session id -> 404, missing session id on a non-initialize request -> 400.
//   - an in-memory event store per session, SSE priming events with `retry: RETRY_MS`, so SSE resumability
//     (GET + Last-Event-ID) works, as test_reconnection / server-sse-polling need.
//   - DNS-rebinding protection: Host must be localhost / 127.0.0.1 / [::1] (any port) and Origin, if present,
//     http(s):// one of those (any port); otherwise 403 with a JSON-RPC error body.
//   - The session's negotiated protocol version is authoritative: a request whose MCP-Protocol-Version header
//     names another supported version is handled as the negotiated one (the suite's raw SSE-polling requests say
//     2025-03-26 on a 2025-11-25 session; the SDK would then skip priming events and stream closing).
//     Set CONFORMANCE_TARGET_STRICT_VERSION=1 to hand the header to the SDK unchanged.
//   - Sessions idle (no request) for CONFORMANCE_TARGET_IDLE_MS (default 30 min) are closed: the suite never
//     sends DELETE.
//
// The SDK is found by tests/clients/sdk_require.mjs (env MCPMUX_PEERS_NPM, else <repo>/target/peers/npm/node_modules).
//
// The tools, resources and prompts themselves are in target_server.mjs.

import { randomUUID } from "node:crypto";
import http from "node:http";
import { createTargetServer } from "./target_server.mjs";
import { sdkRequire } from "../clients/sdk_require.mjs";

const RETRY_MS = 500;
const MAX_BODY = 4 * 1024 * 1024;
const MAX_EVENTS_PER_SESSION = 10_000;
const IDLE_MS = Number(process.env.CONFORMANCE_TARGET_IDLE_MS) || 30 * 60 * 1000;
const STRICT_VERSION = process.env.CONFORMANCE_TARGET_STRICT_VERSION === "1";
const LOCAL_HOSTNAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

const log = (msg) => process.stderr.write(`[conformance-target] ${msg}\n`);

// ------------------------------------------------------------------ SDK loading

function loadSdk() {
  const { req } = sdkRequire();
  return {
    ...req("@modelcontextprotocol/sdk/server/index.js"),
    ...req("@modelcontextprotocol/sdk/server/stdio.js"),
    ...req("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
    types: req("@modelcontextprotocol/sdk/types.js"),
  };
}

// ------------------------------------------------------------------ shutdown

const cleanups = [];
let stopping = false;

async function shutdown(why, code = 0) {
  if (stopping) return;
  stopping = true;
  log(`shutting down (${why})`);
  setTimeout(() => process.exit(code), 2000).unref();
  for (const fn of cleanups) {
    try {
      await fn();
    } catch (e) {
      log(`cleanup failed: ${e?.message ?? e}`);
    }
  }
  process.exit(code);
}

process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));

// ------------------------------------------------------------------ stdio mode

async function runStdio(sdk) {
  const server = createTargetServer(sdk, { log });
  const transport = new sdk.StdioServerTransport();
  server.onerror = (e) => log(`error: ${e?.message ?? e}`);
  server.onclose = () => shutdown("transport closed");
  cleanups.push(() => server.close());
  process.stdin.on("end", () => shutdown("stdin EOF"));
  await server.connect(transport);
  log("serving MCP on stdio");
}

// ------------------------------------------------------------------ HTTP mode: event store

// Events of one session, in arrival order. Event ids are "<streamId>.<seq>" so they name their stream.
class MemoryEventStore {
  #events = new Map(); // eventId -> { streamId, message }
  #seq = 0;

  async storeEvent(streamId, message) {
    const id = `${streamId}.${++this.#seq}`;
    this.#events.set(id, { streamId, message });
    if (this.#events.size > MAX_EVENTS_PER_SESSION) this.#events.delete(this.#events.keys().next().value);
    return id;
  }

  async getStreamIdForEventId(eventId) {
    return this.#events.get(eventId)?.streamId;
  }

  // Replays the messages stored on lastEventId's stream after it. Priming events (stored as `{}`) are skipped.
  async replayEventsAfter(lastEventId, { send }) {
    const streamId = this.#events.get(lastEventId)?.streamId;
    if (streamId === undefined) return "";
    let after = false;
    for (const [id, ev] of this.#events) {
      if (id === lastEventId) after = true;
      else if (after && ev.streamId === streamId && ev.message?.jsonrpc) await send(id, ev.message);
    }
    return streamId;
  }
}

// ------------------------------------------------------------------ HTTP mode: helpers

function sendJsonError(res, status, code, message, headers = {}) {
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(body);
}

function isLocalHost(host) {
  if (!host) return false;
  try {
    const u = new URL(`http://${host}`);
    return LOCAL_HOSTNAMES.has(u.hostname) && u.host === host.toLowerCase();
  } catch {
    return false;
  }
}

function isLocalOrigin(origin) {
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && LOCAL_HOSTNAMES.has(u.hostname);
  } catch {
    return false;
  }
}

// Returns an error message when the request fails the DNS-rebinding checks.
function rebindingError(req) {
  const host = req.headers.host;
  if (!isLocalHost(host)) return `Forbidden: invalid Host header: ${host ?? "(none)"}`;
  const origin = req.headers.origin;
  if (origin !== undefined && !isLocalOrigin(origin)) return `Forbidden: invalid Origin header: ${origin}`;
  return null;
}

function readBody(req) {
  return new Promise((resolveBody, reject) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(Object.assign(new Error("body too large"), { status: 413 }));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolveBody(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function parseJson(buf) {
  try {
    return JSON.parse(buf.toString("utf8"));
  } catch {
    return undefined;
  }
}

function findInitialize(msg) {
  const msgs = Array.isArray(msg) ? msg : msg === undefined ? [] : [msg];
  return msgs.find((m) => m && typeof m === "object" && m.method === "initialize");
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"]);

// node request -> web Request for the SDK's web-standard transport.
function toWebRequest(req, body, session, types) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    if (!HOP_BY_HOP.has(name.toLowerCase())) headers.append(name, req.rawHeaders[i + 1]);
  }
  const sent = headers.get("mcp-protocol-version");
  const negotiated = session.protocolVersion;
  if (!STRICT_VERSION && sent && negotiated && sent !== negotiated && types.SUPPORTED_PROTOCOL_VERSIONS.includes(sent)) {
    headers.set("mcp-protocol-version", negotiated);
  }
  return new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers,
    body: req.method === "POST" ? body : undefined,
  });
}

// web Response -> node response, streaming the body (SSE) as it is produced.
async function writeWebResponse(response, res) {
  const headers = {};
  response.headers.forEach((v, k) => (headers[k] = v));
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  res.on("close", () => reader.cancel().catch(() => {}));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // the client went away, or the stream was cancelled
  }
  res.end();
}

// ------------------------------------------------------------------ HTTP mode: sessions and routing

async function runHttp(sdk, port) {
  const sessions = new Map(); // session id -> { server, transport, protocolVersion, lastSeen }

  async function newSession(init) {
    const requested = init.params?.protocolVersion;
    const session = {
      protocolVersion: sdk.types.SUPPORTED_PROTOCOL_VERSIONS.includes(requested)
        ? requested
        : sdk.types.LATEST_PROTOCOL_VERSION,
      lastSeen: Date.now(),
    };
    session.server = createTargetServer(sdk, { log });
    session.transport = new sdk.WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: RETRY_MS,
      onsessioninitialized: (sid) => {
        sessions.set(sid, session);
        log(`session ${sid} opened (protocol ${session.protocolVersion}); ${sessions.size} open`);
      },
    });
    session.server.onerror = (e) => log(`error: ${e?.message ?? e}`);
    await session.server.connect(session.transport);
    session.server.onclose = () => {
      const sid = session.transport.sessionId;
      if (sid && sessions.delete(sid) && !stopping) log(`session ${sid} closed; ${sessions.size} open`);
    };
    return session;
  }

  async function handle(req, res) {
    const path = new URL(req.url, "http://localhost").pathname;
    if (path !== "/mcp") return sendJsonError(res, 404, -32000, `Not found: ${path}`);
    const bad = rebindingError(req);
    if (bad) {
      log(`403 ${req.method}: ${bad}`);
      return sendJsonError(res, 403, -32000, bad);
    }
    if (!["GET", "POST", "DELETE"].includes(req.method)) {
      return sendJsonError(res, 405, -32000, "Method not allowed.", { Allow: "GET, POST, DELETE" });
    }
    let body;
    if (req.method === "POST") {
      try {
        body = await readBody(req);
      } catch (e) {
        return sendJsonError(res, e.status ?? 400, -32000, `Bad Request: ${e.message}`);
      }
    }
    const sid = req.headers["mcp-session-id"];
    let session;
    if (sid !== undefined) {
      session = sessions.get(sid);
      if (!session) return sendJsonError(res, 404, -32001, "Session not found");
    } else {
      const msg = req.method === "POST" ? parseJson(body) : undefined;
      if (req.method === "POST" && msg === undefined) return sendJsonError(res, 400, -32700, "Parse error: Invalid JSON");
      const init = findInitialize(msg);
      if (!init) return sendJsonError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
      session = await newSession(init);
    }
    session.lastSeen = Date.now();
    const response = await session.transport.handleRequest(toWebRequest(req, body, session, sdk.types));
    await writeWebResponse(response, res);
  }

  const httpServer = http.createServer({ noDelay: true }, (req, res) => {
    handle(req, res).catch((e) => {
      log(`request failed: ${e?.stack ?? e}`);
      if (!res.headersSent) sendJsonError(res, 500, -32603, "Internal server error");
      else res.end();
    });
  });

  const reaper = setInterval(() => {
    const now = Date.now();
    for (const [sid, s] of sessions) {
      if (now - s.lastSeen > IDLE_MS) {
        log(`session ${sid} idle for ${Math.round((now - s.lastSeen) / 1000)} s: closing`);
        s.transport.close().catch(() => {});
      }
    }
  }, Math.min(IDLE_MS, 60_000));
  reaper.unref();

  cleanups.push(async () => {
    clearInterval(reaper);
    for (const s of [...sessions.values()]) await s.transport.close().catch(() => {});
    httpServer.closeAllConnections?.();
    await new Promise((r) => httpServer.close(() => r()));
  });

  await new Promise((resolveListen, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(port, "127.0.0.1", resolveListen);
  });
  process.stderr.write(`conformance-target listening on http://127.0.0.1:${port}/mcp\n`);
}

// ------------------------------------------------------------------ main

function usage() {
  process.stderr.write("usage: node target.mjs stdio | node target.mjs http PORT\n");
  process.exit(2);
}

const [mode, portArg] = process.argv.slice(2);
let sdk;
try {
  sdk = loadSdk();
} catch (e) {
  log(e.message);
  process.exit(1);
}
if (mode === "stdio") {
  await runStdio(sdk);
} else if (mode === "http") {
  const port = Number(portArg);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) usage();
  try {
    await runHttp(sdk, port);
  } catch (e) {
    log(`cannot listen on 127.0.0.1:${port}: ${e.message}`);
    process.exit(1);
  }
} else {
  usage();
}
