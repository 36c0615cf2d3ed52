//! What goes in and out of the manager: ids, inputs, outputs, and the reports and outcomes
//! they carry.

use super::ServerStatus;
use crate::config::{ServerSpec, TransportConfig};
use crate::tool::{Tool, ToolDef, ToolResult};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
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
}

/// Inputs: everything the outside world tells the manager.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Input {
    /// Start every server that is not already connected or pending; skip those that are;
    /// validate each; open a startup round.
    Connect {
        /// The servers wanted (disabled ones are ignored; the first of a name wins).
        servers: Vec<ServerSpec>,
    },
    /// Disconnect all, then connect this set.
    Reload {
        /// The new set.
        servers: Vec<ServerSpec>,
    },
    /// Reconcile to this set: start new servers, restart only those whose config changed,
    /// stop removed ones, start listed ones that are stopped (failed, breaker tripped, lost
    /// with reconnects off), and leave every running one with an unchanged config untouched
    /// (its transport, calls and tools).
    Sync {
        /// The whole set wanted.
        servers: Vec<ServerSpec>,
    },
    /// Stop one server and forget it: its transport is closed, its calls fail, its tools
    /// leave the view, and an automatic reconnect never follows.
    Disconnect {
        /// The server to stop.
        server: String,
    },
    /// Stop and forget every server, pending ones included.
    DisconnectAll,
    /// Re-list one connected server's tools.
    RefreshTools {
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
    },
    /// Call a tool by qualified name. `timeout` defaults to `ManagerOptions::call_timeout`.
    CallTool {
        /// The embedder's number for the call; its `CallCompleted` carries it.
        call: CallId,
        /// The tool's qualified name, as the view lists it.
        tool: String,
        /// The call's arguments (a JSON object), if any.
        arguments: Option<Value>,
        /// This call's timeout, instead of the default.
        timeout: Option<Duration>,
    },
    /// Cancel a call in flight: it completes as `Cancelled`, and the server is told if the
    /// request went out. Unknown or completed calls are ignored.
    CancelCall {
        /// The call to cancel.
        call: CallId,
    },
}

/// What the startup gate hands back, once per round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupReport {
    /// Round number (1, 2, ...), one per `Connect`/`Reload`/`Sync` that started servers.
    pub round: u64,
    /// Time from the round's start to this report.
    pub elapsed: Duration,
    /// The whole tool view at the gate, ordered by qualified name (live and deferred).
    pub tools: Vec<Tool>,
    /// Round members that failed, with the error (invalid config, connect failure, ...).
    pub errors: BTreeMap<String, String>,
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
}

/// How a call ended. Errors read `MCP error: <message>` (JSON-RPC errors:
/// `MCP error <code>: <message>`); a result with `isError` is still `Ok`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum CallOutcome {
    /// The server answered with a result.
    Ok(ToolResult),
    /// The call failed: the server's error, a timeout, an unknown tool, a lost connection.
    Err(String),
    /// The embedder cancelled the call (abort remains abort).
    Cancelled,
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

/// Outputs: commands for the shell and events for the embedder.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[must_use]
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
    },
    /// A startup round's gate condition held: what was ready, deferred, pending or failed.
    StartupComplete(StartupReport),
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
    /// A call completed (exactly once per accepted call).
    CallCompleted {
        /// The call.
        call: CallId,
        /// How it ended.
        outcome: CallOutcome,
    },
    /// Something the embedder should know, in words (a late failure, an ignored frame, ...).
    Diagnostic {
        /// The server it is about, if any.
        server: Option<String>,
        /// How much it matters.
        level: Level,
        /// What happened.
        message: String,
    },
    /// A `notifications/progress` from a connected server. `call` is the call it is about
    /// when its progress token is one the manager issued (calls carry one when
    /// `reset_timeout_on_progress` is on) for a call in flight on that server; `None`
    /// otherwise (the server's own token, or a call that already completed).
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
        /// The message (any JSON value; [`log_text`] renders it).
        data: Value,
    },
    /// An automatic reconnect (or, with `retry_startup_failures`, a startup retry) is
    /// scheduled: attempt `attempt` of the ladder opens in `delay` (jitter included). `error`
    /// is why the last connection or attempt ended. Embedders get the attempt and the delay
    /// typed, not in words.
    ReconnectScheduled {
        /// The server waiting.
        server: String,
        /// The attempt's number on the ladder (1-based).
        attempt: u32,
        /// How long until it opens.
        delay: Duration,
        /// Why the last connection or attempt ended.
        error: String,
    },
    /// A scheduled attempt starts now: its transport is being opened.
    ReconnectStarted {
        /// The server reconnecting.
        server: String,
        /// The attempt's number on the ladder.
        attempt: u32,
    },
}
