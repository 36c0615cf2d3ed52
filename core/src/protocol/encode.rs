//! Outgoing frames: our requests and notifications, and our answers to a server's requests.
//! Each is one JSON object serialized once into the bytes the shell writes.

use super::PeerRequestId;
use bytes::Bytes;
use serde_json::{json, Map, Value};

/// One JSON value as a frame.
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

/// A request frame whose params are JSON text already (spliced in as they are).
pub fn encode_request_text(id: u64, method: &str, params: &str) -> Bytes {
    let method = serde_json::to_string(method).unwrap_or_else(|_| "\"\"".into());
    Bytes::from(format!(
        r#"{{"id":{id},"jsonrpc":"2.0","method":{method},"params":{params}}}"#
    ))
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
