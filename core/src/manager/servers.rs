//! Per-server state. Each known server has one `Stage`, and everything a status display
//! reads (its status, the connection and pending registries) is derived from it, so a server
//! can never be in two exclusive states at once. Stage changes go through `set_phase`, which
//! reports a status change exactly when the derived status changes.

use super::errors::ServerError;
use super::listing::Listing;
use super::{ConnId, Event, Manager, Output, RequestId};
use crate::config::{ServerSpec, SourceMeta};
use crate::protocol::InitializeResult;
use crate::schema::Compiled;
use crate::time::Instant;
use crate::tool::ToolDef;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// A server's status, derived from its phase: the three registries it can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub enum ServerStatus {
    /// Initialized and its tools listed: calls go straight to it.
    Connected,
    /// An attempt is under way (opening, initializing, listing tools) or a reconnect is
    /// scheduled.
    Connecting,
    /// Not running: unknown, never started, failed, or stopped.
    Disconnected,
}

/// Where a server is in its lifecycle, as a status display names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Phase {
    /// Not running: never started, failed, or stopped (status `Disconnected`).
    Idle,
    /// Its transport is opening.
    Opening,
    /// `initialize` is under way.
    Initializing,
    /// Initialized; its first `tools/list` is under way.
    ListingTools,
    /// Waiting to reconnect (or retry).
    Backoff,
    /// Ready, its tools listed.
    Connected,
}

impl Phase {
    /// Its name in a status display: `idle`, `opening`, `initializing`, `listing-tools`,
    /// `backoff` or `connected`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Opening => "opening",
            Phase::Initializing => "initializing",
            Phase::ListingTools => "listing-tools",
            Phase::Backoff => "backoff",
            Phase::Connected => "connected",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A server's full state, for status displays and invariant checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerState {
    /// The server's name, as configured.
    pub name: String,
    /// Its status (derived from `phase`).
    pub status: ServerStatus,
    /// Where it is in its lifecycle.
    pub phase: Phase,
    /// Where its config came from.
    pub source: SourceMeta,
    /// The hash of its unresolved config (the tool cache's key).
    pub config_hash: String,
    /// Its transport kind (`stdio`, `http`, ...), when the config names a valid one.
    pub transport: Option<&'static str>,
    /// The current attempt, while one is opening or open.
    pub conn: Option<ConnId>,
    /// Why the last attempt ended, or why its config is invalid.
    pub last_error: Option<ServerError>,
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
    /// How many tools of its last list its config's tool filters hid (`enabled_tools`,
    /// `disabled_tools` and their aliases): neither listed nor callable.
    pub filtered_tools: usize,
    /// Its tools in the view come from the cache.
    pub deferred: bool,
    /// The protocol version the server agreed to in `initialize`, or the stateless version
    /// its `server/discover` listed and the client speaks with it.
    pub protocol_version: Option<String>,
    /// The revision family the current attempt speaks, once decided.
    pub era: Option<super::Era>,
    /// The name the server gave in `initialize` (`serverInfo.name`).
    pub server_name: Option<String>,
    /// The version the server gave in `initialize` (`serverInfo.version`).
    pub server_version: Option<String>,
    /// The reconnect attempt under way or scheduled (0 when none).
    pub reconnect_attempt: u32,
    /// When the next reconnect attempt starts, while one is scheduled.
    pub next_attempt_at: Option<Instant>,
    /// The server's usage instructions for the model (`initialize`), when given.
    pub instructions: Option<String>,
    /// What the server declared in `initialize`, once it has answered.
    pub capabilities: Option<crate::protocol::ServerCapabilities>,
}

/// The lifecycle part of a server's state, every field `Copy`: what
/// [`Manager::server_state`] reports of its phase, attempts and tools (the same fields, computed
/// by the same code), read without copying its config, error and capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSummary {
    /// Its status (derived from `phase`).
    pub status: ServerStatus,
    /// Where it is in its lifecycle.
    pub phase: Phase,
    /// The current attempt, while one is opening or open.
    pub conn: Option<ConnId>,
    /// Attempts started so far.
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
    /// The reconnect attempt under way or scheduled (0 when none).
    pub reconnect_attempt: u32,
    /// When the next reconnect attempt starts, while one is scheduled.
    pub next_attempt_at: Option<Instant>,
}

