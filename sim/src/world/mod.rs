//! The simulated world's event loop: a virtual clock and an event queue ordered by (time,
//! sequence number), stepped against the real manager exactly as the shell drives it —
//! `handle`, drain `poll_output`, `poll_timeout`, `handle_timeout` — with every safety
//! invariant checked after every step; then the faults heal and liveness is checked.
//!
//! The world is split by who acts: [`os`] plays the operating system (processes, transports,
//! the tool cache store), [`server`] the MCP servers behind them (how they answer frames, and
//! their faults), and [`embedder`] the application using the manager (connects, reloads,
//! calls, cancels, and the liveness phase). This module steps them and hands each output to
//! the one it is for; the invariants module judges each step from the observations.

mod answers;
mod catalog;
mod downstream;
mod downstream_modern;
mod downstream_scan;
mod downstream_wire;
mod embedder;
mod era;
mod gateway;
mod os;
mod peer;
mod queue;
mod received;
mod requests;
mod schemas;
mod server;
mod tasks;

pub use crate::verdict::{Invariant, Violation};
pub use embedder::{config_for, is_http};

use crate::coverage::{self, Coverage};
use crate::invariants::{self, liveness, outputs, Ctx, Summaries};
use crate::observe::{Observer, StepInfo, View};
use crate::scenario::{CachePlan, ReconnectMode, Scenario};
use crate::trace;
use bytes::Bytes;
use embedder::tool_defs;
use os::{Proc, StoreEntry};
use server::Tag;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::catalog::Catalog;
use switchboard_core::config::{config_hash, ServerConfig};
use switchboard_core::manager::{
    CacheKey, CallId, CallOutcome, ConnId, Input, Manager, Output, ServerStatus, TransportEvent,
};
use switchboard_core::manager::{CallError, Event, Level};
use switchboard_core::rng::SplitMix64;
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

/// The outcome of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub violation: Option<Violation>,
    /// Steps taken (inputs and timeouts handled by the manager, inputs handled by the
    /// gateway), each followed by the checks.
    pub events: u64,
    pub coverage: Coverage,
    pub trace: Option<String>,
}
#[derive(Debug, Clone)]
enum Ev {
    Action(usize),
    /// The OS reports to the manager. `exit`: the process ends with this event.
    Deliver {
        conn: ConnId,
        event: TransportEvent,
        exit: bool,
        tag: Tag,
    },
    /// The cache answers (boxed: the queue moves its events often, and this one is large).
    Cache(Box<CacheAnswer>),
    Heal,
    /// Something of the serving side (`switchboard serve`'s gateway and its clients).
    Downstream(gateway::DownEv),
    /// The embedder answers a request of a server's.
    PeerAnswer {
        request: switchboard_core::PeerRequestKey,
        answer: switchboard_core::protocol::PeerAnswer,
    },
}

/// What the cache answers for a server's key.
#[derive(Debug, Clone)]
struct CacheAnswer {
    server: String,
    key: CacheKey,
    tools: Option<Vec<ToolDef>>,
    catalog: Option<Catalog>,
}

