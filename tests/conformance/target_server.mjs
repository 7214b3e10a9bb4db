// The MCP feature set of mcpmux's conformance target (see target.mjs for what the target is and how to run it).
//
// createTargetServer(sdk) builds one low-level `Server` (TypeScript SDK 1.32.2) that exposes exactly the tool,
// resource, template and prompt names the official conformance suite (@modelcontextprotocol/conformance 0.1.16)
// calls, with the behaviour its server scenarios check. The transport side (stdio, Streamable HTTP) is in
// target.mjs; the HTTP mode builds one of these per session.

// 1x1 opaque red PNG (RGB, 8 bit), generated for this file.
const PNG_1X1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
// 16 samples of silence: RIFF/WAVE, PCM, mono, 8 kHz, 8 bit, generated for this file.
const WAV_SILENCE = "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA";

const LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
const RESOURCE_NOT_FOUND = -32002; // MCP's code for resources/read of an unknown URI
const TEMPLATE_RE = /^test:\/\/template\/([^/]+)\/data$/;
const JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ type: "text", text: t });
const noArgs = { type: "object", properties: {} };

// ------------------------------------------------------------------ catalogue (what the list calls return)

const TOOLS = [
  ["test_simple_text", "Returns a fixed text block"],
  ["test_image_content", "Returns one image/png content block"],
  ["test_audio_content", "Returns one audio/wav content block"],
  ["test_embedded_resource", "Returns an embedded text/plain resource"],
  ["test_multiple_content_types", "Returns text, image and an embedded JSON resource"],
  ["test_tool_with_logging", "Sends three notifications/message (info), 50 ms apart, then returns"],
  ["test_tool_with_progress", "Reports progress 0, 50, 100 of 100 on the request's progressToken"],
  ["test_error_handling", "Always returns a tool error (isError: true)"],
  ["test_elicitation_sep1034_defaults", "Elicits a form whose fields carry defaults (SEP-1034)"],
  ["test_elicitation_sep1330_enums", "Elicits a form with the five enum styles of SEP-1330"],
  ["test_reconnection", "Closes the POST SSE stream mid-call; the result arrives after the client resumes (SEP-1699)"],
].map(([name, description]) => ({ name, description, inputSchema: noArgs }));

TOOLS.push(
  {
    name: "test_sampling",
    description: "Asks the client for an LLM completion (sampling/createMessage) of the prompt",
    inputSchema: {
      type: "object",
      properties: { prompt: { type: "string", description: "The prompt to send to the LLM" } },
      required: ["prompt"],
    },
  },
  {
    name: "test_elicitation",
    description: "Asks the user (elicitation/create) for a username and an email address",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string", description: "The message to show the user" } },
      required: ["message"],
    },
  },
  {
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    inputSchema: {
      $schema: JSON_SCHEMA_2020_12,
      type: "object",
      $defs: {
        address: {
          type: "object",
          properties: { street: { type: "string" }, city: { type: "string" } },
        },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
  },
);

const RESOURCES = [
  { uri: "test://static-text", name: "static-text", description: "A static text resource", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static-binary", description: "A static 1x1 PNG", mimeType: "image/png" },
  {
    uri: "test://watched-resource",
    name: "watched-resource",
    description: "A resource that can be subscribed to",
    mimeType: "text/plain",
  },
];

const TEMPLATES = [
  {
    uriTemplate: "test://template/{id}/data",
    name: "template-data",
    description: "JSON data for the given id",
    mimeType: "application/json",
  },
];

const PROMPTS = [
  { name: "test_simple_prompt", description: "A prompt without arguments" },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt that substitutes two arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt that embeds the given resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  { name: "test_prompt_with_image", description: "A prompt with an image" },
];

// Values offered by completion/complete, per (reference, argument).
const COMPLETIONS = {
  "ref/prompt:test_prompt_with_arguments:arg1": ["paris", "park", "party", "test", "testValue1"],
  "ref/prompt:test_prompt_with_arguments:arg2": ["world", "wonder", "testValue2"],
  "ref/resource:test://template/{id}/data:id": ["1", "2", "3", "123"],
};

// ------------------------------------------------------------------ elicitation schemas

const SEP1034_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", description: "Your name", default: "John Doe" },
    age: { type: "integer", description: "Your age", default: 30 },
    score: { type: "number", description: "Your score", default: 95.5 },
    status: {
      type: "string",
      description: "Account status",
      enum: ["active", "inactive", "pending"],
      default: "active",
    },
    verified: { type: "boolean", description: "Verified account", default: true },
  },
};

