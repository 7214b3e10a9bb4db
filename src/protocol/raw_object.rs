//! A JSON object whose members stay raw JSON: read or replace one member and re-serialise,
//! leaving every other member (unknown fields, `_meta`, vendor extensions) byte for byte.

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// An object with members in their original order, each value kept as raw JSON.
#[derive(Debug, Clone, Default)]
pub struct RawObject {
    members: Vec<(String, Box<RawValue>)>,
}

impl RawObject {
    /// Parse raw JSON text that must be an object.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Parse an optional raw value; `None` or a non-object gives `None`.
    pub fn parse_opt(raw: Option<&RawValue>) -> Option<Self> {
        raw.and_then(|r| Self::parse(r.get()).ok())
    }

    /// The raw value of a member.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// A member decoded as a string, when it is one.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.get(key).and_then(|v| serde_json::from_str(v.get()).ok())
    }

    /// A member parsed as an object, when it is one.
    pub fn get_object(&self, key: &str) -> Option<RawObject> {
        self.get(key).and_then(|v| Self::parse(v.get()).ok())
    }

    /// A member parsed as an array of raw values, when it is one.
    pub fn get_array(&self, key: &str) -> Option<Vec<Box<RawValue>>> {
        self.get(key).and_then(|v| serde_json::from_str(v.get()).ok())
    }

    /// Whether the member exists.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Replace a member in place, or append it.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.members.push((key.to_string(), value)),
        }
    }

    /// Set a member to a JSON string.
    pub fn set_str(&mut self, key: &str, value: &str) {
        self.set(key, super::message::raw(super::message::json_string(value)));
    }

    /// Remove a member, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Box<RawValue>> {
        let pos = self.members.iter().position(|(k, _)| k == key)?;
        Some(self.members.remove(pos).1)
    }

    /// Serialise back to raw JSON.
    pub fn to_raw(&self) -> Box<RawValue> {
        super::message::to_raw(self)
    }

    /// Serialise to a JSON string.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// The members in order.
    pub fn members(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v.as_ref()))
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.members.len()))?;
        for (k, v) in &self.members {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor;
        impl<'de> Visitor<'de> for ObjVisitor {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<RawObject, A::Error> {
                let mut members = Vec::with_capacity(access.size_hint().unwrap_or(4));
                while let Some((k, v)) = access.next_entry::<String, Box<RawValue>>()? {
                    if members.iter().any(|(existing, _): &(String, _)| *existing == k) {
                        return Err(de::Error::custom(format!("duplicate member {k:?}")));
                    }
                    members.push((k, v));
                }
                Ok(RawObject { members })
            }
        }
        deserializer.deserialize_map(ObjVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_one_member_keeps_the_rest_verbatim() {
        let text = r#"{"name":"a","arguments":{"x":1.50,"y":[true,null]},"_meta":{"progressToken":"t","vendor/x":{"deep":1}}}"#;
        let mut obj = RawObject::parse(text).unwrap();
        obj.set_str("name", "b");
        assert_eq!(
            obj.to_json(),
            r#"{"name":"b","arguments":{"x":1.50,"y":[true,null]},"_meta":{"progressToken":"t","vendor/x":{"deep":1}}}"#
        );
        let meta = obj.get_object("_meta").unwrap();
        assert_eq!(meta.get("progressToken").unwrap().get(), "\"t\"");
    }

    #[test]
    fn non_objects_and_duplicates_are_rejected() {
        assert!(RawObject::parse("[1]").is_err());
        assert!(RawObject::parse(r#"{"a":1,"a":2}"#).is_err());
        assert!(RawObject::parse_opt(None).is_none());
    }

    #[test]
    fn set_appends_and_remove_takes() {
        let mut obj = RawObject::parse("{}").unwrap();
        obj.set_str("uri", "x://y");
        assert_eq!(obj.get_str("uri").as_deref(), Some("x://y"));
        assert!(obj.remove("uri").is_some());
        assert_eq!(obj.to_json(), "{}");
    }
}
