#!/usr/bin/env node
// MCP test client built on the TypeScript SDK (@modelcontextprotocol/sdk 1.32.2), used by mcpmux's
// integration tests. Plain ESM JavaScript; runs on node >= 18.
//
// Usage:
//   node ts_client.mjs URL SCENARIO [ARGS...] [--prefix PREFIX] [--timeout SECS] [--no-roots]
//                      [--resource-prefix P]
//
// --resource-prefix P (everything only): read the first listed resource whose URI starts with P
//            (default: the first one listed).
// --no-roots (everything only): still call get-roots-list, but do not require the roots round trip
//            (a shared upstream caches roots per its own session, so behind a gateway with shared
//            isolation they come back empty).
//
// Scenarios:
//   smoke          list tools (all pages), call {PREFIX}echo {"message":"hi"}
//   everything     sampling / elicitation / roots / progress / prompts / resources / logging
//                  against server-everything (directly, or behind the gateway with --prefix everything__)
//   concurrent N   N concurrent sessions, 20 echo calls each with per-session unique messages
//   soak N         N sessions calling in a loop until --stop-file appears or --duration passes, as
//                  py_client.py's soak (same options and the same JSON: per session its calls
//                  ok/failed, initializes sent, session ids used, when tools/list_changed came;
//                  every failure with start, end (Unix seconds) and error)
//
// --cancel-prefix P (everything only): also a cancellation round trip through the in-repo test
//            server exposed with prefix P (P+"slow" cancelled after 0.5 s must reach the upstream:
//            P+"cancellations" lists one more id; then P+"echo" must answer).
//   resubscribe URI RESOURCE MARKER
//                  against the test server behind mcpmux (--prefix t__): subscribe to URI (as
//                  mcpmux exposes it), set the log level to warning, write the file MARKER (the
//                  test then moves the session to another replica, breaking every connection),
//                  then call {PREFIX}touch {"uri": RESOURCE} until a resources/updated for URI
//                  arrives (the GET stream came back and the subscription was re-made), then
//                  {PREFIX}log at info and at error: only the error messages may arrive.
//
// The SDK is found by ./sdk_require.mjs (env MCPMUX_PEERS_NPM, else <repo>/target/peers/npm/node_modules).
//
// Human-readable progress goes to stderr. stdout carries exactly ONE line: a JSON object with
// "ok", "scenario", "error" (on failure) and what was observed. Exit 0 on success, 1 on a failed
// check, 2 on a usage error.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { sdkRequire } from "./sdk_require.mjs";

const SAMPLED_TEXT = "sampled-by-typescript";
const ROOT_URI = "file:///tmp/mcpmux-test";
const ELICIT_NAME = "mcpmux-ts-elicit";

const log = (msg) => process.stderr.write(`[ts_client] ${msg}\n`);

class CheckFailed extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}

// ------------------------------------------------------------------ SDK loading

