//! The serving side's frames without `serde_json::Value` round trips.
//!
//! A frame the gateway writes is read once, into a [`Written`]: only the fields the judge and
//! the clients use (a tool's `inputSchema` is skipped, not built). Each field is read as
//! leniently as [`Value`] lookups read it — a field of another type than the one wanted is
//! as good as absent, a list page's items are read whatever they are — so a [`Written`] says
//! what the lookups on the parsed `Value` said ([`Written::of_value`], which debug builds
//! compute for every frame and compare). A frame the typed reading refuses (a key written
//! twice) is read through a `Value` instead.
//!
//! A client's request is written straight to bytes from typed structs ([`Params`]) whose
//! fields are declared in the order `serde_json` writes a `Value`'s keys (sorted), so the
//! bytes are those the `Value` would have given (debug builds check that the bytes are the
//! canonical writing of what they parse to).

use crate::invariants::gateway::{Page, LIST_FIELDS};
use crate::json::At;
use bytes::Bytes;
use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::marker::PhantomData;

/// A field read whatever it holds: absent, a string, a boolean, an integer, or anything else.
#[derive(Debug, Clone, Default, PartialEq)]
enum Scalar {
    #[default]
    Absent,
    Other,
    Bool(bool),
    I64(i64),
    U64(u64),
    Str(String),
}

impl Scalar {
    fn present(&self) -> bool {
        *self != Scalar::Absent
    }

    fn into_string(self) -> Option<String> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    /// As `Value::as_i64` reads a number.
    fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::I64(n) => Some(n),
            Scalar::U64(n) => i64::try_from(n).ok(),
            _ => None,
        }
    }
}

/// Skip what is left of a sequence or a map.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
                Ok(Scalar::I64(n))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar::U64(n))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(s))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
                Scalar::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
                drain_seq(seq).map(|()| Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar, A::Error> {
                drain_map(map).map(|()| Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// A field read as an object of type `T` when it is one (absent or anything else: `None`,
/// with `present` saying which).
#[derive(Debug)]
struct Obj<T> {
    present: bool,
    is: Option<T>,
}

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj {
            present: false,
            is: None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_str<E>(self, _: &str) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Option<T>, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<T>, A::Error> {
                drain_seq(seq).map(|()| None)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Some)
            }
        }
        d.deserialize_any(V(PhantomData))
            .map(|is| Obj { present: true, is })
    }
}

/// A field read as an array of `T`s when it is one.
#[derive(Debug)]
struct Arr<T>(Option<Vec<T>>);

impl<T> Default for Arr<T> {
    fn default() -> Self {
        Arr(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Arr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Option<Vec<T>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut all = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(x) = seq.next_element()? {
                    all.push(x);
                }
                Ok(Some(all))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                drain_map(map).map(|()| None)
            }
        }
        d.deserialize_any(V(PhantomData)).map(Arr)
    }
}

/// The value a JSON pointer's token `0` names: an array's first element, or an object's
/// member `"0"` (the last one written, as a `Value`'s map keeps it).
#[derive(Debug)]
struct First<T>(Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        First(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element()?;
                drain_seq(seq).map(|()| first)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut found = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "0" {
                        found = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(found)
            }
        }
        d.deserialize_any(V(PhantomData)).map(First)
    }
}

#[derive(Deserialize)]
struct Top {
    #[serde(default)]
    id: Present,
    #[serde(default)]
    method: Scalar,
    #[serde(default)]
    error: Obj<ErrorBody>,
    #[serde(default)]
    result: Obj<ResultBody>,
    #[serde(default)]
    params: Obj<ParamsBody>,
}

/// A field that is there (whatever it holds, `null` included), as a `Value`.
#[derive(Debug, Default)]
struct Present(Option<Value>);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Present(Some(v)))
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Scalar,
}

#[derive(Deserialize)]
struct ResultBody {
    #[serde(default, rename = "isError")]
    is_error: Scalar,
    #[serde(default)]
    content: First<Obj<Text>>,
    #[serde(default, rename = "resultType")]
    result_type: Scalar,
    #[serde(default, rename = "requestState")]
    request_state: Scalar,
    #[serde(default, rename = "nextCursor")]
    next_cursor: Scalar,
    #[serde(default)]
    tools: Arr<Obj<Keyed>>,
    #[serde(default)]
    resources: Arr<Obj<Keyed>>,
    #[serde(default, rename = "resourceTemplates")]
    resource_templates: Arr<Obj<Keyed>>,
    #[serde(default)]
    prompts: Arr<Obj<Keyed>>,
    #[serde(default, rename = "inputRequests")]
    input_requests: Option<Value>,
}

