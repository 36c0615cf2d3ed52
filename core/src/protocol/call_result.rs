//! A `tools/call` answer read in one pass when it is plain: its `resultType` and the result
//! together, instead of a scan for the `resultType` followed by a second reading of the
//! result. Plain means an object whose `content` parts are all `text` parts with a string
//! `text`, no member given twice — what nearly every tool answers. Anything else (another
//! kind of part, a member of an unexpected type, a repeated member) is read the general way,
//! [`result_type`] then [`parse_call_tool_result`], so the plain reading only ever gives what
//! the general one gives (`tests_call_result.rs` holds the two together).

use super::message::malformed;
use super::{result_type, ProtocolError, ResultType};
use crate::tool::{Content, RawJson, ToolResult};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

/// What a `tools/call` answer is.
#[derive(Debug)]
pub enum CallAnswer {
    /// A complete result (`resultType` absent or `complete`), or why it cannot be read.
    Complete(Result<ToolResult, ProtocolError>),
    /// An `InputRequiredResult`: the answer as sent.
    InputRequired(Box<RawValue>),
    /// A `resultType` this client does not know (the value's text when it is no string).
    Unknown(String),
}

/// Read a `tools/call` answer: what [`result_type`] says it is and, for a complete one,
/// what [`parse_call_tool_result`] makes of it (the result keeps `raw` as its text).
///
/// [`parse_call_tool_result`]: super::parse_call_tool_result
pub fn read_call_answer(raw: Box<RawValue>) -> CallAnswer {
    let (plain, kind) = match read_plain(raw.get()) {
        Some((plain, kind)) => (Some(plain), kind),
        None => (None, result_type(&raw)),
    };
    match kind {
        ResultType::Complete => CallAnswer::Complete(match plain {
            Some(p) => Ok(ToolResult {
                content: p.content,
                structured_content: p.structured_content,
                is_error: p.is_error,
                raw: Some(RawJson::from(raw)),
            }),
            None => parse_owned(raw),
        }),
        ResultType::InputRequired => CallAnswer::InputRequired(raw),
        ResultType::Unknown(t) => CallAnswer::Unknown(t),
    }
}

/// [`parse_call_tool_result`](super::parse_call_tool_result) of an answer it may keep.
fn parse_owned(raw: Box<RawValue>) -> Result<ToolResult, ProtocolError> {
    let mut result: ToolResult =
        serde_json::from_str(raw.get()).map_err(|e| malformed("tools/call", e.to_string()))?;
    result.raw = Some(RawJson::from(raw));
    Ok(result)
}

/// `resultType` as [`result_type`] reads it: absent or `null` is complete.
pub(super) fn classify(value: Option<Value>) -> ResultType {
    match value {
        None => ResultType::Complete,
        Some(Value::String(s)) => match s.as_str() {
            "complete" => ResultType::Complete,
            "input_required" => ResultType::InputRequired,
            _ => ResultType::Unknown(s),
        },
        Some(other) => ResultType::Unknown(other.to_string()),
    }
}

/// A plain result's fields.
pub(super) struct Plain {
    pub(super) content: Vec<Content>,
    pub(super) structured_content: Option<Value>,
    pub(super) is_error: bool,
}

/// The answer read in one pass, or `None` when it is not plain (then nothing is decided).
pub(super) fn read_plain(text: &str) -> Option<(Plain, ResultType)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let (plain, kind) = de.deserialize_map(ResultVisitor).ok()?;
    de.end().ok()?;
    Some((plain, classify(kind)))
}

/// The members of a result this reading knows; the others are skipped, as the general
/// reading of a [`ToolResult`] skips them.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum ResultMember {
    #[serde(rename = "content")]
    Content,
    #[serde(rename = "structuredContent")]
    StructuredContent,
    #[serde(rename = "isError")]
    IsError,
    #[serde(rename = "resultType")]
    ResultType,
    #[serde(other)]
    Other,
}

/// A repeated member ends the plain reading (the general one refuses it, or reads it its own
/// way).
fn once<T, E: de::Error>(slot: &Option<T>) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::custom("repeated member")),
        None => Ok(()),
    }
}

struct ResultVisitor;

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = (Plain, Option<Value>);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tools/call result object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut content = None;
        let mut structured: Option<Option<Value>> = None;
        let mut is_error = None;
        let mut kind: Option<Option<Value>> = None;
        while let Some(member) = map.next_key::<ResultMember>()? {
            match member {
                ResultMember::Content => {
                    once(&content)?;
                    content = Some(map.next_value_seed(TextParts)?);
                }
                ResultMember::StructuredContent => {
                    once(&structured)?;
                    structured = Some(map.next_value()?);
                }
                ResultMember::IsError => {
                    once(&is_error)?;
                    is_error = Some(map.next_value::<bool>()?);
                }
                ResultMember::ResultType => {
                    once(&kind)?;
                    kind = Some(map.next_value()?);
                }
                ResultMember::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let plain = Plain {
            content: content.unwrap_or_default(),
            structured_content: structured.flatten(),
            is_error: is_error.unwrap_or(false),
        };
        Ok((plain, kind.flatten()))
    }
}

/// `content` as a list of text parts; any other part ends the plain reading.
struct TextParts;

impl<'de> DeserializeSeed<'de> for TextParts {
    type Value = Vec<Content>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TextParts {
    type Value = Vec<Content>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of text parts")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
        while let Some(text) = seq.next_element_seed(TextPart)? {
            parts.push(Content::Text { text });
        }
        Ok(parts)
    }
}

/// The members of a content part this reading knows.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum PartMember {
    #[serde(rename = "type")]
    Type,
    #[serde(rename = "text")]
    Text,
    #[serde(other)]
    Other,
}

/// One `{"type": "text", "text": …}` part: its text.
struct TextPart;

impl<'de> DeserializeSeed<'de> for TextPart {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TextPart {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a text part")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut is_text: Option<bool> = None;
        let mut text: Option<String> = None;
        while let Some(member) = map.next_key::<PartMember>()? {
            match member {
                PartMember::Type => {
                    once(&is_text)?;
                    is_text = Some(map.next_value::<TypeIsText>()?.0);
                }
                PartMember::Text => {
                    once(&text)?;
                    text = Some(map.next_value()?);
                }
                // Read whole, not skipped: the general reading keeps every member of a part
                // until it knows the part's kind, so a value it cannot hold (a number out of
                // range) fails it.
                PartMember::Other => {
                    map.next_value::<Value>()?;
                }
            }
        }
        match (is_text, text) {
            (Some(true), Some(text)) => Ok(text),
            _ => Err(de::Error::custom("not a text part")),
        }
    }
}

/// Whether a part's `type` is the string `text`; a value of another type is refused.
struct TypeIsText(bool);

impl<'de> Deserialize<'de> for TypeIsText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TypeIsText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<TypeIsText, E> {
                Ok(TypeIsText(s == "text"))
            }
        }
        deserializer.deserialize_str(V)
    }
}
