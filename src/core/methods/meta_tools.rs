//! mcpmux's own tools for a host that cannot hold the whole catalog (a profile with `discovery =
//! "search"`, or `"auto"` past its token budget): `mcpmux__search_tools` (BM25 over the catalog
//! the request may see), `mcpmux__describe_tool` and `mcpmux__call_tool`, which becomes the
//! `tools/call` it names before anything else looks at it, so policy, audit, rate limits,
//! shaping, telemetry, progress, cancellation and server-to-client requests are a direct call's.
//! None of them depends on `list_changed`: each asks the catalog as it is now.

use crate::catalog::{Catalog, ExposedItem, ListKind};
use crate::config::Discovery;
use crate::core::access::Access;
use crate::core::context::RequestCtx;
use crate::core::hub::Hub;
use crate::error::RequestError;
use crate::protocol::message::{raw, result_response};
use crate::protocol::{Message, RawObject, RequestId};
use serde_json::{json, Value};

pub const SEARCH: &str = "mcpmux__search_tools";
pub const DESCRIBE: &str = "mcpmux__describe_tool";
pub const CALL: &str = "mcpmux__call_tool";

/// How many tools a search returns unless asked, and at most.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;
/// The longest query searched (the rest is ignored).
const MAX_QUERY_CHARS: usize = 1000;
/// What `auto` divides a serialized list's bytes by to estimate its tokens.
const BYTES_PER_TOKEN: usize = 4;
/// `{"tools":[]}` around the items.
const LIST_OVERHEAD: usize = 12;

/// How the request's endpoint has hosts discover tools (`list` on the main endpoint).
fn discovery(access: &Access) -> Option<(Discovery, u64)> {
    (access.profile()).map(|profile| (profile.discovery, profile.token_budget))
}

/// Whether the meta-tools are served to this request (listed or not): the profile of its
/// endpoint discovers by search, or may (`auto`).
pub fn served(access: &Access) -> bool {
    discovery(access).is_some_and(|(mode, _)| mode != Discovery::List)
}

/// Whether this request's `tools/list` is the meta-tools instead of the catalog: `search`, or
/// `auto` when the serialized list of what it may see is estimated over the budget.
pub fn listed_instead(catalog: &Catalog, access: &Access) -> bool {
    match discovery(access) {
        None | Some((Discovery::List, _)) => false,
        Some((Discovery::Search, _)) => true,
        Some((Discovery::Auto, budget)) => {
            let visible = access.item_filter(ListKind::Tools);
            let bytes = (catalog.list(ListKind::Tools).items.iter())
                .filter(|item| visible(item))
                .map(|item| item.json.get().len() + 1)
                .sum::<usize>()
                + LIST_OVERHEAD;
            (bytes / BYTES_PER_TOKEN) as u64 > budget
        }
    }
}

/// The three meta-tools as a `tools/list` would list them.
pub fn definitions() -> Value {
    json!([
        {
            "name": SEARCH,
            "title": "Search tools",
            "description": "Find tools for a task among every tool this gateway offers. Describe what you want to do in plain words; the best matches come back with their names, descriptions and input schemas. Then call one with mcpmux__call_tool.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, e.g. \"create an issue in a GitHub repository\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("At most this many tools (default {DEFAULT_LIMIT}).")}
                },
                "required": ["query"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": DESCRIBE,
            "title": "Describe a tool",
            "description": "The full definition of one tool found with mcpmux__search_tools: its description, input schema, output schema and annotations.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "The tool's name as mcpmux__search_tools gave it."}},
                "required": ["name"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": CALL,
            "title": "Call a tool",
            "description": "Call a tool found with mcpmux__search_tools, with arguments that follow its input schema. The result is the tool's own.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name as mcpmux__search_tools gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its input schema describes them."}
                },
                "required": ["name"]
            }
        }
    ])
}

/// The `tools/list` result of the meta-tools, with `extra` members (a modern reply's).
pub fn list_result(extra: &[(&str, Box<serde_json::value::RawValue>)]) -> Box<serde_json::value::RawValue> {
    let mut result = RawObject::default();
    result.set("tools", raw(definitions().to_string()));
    for (key, value) in extra {
        result.set(key, value.clone());
    }
    result.to_raw()
}

/// Whether `params` of a `tools/call` name `tool` (compared as JSON text, which allocates
/// nothing on the path of every call, unless the name is written with escapes).
fn names(params: &RawObject, tool: &str) -> bool {
    let Some(name) = params.get("name").map(|n| n.get()) else {
        return false;
    };
    match name.contains('\\') {
        true => params.get_str("name").is_some_and(|n| n == tool),
        false => name.len() == tool.len() + 2 && name.get(1..name.len() - 1) == Some(tool),
    }
}