impl ServerState {
    /// Its lifecycle fields, as [`Manager::server_summary`] reports them.
    pub fn summary(&self) -> ServerSummary {
        ServerSummary {
            status: self.status,
            phase: self.phase,
            conn: self.conn,
            attempts: self.attempts,
            started_at: self.started_at,
            ready_at: self.ready_at,
            time_to_ready: self.time_to_ready,
            tool_count: self.tool_count,
            deferred: self.deferred,
            reconnect_attempt: self.reconnect_attempt,
            next_attempt_at: self.next_attempt_at,
        }
    }
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
pub(super) enum Stage {
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

impl Stage {
    pub(super) fn conn(&self) -> Option<ConnId> {
        match self {
            Stage::Idle | Stage::Backoff { .. } => None,
            Stage::Opening { conn, .. }
            | Stage::Initializing { conn, .. }
            | Stage::Listing { conn, .. }
            | Stage::Connected { conn, .. } => Some(*conn),
        }
    }

    pub(super) fn status(&self) -> ServerStatus {
        match self {
            Stage::Idle => ServerStatus::Disconnected,
            Stage::Opening { .. }
            | Stage::Initializing { .. }
            | Stage::Listing { .. }
            | Stage::Backoff { .. } => ServerStatus::Connecting,
            Stage::Connected { .. } => ServerStatus::Connected,
        }
    }

    pub(super) fn phase(&self) -> Phase {
        match self {
            Stage::Idle => Phase::Idle,
            Stage::Opening { .. } => Phase::Opening,
            Stage::Initializing { .. } => Phase::Initializing,
            Stage::Listing { .. } => Phase::ListingTools,
            Stage::Backoff { .. } => Phase::Backoff,
            Stage::Connected { .. } => Phase::Connected,
        }
    }

    pub(super) fn is_pending(&self) -> bool {
        self.status() == ServerStatus::Connecting
    }

    /// Where a request to a server in this phase goes: `Ok(conn)` sends it now, `Err(true)`
    /// holds it until the server connects, `Err(false)` fails it (shared by tool calls and
    /// operations).
    pub(super) fn route(&self) -> Result<ConnId, bool> {
        match *self {
            Stage::Connected { conn, .. } => Ok(conn),
            ref p => Err(p.is_pending()),
        }
    }

    /// An attempt is under way (a startup round waits for these; a backoff does not).
    pub(super) fn in_flight(&self) -> bool {
        matches!(
            self,
            Stage::Opening { .. } | Stage::Initializing { .. } | Stage::Listing { .. }
        )
    }
}

/// One known server: its config, its phase, and what it has in the view.
#[derive(Debug, Clone)]
pub(super) struct Server {
    pub(super) spec: ServerSpec,
    pub(super) hash: String,
    pub(super) transport: Option<&'static str>,
    pub(super) phase: Stage,
    pub(super) cache: CacheState,
    /// Live tools (when connected); shared with the cache state, so storing them costs a
    /// reference count.
    pub(super) tools: Arc<[ToolDef]>,
    /// Tools of its last list that its config's filters hid.
    pub(super) filtered_tools: usize,
    /// What this server has in the view: `None`, `Some(false)` live, `Some(true)` deferred.
    pub(super) exposed: Option<bool>,
    pub(super) last_error: Option<ServerError>,
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
    /// `RefreshTools` requests waiting, each with the re-list it waits for (`None`: the first
    /// list of the attempt under way).
    pub(super) refreshes: Vec<(RequestId, Option<u64>)>,
    /// Re-lists started on the current connection so far; the one under way has this number.
    pub(super) list_gen: u64,
    /// Its resources, templates and prompts, and their lists under way.
    pub(super) catalog: super::catalog::ServerCatalog,
    /// The revision the current attempt speaks, once decided.
    pub(super) era: Option<super::Era>,
    /// How it was reached last (from this process or the cache): the next attempt skips
    /// the probe.
    pub(super) handshake: Option<super::Handshake>,
    /// The log level the embedder set: a stateless server gets it in every request's
    /// `_meta` (the revision has no `logging/setLevel`).
    pub(super) log_level: Option<crate::catalog::LogLevel>,
    /// The resources the embedder subscribed to: on a stateless connection, the stream's
    /// `resourceSubscriptions` (bounded by `MAX_SUBSCRIBED_URIS`).
    pub(super) listen_uris: std::collections::BTreeSet<String>,
    /// Output schemas compiled for the tools of the current list that were called, by raw
    /// tool name; emptied whenever the list is replaced, so never larger than the list.
    pub(super) schemas: BTreeMap<String, Compiled>,
    /// How fresh its lists are together (from its live lists' hints or the cache entry's).
    pub(super) fresh: Option<super::freshness::Fresh>,
    /// How fresh each list is: tools, then resources, templates, prompts.
    pub(super) list_fresh: [Option<super::freshness::Fresh>; 4],
    /// What the server declared when its fresh lists were made (tools, capabilities): they
    /// stand in for its lists only while it declares the same.
    pub(super) fresh_caps: Option<(bool, crate::protocol::ServerCapabilities)>,
}

impl Server {
    /// A server just registered: idle, nothing cached, nothing in the view. Boxed: the
    /// manager's map of servers moves its values when it inserts or removes one, and a
    /// server's state is large.
    pub(super) fn new(
        spec: ServerSpec,
        hash: String,
        transport: Option<&'static str>,
    ) -> Box<Self> {
        Box::new(Server {
            spec,
            hash,
            transport,
            phase: Stage::Idle,
            cache: CacheState::Unknown,
            tools: Vec::new().into(),
            filtered_tools: 0,
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
            refreshes: Vec::new(),
            list_gen: 0,
            catalog: Default::default(),
            era: None,
            handshake: None,
            log_level: None,
            listen_uris: Default::default(),
            schemas: BTreeMap::new(),
            fresh: None,
            list_fresh: [None; 4],
            fresh_caps: None,
        })
    }

