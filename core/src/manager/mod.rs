//! The lifecycle state machine: connect many MCP servers in parallel, gate startup, expose a
//! tool view, route calls, tear down.
//!
//! See [`Manager`] for the contract. The machine is one struct whose behaviour is split by
//! concern, one module each, every module adding its own `impl Manager` block: `types` (what
//! goes in and out), `options` (policies), `timers` (the deadline set), `servers` (per-server
//! state and its phase), `rounds` (startup rounds and the gate), `sessions` (opening a
//! transport, `initialize`, reading frames, answering the server's requests), `listing`
//! (`tools/list` pages, `list_changed`, refreshes, the tool cache), `calls` (tool calls and
//! their deadlines), `recovery` (failures, the reconnect ladder and its breaker), `health`
//! (pings), `peer` (requests of servers to the client, and the roots), `reconcile`
//! (`Connect`, `Reload`, `Sync`, `Disconnect`), `view` (the tool view, its names and the
//! names it retired) and `counters`. This module holds the struct, the
//! input and timer dispatch, and the getters.

mod calls;
mod catalog;
#[cfg(test)]
mod catalog_tests;
mod counters;
mod era;
#[cfg(test)]
mod era_tests;
mod errors;
mod event;
mod freshness;
#[cfg(test)]
mod freshness_tests;
mod health;
#[cfg(test)]
mod legacy_tests;
mod listing;
#[cfg(test)]
mod listing_tests;
#[cfg(test)]
mod modern_ops_tests;
mod mrtr;
mod operations;
#[cfg(test)]
mod operations_tests;
mod options;
mod outputs;
mod peer;
#[cfg(test)]
mod peer_tests;
mod reconcile;
#[cfg(test)]
mod reconcile_tests;
mod recovery;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod refusal_tests;
mod rounds;
mod servers;
mod sessions;
#[cfg(test)]
mod stream_tests;
mod subscriptions;
#[cfg(test)]
mod summary_tests;
mod tasks;
#[cfg(test)]
mod tasks_tests;
mod timers;
mod types;
mod view;

pub use catalog::MAX_CATALOG_ITEMS;
pub use counters::Counters;
pub use era::{Era, Handshake, ProtocolPolicy};
pub use errors::{
    CallError, OutputProblem, RefreshError, RequestError, ServerError, ServerErrorKind,
};
pub use event::{CallOutcome, Event, RequestId};
pub use freshness::Freshness;
pub use listing::MAX_TOOLS;
pub use options::{HealthPolicy, ManagerOptions, ReconnectPolicy, RootsInputs};
pub use peer::{PeerRequestKey, RoundInput, WithdrawReason, MAX_ROOTS};
pub use servers::{Phase, ServerState, ServerStatus, ServerSummary};
pub use tasks::{TASK_POLL_DEFAULT, TASK_POLL_MAX, TASK_POLL_MIN};
pub use timers::TimerReason;
pub use types::{
    log_text, CacheKey, CallId, ConnId, FrameKind, FrameMeta, Input, Level, Output, StartupReport,
    TransportEvent,
};

