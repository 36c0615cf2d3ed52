//! The MCP JSON-RPC codec, client side, sans-IO.
//!
//! One JSON value per frame (the shell does newline framing for stdio and SSE parsing for
//! HTTP). This module turns typed requests into frames and frames into typed messages, and
//! tracks a connection's outstanding requests by id ([`RequestTracker`]). It never panics on
//! what a server sends: anything malformed becomes a [`DecodeError`] the manager reports.
//!
//! The parts, each in its own file: the message types ([`Incoming`], [`ServerNotification`],
//! the errors); frame decoding, which reads the JSON-RPC envelope in one pass and can read a
//! `tools/list` answer as it goes; the streaming `tools/list` page reader; the encoding of
//! outgoing frames; the params and results of the MCP methods the client uses (`initialize`,
//! `tools/list`, `tools/call`, the resources, prompts, completion and logging methods, and the
//! server's `ping` and `roots/list`); the server's sampling and elicitation requests and the
//! client capabilities that offer them; and the tracker of
//! outstanding requests.

mod cache_hints;
mod call_result;
mod client_requests;
mod decode;
mod encode;
mod message;
mod methods;
mod modern;
mod prompts;
mod resources;
mod tools_list;
mod tracker;

pub use cache_hints::{cache_hint, CacheHint, CacheScope, MAX_CACHE_TTL};
pub use call_result::{read_call_answer, CallAnswer};
pub use client_requests::{
    client_capabilities, encode_peer_answer, enum_values, form_defaults, parse_client_request,
    peer_answer_result, property_default, roots_result, AnswerClass, ClientFeatures, PeerAnswer,
    PeerRequestKind, Refusal, MAX_ELICIT_TEXT, REQUEST_TIMEOUT, USER_REJECTED,
};
pub(crate) use decode::IsVersion2;
pub use decode::{decode, decode_expecting, salvage_response_id, Expect};
pub use encode::{
    encode_cancelled, encode_error, encode_notification, encode_request, encode_request_text,
    encode_result, ClientCapabilities, ClientInfo, Empty, RequestMeta, RequestParams,
    StatelessMeta, NO_PARAMS,
};
pub use message::{
    DecodeError, Incoming, PeerRequestId, ProtocolError, RpcError, ServerNotification,
};
pub use methods::{
    answer_peer_request, call_tool_params, initialize_params, parse_call_tool_result,
    parse_initialize_result, CallToolParams, InitializeParams, InitializeResult, Root,
};
pub use modern::{
    classify_probe, header_params, header_text, modern_codes, param_header_values,
    parse_discover_result, parse_input_required, pick_modern, result_type, retry_params_text,
    supported_versions, HeaderAnnotationError, InputRequest, InputRequired, ProbeAnswer,
    ResultType, MAX_INPUT_REQUESTS, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL,
    META_PROTOCOL_VERSION, META_SUBSCRIPTION_ID, MODERN_VERSION, MODERN_VERSIONS,
};
pub use prompts::{
    complete_params, get_prompt_params, parse_completion_result, parse_prompt_result,
    parse_task_page, set_level_params, WireRef, MAX_COMPLETION_VALUES, MAX_PROMPT_MESSAGES,
};
pub use resources::{
    catalog_page_of, list_params, parse_catalog_page, parse_empty_result, parse_read_result,
    uri_params, CatalogPage, ListParams, ServerCapabilities, MAX_READ_CONTENTS,
};
pub use tools_list::{parse_list_tools_result, ToolsPage};
pub use tracker::RequestTracker;

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
    /// The frame is not valid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid JSON-RPC request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not offered; what we answer to server requests we do
    /// not handle.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method's params are invalid.
    pub const INVALID_PARAMS: i64 = -32602;
    /// An internal error on the answering side; assumed when an error object has no usable
    /// `code`.
    pub const INTERNAL_ERROR: i64 = -32603;
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_call_result;
#[cfg(test)]
mod tests_value_result;