function loadSdk() {
  const { nm, req } = sdkRequire();
  const sdkVersion = JSON.parse(
    readFileSync(join(nm, "@modelcontextprotocol", "sdk", "package.json"), "utf8"),
  ).version;
  return {
    nm,
    sdkVersion,
    ...req("@modelcontextprotocol/sdk/client/index.js"),
    ...req("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    types: req("@modelcontextprotocol/sdk/types.js"),
  };
}

// ------------------------------------------------------------------ helpers

function textOf(result) {
  return (result?.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("\n");
}

async function listAll(fn, key) {
  const out = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const page = await fn(cursor === undefined ? {} : { cursor });
    out.push(...page[key]);
    cursor = page.nextCursor;
    if (!cursor) return out;
  }
  throw new CheckFailed(`${key}/list: more than 100 pages (nextCursor never ends)`);
}

async function callOk(client, name, args, options) {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  check(!r.isError, `tools/call ${name} returned isError: ${textOf(r).slice(0, 500)}`);
  return r;
}

function valueFor(name, s) {
  if ("default" in s) return s.default;
  if (Array.isArray(s.enum)) return s.enum[0];
  if (Array.isArray(s.oneOf)) return s.oneOf[0].const;
  switch (s.type) {
    case "array":
      if (Array.isArray(s.items?.enum)) return [s.items.enum[0]];
      if (Array.isArray(s.items?.anyOf)) return [s.items.anyOf[0].const];
      return [];
    case "boolean":
      return true;
    case "integer":
      return Math.ceil(s.minimum ?? 1);
    case "number":
      return s.minimum ?? 1;
  }
  switch (s.format) {
    case "email":
      return "tester@example.com";
    case "uri":
      return "https://example.com/";
    case "date":
      return "2000-01-01";
    case "date-time":
      return "2000-01-01T00:00:00Z";
  }
  return name === "name" ? ELICIT_NAME : `value-${name}`;
}

async function connect(sdk, url, capabilities = {}) {
  const client = new sdk.Client({ name: "mcpmux-ts-test-client", version: "0.1.0" }, { capabilities });
  const transport = new sdk.StreamableHTTPClientTransport(new URL(url));
  return { client, transport };
}

function connInfo(client) {
  return {
    protocol_version: client.transport?.protocolVersion ?? null,
    server_name: client.getServerVersion()?.name ?? null,
  };
}

// ------------------------------------------------------------------ scenarios

async function smoke(sdk, url, prefix, _args, obs) {
  const { client, transport } = await connect(sdk, url);
  await client.connect(transport);
  try {
    Object.assign(obs, connInfo(client));
    const names = (await listAll((p) => client.listTools(p), "tools")).map((t) => t.name);
    log(`${names.length} tools: ${names.join(", ")}`);
    obs.tools = names;
    const echo = `${prefix}echo`;
    check(names.includes(echo), `tool ${echo} not listed; got ${JSON.stringify(names)}`);
    const r = await callOk(client, echo, { message: "hi" });
    obs.echo_text = textOf(r);
    check(obs.echo_text.includes("hi"), `${echo} reply does not contain 'hi': ${obs.echo_text}`);
  } finally {
    await client.close();
  }
}

async function everything(sdk, url, prefix, _args, obs) {
  const T = sdk.types;
  const seen = { sampling: 0, elicitation: 0, roots: 0, logs: [] };
  const { client, transport } = await connect(sdk, url, {
    sampling: {},
    elicitation: { form: {} },
    roots: { listChanged: true },
  });
  client.setRequestHandler(T.CreateMessageRequestSchema, async () => {
    seen.sampling++;
    return {
      role: "assistant",
      content: { type: "text", text: SAMPLED_TEXT },
      model: "mcpmux-test-model",
      stopReason: "endTurn",
    };
  });
  client.setRequestHandler(T.ElicitRequestSchema, async (req) => {
    seen.elicitation++;
    const props = req.params?.requestedSchema?.properties ?? {};
    const content = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, valueFor(k, v)]));
    return { action: "accept", content };
  });
  client.setRequestHandler(T.ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [{ uri: ROOT_URI, name: "mcpmux-test" }] };
  });
  client.setNotificationHandler(T.LoggingMessageNotificationSchema, (n) => {
    const d = n.params.data;
    seen.logs.push({ level: n.params.level, data: typeof d === "string" ? d : JSON.stringify(d) });
  });
  await client.connect(transport);
  try {
    Object.assign(obs, connInfo(client));

    // Conditional tools are registered after notifications/initialized: poll briefly.
    const required = [
      "echo", "get-sum", "trigger-long-running-operation",
      "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list",
    ].map((n) => prefix + n);
    let names = [];
    let missing = [];
    const deadline = Date.now() + 5000;
    for (;;) {
      names = (await listAll((p) => client.listTools(p), "tools")).map((t) => t.name);
      missing = required.filter((n) => !names.includes(n));
      if (missing.length === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    obs.tools_count = names.length;
    obs.tools = names;
    check(missing.length === 0, `tools missing from tools/list: ${missing}; got ${JSON.stringify(names)}`);

    await client.setLoggingLevel("debug");
    obs.set_level = "ok";

    let r = await callOk(client, `${prefix}trigger-sampling-request`, { prompt: "say something", maxTokens: 20 });
    let t = textOf(r);
    obs.sampling_calls = seen.sampling;
    obs.sampling_result_has_text = t.includes(SAMPLED_TEXT);
    check(seen.sampling >= 1, "sampling handler was never called");
    check(t.includes(SAMPLED_TEXT), `sampled text not in tool result: ${t.slice(0, 400)}`);

    r = await callOk(client, `${prefix}trigger-elicitation-request`, {});
    t = textOf(r);
    obs.elicitation_calls = seen.elicitation;
    obs.elicitation_accepted = t.includes("User provided the requested information") && t.includes(ELICIT_NAME);
    check(seen.elicitation >= 1, "elicitation handler was never called");
    check(obs.elicitation_accepted, `elicitation result does not show accepted content: ${t.slice(0, 400)}`);

    r = await callOk(client, `${prefix}get-roots-list`, {});
    t = textOf(r);
    obs.roots_calls = seen.roots;
    obs.roots_listed = t.includes(ROOT_URI);
    if (obs.no_roots) {
      log(`--no-roots: roots round trip not required (handler calls: ${seen.roots})`);
    } else {
      check(seen.roots >= 1, "roots handler was never called");
      check(obs.roots_listed, `root uri not in get-roots-list result: ${t.slice(0, 400)}`);
    }

    const progress = [];
    const t0 = Date.now();
    r = await callOk(
      client,
      `${prefix}trigger-long-running-operation`,
      { duration: 1, steps: 3 },
      { onprogress: (p) => progress.push([p.progress, p.total ?? null]) },
    );
    obs.long_running_ms = Date.now() - t0;
    obs.progress = progress;
    check(progress.length >= 3, `expected >=3 progress notifications, got ${JSON.stringify(progress)}`);
    check(textOf(r).includes("completed"), `long-running op result unexpected: ${textOf(r)}`);

    if (obs.cancel_prefix) await cancelRoundTrip(client, obs.cancel_prefix, obs);

    r = await callOk(client, `${prefix}get-sum`, { a: 2, b: 40 });
    obs.sum_text = textOf(r);
    check(obs.sum_text.includes("42"), `get-sum result lacks 42: ${obs.sum_text}`);

    const prompts = (await listAll((p) => client.listPrompts(p), "prompts")).map((p) => p.name);
    obs.prompts = prompts;
    const simple = `${prefix}simple-prompt`;
    check(prompts.includes(simple), `prompt ${simple} not listed; got ${JSON.stringify(prompts)}`);
    const pr = await client.getPrompt({ name: simple });
    check(pr.messages?.length >= 1, "simple-prompt returned no messages");
    obs.prompt_text = pr.messages[0].content?.text ?? null;

    const resources = await listAll((p) => client.listResources(p), "resources");
    obs.resources_count = resources.length;
    check(resources.length > 0, "resources/list returned nothing");
    const wanted = obs.resource_prefix ?? "";
    const matching = resources.map((r) => r.uri).filter((u) => u.startsWith(wanted));
    check(matching.length > 0, `no listed resource URI starts with ${JSON.stringify(wanted)}: ${JSON.stringify(resources.map((r) => r.uri))}`);
    const uri = matching[0];
    obs.resource_uri = uri;
    const rr = await client.readResource({ uri });
    check(rr.contents?.length >= 1, `resources/read ${uri} returned no contents`);
    obs.resource_read_uri = rr.contents[0].uri;
    obs.resource_text_len = typeof rr.contents[0].text === "string" ? rr.contents[0].text.length : null;

    await new Promise((res) => setTimeout(res, 200));
    obs.logs = seen.logs;
  } finally {
    await client.close();
  }
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function cancellations(client, prefix) {
  return JSON.parse(textOf(await callOk(client, `${prefix}cancellations`, {})));
}

// Cancel a 30 s call after 0.5 s; the upstream must see the cancellation, then a call works.
async function cancelRoundTrip(client, prefix, obs) {
  const before = (await cancellations(client, prefix)).length;
  const t0 = Date.now();
  const abort = new AbortController();
  const call = client.callTool({ name: `${prefix}slow`, arguments: { ms: 30000 } }, undefined, {
    signal: abort.signal,
  });
  await sleep(500);
  abort.abort("cancelled by the test client");
  const outcome = await call.then(() => "answered", () => "rejected");
  check(outcome === "rejected", `${prefix}slow answered although it was cancelled`);
  let seen = before;
  const deadline = Date.now() + 10000;
  while (seen <= before && Date.now() < deadline) {
    await sleep(200);
    seen = (await cancellations(client, prefix)).length;
  }
  obs.cancel_reached_upstream = seen > before;
  obs.cancel_ms = Date.now() - t0;
  check(seen > before, `the cancellation did not reach the upstream within 10 s (${before} -> ${seen})`);
  const r = await callOk(client, `${prefix}echo`, { message: "after cancel" });
  obs.after_cancel_text = textOf(r);
  check(obs.after_cancel_text.includes("after cancel"), `call after the cancellation: ${obs.after_cancel_text}`);
}

// N sessions calling in a loop (see the usage at the top).
async function soak(sdk, url, prefix, args, obs, o) {
  check(args.length === 1 && /^[1-9][0-9]*$/.test(args[0]), "usage: soak N (N > 0)");
  check(o.stopFile || o.duration > 0, "soak needs --stop-file or --duration");
  const { existsSync, writeFileSync } = await import("node:fs");
  const n = Number(args[0]);
  const T = sdk.types;
  const echo = `${prefix}echo`;
  const longTool = `${prefix}trigger-long-running-operation`;
  const tEnd = o.duration > 0 ? Date.now() + o.duration * 1000 : null;
  const stopping = () => (tEnd !== null && Date.now() > tEnd) || (o.stopFile && existsSync(o.stopFile));
  const failures = [];
  const parked = new Set();

  const oneCall = async (client, i, k, tool, args, expect, onprogress) => {
    const started = Date.now() / 1000;
    let error;
    try {
      const r = await client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: o.callTimeout * 1000,
        ...(onprogress ? { onprogress } : {}),
      });
      const t = textOf(r);
      if (!r.isError && t.includes(expect)) return true;
      error = `unexpected answer: ${t.slice(0, 300)}`;
    } catch (e) {
      const msg = `${e?.constructor?.name ?? "Error"}: ${e?.message ?? e}`;
      error = /timed out|timeout/i.test(msg) ? `hang: no answer within ${o.callTimeout} s (${msg})` : msg;
    }
    failures.push({ session: i, call: k, tool, started, ended: Date.now() / 1000, error });
    log(`session ${i} call ${k} (${tool}) failed: ${error}`);
    return false;
  };

  const session = async (i) => {
    const trace = { initializes: 0, ids: new Set() };
    const tracingFetch = async (input, init) => {
      const headers = new Headers(init?.headers ?? {});
      const sid = headers.get("mcp-session-id");
      if (sid) trace.ids.add(sid);
      if (init?.method === "POST" && typeof init.body === "string" && init.body.includes('"initialize"')) {
        try {
          const body = JSON.parse(init.body);
          for (const m of Array.isArray(body) ? body : [body]) if (m?.method === "initialize") trace.initializes++;
        } catch {}
      }
      return fetch(input, init);
    };
    const client = new sdk.Client({ name: "mcpmux-ts-soak", version: "0.1.0" }, { capabilities: {} });
    const changed = [];
    client.setNotificationHandler(T.ToolListChangedNotificationSchema, () => {
      changed.push(Date.now() / 1000);
    });
    const transport = new sdk.StreamableHTTPClientTransport(new URL(url), { fetch: tracingFetch });
    await client.connect(transport);
    let ok = 0;
    let failed = 0;
    try {
      for (let k = 1; !stopping(); k++) {
        let done;
        if (o.parkFile && !parked.has(i) && existsSync(o.parkFile)) {
          const secs = o.parkSecs;
          const first = () => {
            if (parked.has(i)) return;
            parked.add(i);
            if (parked.size === n && o.parkedFile) {
              writeFileSync(o.parkedFile, JSON.stringify({ parked: n, at: Date.now() / 1000 }));
            }
          };
          done = await oneCall(client, i, k, longTool, { duration: secs, steps: secs }, "completed", first);
          parked.add(i);
        } else if (k % 3 === 0) {
          const secs = o.longSecs;
          done = await oneCall(client, i, k, longTool, { duration: secs, steps: secs }, "completed");
        } else {
          const msg = `ts-${i}-${k}`;
          done = await oneCall(client, i, k, echo, { message: msg }, `Echo: ${msg}`);
        }
        if (done) ok++;
        else failed++;
        await sleep(50);
      }
      return {
        session: i, ok, failed, initializes: trace.initializes, session_ids: trace.ids.size,
        list_changed_at: changed, protocol_version: transport.protocolVersion ?? null,
      };
    } finally {
      await client.close();
    }
  };

  const results = await Promise.all(Array.from({ length: n }, (_, i) => session(i)));
  obs.sessions = results;
  obs.ok_calls = results.reduce((a, r) => a + r.ok, 0);
  obs.failed_calls = results.reduce((a, r) => a + r.failed, 0);
  obs.failures = failures;
  obs.protocol_version = results[0]?.protocol_version ?? null;
}

