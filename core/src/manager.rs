//! The lifecycle state machine: connect many MCP servers in parallel, gate startup, expose a
//! tool view, route calls, tear down.
//!
//! See [`Manager`] for the contract.

use crate::config::{self, ServerSpec, SourceMeta, TransportConfig};
use crate::names::{NameTable, NamingScheme};
use crate::protocol::{self, Incoming, InitializeResult, RequestTracker, Root, ServerNotification};
use crate::rng::SplitMix64;
use crate::time::Instant;
use crate::tool::{Tool, ToolDef, ToolRef, ToolResult};
use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
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

/// A server's status, derived from the registries exactly as the seed does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ServerStatus {
    Connected,
    Connecting,
    Disconnected,
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
    /// These servers' slices of the tool view changed; read [`Manager::tools`].
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

/// Policies. Every default is the seed's behaviour or DESIGN.md's fix of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerOptions {
    /// Seed for the PRNG (reconnect jitter). Same seed, same behaviour.
    pub seed: u64,
    /// The startup gate (seed: 250 ms).
    pub gate: Duration,
    /// How long past the gate to wait for pending servers without a cache entry. `None`
    /// waits until they settle (the seed's correctness wait).
    pub uncached_wait: Option<Duration>,
    pub naming: NamingScheme,
    /// Default per-call timeout.
    pub call_timeout: Duration,
    /// Timeout of each `tools/list` page and other requests after `initialize`.
    pub request_timeout: Duration,
    /// Variables for `${VAR}` expansion (the shell passes the process environment).
    pub env: BTreeMap<String, String>,
    /// Roots answered to `roots/list`; the `roots` capability is declared when non-empty.
    pub roots: Vec<Root>,
    pub max_frame_len: usize,
    pub max_tool_pages: usize,
    /// Version sent as `clientInfo.version`.
    pub client_version: String,
    /// Reconnect after an unexpected close (on by default; the seed has none).
    pub reconnect: ReconnectPolicy,
    /// Periodic `ping` health checks (off by default).
    pub health: Option<HealthPolicy>,
    /// Let `notifications/progress` for a call push its deadline out by its timeout again,
    /// never past `max_call_time` after the call started. Calls then carry a progress token.
    pub reset_timeout_on_progress: bool,
    /// The hard ceiling on a call's total time when progress resets its timeout.
    pub max_call_time: Duration,
    /// The connect timeout of servers whose config sets no `timeout` (default 30 s). Not part
    /// of any cache key, unlike a config's own `timeout`.
    pub default_connect_timeout: Duration,
}

/// Reconnect with backoff: after an unexpected close of a connected server, attempts follow
/// `initial`, ×2 each time, capped at `max`, each with ±`jitter` from the seeded PRNG. More
/// than `burst_limit` unexpected closes within `burst_window` trips a breaker: no more
/// automatic attempts until an explicit `Connect`, `Reload` or `Sync`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectPolicy {
    pub enabled: bool,
    pub initial: Duration,
    pub max: Duration,
    /// Fraction of each delay drawn at random either way (0.2 = ±20%).
    pub jitter: f64,
    pub burst_limit: usize,
    pub burst_window: Duration,
    /// Also retry servers that failed before they ever connected (off by default).
    pub retry_startup_failures: bool,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            enabled: true,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(300),
            jitter: 0.2,
            burst_limit: 5,
            burst_window: Duration::from_secs(30),
            retry_startup_failures: false,
        }
    }
}

impl ReconnectPolicy {
    /// The seed's behaviour: never reconnect by itself.
    pub fn never() -> Self {
        ReconnectPolicy {
            enabled: false,
            ..Default::default()
        }
    }

    /// The un-jittered delay before attempt `n` (1-based): initial × 2^(n-1), capped.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(1).min(30);
        let nanos = (self.initial.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }
}

/// Health checks: a `ping` every `interval`; `misses` unanswered pings in a row (each given
/// `timeout`) count as a failed connection, which is closed and then reconnected.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    pub interval: Duration,
    pub timeout: Duration,
    pub misses: u32,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            misses: 2,
        }
    }
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            seed: 0,
            gate: Duration::from_millis(250),
            uncached_wait: None,
            naming: NamingScheme::Seed,
            call_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            env: BTreeMap::new(),
            roots: Vec::new(),
            max_frame_len: protocol::DEFAULT_MAX_FRAME_LEN,
            max_tool_pages: protocol::MAX_TOOL_PAGES,
            client_version: env!("CARGO_PKG_VERSION").to_string(),
            reconnect: ReconnectPolicy::default(),
            health: None,
            reset_timeout_on_progress: false,
            max_call_time: Duration::from_secs(600),
            default_connect_timeout: crate::config::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// A server's full state, for status displays and invariant checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerState {
    pub name: String,
    pub status: ServerStatus,
    /// `opening`, `initializing`, `listing-tools`, `connected`, `failed`, `idle`.
    pub phase: &'static str,
    pub source: SourceMeta,
    pub config_hash: String,
    pub transport: Option<&'static str>,
    pub conn: Option<ConnId>,
    pub last_error: Option<String>,
    pub attempts: u32,
    pub started_at: Option<Instant>,
    pub ready_at: Option<Instant>,
    /// Time from the start of the last attempt to tools ready.
    pub time_to_ready: Option<Duration>,
    pub tool_count: usize,
    /// Its tools in the view come from the cache.
    pub deferred: bool,
    pub protocol_version: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// The reconnect attempt under way or scheduled (0 when none).
    pub reconnect_attempt: u32,
    /// When the next reconnect attempt starts, while one is scheduled.
    pub next_attempt_at: Option<Instant>,
}

/// Why the next deadline is due (Firezone style: traces say what a timer is for).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum TimerReason {
    Gate { round: u64 },
    UncachedWait { round: u64 },
    Connect { server: String, conn: ConnId },
    Request { conn: ConnId, id: u64 },
    Call { call: CallId },
    Reconnect { server: String, at: Instant },
    Ping { conn: ConnId },
    PingTimeout { conn: ConnId, id: u64 },
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum CacheState {
    Unknown,
    Loading,
    /// Shared with `Server::tools` once the server listed them live.
    Hit(Arc<[ToolDef]>),
    Miss,
}

#[derive(Debug, Clone)]
struct Listing {
    req: u64,
    pages: usize,
    cursors: BTreeSet<String>,
    acc: Vec<ToolDef>,
    deadline: Instant,
}

#[derive(Debug, Clone)]
enum Phase {
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
    fn conn(&self) -> Option<ConnId> {
        match self {
            Phase::Idle | Phase::Backoff { .. } => None,
            Phase::Opening { conn, .. }
            | Phase::Initializing { conn, .. }
            | Phase::Listing { conn, .. }
            | Phase::Connected { conn, .. } => Some(*conn),
        }
    }

