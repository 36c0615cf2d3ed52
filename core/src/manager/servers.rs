//! Per-server state. Each known server has one `Phase`, and everything a status display
//! reads (its status, the connection and pending registries) is derived from it, so a server
//! can never be in two exclusive states at once. Phase changes go through `set_phase`, which
//! reports a status change exactly when the derived status changes.

use super::listing::Listing;
use super::{ConnId, Manager, Output};
use crate::config::{ServerSpec, SourceMeta};
use crate::protocol::InitializeResult;
use crate::time::Instant;
use crate::tool::ToolDef;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// A server's status, derived from its phase: the three registries it can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ServerStatus {
    /// Initialized and its tools listed: calls go straight to it.
    Connected,
    /// An attempt is under way (opening, initializing, listing tools) or a reconnect is
    /// scheduled.
    Connecting,
    /// Not running: unknown, never started, failed, or stopped.
    Disconnected,
}

/// A server's full state, for status displays and invariant checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerState {
    /// The server's name, as configured.
    pub name: String,
    /// Its status (derived from `phase`).
    pub status: ServerStatus,
    /// `idle`, `opening`, `initializing`, `listing-tools`, `backoff` or `connected`.
    pub phase: &'static str,
    /// Where its config came from.
    pub source: SourceMeta,
    /// The hash of its unresolved config (the tool cache's key).
    pub config_hash: String,
    /// Its transport kind (`stdio`, `http`, ...), when the config names a valid one.
    pub transport: Option<&'static str>,
    /// The current attempt, while one is opening or open.
    pub conn: Option<ConnId>,
    /// Why the last attempt ended, or why its config is invalid.
    pub last_error: Option<String>,
    /// Attempts started so far (each open of a transport counts one).
    pub attempts: u32,
    /// When the last attempt started.
    pub started_at: Option<Instant>,
    /// When the last attempt had its tools ready.
    pub ready_at: Option<Instant>,
    /// Time from the start of the last attempt to tools ready.
    pub time_to_ready: Option<Duration>,
    /// How many tools it has in the view (live or deferred).
    pub tool_count: usize,
    /// Its tools in the view come from the cache.
    pub deferred: bool,
    /// The protocol version the server agreed to in `initialize`.
    pub protocol_version: Option<String>,
    /// The name the server gave in `initialize` (`serverInfo.name`).
    pub server_name: Option<String>,
    /// The version the server gave in `initialize` (`serverInfo.version`).
    pub server_version: Option<String>,
    /// The reconnect attempt under way or scheduled (0 when none).
    pub reconnect_attempt: u32,
    /// When the next reconnect attempt starts, while one is scheduled.
    pub next_attempt_at: Option<Instant>,
}

/// What the tool cache said about a server's current config.
#[derive(Debug, Clone)]
pub(super) enum CacheState {
    /// Not asked yet (or the config changed since).
    Unknown,
    /// `LoadCache` is out; its answer has not come back.
    Loading,
    /// Shared with `Server::tools` once the server listed them live.
    Hit(Arc<[ToolDef]>),
    /// The cache had nothing usable.
    Miss,
}

/// Where a server is in its lifecycle. Attempts carry their `ConnId`, so anything arriving
/// for another id is stale.
#[derive(Debug, Clone)]
pub(super) enum Phase {
    /// Not running: never started, or failed (see `last_error`). Status `Disconnected`.
    Idle,
    /// Transport opening (pending connection).
    Opening { conn: ConnId, deadline: Instant },
    /// `initialize` sent (pending connection).
    Initializing { conn: ConnId, deadline: Instant },
    /// Initialized, first `tools/list` in flight (pending tool load).
    Listing { conn: ConnId, listing: Listing },
    /// Waiting to reconnect (or retry) at `at`. Counted as a pending connection.
    Backoff { at: Instant },
    /// Ready. `refresh` is a re-list in flight; `again` coalesces list_changed notifications
    /// that arrive meanwhile into one more list.
    Connected {
        conn: ConnId,
        refresh: Option<Listing>,
        again: bool,
    },
}

impl Phase {
    pub(super) fn conn(&self) -> Option<ConnId> {
        match self {
            Phase::Idle | Phase::Backoff { .. } => None,
            Phase::Opening { conn, .. }
            | Phase::Initializing { conn, .. }
            | Phase::Listing { conn, .. }
            | Phase::Connected { conn, .. } => Some(*conn),
        }
    }

