//! What the library handle and the driver share: the requests the handle sends, the snapshot
//! it reads without asking, the events it streams and the errors it answers with.
//!
//! Both sides import this module, and nothing in it imports either of them, so the handle
//! depends on the driver and never the other way round.

use crate::rt::OneshotSender;
use async_channel::Sender;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{CallId, CallOutcome, Input, ServerState, StartupReport};
use switchboard_core::tool::Tool;

/// Errors of the library API. Per-server failures are never errors here: they are in the
/// [`StartupReport`] and in [`Switchboard::server_state`](crate::Switchboard::server_state).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The switchboard has shut down (its driver is gone).
    #[error("the switchboard has shut down")]
    Stopped,
    /// A tool call failed: transport or protocol failure, timeout, unknown tool
    /// (`MCP error: ...`). A result with `isError` is not an error.
    #[error("{0}")]
    Call(String),
    /// The call was cancelled.
    #[error("the call was cancelled")]
    Cancelled,
    /// No server of that name is known: never configured, or already disconnected.
    #[error("no server named \"{0}\"")]
    UnknownServer(String),
    /// The server is known but not connected (it failed, or waits to reconnect).
    #[error("server \"{server}\" is not connected: {reason}")]
    NotConnected {
        /// The server's name.
        server: String,
        /// Its last error, or its phase when it has none.
        reason: String,
    },
    /// Re-listing a server's tools failed; the server keeps its previous list (or, if the
    /// connection was lost meanwhile, is handled like any lost connection).
    #[error("re-listing the tools of server \"{server}\" failed: {error}")]
    Refresh {
        /// The server's name.
        server: String,
        /// What went wrong.
        error: String,
    },
}

/// Something the embedder-facing handle asks of the driver.
pub(crate) enum Request {
    Input(Input),
    /// Call and answer on `reply` when it completes.
    Call {
        call: CallId,
        tool: String,
        arguments: Option<Value>,
        timeout: Option<Duration>,
        reply: OneshotSender<CallOutcome>,
    },
    /// Start a round and answer with its report, completed with `config` (what discovery
    /// found wrong with the config files). An input that opened no round (a `Sync` that
    /// started nothing) drops `reply` unanswered.
    Connect {
        input: Input,
        config: ConfigReport,
        reply: Sender<StartupReport>,
    },
    /// Close everything, wait until every process is reaped, then answer and stop.
    Shutdown {
        reply: Sender<()>,
    },
    /// Disconnect one server (`None`: all) and answer once its transports are closed.
    Disconnect {
        server: Option<String>,
        reply: Sender<Result<(), Error>>,
    },
    /// Re-list one server's tools and answer once the new list is applied (or failed).
    Refresh {
        server: String,
        reply: Sender<Result<(), Error>>,
    },
}

/// Config problems found by discovery, reported with the startup round they fed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigReport {
    pub errors: Vec<switchboard_core::config::SourceError>,
    pub shadowed: Vec<switchboard_core::config::Shadowed>,
}

impl ConfigReport {
    /// Into the report: every error and shadowed entry, and each invalid server entry also
    /// under its server's name in `errors`, so a caller that looks a server up by name sees
    /// why it did not start.
    pub(super) fn add_to(self, report: &mut StartupReport) {
        for e in &self.errors {
            if let switchboard_core::config::ConfigError::Server { server, .. } = &e.error {
                report
                    .errors
                    .entry(server.clone())
                    .or_insert_with(|| e.to_string());
            }
        }
        report.config_errors.extend(self.errors);
        report.shadowed.extend(self.shadowed);
    }
}

/// Events for the embedder (`Switchboard::events`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A startup round reached its gate (`start`, `connect`, `reload`, or `sync` that
    /// started servers).
    StartupComplete {
        /// What the round found.
        report: StartupReport,
    },
    /// These servers' tools in the view changed; read [`Switchboard::tools`](crate::Switchboard::tools).
    ToolsChanged {
        /// The servers whose slices changed.
        servers: Vec<String>,
    },
    /// A server's status changed.
    StatusChanged {
        /// The server.
        server: String,
        /// Its new status.
        status: switchboard_core::ServerStatus,
    },
    /// Something worth telling: a late failure, a lost connection, a reconnect, a skipped
    /// tool definition. Also logged through `tracing` (target `switchboard`).
    Diagnostic {
        /// The server it is about, if any.
        server: Option<String>,
        /// How serious it is.
        level: switchboard_core::manager::Level,
        /// What happened.
        message: String,
    },
    /// A server's `notifications/progress`; `call` when it is about one of our calls.
    Progress {
        /// The server that sent it.
        server: String,
        /// The call it reports on, when its progress token is one of our calls in flight.
        call: Option<CallId>,
        /// Progress so far (increases with every notification).
        progress: f64,
        /// The total, when the server knows it.
        total: Option<f64>,
        /// A human-readable note, if any.
        message: Option<String>,
    },
    /// A server's log message (`notifications/message`); `severity` is its MCP level.
    ServerLog {
        /// The server that sent it.
        server: String,
        /// The MCP level mapped onto Switchboard's levels.
        level: switchboard_core::manager::Level,
        /// The MCP level as sent (`debug` … `emergency`).
        severity: String,
        /// The server's logger name, if any.
        logger: Option<String>,
        /// The message: any JSON value, usually a string.
        data: Value,
    },
    /// An automatic reconnect (or a startup retry, when enabled) is scheduled; sent for every
    /// attempt of the ladder (and logged through `tracing` at warn).
    ReconnectScheduled {
        /// The server.
        server: String,
        /// The attempt's number on the ladder (1 for the first after a lost connection).
        attempt: u32,
        /// How long until it starts (jitter included).
        delay: Duration,
        /// Why the last connection or attempt ended.
        error: String,
    },
    /// A scheduled attempt starts now (its transport is being opened).
    ReconnectStarted {
        /// The server.
        server: String,
        /// The attempt's number, as scheduled.
        attempt: u32,
    },
}

/// What the handle can read without asking the driver: refreshed whenever the view or a
/// status changes.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub tools: Arc<Vec<Tool>>,
    pub servers: Vec<ServerState>,
    pub stopped: bool,
}