    fn status(&self) -> ServerStatus {
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

    fn is_pending(&self) -> bool {
        self.status() == ServerStatus::Connecting
    }

    /// An attempt is under way (a startup round waits for these; a backoff does not).
    fn in_flight(&self) -> bool {
        matches!(
            self,
            Phase::Opening { .. } | Phase::Initializing { .. } | Phase::Listing { .. }
        )
    }
}

#[derive(Debug, Clone)]
struct Server {
    spec: ServerSpec,
    hash: String,
    transport: Option<&'static str>,
    phase: Phase,
    cache: CacheState,
    /// Live tools (when connected); shared with the cache state, so storing them costs a
    /// reference count.
    tools: Arc<[ToolDef]>,
    /// What this server has in the view: `None`, `Some(false)` live, `Some(true)` deferred.
    exposed: Option<bool>,
    last_error: Option<String>,
    attempts: u32,
    started_at: Option<Instant>,
    ready_at: Option<Instant>,
    /// The startup round this server's current attempt belongs to, while that round is open.
    round: Option<u64>,
    init: Option<InitializeResult>,
    /// Reconnect attempt number (0: not retrying).
    retry_attempt: u32,
    /// Times of unexpected closes of established connections, within the burst window.
    closes: VecDeque<Instant>,
    /// Unanswered health pings in a row.
    ping_misses: u32,
    /// A `tools/list_changed` arrived while the first listing was under way: its answer may
    /// predate the change, so list again once connected.
    relist_when_ready: bool,
}

#[derive(Debug, Clone)]
struct Round {
    started: Instant,
    members: BTreeSet<String>,
    errors: BTreeMap<String, String>,
    skipped: Vec<String>,
    /// Members stopped (disconnected) while the round was open.
    disconnected: BTreeSet<String>,
    gate_at: Instant,
    /// The member last seen in flight. `check_rounds` runs after every input and only needs
    /// to know whether some member is still in flight, so it starts looking here: most inputs
    /// do not settle that member, and a scan from it finds the next one in a few steps.
    in_flight_hint: Option<String>,
}

/// An answer to one of our requests, as the codec read it.
enum Answer {
    Raw(Result<Box<RawValue>, protocol::RpcError>),
    Page(Result<protocol::ToolsPage, protocol::ProtocolError>),
}

#[derive(Debug, Clone)]
enum Req {
    Initialize,
    ListTools,
    Call(CallId),
    Ping,
}

#[derive(Debug, Clone)]
struct Conn {
    server: String,
    tracker: RequestTracker<Req>,
    /// The health timer armed for this connection (the next ping, or the answer's deadline),
    /// so a pong or a close disarms it instead of leaving a wake-up behind.
    ping_timer: Option<(Instant, TimerReason)>,
}

#[derive(Debug, Clone)]
enum CallState {
    /// Waiting for a deferred server to connect.
    Waiting,
    Sent {
        conn: ConnId,
        req: u64,
    },
}

#[derive(Debug, Clone)]
struct Call {
    server: String,
    tool: String,
    arguments: Option<Value>,
    timeout: Duration,
    deadline: Instant,
    started: Instant,
    state: CallState,
}

/// Counters of interesting paths, for the simulator's "sometimes" assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub stale_events: u64,
    /// An `Opened` for an attempt no longer tracked (abandoned, or its end reported first),
    /// answered with `CloseTransport`.
    pub stale_opened_closed: u64,
    pub deferred_servers_at_gate: u64,
    pub deferred_calls_sent: u64,
    pub late_failures: u64,
    pub connect_timeouts: u64,
    pub request_timeouts: u64,
    pub call_timeouts: u64,
    pub calls_cancelled: u64,
    pub repeated_cursors: u64,
    pub unknown_responses: u64,
    pub bad_frames: u64,
    pub unsupported_versions: u64,
    pub list_changed_applied: u64,
    pub peer_requests_answered: u64,
    pub gates_by_timer: u64,
    pub uncached_waits_expired: u64,
    pub reconnects_scheduled: u64,
    pub reconnects_succeeded: u64,
    pub breakers_tripped: u64,
    pub ping_timeouts: u64,
    pub health_failures: u64,
    pub progress_resets: u64,
    /// Servers that failed during startup and were scheduled for a retry
    /// (`retry_startup_failures`).
    pub startup_retries: u64,
    /// A `Sync` started a stopped server it listed with an unchanged config.
    pub syncs_restarted_stopped: u64,
    /// A call named a tool that had left the view (told why, not "unknown tool").
    pub calls_to_retired_tools: u64,
}

/// The MCP lifecycle manager: a sans-IO state machine.
///
/// # Contract
///
/// ```text
/// let mut m = Manager::new(options, now);
/// m.handle(now, input);                      // any Input
/// while let Some(out) = m.poll_output() {}   // drain until None after EVERY handle
/// m.poll_timeout()                           // next deadline, if any
/// m.handle_timeout(now)                      // when it passes; then drain again
/// ```
///
/// - **Inputs** (`handle`): [`Input`] — embedder requests (`Connect`, `Reload`, `Sync`,
///   `Disconnect`, `DisconnectAll`, `RefreshTools`, `CallTool`, `CancelCall`) and what the
///   shell observed (`Transport`, `CacheLoaded`).
/// - **Outputs** (`poll_output`): [`Output`] — commands for the shell (`OpenTransport`,
///   `Send`, `CloseTransport`, `LoadCache`, `StoreCache`) and events for the embedder
///   (`StartupComplete`, `ToolsChanged`, `StatusChanged`, `CallCompleted`, `Diagnostic`,
///   `Progress`, `ServerLog`), in
///   the order they were produced. Perform commands in that order.
/// - **Timers**: `poll_timeout` gives the next deadline ([`Manager::next_timer`] also says
///   why); call `handle_timeout` once it has passed. Extra calls are harmless, and once a
///   deadline is handled `poll_timeout` moves past it.
/// - **Getters**: [`Manager::status`], [`Manager::server_state`], [`Manager::tools`],
///   [`Manager::connections`], [`Manager::pending_connections`],
///   [`Manager::pending_tool_loads`], [`Manager::sources`].
///
/// Rules: the manager never reads a clock, a global RNG, the environment, a file, a process or
/// a socket; `now` is passed in and must never decrease (an earlier `now` is treated as the
/// latest one seen). Iteration is over `BTreeMap`s and `Vec`s only, so the same inputs give
/// the same outputs. Nothing from outside panics it: malformed frames, unknown ids and stale
/// events become diagnostics or are ignored.
///
/// The seed's registries are derived from one per-server phase, so a server can never be in
/// two exclusive registries at once: `connections` (phase connected), `pending_connections`
/// (opening, initializing), `pending_tool_loads` (listing tools).
pub struct Manager {
    opts: ManagerOptions,
    now: Instant,
    rng: SplitMix64,
    servers: BTreeMap<String, Server>,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    calls: BTreeMap<CallId, Call>,
    rounds: BTreeMap<u64, Round>,
    next_round: u64,
    names: NameTable,
    timers: BTreeSet<(Instant, TimerReason)>,
    out: VecDeque<Output>,
    counters: Counters,
    /// Qualified names that left the view with their server's slice (a re-list without the
    /// tool, a withdrawal), with the pair they named: a call to one is told why it failed.
    /// An entry goes when its name is minted again.
    retired: BTreeMap<String, (String, String)>,
}

