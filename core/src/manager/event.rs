//! What the manager tells the embedder: one [`Event`] type, carried by `Output::Event`, that
//! the library hands to its subscribers unchanged. Every embedder request (numbered by a
//! [`RequestId`]) completes with exactly one event naming it; every call with one
//! `CallCompleted`.

use super::errors::{CallError, RefreshError, RequestError, ServerError};
use super::{CallId, ConnId, Level, ServerStatus, StartupReport};
use crate::tool::ToolResult;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// The embedder's number for one request (`Connect`, `Reload`, `Sync`, `Disconnect`,
/// `DisconnectAll`, `RefreshTools`): unique among its requests in flight, and named by the
/// event that completes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RequestId(pub u64);

/// How a call ended; a result with `isError` is still `Ok`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The server answered with a result.
    Ok(ToolResult),
    /// The call failed: the server's error, a timeout, an unknown tool, a lost connection.
    Err(CallError),
    /// The embedder cancelled the call (abort remains abort).
    Cancelled,
}

/// Events for the embedder, in the order the manager produced them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A `Connect`, `Reload` or `Sync` opened startup round `round`; the round's
    /// `StartupComplete` completes the request.
    RoundStarted {
        /// The request that opened the round.
        request: RequestId,
        /// The round's number.
        round: u64,
    },
    /// A startup round's gate condition held; `report.request` names the request that
    /// opened it.
    StartupComplete {
        /// What was ready, deferred, pending or failed.
        report: StartupReport,
    },
    /// A `Sync` that started no server: its only completion.
    SyncCompleted {
        /// The request.
        request: RequestId,
    },
    /// A `RefreshTools` ended: with a list fetched after it was asked, applied (`Ok`), or
    /// why not.
    RefreshCompleted {
        /// The request.
        request: RequestId,
        /// The server it was for.
        server: String,
        /// Whether a fresh list was applied.
        result: Result<(), RefreshError>,
    },
    /// A `Disconnect` or `DisconnectAll` is done in the manager; `closed` are the attempts
    /// it closed (the shell answers the embedder once it has reaped those transports).
    Disconnected {
        /// The request.
        request: RequestId,
        /// The attempts it closed, in order.
        closed: Vec<ConnId>,
    },
    /// A request the manager refused (an unknown server, ...): its only completion.
    RequestFailed {
        /// The request.
        request: RequestId,
        /// Why it was refused.
        error: RequestError,
    },
    /// These servers' slices of the tool view changed; read
    /// [`Manager::tools`](super::Manager::tools).
    ToolsChanged {
        /// The servers whose tools changed, by name.
        servers: Vec<String>,
    },
    /// A server's status changed.
    StatusChanged {
        /// The server.
        server: String,
        /// Its new status.
        status: ServerStatus,
    },
    /// A call completed (exactly once per call).
    CallCompleted {
        /// The call.
        call: CallId,
        /// How it ended.
        outcome: CallOutcome,
    },
    /// Something a person should know, in words (a late failure, an ignored frame, ...);
    /// nothing matches on these words.
    Diagnostic {
        /// The server it is about, if any.
        server: Option<String>,
        /// How much it matters.
        level: Level,
        /// What happened.
        message: String,
    },
    /// A `notifications/progress` from a connected server. `call` is the call it is about
    /// when its progress token is one the manager issued (calls carry one when asked for
    /// with `CallTool.progress`, or when `reset_timeout_on_progress` is on) for a call in
    /// flight on that server; `None` otherwise.
    Progress {
        /// The server that sent it.
        server: String,
        /// The call it is about, when the manager knows.
        call: Option<CallId>,
        /// Progress so far.
        progress: f64,
        /// The total, when the server knows it.
        total: Option<f64>,
        /// The server's words on it, if any.
        message: Option<String>,
    },
    /// A `notifications/message` (the server's log). `level` maps the MCP level (`debug`;
    /// `info`, `notice`; `warning`; `error` and above — and unknown levels — as `Error`);
    /// `severity` is the level as the server sent it. Never also reported as a `Diagnostic`.
    ServerLog {
        /// The server that logged it.
        server: String,
        /// Its level, mapped.
        level: Level,
        /// Its level as sent.
        severity: String,
        /// The logger's name, if the server gave one.
        logger: Option<String>,
        /// The message (any JSON value; [`log_text`](super::log_text) renders it).
        data: Value,
    },
    /// An automatic reconnect (or, with `retry_startup_failures`, a startup retry) is
    /// scheduled: attempt `attempt` of the ladder opens in `delay` (jitter included).
    ReconnectScheduled {
        /// The server waiting.
        server: String,
        /// The attempt's number on the ladder (1-based).
        attempt: u32,
        /// How long until it opens.
        delay: Duration,
        /// Why the last connection or attempt ended.
        error: ServerError,
    },
    /// A scheduled attempt starts now: its transport is being opened.
    ReconnectStarted {
        /// The server reconnecting.
        server: String,
        /// The attempt's number on the ladder.
        attempt: u32,
    },
    /// The HTTP transport renewed an expired session of this server; the manager re-lists
    /// its tools.
    SessionRenewed {
        /// The server.
        server: String,
    },
    /// A server asks the embedder for something (sampling, or an elicitation in form or URL
    /// mode): answer with `Input::AnswerPeerRequest` naming `request`, once. Until then it
    /// waits, bounded by `peer_request_timeout`; `PeerRequestWithdrawn` says when it is gone.
    PeerRequest {
        /// The server that asks.
        server: String,
        /// The core's key for the request.
        request: super::PeerRequestKey,
        /// What it asks for.
        kind: crate::protocol::PeerRequestKind,
        /// The input of a stateless server's `InputRequiredResult` this is (its key, and
        /// how many of that answer's inputs the embedder is handed); `None` for a request a
        /// server sent of its own (the older revisions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<super::RoundInput>,
    },
    /// A request of a server's no longer takes an answer: the server cancelled it, its
    /// connection ended, or it timed out (the server was told). An answer now is ignored.
    PeerRequestWithdrawn {
        /// The server that asked.
        server: String,
        /// The core's key for the request.
        request: super::PeerRequestKey,
        /// Why.
        reason: super::WithdrawReason,
    },
    /// A server says an out-of-band interaction a URL-mode elicitation of its started is done
    /// (`notifications/elicitation/complete`).
    ElicitationComplete {
        /// The server.
        server: String,
        /// The elicitation's id, as its request gave it.
        elicitation_id: String,
    },
    /// These servers' resources or resource templates changed (a re-list after
    /// `resources/list_changed`, or a server connected after its startup round); read
    /// [`Manager::resources`](super::Manager::resources).
    ResourcesChanged {
        /// The servers, by name.
        servers: Vec<String>,
    },
    /// These servers' prompts changed; read [`Manager::prompts`](super::Manager::prompts).
    PromptsChanged {
        /// The servers, by name.
        servers: Vec<String>,
    },
    /// A server said a resource changed (`notifications/resources/updated`).
    ResourceUpdated {
        /// The server.
        server: String,
        /// The resource's URI.
        uri: String,
    },
    /// An operation (`Input::Operation`) completed (exactly once per operation).
    OperationCompleted {
        /// The operation.
        call: CallId,
        /// How it ended.
        outcome: crate::catalog::OperationOutcome,
    },
}
