//! The MCP JSON-RPC codec, client side, sans-IO.
//!
//! One JSON value per frame (the shell does newline framing for stdio and SSE parsing for
//! HTTP). This module turns typed requests into frames and frames into typed messages, and
//! tracks a connection's outstanding requests by id ([`RequestTracker`]). It never panics on
//! what a server sends: anything malformed becomes a [`DecodeError`] the manager reports.

use crate::tool::{RawJson, ToolDef, ToolResult};
use bytes::Bytes;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The protocol version we ask for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// Versions we accept in a server's `initialize` answer.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Default limit on one frame (16 MiB).
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Most `tools/list` pages we follow before calling the server broken.
pub const MAX_TOOL_PAGES: usize = 1000;

/// JSON-RPC error codes we use.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC error object as a server sent it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP error {}: {}", self.code, self.message)
    }
}

/// The id of a request the *server* sent us; echoed back verbatim in our answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeerRequestId(pub Value);

/// A message decoded from one frame.
#[derive(Debug, Clone)]
pub enum Incoming {
    /// An answer to one of our requests. `id` is `None` when the server's id was not one we
    /// could have issued (not a non-negative integer). The result stays raw JSON text until
    /// the request it answers says how to read it (`parse_*_result`): a `tools/list` answer
    /// is never built into a `Value` tree.
    Response {
        id: Option<u64>,
        result: Result<Box<RawValue>, RpcError>,
    },
    /// An answer to one of our requests whose `result` [`decode_expecting`] read as a
    /// `tools/list` page (what [`parse_list_tools_result`] gives for it).
    ToolsPage {
        id: u64,
        page: Result<ToolsPage, ProtocolError>,
    },
    /// A request from the server (ping, roots/list, sampling, ...).
    Request {
        id: PeerRequestId,
        method: String,
        params: Value,
    },
    /// A notification from the server.
    Notification(ServerNotification),
}

/// Results compare by their JSON text.
impl PartialEq for Incoming {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Incoming::Response { id: a, result: ra },
                Incoming::Response { id: b, result: rb },
            ) => {
                a == b
                    && match (ra, rb) {
                        (Ok(x), Ok(y)) => x.get() == y.get(),
                        (Err(x), Err(y)) => x == y,
                        _ => false,
                    }
            }
            (
                Incoming::Request {
                    id: a,
                    method: ma,
                    params: pa,
                },
                Incoming::Request {
                    id: b,
                    method: mb,
                    params: pb,
                },
            ) => a == b && ma == mb && pa == pb,
            (Incoming::ToolsPage { id: a, page: pa }, Incoming::ToolsPage { id: b, page: pb }) => {
                a == b && pa == pb
            }
            (Incoming::Notification(a), Incoming::Notification(b)) => a == b,
            _ => false,
        }
    }
}

/// The notifications a server may send that we act on or surface.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum ServerNotification {
    ToolsListChanged,
    Progress {
        token: Value,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Message {
        level: String,
        logger: Option<String>,
        data: Value,
    },
    /// The server cancelled a request it had sent us.
    Cancelled {
        request_id: Value,
    },
    Other {
        method: String,
    },
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum DecodeError {
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    #[error("frame is not JSON: {0}")]
    NotJson(String),
    #[error("frame is not a JSON-RPC 2.0 message: {0}")]
    NotJsonRpc(String),
    #[error("JSON-RPC batches are not supported")]
    Batch,
}

/// How [`decode_expecting`] reads the `result` of an answer to one of our request ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Keep it raw ([`Incoming::Response`]).
    Raw,
    /// Read it as a `tools/list` page while the frame is parsed ([`Incoming::ToolsPage`]).
    ToolsPage,
}

