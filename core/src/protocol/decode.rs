//! Frame decoding: one frame's JSON-RPC envelope is read in a single pass, the members the
//! codec looks at are kept and the rest skipped, and a `result` stays raw text unless the id
//! before it answers a `tools/list` request, in which case the page is read on the spot, or a
//! request whose reader takes a `Value`, in which case it is read as one. Any frame that reads
//! differently that way is read again the plain way, so both ways agree.

use super::codes;
use super::message::{DecodeError, Incoming, PeerRequestId, RpcError, ServerNotification};
use super::tools_list::{drain_seq, page_from_parts, PageParts};
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

/// How [`decode_expecting`] reads the `result` of an answer to one of our request ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Keep it raw ([`Incoming::Response`]).
    Raw,
    /// Read it as a `tools/list` page while the frame is parsed ([`Incoming::ToolsPage`]).
    ToolsPage,
    /// Read it as a `Value` while the frame is parsed ([`Incoming::Value`]), for a reader
    /// that takes the result as a `Value` anyway: no raw copy to parse again.
    Value,
}

/// A `result` read while the frame was parsed, for the id before it.
enum Read {
    Page(PageParts),
    Value(Value),
}

/// The members of a JSON-RPC message the codec looks at. `result` is kept as raw text (the
/// parser only validates it) or, when the id before it says so, read as a `tools/list` page
/// or a `Value` on the spot; the others are small and become `Value`s. A repeated member keeps its last
/// value, as a `Value` object would.
#[derive(Default)]
struct Envelope {
    /// `jsonrpc`, when present: whether it is the string `"2.0"`.
    jsonrpc: Option<bool>,
    method: Option<Value>,
    id: Option<Value>,
    params: Option<Value>,
    error: Option<Value>,
    result: Option<Box<RawValue>>,
    /// `result` read as a page or a `Value`, with the id that asked for it.
    read: Option<(u64, Read)>,
}

