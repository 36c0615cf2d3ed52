//! The `tools/list` page reader: the hot path of a connect. A page with thousands of tools is
//! read in one pass straight from the answer's text; names and descriptions are copied once,
//! schemas and annotations are kept as raw JSON, and no `Value` tree of the page is built. A
//! malformed definition is skipped and reported by name; it never fails the page.

use super::message::malformed;
use super::ProtocolError;
use crate::tool::{RawJson, ToolDef};
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// One page of `tools/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsPage {
    /// The well-formed tool definitions, in the server's order.
    pub tools: Vec<ToolDef>,
    /// The cursor of the next page, if any.
    pub next_cursor: Option<String>,
    /// Names of tool definitions that were malformed and skipped.
    pub skipped: Vec<String>,
    /// The page's `ttlMs` and `cacheScope`.
    pub hint: super::CacheHint,
}

/// Parse one page of `tools/list` straight from the answer's JSON text: each definition's
/// fields are read as they stream by, schemas and annotations are kept raw ([`RawJson`]), and
/// no `Value` tree of the page is ever built.
///
/// A definition is skipped (its name reported, or `(unnamed)`) when it is not an object, its
/// `name` is missing, empty or not a string, its `title` or `description` is neither a
/// string nor null, or its `inputSchema` is given but not an object. A member given twice counts with its last value, as in a `Value` object.
pub fn parse_list_tools_result(raw: &RawValue) -> Result<ToolsPage, ProtocolError> {
    let parts: PageParts =
        serde_json::from_str(raw.get()).map_err(|e| malformed("tools/list", e.to_string()))?;
    page_from_parts(parts)
}

/// Check a page's members and sort its definitions into tools and skipped names.
pub(super) fn page_from_parts(parts: PageParts) -> Result<ToolsPage, ProtocolError> {
    let listed = parts
        .tools
        .ok_or_else(|| malformed("tools/list", "missing \"tools\" array"))?;
    let next = match parts.next_cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(malformed(
                "tools/list",
                format!("nextCursor is {}", kind_of(&other)),
            ))
        }
    };
    let mut tools = Vec::with_capacity(listed.len());
    let mut skipped = Vec::new();
    for t in listed {
        match t.0 {
            Ok(def) => tools.push(def),
            Err(name) => skipped.push(name),
        }
    }
    Ok(ToolsPage {
        tools,
        next_cursor: next,
        skipped,
        hint: super::cache_hint(parts.ttl_ms.as_ref(), parts.cache_scope.as_ref()),
    })
}

/// What a `tools/list` page holds: `tools` is `None` unless it is an array.
#[derive(Default)]
pub(super) struct PageParts {
    tools: Option<Vec<Listed>>,
    next_cursor: Option<Value>,
    ttl_ms: Option<Value>,
    cache_scope: Option<Value>,
}

/// Consume the rest of a map nobody wants, keeping the parser in step.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Consume the rest of a sequence nobody wants, keeping the parser in step.
pub(super) fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the scalar `visit_*` methods of a visitor that maps every value it does not
/// expect to `$none`.
macro_rules! scalars_are {
    ($none:expr) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($none)
        }
    };
}

impl<'de> Deserialize<'de> for PageParts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        enum Key {
            #[serde(rename = "tools")]
            Tools,
            #[serde(rename = "nextCursor")]
            NextCursor,
            #[serde(rename = "ttlMs")]
            TtlMs,
            #[serde(rename = "cacheScope")]
            CacheScope,
            #[serde(other)]
            Other,
        }
        /// The `tools` member: `Some` only for an array.
        struct ToolsArray;
        impl<'de> de::DeserializeSeed<'de> for ToolsArray {
            type Value = Option<Vec<Listed>>;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        }
        impl<'de> Visitor<'de> for ToolsArray {
            type Value = Option<Vec<Listed>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(t) = seq.next_element::<Listed>()? {
                    out.push(t);
                }
                Ok(Some(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                drain_map(map).map(|()| None)
            }
            scalars_are!(None);
        }
        struct PageVisitor;
        impl<'de> Visitor<'de> for PageVisitor {
            type Value = PageParts;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PageParts, A::Error> {
                let mut page = PageParts::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Tools => page.tools = map.next_value_seed(ToolsArray)?,
                        Key::NextCursor => page.next_cursor = Some(map.next_value()?),
                        Key::TtlMs => page.ttl_ms = Some(map.next_value()?),
                        Key::CacheScope => page.cache_scope = Some(map.next_value()?),
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(page)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<PageParts, A::Error> {
                drain_seq(seq).map(|()| PageParts::default())
            }
            scalars_are!(PageParts::default());
        }
        deserializer.deserialize_any(PageVisitor)
    }
}

