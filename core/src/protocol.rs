//! The MCP JSON-RPC codec, client side, sans-IO.
//!
//! One JSON value per frame (the shell does newline framing for stdio and SSE parsing for
//! HTTP). This module turns typed requests into frames and frames into typed messages, and
//! tracks a connection's outstanding requests by id ([`RequestTracker`]). It never panics on
//! what a server sends: anything malformed becomes a [`DecodeError`] the manager reports.

use crate::tool::{ToolDef, ToolResult};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

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
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// An answer to one of our requests. `id` is `None` when the server's id was not one we
    /// could have issued (not a non-negative integer).
    Response {
        id: Option<u64>,
        result: Result<Value, RpcError>,
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

/// Decode one frame.
pub fn decode(frame: &[u8], max_len: usize) -> Result<Incoming, DecodeError> {
    if frame.len() > max_len {
        return Err(DecodeError::TooLarge {
            len: frame.len(),
            limit: max_len,
        });
    }
    let value: Value =
        serde_json::from_slice(frame).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => return Err(DecodeError::Batch),
        other => {
            return Err(DecodeError::NotJsonRpc(format!(
                "expected an object, got {}",
                kind_of(&other)
            )))
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(DecodeError::NotJsonRpc(
            "missing \"jsonrpc\": \"2.0\"".into(),
        ));
    }
    // The frame's object is ours: move its parts out rather than deep-cloning them (a
    // `tools/list` result is the whole tool list).
    match (obj.remove("method"), obj.remove("id")) {
        (Some(Value::String(method)), Some(id)) if !id.is_null() => Ok(Incoming::Request {
            id: PeerRequestId(id),
            method,
            params: obj.remove("params").unwrap_or(Value::Null),
        }),
        (Some(Value::String(method)), _) => Ok(Incoming::Notification(decode_notification(
            &method,
            obj.get("params").unwrap_or(&Value::Null),
        ))),
        (Some(_), _) => Err(DecodeError::NotJsonRpc("\"method\" is not a string".into())),
        (None, id) => {
            let id = id.as_ref().and_then(id_as_u64);
            let result = if let Some(err) = obj.get("error") {
                Err(decode_rpc_error(err))
            } else if let Some(result) = obj.remove("result") {
                Ok(result)
            } else {
                return Err(DecodeError::NotJsonRpc(
                    "neither \"method\", \"result\" nor \"error\"".into(),
                ));
            };
            Ok(Incoming::Response { id, result })
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

pub fn parse_initialize_result(v: &Value) -> Result<InitializeResult, ProtocolError> {
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

/// Parse one page of `tools/list`.
pub fn parse_list_tools_result(v: &Value) -> Result<ToolsPage, ProtocolError> {
    let tools = v
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("tools/list", "missing \"tools\" array"))?;
    let mut out = Vec::with_capacity(tools.len());
    let mut skipped = Vec::new();
    for t in tools {
        // Deserialize from the borrowed value: no deep clone of each definition.
        match ToolDef::deserialize(t) {
            Ok(def) if !def.name.is_empty() => out.push(def),
            _ => skipped.push(
                t.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)")
                    .to_string(),
            ),
        }
    }
    let next = match v.get("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(malformed(
                "tools/list",
                format!("nextCursor is {}", kind_of(other)),
            ))
        }
    };
    Ok(ToolsPage {
        tools: out,
        next_cursor: next,
        skipped,
    })
}

/// `tools/call` params; arguments default to `{}`.
pub fn call_tool_params(name: &str, arguments: Option<Value>) -> Value {
    json!({
        "name": name,
        "arguments": arguments.unwrap_or_else(|| json!({})),
    })
}

pub fn parse_call_tool_result(v: &Value) -> Result<ToolResult, ProtocolError> {
    ToolResult::deserialize(v).map_err(|e| malformed("tools/call", e.to_string()))
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
                result: Ok(json!({"a":1}))
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
        let ok = parse_initialize_result(&json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "s", "version": "1"}
        }))
        .unwrap();
        assert!(ok.has_tools && ok.tools_list_changed);
        assert_eq!(
            parse_initialize_result(&json!({"protocolVersion": "1999-01-01", "capabilities": {}})),
            Err(ProtocolError::UnsupportedVersion("1999-01-01".into()))
        );
    }

    #[test]
    fn list_tools_page_parses_cursor_and_skips_bad_tools() {
        let page = parse_list_tools_result(&json!({
            "tools": [{"name": "a", "inputSchema": {"type": "object"}}, {"nope": 1}],
            "nextCursor": "p2"
        }))
        .unwrap();
        assert_eq!(page.tools.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("p2"));
        assert_eq!(page.skipped, vec!["(unnamed)".to_string()]);
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