pub struct World<'a> {
    sc: &'a Scenario,
    m: Manager,
    now: Instant,
    seq: u64,
    queue: queue::Queue<Ev>,
    /// The buffer a step's outputs are drained into, kept between steps with its capacity
    /// (a step nested in another's perform drains into a buffer of its own).
    outs: Vec<Output>,
    /// Each server's config last hashed, with its `config_hash` (an equal config hashes
    /// equal; builds with debug assertions hash again and compare).
    hashes: Vec<Option<(ServerConfig, String)>>,
    rng: SplitMix64,
    procs: BTreeMap<ConnId, Proc>,
    /// The attempts the era checks may still have to look at.
    era_watch: era::EraWatch,
    attempts: Vec<usize>,
    store: BTreeMap<String, StoreEntry>,
    pending_load: Vec<Option<String>>,
    awaiting_cache: Vec<Option<(ConnId, String)>>,
    obs: Observer,
    view: View,
    ever_named: std::collections::BTreeSet<String>,
    cov: Coverage,
    trace: Option<String>,
    healed: bool,
    /// `Manager::options()` returned the options the manager was built with.
    options_echoed: bool,
    /// Manager steps taken: each input the manager handled (or deadline it handled), checked.
    events: u64,
    /// Gateway steps taken: each input a downstream client's side handed the gateway (a
    /// frame, a session opened or closed), checked. Kept apart from `events`, which the
    /// simulated roots' URIs are numbered by.
    gateway_steps: u64,
    next_call: u64,
    violation: Option<Violation>,
    step: StepInfo,
    /// Buffers a step's check fills, kept (with their allocations) from step to step.
    settled_buf: Vec<(usize, Option<&'a [String]>)>,
    summaries: Summaries,
    spare_status: Vec<ServerStatus>,
    /// Calls of the liveness phase that must succeed.
    expect_ok: std::collections::BTreeSet<CallId>,
    /// Crash-loop crashes so far, per server.
    crashes: Vec<u32>,
    /// Draws for the HTTP session-expiry fault only, so that adding it left every other
    /// draw (and every existing trace) as it was.
    http_rng: SplitMix64,
    /// Draws for refusals of the client's notifications only, so that adding them left every
    /// other draw as it was.
    auth_rng: SplitMix64,
    /// Servers whose last HTTP session could not be renewed, until they are opened again.
    session_lost: Vec<bool>,
    /// The embedder's requests in flight, and what must complete them.
    requests: requests::Requests,
    /// Draws for servers' requests to the client and the embedder's answers only, so runs
    /// without them draw as before.
    peer_rng: SplitMix64,
    /// Per server: until when the last list it delivered stays fresh by its `ttlMs`.
    fresh_until: Vec<Option<Instant>>,
    /// List pages and handshake results the simulated servers answer with, serialised once
    /// (see [`World::page_frame`]).
    pages: BTreeMap<server::PageKey, Bytes>,
    /// Each catalog list's items, by server, tool set (plain or alternative) and kind,
    /// written once per run (see `World::catalog_items`).
    catalog_items: Vec<Option<Vec<String>>>,
    /// The gateway and its downstream clients, when the scenario serves.
    gw: Option<Box<gateway::GatewayWorld>>,
}

