//! Resource URIs inside results (tool results' links and embedded resources, prompt messages,
//! read contents), rewritten so hosts can read them back through mcpmux.

use super::Naming;
use crate::protocol::RawObject;
use serde_json::value::RawValue;

/// Which URIs in a result must be exposed under the upstream's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultShape {
    Opaque,
    ToolResult,
    PromptResult,
    ReadResult,
}

/// Rewrite resource URIs inside a result so hosts can read them back through mcpmux.
pub fn expose_result_uris(result: Box<RawValue>, shape: ResultShape, naming: &Naming) -> Box<RawValue> {
    if naming.namespace.is_empty() || shape == ResultShape::Opaque || !result.get().contains("\"uri\"") {
        return result;
    }
    let Ok(mut obj) = RawObject::parse(result.get()) else {
        return result;
    };
    let changed = match shape {
        ResultShape::ToolResult => rewrite_array(&mut obj, "content", |b| expose_block(b, naming)),
        ResultShape::PromptResult => rewrite_array(&mut obj, "messages", |m| {
            let Some(mut content) = m.get_object("content") else {
                return false;
            };
            let changed = expose_block(&mut content, naming);
            if changed {
                m.set("content", content.to_raw());
            }
            changed
        }),
        ResultShape::ReadResult => rewrite_array(&mut obj, "contents", |c| expose_uri_member(c, naming)),
        ResultShape::Opaque => false,
    };
    if changed {
        obj.to_raw()
    } else {
        result
    }
}

fn rewrite_array(obj: &mut RawObject, key: &str, mut edit: impl FnMut(&mut RawObject) -> bool) -> bool {
    let Some(items) = obj.get_array(key) else {
        return false;
    };
    let mut changed = false;
    let rewritten: Vec<Box<RawValue>> = items
        .into_iter()
        .map(|item| match RawObject::parse(item.get()) {
            Ok(mut o) => {
                if edit(&mut o) {
                    changed = true;
                    o.to_raw()
                } else {
                    item
                }
            }
            Err(_) => item,
        })
        .collect();
    if changed {
        obj.set(key, crate::protocol::message::to_raw(&rewritten));
    }
    changed
}

fn expose_uri_member(obj: &mut RawObject, naming: &Naming) -> bool {
    match obj.get_str("uri") {
        Some(uri) => {
            obj.set_str("uri", &naming.expose_uri(&uri));
            true
        }
        None => false,
    }
}

/// Expose the URI of a `resource_link` block or of an embedded `resource` block.
fn expose_block(block: &mut RawObject, naming: &Naming) -> bool {
    match block.get_str("type").as_deref() {
        Some("resource_link") => expose_uri_member(block, naming),
        Some("resource") => {
            let Some(mut resource) = block.get_object("resource") else {
                return false;
            };
            let changed = expose_uri_member(&mut resource, naming);
            if changed {
                block.set("resource", resource.to_raw());
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::raw;

    fn naming(ns: &str) -> Naming {
        Naming::new(ns, "__")
    }

    #[test]
    fn tool_results_expose_links_and_embedded_resources() {
        let result = raw(r#"{"content":[{"type":"text","text":"uri"},{"type":"resource_link","uri":"test://a","name":"a"},{"type":"resource","resource":{"uri":"test://b","text":"x"}}],"isError":false}"#.into());
        let out = expose_result_uris(result, ResultShape::ToolResult, &naming("t"));
        assert_eq!(
            out.get(),
            r#"{"content":[{"type":"text","text":"uri"},{"type":"resource_link","uri":"mcpmux://t/test://a","name":"a"},{"type":"resource","resource":{"uri":"mcpmux://t/test://b","text":"x"}}],"isError":false}"#
        );
    }

    #[test]
    fn prompt_and_read_results_are_rewritten_and_empty_namespace_is_untouched() {
        let prompt = raw(r#"{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"x://1","text":"t"}}}]}"#.into());
        let out = expose_result_uris(prompt, ResultShape::PromptResult, &naming("n"));
        assert!(out.get().contains("mcpmux://n/x://1"));
        let read = raw(r#"{"contents":[{"uri":"x://2","text":"t"}]}"#.into());
        let same = expose_result_uris(read, ResultShape::ReadResult, &naming(""));
        assert_eq!(same.get(), r#"{"contents":[{"uri":"x://2","text":"t"}]}"#);
    }
}