    /// Its lifecycle fields, as `state` reports them.
    pub(super) fn summary(&self) -> ServerSummary {
        ServerSummary {
            status: self.phase.status(),
            phase: self.phase.phase(),
            conn: self.phase.conn(),
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
            reconnect_attempt: self.retry_attempt,
            next_attempt_at: match self.phase {
                Stage::Backoff { at } => Some(at),
                _ => None,
            },
        }
    }

    /// Its state as a status display sees it.
    pub(super) fn state(&self, name: &str) -> ServerState {
        let ServerSummary {
            status,
            phase,
            conn,
            attempts,
            started_at,
            ready_at,
            time_to_ready,
            tool_count,
            deferred,
            reconnect_attempt,
            next_attempt_at,
        } = self.summary();
        ServerState {
            name: name.to_string(),
            status,
            phase,
            source: self.spec.source.clone(),
            config_hash: self.hash.clone(),
            transport: self.transport,
            conn,
            last_error: self.last_error.clone(),
            attempts,
            started_at,
            ready_at,
            time_to_ready,
            filtered_tools: self.filtered_tools,
            tool_count,
            deferred,
            protocol_version: self.init.as_ref().map(|i| i.protocol_version.clone()),
            era: self.era,
            server_name: self.init.as_ref().and_then(|i| i.server_name.clone()),
            server_version: self.init.as_ref().and_then(|i| i.server_version.clone()),
            reconnect_attempt,
            next_attempt_at,
            instructions: self.init.as_ref().and_then(|i| i.instructions.clone()),
            capabilities: self.init.as_ref().map(|i| i.capabilities.clone()),
        }
    }
}

impl Manager {
    /// A known server's lifecycle fields (`None` where [`Manager::server_state`] is `None`):
    /// the same values as the fields of that name in `server_state`, without its copies.
    pub fn server_summary(&self, server: &str) -> Option<ServerSummary> {
        self.servers.get(server).map(|s| s.summary())
    }

    /// Bumped by every change that may alter a server's phase or the set of known servers
    /// (a phase replaced, a server started or forgotten). While it stands still, `status`,
    /// `statuses`, `connections`, `pending_connections`, `pending_tool_loads` and each
    /// server's `phase`, `status`, `conn` and `next_attempt_at` cannot have changed.
    pub fn phase_generation(&self) -> u64 {
        self.phase_gen
    }

    /// Move `server` to `phase`, reporting `StatusChanged` when its status changes.
    pub(super) fn set_phase(&mut self, server: &str, phase: Stage) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let before = s.phase.status();
        s.phase = phase;
        self.phase_gen += 1;
        let after = s.phase.status();
        if before != after {
            self.out.push_back(Output::Event(Event::StatusChanged {
                server: server.to_string(),
                status: after,
            }));
        }
    }
}