use crate::config::SourceMeta;
use crate::names::NameTable;
use crate::rng::SplitMix64;
use crate::time::Instant;
use calls::Call;
use peer::PeerState;
use rounds::Rounds;
use servers::{Server, Stage};
use sessions::Conn;
use std::collections::{BTreeMap, VecDeque};
use timers::Timers;

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
///   `Send`, `CloseTransport`, `LoadCache`, `StoreCache`) and `Output::Event` for the
///   embedder ([`Event`]), in the order they were produced. Perform commands in that order.
///   Every request completes with exactly one event naming its [`RequestId`]; every call
///   with one `CallCompleted`.
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
/// The registries a status display reads are derived from one per-server phase, so a server
/// can never be in two exclusive registries at once: `connections` (phase connected),
/// `pending_connections` (opening, initializing, waiting to reconnect), `pending_tool_loads`
/// (listing tools).
pub struct Manager {
    opts: ManagerOptions,
    now: Instant,
    rng: SplitMix64,
    servers: BTreeMap<String, Box<Server>>,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    calls: BTreeMap<CallId, Call>,
    rounds: Rounds,
    names: NameTable,
    timers: Timers,
    out: VecDeque<Output>,
    counters: Counters,
    /// Qualified names that left the view with their server's slice (a re-list without the
    /// tool, a withdrawal), with the pair they named: a call to one is told why it failed.
    /// An entry goes when its name is minted again.
    retired: BTreeMap<String, (String, String)>,
    /// Bumped by every change that may alter the tool view (a slice exposed or withdrawn, a
    /// server's live or cached list replaced, a server forgotten): see
    /// [`Manager::view_generation`].
    view_gen: u64,
    /// Bumped by every phase replaced and every server started or forgotten: see
    /// [`Manager::phase_generation`].
    phase_gen: u64,
    /// Requests of servers waiting for the embedder, and the roots.
    peer: PeerState,
    /// Prompt names and operations in flight (resources, prompts, completion, logging).
    catalog: catalog::CatalogState,
    /// The config hash last computed for each server name, with its config.
    hashes: reconcile::HashMemo,
}

impl Manager {
    /// A manager with no servers, its clock at `now`.
    pub fn new(opts: ManagerOptions, now: Instant) -> Self {
        Manager {
            retired: BTreeMap::new(),
            view_gen: 0,
            phase_gen: 0,
            peer: PeerState::new(opts.roots.clone()),
            catalog: catalog::CatalogState::new(opts.naming),
            rng: SplitMix64::new(opts.seed),
            names: NameTable::new(opts.naming),
            opts,
            now,
            servers: BTreeMap::new(),
            conns: BTreeMap::new(),
            next_conn: 0,
            calls: BTreeMap::new(),
            rounds: Rounds::default(),
            timers: Timers::default(),
            out: VecDeque::new(),
            counters: Counters::default(),
            hashes: reconcile::HashMemo::default(),
        }
    }

    /// The policies it was made with.
    pub fn options(&self) -> &ManagerOptions {
        &self.opts
    }

    /// A server's status; an unknown server is `Disconnected`.
    pub fn status(&self, server: &str) -> ServerStatus {
        self.servers
            .get(server)
            .map_or(ServerStatus::Disconnected, |s| s.phase.status())
    }