/// The members of a JSON-RPC message the codec looks at. `result` is kept as raw text (the
/// parser only validates it) or, when the id before it says so, read as a `tools/list` page
/// on the spot; the others are small and become `Value`s. A repeated member keeps its last
/// value, as a `Value` object would.
#[derive(Default)]
struct Envelope {
    jsonrpc: Option<Value>,
    method: Option<Value>,
    id: Option<Value>,
    params: Option<Value>,
    error: Option<Value>,
    result: Option<Box<RawValue>>,
    /// `result` read as a page, with the id that asked for it.
    page: Option<(u64, PageParts)>,
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
                Member::Jsonrpc => e.jsonrpc = Some(map.next_value()?),
                Member::Method => e.method = Some(map.next_value()?),
                Member::Id => e.id = Some(map.next_value()?),
                Member::Params => e.params = Some(map.next_value()?),
                Member::Error => e.error = Some(map.next_value()?),
                Member::Result => {
                    let page_for = match (&e.method, &e.id) {
                        (None, Some(id)) => {
                            id_as_u64(id).filter(|&id| (self.expect)(id) == Expect::ToolsPage)
                        }
                        _ => None,
                    };
                    (e.result, e.page) = match page_for {
                        Some(id) => (None, Some((id, map.next_value()?))),
                        None => (Some(map.next_value()?), None),
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
/// way the outcome is the same as `decode` followed by `parse_list_tools_result`.
pub fn decode_expecting(
    frame: &[u8],
    max_len: usize,
    expect: &dyn Fn(u64) -> Expect,
) -> Result<Incoming, DecodeError> {
    decode_frame(frame, max_len, Some(expect))
}

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
        // Reading a page parses its names and descriptions, which is stricter than only
        // validating them (a lone surrogate escape, a number out of range): decode such a
        // frame as `decode` does, so the answer is the same whichever way it was read.
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
    if obj.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
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
        (Some(Value::String(method)), _) => Ok(Incoming::Notification(decode_notification(
            &method,
            obj.params.as_ref().unwrap_or(&Value::Null),
        ))),
        (Some(_), _) => Err(DecodeError::NotJsonRpc("\"method\" is not a string".into())),
        (None, id) => {
            let id = id.as_ref().and_then(id_as_u64);
            if let Some(err) = &obj.error {
                return Ok(Incoming::Response {
                    id,
                    result: Err(decode_rpc_error(err)),
                });
            }
            match (obj.page, obj.result) {
                (Some((page_id, parts)), _) if Some(page_id) == id => Ok(Incoming::ToolsPage {
                    id: page_id,
                    page: page_from_parts(parts),
                }),
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

/// Our ids are non-negative integers; some servers echo them as strings.
fn id_as_u64(id: &Value) -> Option<u64> {
    match id {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

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
        "notifications/cancelled" => ServerNotification::Cancelled {
            request_id: params.get("requestId").cloned().unwrap_or(Value::Null),
        },
        other => ServerNotification::Other {
            method: other.to_string(),
        },
    }
}

fn to_frame(value: &Value) -> Bytes {
    // Serializing a `Value` cannot fail.
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// A request frame.
pub fn encode_request(id: u64, method: &str, params: Option<Value>) -> Bytes {
    /// Serialized directly (no intermediate `Map`). Fields in the order a `Map` sorts its keys,
    /// so the bytes are the same as before.
    #[derive(serde::Serialize)]
    struct Request<'a> {
        id: u64,
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<Value>,
    }
    let req = Request {
        id,
        jsonrpc: "2.0",
        method,
        params,
    };
    // Serializing these fields cannot fail.
    Bytes::from(serde_json::to_vec(&req).unwrap_or_default())
}

/// A notification frame.
pub fn encode_notification(method: &str, params: Option<Value>) -> Bytes {
    let mut obj = Map::new();
    obj.insert("jsonrpc".into(), json!("2.0"));
    obj.insert("method".into(), json!(method));
    if let Some(p) = params {
        obj.insert("params".into(), p);
    }
    to_frame(&Value::Object(obj))
}

/// A successful answer to a server's request.
pub fn encode_result(id: &PeerRequestId, result: Value) -> Bytes {
    to_frame(&json!({"jsonrpc": "2.0", "id": id.0, "result": result}))
}

/// An error answer to a server's request.
pub fn encode_error(id: &PeerRequestId, code: i64, message: &str) -> Bytes {
    to_frame(&json!({"jsonrpc": "2.0", "id": id.0, "error": {"code": code, "message": message}}))
}

/// `notifications/cancelled` for one of our requests.
pub fn encode_cancelled(request_id: u64, reason: &str) -> Bytes {
    encode_notification(
        "notifications/cancelled",
        Some(json!({"requestId": request_id, "reason": reason})),
    )
}

/// A root the client exposes to servers (`roots/list`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Root {
    pub uri: String,
    pub name: Option<String>,
}

/// `initialize` params: our client info, protocol version and capabilities.
pub fn initialize_params(client_version: &str, roots: bool) -> Value {
    let mut caps = Map::new();
    if roots {
        caps.insert("roots".into(), json!({"listChanged": false}));
    }
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": Value::Object(caps),
        "clientInfo": {"name": "switchboard", "version": client_version},
    })
}

/// What we keep of a server's `initialize` answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InitializeResult {
    pub protocol_version: String,
    pub has_tools: bool,
    pub tools_list_changed: bool,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub instructions: Option<String>,
}

/// Why a result could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum ProtocolError {
    #[error("server answered with unsupported protocol version \"{0}\" (supported: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)")]
    UnsupportedVersion(String),
    #[error("malformed {method} result: {detail}")]
    Malformed { method: String, detail: String },
}