const SEP1330_SCHEMA = {
  type: "object",
  properties: {
    untitledSingle: { type: "string", description: "Untitled single-select", enum: ["option1", "option2", "option3"] },
    titledSingle: {
      type: "string",
      description: "Titled single-select",
      oneOf: [
        { const: "value1", title: "First Option" },
        { const: "value2", title: "Second Option" },
        { const: "value3", title: "Third Option" },
      ],
    },
    legacyEnum: {
      type: "string",
      description: "Legacy titled enum (enumNames, deprecated)",
      enum: ["opt1", "opt2", "opt3"],
      enumNames: ["Option One", "Option Two", "Option Three"],
    },
    untitledMulti: {
      type: "array",
      description: "Untitled multi-select",
      items: { type: "string", enum: ["option1", "option2", "option3"] },
    },
    titledMulti: {
      type: "array",
      description: "Titled multi-select",
      items: {
        anyOf: [
          { const: "value1", title: "First Choice" },
          { const: "value2", title: "Second Choice" },
          { const: "value3", title: "Third Choice" },
        ],
      },
    },
  },
};

// ------------------------------------------------------------------ the server

/**
 * @param sdk  { Server, types } as loaded by target.mjs
 * @param opts { log(msg) }  log goes to stderr
 */
export function createTargetServer(sdk, { log = () => {} } = {}) {
  const t = sdk.types;
  const server = new sdk.Server(
    { name: "mcpmux-conformance-target", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true, listChanged: true },
        prompts: {},
        logging: {},
        completions: {},
      },
      instructions: "Conformance target for @modelcontextprotocol/conformance server scenarios.",
    },
  );

  // logging/setLevel: one Server per session, so one level per server. Unset means "send everything".
  let minLevel = null;
  const subscriptions = new Set();

  // Our own handler replaces the SDK's built-in one so that the filter below does not depend on SDK internals.
  server.setRequestHandler(t.SetLevelRequestSchema, async (req) => {
    minLevel = req.params.level;
    return {};
  });

  // A notifications/message on the current request's stream (relatedRequestId), filtered by the set level.
  async function logTo(extra, level, data) {
    if (minLevel && LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(minLevel)) return;
    await extra.sendNotification({
      method: "notifications/message",
      params: { level, logger: "conformance-target", data },
    });
  }

  // --------------------------------------------------------------- tools

  const toolError = (msg) => ({ isError: true, content: [text(msg)] });

  const handlers = {
    test_simple_text: async () => ({ content: [text("This is a simple text response for testing.")] }),

    test_image_content: async () => ({ content: [{ type: "image", data: PNG_1X1, mimeType: "image/png" }] }),

    test_audio_content: async () => ({ content: [{ type: "audio", data: WAV_SILENCE, mimeType: "audio/wav" }] }),

    test_embedded_resource: async () => ({
      content: [
        {
          type: "resource",
          resource: {
            uri: "test://embedded-resource",
            mimeType: "text/plain",
            text: "This is an embedded resource content.",
          },
        },
      ],
    }),

    test_multiple_content_types: async () => ({
      content: [
        text("Multiple content types test:"),
        { type: "image", data: PNG_1X1, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: JSON.stringify({ test: "data", value: 123 }),
          },
        },
      ],
    }),

    test_tool_with_logging: async (_args, extra) => {
      await logTo(extra, "info", "Tool execution started");
      await sleep(50);
      await logTo(extra, "info", "Tool processing data");
      await sleep(50);
      await logTo(extra, "info", "Tool execution completed");
      return { content: [text("Tool with logging executed successfully")] };
    },

    test_tool_with_progress: async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress, total: 100, message: `step ${progress / 50 + 1} of 3` },
          });
        }
        if (progress < 100) await sleep(50);
      }
      return { content: [text(`Tool with progress executed successfully (progressToken: ${token ?? "none"})`)] };
    },

    test_error_handling: async () => toolError("This tool intentionally returns an error for testing"),

    test_sampling: async (args, extra) => {
      if (!server.getClientCapabilities()?.sampling) return toolError("Client does not support sampling");
      const result = await extra.sendRequest(
        {
          method: "sampling/createMessage",
          params: {
            messages: [{ role: "user", content: text(String(args.prompt ?? "")) }],
            maxTokens: 100,
          },
        },
        t.CreateMessageResultSchema,
      );
      const reply = result.content?.type === "text" ? result.content.text : JSON.stringify(result.content);
      return { content: [text(`LLM response: ${reply}`)] };
    },

    test_elicitation: async (args, extra) =>
      elicit(extra, String(args.message ?? "Please provide your information"), {
        type: "object",
        properties: {
          username: { type: "string", description: "User's response" },
          email: { type: "string", description: "User's email address" },
        },
        required: ["username", "email"],
      }, "User response"),

    test_elicitation_sep1034_defaults: async (_args, extra) =>
      elicit(extra, "Please review and update the form fields with defaults", SEP1034_SCHEMA, "Elicitation completed"),

    test_elicitation_sep1330_enums: async (_args, extra) =>
      elicit(extra, "Please select options from the enum fields", SEP1330_SCHEMA, "Elicitation completed"),

    json_schema_2020_12_tool: async (args) => ({
      content: [text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`)],
    }),

    // SEP-1699: close this request's SSE stream (possible only over HTTP with an event store, for a session at
    // protocol >= 2025-11-25), then answer; the answer is stored and delivered when the client resumes with
    // GET + Last-Event-ID. Elsewhere (stdio, older protocol) it just answers after the same delay.
    test_reconnection: async (_args, extra) => {
      await sleep(50);
      const closed = typeof extra.closeSSEStream === "function";
      if (closed) {
        log(`test_reconnection: closing the SSE stream of request ${extra.requestId}`);
        extra.closeSSEStream();
      }
      await sleep(150);
      return {
        content: [text(`Reconnection test completed (stream ${closed ? "closed and resumed" : "not closed"})`)],
      };
    },
  };

  async function elicit(extra, message, requestedSchema, label) {
    if (!server.getClientCapabilities()?.elicitation) return toolError("Client does not support elicitation");
    const r = await extra.sendRequest(
      { method: "elicitation/create", params: { message, requestedSchema } },
      t.ElicitResultSchema,
    );
    return { content: [text(`${label}: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
  }

  server.setRequestHandler(t.ListToolsRequestSchema, async () => ({ tools: TOOLS }));

  server.setRequestHandler(t.CallToolRequestSchema, async (req, extra) => {
    const fn = handlers[req.params.name];
    if (!fn) throw new t.McpError(t.ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    return fn(req.params.arguments ?? {}, extra);
  });

  // --------------------------------------------------------------- resources

  server.setRequestHandler(t.ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(t.ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));

  server.setRequestHandler(t.ReadResourceRequestSchema, async (req) => {
    const uri = req.params.uri;
    switch (uri) {
      case "test://static-text":
        return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }] };
      case "test://static-binary":
        return { contents: [{ uri, mimeType: "image/png", blob: PNG_1X1 }] };
      case "test://watched-resource":
        return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the watched resource." }] };
    }
    const m = TEMPLATE_RE.exec(uri);
    if (m) {
      const id = decodeURIComponent(m[1]);
      const data = { id, templateTest: true, data: `Data for ID: ${id}` };
      return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(data) }] };
    }
    throw new t.McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
  });

  server.setRequestHandler(t.SubscribeRequestSchema, async (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  server.setRequestHandler(t.UnsubscribeRequestSchema, async (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });

  // --------------------------------------------------------------- prompts and completion

  server.setRequestHandler(t.ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));

  server.setRequestHandler(t.GetPromptRequestSchema, async (req) => {
    const args = req.params.arguments ?? {};
    const user = (content) => ({ role: "user", content });
    const need = (...names) => {
      const missing = names.filter((n) => typeof args[n] !== "string");
      if (missing.length) {
        throw new t.McpError(t.ErrorCode.InvalidParams, `Missing required argument(s): ${missing.join(", ")}`);
      }
    };
    switch (req.params.name) {
      case "test_simple_prompt":
        return { messages: [user(text("This is a simple prompt for testing."))] };
      case "test_prompt_with_arguments":
        need("arg1", "arg2");
        return { messages: [user(text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`))] };
      case "test_prompt_with_embedded_resource":
        need("resourceUri");
        return {
          messages: [
            user({
              type: "resource",
              resource: { uri: args.resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
            }),
            user(text("Please process the embedded resource above.")),
          ],
        };
      case "test_prompt_with_image":
        return {
          messages: [
            user({ type: "image", data: PNG_1X1, mimeType: "image/png" }),
            user(text("Please analyze the image above.")),
          ],
        };
    }
    throw new t.McpError(t.ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
  });

  server.setRequestHandler(t.CompleteRequestSchema, async (req) => {
    const { ref, argument } = req.params;
    const key = `${ref.type}:${ref.type === "ref/prompt" ? ref.name : ref.uri}:${argument.name}`;
    const prefix = String(argument.value ?? "").toLowerCase();
    const values = (COMPLETIONS[key] ?? []).filter((v) => v.toLowerCase().startsWith(prefix));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  return server;
}