#[derive(Deserialize)]
struct Text {
    #[serde(default)]
    text: Scalar,
}

/// A list item: the field naming it is `name`, `uri` or `uriTemplate` by its kind.
#[derive(Deserialize)]
struct Keyed {
    #[serde(default)]
    name: Scalar,
    #[serde(default)]
    uri: Scalar,
    #[serde(default, rename = "uriTemplate")]
    uri_template: Scalar,
}

#[derive(Deserialize)]
struct ParamsBody {
    #[serde(default)]
    mode: Scalar,
    #[serde(default, rename = "requestedSchema")]
    requested_schema: Option<Value>,
}

/// What a frame the gateway wrote says, as far as anyone in the world reads it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Written {
    /// The frame itself (for a violation's words).
    pub(super) frame: Bytes,
    /// `id`, when present (`null` included).
    pub(super) id: Option<Value>,
    /// `method`, when a string.
    pub(super) method: Option<String>,
    /// `error` is present.
    pub(super) error: bool,
    /// `/error/code`, when an integer.
    pub(super) code: Option<i64>,
    /// `/result/isError` is `true`.
    pub(super) is_error: bool,
    /// `/result/content/0/text`, when a string.
    pub(super) text: Option<String>,
    /// `/result/resultType`, when a string.
    pub(super) result_type: Option<String>,
    /// `/result/requestState`, when a string.
    pub(super) request_state: Option<String>,
    /// `/result/nextCursor` is present.
    pub(super) more: bool,
    /// `/result/nextCursor`, when a string.
    pub(super) cursor: Option<String>,
    /// For each list kind (in `LIST_FIELDS` order): the result's items when an array, each
    /// item's key when a string.
    pub(super) items: [Option<Vec<Option<String>>>; 4],
    /// `/result/inputRequests`, when an object.
    pub(super) input_requests: Option<Map<String, Value>>,
    /// `/params/mode` is `"url"`.
    pub(super) url: bool,
    /// `/params/requestedSchema` (`null` when absent).
    pub(super) requested_schema: Value,
}

impl Written {
    /// Read a frame: `None` when it is not JSON.
    pub(super) fn read(frame: &Bytes) -> Option<Written> {
        let fast = Self::typed(frame);
        let reference = || {
            serde_json::from_slice::<Value>(frame)
                .ok()
                .map(|v| Written::of_value(&v, frame.clone()))
        };
        match fast {
            Some(w) => {
                debug_assert_eq!(
                    Some(&w),
                    reference().as_ref(),
                    "the typed reading of a frame says what its Value says"
                );
                Some(w)
            }
            None => reference(),
        }
    }

    /// The typed reading; `None` when it refuses the frame (not JSON, or a key it reads
    /// written twice), which [`Written::read`] then reads through a `Value`.
    fn typed(frame: &Bytes) -> Option<Written> {
        // Invalid UTF-8 can only be inside a string (anything else is not JSON), where a
        // `Value` would refuse it; the typed reading skips some strings unchecked.
        let text = std::str::from_utf8(frame).ok()?;
        let top: Obj<Top> = serde_json::from_str(text).ok()?;
        let mut w = Written::empty(frame.clone());
        let Some(top) = top.is else { return Some(w) };
        w.id = top.id.0;
        w.method = top.method.into_string();
        w.error = top.error.present;
        w.code = top.error.is.and_then(|e| e.code.as_i64());
        if let Some(r) = top.result.is {
            w.is_error = r.is_error == Scalar::Bool(true);
            w.text = r
                .content
                .0
                .and_then(|c| c.is)
                .and_then(|t| t.text.into_string());
            w.result_type = r.result_type.into_string();
            w.request_state = r.request_state.into_string();
            w.more = r.next_cursor.present();
            w.cursor = r.next_cursor.into_string();
            let keys = |a: Arr<Obj<Keyed>>, k: usize| {
                a.0.map(|items| {
                    items
                        .into_iter()
                        .map(|i| {
                            let i = i.is?;
                            match k {
                                0 | 3 => i.name,
                                1 => i.uri,
                                _ => i.uri_template,
                            }
                            .into_string()
                        })
                        .collect()
                })
            };
            w.items = [
                keys(r.tools, 0),
                keys(r.resources, 1),
                keys(r.resource_templates, 2),
                keys(r.prompts, 3),
            ];
            w.input_requests = match r.input_requests {
                Some(Value::Object(m)) => Some(m),
                _ => None,
            };
        }
        if let Some(p) = top.params.is {
            w.url = p.mode.as_str() == Some("url");
            w.requested_schema = p.requested_schema.unwrap_or(Value::Null);
        }
        Some(w)
    }

