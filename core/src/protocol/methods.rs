//! The MCP methods the client speaks: `initialize` (params out, answer checked for a supported
//! version), `tools/list` params, `tools/call` (params out, result kept byte for byte), and the
//! answers to what a server may ask of us (`ping`, `roots/list`).

use super::message::malformed;
use super::{
    codes, encode_error, encode_result, PeerRequestId, ProtocolError, PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
};
use crate::tool::{RawJson, ToolResult};
use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// A root the client exposes to servers (`roots/list`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Root {
    /// The root's URI, a `file://` URI for a directory.
    pub uri: String,
    /// A name to show for it, if any.
    pub name: Option<String>,
}

/// `initialize` params: our client info, protocol version and capabilities (see
/// [`client_capabilities`](super::client_capabilities)).
pub fn initialize_params(
    client_version: &str,
    capabilities: super::ClientCapabilities,
) -> InitializeParams<'_> {
    InitializeParams {
        capabilities,
        client_info: super::ClientInfo::new(client_version),
        protocol_version: PROTOCOL_VERSION,
    }
}

/// `initialize` params (keys in byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct InitializeParams<'a> {
    /// What the client supports.
    pub capabilities: super::ClientCapabilities,
    /// Who the client is.
    #[serde(rename = "clientInfo")]
    pub client_info: super::ClientInfo<'a>,
    /// The revision asked for.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: &'static str,
}

/// What we keep of a server's `initialize` answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InitializeResult {
    /// The protocol version the server chose (one of [`SUPPORTED_VERSIONS`]).
    pub protocol_version: String,
    /// The server offers tools (its capabilities have a non-null `tools` member).
    pub has_tools: bool,
    /// The server will send `notifications/tools/list_changed` when its tools change.
    pub tools_list_changed: bool,
    /// `serverInfo.name`, when given.
    pub server_name: Option<String>,
    /// `serverInfo.version`, when given.
    pub server_version: Option<String>,
    /// The server's usage instructions for the model, when given.
    pub instructions: Option<String>,
    /// The server takes `tools/call` as a task (`capabilities.tasks.requests.tools.call`).
    pub tasks_tool_call: bool,
    /// Everything it declared in `capabilities`.
    pub capabilities: super::ServerCapabilities,
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
    // Member lookups, as the pointer `/capabilities/tasks/requests/tools/call` reads.
    let tasks_tool_call = ["capabilities", "tasks", "requests", "tools", "call"]
        .iter()
        .try_fold(v, |at, key| at.get(key))
        .is_some_and(|c| !c.is_null());
    Ok(InitializeResult::from_answer(
        version,
        v,
        v.get("serverInfo"),
        tasks_tool_call,
    ))
}

impl InitializeResult {
    /// What a server says of itself in a handshake answer (`initialize`'s result, or
    /// `server/discover`'s), once the version is chosen: `info` is its `serverInfo`.
    pub(crate) fn from_answer(
        version: &str,
        v: &Value,
        info: Option<&Value>,
        tasks_tool_call: bool,
    ) -> InitializeResult {
        let caps = v.get("capabilities");
        let tools = caps.and_then(|c| c.get("tools"));
        let s = |k: &str| {
            info.and_then(|o| o.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        InitializeResult {
            protocol_version: version.to_string(),
            has_tools: tools.is_some_and(|t| !t.is_null()),
            tools_list_changed: tools
                .and_then(|t| t.get("listChanged"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            server_name: s("name"),
            server_version: s("version"),
            instructions: v
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
            tasks_tool_call,
            capabilities: super::ServerCapabilities::parse(caps),
        }
    }
}

/// `tools/call` params; arguments default to `{}`; `task` asks for the call to run as a
/// task (keys in byte order).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CallToolParams<'a> {
    /// The arguments as the embedder gave them.
    #[serde(serialize_with = "object_or_empty")]
    pub arguments: Option<&'a Value>,
    /// The server's own name for the tool.
    pub name: &'a str,
    /// `{}` to ask for a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<super::Empty>,
}

/// `tools/call` params of `name` with `arguments`.
pub fn call_tool_params<'a>(name: &'a str, arguments: Option<&'a Value>) -> CallToolParams<'a> {
    CallToolParams {
        arguments,
        name,
        task: None,
    }
}

fn object_or_empty<S: serde::Serializer>(v: &Option<&Value>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    match v {
        Some(v) => v.serialize(s),
        None => super::Empty {}.serialize(s),
    }
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
        "roots/list" => encode_result(id, super::roots_result(roots)),
        other => encode_error(
            id,
            codes::METHOD_NOT_FOUND,
            &format!("Method not found: {other}"),
        ),
    }
}