fn malformed(method: &str, detail: impl Into<String>) -> ProtocolError {
    ProtocolError::Malformed {
        method: method.into(),
        detail: detail.into(),
    }
}

/// Parse an `initialize` answer (a small object: read as a `Value`).
pub fn parse_initialize_result(raw: &RawValue) -> Result<InitializeResult, ProtocolError> {
    let v: Value =
        serde_json::from_str(raw.get()).map_err(|e| malformed("initialize", e.to_string()))?;
    let v = &v;
    let version = v
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("initialize", "missing protocolVersion"))?;
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(ProtocolError::UnsupportedVersion(version.to_string()));
    }
    let tools = v.get("capabilities").and_then(|c| c.get("tools"));
    let info = v.get("serverInfo");
    let s = |o: Option<&Value>, k: &str| {
        o.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(InitializeResult {
        protocol_version: version.to_string(),
        has_tools: tools.is_some_and(|t| !t.is_null()),
        tools_list_changed: tools
            .and_then(|t| t.get("listChanged"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        server_name: s(info, "name"),
        server_version: s(info, "version"),
        instructions: v
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// `tools/list` params for a page.
pub fn list_tools_params(cursor: Option<&str>) -> Option<Value> {
    cursor.map(|c| json!({ "cursor": c }))
}

/// One page of `tools/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsPage {
    pub tools: Vec<ToolDef>,
    /// The cursor of the next page, if any.
    pub next_cursor: Option<String>,
    /// Names of tool definitions that were malformed and skipped.
    pub skipped: Vec<String>,
}

/// Parse one page of `tools/list` straight from the answer's JSON text: each definition's
/// fields are read as they stream by, schemas and annotations are kept raw ([`RawJson`]), and
/// no `Value` tree of the page is ever built.
///
/// A definition is skipped (its name reported, or `(unnamed)`) when it is not an object, its
/// `name` is missing, empty or not a string, or its `title` or `description` is neither a
/// string nor null. A member given twice counts with its last value, as in a `Value` object.
pub fn parse_list_tools_result(raw: &RawValue) -> Result<ToolsPage, ProtocolError> {
    let parts: PageParts =
        serde_json::from_str(raw.get()).map_err(|e| malformed("tools/list", e.to_string()))?;
    page_from_parts(parts)
}

fn page_from_parts(parts: PageParts) -> Result<ToolsPage, ProtocolError> {
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
    })
}

/// What a `tools/list` page holds: `tools` is `None` unless it is an array.
#[derive(Default)]
struct PageParts {
    tools: Option<Vec<Listed>>,
    next_cursor: Option<Value>,
}

/// Consume the rest of a map or sequence nobody wants, keeping the parser in step.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
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
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Name => name = Some(map.next_value()?),
                        Key::Title => title = Some(map.next_value()?),
                        Key::Description => description = Some(map.next_value()?),
                        Key::InputSchema => input_schema = Some(map.next_value()?),
                        Key::OutputSchema => output_schema = Some(map.next_value()?),
                        Key::Annotations => annotations = Some(map.next_value()?),
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
                Ok(Listed(Ok(ToolDef {
                    name,
                    title,
                    description,
                    input_schema: input_schema.unwrap_or_else(RawJson::empty_object_schema),
                    output_schema: non_null(output_schema),
                    annotations: non_null(annotations),
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

/// `tools/call` params; arguments default to `{}`.
pub fn call_tool_params(name: &str, arguments: Option<Value>) -> Value {
    json!({
        "name": name,
        "arguments": arguments.unwrap_or_else(|| json!({})),
    })
}

/// Parse a `tools/call` answer straight from its JSON text.
pub fn parse_call_tool_result(raw: &RawValue) -> Result<ToolResult, ProtocolError> {
    let mut result: ToolResult =
        serde_json::from_str(raw.get()).map_err(|e| malformed("tools/call", e.to_string()))?;
    result.raw = Some(RawJson::from(raw.to_owned()));
    Ok(result)
}

/// The answer to a server→client request: `ping` → `{}`, `roots/list` → the roots, anything
/// else → -32601.
pub fn answer_peer_request(id: &PeerRequestId, method: &str, roots: &[Root]) -> Bytes {
    match method {
        "ping" => encode_result(id, json!({})),
        "roots/list" => {
            let list: Vec<Value> = roots
                .iter()
                .map(|r| match &r.name {
                    Some(n) => json!({"uri": r.uri, "name": n}),
                    None => json!({"uri": r.uri}),
                })
                .collect();
            encode_result(id, json!({ "roots": list }))
        }
        other => encode_error(
            id,
            codes::METHOD_NOT_FOUND,
            &format!("Method not found: {other}"),
        ),
    }
}

/// Outstanding requests of one connection: ids increase per connection and each response is
/// matched exactly once. `T` is what the caller wants back when the answer comes.
#[derive(Debug, Clone)]
pub struct RequestTracker<T> {
    next_id: u64,
    pending: BTreeMap<u64, T>,
}

impl<T> Default for RequestTracker<T> {
    fn default() -> Self {
        RequestTracker {
            next_id: 0,
            pending: BTreeMap::new(),
        }
    }
}

impl<T> RequestTracker<T> {
    /// Issue a request: returns its id and frame.
    pub fn start(&mut self, method: &str, params: Option<Value>, tag: T) -> (u64, Bytes) {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, tag);
        (id, encode_request(id, method, params))
    }

    /// Match a response; `None` for an unknown or already answered id.
    pub fn complete(&mut self, id: u64) -> Option<T> {
        self.pending.remove(&id)
    }

    /// Forget a request (timed out or cancelled); a late answer is then unknown.
    pub fn forget(&mut self, id: u64) -> Option<T> {
        self.pending.remove(&id)
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        self.pending.get(&id)
    }

    pub fn is_pending(&self, id: u64) -> bool {
        self.pending.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Has this id ever been issued?
    pub fn was_issued(&self, id: u64) -> bool {
        id < self.next_id
    }

    /// Remove and return every outstanding request, in id order.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        std::mem::take(&mut self.pending).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn decodes_responses_requests_and_notifications() {
        let r = decode(
            &frame(json!({"jsonrpc":"2.0","id":3,"result":{"a":1}})),
            1 << 20,
        );
        assert_eq!(
            r,
            Ok(Incoming::Response {
                id: Some(3),
                result: Ok(raw(json!({"a":1})))
            })
        );
        let e = decode(
            &frame(json!({"jsonrpc":"2.0","id":"4","error":{"code":-32601,"message":"nope"}})),
            1 << 20,
        )
        .unwrap();
        let Incoming::Response {
            id,
            result: Err(err),
        } = e
        else {
            panic!("expected an error response")
        };
        assert_eq!(id, Some(4));
        assert_eq!(err.to_string(), "MCP error -32601: nope");
        assert!(matches!(
            decode(&frame(json!({"jsonrpc":"2.0","id":"x","method":"ping"})), 1 << 20),
            Ok(Incoming::Request { ref method, .. }) if method == "ping"
        ));
        assert_eq!(
            decode(
                &frame(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
                1 << 20
            ),
            Ok(Incoming::Notification(ServerNotification::ToolsListChanged))
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            decode(b"hello", 100),
            Err(DecodeError::NotJson(_))
        ));
        assert!(matches!(decode(b"[]", 100), Err(DecodeError::Batch)));
        assert!(matches!(decode(b"3", 100), Err(DecodeError::NotJsonRpc(_))));
        assert!(matches!(
            decode(br#"{"id":1,"result":{}}"#, 100),
            Err(DecodeError::NotJsonRpc(_))
        ));
        assert!(matches!(
            decode(&[b' '; 101], 100),
            Err(DecodeError::TooLarge {
                len: 101,
                limit: 100
            })
        ));
    }

    #[test]
    fn initialize_rejects_unknown_versions() {
        let ok = parse_initialize_result(&raw(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "s", "version": "1"}
        })))
        .unwrap();
        assert!(ok.has_tools && ok.tools_list_changed);
        assert_eq!(
            parse_initialize_result(&raw(
                json!({"protocolVersion": "1999-01-01", "capabilities": {}})
            )),
            Err(ProtocolError::UnsupportedVersion("1999-01-01".into()))
        );
    }

    #[test]
    fn list_tools_page_parses_cursor_and_skips_bad_tools() {
        let page = parse_list_tools_result(&raw(json!({
            "tools": [{"name": "a", "inputSchema": {"type": "object"}}, {"nope": 1}],
            "nextCursor": "p2"
        })))
        .unwrap();
        assert_eq!(page.tools.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("p2"));
        assert_eq!(page.skipped, vec!["(unnamed)".to_string()]);
    }

    #[test]
    fn list_tools_page_keeps_schemas_as_sent() {
        let text = r#"{"tools":[
            {"name":"a","inputSchema":{"type":"object","properties":{"z":{},"a":{}}},
             "outputSchema":null,"annotations":{"readOnlyHint":true}},
            {"name":"b","title":3},
            {"name":"c","name":"d","description":null},
            ["e"],
            {"name":""}
        ],"nextCursor":null}"#;
        let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
        let page = parse_list_tools_result(&raw).unwrap();
        let names: Vec<&str> = page.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "d"]);
        let a = &page.tools[0];
        // Key order and text as the server sent them; `null` counts as absent.
        assert_eq!(
            a.input_schema.get(),
            r#"{"type":"object","properties":{"z":{},"a":{}}}"#
        );
        assert_eq!(a.output_schema, None);
        assert_eq!(
            a.annotations.as_ref().map(RawJson::get),
            Some(r#"{"readOnlyHint":true}"#)
        );
        // No schema listed: the empty object schema.
        assert_eq!(page.tools[1].input_schema.get(), r#"{"type":"object"}"#);
        assert_eq!(page.skipped, ["b", "(unnamed)", ""]);
        assert_eq!(page.next_cursor, None);
        for bad in [r#"{"tools":{}}"#, r#"[]"#, r#"{"tools":[],"nextCursor":1}"#] {
            let raw: Box<RawValue> = serde_json::from_str(bad).unwrap();
            assert!(parse_list_tools_result(&raw).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tools_list_answer_is_read_as_a_page_when_its_id_comes_first() {
        let result = json!({"tools": [{"name": "a"}, {"title": 1}], "nextCursor": "c"});
        let page = parse_list_tools_result(&raw(result.clone()));
        let pages = |id: u64| {
            if id == 7 {
                Expect::ToolsPage
            } else {
                Expect::Raw
            }
        };
        let text = |s: &str| s.replace("R", &result.to_string()).into_bytes();
        assert_eq!(
            decode_expecting(
                &text(r#"{"jsonrpc":"2.0","id":7,"result":R}"#),
                1 << 20,
                &pages
            ),
            Ok(Incoming::ToolsPage { id: 7, page })
        );
        // Another id, the result before the id, a repeated id, an error: the result stays raw
        // (or the error wins), exactly as `decode` reads the frame.
        for frame in [
            r#"{"jsonrpc":"2.0","id":8,"result":R}"#,
            r#"{"jsonrpc":"2.0","result":R,"id":7}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":R,"id":8}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":R,"id":null}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":R,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":R,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":R,"#,
        ] {
            let frame = text(frame);
            let got = decode_expecting(&frame, 1 << 20, &pages);
            assert!(!matches!(got, Ok(Incoming::ToolsPage { .. })));
            assert_eq!(got, decode(&frame, 1 << 20));
        }
        // Valid JSON that only a parse (not a validation) refuses, where a page reads it: the
        // frame decodes as `decode` reads it, and the page then fails to parse either way.
        for result in [
            r#"{"tools":[{"name":"\ud800"}]}"#,
            r#"{"tools":[{"name":"a","description":1e400}]}"#,
        ] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#);
            let got = decode_expecting(frame.as_bytes(), 1 << 20, &pages);
            assert_eq!(got, decode(frame.as_bytes(), 1 << 20));
            let Ok(Incoming::Response {
                result: Ok(raw), ..
            }) = got
            else {
                panic!("expected a raw result, got {got:?}")
            };
            assert!(parse_list_tools_result(&raw).is_err());
        }
    }

    #[test]
    fn peer_requests_get_answers() {
        let id = PeerRequestId(json!("srv-1"));
        let pong: Value = serde_json::from_slice(&answer_peer_request(&id, "ping", &[])).unwrap();
        assert_eq!(pong, json!({"jsonrpc":"2.0","id":"srv-1","result":{}}));
        let roots = [Root {
            uri: "file:///p".into(),
            name: Some("p".into()),
        }];
        let r: Value =
            serde_json::from_slice(&answer_peer_request(&id, "roots/list", &roots)).unwrap();
        assert_eq!(r["result"]["roots"][0]["uri"], "file:///p");
        let e: Value =
            serde_json::from_slice(&answer_peer_request(&id, "sampling/createMessage", &[]))
                .unwrap();
        assert_eq!(e["error"]["code"], -32601);
    }

    #[test]
    fn tracker_matches_each_response_once() {
        let mut t = RequestTracker::default();
        let (a, _) = t.start("ping", None, "a");
        let (b, _) = t.start("ping", None, "b");
        assert_eq!((a, b), (0, 1));
        assert_eq!(t.complete(b), Some("b"));
        assert_eq!(t.complete(b), None);
        assert!(t.was_issued(a) && !t.was_issued(7));
    }
}
