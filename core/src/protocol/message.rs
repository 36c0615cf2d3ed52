//! The messages the codec hands out: what one frame decoded to ([`Incoming`]), the server
//! notifications the client acts on, and the errors of decoding a frame and of reading a
//! result.

use super::ToolsPage;
use serde_json::value::RawValue;
use serde_json::Value;

/// A JSON-RPC error object as a server sent it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RpcError {
    /// The error code ([`codes`](super::codes) has the standard ones); servers also use
    /// their own.
    pub code: i64,
    /// The server's one-line description.
    pub message: String,
    /// Whatever extra detail the server attached, as sent.
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
        /// The id of the request answered, if it is one of ours.
        id: Option<u64>,
        /// The `result` as raw JSON text, or the `error` object.
        result: Result<Box<RawValue>, RpcError>,
    },
    /// An answer to one of our requests whose `result` [`decode_expecting`] read as a
    /// `tools/list` page (what [`parse_list_tools_result`] gives for it).
    ///
    /// [`decode_expecting`]: super::decode_expecting
    /// [`parse_list_tools_result`]: super::parse_list_tools_result
    ToolsPage {
        /// The id of the `tools/list` request answered.
        id: u64,
        /// The page, or why it cannot be used.
        page: Result<ToolsPage, ProtocolError>,
    },
    /// An answer to one of our requests whose `result` [`decode_expecting`] read as a `Value`
    /// (what `serde_json::from_str` gives for the raw text [`Incoming::Response`] would hold).
    ///
    /// [`decode_expecting`]: super::decode_expecting
    Value {
        /// The id of the request answered.
        id: u64,
        /// The result.
        result: Value,
    },
    /// A request from the server (ping, roots/list, sampling, ...).
    Request {
        /// The server's id for it, to echo in our answer.
        id: PeerRequestId,
        /// What the server asks for.
        method: String,
        /// Its params as sent; `null` when there were none.
        params: Value,
    },
    /// A notification from the server.
    Notification(ServerNotification),
    /// A notification on a `subscriptions/listen` stream of the stateless revision: its
    /// `_meta` named the stream (the listen request's id).
    Stream {
        /// The listen request's id, as the notification's `subscriptionId`.
        subscription: u64,
        /// The notification.
        notification: ServerNotification,
    },
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
            (Incoming::Value { id: a, result: ra }, Incoming::Value { id: b, result: rb }) => {
                a == b && ra == rb
            }
            (Incoming::Notification(a), Incoming::Notification(b)) => a == b,
            (
                Incoming::Stream {
                    subscription: a,
                    notification: na,
                },
                Incoming::Stream {
                    subscription: b,
                    notification: nb,
                },
            ) => a == b && na == nb,
            _ => false,
        }
    }
}

/// The notifications a server may send that we act on or surface.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum ServerNotification {
    /// `notifications/tools/list_changed`: the server's tools changed; list them again.
    ToolsListChanged,
    /// `notifications/progress`: how far a long request has got.
    Progress {
        /// The progress token the request carried, as sent.
        token: Value,
        /// Progress so far (0 when the server sent none).
        progress: f64,
        /// The total progress is heading for, when known.
        total: Option<f64>,
        /// A human-readable note on the progress.
        message: Option<String>,
    },
    /// `notifications/message`: a log line from the server.
    Message {
        /// Its syslog-style level (`debug` ... `emergency`); `info` when missing.
        level: String,
        /// The logger that wrote it, when named.
        logger: Option<String>,
        /// The logged data, any JSON.
        data: Value,
    },
    /// The server cancelled a request it had sent us.
    Cancelled {
        /// The server's id of the cancelled request, as sent.
        request_id: Value,
    },
    /// Any other notification: surfaced by method, its params dropped.
    Other {
        /// The notification's method.
        method: String,
    },
    /// `notifications/tasks/status`: a task's new state (the manager's task code reads
    /// `taskId`, `status` and `pollInterval`).
    TaskStatus {
        /// The notification's params (the task object).
        params: Value,
    },
    /// `notifications/elicitation/complete`: an out-of-band interaction a URL-mode
    /// elicitation started is done.
    ElicitationComplete {
        /// The id the `elicitation/create` request gave it.
        elicitation_id: String,
    },
    /// `notifications/resources/list_changed`: list its resources and templates again.
    ResourcesListChanged,
    /// `notifications/prompts/list_changed`: list its prompts again.
    PromptsListChanged,
    /// `notifications/resources/updated`: a subscribed resource changed.
    ResourceUpdated {
        /// The resource's URI (empty when the server sent none).
        uri: String,
    },
    /// `notifications/subscriptions/acknowledged`: the first frame of a listen stream.
    SubscriptionsAcknowledged,
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum DecodeError {
    /// The frame is longer than the connection's limit; it is not parsed at all.
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The frame's length in bytes.
        len: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The frame is not valid JSON; holds the parser's message.
    #[error("frame is not JSON: {0}")]
    NotJson(String),
    /// The frame is JSON but not a JSON-RPC 2.0 message; holds what is wrong.
    #[error("frame is not a JSON-RPC 2.0 message: {0}")]
    NotJsonRpc(String),
    /// The frame is a JSON array: a batch, which this client does not accept.
    #[error("JSON-RPC batches are not supported")]
    Batch,
}

/// Why a result could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum ProtocolError {
    /// The server's `initialize` answer names a protocol version we do not speak.
    #[error("server answered with unsupported protocol version \"{0}\" (supported: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)")]
    UnsupportedVersion(String),
    /// A result does not have the shape its method promises.
    #[error("malformed {method} result: {detail}")]
    Malformed {
        /// The method whose result it is.
        method: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// A [`ProtocolError::Malformed`] for a `method`'s result.
pub(super) fn malformed(method: &str, detail: impl Into<String>) -> ProtocolError {
    ProtocolError::Malformed {
        method: method.into(),
        detail: detail.into(),
    }
}
