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
    pub server: String,
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
    Closed { reason: String },
    /// The transport could not be opened or broke (spawn failure, I/O error, oversized frame).
    Failed { error: String },
    /// Something the transport wants the embedder to know that changes no state (e.g. a
    /// Streamable HTTP server answered like a legacy one, so the transport fell back to
    /// HTTP+SSE). Becomes a warning `Diagnostic` of the attempt's server; ignored when stale.
    Notice { message: String },
}

/// Inputs: everything the outside world tells the manager.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Input {
    /// The seed's `connectServers`: start every server that is not already connected or
    /// pending; skip those that are; validate each; open a startup round.
    Connect {
        servers: Vec<ServerSpec>,
    },
    /// The seed's `/mcp reload`: disconnect all, then connect this set.
    Reload {
        servers: Vec<ServerSpec>,
    },
    /// Reconcile to this set: start new servers, restart only those whose config changed,
    /// stop removed ones, start listed ones that are stopped (failed, breaker tripped, lost
    /// with reconnects off), and leave every running one with an unchanged config untouched
    /// (its transport, calls and tools).
    Sync {
        servers: Vec<ServerSpec>,
    },
    Disconnect {
        server: String,
    },
    DisconnectAll,
    /// Re-list one connected server's tools.
    RefreshTools {
        server: String,
    },
    Transport {
        conn: ConnId,
        event: TransportEvent,
    },
    /// The answer to `LoadCache`: `None` is a miss (absent, stale, corrupt).
    CacheLoaded {
        server: String,
        key: CacheKey,
        tools: Option<Vec<ToolDef>>,
    },
    /// Call a tool by qualified name. `timeout` defaults to `ManagerOptions::call_timeout`.
    CallTool {
        call: CallId,
        tool: String,
        arguments: Option<Value>,
        timeout: Option<Duration>,
    },
    CancelCall {
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
    /// Servers of the request that were already connected or pending (the seed skips them).
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
    Ok(ToolResult),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// Outputs: commands for the shell and events for the embedder.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[must_use]
pub enum Output {
    /// Open a transport for attempt `conn`. Answer with `Transport { conn, .. }` events.
    OpenTransport {
        conn: ConnId,
        server: String,
        config: TransportConfig,
    },
    /// Write one frame on `conn`.
    Send {
        conn: ConnId,
        frame: Bytes,
    },
    /// Close `conn`, whatever stage it is in (abort it if it is still opening). Sent once when
    /// the manager abandons an attempt it still tracks, and never for one that reported
    /// `Closed`/`Failed` itself — except in answer to an `Opened` for an attempt the manager
    /// no longer tracks (abandoned, or its end reported before its open): that transport is
    /// live in the shell and nobody else would close it. So the shell must treat closing a
    /// connection it does not hold (unknown, or already closed) as a no-op.
    CloseTransport {
        conn: ConnId,
    },
    /// Look up cached tools; answer with `CacheLoaded`.
    LoadCache {
        server: String,
        key: CacheKey,
    },
    /// Best-effort: remember these tools.
    StoreCache {
        server: String,
        key: CacheKey,
        tools: Vec<ToolDef>,
    },
    StartupComplete(StartupReport),
    /// These servers' slices of the tool view changed; read [`Manager::tools`](super::Manager::tools).
    ToolsChanged {
        servers: Vec<String>,
    },
    StatusChanged {
        server: String,
        status: ServerStatus,
    },
    CallCompleted {
        call: CallId,
        outcome: CallOutcome,
    },
    Diagnostic {
        server: Option<String>,
        level: Level,
        message: String,
    },
    /// A `notifications/progress` from a connected server. `call` is the call it is about
    /// when its progress token is one the manager issued (calls carry one when
    /// `reset_timeout_on_progress` is on) for a call in flight on that server; `None`
    /// otherwise (the server's own token, or a call that already completed).
    Progress {
        server: String,
        call: Option<CallId>,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// A `notifications/message` (the server's log). `level` maps the MCP level (`debug`;
    /// `info`, `notice`; `warning`; `error` and above — and unknown levels — as `Error`);
    /// `severity` is the level as the server sent it. Never also reported as a `Diagnostic`.
    ServerLog {
        server: String,
        level: Level,
        severity: String,
        logger: Option<String>,
        data: Value,
    },
    /// An automatic reconnect (or, with `retry_startup_failures`, a startup retry) is
    /// scheduled: attempt `attempt` of the ladder opens in `delay` (jitter included). `error`
    /// is why the last connection or attempt ended. (It replaces the `Diagnostic` this used
    /// to be: embedders get the attempt and delay typed, not in words.)
    ReconnectScheduled {
        server: String,
        attempt: u32,
        delay: Duration,
        error: String,
    },
    /// A scheduled attempt starts now: its transport is being opened.
    ReconnectStarted {
        server: String,
        attempt: u32,
    },
}
