//! What goes in and out of the manager: ids, inputs, outputs (commands and events), what the
//! core knows about each frame it writes, and the startup report.

use super::errors::ServerError;
use super::event::{Event, RequestId};
use crate::config::{ServerSpec, TransportConfig};
use crate::tool::{Tool, ToolDef};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// One connection attempt. Every attempt gets a fresh id (a generation); anything that arrives
/// for an id that is no longer current is stale and never changes state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ConnId(pub u64);

/// A tool call, numbered by the embedder (unique among calls in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CallId(pub u64);

/// The tool cache's key: the server's name and the hash of its *unresolved* config.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CacheKey {
    /// The server's name.
    pub server: String,
    /// The hash of its config before `${VAR}` expansion, so a changed environment does not
    /// invalidate the cache but a changed config does.
    pub config_hash: String,
}

/// What the shell saw on one connection attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub enum TransportEvent {
    /// The transport is open (process spawned, HTTP endpoint reachable).
    Opened,
    /// One complete frame (one JSON value) from the server.
    Frame(Bytes),
    /// The transport closed by itself (process exited, stream ended). The shell has already
    /// cleaned up; the core sends no `CloseTransport` for it.
    Closed {
        /// Why, in words (exit status, last lines of stderr, ...).
        reason: String,
    },
    /// The transport could not be opened or broke (spawn failure, I/O error, oversized frame).
    Failed {
        /// What went wrong, in words.
        error: String,
    },
    /// Something the transport wants the embedder to know that changes no state (e.g. a
    /// Streamable HTTP server answered like a legacy one, so the transport fell back to
    /// HTTP+SSE). Becomes a warning `Diagnostic` of the attempt's server; ignored when stale.
    Notice {
        /// The notice, in words.
        message: String,
    },
    /// One line the attempt's process wrote to stderr. The core keeps the attempt's last
    /// lines (at most 20 and 4 KiB) and attaches them to that attempt's [`ServerError`].
    Stderr {
        /// The line, without its newline.
        line: String,
    },
    /// The transport could not deliver our request `id` (an HTTP POST failed, the answer was
    /// not JSON-RPC): the core fails that request at once, in the transport's words.
    RequestFailed {
        /// The JSON-RPC id of the request (as [`FrameKind::Request`] named it).
        id: u64,
        /// What went wrong, in words.
        error: String,
    },
    /// The HTTP session expired and the transport opened a new one (it replayed
    /// `initialize`): the core re-lists the server's tools.
    SessionRenewed,
    /// The server refused our credentials (HTTP `401`/`403`) for one frame and authorization
    /// could not fix it. The transport reports the refusal and stays open; the core decides
    /// what ends: the whole attempt (the handshake was refused, nothing can be sent until a
    /// person logs in, or the frame was no request) or that request only (a refused step-up).
    Unauthorized {
        /// The refused request, or `None` for a frame that is not a request (a notification
        /// or a response).
        id: Option<u64>,
        /// Why authorization did not succeed (never holds a token).
        error: crate::auth::AuthError,
    },
}

/// What the core knows about a frame it writes, so a transport never parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FrameMeta {
    /// Request, notification or response.
    pub kind: FrameKind,
    /// The JSON-RPC method of a request or notification (`None` for a response).
    pub method: Option<&'static str>,
    /// Set on a frame of a stateless (2026-07-28) connection: the protocol version it speaks,
    /// which an HTTP transport sends as `MCP-Protocol-Version` (with no session). `None`: a
    /// frame of the `initialize`-based revisions.
    pub protocol: Option<&'static str>,
    /// What a stateless request names (`Mcp-Name`: a tool's name, a resource's URI, a
    /// prompt's name).
    pub name: Option<String>,
    /// `Mcp-Param-<name>` headers of a stateless tool call: `(name, value)`, the value
    /// already encoded.
    pub params: Vec<(String, String)>,
}

impl FrameMeta {
    /// A frame of the `initialize`-based revisions: its kind and method only.
    pub fn legacy(kind: FrameKind, method: Option<&'static str>) -> FrameMeta {
        FrameMeta {
            kind,
            method,
            protocol: None,
            name: None,
            params: Vec::new(),
        }
    }
}

/// What kind of JSON-RPC message a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum FrameKind {
    /// One of our requests: a response with this id is expected.
    Request {
        /// Its JSON-RPC id.
        id: u64,
    },
    /// One of our notifications; `cancels` is the request a `notifications/cancelled` names.
    Notification {
        /// The id of the request it cancels, if it is a cancellation.
        cancels: Option<u64>,
    },
    /// Our answer to a request of the server's.
    Response,
}

