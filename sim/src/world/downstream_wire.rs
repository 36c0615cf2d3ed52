//! The serving side's frames without `serde_json::Value` round trips.
//!
//! A frame the gateway writes is read once, into a [`Written`]: only the fields the judge and
//! the clients use, in one scan of its bytes (`super::downstream_scan`; a tool's
//! `inputSchema` is skipped, not built). A [`Written`] says what the lookups on the frame's
//! parsed `Value` say ([`Written::of_value`], which debug builds compute for every frame and
//! compare); a frame the scan does not read the way `serde_json` would is read through a
//! `Value` instead.
//!
//! A client's request is written straight to bytes from typed structs ([`Params`]) whose
//! fields are declared in the order `serde_json` writes a `Value`'s keys (sorted), so the
//! bytes are those the `Value` would have given (debug builds check that the bytes are the
//! canonical writing of what they parse to).

use super::downstream_scan::Results;
use crate::invariants::gateway::{Page, LIST_FIELDS};
use crate::json::At;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value};

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
    pub(super) fn read(frame: &Bytes, seen: &mut Results) -> Option<Written> {
        let fast = super::downstream_scan::scan(frame, seen);
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
                    "the scan of a frame says what its Value says"
                );
                Some(w)
            }
            None => reference(),
        }
    }

    /// Nothing read yet.
    pub(super) fn empty(frame: Bytes) -> Written {
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

    /// What `other`'s `result` said, as this one's.
    pub(super) fn result_from(&mut self, other: &Written) {
        self.is_error = other.is_error;
        self.text.clone_from(&other.text);
        self.result_type.clone_from(&other.result_type);
        self.request_state.clone_from(&other.request_state);
        self.more = other.more;
        self.cursor.clone_from(&other.cursor);
        self.items.clone_from(&other.items);
        self.input_requests.clone_from(&other.input_requests);
    }

    /// Forget what a `result` said (another one follows, which is the one read).
    pub(super) fn clear_result(&mut self) {
        self.is_error = false;
        self.text = None;
        self.result_type = None;
        self.request_state = None;
        self.more = false;
        self.cursor = None;
        self.items = Default::default();
        self.input_requests = None;
    }

    /// What the lookups on the frame's `Value` say (the reference for the scan).
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

/// A JSON-RPC id as the text the observers key requests by: what `id.to_string()` writes
/// (compact JSON), written without going through `fmt` (builds with debug assertions
/// compare).
pub(super) fn id_key(id: &Value) -> String {
    let key = serde_json::to_string(id).unwrap_or_default();
    debug_assert_eq!(key, id.to_string());
    key
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

/// A stateless client's envelope: the entries of its requests' `_meta` that are the same in
/// every request it sends, written once (without the braces).
pub(super) fn envelope(meta: &Meta) -> std::sync::Arc<str> {
    let whole = serde_json::to_string(meta).unwrap_or_default();
    let inner = whole
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or_default();
    std::sync::Arc::from(inner)
}

/// A stateless client's request, written around its envelope: `params` with `_meta` holding
/// the envelope's entries and then its own (a progress token, which sorts after them).
/// Debug builds check the bytes are those of `params` with the envelope merged in.
pub(super) fn enveloped(
    id: u64,
    method: &str,
    params: &Params,
    envelope: &str,
    merged: impl FnOnce() -> Params,
) -> (Bytes, Sent) {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(160 + envelope.len());
    let _ = write!(out, "{{\"id\":{id},\"jsonrpc\":\"2.0\",\"method\":");
    let _ = serde_json::to_writer(&mut out, method);
    out.extend_from_slice(b",\"params\":{\"_meta\":{");
    out.extend_from_slice(envelope.as_bytes());
    let token = params.meta.as_ref().and_then(|m| m.progress_token.as_ref());
    if let Some(token) = token {
        out.extend_from_slice(b",\"progressToken\":");
        let _ = serde_json::to_writer(&mut out, token);
    }
    out.push(b'}');
    let rest = serde_json::to_vec(&Params {
        meta: None,
        ..params.clone()
    })
    .unwrap_or_default();
    match rest.get(1..) {
        Some(inner) if rest.len() > 2 => {
            out.push(b',');
            out.extend_from_slice(inner);
        }
        _ => out.push(b'}'),
    }
    out.push(b'}');
    let sent = Sent {
        id: Some(Value::from(id)),
        method: Some(method.to_string()),
        cursor: params.cursor.is_some(),
        request_state: params.request_state.clone(),
    };
    if cfg!(debug_assertions) {
        let (whole, whole_sent) = request(id, method, &merged());
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&whole),
            "a request written around its envelope is the request with it merged in"
        );
        assert_eq!(sent, whole_sent);
    }
    (Bytes::from(out), sent)
}