    fn empty(frame: Bytes) -> Written {
        Written {
            frame,
            id: None,
            method: None,
            error: false,
            code: None,
            is_error: false,
            text: None,
            result_type: None,
            request_state: None,
            more: false,
            cursor: None,
            items: Default::default(),
            input_requests: None,
            url: false,
            requested_schema: Value::Null,
        }
    }

    /// What the lookups on the frame's `Value` say (the reference for the typed reading).
    pub(super) fn of_value(v: &Value, frame: Bytes) -> Written {
        let str_at = |p: &str| v.at(p).and_then(Value::as_str).map(str::to_string);
        let result = v.get("result");
        Written {
            frame,
            id: v.get("id").cloned(),
            method: v.get("method").and_then(Value::as_str).map(str::to_string),
            error: v.get("error").is_some(),
            code: v.at("/error/code").and_then(Value::as_i64),
            is_error: v.at("/result/isError") == Some(&Value::Bool(true)),
            text: str_at("/result/content/0/text"),
            result_type: str_at("/result/resultType"),
            request_state: str_at("/result/requestState"),
            more: result.and_then(|r| r.get("nextCursor")).is_some(),
            cursor: str_at("/result/nextCursor"),
            items: std::array::from_fn(|k| {
                let (field, name) = LIST_FIELDS[k];
                result
                    .and_then(|r| r.get(field))
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .map(|i| i.get(name).and_then(Value::as_str).map(str::to_string))
                            .collect()
                    })
            }),
            input_requests: v
                .at("/result/inputRequests")
                .and_then(Value::as_object)
                .cloned(),
            url: v.at("/params/mode") == Some(&Value::String("url".into())),
            requested_schema: v
                .at("/params/requestedSchema")
                .cloned()
                .unwrap_or(Value::Null),
        }
    }

    /// The frame as an answer to a list of kind `k`, as the judge reads it.
    pub(super) fn page(&self, k: usize) -> Page<'_> {
        Page {
            error: self.error,
            items: self.items[k].as_deref(),
            more: self.more,
        }
    }

    /// The frame as a `Value` shows it (for a violation's words).
    pub(super) fn shown(&self) -> String {
        serde_json::from_slice::<Value>(&self.frame)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| String::from_utf8_lossy(&self.frame).into_owned())
    }
}

/// `{}`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(super) struct Empty {}

/// A client's capabilities (only what it declared is written).
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Caps {
    #[serde(skip_serializing_if = "Option::is_none")]
    elicitation: Option<Modes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    roots: Option<Empty>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sampling: Option<Empty>,
}

#[derive(Debug, Clone, Serialize)]
struct Modes {
    #[serde(skip_serializing_if = "Option::is_none")]
    form: Option<Empty>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<Empty>,
}

impl Caps {
    pub(super) fn new(sampling: bool, roots: bool, form: bool, url: bool) -> Caps {
        let on = |b: bool| b.then_some(Empty {});
        Caps {
            elicitation: (form || url).then_some(Modes {
                form: on(form),
                url: on(url),
            }),
            roots: on(roots),
            sampling: on(sampling),
        }
    }
}

/// `clientInfo`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Info {
    pub(super) name: String,
    pub(super) version: &'static str,
}

/// A stateless request's `_meta` (the keys are `switchboard_core::protocol`'s `META_*`; a
/// test checks they are the same).
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Meta {
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) caps: Option<Caps>,
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) info: Option<Info>,
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) level: Option<String>,
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) version: Option<&'static str>,
    #[serde(rename = "progressToken", skip_serializing_if = "Option::is_none")]
    pub(super) progress_token: Option<String>,
}

/// A tool call's or a prompt's `arguments`: `{"n": n}`, or `{}`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Args {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) n: Option<u64>,
}

/// A listen stream's `notifications`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Listen {
    pub(super) prompts_list_changed: bool,
    pub(super) resource_subscriptions: Vec<String>,
    pub(super) resources_list_changed: bool,
    pub(super) tools_list_changed: bool,
}