impl Manager {
    pub fn new(opts: ManagerOptions, now: Instant) -> Self {
        Manager {
            retired: BTreeMap::new(),
            rng: SplitMix64::new(opts.seed),
            names: NameTable::new(opts.naming),
            opts,
            now,
            servers: BTreeMap::new(),
            conns: BTreeMap::new(),
            next_conn: 0,
            calls: BTreeMap::new(),
            rounds: BTreeMap::new(),
            next_round: 1,
            timers: BTreeSet::new(),
            out: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    pub fn options(&self) -> &ManagerOptions {
        &self.opts
    }

    // ----- getters ----------------------------------------------------------------------------

    /// The seed's `getConnectionStatus`.
    pub fn status(&self, server: &str) -> ServerStatus {
        self.servers
            .get(server)
            .map_or(ServerStatus::Disconnected, |s| s.phase.status())
    }

    pub fn server_state(&self, server: &str) -> Option<ServerState> {
        let s = self.servers.get(server)?;
        Some(ServerState {
            name: server.to_string(),
            status: s.phase.status(),
            phase: s.phase.name(),
            source: s.spec.source.clone(),
            config_hash: s.hash.clone(),
            transport: s.transport,
            conn: s.phase.conn(),
            last_error: s.last_error.clone(),
            attempts: s.attempts,
            started_at: s.started_at,
            ready_at: s.ready_at,
            time_to_ready: match (s.started_at, s.ready_at) {
                (Some(a), Some(b)) if b >= a => Some(b - a),
                _ => None,
            },
            tool_count: match s.exposed {
                Some(false) => s.tools.len(),
                Some(true) => match &s.cache {
                    CacheState::Hit(t) => t.len(),
                    _ => 0,
                },
                None => 0,
            },
            deferred: s.exposed == Some(true),
            protocol_version: s.init.as_ref().map(|i| i.protocol_version.clone()),
            server_name: s.init.as_ref().and_then(|i| i.server_name.clone()),
            server_version: s.init.as_ref().and_then(|i| i.server_version.clone()),
            reconnect_attempt: s.retry_attempt,
            next_attempt_at: match s.phase {
                Phase::Backoff { at } => Some(at),
                _ => None,
            },
        })
    }

    /// Every known server (connected, pending, or failed and not disconnected), by name.
    pub fn servers(&self) -> Vec<ServerState> {
        self.servers
            .keys()
            .filter_map(|n| self.server_state(n))
            .collect()
    }

    /// The seed's `#connections`.
    pub fn connections(&self) -> Vec<&str> {
        self.names_in(|p| matches!(p, Phase::Connected { .. }))
    }

    /// The seed's `#pendingConnections`.
    pub fn pending_connections(&self) -> Vec<&str> {
        // A server waiting to reconnect is `Connecting`, so it is a pending connection too.
        self.names_in(|p| {
            matches!(
                p,
                Phase::Opening { .. } | Phase::Initializing { .. } | Phase::Backoff { .. }
            )
        })
    }

    /// The seed's `#pendingToolLoads`.
    pub fn pending_tool_loads(&self) -> Vec<&str> {
        self.names_in(|p| matches!(p, Phase::Listing { .. }))
    }

    fn names_in(&self, f: impl Fn(&Phase) -> bool) -> Vec<&str> {
        self.servers
            .iter()
            .filter(|(_, s)| f(&s.phase))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The seed's `#sources`: metadata of every known server.
    pub fn sources(&self) -> BTreeMap<&str, &SourceMeta> {
        self.servers
            .iter()
            .map(|(n, s)| (n.as_str(), &s.spec.source))
            .collect()
    }

    /// The tool view, ordered by qualified name.
    pub fn tools(&self) -> Vec<Tool> {
        self.tool_refs().iter().map(ToolRef::to_tool).collect()
    }

    /// The tool view borrowed, sorted by qualified name: what [`Manager::tools`] returns,
    /// without copying a name or a definition.
    pub fn tool_refs(&self) -> Vec<ToolRef<'_>> {
        let mut out = Vec::with_capacity(self.names.len());
        for (name, s) in &self.servers {
            let Some(deferred) = s.exposed else {
                continue;
            };
            let list = match (&s.cache, deferred) {
                (CacheState::Hit(t), true) => t,
                (_, true) => continue,
                (_, false) => &s.tools,
            };
            // The table knows where each of its tools sits in the list it was given (`expose`
            // gives it exactly this list); the name check guards against a stale position.
            for (q, tool, index) in self.names.server_tools_indexed(name) {
                let def = match list.get(index) {
                    Some(def) if def.name == tool => def,
                    _ => match list.iter().find(|d| d.name == tool) {
                        Some(def) => def,
                        None => continue,
                    },
                };
                out.push(ToolRef {
                    qualified_name: q,
                    server: name,
                    def,
                    deferred,
                });
            }
        }
        // Each server's tools come in raw-name order, which is usually their qualified-name
        // order too: a stable sort merges those runs instead of sorting from scratch.
        out.sort_by(|a, b| a.qualified_name.cmp(b.qualified_name));
        out
    }

    /// Number of tools in the view.
    pub fn tool_count(&self) -> usize {
        self.names.len()
    }

    /// A re-list of this connected server's tools is under way (after `RefreshTools` or a
    /// `tools/list_changed` notification). The shell uses it to answer `refresh_tools` only
    /// once the list it asked for is applied.
    pub fn refreshing(&self, server: &str) -> bool {
        matches!(
            self.servers.get(server).map(|s| &s.phase),
            Some(Phase::Connected {
                refresh: Some(_),
                ..
            })
        )
    }

    /// Route a qualified name to (server, raw tool name).
    pub fn resolve_tool(&self, qualified: &str) -> Option<(&str, &str)> {
        self.names.resolve(qualified)
    }

    /// Attempts whose transport is open or opening (the core has not closed them).
    pub fn open_conns(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// Calls not yet completed.
    pub fn calls_in_flight(&self) -> Vec<CallId> {
        self.calls.keys().copied().collect()
    }

    /// Rounds whose `StartupComplete` has not been emitted yet.
    pub fn open_rounds(&self) -> Vec<u64> {
        self.rounds.keys().copied().collect()
    }

    /// The number of the latest startup round, open or complete (`None` before the first).
    /// Every `Connect` and `Reload` opens one, so right after handling one of them this is
    /// its round: the shell matches the `StartupComplete` it waits for by this number.
    pub fn last_round(&self) -> Option<u64> {
        self.next_round.checked_sub(1).filter(|r| *r > 0)
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    // ----- outputs and timers -----------------------------------------------------------------

    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// The next deadline and what it is for.
    pub fn next_timer(&self) -> Option<(Instant, TimerReason)> {
        self.timers.first().cloned()
    }

    fn arm(&mut self, at: Instant, reason: TimerReason) {
        self.timers.insert((at, reason));
    }

    fn disarm(&mut self, at: Instant, reason: TimerReason) {
        self.timers.remove(&(at, reason));
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    // ----- inputs -----------------------------------------------------------------------------

    pub fn handle(&mut self, now: Instant, input: Input) {
        self.advance(now);
        match input {
            Input::Connect { servers } => self.connect(servers),
            Input::Reload { servers } => {
                self.disconnect_all();
                self.connect(servers);
            }
            Input::Sync { servers } => self.sync(servers),
            Input::Disconnect { server } => self.disconnect(&server),
            Input::DisconnectAll => self.disconnect_all(),
            Input::RefreshTools { server } => self.refresh(&server),
            Input::Transport { conn, event } => self.on_transport(conn, event),
            Input::CacheLoaded { server, key, tools } => self.on_cache(&server, key, tools),
            Input::CallTool {
                call,
                tool,
                arguments,
                timeout,
            } => self.call_tool(call, &tool, arguments, timeout),
            Input::CancelCall { call } => self.cancel_call(call),
        }
        self.check_rounds();
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        while let Some((at, _)) = self.timers.first() {
            if *at > self.now {
                break;
            }
            let Some((_, reason)) = self.timers.pop_first() else {
                break;
            };
            self.on_timer(reason);
        }
        self.check_rounds();
    }

    fn on_timer(&mut self, reason: TimerReason) {
        match reason {
            // The round check after the loop acts on gates.
            TimerReason::Gate { .. } => self.counters.gates_by_timer += 1,
            // Acted on by the round check after every due timer has run, so a connect timeout
            // due at the same instant is reported as that server's error, not as pending.
            TimerReason::UncachedWait { .. } => {}
            TimerReason::Connect { server, conn } => {
                let timeout = self.servers.get(&server).map(|s| {
                    s.spec
                        .config
                        .connect_timeout_or(self.opts.default_connect_timeout)
                });
                let current = self.servers.get(&server).and_then(|s| s.phase.conn());
                if current == Some(conn) {
                    if let Some(t) = timeout {
                        self.counters.connect_timeouts += 1;
                        self.fail_server(
                            &server,
                            format!("connect timed out after {} ms", t.as_millis()),
                            true,
                        );
                    }
                }
            }
            TimerReason::Request { conn, id } => {
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                let server = c.server.clone();
                if !matches!(c.tracker.get(id), Some(Req::ListTools)) {
                    return;
                }
                c.tracker.forget(id);
                self.counters.request_timeouts += 1;
                self.send(conn, protocol::encode_cancelled(id, "request timed out"));
                let ms = self.opts.request_timeout.as_millis();
                let refreshing = matches!(
                    self.servers.get(&server).map(|s| &s.phase),
                    Some(Phase::Connected { .. })
                );
                if refreshing {
                    self.end_refresh(&server, Err(format!("tools/list timed out after {ms} ms")));
                } else {
                    self.fail_server(&server, format!("tools/list timed out after {ms} ms"), true);
                }
            }
            TimerReason::Reconnect { server, at } => {
                let due = matches!(
                    self.servers.get(&server).map(|s| &s.phase),
                    Some(Phase::Backoff { at: a }) if *a == at
                );
                if due {
                    self.retry(&server);
                }
            }
            TimerReason::Ping { conn } => self.send_ping(conn),
            TimerReason::PingTimeout { conn, id } => self.on_ping_timeout(conn, id),
            TimerReason::Call { call } => {
                let Some(c) = self.calls.get(&call) else {
                    return;
                };
                let ms = c.timeout.as_millis();
                self.counters.call_timeouts += 1;
                let message = match c.state {
                    CallState::Waiting => format!(
                        "MCP error: tool call timed out after {ms} ms waiting for server \"{}\" to connect",
                        c.server
                    ),
                    CallState::Sent { .. } => {
                        format!("MCP error: tool call timed out after {ms} ms")
                    }
                };
                self.abort_call(call, "request timed out", CallOutcome::Err(message));
            }
        }
    }

    // ----- connect / round --------------------------------------------------------------------

    fn connect(&mut self, specs: Vec<ServerSpec>) {
        let round_id = self.next_round;
        self.next_round += 1;
        let mut round = Round {
            started: self.now,
            members: BTreeSet::new(),
            errors: BTreeMap::new(),
            skipped: Vec::new(),
            disconnected: BTreeSet::new(),
            gate_at: self.now + self.opts.gate,
            in_flight_hint: None,
        };
        // Deduplicate by name: the first spec of a name wins (merging did that already;
        // this guards embedders that pass duplicates).
        let mut seen = BTreeSet::new();
        for spec in specs {
            if !seen.insert(spec.name.clone()) {
                self.diag(
                    Some(&spec.name),
                    Level::Warn,
                    "duplicate server in one request; the first one is used".into(),
                );
                continue;
            }
            if !spec.config.enabled {
                continue;
            }
            let name = spec.name.clone();
            if let Some(s) = self.servers.get_mut(&name) {
                // Store/update source metadata even when skipping (the seed does).
                s.spec.source = spec.source.clone();
                if !matches!(s.phase, Phase::Idle) {
                    round.skipped.push(name);
                    continue;
                }
                // An explicit connect clears a tripped breaker and the retry ladder.
                s.closes.clear();
                s.retry_attempt = 0;
            }
            match self.start_server(spec, Some(round_id)) {
                Ok(()) => {
                    round.members.insert(name);
                }
                Err(e) => {
                    round.errors.insert(name, e);
                }
            }
        }
        self.arm(round.gate_at, TimerReason::Gate { round: round_id });
        self.rounds.insert(round_id, round);
    }

    /// Register (or update) the server and start an attempt. Errors are config errors; the
    /// server is then known, idle, with that error.
    fn start_server(&mut self, spec: ServerSpec, round: Option<u64>) -> Result<(), String> {
        let name = spec.name.clone();
        let hash = config::config_hash(&spec.config);
        let resolved = config::resolve(&name, &spec.config, &self.opts.env);
        let transport = spec
            .config
            .transport_kind()
            .ok()
            .map(config::TransportKind::as_str);
        let s = self.servers.entry(name.clone()).or_insert_with(|| Server {
            spec: spec.clone(),
            hash: hash.clone(),
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
        });
        if s.hash != hash {
            s.cache = CacheState::Unknown;
        }
        s.spec = spec;
        s.hash = hash.clone();
        s.transport = transport;
        let config = match resolved {
            Ok(c) => c,
            Err(e) => {
                let msg = e.to_string();
                s.last_error = Some(msg.clone());
                s.round = None;
                return Err(msg);
            }
        };
        s.attempts += 1;
        s.started_at = Some(self.now);
        s.ready_at = None;
        s.last_error = None;
        s.round = round;
        s.init = None;
        s.relist_when_ready = false;
        let deadline = self.now
            + s.spec
                .config
                .connect_timeout_or(self.opts.default_connect_timeout);
        let need_cache = matches!(s.cache, CacheState::Unknown);
        if need_cache {
            s.cache = CacheState::Loading;
        }
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                server: name.clone(),
                tracker: RequestTracker::default(),
                ping_timer: None,
            },
        );
        self.set_phase(&name, Phase::Opening { conn, deadline });
        self.arm(
            deadline,
            TimerReason::Connect {
                server: name.clone(),
                conn,
            },
        );
        // Cache lookups go out with the open, so reading the cache never adds to the gate.
        if need_cache {
            self.out.push_back(Output::LoadCache {
                server: name.clone(),
                key: CacheKey {
                    server: name.clone(),
                    config_hash: hash,
                },
            });
        }
        self.out.push_back(Output::OpenTransport {
            conn,
            server: name,
            config,
        });
        Ok(())
    }

    /// Emit `StartupComplete` for every open round whose gate condition holds.
    fn check_rounds(&mut self) {
        let ids: Vec<u64> = self.rounds.keys().copied().collect();
        for id in ids {
            let Some(r) = self.rounds.get(&id) else {
                continue;
            };
            let gate_passed = self.now >= r.gate_at;
            // Whether any member is still in flight, and (past the gate) whether one of those
            // has no cached tools; members are scanned from the last one seen in flight, and
            // the scan stops as soon as the answer is known.
            let mut all_settled = true;
            let mut uncached_pending = false;
            let mut first_in_flight: Option<&String> = None;
            let from = r.in_flight_hint.as_deref().unwrap_or("");
            let rotated = r
                .members
                .range::<str, _>((Bound::Included(from), Bound::Unbounded))
                .chain(
                    r.members
                        .range::<str, _>((Bound::Unbounded, Bound::Excluded(from))),
                );
            for m in rotated {
                let Some(s) = self.servers.get(m) else {
                    continue; // disconnected: settled
                };
                if s.round != Some(id) || !s.phase.in_flight() {
                    continue;
                }
                all_settled = false;
                first_in_flight.get_or_insert(m);
                if !matches!(s.cache, CacheState::Hit(_)) {
                    uncached_pending = true;
                }
                if !gate_passed || uncached_pending {
                    break;
                }
            }
            if first_in_flight != r.in_flight_hint.as_ref() {
                let hint = first_in_flight.cloned();
                if let Some(r) = self.rounds.get_mut(&id) {
                    r.in_flight_hint = hint;
                }
            }
            let Some(r) = self.rounds.get(&id) else {
                continue;
            };
            let wait_over = self
                .opts
                .uncached_wait
                .is_some_and(|w| self.now >= r.gate_at + w);
            if all_settled || (gate_passed && !uncached_pending) {
                self.complete_round(id);
            } else if gate_passed && wait_over {
                self.counters.uncached_waits_expired += 1;
                self.complete_round(id);
            } else if gate_passed {
                // The seed's correctness wait, bounded when the embedder asked for it.
                if let Some(wait) = self.opts.uncached_wait {
                    let at = r.gate_at + wait;
                    self.arm(at, TimerReason::UncachedWait { round: id });
                }
            }
        }
    }

    fn complete_round(&mut self, id: u64) {
        let Some(r) = self.rounds.remove(&id) else {
            return;
        };
        self.disarm(r.gate_at, TimerReason::Gate { round: id });
        if let Some(wait) = self.opts.uncached_wait {
            self.disarm(r.gate_at + wait, TimerReason::UncachedWait { round: id });
        }
        let mut report = StartupReport {
            round: id,
            elapsed: self.now - r.started,
            tools: Vec::new(),
            errors: r.errors,
            connected: Vec::new(),
            deferred: Vec::new(),
            pending: Vec::new(),
            skipped: r.skipped,
            disconnected: r.disconnected.into_iter().collect(),
            config_errors: Vec::new(),
            shadowed: Vec::new(),
        };
        for m in &r.members {
            let Some(s) = self.servers.get_mut(m) else {
                continue;
            };
            if s.round != Some(id) {
                continue;
            }
            s.round = None;
            match (&s.phase, &s.cache) {
                (Phase::Connected { .. }, _) => report.connected.push(m.clone()),
                (Phase::Idle | Phase::Backoff { .. }, _) => {
                    let e = s.last_error.clone().unwrap_or_else(|| "failed".into());
                    report.errors.insert(m.clone(), e);
                }
                (_, CacheState::Hit(_)) => {
                    report.deferred.push(m.clone());
                    self.counters.deferred_servers_at_gate += 1;
                    self.expose(m, true);
                }
                _ => report.pending.push(m.clone()),
            }
        }
        report.tools = self.tools();
        self.out.push_back(Output::StartupComplete(report));
    }

    // ----- transport events ------------------------------------------------------------------

    fn on_transport(&mut self, conn: ConnId, event: TransportEvent) {
        let Some(c) = self.conns.get(&conn) else {
            // Stale: an attempt we abandoned (and already closed), one whose end the shell
            // reported before its open, or one never issued.
            self.counters.stale_events += 1;
            if matches!(event, TransportEvent::Opened) && conn.0 < self.next_conn {
                // The shell now holds a live transport for an attempt nobody tracks: close it
                // (the shell treats a close of what it no longer holds as a no-op).
                self.counters.stale_opened_closed += 1;
                self.out.push_back(Output::CloseTransport { conn });
            }
            return;
        };
        let server = c.server.clone();
        match event {
            TransportEvent::Opened => {
                let Some(s) = self.servers.get(&server) else {
                    return;
                };
                if let Phase::Opening { conn: pc, deadline } = s.phase {
                    if pc != conn {
                        return;
                    }
                    let params = protocol::initialize_params(
                        &self.opts.client_version,
                        !self.opts.roots.is_empty(),
                    );
                    let Some(c) = self.conns.get_mut(&conn) else {
                        return;
                    };
                    let (_, frame) = c.tracker.start("initialize", Some(params), Req::Initialize);
                    self.send(conn, frame);
                    self.set_phase(&server, Phase::Initializing { conn, deadline });
                }
            }
            TransportEvent::Frame(frame) => self.on_frame(conn, &server, &frame),
            TransportEvent::Notice { message } => self.diag(Some(&server), Level::Warn, message),
            TransportEvent::Closed { reason } => {
                self.remove_conn(conn);
                self.transport_gone(&server, format!("connection closed: {reason}"));
            }
            TransportEvent::Failed { error } => {
                self.remove_conn(conn);
                self.transport_gone(&server, error);
            }
        }
    }

    /// The shell reports the transport is gone (it cleaned up; no `CloseTransport`).
    fn transport_gone(&mut self, server: &str, error: String) {
        self.fail_server(server, error, false);
    }

    fn on_frame(&mut self, conn: ConnId, server: &str, frame: &[u8]) {
        // A `tools/list` answer is read as a page while the frame is parsed (one pass over
        // its bytes, no raw copy of the result).
        let conns = &self.conns;
        let expect = |id: u64| match conns.get(&conn).and_then(|c| c.tracker.get(id)) {
            Some(Req::ListTools) => protocol::Expect::ToolsPage,
            _ => protocol::Expect::Raw,
        };
        let msg = match protocol::decode_expecting(frame, self.opts.max_frame_len, &expect) {
            Ok(m) => m,
            Err(e @ protocol::DecodeError::TooLarge { .. }) => {
                self.counters.bad_frames += 1;
                self.fail_server(server, e.to_string(), true);
                return;
            }
            Err(e) => {
                self.counters.bad_frames += 1;
                self.diag(Some(server), Level::Warn, format!("ignored a frame: {e}"));
                return;
            }
        };
        let (id, answer) = match msg {
            Incoming::Response { id, result } => (id, Answer::Raw(result)),
            Incoming::ToolsPage { id, page } => (Some(id), Answer::Page(page)),
            Incoming::Request { id, method, .. } => {
                self.counters.peer_requests_answered += 1;
                let answer = protocol::answer_peer_request(&id, &method, &self.opts.roots);
                self.send(conn, answer);
                return;
            }
            Incoming::Notification(n) => {
                self.on_notification(server, n);
                return;
            }
        };
        let req = id.and_then(|id| {
            self.conns
                .get_mut(&conn)
                .and_then(|c| c.tracker.complete(id).map(|r| (id, r)))
        });
        let Some((id, req)) = req else {
            self.counters.unknown_responses += 1;
            self.diag(
                Some(server),
                Level::Debug,
                format!(
                    "ignored a response to an unknown or already answered request id {}",
                    id.map_or("(none)".to_string(), |i| i.to_string())
                ),
            );
            return;
        };
        match (req, answer) {
            (Req::ListTools, Answer::Page(page)) => {
                let page = page.map_err(|e| format!("tools/list failed: {e}"));
                self.on_list_page(conn, server, id, page);
            }
            (Req::ListTools, Answer::Raw(result)) => {
                let page = result
                    .map_err(|e| format!("tools/list failed: {e}"))
                    .and_then(|v| {
                        protocol::parse_list_tools_result(&v)
                            .map_err(|e| format!("tools/list failed: {e}"))
                    });
                self.on_list_page(conn, server, id, page);
            }
            // Not reached: `expect` asks for a page only for a pending `tools/list` id, and
            // nothing completes requests between the decode and here.
            (_, Answer::Page(_)) => {}
            (Req::Initialize, Answer::Raw(result)) => self.on_initialize(conn, server, result),
            (Req::Call(call), Answer::Raw(result)) => self.on_call_result(call, result),
            (Req::Ping, Answer::Raw(_)) => self.on_pong(conn, server),
        }
    }

    fn on_notification(&mut self, server: &str, n: ServerNotification) {
        match n {
            ServerNotification::ToolsListChanged => self.on_list_changed(server),
            ServerNotification::Message {
                level,
                logger,
                data,
            } => {
                let lvl = match level.as_str() {
                    "debug" => Level::Debug,
                    "info" | "notice" => Level::Info,
                    "warning" => Level::Warn,
                    _ => Level::Error,
                };
                self.out.push_back(Output::ServerLog {
                    server: server.to_string(),
                    level: lvl,
                    severity: level,
                    logger,
                    data,
                });
            }
            ServerNotification::Progress {
                token,
                progress,
                total,
                message,
            } => {
                let call = self.on_progress(server, &token);
                self.out.push_back(Output::Progress {
                    server: server.to_string(),
                    call,
                    progress,
                    total,
                    message,
                });
            }
            ServerNotification::Cancelled { .. } | ServerNotification::Other { .. } => {}
        }
    }

    fn on_initialize(
        &mut self,
        conn: ConnId,
        server: &str,
        result: Result<Box<RawValue>, protocol::RpcError>,
    ) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let Phase::Initializing { deadline, .. } = s.phase else {
            return;
        };
        let init = match result {
            Ok(v) => match protocol::parse_initialize_result(&v) {
                Ok(i) => i,
                Err(e) => {
                    if matches!(e, protocol::ProtocolError::UnsupportedVersion(_)) {
                        self.counters.unsupported_versions += 1;
                    }
                    self.fail_server(server, format!("initialize failed: {e}"), true);
                    return;
                }
            },
            Err(e) => {
                self.fail_server(server, format!("initialize failed: {e}"), true);
                return;
            }
        };
        self.disarm(
            deadline,
            TimerReason::Connect {
                server: server.to_string(),
                conn,
            },
        );
        self.send(
            conn,
            protocol::encode_notification("notifications/initialized", None),
        );
        let has_tools = init.has_tools;
        if let Some(s) = self.servers.get_mut(server) {
            s.init = Some(init);
        }
        if has_tools {
            if let Some(listing) = self.start_list(conn, None, 0, BTreeSet::new(), Vec::new()) {
                self.set_phase(server, Phase::Listing { conn, listing });
            }
        } else {
            // No tools capability: ready with an empty list.
            self.tools_ready(server, Vec::new());
        }
    }

    fn start_list(
        &mut self,
        conn: ConnId,
        cursor: Option<String>,
        pages: usize,
        cursors: BTreeSet<String>,
        acc: Vec<ToolDef>,
    ) -> Option<Listing> {
        let c = self.conns.get_mut(&conn)?;
        let (req, frame) = c.tracker.start(
            "tools/list",
            protocol::list_tools_params(cursor.as_deref()),
            Req::ListTools,
        );
        self.send(conn, frame);
        let deadline = self.now + self.opts.request_timeout;
        self.arm(deadline, TimerReason::Request { conn, id: req });
        Some(Listing {
            req,
            pages,
            cursors,
            acc,
            deadline,
        })
    }

    fn on_list_page(
        &mut self,
        conn: ConnId,
        server: &str,
        id: u64,
        page: Result<protocol::ToolsPage, String>,
    ) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let (listing, refreshing) = match &mut s.phase {
            Phase::Listing { listing, .. } if listing.req == id => (listing.clone(), false),
            Phase::Connected {
                refresh: Some(listing),
                ..
            } if listing.req == id => (listing.clone(), true),
            _ => return,
        };
        self.disarm(listing.deadline, TimerReason::Request { conn, id });
        let outcome = match page {
            Err(e) => Err(e),
            Ok(protocol::ToolsPage {
                tools,
                next_cursor: next,
                skipped,
            }) => {
                if !skipped.is_empty() {
                    self.diag(
                        Some(server),
                        Level::Warn,
                        format!("skipped malformed tool definitions: {}", skipped.join(", ")),
                    );
                }
                let mut acc = listing.acc;
                acc.extend(tools);
                let pages = listing.pages + 1;
                match next {
                    None => Ok(acc),
                    Some(cursor) => {
                        let mut cursors = listing.cursors;
                        if !cursors.insert(cursor.clone()) {
                            self.counters.repeated_cursors += 1;
                            Err(format!(
                                "tools/list failed: the server repeated cursor \"{cursor}\""
                            ))
                        } else if pages >= self.opts.max_tool_pages {
                            Err(format!(
                                "tools/list failed: more than {} pages",
                                self.opts.max_tool_pages
                            ))
                        } else {
                            if let Some(next) =
                                self.start_list(conn, Some(cursor), pages, cursors, acc)
                            {
                                if let Some(s) = self.servers.get_mut(server) {
                                    match &mut s.phase {
                                        Phase::Listing { listing, .. } => *listing = next,
                                        Phase::Connected { refresh, .. } => *refresh = Some(next),
                                        _ => {}
                                    }
                                }
                            }
                            return;
                        }
                    }
                }
            }
        };
        if refreshing {
            self.end_refresh(server, outcome);
        } else {
            match outcome {
                Ok(tools) => self.tools_ready(server, tools),
                // Flaw 6: a server whose tools/list fails is not left "connected" with no
                // tools: it fails, and its transport is closed.
                Err(e) => self.fail_server(server, e, true),
            }
        }
    }

    /// First tool list done: the server is connected.
    fn tools_ready(&mut self, server: &str, tools: Vec<ToolDef>) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let Some(conn) = s.phase.conn() else {
            return;
        };
        s.tools = dedupe(tools).into();
        s.ready_at = Some(self.now);
        s.last_error = None;
        s.ping_misses = 0;
        if s.retry_attempt > 0 {
            s.retry_attempt = 0;
            self.counters.reconnects_succeeded += 1;
        }
        let key = CacheKey {
            server: server.to_string(),
            config_hash: s.hash.clone(),
        };
        let stored = s.tools.to_vec();
        // Live tools replace whatever the cache said; the cache now holds them too.
        s.cache = CacheState::Hit(s.tools.clone());
        let in_open_round = s.round.is_some();
        self.set_phase(
            server,
            Phase::Connected {
                conn,
                refresh: None,
                again: false,
            },
        );
        self.expose(server, false);
        self.out.push_back(Output::StoreCache {
            server: server.to_string(),
            key,
            tools: stored,
        });
        if !in_open_round {
            self.out.push_back(Output::ToolsChanged {
                servers: vec![server.to_string()],
            });
        }
        if let Some(h) = &self.opts.health {
            let at = self.now + h.interval;
            self.arm_ping(conn, at, TimerReason::Ping { conn });
        }
        self.flush_waiting_calls(server, conn);
        let relist = self
            .servers
            .get_mut(server)
            .is_some_and(|s| std::mem::take(&mut s.relist_when_ready));
        if relist {
            self.refresh(server);
        }
    }