/// Inputs: everything the outside world tells the manager. Every embedder request carries
/// the embedder's [`RequestId`] and completes with exactly one event naming it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub enum Input {
    /// Start every server that is not already connected or pending; skip those that are;
    /// validate each; open a startup round (`RoundStarted`, then `StartupComplete`).
    Connect {
        /// The embedder's id for this request.
        request: RequestId,
        /// The servers wanted (disabled ones are ignored; the first of a name wins).
        servers: Vec<ServerSpec>,
    },
    /// Disconnect all, then connect this set (`RoundStarted`, then `StartupComplete`).
    Reload {
        /// The embedder's id for this request.
        request: RequestId,
        /// The new set.
        servers: Vec<ServerSpec>,
    },
    /// Reconcile to this set: start new servers, restart only those whose config changed,
    /// stop removed ones, start listed ones that are stopped (failed, breaker tripped, lost
    /// with reconnects off), and leave every running one with an unchanged config untouched
    /// (its transport, calls and tools). Completes like `Connect` when it starts a server,
    /// with `SyncCompleted` when it starts none.
    Sync {
        /// The embedder's id for this request.
        request: RequestId,
        /// The whole set wanted.
        servers: Vec<ServerSpec>,
    },
    /// Stop one server and forget it: its transport is closed, its calls fail, its tools
    /// leave the view, and an automatic reconnect never follows. Completes with
    /// `Disconnected` (`RequestFailed` for an unknown server).
    Disconnect {
        /// The embedder's id for this request.
        request: RequestId,
        /// The server to stop.
        server: String,
    },
    /// Stop and forget every server, pending ones included (`Disconnected`).
    DisconnectAll {
        /// The embedder's id for this request.
        request: RequestId,
    },
    /// Re-list one server's tools: `RefreshCompleted` once a list fetched after the request
    /// is applied (a connecting server's first list), or why not (`RequestFailed` for an
    /// unknown server).
    RefreshTools {
        /// The embedder's id for this request.
        request: RequestId,
        /// The server to re-list.
        server: String,
    },
    /// Something the shell saw on a connection attempt.
    Transport {
        /// The attempt it is about (stale ids are ignored).
        conn: ConnId,
        /// What happened.
        event: TransportEvent,
    },
    /// The answer to `LoadCache`: `None` is a miss (absent, stale, corrupt).
    CacheLoaded {
        /// The server it was asked for.
        server: String,
        /// The key it was asked with (an answer for another config hash is stale).
        key: CacheKey,
        /// The cached tools, if any.
        tools: Option<Vec<ToolDef>>,
        /// The cached resources, templates and prompts (`None` with a miss, or from a cache
        /// written before it kept them).
        catalog: Option<crate::catalog::Catalog>,
    },
    /// Call a tool by qualified name. `timeout` defaults to the server config's call timeout,
    /// else `ManagerOptions::call_timeout`.
    CallTool {
        /// The embedder's number for the call; its `CallCompleted` carries it.
        call: CallId,
        /// The tool's qualified name, as the view lists it.
        tool: String,
        /// The call's arguments (a JSON object), if any.
        arguments: Option<Value>,
        /// This call's timeout, instead of the default.
        timeout: Option<Duration>,
        /// Send a progress token with the call, so the server's progress reaches the embedder
        /// as `Progress` events naming the call.
        progress: bool,
        /// A `_meta` object for the `tools/call` params, as given, except `progressToken`:
        /// progress tokens are the core's own (the call's number, with `progress`).
        meta: Option<Map<String, Value>>,
    },
    /// Cancel a call in flight: it completes as `Cancelled`, and the server is told if the
    /// request went out. Unknown or completed calls are ignored.
    CancelCall {
        /// The call to cancel.
        call: CallId,
    },
    /// The embedder's answer to a request of a server's (`Event::PeerRequest`). Each request
    /// takes one answer; another, or one for a request withdrawn, is ignored.
    AnswerPeerRequest {
        /// The core's key for the request.
        request: super::PeerRequestKey,
        /// The answer.
        answer: crate::protocol::PeerAnswer,
    },
    /// Replace the roots answered to `roots/list`; every initialized server is sent
    /// `notifications/roots/list_changed` (when the `roots` capability was declared).
    SetRoots {
        /// The new roots (at most `MAX_ROOTS` are kept).
        roots: Vec<crate::protocol::Root>,
    },
    /// An operation on a server's resources, prompts, completions or logging, numbered from
    /// the same space as calls (`CancelCall` cancels it). Completes with exactly one
    /// `OperationCompleted`. `timeout` defaults to `ManagerOptions::call_timeout`.
    Operation {
        /// The embedder's number for it.
        call: CallId,
        /// What to do.
        op: crate::catalog::Operation,
        /// Its timeout, instead of the default.
        timeout: Option<Duration>,
    },
}