/// A frame's top-level value: an object's envelope, or what else it was. Lives on the stack
/// for one decode; boxing the envelope would cost an allocation per frame.
#[allow(clippy::large_enum_variant)]
enum Top {
    Object(Envelope),
    Array,
    Other(&'static str),
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Jsonrpc,
    Method,
    Id,
    Params,
    Error,
    Result,
    #[serde(other)]
    Other,
}

/// Whether a value is the string `"2.0"`; any other value is read whole, as a `Value`.
pub(crate) struct IsVersion2(pub(crate) bool);

impl<'de> Deserialize<'de> for IsVersion2 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IsVersion2;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IsVersion2, E> {
                Ok(IsVersion2(s == "2.0"))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_unit<E: de::Error>(self) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsVersion2, A::Error> {
                while seq.next_element::<Value>()?.is_some() {}
                Ok(IsVersion2(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IsVersion2, A::Error> {
                while map.next_entry::<String, Value>()?.is_some() {}
                Ok(IsVersion2(false))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Reads a frame's top-level value; `expect` says how to read a `result` whose id came first.
struct TopSeed<'a> {
    expect: &'a dyn Fn(u64) -> Expect,
}

impl<'de> de::DeserializeSeed<'de> for TopSeed<'_> {
    type Value = Top;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut e = Envelope::default();
        while let Some(key) = map.next_key::<Member>()? {
            match key {
                Member::Jsonrpc => e.jsonrpc = Some(map.next_value::<IsVersion2>()?.0),
                Member::Method => e.method = Some(map.next_value()?),
                Member::Id => e.id = Some(map.next_value()?),
                Member::Params => e.params = Some(map.next_value()?),
                Member::Error => e.error = Some(map.next_value()?),
                Member::Result => {
                    let read_for = match (&e.method, &e.id) {
                        (None, Some(id)) => id_as_u64(id).map(|id| (id, (self.expect)(id))),
                        _ => None,
                    };
                    (e.result, e.read) = match read_for {
                        Some((id, Expect::ToolsPage)) => {
                            (None, Some((id, Read::Page(map.next_value()?))))
                        }
                        Some((id, Expect::Value)) => {
                            (None, Some((id, Read::Value(map.next_value()?))))
                        }
                        Some((_, Expect::Raw)) | None => (Some(map.next_value()?), None),
                    };
                }
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top::Object(e))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        drain_seq(seq).map(|()| Top::Array)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Other("null"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other("a boolean"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other("a string"))
    }
}

/// Decode one frame; every `result` stays raw ([`Incoming::Response`]).
pub fn decode(frame: &[u8], max_len: usize) -> Result<Incoming, DecodeError> {
    decode_frame(frame, max_len, None)
}

/// Decode one frame, reading the `result` of an answer to request id `n` the way `expect(n)`
/// says. A `tools/list` page is then read while the frame is parsed: its bytes are scanned
/// once, and it comes back as [`Incoming::ToolsPage`]. That needs the id before the result
/// (as servers write it); otherwise, or for [`Expect::Raw`], the answer is an
/// [`Incoming::Response`] as from [`decode`], and [`parse_list_tools_result`] reads it. Either
/// way the outcome is the same as `decode` followed by `parse_list_tools_result`. Likewise
/// [`Expect::Value`] gives [`Incoming::Value`] with what `serde_json::from_str` gives for the
/// raw result, when the id comes first and that reading succeeds, and `decode`'s answer
/// otherwise.
///
/// [`parse_list_tools_result`]: super::parse_list_tools_result
pub fn decode_expecting(
    frame: &[u8],
    max_len: usize,
    expect: &dyn Fn(u64) -> Expect,
) -> Result<Incoming, DecodeError> {
    decode_frame(frame, max_len, Some(expect))
}

/// [`decode`] when `expect` is `None`, [`decode_expecting`] otherwise.
fn decode_frame(
    frame: &[u8],
    max_len: usize,
    expect: Option<&dyn Fn(u64) -> Expect>,
) -> Result<Incoming, DecodeError> {
    let raw_only = expect.is_none();
    let expect = expect.unwrap_or(&|_| Expect::Raw);
    if frame.len() > max_len {
        return Err(DecodeError::TooLarge {
            len: frame.len(),
            limit: max_len,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(frame);
    let top = match de::DeserializeSeed::deserialize(TopSeed { expect }, &mut de)
        .and_then(|top| de.end().map(|()| top))
    {
        Ok(top) => top,
        // Reading a page or a `Value` parses its strings and numbers, which is stricter than
        // only validating them (a lone surrogate escape, a number out of range, nesting past
        // the limit counted from the frame): decode such a frame as `decode` does, so the
        // answer is the same whichever way it was read.
        Err(_) if !raw_only => return decode_frame(frame, max_len, None),
        Err(e) => return Err(DecodeError::NotJson(e.to_string())),
    };
    let obj = match top {
        Top::Object(o) => o,
        Top::Array => return Err(DecodeError::Batch),
        Top::Other(kind) => {
            return Err(DecodeError::NotJsonRpc(format!(
                "expected an object, got {kind}"
            )))
        }
    };
    if obj.jsonrpc != Some(true) {
        return Err(DecodeError::NotJsonRpc(
            "missing \"jsonrpc\": \"2.0\"".into(),
        ));
    }
    match (obj.method, obj.id) {
        (Some(Value::String(method)), Some(id)) if !id.is_null() => Ok(Incoming::Request {
            id: PeerRequestId(id),
            method,
            params: obj.params.unwrap_or(Value::Null),
        }),
        (Some(Value::String(method)), _) => {
            let params = obj.params.as_ref().unwrap_or(&Value::Null);
            let notification = decode_notification(&method, params);
            let subscription = params
                .get("_meta")
                .and_then(|m| m.get(super::modern::META_SUBSCRIPTION_ID))
                .and_then(Value::as_u64);
            Ok(match subscription {
                Some(subscription) => Incoming::Stream {
                    subscription,
                    notification,
                },
                None => Incoming::Notification(notification),
            })
        }
        (Some(_), _) => Err(DecodeError::NotJsonRpc("\"method\" is not a string".into())),
        (None, id) => {
            let id = id.as_ref().and_then(id_as_u64);
            if let Some(err) = &obj.error {
                return Ok(Incoming::Response {
                    id,
                    result: Err(decode_rpc_error(err)),
                });
            }
            match (obj.read, obj.result) {
                (Some((read_id, Read::Page(parts))), _) if Some(read_id) == id => {
                    Ok(Incoming::ToolsPage {
                        id: read_id,
                        page: page_from_parts(parts),
                    })
                }
                (Some((read_id, Read::Value(result))), _) if Some(read_id) == id => {
                    debug_assert!(
                        reads_as_raw(frame, max_len, read_id, &result),
                        "a result read as a Value while decoding differs from the raw one's"
                    );
                    Ok(Incoming::Value {
                        id: read_id,
                        result,
                    })
                }
                // A repeated "id" after the result changed which request this answers: read
                // the frame again, keeping the result raw (malformed frames only).
                (Some(_), _) => decode_frame(frame, max_len, None),
                (None, Some(result)) => Ok(Incoming::Response {
                    id,
                    result: Ok(result),
                }),
                (None, None) => Err(DecodeError::NotJsonRpc(
                    "neither \"method\", \"result\" nor \"error\"".into(),
                )),
            }
        }
    }
}

/// Whether `decode` reads `frame` as the answer to `id` whose raw result parses to `result`:
/// what [`Incoming::Value`] stands for (checked in debug builds).
fn reads_as_raw(frame: &[u8], max_len: usize, id: u64, result: &Value) -> bool {
    match decode_frame(frame, max_len, None) {
        Ok(Incoming::Response {
            id: Some(raw_id),
            result: Ok(raw),
        }) => {
            raw_id == id && serde_json::from_str::<Value>(raw.get()).ok().as_ref() == Some(result)
        }
        _ => false,
    }
}

/// The id of the answer a frame that failed to decode was meant to be, when one can still be
/// read: the frame read again with invalid UTF-8 replaced, as an object that has an `id` and
/// no `method` (a response). `None` for anything else (not JSON even so, a request, a
/// notification, an id that is not ours), so the caller can tell "fail this request" from
/// "the frame names nothing".
pub fn salvage_response_id(frame: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(frame);
    let value: Value = serde_json::from_str(&text).ok()?;
    let obj = value.as_object()?;
    if obj.contains_key("method") {
        return None;
    }
    obj.get("id").and_then(id_as_u64)
}

/// Our ids are non-negative integers; some servers echo them as strings.
fn id_as_u64(id: &Value) -> Option<u64> {
    match id {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A server's error object; a missing code or message gets a stand-in, never a failure.
fn decode_rpc_error(err: &Value) -> RpcError {
    RpcError {
        code: err
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(codes::INTERNAL_ERROR),
        message: err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_string(),
        data: err.get("data").cloned(),
    }
}

/// A notification by method; missing params read as their defaults.
fn decode_notification(method: &str, params: &Value) -> ServerNotification {
    match method {
        "notifications/tools/list_changed" => ServerNotification::ToolsListChanged,
        "notifications/progress" => ServerNotification::Progress {
            token: params.get("progressToken").cloned().unwrap_or(Value::Null),
            progress: params
                .get("progress")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        "notifications/message" => ServerNotification::Message {
            level: params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info")
                .to_string(),
            logger: params
                .get("logger")
                .and_then(Value::as_str)
                .map(str::to_string),
            data: params.get("data").cloned().unwrap_or(Value::Null),
        },
        "notifications/tasks/status" => ServerNotification::TaskStatus {
            params: params.clone(),
        },
        "notifications/elicitation/complete" => {
            match params.get("elicitationId").and_then(Value::as_str) {
                Some(id) => ServerNotification::ElicitationComplete {
                    elicitation_id: id.to_string(),
                },
                None => ServerNotification::Other {
                    method: method.to_string(),
                },
            }
        }
        "notifications/cancelled" => ServerNotification::Cancelled {
            request_id: params.get("requestId").cloned().unwrap_or(Value::Null),
        },
        "notifications/resources/list_changed" => ServerNotification::ResourcesListChanged,
        "notifications/prompts/list_changed" => ServerNotification::PromptsListChanged,
        "notifications/subscriptions/acknowledged" => ServerNotification::SubscriptionsAcknowledged,
        "notifications/resources/updated" => ServerNotification::ResourceUpdated {
            uri: params
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        },
        other => ServerNotification::Other {
            method: other.to_string(),
        },
    }
}