async function concurrent(sdk, url, prefix, args, obs) {
  check(args.length === 1 && /^[1-9][0-9]*$/.test(args[0]), "usage: concurrent N (N > 0)");
  const n = Number(args[0]);
  const calls = 20;
  const echo = `${prefix}echo`;
  const runId = randomUUID().slice(0, 8);
  const one = async (i) => {
    const { client, transport } = await connect(sdk, url);
    await client.connect(transport);
    let ok = 0;
    try {
      for (let j = 0; j < calls; j++) {
        const msg = `ts-${runId}-s${i}-c${j}`;
        const r = await client.callTool({ name: echo, arguments: { message: msg } });
        const t = textOf(r);
        check(!r.isError, `session ${i} call ${j}: isError: ${t}`);
        check(t === `Echo: ${msg}`, `session ${i} call ${j}: reply ${JSON.stringify(t)} does not match ${msg}`);
        ok++;
      }
      return { ok, protocol_version: client.transport?.protocolVersion ?? null };
    } finally {
      await client.close();
    }
  };
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
  obs.sessions = n;
  obs.calls_per_session = calls;
  obs.ok_calls = results.reduce((a, r) => a + r.ok, 0);
  obs.elapsed_ms = Date.now() - t0;
  obs.protocol_version = results[0]?.protocol_version ?? null;
  check(obs.ok_calls === n * calls, `only ${obs.ok_calls} of ${n * calls} calls succeeded`);
}

