// The admin page: renders the overview and catalog events of /admin/events. Every value that
// comes from an upstream or a host is set as text (textContent), never parsed as markup.
"use strict";

const $ = (id) => document.getElementById(id);

// How an upstream signs in, its grants and, per principal, the connections open.
function authSummary(u) {
  const parts = [u.auth];
  if (u.grants != null) parts.push(`${u.grants} grant(s)`);
  if (u.connections != null) parts.push(`${u.connections} member connection(s)`);
  return parts.join(", ");
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function duration(secs) {
  if (secs < 60) return `${secs}s`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m ${secs % 60}s`;
  const h = Math.floor(secs / 3600);
  return h < 48 ? `${h}h ${Math.floor((secs % 3600) / 60)}m` : `${Math.floor(h / 24)}d ${h % 24}h`;
}

function cell(value, cls) {
  return el("td", cls ? { class: cls } : null, value ?? "");
}

function badge(state) {
  return el("span", { class: "badge", "data-state": state }, state);
}

function stat(label, value) {
  return el("div", { class: "stat" }, el("b", null, value), label);
}

function renderOverview(doc) {
  $("version").textContent = `${doc.server.name} ${doc.server.version}`;
  $("uptime").textContent = `up ${duration(doc.uptime_secs)}`;
  $("summary").replaceChildren(
    stat("upstreams", doc.upstreams.length),
    stat("sessions", doc.sessions),
    stat("calls in flight", doc.calls_in_flight),
    stat("listen streams", doc.listen_streams),
    stat("calls waiting for input", doc.calls_waiting_for_input),
  );
  $("upstreams").tBodies[0].replaceChildren(
    ...doc.upstreams.map((u) =>
      el(
        "tr",
        { "data-upstream": u.name },
        cell(u.name),
        el(
          "td",
          null,
          badge(u.phase),
          el("span", { class: "desc" }, duration(u.for_secs)),
          u.auth ? el("span", { class: "desc" }, authSummary(u)) : null,
        ),
        cell(u.era ?? "—"),
        cell(u.transport),
        cell(u.restarts, "num"),
        cell(u.tools, "num"),
        cell(u.prompts, "num"),
        cell(u.resources + u.resourceTemplates, "num"),
        cell(u.last_error ?? "", "error"),
      ),
    ),
  );
  const waiting = doc.signing_in ?? [];
  $("signing-in-section").hidden = waiting.length === 0;
  $("signing-in").replaceChildren(
    ...waiting.map((w) =>
      el(
        "li",
        null,
        `${w.principal} → ${w.server} (${duration(w.for_secs)}): `,
        /^https?:\/\//.test(w.url)
          ? el("a", { href: w.url, rel: "noreferrer", target: "_blank" }, "sign-in link")
          : el("code", null, w.url),
      ),
    ),
  );
  renderDrifts(doc.pin_drifts ?? []);
  const sessions = doc.session_rows;
  $("no-sessions").hidden = sessions.length > 0;
  $("sessions").hidden = sessions.length === 0;
  $("sessions").tBodies[0].replaceChildren(
    ...sessions.map((s) =>
      el(
        "tr",
        null,
        el("td", null, el("code", null, s.log_id)),
        cell(s.client ?? "—"),
        cell(s.era),
        cell(s.protocol_version),
        cell(s.principal ?? "—"),
        cell(s.profile ?? "main"),
        cell(duration(s.age_secs)),
        cell(duration(s.idle_secs)),
        cell(s.in_flight, "num"),
      ),
    ),
  );
  const errors = doc.recent_errors;
  $("no-errors").hidden = errors.length > 0;
  $("errors").replaceChildren(
    ...errors.map((e) =>
      el(
        "li",
        null,
        el("time", { datetime: new Date(e.at_ms).toISOString() }, new Date(e.at_ms).toLocaleTimeString()),
        el("b", null, e.source),
        ": ",
        el("span", { class: "error" }, e.message),
      ),
    ),
  );
}

// Which <details> are open, so a catalog update keeps what the reader unfolded.
function openKeys() {
  return new Set([...document.querySelectorAll("#catalog details[open]")].map((d) => d.dataset.key));
}

function item(kind, server, entry, open) {
  const name = entry.name ?? entry.uri ?? entry.uriTemplate ?? "?";
  const key = `${server}/${kind}/${name}`;
  const body = {
    tools: () => ({ input: entry.inputSchema, output: entry.outputSchema }),
    prompts: () => ({ arguments: entry.arguments }),
    resources: () => ({ uri: entry.uri, mimeType: entry.mimeType }),
    resource_templates: () => ({ uriTemplate: entry.uriTemplate, mimeType: entry.mimeType }),
  }[kind]();
  const shown = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
  const details = el(
    "details",
    { class: "item", "data-key": key, "data-name": name },
    el("summary", null, el("code", null, name), el("span", { class: "desc" }, entry.description ?? entry.title ?? "")),
    el("pre", { class: "schema" }, JSON.stringify(kind === "tools" ? shown.input ?? {} : shown, null, 2)),
  );
  if (kind === "tools" && shown.output) {
    details.append(el("div", { class: "desc" }, "output schema"), el("pre", { class: "schema" }, JSON.stringify(shown.output, null, 2)));
  }
  details.open = open.has(key);
  return details;
}

function renderCatalog(view) {
  const open = openKeys();
  const kinds = [
    ["tools", "Tools"],
    ["prompts", "Prompts"],
    ["resources", "Resources"],
    ["resource_templates", "Resource templates"],
  ];
  $("catalog").replaceChildren(
    ...view.servers.map((server) => {
      const key = `${server.name}`;
      const counts = kinds.map(([k, label]) => `${server[k].length} ${label.toLowerCase()}`).join(", ");
      const box = el(
        "details",
        { class: "server", "data-key": key, "data-server": server.name },
        el("summary", null, server.name, el("span", { class: "desc" }, counts)),
      );
      for (const [kind, label] of kinds) {
        if (server[kind].length === 0) continue;
        box.append(el("h3", null, label), ...server[kind].map((entry) => item(kind, server.name, entry, open)));
      }
      box.open = open.has(key);
      return box;
    }),
  );
}

// Tools whose definition drifted from its pin, each with its diff and an approve button
// (POST /pins/approve); the next overview shows what is left.
function renderDrifts(drifts) {
  $("drifts-section").hidden = drifts.length === 0;
  $("drifts").replaceChildren(
    ...drifts.map((d) => {
      const approve = el("button", { type: "button" }, `approve ${d.server}/${d.tool}`);
      const outcome = el("span", { class: "error" });
      approve.addEventListener("click", async () => {
        approve.disabled = true;
        try {
          const res = await fetch("/pins/approve", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ server: d.server, tool: d.tool }),
          });
          const body = await res.json();
          outcome.textContent = res.ok ? "approved" : body.error ?? `HTTP ${res.status}`;
        } catch (err) {
          outcome.textContent = String(err);
        }
        approve.disabled = false;
      });
      return el(
        "div",
        { class: "drift" },
        el("h3", null, `${d.server}/${d.tool}: ${d.changed.join(", ")} changed`),
        el("pre", null, d.diff),
        approve,
        " ",
        outcome,
      );
    }),
  );
}

function connect() {
  const live = $("live");
  const source = new EventSource("/admin/events");
  source.addEventListener("open", () => {
    live.dataset.state = "live";
    live.textContent = "live";
  });
  source.addEventListener("error", () => {
    live.dataset.state = "offline";
    live.textContent = "reconnecting";
  });
  source.addEventListener("overview", (event) => renderOverview(JSON.parse(event.data)));
  source.addEventListener("catalog", (event) => renderCatalog(JSON.parse(event.data)));
}

connect();
