//! The client capabilities mcpmux routes (sampling, elicitation in form and url modes, roots):
//! read from a host's `initialize` or modern `_meta`, declared to upstreams, and checked before a
//! server-to-client request is sent to a host.

use super::RawObject;

/// Client capabilities a host declared in `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientCaps {
    pub sampling: bool,
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub roots: bool,
}

impl ClientCaps {
    /// Read the capabilities object of an `initialize` request.
    pub fn from_capabilities(caps: Option<&RawObject>) -> Self {
        let Some(caps) = caps else { return Self::default() };
        let elicitation = caps.get_object("elicitation");
        let (form, url) = match &elicitation {
            Some(e) if !e.contains("form") && !e.contains("url") => (true, false),
            Some(e) => (e.contains("form"), e.contains("url")),
            None => (false, false),
        };
        ClientCaps {
            sampling: caps.get_object("sampling").is_some(),
            elicitation_form: form,
            elicitation_url: url,
            roots: caps.get_object("roots").is_some(),
        }
    }

    /// Everything mcpmux can route (what it declares when no host is behind a request).
    pub const ALL: ClientCaps = ClientCaps {
        sampling: true,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    };

    /// The capabilities object declaring these (for `initialize` or a modern `_meta`).
    pub fn to_json(self) -> serde_json::Value {
        let mut caps = serde_json::Map::new();
        if self.sampling {
            caps.insert("sampling".into(), serde_json::json!({}));
        }
        if self.elicitation_form || self.elicitation_url {
            let mut modes = serde_json::Map::new();
            if self.elicitation_form {
                modes.insert("form".into(), serde_json::json!({}));
            }
            if self.elicitation_url {
                modes.insert("url".into(), serde_json::json!({}));
            }
            caps.insert("elicitation".into(), modes.into());
        }
        if self.roots {
            caps.insert("roots".into(), serde_json::json!({ "listChanged": true }));
        }
        caps.into()
    }

    /// Whether the host can serve a server-to-client request with these params.
    pub fn supports(&self, method: &str, params: Option<&RawObject>) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "roots/list" => self.roots,
            "elicitation/create" => {
                let mode = params.and_then(|p| p.get_str("mode"));
                match mode.as_deref() {
                    Some("url") => self.elicitation_url,
                    _ => self.elicitation_form,
                }
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_initialize() {
        let caps =
            RawObject::parse(r#"{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}"#).unwrap();
        let c = ClientCaps::from_capabilities(Some(&caps));
        assert!(c.sampling && c.roots && c.elicitation_form && !c.elicitation_url);
        let url = RawObject::parse(r#"{"mode":"url"}"#).unwrap();
        assert!(!c.supports("elicitation/create", Some(&url)));
        assert!(c.supports("elicitation/create", None));
        let none = ClientCaps::from_capabilities(None);
        assert!(!none.supports("sampling/createMessage", None));
    }
}
