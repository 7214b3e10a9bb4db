//! `mcpmux config schema`: the JSON Schema (draft 2020-12) of the configuration file, derived
//! from the raw tables the parser reads (so it cannot drift from them), for editors (Taplo,
//! "Even Better TOML"). TOML has no null, so the schema has none either.

use super::raw::RawConfig;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The schema of the configuration file, as a JSON value.
pub fn schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<RawConfig>();
    let mut value = schema.to_value();
    drop_null(&mut value);
    value
}

/// The schema as pretty-printed JSON.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Remove `null` from every type (an absent key is how TOML leaves a value out): `"type":
/// ["string", "null"]` becomes `"string"`, and an `anyOf` alternative `{"type": "null"}` goes.
fn drop_null(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = map.get_mut("anyOf") {
                any.retain(|alt| alt.get("type").is_none_or(|t| t != "null"));
                if any.len() == 1 {
                    let only = any.remove(0);
                    map.remove("anyOf");
                    if let Value::Object(alt) = only {
                        for (k, v) in alt {
                            map.entry(k).or_insert(v);
                        }
                    }
                }
            }
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            map.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}