    // ----- refresh / list_changed ------------------------------------------------------------

    fn refresh(&mut self, server: &str) {
        let Some(s) = self.servers.get_mut(server) else {
            self.diag(
                Some(server),
                Level::Warn,
                "refresh of an unknown server ignored".into(),
            );
            return;
        };
        // Pending servers list their tools anyway once connected: nothing to do for them.
        if let Phase::Connected {
            conn,
            refresh,
            again,
        } = &mut s.phase
        {
            if refresh.is_some() {
                *again = true;
                return;
            }
            let conn = *conn;
            let listing = self.start_list(conn, None, 0, BTreeSet::new(), Vec::new());
            if let Some(Phase::Connected { refresh, .. }) =
                self.servers.get_mut(server).map(|s| &mut s.phase)
            {
                *refresh = listing;
            }
        }
    }

    fn on_list_changed(&mut self, server: &str) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let declared = s.init.as_ref().is_some_and(|i| i.tools_list_changed);
        if !declared {
            self.diag(
                Some(server),
                Level::Debug,
                "ignored tools/list_changed: the server did not declare tools.listChanged".into(),
            );
        } else if matches!(s.phase, Phase::Connected { .. }) {
            self.refresh(server);
        } else if matches!(s.phase, Phase::Listing { .. }) {
            if let Some(s) = self.servers.get_mut(server) {
                s.relist_when_ready = true;
            }
        }
    }

    fn end_refresh(&mut self, server: &str, outcome: Result<Vec<ToolDef>, String>) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let Phase::Connected {
            conn,
            refresh,
            again,
        } = &mut s.phase
        else {
            return;
        };
        let conn = *conn;
        *refresh = None;
        let again = std::mem::take(again);
        match outcome {
            Ok(tools) => {
                self.counters.list_changed_applied += 1;
                let tools = dedupe(tools);
                s.tools = tools.as_slice().into();
                s.cache = CacheState::Hit(s.tools.clone());
                let key = CacheKey {
                    server: server.to_string(),
                    config_hash: s.hash.clone(),
                };
                self.expose(server, false);
                self.out.push_back(Output::StoreCache {
                    server: server.to_string(),
                    key,
                    tools,
                });
                self.out.push_back(Output::ToolsChanged {
                    servers: vec![server.to_string()],
                });
            }
            Err(e) => self.diag(
                Some(server),
                Level::Warn,
                format!("{e}; keeping the previous tool list"),
            ),
        }
        if again {
            let listing = self.start_list(conn, None, 0, BTreeSet::new(), Vec::new());
            if let Some(Phase::Connected { refresh, .. }) =
                self.servers.get_mut(server).map(|s| &mut s.phase)
            {
                *refresh = listing;
            }
        }
    }

    fn on_cache(&mut self, server: &str, key: CacheKey, tools: Option<Vec<ToolDef>>) {
        let Some(s) = self.servers.get_mut(server) else {
            self.counters.stale_events += 1;
            return;
        };
        if key.config_hash != s.hash
            || key.server != server
            || !matches!(s.cache, CacheState::Loading)
        {
            self.counters.stale_events += 1;
            return;
        }
        s.cache = match tools {
            Some(t) => CacheState::Hit(dedupe(t).into()),
            None => CacheState::Miss,
        };
    }

    // ----- failure and teardown ---------------------------------------------------------------

    /// The server's current attempt failed. `close`: also close the transport (false when the
    /// shell reported it gone). Withdraws its tools, fails its calls, reports the error once.
    fn fail_server(&mut self, server: &str, error: String, close: bool) {
        let policy = self.opts.reconnect.clone();
        let now = self.now;
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let was_connected = matches!(s.phase, Phase::Connected { .. });
        let retrying = s.retry_attempt > 0;
        let in_round = s.round.is_some();
        s.last_error = Some(error.clone());
        // The round's report names this failure even if the server is no longer the round's
        // by then (a retry or a later `Connect` started another attempt).
        if let Some(r) = s.round.and_then(|id| self.rounds.get_mut(&id)) {
            r.errors.insert(server.to_string(), error.clone());
        }
        let call_error = format!("MCP error: {error}");
        if policy.enabled && was_connected {
            // An unexpected close of an established connection: reconnect, unless the
            // server is flapping.
            s.closes.push_back(now);
            while s
                .closes
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) > policy.burst_window)
            {
                s.closes.pop_front();
            }
            if s.closes.len() > policy.burst_limit {
                let n = s.closes.len();
                s.closes.clear();
                s.retry_attempt = 0;
                let msg = format!(
                    "{error}; automatic reconnects stopped after {n} unexpected closes within {} s (connect, reload or sync it to try again)",
                    policy.burst_window.as_secs()
                );
                s.last_error = Some(msg.clone());
                self.counters.breakers_tripped += 1;
                self.stop_attempt(server, close, &call_error);
                self.diag(Some(server), Level::Error, msg);
                return;
            }
            let delay = self.schedule_retry(server, 1, close, &call_error);
            self.out.push_back(Output::ReconnectScheduled {
                server: server.to_string(),
                attempt: 1,
                delay,
                error,
            });
            return;
        }
        if policy.enabled && (retrying || policy.retry_startup_failures) {
            self.counters.startup_retries += u64::from(!retrying);
            let attempt = s.retry_attempt + 1;
            let delay = self.schedule_retry(server, attempt, close, &call_error);
            self.out.push_back(Output::ReconnectScheduled {
                server: server.to_string(),
                attempt,
                delay,
                error,
            });
            return;
        }
        self.stop_attempt(server, close, &call_error);
        if !in_round {
            // After the gate: a late failure (or a dropped connection) is logged once here;
            // its transport is gone, so nothing about this attempt is reported again.
            self.counters.late_failures += u64::from(!was_connected);
            let what = if was_connected {
                "connection lost"
            } else {
                "failed after startup"
            };
            self.diag(Some(server), Level::Error, format!("{what}: {error}"));
        }
    }

    /// Drop the current attempt but keep the server: its live tools turn deferred (from its
    /// last list), calls waiting for it keep waiting, calls sent on the dead connection fail.
    /// Attempt `attempt` starts after the jittered ladder delay.
    fn schedule_retry(
        &mut self,
        server: &str,
        attempt: u32,
        close: bool,
        call_error: &str,
    ) -> Duration {
        self.drop_conn(server, close, call_error, true);
        let live = self
            .servers
            .get(server)
            .is_some_and(|s| s.exposed == Some(false));
        if live {
            self.expose(server, true);
            if self.servers.get(server).is_some_and(|s| s.round.is_none()) {
                self.out.push_back(Output::ToolsChanged {
                    servers: vec![server.to_string()],
                });
            }
        }
        let policy = &self.opts.reconnect;
        let base = policy.base_delay(attempt);
        let jitter = policy.jitter.clamp(0.0, 1.0);
        let factor = 1.0 - jitter + 2.0 * jitter * self.rng.next_f64();
        let delay = Duration::from_nanos((base.as_nanos() as f64 * factor) as u64);
        let at = self.now + delay;
        if let Some(s) = self.servers.get_mut(server) {
            s.retry_attempt = attempt;
        }
        self.counters.reconnects_scheduled += 1;
        self.set_phase(server, Phase::Backoff { at });
        self.arm(
            at,
            TimerReason::Reconnect {
                server: server.to_string(),
                at,
            },
        );
        delay
    }

    /// Start the next attempt of a server waiting in backoff.
    fn retry(&mut self, server: &str) {
        let Some(spec) = self.servers.get(server).map(|s| s.spec.clone()) else {
            return;
        };
        let attempt = self.servers.get(server).map_or(0, |s| s.retry_attempt);
        self.out.push_back(Output::ReconnectStarted {
            server: server.to_string(),
            attempt,
        });
        if let Err(e) = self.start_server(spec, None) {
            self.stop_attempt(server, false, &format!("MCP error: {e}"));
            return;
        }
        if let Some(s) = self.servers.get_mut(server) {
            s.retry_attempt = attempt;
        }
    }

    /// Tear down the current attempt: close the transport if asked, fail its calls with
    /// `call_error`, withdraw its tools, go idle.
    fn stop_attempt(&mut self, server: &str, close: bool, call_error: &str) {
        self.drop_conn(server, close, call_error, false);
        self.withdraw(server);
        self.set_phase(server, Phase::Idle);
    }

    /// Forget the current connection (closing it if asked) and fail the calls that depend on
    /// it; with `keep_waiting`, calls still waiting for a connection stay.
    fn drop_conn(&mut self, server: &str, close: bool, call_error: &str, keep_waiting: bool) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let phase = s.phase.clone();
        if let Some(conn) = phase.conn() {
            if self.remove_conn(conn) && close {
                self.out.push_back(Output::CloseTransport { conn });
            }
            if let Phase::Opening { deadline, .. } | Phase::Initializing { deadline, .. } = phase {
                self.disarm(
                    deadline,
                    TimerReason::Connect {
                        server: server.to_string(),
                        conn,
                    },
                );
            }
        }
        if let Phase::Backoff { at } = phase {
            self.disarm(
                at,
                TimerReason::Reconnect {
                    server: server.to_string(),
                    at,
                },
            );
        }
        let calls: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                c.server == server && !(keep_waiting && matches!(c.state, CallState::Waiting))
            })
            .map(|(id, _)| *id)
            .collect();
        for call in calls {
            self.complete_call(call, CallOutcome::Err(call_error.to_string()));
        }
    }

    // ----- health -----------------------------------------------------------------------------

    fn current_conn_of(&self, conn: ConnId) -> Option<String> {
        let server = self.conns.get(&conn)?.server.clone();
        let s = self.servers.get(&server)?;
        matches!(s.phase, Phase::Connected { conn: c, .. } if c == conn).then_some(server)
    }

    fn send_ping(&mut self, conn: ConnId) {
        let Some(h) = self.opts.health.clone() else {
            return;
        };
        if self.current_conn_of(conn).is_none() {
            return;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let (id, frame) = c.tracker.start("ping", None, Req::Ping);
        self.send(conn, frame);
        self.arm_ping(
            conn,
            self.now + h.timeout,
            TimerReason::PingTimeout { conn, id },
        );
    }

    fn on_pong(&mut self, conn: ConnId, server: &str) {
        if let Some(s) = self.servers.get_mut(server) {
            s.ping_misses = 0;
        }
        if let Some(h) = &self.opts.health {
            let at = self.now + h.interval;
            self.arm_ping(conn, at, TimerReason::Ping { conn });
        }
    }

    /// Arm `conn`'s one health timer, replacing the one it had (an answered ping's deadline).
    fn arm_ping(&mut self, conn: ConnId, at: Instant, reason: TimerReason) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(old) = c.ping_timer.replace((at, reason.clone())) {
            self.timers.remove(&old);
        }
        self.arm(at, reason);
    }

    fn on_ping_timeout(&mut self, conn: ConnId, id: u64) {
        let Some(server) = self.current_conn_of(conn) else {
            return;
        };
        let pending = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.tracker.forget(id))
            .is_some();
        if !pending {
            return; // answered in time
        }
        self.counters.ping_timeouts += 1;
        let limit = self.opts.health.as_ref().map_or(2, |h| h.misses.max(1));
        let misses = match self.servers.get_mut(&server) {
            Some(s) => {
                s.ping_misses += 1;
                s.ping_misses
            }
            None => return,
        };
        if misses >= limit {
            self.counters.health_failures += 1;
            self.fail_server(
                &server,
                format!("health check failed: {misses} pings in a row went unanswered"),
                true,
            );
        } else {
            self.send_ping(conn);
        }
    }

    /// Progress for a call pushes its deadline out (when enabled), never past the ceiling.
    /// The call it is about, if the token is one we issued for a call of this server in flight.
    fn on_progress(&mut self, server: &str, token: &Value) -> Option<CallId> {
        if !self.opts.reset_timeout_on_progress {
            return None; // no call carries a token
        }
        let call = token.as_u64().map(CallId)?;
        let max = self.opts.max_call_time;
        let now = self.now;
        let c = self.calls.get_mut(&call)?;
        if c.server != server || !matches!(c.state, CallState::Sent { .. }) {
            return None;
        }
        let new = (now + c.timeout).min(c.started + max);
        if new > c.deadline {
            let old = c.deadline;
            c.deadline = new;
            self.disarm(old, TimerReason::Call { call });
            self.arm(new, TimerReason::Call { call });
            self.counters.progress_resets += 1;
        }
        Some(call)
    }

    /// Forget a connection and disarm the timers that die with it (its health timer and its
    /// list pages'); whether it was known.
    fn remove_conn(&mut self, conn: ConnId) -> bool {
        let Some(mut c) = self.conns.remove(&conn) else {
            return false;
        };
        if let Some(t) = c.ping_timer.take() {
            self.timers.remove(&t);
        }
        for (id, req) in c.tracker.drain() {
            if let Req::ListTools = req {
                self.disarm_request(conn, id);
            }
        }
        true
    }

    fn disarm_request(&mut self, conn: ConnId, id: u64) {
        let found = self
            .timers
            .iter()
            .find(|(_, r)| *r == TimerReason::Request { conn, id })
            .cloned();
        if let Some(t) = found {
            self.timers.remove(&t);
        }
    }

    fn disconnect(&mut self, server: &str) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        // A member of an open round is reported in it as disconnected, not dropped from it.
        if let Some(r) = s.round.and_then(|id| self.rounds.get_mut(&id)) {
            if r.members.contains(server) {
                r.disconnected.insert(server.to_string());
            }
        }
        self.stop_attempt(
            server,
            true,
            &format!("MCP error: server \"{server}\" was disconnected"),
        );
        // The seed removes pending entries and source metadata too.
        self.servers.remove(server);
    }

    fn disconnect_all(&mut self) {
        // Flaw 9: pending connects are aborted too, not only connected ones.
        let names: Vec<String> = self.servers.keys().cloned().collect();
        for n in names {
            self.disconnect(&n);
        }
    }

    fn sync(&mut self, specs: Vec<ServerSpec>) {
        let wanted: BTreeMap<String, ServerSpec> = specs
            .into_iter()
            .filter(|s| s.config.enabled)
            .map(|s| (s.name.clone(), s))
            .collect();
        let known: Vec<String> = self.servers.keys().cloned().collect();
        for n in &known {
            if !wanted.contains_key(n) {
                self.disconnect(n);
            }
        }
        let mut start = Vec::new();
        for (name, spec) in wanted {
            match self.servers.get_mut(&name) {
                // Unchanged and running (connected, connecting, waiting to reconnect): leave
                // its transport, calls and tools alone.
                Some(s)
                    if s.hash == config::config_hash(&spec.config)
                        && !matches!(s.phase, Phase::Idle) =>
                {
                    s.spec.source = spec.source;
                }
                // Unchanged but stopped (failed, its breaker tripped, or lost with reconnects
                // off): Sync says "this is the set I want", so start it, like `Connect`.
                Some(s) if s.hash == config::config_hash(&spec.config) => {
                    self.counters.syncs_restarted_stopped += 1;
                    start.push(spec);
                }
                Some(_) => {
                    self.disconnect(&name);
                    start.push(spec);
                }
                None => start.push(spec),
            }
        }
        if !start.is_empty() {
            self.connect(start);
        }
    }

    // ----- tool view --------------------------------------------------------------------------

    fn expose(&mut self, server: &str, deferred: bool) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        let list = if deferred {
            match &s.cache {
                CacheState::Hit(t) => t,
                _ => return,
            }
        } else {
            &s.tools
        };
        s.exposed = Some(deferred);
        let before = slice_of(&self.names, server);
        // Flaw 3: only this server's slice changes; flaw 4: by identity, not by prefix.
        self.names
            .set_server_tools(server, list.iter().map(|t| t.name.as_str()));
        self.retire(server, before);
    }

    /// Remember the names of `before` that `server`'s slice no longer holds, and forget the
    /// retired names its slice holds again.
    fn retire(&mut self, server: &str, before: Vec<(String, String)>) {
        for (q, tool) in before {
            if self.names.resolve(&q).is_none() {
                self.retired.insert(q, (server.to_string(), tool));
            }
        }
        if self.retired.is_empty() {
            return;
        }
        let now: Vec<String> = self
            .names
            .server_tools(server)
            .map(|(q, _)| q.to_string())
            .collect();
        for q in now {
            self.retired.remove(&q);
        }
    }

    fn withdraw(&mut self, server: &str) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.exposed.take().is_some() {
            let announce = s.round.is_none();
            let before = slice_of(&self.names, server);
            self.names.remove_server(server);
            self.retire(server, before);
            if announce {
                self.out.push_back(Output::ToolsChanged {
                    servers: vec![server.to_string()],
                });
            }
        }
    }

    // ----- calls ------------------------------------------------------------------------------

    fn call_tool(
        &mut self,
        call: CallId,
        tool: &str,
        arguments: Option<Value>,
        timeout: Option<Duration>,
    ) {
        if self.calls.contains_key(&call) {
            self.diag(
                None,
                Level::Warn,
                format!(
                    "call id {} is already in flight; second call ignored",
                    call.0
                ),
            );
            return;
        }
        let Some((server, raw)) = self
            .names
            .resolve(tool)
            .map(|(s, t)| (s.to_string(), t.to_string()))
        else {
            let message = self.unknown_tool_error(tool);
            self.out.push_back(Output::CallCompleted {
                call,
                outcome: CallOutcome::Err(message),
            });
            return;
        };
        let timeout = timeout.unwrap_or(self.opts.call_timeout);
        let deadline = self.now + timeout;
        // Ok(conn): send now; Err(true): wait; Err(false): fail.
        let target = self.servers.get(&server).map(|s| match s.phase {
            Phase::Connected { conn, .. } => Ok(conn),
            ref p => Err(p.is_pending()),
        });
        let (state, arguments) = match target {
            Some(Ok(conn)) => match self.send_call(conn, call, &raw, arguments) {
                Some(req) => (CallState::Sent { conn, req }, None),
                None => return,
            },
            // A deferred tool: wait for the connection (the seed's waitForConnection).
            Some(Err(true)) => (CallState::Waiting, arguments),
            _ => {
                self.out.push_back(Output::CallCompleted {
                    call,
                    outcome: CallOutcome::Err(format!(
                        "MCP error: server \"{server}\" is not connected"
                    )),
                });
                return;
            }
        };
        self.calls.insert(
            call,
            Call {
                server,
                tool: raw,
                arguments,
                timeout,
                deadline,
                started: self.now,
                state,
            },
        );
        self.arm(deadline, TimerReason::Call { call });
    }

    /// Why a qualified name does not route: its tool left its server's list, its server is
    /// not connected, or the name was never in the view.
    fn unknown_tool_error(&mut self, tool: &str) -> String {
        let Some((server, raw)) = self.retired.get(tool) else {
            return format!("MCP error: unknown tool \"{tool}\" (not in the current tool view)");
        };
        let (server, raw) = (server.clone(), raw.clone());
        let running = self
            .servers
            .get(&server)
            .filter(|s| !matches!(s.phase, Phase::Idle));
        match running {
            Some(s) if s.exposed.is_some() && self.names.qualified(&server, &raw).is_none() => {
                self.counters.calls_to_retired_tools += 1;
                format!(
                    "MCP error: tool \"{raw}\" is no longer offered by server \"{server}\" (called as \"{tool}\")"
                )
            }
            // Its server still offers the tool, under another name now (a collision among
            // other servers' tools moved it), or the server is pending without tools.
            Some(_) => {
                format!("MCP error: unknown tool \"{tool}\" (not in the current tool view)")
            }
            None => {
                self.counters.calls_to_retired_tools += 1;
                format!(
                    "MCP error: server \"{server}\" is not connected (tool \"{tool}\" was withdrawn with it)"
                )
            }
        }
    }

    fn send_call(
        &mut self,
        conn: ConnId,
        call: CallId,
        raw: &str,
        arguments: Option<Value>,
    ) -> Option<u64> {
        let c = self.conns.get_mut(&conn)?;
        let mut params = protocol::call_tool_params(raw, arguments);
        if self.opts.reset_timeout_on_progress {
            params["_meta"] = serde_json::json!({ "progressToken": call.0 });
        }
        let (req, frame) = c.tracker.start("tools/call", Some(params), Req::Call(call));
        self.out.push_back(Output::Send { conn, frame });
        Some(req)
    }

    fn flush_waiting_calls(&mut self, server: &str, conn: ConnId) {
        let waiting: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, c)| c.server == server && matches!(c.state, CallState::Waiting))
            .map(|(id, _)| *id)
            .collect();
        for call in waiting {
            let Some(c) = self.calls.get(&call) else {
                continue;
            };
            // The tool may be gone from the live list.
            if !self
                .servers
                .get(server)
                .is_some_and(|s| s.tools.iter().any(|t| t.name == c.tool))
            {
                let msg = format!(
                    "MCP error: tool \"{}\" is no longer offered by server \"{server}\"",
                    c.tool
                );
                self.complete_call(call, CallOutcome::Err(msg));
                continue;
            }
            let raw = c.tool.clone();
            let args = self.calls.get_mut(&call).and_then(|c| c.arguments.take());
            if let Some(req) = self.send_call(conn, call, &raw, args) {
                self.counters.deferred_calls_sent += 1;
                if let Some(c) = self.calls.get_mut(&call) {
                    c.state = CallState::Sent { conn, req };
                }
            }
        }
    }

    fn on_call_result(&mut self, call: CallId, result: Result<Box<RawValue>, protocol::RpcError>) {
        let outcome = match result {
            Ok(v) => match protocol::parse_call_tool_result(&v) {
                Ok(r) => CallOutcome::Ok(r),
                Err(e) => CallOutcome::Err(format!("MCP error: {e}")),
            },
            Err(e) => CallOutcome::Err(e.to_string()),
        };
        self.complete_call(call, outcome);
    }

    fn cancel_call(&mut self, call: CallId) {
        if self.calls.contains_key(&call) {
            self.counters.calls_cancelled += 1;
            self.abort_call(call, "cancelled by the client", CallOutcome::Cancelled);
        }
    }

    /// End a call early (timeout, cancel): tell the server with `notifications/cancelled`
    /// if the request went out (flaw 10), then complete it.
    fn abort_call(&mut self, call: CallId, reason: &str, outcome: CallOutcome) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        if let CallState::Sent { conn, req } = c.state {
            if let Some(cn) = self.conns.get_mut(&conn) {
                cn.tracker.forget(req);
                self.send(conn, protocol::encode_cancelled(req, reason));
            }
        }
        self.complete_call(call, outcome);
    }

    /// Every call completes exactly once: this is the only place that says so.
    fn complete_call(&mut self, call: CallId, outcome: CallOutcome) {
        let Some(c) = self.calls.remove(&call) else {
            return;
        };
        self.disarm(c.deadline, TimerReason::Call { call });
        if let CallState::Sent { conn, req } = c.state {
            if let Some(cn) = self.conns.get_mut(&conn) {
                cn.tracker.forget(req);
            }
        }
        self.out.push_back(Output::CallCompleted { call, outcome });
    }

    // ----- helpers ----------------------------------------------------------------------------

    fn send(&mut self, conn: ConnId, frame: Bytes) {
        if self.conns.contains_key(&conn) {
            self.out.push_back(Output::Send { conn, frame });
        }
    }

    fn set_phase(&mut self, server: &str, phase: Phase) {
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

    fn diag(&mut self, server: Option<&str>, level: Level, message: String) {
        self.out.push_back(Output::Diagnostic {
            server: server.map(str::to_string),
            level,
            message,
        });
    }
}

/// `server`'s (qualified name, raw tool) pairs in the view: O(its tools).
fn slice_of(names: &NameTable, server: &str) -> Vec<(String, String)> {
    names
        .server_tools(server)
        .map(|(q, t)| (q.to_string(), t.to_string()))
        .collect()
}

/// Keep the first definition of each tool name.
fn dedupe(mut tools: Vec<ToolDef>) -> Vec<ToolDef> {
    let mut seen = BTreeSet::new();
    let keep: Vec<bool> = tools.iter().map(|t| seen.insert(t.name.as_str())).collect();
    if keep.contains(&false) {
        let mut keep = keep.into_iter();
        tools.retain(|_| keep.next().unwrap_or(false));
    }
    tools
}
