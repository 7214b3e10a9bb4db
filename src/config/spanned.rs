//! [`Spanned`]: a value of the configuration with the byte range it was written at. It reads
//! like `toml::Spanned` (to which its deserialisation delegates) and its JSON Schema is the
//! value's own, so the raw tables can derive their schema (`mcpmux config schema`).

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::ops::Range;

/// A value and where it was written (offsets in the shared space of `Sources`).
pub(super) struct Spanned<T>(toml::Spanned<T>);

impl<T> Spanned<T> {
    /// The byte range of the value.
    pub(super) fn span(&self) -> Range<usize> {
        self.0.span()
    }

    pub(super) fn get_ref(&self) -> &T {
        self.0.get_ref()
    }

    pub(super) fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        toml::Spanned::<T>::deserialize(deserializer).map(Spanned)
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}