/// A `tools/call` of `mcpmux__call_tool` where the meta-tools are served, turned into the call
/// it names: `name` and `arguments` from its arguments, `_meta` (progress token, trace context)
/// kept. Any other request is returned as it came. A call without a tool name is refused.
pub fn unwrap_call(
    hub: &Hub,
    ctx: &RequestCtx,
    method: &str,
    params: RawObject,
) -> Result<RawObject, RequestError> {
    if method != "tools/call" || !names(&params, CALL) || !served(&Access::of(hub, ctx)) {
        return Ok(params);
    }
    let wrong = RequestError::WrongParam {
        name: "arguments",
        expected: "an object with the tool's \"name\" (a string) and its \"arguments\" (an object)",
    };
    let outer = (params.get("arguments"))
        .map(|a| RawObject::parse(a.get()))
        .transpose()
        .map_err(|_| wrong.clone())?
        .unwrap_or_default();
    let Some(name) = outer.get("name").filter(|n| n.get().starts_with('"')) else {
        return Err(wrong);
    };
    let mut inner = params.clone();
    inner.set("name", name.to_owned());
    match outer.get("arguments") {
        Some(arguments) if arguments.get().starts_with('{') => inner.set("arguments", arguments.to_owned()),
        Some(arguments) if arguments.get() != "null" => return Err(wrong),
        _ => {
            inner.remove("arguments");
        }
    }
    Ok(inner)
}

/// The answer to a `tools/call` of `mcpmux__search_tools` or `mcpmux__describe_tool` where the
/// meta-tools are served; `None` for any other call.
pub fn answer(hub: &Hub, ctx: &RequestCtx, id: &RequestId, params: &RawObject) -> Option<Message> {
    let searching = names(params, SEARCH);
    if !searching && !names(params, DESCRIBE) {
        return None;
    }
    let access = Access::of(hub, ctx);
    if !served(&access) {
        return None;
    }
    let catalog = hub.catalog_for(ctx);
    let arguments = (params.get("arguments"))
        .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
        .unwrap_or(Value::Null);
    let result = match searching {
        true => search(&catalog, &access, &arguments),
        false => describe(&catalog, &access, &arguments),
    };
    Some(result_response(id.clone(), raw(result.to_string())))
}

/// A tool result holding `value` as structured content and as its JSON text.
fn tool_result(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}

/// A tool result saying what was wrong with the arguments (the model reads it and tries again).
fn tool_error(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

fn search(catalog: &Catalog, access: &Access, arguments: &Value) -> Value {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return tool_error(format!(
            "{SEARCH} needs a \"query\": what you want to do, in plain words."
        ));
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(n) => match n.as_u64().filter(|n| (1..=MAX_LIMIT as u64).contains(n)) {
            Some(n) => n as usize,
            None => return tool_error(format!("\"limit\" must be an integer from 1 to {MAX_LIMIT}.")),
        },
    };
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    let tools = &catalog.list(ListKind::Tools).items;
    let visible = access.item_filter(ListKind::Tools);
    let seen = |position: usize| tools.get(position).is_some_and(&visible);
    let found: Vec<Value> = (catalog.tool_index().search(&query, limit, &seen).into_iter())
        .filter_map(|hit| tools.get(hit.position))
        .map(summary)
        .collect();
    tool_result(json!({ "tools": found }))
}

/// What a search says of a tool: its name, title, description and input schema.
fn summary(item: &ExposedItem) -> Value {
    let tool: Value = serde_json::from_str(item.json.get()).unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    for key in ["name", "title", "description", "inputSchema"] {
        if let Some(value) = tool.get(key) {
            out.insert(key.to_string(), value.clone());
        }
    }
    Value::Object(out)
}

fn describe(catalog: &Catalog, access: &Access, arguments: &Value) -> Value {
    let Some(name) = arguments.get("name").and_then(Value::as_str) else {
        return tool_error(format!("{DESCRIBE} needs the \"name\" of a tool {SEARCH} found."));
    };
    let visible = access.item_filter(ListKind::Tools);
    match catalog
        .list(ListKind::Tools)
        .lookup(name)
        .filter(|item| visible(item))
    {
        Some(item) => {
            let tool: Value = serde_json::from_str(item.json.get()).unwrap_or(Value::Null);
            tool_result(json!({ "tool": tool }))
        }
        None => {
            // A tool pins block: why, as a call of it would say (if the request may see it).
            let blocked = (catalog.list(ListKind::Tools).blocked(name))
                .filter(|b| access.in_view(ListKind::Tools, &b.upstream, name) && access.permits(name));
            match blocked {
                Some(blocked) => tool_error(blocked.message.clone()),
                None => tool_error(format!(
                    "No tool is named {:?} here; find one with {SEARCH}.",
                    crate::util::text::clip(name)
                )),
            }
        }
    }
}