impl<'a> World<'a> {
    pub fn new(sc: &'a Scenario, tracing: bool) -> Self {
        let opts = embedder::manager_options(sc);
        let names: Vec<String> = sc.servers.iter().map(|s| s.name.clone()).collect();
        let n = names.len();
        let m = Manager::new(opts.clone(), Instant::ZERO);
        let options_echoed = *m.options() == opts;
        let mut store = BTreeMap::new();
        let mut hashes = Vec::with_capacity(n);
        for (i, s) in sc.servers.iter().enumerate() {
            let config = config_for(sc, i, 0);
            let hash = config_hash(&config);
            hashes.push(Some((config, hash.clone())));
            let entry = match &s.cache {
                CachePlan::Absent => None,
                CachePlan::Hit(t) => Some(StoreEntry {
                    hash,
                    tools: Some(tool_defs(t)),
                    catalog: None,
                    ..Default::default()
                }),
                CachePlan::Stale(t) => Some(StoreEntry {
                    hash: format!("stale-{hash}"),
                    tools: Some(tool_defs(t)),
                    catalog: None,
                    ..Default::default()
                }),
                CachePlan::Corrupt => Some(StoreEntry {
                    hash,
                    tools: None,
                    catalog: None,
                    ..Default::default()
                }),
            };
            if let Some(e) = entry {
                store.insert(s.name.clone(), e);
            }
        }
        let obs = Observer {
            index: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect(),
            names,
            latest_conn: vec![None; n],
            withdrawn: vec![false; n],
            pinged: vec![None; n],
            policy: vec![Default::default(); n],
            ..Observer::default()
        };
        let view = View::observe(&m, &obs.index, None);
        World {
            sc,
            m,
            now: Instant::ZERO,
            seq: 0,
            queue: queue::Queue::default(),
            outs: Vec::new(),
            hashes,
            rng: SplitMix64::new(sc.world_seed ^ 0x5157_5eed),
            procs: BTreeMap::new(),
            era_watch: era::EraWatch::default(),
            attempts: vec![0; n],
            store,
            pending_load: vec![None; n],
            awaiting_cache: vec![None; n],
            obs,
            view,
            ever_named: Default::default(),
            cov: Coverage::default(),
            trace: tracing.then(String::new),
            healed: false,
            options_echoed,
            events: 0,
            gateway_steps: 0,
            next_call: 1,
            violation: None,
            step: StepInfo::default(),
            settled_buf: Vec::new(),
            summaries: Summaries::default(),
            spare_status: Vec::new(),
            expect_ok: Default::default(),
            crashes: vec![0; n],
            http_rng: SplitMix64::new(sc.world_seed ^ 0x4854_5450),
            auth_rng: SplitMix64::new(sc.world_seed ^ 0x4155_5448),
            session_lost: vec![false; n],
            fresh_until: vec![None; n],
            pages: BTreeMap::new(),
            catalog_items: vec![None; n * 6],
            requests: requests::Requests::default(),
            peer_rng: SplitMix64::new(sc.world_seed ^ 0x7065_6572),
            gw: sc
                .options
                .gateway
                .as_ref()
                .map(|p| Box::new(gateway::GatewayWorld::new(p, sc.world_seed))),
        }
    }

    fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.queue.push(at, self.seq, ev);
    }

    fn after_ms(&self, ms: u64) -> Instant {
        self.now + Duration::from_millis(ms)
    }

    fn jitter(&mut self) -> u64 {
        let j = self.sc.mix.jitter_ms;
        if j == 0 || self.healed {
            0
        } else {
            self.rng.below(j + 1)
        }
    }

    fn pct(&mut self, p: u8) -> bool {
        !self.healed && p > 0 && self.rng.below(100) < u64::from(p)
    }

    fn tr(&mut self, f: impl FnOnce(&mut String)) {
        if let Some(t) = self.trace.as_mut() {
            f(t);
        }
    }

    /// Run the scenario to the end: actions, heal, liveness checks, final teardown.
    pub fn run(mut self) -> RunResult {
        let sc = self.sc;
        self.tr(|t| {
            let _ = writeln!(t, "scenario: {}", trace::summary(sc));
        });
        if !self.options_echoed {
            self.fail(
                Invariant::OptionsEchoed,
                "Manager::options() is not what the manager was built with".into(),
            );
        }
        for (i, a) in sc.actions.iter().enumerate() {
            self.push(Instant::from_millis(a.at_ms), Ev::Action(i));
        }
        self.gateway_start();
        let last = sc.actions.last().map_or(0, |a| a.at_ms);
        // Faults stay on a while after the last action, so its consequences play out in a storm.
        let heal_at = Instant::from_millis(last + 3_000);
        self.push(heal_at, Ev::Heal);
        // Long enough for every timeout to fire once more after the heal.
        let longest_connect = sc
            .servers
            .iter()
            .map(|s| match s.timeout_ms {
                Some(ms) if ms > 0 => ms as u64,
                _ => 30_000,
            })
            .max()
            .unwrap_or(0);
        let o = &sc.options;
        let budget = heal_at
            + Duration::from_millis(
                longest_connect
                    + o.request_timeout_ms * 2
                    + o.call_timeout_ms
                    + o.gate_ms
                    + o.uncached_wait_ms.unwrap_or(0)
                    + 10_000,
            );
        self.run_until(budget);
        if self.violation.is_none() {
            self.liveness(budget);
        }
        let mut cov = self.cov;
        coverage::add_core(&mut cov.core, self.m.counters());
        RunResult {
            violation: self.violation,
            events: self.events + self.gateway_steps,
            coverage: cov,
            trace: self.trace,
        }
    }

    /// Step until nothing is left to do or `until` passes.
    /// After the heal, nothing can happen any more but health pings: nothing is queued, the
    /// manager has no work, and its only deadline (if any) is a periodic ping. Running on would
    /// only repeat calm ping exchanges until the budget, so a run that is idle stops early.
    fn idle_after_heal(&self) -> bool {
        self.healed
            && self.queue.is_empty()
            && matches!(
                self.m.next_timer(),
                None | Some((_, switchboard_core::manager::TimerReason::Ping { .. }))
            )
            && self.m.calls_in_flight().is_empty()
            && self.m.operations_in_flight().is_empty()
            && self.m.open_rounds().is_empty()
            && self.m.pending_connections().is_empty()
            && self.m.pending_tool_loads().is_empty()
    }

    fn run_until(&mut self, until: Instant) {
        while self.violation.is_none() {
            if self.idle_after_heal() {
                return;
            }
            let ev_at = self.queue.peek_at();
            let timer = self.m.poll_timeout();
            let timer_first = match (timer, ev_at) {
                (Some(t), Some(e)) => t <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return,
            };
            let at = if timer_first { timer } else { ev_at };
            let at = at.unwrap_or(self.now);
            if at > until {
                return;
            }
            self.now = self.now.max(at);
            if let Err(d) = liveness::within_step_budget(self.events + self.gateway_steps) {
                self.fail(Invariant::NoRunaway, d);
                return;
            }
            if timer_first {
                // The contract: once a deadline is handled, `poll_timeout` moves past it.
                let before = self.m.next_timer();
                self.timer_step();
                if self.violation.is_none() {
                    if let Err(d) = liveness::deadline_moved(before, self.m.next_timer()) {
                        self.fail(Invariant::NoBusyLoop, d);
                    }
                }
            } else if let Some(ev) = self.queue.pop() {
                self.event(ev);
            }
        }
    }
    fn fail(&mut self, invariant: Invariant, detail: String) {
        if self.violation.is_some() {
            return;
        }
        let at = self.now;
        self.tr(|t| {
            let _ = writeln!(t, "!!! invariant {invariant} violated: {detail}");
        });
        self.violation = Some(Violation {
            invariant,
            detail,
            at,
        });
    }

    // ----- steps --------------------------------------------------------------------------------

    fn timer_step(&mut self) {
        let now = self.now;
        if self.trace.is_some() {
            let reason = self.m.next_timer().map(|(_, r)| r);
            self.tr(|t| {
                let _ = writeln!(t, "[{:>6}ms] timer {:?}", now.as_millis(), reason);
            });
        }
        self.step.begin(true, &self.view.status);
        self.m.handle_timeout(now);
        self.finish_step();
    }

    /// Hand one input to the manager, drain, check.
    fn input(&mut self, input: Input, setup: impl FnOnce(&mut StepInfo)) {
        let now = self.now;
        if self.trace.is_some() {
            let line = trace::input(&input);
            self.tr(|t| {
                let _ = writeln!(t, "[{:>6}ms] > {line}", now.as_millis());
            });
        }
        self.step.begin(false, &self.view.status);
        setup(&mut self.step);
        self.note_lifecycle(&input);
        self.request_issued(&input);
        let round_kind = match &input {
            Input::Connect { servers, .. } | Input::Reload { servers, .. } => Some((
                true,
                servers
                    .iter()
                    .enumerate()
                    // The first spec of a name is the one that counts.
                    .filter(|(k, s)| !servers[..*k].iter().any(|p| p.name == s.name))
                    .map(|(_, s)| s)
                    .filter(|s| s.config.enabled)
                    .filter_map(|s| self.obs.index.get(&s.name).copied())
                    .filter(|&i| self.sc.servers[i].invalid)
                    .collect::<Vec<_>>(),
            )),
            Input::Sync { .. } => Some((false, Vec::new())),
            _ => None,
        };
        self.m.handle(now, input);
        self.drain_and_check(round_kind);
    }

    fn finish_step(&mut self) {
        self.requests.current = None;
        self.drain_and_check(None);
    }

    /// Drain every output of the step, act on each, then check the step. `round_kind`: the
    /// step was an embedder request that may open a startup round (`true`: must open one),
    /// with the servers of the request whose config is invalid.
    fn drain_and_check(&mut self, round_kind: Option<(bool, Vec<usize>)>) {
        self.events += 1;
        let mut opens: BTreeMap<usize, ConnId> = BTreeMap::new();
        let mut outs = std::mem::take(&mut self.outs);
        while let Some(o) = self.m.poll_output() {
            outs.push(o);
        }
        self.step.outputs = outs.len();
        self.cov.manager_outputs += outs.len() as u64;
        for o in outs.drain(..) {
            if self.trace.is_some() {
                let line = trace::output(&o);
                self.tr(|t| {
                    let _ = writeln!(t, "            < {line}");
                });
            }
            if let Output::OpenTransport { conn, server, .. } = &o {
                if let Some(&i) = self.obs.index.get(server) {
                    opens.insert(i, *conn);
                    self.step.opened.insert(i);
                }
            }
            if let Output::CloseTransport { conn } = &o {
                if let Some(p) = self.procs.get(conn) {
                    self.step.closed.insert(p.server);
                }
            }
            self.perform(o);
        }
        self.outs = outs;
        self.request_step_done();
        if let Some((must, invalid)) = round_kind {
            let gate = Duration::from_millis(self.sc.options.gate_ms);
            let open = self.m.open_rounds();
            let step = &mut self.step;
            outputs::round_opened(
                &mut self.obs,
                step,
                open,
                self.now,
                gate,
                opens,
                must,
                invalid,
            );
        }
        self.check();
        self.gateway_after_step();
    }

    /// Hand one output to whoever acts on it — the OS, the server behind a transport, or the
    /// embedder — after the output checks have seen it.
    fn perform(&mut self, o: Output) {
        self.count_output(&o);
        self.request_output(&o);
        let for_gateway = self.gateway_takes(&o);
        let watch = outputs::Watch {
            now: self.now,
            reconnect: &self.m.options().reconnect,
            reset_on_progress: self.sc.options.reset_timeout_on_progress,
        };
        if !outputs::observe(&watch, &mut self.obs, &mut self.step, &o) {
            return;
        }
        if let Some(e) = for_gateway {
            self.gateway_event(e);
        }
        match o {
            Output::OpenTransport { conn, server, .. } => self.spawn(conn, &server),
            Output::Send { conn, frame, .. } => self.server_receives(conn, &frame),
            Output::CloseTransport { conn } => self.close_transport(conn),
            Output::LoadCache { server, key } => self.load_cache(server, key),
            Output::StoreCache {
                server,
                key,
                tools,
                catalog,
            } => self.store_cache(server, key, tools, catalog),
            Output::Event(Event::StartupComplete { report: r }) => self.step.reports.push(r),
            Output::Event(Event::ToolsChanged { servers }) => {
                self.step.tools_changed.extend(servers)
            }
            Output::Event(Event::OperationCompleted { call, outcome }) => {
                self.operation_completed(call, &outcome)
            }
            Output::Event(Event::CallCompleted { call, outcome }) => {
                self.call_completed(call, outcome)
            }
            // With a gateway serving, servers' requests are its to forward.
            Output::Event(Event::PeerRequest { request, kind, .. }) if self.gw.is_none() => {
                self.embedder_peer_request(request, &kind)
            }
            Output::Event(Event::StatusChanged { .. })
            | Output::Event(Event::ReconnectScheduled { .. })
            | Output::Event(Event::ReconnectStarted { .. })
            | Output::Event(Event::ServerLog { .. })
            | Output::Event(Event::Progress { .. })
            | Output::Event(Event::Diagnostic { .. }) => {}
            // Request completions: the ledger has seen them.
            _ => {}
        }
    }

    /// The coverage counters an output moves (whatever its checks find).
    fn count_output(&mut self, o: &Output) {
        let cov = &mut self.cov;
        match o {
            Output::CloseTransport { conn } if self.step.stale_opened == Some(*conn) => {
                cov.stale_opens_closed += 1;
            }
            Output::Event(Event::StartupComplete { report: r }) => {
                cov.rounds_reported += 1;
                cov.deferred_tools_served += u64::from(!r.deferred.is_empty());
                cov.rounds_with_pending += u64::from(!r.pending.is_empty());
            }
            Output::Event(Event::ReconnectScheduled { .. }) => cov.reconnect_events_scheduled += 1,
            Output::Event(Event::ReconnectStarted { .. }) => cov.reconnect_events_started += 1,
            Output::Event(Event::ServerLog { .. }) => cov.server_logs += 1,
            Output::Event(Event::Progress { call: Some(_), .. }) => cov.progress_events += 1,
            Output::Event(Event::Diagnostic { level, message, .. }) => {
                cov.connections_lost += u64::from(message.starts_with("connection lost:"));
                let late = message.starts_with("failed after startup:");
                cov.late_failures_after_gate += u64::from(late && *level == Level::Error);
            }
            _ => {}
        }
    }

    fn check(&mut self) {
        // Read first: the era checks read the statuses from it as the invariants do.
        let spare = std::mem::take(&mut self.spare_status);
        let after = View::observe_into(&self.m, &self.obs.index, Some(&self.view), spare);
        self.listen_check(&after.status);
        self.fresh_check(&after.status);
        let mut settled = std::mem::take(&mut self.settled_buf);
        self.settled(&after, &mut settled);
        self.cov.list_settled_checks += settled.len() as u64;
        let catalog_settled = Self::catalog_settled(self.sc, &self.obs, &self.procs, &after);
        self.cov.catalog_settled_checks += catalog_settled.len() as u64;
        let mut summaries = std::mem::take(&mut self.summaries);
        summaries.reset(self.obs.names.len());
        // Completed calls leave the bookkeeping after the isolation check has read it.
        let ctx = Ctx {
            m: &self.m,
            obs: &self.obs,
            before: &self.view,
            after: &after,
            step: &self.step,
            now: self.now,
            gate: Duration::from_millis(self.sc.options.gate_ms),
            uncached_wait: self.sc.options.uncached_wait_ms.map(Duration::from_millis),
            double_underscore: self.sc.options.double_underscore,
            settled: &settled,
            catalog_settled: &catalog_settled,
            reset_on_progress: self.sc.options.reset_timeout_on_progress,
            reconnect_off: self.sc.options.reconnect == ReconnectMode::Off,
            health: self
                .sc
                .options
                .health
                .map(|(i, t, _)| (Duration::from_millis(i), Duration::from_millis(t))),
            max_call_time: Duration::from_millis(self.sc.options.max_call_time_ms),
            summaries: &summaries,
        };
        let failed = invariants::check_step(&ctx).err();
        if failed.is_none() {
            let c = invariants::update_policy(
                &mut self.obs,
                &self.step,
                &self.view,
                &after,
                &self.m,
                self.now,
                &summaries,
            );
            self.cov.backoff_delays_checked += c.backoffs;
            self.cov.breaker_trips_checked += c.trips;
            self.cov.syncs_restart_and_keep += c.sync_restart_and_keep;
            self.cov.syncs_restart_stopped += c.sync_restart_stopped;
            for (call, outcome) in &self.step.completed {
                if let CallOutcome::Err(e) = outcome {
                    if matches!(e, CallError::Timeout { .. }) {
                        match self.obs.calls.get(call).and_then(|c| c.timing) {
                            Some(t)
                                if t.extended
                                    && t.deadline
                                        == t.started
                                            + Duration::from_millis(
                                                self.sc.options.max_call_time_ms,
                                            ) =>
                            {
                                self.cov.calls_capped_by_max_call_time += 1
                            }
                            Some(t) if t.extended => self.cov.calls_timed_out_after_progress += 1,
                            _ => {}
                        }
                    }
                }
            }
        }
        for (i, s) in after.status.iter().enumerate() {
            if *s != ServerStatus::Connected {
                self.obs.pinged[i] = None;
            } else if self.view.status[i] != ServerStatus::Connected {
                self.obs.pinged[i] = Some(self.now); // the health clock starts at ready
            }
        }
        let verified = invariants::verified_as(&self.obs, &after);
        let refresh_names = verified.is_none();
        // A list with the same triples as one remembered (a view that went back to an
        // earlier list) takes its place: the remembered triples are the same, and the steps
        // that keep this list find it by its pointer.
        if let Some(k) = verified {
            if !Arc::ptr_eq(&self.obs.names_verified[k], &after.tools) {
                self.obs.names_verified[k] = Arc::clone(&after.tools);
            }
        }
        for (c, _) in &self.step.completed {
            self.obs.calls.remove(c);
        }
        if refresh_names {
            if self.obs.names_verified.len() == invariants::NAMES_VERIFIED_KEPT {
                self.obs.names_verified.remove(0);
            }
            self.obs.names_verified.push(Arc::clone(&after.tools));
            for t in after.tools.iter() {
                if !self.ever_named.contains(&t.qualified) {
                    self.ever_named.insert(t.qualified.clone());
                    if t.qualified.len() > 9
                        && t.qualified.as_bytes()[t.qualified.len() - 9] == b'_'
                        && t.qualified[t.qualified.len() - 8..]
                            .bytes()
                            .all(|b| b.is_ascii_hexdigit())
                    {
                        self.cov.suffixed_names += 1;
                    }
                }
            }
        }
        self.spare_status = std::mem::replace(&mut self.view, after).status;
        self.settled_buf = settled;
        self.summaries = summaries;
        match failed {
            Some((name, d)) => self.fail(name, d),
            None => self.tr(|t| {
                let _ = writeln!(t, "            = invariants ok");
            }),
        }
    }

    // ----- events -------------------------------------------------------------------------------

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Action(i) => {
                self.action(i);
                self.maybe_set_roots();
            }
            Ev::PeerAnswer { request, answer } => self.peer_answer_input(request, answer),
            Ev::Downstream(d) => self.downstream(d),
            Ev::Heal => {
                self.healed = true;
                self.tr(|t| {
                    let _ = writeln!(t, "--- heal: faults off");
                });
            }
            Ev::Cache(c) => {
                let CacheAnswer {
                    server,
                    key,
                    tools,
                    catalog,
                } = *c;
                self.cache_answers(server, key, tools, catalog)
            }
            Ev::Deliver {
                conn,
                event,
                exit,
                tag,
            } => self.deliver(conn, event, exit, tag),
        }
    }
}

/// Run one scenario.
pub fn run_scenario(sc: &Scenario, tracing: bool) -> RunResult {
    World::new(sc, tracing).run()
}

#[cfg(test)]
mod sizes {
    /// The queue moves its events at every push and pop: a large payload goes in a box
    /// (as the cache's answer and the gateway's input for the manager do), so that the
    /// transport events, the most frequent, set the size.
    #[test]
    fn queued_events_stay_small() {
        use std::mem::size_of;
        let deliver = size_of::<switchboard_core::manager::TransportEvent>()
            + size_of::<super::server::Tag>()
            + 16;
        assert!(
            size_of::<super::Ev>() <= deliver,
            "an event of the queue takes {} bytes, a delivery {deliver}",
            size_of::<super::Ev>()
        );
    }
}
