//! What the library handle and the driver share: the requests the handle sends, the snapshot
//! it reads without asking, the event subscriptions and the errors it answers with.
//!
//! Both sides import this module, and nothing in it imports either of them, so the handle
//! depends on the driver and never the other way round.

use crate::rt::OneshotSender;
use async_channel::Sender;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, Input, RefreshError, RequestError, ServerError,
    ServerErrorKind, ServerState, StartupReport,
};
use switchboard_core::tool::Tool;

/// Errors of the library API. Per-server failures are never errors here: they are in the
/// [`StartupReport`] and in [`Switchboard::server_state`](crate::Switchboard::server_state).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The switchboard has shut down (its driver is gone).
    #[error("the switchboard has shut down")]
    Stopped,
    /// A tool call failed: transport or protocol failure, timeout, unknown tool, the
    /// server's JSON-RPC error. A result with `isError` is not an error.
    #[error("{0}")]
    Call(CallError),
    /// The call was cancelled.
    #[error("the call was cancelled")]
    Cancelled,
    /// No server of that name is known: never configured, or already disconnected.
    #[error("no server named \"{0}\"")]
    UnknownServer(String),
    /// The server is known but not connected (it failed, stopped, or waits to reconnect).
    #[error("server \"{server}\" is not connected{}", reason_suffix(.reason))]
    NotConnected {
        /// The server's name.
        server: String,
        /// Why its last attempt ended, if it failed.
        reason: Option<ServerError>,
    },
    /// Re-listing a server's tools failed; the server keeps its previous list (or, if the
    /// connection was lost meanwhile, is handled like any lost connection).
    #[error("re-listing the tools of server \"{server}\" failed: {error}")]
    Refresh {
        /// The server's name.
        server: String,
        /// What went wrong.
        error: RefreshError,
    },
    /// The core refused the request for another reason.
    #[error("{0}")]
    Refused(RequestError),
}

fn reason_suffix(reason: &Option<ServerError>) -> String {
    reason
        .as_ref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default()
}

/// Something the embedder-facing handle asks of the driver. The driver numbers the core
/// requests among them (`RequestId`) and answers each from the core's completion event.
pub(crate) enum Request {
    /// An input with no answer (a call's cancellation).
    Input(Input),
    /// Call and answer on `reply` when it completes.
    Call {
        call: CallId,
        tool: String,
        arguments: Option<Value>,
        timeout: Option<Duration>,
        progress: Option<Sender<Progress>>,
        reply: OneshotSender<CallOutcome>,
        meta: Option<serde_json::Map<String, Value>>,
    },
    /// `Connect`, `Reload` or `Sync` (`round` builds the input from the driver's request
    /// id): answered with the round's report completed with `config` (what discovery found
    /// wrong with the config files), or `None` when the request opened no round.
    Round {
        round: RoundKind,
        servers: Vec<switchboard_core::config::ServerSpec>,
        config: ConfigReport,
        reply: Sender<Option<StartupReport>>,
    },
    /// Close everything, wait until every process is reaped, then answer and stop.
    Shutdown { reply: Sender<()> },
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
    /// An operation on resources, prompts, completions or logging; answered on `reply`
    /// when it completes.
    Operation {
        call: CallId,
        op: switchboard_core::catalog::Operation,
        timeout: Option<Duration>,
        reply: OneshotSender<switchboard_core::catalog::OperationOutcome>,
    },
}

/// Which round-opening request a [`Request::Round`] is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RoundKind {
    Connect,
    Reload,
    Sync,
}

/// One progress notification of a call (see [`Call::progress`](crate::Call::progress)).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Progress so far (increases with every notification).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// The server's words on it, if any.
    pub message: Option<String>,
}

/// Config problems found by discovery, reported with the startup round they fed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigReport {
    pub errors: Vec<switchboard_core::config::SourceError>,
    pub shadowed: Vec<switchboard_core::config::Shadowed>,
    pub awaiting: Vec<switchboard_core::config::AwaitingApproval>,
}

impl ConfigReport {
    /// Into the report: every error and shadowed entry, and each invalid server entry also
    /// under its server's name in `errors`, so a caller that looks a server up by name sees
    /// why it did not start.
    pub(super) fn add_to(self, report: &mut StartupReport) {
        for e in &self.errors {
            if let switchboard_core::config::ConfigError::Server { server, .. } = &e.error {
                report.errors.entry(server.clone()).or_insert_with(|| {
                    ServerError::new(ServerErrorKind::InvalidConfig, e.to_string())
                });
            }
        }
        report.config_errors.extend(self.errors);
        report.shadowed.extend(self.shadowed);
        report.awaiting_approval.extend(self.awaiting);
    }
}

/// What the handle can read without asking the driver: refreshed whenever the view or a
/// status changes.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub tools: Arc<Vec<Tool>>,
    pub servers: Vec<ServerState>,
    pub stopped: bool,
    pub resources: Arc<Vec<switchboard_core::catalog::Resource>>,
    pub templates: Arc<Vec<switchboard_core::catalog::ResourceTemplate>>,
    pub prompts: Arc<Vec<switchboard_core::catalog::Prompt>>,
}