async function resubscribe(sdk, url, prefix, args, obs) {
  const [uri, resource, marker] = args;
  check(uri && resource && marker, "resubscribe needs URI RESOURCE MARKER");
  const T = sdk.types;
  const seen = { updated: 0, logs: [] };
  const { client, transport } = await connect(sdk, url);
  client.setNotificationHandler(T.ResourceUpdatedNotificationSchema, (n) => {
    if (n.params.uri === uri) seen.updated++;
  });
  client.setNotificationHandler(T.LoggingMessageNotificationSchema, (n) => {
    seen.logs.push(n.params.level);
  });
  await client.connect(transport);
  try {
    Object.assign(obs, connInfo(client));
    await client.subscribeResource({ uri });
    await client.setLoggingLevel("warning");
    // The changes reach the GET stream as fresh event ids (priming events) right away.
    await new Promise((r) => setTimeout(r, 1000));
    writeFileSync(marker, "subscribed\n");
    let touches = 0;
    const deadline = Date.now() + 45000;
    while (seen.updated === 0) {
      check(Date.now() < deadline, `no resources/updated after ${touches} touches`);
      await new Promise((r) => setTimeout(r, 300));
      try {
        touches++;
        await client.callTool({ name: `${prefix}touch`, arguments: { uri: resource } });
      } catch (e) {
        log(`touch ${touches}: ${e?.message ?? e}`);
      }
    }
    obs.touches = touches;
    await callOk(client, `${prefix}log`, { count: 2, level: "info" });
    await callOk(client, `${prefix}log`, { count: 2, level: "error" });
    obs.logs = seen.logs;
    check(
      seen.logs.length === 2 && seen.logs.every((l) => l === "error"),
      `the log level did not come back: ${JSON.stringify(seen.logs)}`,
    );
  } finally {
    await client.close();
  }
}