/// The params of every request or notification a client writes, its fields in the order
/// `serde_json` writes a `Value`'s keys; absent ones are not written.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Params {
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub(super) meta: Option<Meta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: Option<Args>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) capabilities: Option<Caps>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) client_info: Option<Info>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) input_responses: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) notifications: Option<Listen>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) protocol_version: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) request_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) request_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) uri: Option<String>,
}

impl Params {
    pub(super) fn cursor(cursor: Option<String>) -> Params {
        Params {
            cursor,
            ..Params::default()
        }
    }

    pub(super) fn uri(uri: String) -> Params {
        Params {
            uri: Some(uri),
            ..Params::default()
        }
    }

    /// A prompt's `{"arguments": {}, "name": name}`.
    pub(super) fn prompt(name: String) -> Params {
        Params {
            arguments: Some(Args { n: None }),
            name: Some(name),
            ..Params::default()
        }
    }

    /// A tool call's `{"arguments": {"n": n}, "name": name}`, with a progress token when
    /// asked.
    pub(super) fn call(name: String, n: u64, progress: Option<String>) -> Params {
        Params {
            meta: progress.map(|t| Meta {
                progress_token: Some(t),
                ..Meta::default()
            }),
            arguments: Some(Args { n: Some(n) }),
            name: Some(name),
            ..Params::default()
        }
    }
}

#[derive(Serialize)]
struct Request<'a> {
    id: u64,
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a Params,
}

#[derive(Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Params>,
}

/// What the world reads of a message a client writes (instead of parsing it back).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sent {
    /// `id`, when present.
    pub(super) id: Option<Value>,
    /// `method`, when a string.
    pub(super) method: Option<String>,
    /// `/params/cursor` is present.
    pub(super) cursor: bool,
    /// `/params/requestState` (the clients write only strings there).
    pub(super) request_state: Option<String>,
}

impl Sent {
    /// What the lookups on a message's `Value` say.
    pub(super) fn of_value(v: &Value) -> Sent {
        Sent {
            id: v.get("id").cloned(),
            method: v.get("method").and_then(Value::as_str).map(str::to_string),
            cursor: v.at("/params/cursor").is_some(),
            request_state: v
                .at("/params/requestState")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    /// Debug builds: `frame` is the canonical writing of a `Value` (what writing that
    /// `Value` gives, byte for byte) that says what `self` says.
    fn checked(self, frame: &[u8]) -> Sent {
        if cfg!(debug_assertions) {
            let v: Value = serde_json::from_slice(frame).expect("a client writes JSON");
            assert_eq!(
                serde_json::to_vec(&v).expect("writable"),
                frame,
                "a client's message is written as its Value would be"
            );
            assert_eq!(
                Sent::of_value(&v),
                self,
                "a client's message says what it sent"
            );
            assert_eq!(
                v.at("/params/requestState").is_some(),
                self.request_state.is_some()
            );
        }
        self
    }
}

/// A client's request, written.
pub(super) fn request(id: u64, method: &str, params: &Params) -> (Bytes, Sent) {
    let r = Request {
        id,
        jsonrpc: "2.0",
        method,
        params,
    };
    let frame = serde_json::to_vec(&r).unwrap_or_default();
    let sent = Sent {
        id: Some(Value::from(id)),
        method: Some(method.to_string()),
        cursor: params.cursor.is_some(),
        request_state: params.request_state.clone(),
    }
    .checked(&frame);
    (Bytes::from(frame), sent)
}

/// A client's notification, written.
pub(super) fn notification(method: &str, params: Option<&Params>) -> (Bytes, Sent) {
    let n = Notification {
        jsonrpc: "2.0",
        method,
        params,
    };
    let frame = serde_json::to_vec(&n).unwrap_or_default();
    let sent = Sent {
        id: None,
        method: Some(method.to_string()),
        cursor: params.is_some_and(|p| p.cursor.is_some()),
        request_state: params.and_then(|p| p.request_state.clone()),
    }
    .checked(&frame);
    (Bytes::from(frame), sent)
}

/// A message a client builds as a `Value` (its answers to forwarded requests), written.
pub(super) fn message(v: &Value) -> (Bytes, Sent) {
    let frame = serde_json::to_vec(v).unwrap_or_default();
    (Bytes::from(frame), Sent::of_value(v))
}