/// A member that should be a string (or null), read without building a `Value`: a string
/// becomes `T` in one copy.
enum Text<T> {
    Str(T),
    Null,
    /// Any other value (consumed).
    Other,
}

impl<'de, T: for<'a> From<&'a str>> Deserialize<'de> for Text<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: for<'a> From<&'a str>> Visitor<'de> for TextVisitor<T> {
            type Value = Text<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<T>, E> {
                Ok(Text::Str(T::from(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Text<T>, E> {
                Ok(Text::Null)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text<T>, E> {
                Ok(Text::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Text<T>, E> {
                Ok(Text::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text<T>, E> {
                Ok(Text::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Text<T>, E> {
                Ok(Text::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text<T>, A::Error> {
                drain_map(map).map(|()| Text::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text<T>, A::Error> {
                drain_seq(seq).map(|()| Text::Other)
            }
        }
        deserializer.deserialize_any(TextVisitor(std::marker::PhantomData))
    }
}

/// One entry of a `tools/list` page: the definition, or the name to report it by.
struct Listed(Result<ToolDef, String>);

const UNNAMED: &str = "(unnamed)";

impl<'de> Deserialize<'de> for Listed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        enum Key {
            #[serde(rename = "name")]
            Name,
            #[serde(rename = "title")]
            Title,
            #[serde(rename = "description")]
            Description,
            #[serde(rename = "inputSchema")]
            InputSchema,
            #[serde(rename = "outputSchema")]
            OutputSchema,
            #[serde(rename = "annotations")]
            Annotations,
            #[serde(rename = "icons")]
            Icons,
            #[serde(rename = "_meta")]
            Meta,
            #[serde(rename = "execution")]
            Execution,
            #[serde(other)]
            Other,
        }
        /// `Ok(None)` for null (or absent), `Ok(Some)` for a string, `Err` otherwise.
        fn opt_string<T>(v: Option<Text<T>>) -> Result<Option<T>, ()> {
            match v {
                None | Some(Text::Null) => Ok(None),
                Some(Text::Str(s)) => Ok(Some(s)),
                Some(Text::Other) => Err(()),
            }
        }
        /// `null` is an absent optional member, as `Option`'s deserializer reads it.
        fn non_null(raw: Option<RawJson>) -> Option<RawJson> {
            raw.filter(|r| r.get() != "null")
        }
        struct ToolVisitor;
        impl<'de> Visitor<'de> for ToolVisitor {
            type Value = Listed;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Listed, A::Error> {
                let mut name: Option<Text<String>> = None;
                let mut title: Option<Text<String>> = None;
                let mut description: Option<Text<Arc<str>>> = None;
                let mut input_schema: Option<RawJson> = None;
                let mut output_schema: Option<RawJson> = None;
                let mut annotations: Option<RawJson> = None;
                let mut icons: Option<RawJson> = None;
                let mut meta: Option<RawJson> = None;
                let mut execution: Option<RawJson> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Name => name = Some(map.next_value()?),
                        Key::Title => title = Some(map.next_value()?),
                        Key::Description => description = Some(map.next_value()?),
                        Key::InputSchema => input_schema = Some(map.next_value()?),
                        Key::OutputSchema => output_schema = Some(map.next_value()?),
                        Key::Annotations => annotations = Some(map.next_value()?),
                        Key::Icons => icons = Some(map.next_value()?),
                        Key::Meta => meta = Some(map.next_value()?),
                        Key::Execution => execution = Some(map.next_value()?),
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let name = match name {
                    Some(Text::Str(s)) => s,
                    _ => return Ok(Listed(Err(UNNAMED.to_string()))),
                };
                let (Ok(title), Ok(description)) = (opt_string(title), opt_string(description))
                else {
                    return Ok(Listed(Err(name)));
                };
                if name.is_empty() {
                    return Ok(Listed(Err(name)));
                }
                // An input schema must be an object (`"string"`, `42`, `[]` or `null` would
                // reach the agent as the tool's arguments' schema): such a tool is skipped.
                if input_schema
                    .as_ref()
                    .is_some_and(|s| !s.get().starts_with('{'))
                {
                    return Ok(Listed(Err(name)));
                }
                Ok(Listed(Ok(ToolDef {
                    name,
                    title,
                    description,
                    input_schema: input_schema.unwrap_or_else(RawJson::empty_object_schema),
                    output_schema: non_null(output_schema),
                    annotations: non_null(annotations),
                    icons: non_null(icons),
                    meta: non_null(meta),
                    execution: non_null(execution),
                })))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Listed, A::Error> {
                drain_seq(seq).map(|()| Listed(Err(UNNAMED.to_string())))
            }
            scalars_are!(Listed(Err(UNNAMED.to_string())));
        }
        deserializer.deserialize_any(ToolVisitor)
    }
}

/// How a value's type reads in a message: "nextCursor is a number".
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