const SCENARIOS = { smoke, everything, concurrent, soak, resubscribe };

// ------------------------------------------------------------------ main

function parseArgs(argv) {
  const pos = [];
  const opts = {
    prefix: "", timeout: 90, noRoots: false, resourcePrefix: "", cancelPrefix: "",
    stopFile: "", duration: 0, parkFile: "", parkedFile: "", longSecs: 2, parkSecs: 12, callTimeout: 30,
  };
  const valued = {
    "--cancel-prefix": "cancelPrefix", "--stop-file": "stopFile", "--duration": "duration",
    "--park-file": "parkFile", "--parked-file": "parkedFile", "--long-secs": "longSecs",
    "--park-secs": "parkSecs", "--call-timeout": "callTimeout",
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (valued[a]) {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      const v = argv[++i];
      opts[valued[a]] = typeof opts[valued[a]] === "number" ? Number(v) : v;
    } else if (a === "--no-roots") opts.noRoots = true;
    else if (a === "--resource-prefix") {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      opts.resourcePrefix = argv[++i];
    } else if (a.startsWith("--resource-prefix=")) opts.resourcePrefix = a.slice(18);
    else if (a === "--prefix" || a === "--timeout") {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      opts[a.slice(2)] = argv[++i];
    } else if (a.startsWith("--prefix=")) opts.prefix = a.slice(9);
    else if (a.startsWith("--timeout=")) opts.timeout = a.slice(10);
    else pos.push(a);
  }
  opts.timeout = Number(opts.timeout);
  if (pos.length < 2 || !SCENARIOS[pos[1]] || !(opts.timeout > 0)) {
    throw new Error(
      `usage: node ts_client.mjs URL {${Object.keys(SCENARIOS).join("|")}} [ARGS...] [--prefix PREFIX] [--timeout SECS] [--no-roots] [--resource-prefix P]`,
    );
  }
  return { url: pos[0], scenario: pos[1], args: pos.slice(2), ...opts };
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    log(e.message);
    process.exit(2);
  }
  const obs = { scenario: o.scenario, prefix: o.prefix, client: "typescript-sdk" };
  if (o.noRoots) obs.no_roots = true;
  if (o.resourcePrefix) obs.resource_prefix = o.resourcePrefix;
  if (o.cancelPrefix) obs.cancel_prefix = o.cancelPrefix;
  const t0 = Date.now();
  let code = 0;
  const finish = () => {
    obs.total_ms = Date.now() - t0;
    process.stdout.write(JSON.stringify(obs) + "\n", () => process.exit(code));
  };
  const timer = setTimeout(() => {
    code = 1;
    obs.ok = false;
    obs.error = "timeout";
    log(`FAILED: timeout after ${o.timeout} s`);
    finish();
  }, o.timeout * 1000);
  try {
    const sdk = loadSdk();
    obs.client = `typescript-sdk-${sdk.sdkVersion}`;
    await SCENARIOS[o.scenario](sdk, o.url, o.prefix, o.args, obs, o);
    obs.ok = true;
  } catch (e) {
    code = 1;
    obs.ok = false;
    obs.error = `${e?.constructor?.name ?? "Error"}: ${e?.message ?? e}`;
    log(`FAILED: ${obs.error}`);
    if (!(e instanceof CheckFailed)) log(e?.stack ?? String(e));
  }
  clearTimeout(timer);
  finish();
}

main();