    /// Every known server with its status, by name: what [`Manager::status`] says of each,
    /// read in one pass instead of one lookup per name.
    pub fn statuses(&self) -> impl Iterator<Item = (&str, ServerStatus)> + '_ {
        self.servers
            .iter()
            .map(|(name, s)| (name.as_str(), s.phase.status()))
    }

    /// A known server's full state (`None` for a server never started or disconnected).
    pub fn server_state(&self, server: &str) -> Option<ServerState> {
        self.servers.get(server).map(|s| s.state(server))
    }

    /// Every known server (connected, pending, or failed and not disconnected), by name.
    pub fn servers(&self) -> Vec<ServerState> {
        self.servers
            .keys()
            .filter_map(|n| self.server_state(n))
            .collect()
    }

    /// Servers connected, with their tools listed, by name.
    pub fn connections(&self) -> Vec<&str> {
        self.names_in(|p| matches!(p, Stage::Connected { .. }))
    }

    /// Servers connecting (opening, initializing) or waiting to reconnect, by name.
    pub fn pending_connections(&self) -> Vec<&str> {
        // A server waiting to reconnect is `Connecting`, so it is a pending connection too.
        self.names_in(|p| {
            matches!(
                p,
                Stage::Opening { .. } | Stage::Initializing { .. } | Stage::Backoff { .. }
            )
        })
    }

    /// Servers initialized whose first tool list is under way, by name.
    pub fn pending_tool_loads(&self) -> Vec<&str> {
        self.names_in(|p| matches!(p, Stage::Listing { .. }))
    }

    fn names_in(&self, f: impl Fn(&Stage) -> bool) -> Vec<&str> {
        self.servers
            .iter()
            .filter(|(_, s)| f(&s.phase))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Where every known server's config came from, by name.
    pub fn sources(&self) -> BTreeMap<&str, &SourceMeta> {
        self.servers
            .iter()
            .map(|(n, s)| (n.as_str(), &s.spec.source))
            .collect()
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
        self.rounds.open.keys().copied().collect()
    }

    /// `open_conns()`, `calls_in_flight()` and `open_rounds()` read in place, each in the
    /// same (ascending) order, for a caller that compares them with what it holds.
    pub fn open_ids(
        &self,
    ) -> (
        impl ExactSizeIterator<Item = ConnId> + Clone + '_,
        impl ExactSizeIterator<Item = CallId> + Clone + '_,
        impl ExactSizeIterator<Item = u64> + Clone + '_,
    ) {
        (
            self.conns.keys().copied(),
            self.calls.keys().copied(),
            self.rounds.open.keys().copied(),
        )
    }

    /// How often each interesting path was taken so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The next output, in the order produced; drain until `None` after every `handle` and
    /// `handle_timeout`.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The next deadline: call `handle_timeout` once it has passed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The next deadline and what it is for.
    pub fn next_timer(&self) -> Option<(Instant, TimerReason)> {
        self.timers.first().cloned()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// Act on one input at `now`, then report every startup round whose gate condition holds.
    pub fn handle(&mut self, now: Instant, input: Input) {
        self.advance(now);
        match input {
            Input::Connect { request, servers } => self.connect(request, servers),
            Input::Reload { request, servers } => {
                self.disconnect_all();
                self.connect(request, servers);
            }
            Input::Sync { request, servers } => self.sync(request, servers),
            Input::Disconnect { request, server } => self.disconnect_request(request, &server),
            Input::DisconnectAll { request } => {
                let closed = self.disconnect_all();
                self.emit(Event::Disconnected { request, closed });
            }
            Input::RefreshTools { request, server } => self.refresh_request(request, &server),
            Input::Transport { conn, event } => self.on_transport(conn, event),
            Input::CacheLoaded {
                server,
                key,
                tools,
                catalog,
            } => self.on_cache(&server, key, tools, catalog),
            Input::CallTool {
                call,
                tool,
                arguments,
                timeout,
                progress,
                meta,
            } => self.call_tool(call, &tool, arguments, timeout, progress, meta),
            Input::CancelCall { call } => {
                if !self.cancel_op(call) {
                    self.cancel_call(call);
                }
            }
            Input::AnswerPeerRequest { request, answer } => {
                self.answer_peer_request(request, answer)
            }
            Input::SetRoots { roots } => self.set_roots(roots),
            Input::Operation { call, op, timeout } => self.start_op(call, op, timeout),
        }
        self.check_rounds();
    }

    /// Act on every timer due at `now`, earliest first, then report the rounds now due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        while let Some(reason) = self.timers.pop_due(self.now) {
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
            TimerReason::Connect { server, conn } => self.on_connect_timeout(&server, conn),
            TimerReason::Request { conn, id } => {
                if !self.on_catalog_timeout(conn, id) {
                    self.on_list_timeout(conn, id);
                }
            }
            TimerReason::Reconnect { server, at } => self.on_reconnect_due(&server, at),
            TimerReason::Ping { conn } => self.send_ping(conn),
            TimerReason::PingTimeout { conn, id } => self.on_ping_timeout(conn, id),
            TimerReason::Call { call } => {
                if !self.on_op_timeout(call) {
                    self.on_call_timeout(call);
                }
            }
            TimerReason::PeerRequest { key } => self.on_peer_request_timeout(key),
            TimerReason::TaskPoll { call } => self.on_task_poll(call),
            TimerReason::Probe { conn, id } => self.on_probe_timeout(conn, id),
            TimerReason::Relisten { conn } => self.on_relisten_due(conn),
            TimerReason::CacheExpiry { conn } => self.on_cache_expired(conn),
        }
    }

    fn diag(&mut self, server: Option<&str>, level: Level, message: String) {
        self.emit(Event::Diagnostic {
            server: server.map(str::to_string),
            level,
            message,
        });
    }

    #[inline]
    fn emit(&mut self, event: Event) {
        self.out.push_back(Output::Event(event));
    }
}