    pub(super) fn status(&self) -> ServerStatus {
        match self {
            Phase::Idle => ServerStatus::Disconnected,
            Phase::Opening { .. }
            | Phase::Initializing { .. }
            | Phase::Listing { .. }
            | Phase::Backoff { .. } => ServerStatus::Connecting,
            Phase::Connected { .. } => ServerStatus::Connected,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Opening { .. } => "opening",
            Phase::Initializing { .. } => "initializing",
            Phase::Listing { .. } => "listing-tools",
            Phase::Backoff { .. } => "backoff",
            Phase::Connected { .. } => "connected",
        }
    }

    pub(super) fn is_pending(&self) -> bool {
        self.status() == ServerStatus::Connecting
    }

    /// An attempt is under way (a startup round waits for these; a backoff does not).
    pub(super) fn in_flight(&self) -> bool {
        matches!(
            self,
            Phase::Opening { .. } | Phase::Initializing { .. } | Phase::Listing { .. }
        )
    }
}

/// One known server: its config, its phase, and what it has in the view.
#[derive(Debug, Clone)]
pub(super) struct Server {
    pub(super) spec: ServerSpec,
    pub(super) hash: String,
    pub(super) transport: Option<&'static str>,
    pub(super) phase: Phase,
    pub(super) cache: CacheState,
    /// Live tools (when connected); shared with the cache state, so storing them costs a
    /// reference count.
    pub(super) tools: Arc<[ToolDef]>,
    /// What this server has in the view: `None`, `Some(false)` live, `Some(true)` deferred.
    pub(super) exposed: Option<bool>,
    pub(super) last_error: Option<String>,
    pub(super) attempts: u32,
    pub(super) started_at: Option<Instant>,
    pub(super) ready_at: Option<Instant>,
    /// The startup round this server's current attempt belongs to, while that round is open.
    pub(super) round: Option<u64>,
    pub(super) init: Option<InitializeResult>,
    /// Reconnect attempt number (0: not retrying).
    pub(super) retry_attempt: u32,
    /// Times of unexpected closes of established connections, within the burst window.
    pub(super) closes: VecDeque<Instant>,
    /// Unanswered health pings in a row.
    pub(super) ping_misses: u32,
    /// A `tools/list_changed` arrived while the first listing was under way: its answer may
    /// predate the change, so list again once connected.
    pub(super) relist_when_ready: bool,
}

impl Server {
    /// A server just registered: idle, nothing cached, nothing in the view.
    pub(super) fn new(spec: ServerSpec, hash: String, transport: Option<&'static str>) -> Self {
        Server {
            spec,
            hash,
            transport,
            phase: Phase::Idle,
            cache: CacheState::Unknown,
            tools: Vec::new().into(),
            exposed: None,
            last_error: None,
            attempts: 0,
            started_at: None,
            ready_at: None,
            round: None,
            init: None,
            retry_attempt: 0,
            closes: VecDeque::new(),
            ping_misses: 0,
            relist_when_ready: false,
        }
    }

    /// Its state as a status display sees it.
    pub(super) fn state(&self, name: &str) -> ServerState {
        ServerState {
            name: name.to_string(),
            status: self.phase.status(),
            phase: self.phase.name(),
            source: self.spec.source.clone(),
            config_hash: self.hash.clone(),
            transport: self.transport,
            conn: self.phase.conn(),
            last_error: self.last_error.clone(),
            attempts: self.attempts,
            started_at: self.started_at,
            ready_at: self.ready_at,
            time_to_ready: match (self.started_at, self.ready_at) {
                (Some(a), Some(b)) if b >= a => Some(b - a),
                _ => None,
            },
            tool_count: match self.exposed {
                Some(false) => self.tools.len(),
                Some(true) => match &self.cache {
                    CacheState::Hit(t) => t.len(),
                    _ => 0,
                },
                None => 0,
            },
            deferred: self.exposed == Some(true),
            protocol_version: self.init.as_ref().map(|i| i.protocol_version.clone()),
            server_name: self.init.as_ref().and_then(|i| i.server_name.clone()),
            server_version: self.init.as_ref().and_then(|i| i.server_version.clone()),
            reconnect_attempt: self.retry_attempt,
            next_attempt_at: match self.phase {
                Phase::Backoff { at } => Some(at),
                _ => None,
            },
        }
    }
}

impl Manager {
    /// Move `server` to `phase`, reporting `StatusChanged` when its status changes.
    pub(super) fn set_phase(&mut self, server: &str, phase: Phase) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let before = s.phase.status();
        s.phase = phase;
        let after = s.phase.status();
        if before != after {
            self.out.push_back(Output::StatusChanged {
                server: server.to_string(),
                status: after,
            });
        }
    }
}