/// What the startup gate hands back, once per round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupReport {
    /// The request that opened the round (`None` only in reports built outside the core).
    pub request: Option<RequestId>,
    /// Round number (1, 2, ...), one per `Connect`/`Reload`/`Sync` that started servers.
    pub round: u64,
    /// Time from the round's start to this report.
    pub elapsed: Duration,
    /// The whole tool view at the gate, ordered by qualified name (live and deferred).
    pub tools: Vec<Tool>,
    /// Round members that failed, with the error (invalid config, connect failure, ...).
    pub errors: BTreeMap<String, ServerError>,
    /// Round members that are connected with live tools.
    pub connected: Vec<String>,
    /// Round members still connecting whose tools come from the cache (deferred).
    pub deferred: Vec<String>,
    /// Round members still connecting without a cache entry when `uncached_wait` ran out.
    pub pending: Vec<String>,
    /// Servers of the request that were already connected or pending, and so were left as
    /// they were.
    pub skipped: Vec<String>,
    /// Round members stopped before the report (`Disconnect`, `DisconnectAll`, `Reload`, or a
    /// `Sync` that removed or restarted them): their attempt of this round was abandoned.
    pub disconnected: Vec<String>,
    /// When the set came from config discovery (filled by the shell; the core leaves it
    /// empty): files that could not be read or parsed (syntax errors carry line and column)
    /// and invalid entries. If discovery failed as a whole, the one error saying why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_errors: Vec<crate::config::SourceError>,
    /// When the set came from config discovery (filled by the shell): entries that lost to
    /// an earlier source naming the same server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadowed: Vec<crate::config::Shadowed>,
    /// When the set came from config discovery (filled by the shell): project-level servers
    /// that were not started because nothing approved them yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub awaiting_approval: Vec<crate::config::AwaitingApproval>,
}

/// A server log message's `data` (`Output::ServerLog`) as text: a string as it is, any other
/// JSON value in its JSON form.
pub fn log_text(data: &Value) -> std::borrow::Cow<'_, str> {
    match data {
        Value::String(s) => s.as_str().into(),
        other => other.to_string().into(),
    }
}

/// How much a diagnostic or a server's log message matters, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub enum Level {
    /// Detail for tracing (ignored frames, undeclared notifications).
    Debug,
    /// Information.
    Info,
    /// Something went wrong that the manager worked around.
    Warn,
    /// A server failed, lost its connection or tripped its breaker.
    Error,
}

/// Outputs: commands for the shell, and events for the embedder.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[must_use]
#[non_exhaustive]
pub enum Output {
    /// Open a transport for attempt `conn`. Answer with `Transport { conn, .. }` events.
    OpenTransport {
        /// The new attempt.
        conn: ConnId,
        /// The server it is for.
        server: String,
        /// Its transport config, with `${VAR}` already expanded.
        config: TransportConfig,
    },
    /// Write one frame on `conn`.
    Send {
        /// The connection to write on.
        conn: ConnId,
        /// One JSON-RPC message, encoded.
        frame: Bytes,
        /// What the frame is, so the transport never parses it.
        meta: FrameMeta,
    },
    /// Close `conn`, whatever stage it is in (abort it if it is still opening). Sent once when
    /// the manager abandons an attempt it still tracks, and never for one that reported
    /// `Closed`/`Failed` itself — except in answer to an `Opened` for an attempt the manager
    /// no longer tracks (abandoned, or its end reported before its open): that transport is
    /// live in the shell and nobody else would close it. So the shell must treat closing a
    /// connection it does not hold (unknown, or already closed) as a no-op.
    CloseTransport {
        /// The connection to close.
        conn: ConnId,
    },
    /// Look up cached tools; answer with `CacheLoaded`.
    LoadCache {
        /// The server to look up.
        server: String,
        /// Its current key.
        key: CacheKey,
    },
    /// Best-effort: remember these tools.
    StoreCache {
        /// The server they belong to.
        server: String,
        /// Its current key.
        key: CacheKey,
        /// The tools it listed live.
        tools: Vec<ToolDef>,
        /// Its resources, templates and prompts, listed live.
        catalog: crate::catalog::Catalog,
    },
    /// Something for the embedder.
    Event(Event),
}
