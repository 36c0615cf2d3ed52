//! The simulated world: a virtual clock and an event queue ordered by (time, sequence number),
//! simulated MCP servers that speak real JSON-RPC frames, an operating system that plays the
//! shell (processes start, fail, exit, get killed), a tool cache store, and an embedder acting
//! at its scheduled times. It drives the real manager exactly as the shell does — `handle`,
//! drain `poll_output`, `poll_timeout`, `handle_timeout` — and checks every safety invariant
//! after every step; then it heals the faults and checks liveness.

use crate::coverage::{self, Coverage};
use crate::invariants::{self, ConnObs, Ctx, Observer, RoundObs, StepInfo, View};
use crate::scenario::{
    ActionKind, AttemptPlan, CachePlan, CallTarget, Init, List, ReconnectMode, Scenario, Spawn,
};
use crate::trace;
use bytes::Bytes;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::config::{config_hash, ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CacheKey, CallId, CallOutcome, ConnId, HealthPolicy, Input, Level, Manager, ManagerOptions,
    Output, ReconnectPolicy, ServerStatus, TransportEvent,
};
use switchboard_core::names::NamingScheme;
use switchboard_core::protocol::Root;
use switchboard_core::rng::SplitMix64;
use switchboard_core::tool::ToolDef;
use switchboard_core::Instant;

/// A run that takes more steps than this is a runaway (a bug in the manager or the world).
const MAX_STEPS: u64 = 1_000_000;

/// A broken promise: which invariant, what was seen, and when (virtual time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: String,
    pub detail: String,
    pub at: Instant,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant {} violated at {}ms: {}",
            self.invariant,
            self.at.as_millis(),
            self.detail
        )
    }
}

/// The outcome of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub violation: Option<Violation>,
    /// Steps taken (inputs handled plus timeouts handled).
    pub events: u64,
    pub coverage: Coverage,
    pub trace: Option<String>,
}

/// What the simulator remembers about a call it issued.
#[derive(Debug, Clone)]
pub struct CallObs {
    pub server: Option<usize>,
    pub deferred: bool,
    pub withdrawn_target: bool,
    /// When it was issued, its timeout, and its deadline as progress pushed it (simulated).
    pub timing: Option<CallTiming>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct CallTiming {
    pub started: Instant,
    pub timeout: Duration,
    pub deadline: Instant,
    /// Progress pushed the deadline out at least once.
    pub extended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    /// A page with a next cursor.
    Page,
    /// The last page of a listing of this tool-set version (`u64::MAX`: it changed meanwhile).
    Final(u64),
    /// An error or a malformed answer.
    Failed,
}

/// What a frame from a simulated server carries, for the simulator's own bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    None,
    /// An answer to `tools/list` request `id`; `Some(version)`: the final, healthy page of a
    /// listing of tool-set `version` (`u64::MAX`: the set changed between pages).
    ListAnswer {
        id: u64,
        kind: ListKind,
    },
    ListChanged,
    Progress {
        call: u64,
    },
    /// An `Opened` that reaches the manager after the attempt's `Closed` (the shell's race).
    RacedOpen,
}

/// The MCP log levels the simulated servers use, with the level each must surface at.
const SIM_LOG_LEVELS: [(&str, Level); 6] = [
    ("warning", Level::Warn),
    ("debug", Level::Debug),
    ("info", Level::Info),
    ("notice", Level::Info),
    ("error", Level::Error),
    ("critical", Level::Error),
];

/// The level a simulated server's log message (its MCP level and text) must surface at.
fn sim_log_level(severity: &str, text: &str) -> Option<Level> {
    if text == "disk almost full" {
        return (severity == "warning").then_some(Level::Warn);
    }
    let name = text.strip_prefix("sim log at ")?;
    SIM_LOG_LEVELS
        .iter()
        .find(|(n, _)| *n == name && *n == severity)
        .map(|(_, l)| *l)
}

/// A frame cut short: not JSON, so the codec rejects it.
const GARBAGE_FRAME: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";

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
    Cache {
        server: String,
        key: CacheKey,
        tools: Option<Vec<ToolDef>>,
    },
    Heal,
}

struct Queued {
    at: Instant,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A simulated process (or HTTP session) behind one connection attempt.
#[derive(Debug, Clone)]
struct Proc {
    server: usize,
    plan: AttemptPlan,
    /// The OS killed it on the manager's `CloseTransport`.
    killed: bool,
    /// It ended by itself (exit, spawn failure).
    exited: bool,
    /// Its end was reported to the manager (`Closed`/`Failed`).
    reported: bool,
    spawned: bool,
    lists: u32,
    calls: u32,
    alt_tools: bool,
    next_peer_id: u64,
    peer_requests: BTreeMap<u64, &'static str>,
    /// Ids of the `tools/call` requests it received.
    call_ids: std::collections::BTreeSet<u64>,
    /// Its tool set's version (bumped on every change, each announced by list_changed).
    version: u64,
    /// The version the first page of the listing under way was generated from.
    list_version: Option<u64>,
    /// tools/list requests received whose answer has not reached the manager (nor been
    /// cancelled by it).
    open_lists: BTreeSet<u64>,
    /// list_changed notifications sent and not yet delivered.
    changed_in_flight: u32,
    /// The tool-set version the manager last received a complete listing of (`None`: unknown,
    /// e.g. the last listing failed or was abandoned).
    view_version: Option<u64>,
    /// Stops answering pings from this time on.
    deaf_at: Option<Instant>,
    /// How the listing under way behaves (its later pages follow its first).
    cur_list: Option<List>,
}

impl Proc {
    fn alive(&self) -> bool {
        self.spawned && !self.killed && !self.exited
    }
}

struct StoreEntry {
    hash: String,
    /// `None`: corrupt.
    tools: Option<Vec<ToolDef>>,
}

/// A healthy attempt: what every attempt becomes after the heal.
fn healthy() -> AttemptPlan {
    AttemptPlan {
        spawn: Spawn::Ok { open_ms: 5 },
        init: Init::Ok { ms: 5 },
        list: List::Ok { ms: 5, pages: 1 },
        drop_after_ready_ms: None,
        drop_on_call: false,
        oversized_after_ms: None,
        deaf_after_ms: None,
    }
}

/// The config a scenario server runs with (`variant` 0 is the base config the cache knows).
pub fn config_for(sc: &Scenario, i: usize, variant: u8) -> ServerConfig {
    let s = &sc.servers[i];
    let mut c = if i % 3 == 2 {
        ServerConfig::http(format!("http://{}.sim/mcp", s.name))
    } else {
        ServerConfig::stdio(format!("{}-server", s.name), &[])
    };
    if variant == 3 {
        c.enabled = false;
    } else if variant > 0 {
        c.args.push(format!("--variant={variant}"));
        if c.url.is_some() {
            c.headers.insert("X-Variant".into(), variant.to_string());
        }
    }
    c.timeout_ms = s.timeout_ms;
    if s.invalid {
        c.command = Some("both".into());
        c.url = Some("http://both.sim".into());
    }
    c
}

fn tool_defs(names: &[String]) -> Vec<ToolDef> {
    names.iter().map(ToolDef::named).collect()
}

pub struct World<'a> {
    sc: &'a Scenario,
    m: Manager,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<Queued>>,
    rng: SplitMix64,
    procs: BTreeMap<ConnId, Proc>,
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
    events: u64,
    next_call: u64,
    violation: Option<Violation>,
    step: StepInfo,
    /// Calls of the liveness phase that must succeed.
    expect_ok: std::collections::BTreeSet<CallId>,
    /// Crash-loop crashes so far, per server.
    crashes: Vec<u32>,
    /// Draws for the HTTP session-expiry fault only, so that adding it left every other
    /// draw (and every existing trace) as it was.
    http_rng: SplitMix64,
    /// Servers whose last HTTP session could not be renewed, until they are opened again.
    session_lost: Vec<bool>,
    /// Per server: the reconnect attempt the manager announced (`ReconnectScheduled`) and
    /// when it is due, until `ReconnectStarted` (invariant 13).
    announced: BTreeMap<String, (u32, Instant)>,
}

impl<'a> World<'a> {
    pub fn new(sc: &'a Scenario, tracing: bool) -> Self {
        let o = &sc.options;
        let opts = ManagerOptions {
            seed: sc.world_seed,
            gate: Duration::from_millis(o.gate_ms),
            uncached_wait: o.uncached_wait_ms.map(Duration::from_millis),
            naming: if o.double_underscore {
                NamingScheme::DoubleUnderscore
            } else {
                NamingScheme::Seed
            },
            call_timeout: Duration::from_millis(o.call_timeout_ms),
            request_timeout: Duration::from_millis(o.request_timeout_ms),
            roots: if o.roots {
                vec![Root {
                    uri: "file:///work/project".into(),
                    name: Some("project".into()),
                }]
            } else {
                Vec::new()
            },
            max_frame_len: o.max_frame_len,
            client_version: "sim".into(),
            health: o.health.map(|(interval, timeout, misses)| HealthPolicy {
                interval: Duration::from_millis(interval),
                timeout: Duration::from_millis(timeout),
                misses,
            }),
            reset_timeout_on_progress: o.reset_timeout_on_progress,
            max_call_time: Duration::from_millis(o.max_call_time_ms),
            max_tool_pages: o
                .max_tool_pages
                .unwrap_or(ManagerOptions::default().max_tool_pages),
            reconnect: match o.reconnect {
                ReconnectMode::On => ReconnectPolicy::default(),
                ReconnectMode::Off => ReconnectPolicy::never(),
                ReconnectMode::RetryStartup => ReconnectPolicy {
                    retry_startup_failures: true,
                    ..ReconnectPolicy::default()
                },
            },
            ..ManagerOptions::default()
        };
        let names: Vec<String> = sc.servers.iter().map(|s| s.name.clone()).collect();
        let n = names.len();
        let m = Manager::new(opts.clone(), Instant::ZERO);
        let options_echoed = *m.options() == opts;
        let view = View::observe(&m, &names, None);
        let mut store = BTreeMap::new();
        for (i, s) in sc.servers.iter().enumerate() {
            let hash = config_hash(&config_for(sc, i, 0));
            let entry = match &s.cache {
                CachePlan::Absent => None,
                CachePlan::Hit(t) => Some(StoreEntry {
                    hash,
                    tools: Some(tool_defs(t)),
                }),
                CachePlan::Stale(t) => Some(StoreEntry {
                    hash: format!("stale-{hash}"),
                    tools: Some(tool_defs(t)),
                }),
                CachePlan::Corrupt => Some(StoreEntry { hash, tools: None }),
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
        World {
            sc,
            m,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            rng: SplitMix64::new(sc.world_seed ^ 0x5157_5eed),
            procs: BTreeMap::new(),
            attempts: vec![0; n],
            store,
            pending_load: vec![None; n],
            awaiting_cache: vec![None; n],
            obs,
            view,
            ever_named: Default::default(),
            announced: BTreeMap::new(),
            cov: Coverage::default(),
            trace: tracing.then(String::new),
            healed: false,
            options_echoed,
            events: 0,
            next_call: 1,
            violation: None,
            step: StepInfo::default(),
            expect_ok: Default::default(),
            crashes: vec![0; n],
            http_rng: SplitMix64::new(sc.world_seed ^ 0x4854_5450),
            session_lost: vec![false; n],
        }
    }

    fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Queued {
            at,
            seq: self.seq,
            ev,
        }));
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
                "options",
                "Manager::options() is not what the manager was built with".into(),
            );
        }
        for (i, a) in sc.actions.iter().enumerate() {
            self.push(Instant::from_millis(a.at_ms), Ev::Action(i));
        }
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
            events: self.events,
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
            && self.m.open_rounds().is_empty()
            && self.m.pending_connections().is_empty()
            && self.m.pending_tool_loads().is_empty()
    }

    fn run_until(&mut self, until: Instant) {
        while self.violation.is_none() {
            if self.idle_after_heal() {
                return;
            }
            let ev_at = self.queue.peek().map(|q| q.0.at);
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
            if self.events > MAX_STEPS {
                self.fail(
                    "liveness",
                    format!("more than {MAX_STEPS} steps: runaway run"),
                );
                return;
            }
            if timer_first {
                // The contract: once a deadline is handled, `poll_timeout` moves past it.
                let before = self.m.next_timer();
                self.timer_step();
                if self.violation.is_none() && self.m.next_timer() == before {
                    self.fail(
                        "liveness",
                        format!(
                            "busy loop: the deadline {before:?} is still due after handle_timeout"
                        ),
                    );
                }
            } else if let Some(Reverse(q)) = self.queue.pop() {
                self.event(q.ev);
            }
        }
    }

    fn liveness(&mut self, budget: Instant) {
        self.cov.runs_healed += 1;
        let work_left = !self.m.calls_in_flight().is_empty()
            || !self.m.open_rounds().is_empty()
            || !self.m.pending_connections().is_empty()
            || !self.m.pending_tool_loads().is_empty();
        if work_left {
            let why = if self.m.poll_timeout().is_none() && self.queue.is_empty() {
                "stall: the manager has work but no deadline and nothing is queued"
            } else {
                "work still pending when the liveness budget ran out"
            };
            self.fail(
                "liveness",
                format!(
                    "{why} (calls {:?}, rounds {:?}, pending connections {:?}, pending tool loads {:?}, budget {}ms)",
                    self.m.calls_in_flight(),
                    self.m.open_rounds(),
                    self.m.pending_connections(),
                    self.m.pending_tool_loads(),
                    budget.as_millis()
                ),
            );
            return;
        }
        if !self.obs.calls.is_empty() {
            let left: Vec<u64> = self.obs.calls.keys().map(|c| c.0).collect();
            self.fail("liveness", format!("calls never completed: {left:?}"));
            return;
        }
        if let Some(r) = self.obs.rounds.values().find(|r| !r.reported) {
            let id = r.id;
            self.fail("liveness", format!("round {id} never reported"));
            return;
        }
        self.reconnect_healed();
        if self.violation.is_some() {
            return;
        }
        // The final teardown.
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness: final DisconnectAll");
        });
        self.input(Input::DisconnectAll, |s| {
            s.disconnect_all = true;
        });
        let end = self.now + Duration::from_secs(3_600);
        self.run_until(end);
        if self.violation.is_some() {
            return;
        }
        let alive: Vec<u64> = self
            .procs
            .iter()
            .filter(|(_, p)| p.alive())
            .map(|(c, _)| c.0)
            .collect();
        if !alive.is_empty() {
            self.fail(
                "liveness",
                format!("processes still alive after DisconnectAll: {alive:?}"),
            );
            return;
        }
        // Startup failures are retried only when the policy says so.
        let retries = self.m.counters().startup_retries;
        if self.sc.options.reconnect != ReconnectMode::RetryStartup && retries > 0 {
            self.fail(
                "liveness",
                format!("{retries} startup failures were retried with startup retries off"),
            );
            return;
        }
        if !self.m.servers().is_empty()
            || !self.m.connections().is_empty()
            || !self.m.pending_connections().is_empty()
            || !self.m.pending_tool_loads().is_empty()
            || self.m.tool_count() != 0
            || !self.m.open_conns().is_empty()
            || !self.m.calls_in_flight().is_empty()
            || !self.m.sources().is_empty()
        {
            self.fail(
                "liveness",
                "a registry is not empty after the final DisconnectAll".into(),
            );
            return;
        }
        if self.m.poll_timeout().is_some() {
            let t = self.m.next_timer();
            self.fail(
                "liveness",
                format!("a timer is still armed after the final DisconnectAll: {t:?}"),
            );
        }
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness ok: no process alive, every registry empty");
        });
    }

    /// After the heal: connect every valid server again; each must come up, the ones started
    /// now with exactly their tools, and a call to each of them must succeed.
    /// The embedder connects these servers (their base configs) and the world runs until it
    /// is idle or a minute of virtual time has passed.
    fn connect_and_settle(&mut self, servers: &[usize]) {
        let sc = self.sc;
        let specs = servers
            .iter()
            .map(|&i| ServerSpec::new(sc.servers[i].name.clone(), config_for(sc, i, 0)))
            .collect();
        self.input(Input::Connect { servers: specs }, |_| {});
        let horizon = self.now + Duration::from_secs(60);
        self.run_until(horizon);
    }

    fn reconnect_healed(&mut self) {
        let sc = self.sc;
        let valid: Vec<usize> = (0..sc.servers.len())
            .filter(|&i| !sc.servers[i].invalid)
            .collect();
        self.tr(|t| {
            let _ = writeln!(t, "--- liveness: reconnect every server");
        });
        let before: Vec<Option<ConnId>> = self.obs.latest_conn.clone();
        self.connect_and_settle(&valid);
        if self.violation.is_some() {
            return;
        }
        if sc.options.reconnect == ReconnectMode::Off {
            // With reconnects off, a connection that stalled before the heal (it stays
            // stalled) is found dead by its health check and left disconnected, as the seed
            // says; the embedder connects it again, as an embedder must.
            let down: Vec<usize> = valid
                .iter()
                .copied()
                .filter(|&i| self.view.status[i] != ServerStatus::Connected)
                .collect();
            if !down.is_empty() {
                self.tr(|t| {
                    let _ = writeln!(
                        t,
                        "--- liveness: reconnects are off; connect the dead again"
                    );
                });
                self.connect_and_settle(&down);
                if self.violation.is_some() {
                    return;
                }
            }
        }
        let mut calls = Vec::new();
        for &i in &valid {
            let name = &sc.servers[i].name;
            if self.view.status[i] != ServerStatus::Connected {
                self.fail(
                    "liveness",
                    format!(
                        "{name} is {:?} after the heal and a reconnect",
                        self.view.status[i]
                    ),
                );
                return;
            }
            if self.obs.latest_conn[i] == before[i] {
                continue; // already connected: kept as it was (tools may have changed since)
            }
            let mut want: Vec<&str> = Vec::new();
            for t in &sc.servers[i].tools {
                if !want.contains(&t.as_str()) {
                    want.push(t);
                }
            }
            want.sort_unstable();
            let mut got: Vec<&str> = self
                .view
                .tools
                .iter()
                .filter(|t| t.server == *name && !t.deferred)
                .map(|t| t.raw.as_str())
                .collect();
            got.sort_unstable();
            if want != got {
                self.fail(
                    "liveness",
                    format!("{name} came back with tools {got:?}, expected {want:?}"),
                );
                return;
            }
            self.cov.reconnected_after_heal += 1;
            if let Some(t) = self.view.tools.iter().find(|t| t.server == *name) {
                calls.push((i, t.qualified.clone()));
            }
        }
        for (i, tool) in calls {
            let call = CallId(self.next_call);
            self.next_call += 1;
            self.expect_ok.insert(call);
            let timeout = Duration::from_millis(sc.servers[i].call_latency_ms + 5_000);
            let timing = Some(CallTiming {
                started: self.now,
                timeout,
                deadline: self.now + timeout,
                extended: false,
            });
            self.obs.calls.insert(
                call,
                CallObs {
                    server: Some(i),
                    deferred: false,
                    withdrawn_target: false,
                    timing,
                },
            );
            self.input(
                Input::CallTool {
                    call,
                    tool,
                    arguments: None,
                    timeout: Some(timeout),
                },
                |s| s.scope = Some(i),
            );
        }
        let horizon = self.now + Duration::from_millis(6_000);
        self.run_until(horizon);
        if self.violation.is_none() && !self.expect_ok.is_empty() {
            let left: Vec<u64> = self.expect_ok.iter().map(|c| c.0).collect();
            self.fail(
                "liveness",
                format!("healed calls never succeeded: {left:?}"),
            );
        }
    }

    fn fail(&mut self, invariant: &str, detail: String) {
        if self.violation.is_some() {
            return;
        }
        let at = self.now;
        self.tr(|t| {
            let _ = writeln!(t, "!!! invariant {invariant} violated: {detail}");
        });
        self.violation = Some(Violation {
            invariant: invariant.to_string(),
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
        self.step = StepInfo {
            timer: true,
            running_status: self.view.status.clone(),
            ..StepInfo::default()
        };
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
        self.step = StepInfo {
            running_status: self.view.status.clone(),
            ..StepInfo::default()
        };
        setup(&mut self.step);
        self.note_lifecycle(&input);
        let round_kind = match &input {
            Input::Connect { servers } | Input::Reload { servers } => Some((
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

    /// Which servers an embedder request explicitly starts, stops or keeps.
    fn note_lifecycle(&mut self, input: &Input) {
        let n = self.obs.names.len();
        match input {
            Input::Connect { .. } => self.step.explicit_start = true,
            Input::Reload { .. } => {
                self.step.explicit_start = true;
                self.step.removed = (0..n).collect();
            }
            Input::DisconnectAll => self.step.removed = (0..n).collect(),
            Input::Disconnect { server } => {
                self.step.removed = self.obs.index.get(server).copied().into_iter().collect();
            }
            Input::Sync { servers } => {
                self.step.explicit_start = true;
                for i in 0..n {
                    let name = &self.obs.names[i];
                    let specs: Vec<&ServerSpec> =
                        servers.iter().filter(|s| s.name == *name).collect();
                    if !specs.iter().any(|s| s.config.enabled) {
                        self.step.removed.push(i);
                        continue;
                    }
                    let Some(state) = self.m.server_state(name) else {
                        continue;
                    };
                    // Of several enabled specs of one name, a Sync runs the last.
                    let Some(spec) = specs.iter().rev().find(|s| s.config.enabled) else {
                        continue;
                    };
                    let unchanged = config_hash(&spec.config) == state.config_hash;
                    if unchanged && state.status != ServerStatus::Disconnected {
                        self.step.sync_unchanged.push(i);
                    } else if self.sc.servers[i].invalid {
                        // It cannot start: its round reports the config error.
                    } else if unchanged {
                        self.step.sync_stopped.push(i);
                    } else {
                        self.step.sync_changed.push(i);
                    }
                }
            }
            _ => return,
        }
        self.step.lifecycle = true;
    }

    fn finish_step(&mut self) {
        self.drain_and_check(None);
    }

    fn drain_and_check(&mut self, round_kind: Option<(bool, Vec<usize>)>) {
        self.events += 1;
        let mut opens: BTreeMap<usize, ConnId> = BTreeMap::new();
        let mut outs = Vec::new();
        while let Some(o) = self.m.poll_output() {
            outs.push(o);
        }
        self.step.outputs = outs.len();
        self.cov.manager_outputs += outs.len() as u64;
        for o in outs {
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
        // A new startup round?
        if let Some((must, invalid)) = round_kind {
            let candidate = self
                .m
                .open_rounds()
                .into_iter()
                .chain(self.step.reports.iter().map(|r| r.round))
                .filter(|&r| r > self.obs.max_round)
                .max();
            match candidate {
                Some(id) => {
                    self.obs.max_round = id;
                    let reported = self.step.reports.iter().any(|r| r.round == id);
                    self.obs.rounds.insert(
                        id,
                        RoundObs {
                            id,
                            started: self.now,
                            gate_at: self.now + Duration::from_millis(self.sc.options.gate_ms),
                            members: opens,
                            invalid,
                            reported,
                        },
                    );
                }
                None if must => self
                    .step
                    .output_violations
                    .push(("4", "a Connect/Reload opened no startup round".into())),
                None => {}
            }
        }
        self.check();
    }

    /// Act on one output, as the shell and the embedder would.
    fn perform(&mut self, o: Output) {
        match o {
            Output::OpenTransport { conn, server, .. } => self.spawn(conn, &server),
            Output::Send { conn, frame } => {
                if !self.obs.mirror.contains(&conn) {
                    self.step
                        .output_violations
                        .push(("6", format!("Send on attempt #{} that is not open", conn.0)));
                    return;
                }
                self.server_receives(conn, &frame);
            }
            Output::CloseTransport { conn } => {
                self.step.closes.push(conn);
                let answers_stale_open = self.step.stale_opened == Some(conn);
                if answers_stale_open {
                    self.cov.stale_opens_closed += 1;
                }
                if !self.obs.mirror.remove(&conn) && !answers_stale_open {
                    let why = if self.procs.get(&conn).is_some_and(|p| p.reported) {
                        "after it reported its own close"
                    } else if self.procs.contains_key(&conn) {
                        "twice"
                    } else {
                        "for an attempt never opened"
                    };
                    self.step
                        .output_violations
                        .push(("6", format!("CloseTransport #{} {why}", conn.0)));
                }
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.killed = true;
                }
            }
            Output::LoadCache { server, key } => {
                let Some(&i) = self.obs.index.get(&server) else {
                    return;
                };
                self.pending_load[i] = Some(key.config_hash.clone());
                let (tools, stale, corrupt) = match self.store.get(&server) {
                    Some(e) if e.hash == key.config_hash => {
                        (e.tools.clone(), false, e.tools.is_none())
                    }
                    Some(_) => (None, true, false),
                    None => (None, false, false),
                };
                if stale {
                    self.cov.cache_stale += 1;
                }
                if corrupt {
                    self.cov.cache_corrupt += 1;
                }
                if tools.is_some() {
                    self.cov.cache_hits += 1;
                }
                let lat = self.sc.servers[i].cache_latency_ms + self.jitter();
                if lat >= self.sc.options.gate_ms {
                    self.cov.cache_slower_than_gate += 1;
                }
                let at = self.after_ms(lat);
                self.push(at, Ev::Cache { server, key, tools });
            }
            Output::StoreCache { server, key, tools } => {
                self.store.insert(
                    server,
                    StoreEntry {
                        hash: key.config_hash,
                        tools: Some(tools),
                    },
                );
            }
            Output::StartupComplete(r) => {
                self.cov.rounds_reported += 1;
                let snapshot = self.step.running_status.clone();
                self.step.report_status.push(snapshot);
                if !r.deferred.is_empty() {
                    self.cov.deferred_tools_served += 1;
                }
                if !r.pending.is_empty() {
                    self.cov.rounds_with_pending += 1;
                }
                match self.obs.rounds.get_mut(&r.round) {
                    Some(round) if round.reported => self
                        .step
                        .output_violations
                        .push(("4", format!("StartupComplete twice for round {}", r.round))),
                    Some(round) => {
                        round.reported = true;
                        let members: Vec<(usize, ConnId)> =
                            round.members.iter().map(|(&i, &c)| (i, c)).collect();
                        for (i, c) in members {
                            if r.errors.contains_key(&self.obs.names[i])
                                && self.obs.latest_conn[i] == Some(c)
                            {
                                self.failure_reported(c, "in the round's report");
                            }
                        }
                    }
                    // A round opened in this very step: recorded after the drain.
                    None if r.round > self.obs.max_round => {}
                    None => self.step.output_violations.push((
                        "4",
                        format!("StartupComplete for unknown round {}", r.round),
                    )),
                }
                self.step.reports.push(r);
            }
            Output::ToolsChanged { servers } => self.step.tools_changed.extend(servers),
            Output::StatusChanged { server, status } => {
                self.step.status_events.insert(server.clone(), status);
                if let Some(&i) = self.obs.index.get(&server) {
                    self.step.running_status[i] = status;
                }
                if status == ServerStatus::Connected {
                    if let Some(c) = self
                        .obs
                        .index
                        .get(&server)
                        .and_then(|&i| self.obs.latest_conn[i])
                    {
                        if let Some(o) = self.obs.conns.get_mut(&c) {
                            o.ready = true;
                        }
                    }
                }
            }
            Output::CallCompleted { call, outcome } => {
                if self.expect_ok.remove(&call) && !matches!(outcome, CallOutcome::Ok(_)) {
                    self.fail(
                        "liveness",
                        format!("call {} to a healed server failed: {outcome:?}", call.0),
                    );
                }
                match self.obs.calls.remove(&call) {
                    Some(c) => {
                        match &outcome {
                            CallOutcome::Ok(_) => {
                                self.cov.calls_ok += 1;
                                if c.deferred {
                                    self.cov.deferred_call_succeeded += 1;
                                }
                            }
                            CallOutcome::Err(e) if e.contains("unknown tool") => {
                                self.cov.calls_unknown_tool += 1;
                            }
                            _ => {}
                        }
                        // Remember the server for the isolation check of this step.
                        self.obs.calls.insert(call, c);
                        self.step.completed.push((call, outcome));
                    }
                    None => self.step.output_violations.push((
                        "8",
                        format!("call {} completed twice (or was never issued)", call.0),
                    )),
                }
            }
            Output::ReconnectScheduled {
                server,
                attempt,
                delay,
                error,
            } => {
                self.cov.reconnect_events_scheduled += 1;
                let policy = &self.m.options().reconnect;
                if let Err(e) = invariants::ladder_ok(policy, delay, attempt) {
                    let v = format!("ReconnectScheduled {server} ({error}): {e}");
                    self.step.output_violations.push(("13", v));
                }
                self.announced.insert(server, (attempt, self.now + delay));
            }
            Output::ReconnectStarted { server, attempt } => {
                self.cov.reconnect_events_started += 1;
                let announced = self.announced.remove(&server);
                if announced != Some((attempt, self.now)) {
                    self.step.output_violations.push((
                        "13",
                        format!(
                            "ReconnectStarted {server} attempt {attempt} at {}ns, announced {announced:?}",
                            self.now.as_nanos()
                        ),
                    ));
                }
            }
            Output::ServerLog {
                server,
                level,
                severity,
                logger,
                data,
            } => {
                self.cov.server_logs += 1;
                let text = data.as_str().unwrap_or_default();
                let want = sim_log_level(&severity, text);
                if logger.as_deref() != Some("sim") || want.is_none() {
                    self.step.output_violations.push((
                        "19",
                        format!(
                            "a ServerLog the server did not send: {severity} {logger:?} {data}"
                        ),
                    ));
                } else if want != Some(level) {
                    self.step.output_violations.push((
                        "19",
                        format!("a server log message at {severity:?} became {level:?}, not {want:?}: {text}"),
                    ));
                }
                if !self.obs.index.contains_key(&server) {
                    self.step
                        .output_violations
                        .push(("19", format!("a ServerLog from unknown server {server}")));
                }
            }
            Output::Progress {
                server,
                call,
                progress,
                ..
            } => {
                // Progress names a call only when it is one of ours, in flight, to that server.
                if let Some(call) = call {
                    self.cov.progress_events += 1;
                    let ok = self.sc.options.reset_timeout_on_progress
                        && self.obs.calls.get(&call).is_some_and(|c| {
                            c.server.map(|i| self.obs.names[i].as_str()) == Some(server.as_str())
                        })
                        && !self.step.completed.iter().any(|(c, _)| *c == call);
                    if !ok {
                        self.step.output_violations.push((
                            "19",
                            format!(
                                "Progress {progress} from {server} names call {} that is not one of its calls in flight",
                                call.0
                            ),
                        ));
                    }
                }
            }
            Output::Diagnostic {
                server,
                level,
                message,
            } => {
                // A server's log message is a ServerLog, never a Diagnostic as well.
                if message.starts_with("[sim] ") {
                    self.step.output_violations.push((
                        "19",
                        format!("a server log message became a Diagnostic ({level:?}): {message}"),
                    ));
                }
                // A failed attempt of a round still open is the round's to report (in its
                // StartupComplete), never a diagnostic of its own as well.
                if message.starts_with("attempt failed:") {
                    if let Some(i) = server.as_ref().and_then(|s| self.obs.index.get(s).copied()) {
                        let in_open_round = self.obs.rounds.values().any(|r| {
                            !r.reported
                                && r.members
                                    .get(&i)
                                    .is_some_and(|c| self.obs.latest_conn[i] == Some(*c))
                        });
                        if in_open_round {
                            self.step.output_violations.push((
                                "9",
                                format!(
                                    "a failed attempt of an open round was also logged: {message}"
                                ),
                            ));
                        }
                    }
                }
                // With reconnects on, a lost connection is a warning ("...; reconnecting"):
                // counted, but not a failure report (the attempt goes on).
                let lost = message.starts_with("connection lost:");
                if lost {
                    self.cov.connections_lost += 1;
                }
                let late = message.starts_with("failed after startup:");
                if level == Level::Error && (late || lost) {
                    if late {
                        self.cov.late_failures_after_gate += 1;
                    }
                    if let Some(i) = server.as_ref().and_then(|s| self.obs.index.get(s).copied()) {
                        self.obs.withdrawn[i] = true;
                        if let Some(c) = self.obs.latest_conn[i] {
                            self.failure_reported(c, "as a late failure");
                        }
                    }
                }
            }
        }
    }

    fn failure_reported(&mut self, conn: ConnId, how: &str) {
        if let Some(o) = self.obs.conns.get_mut(&conn) {
            o.failure_reports += 1;
            if o.failure_reports > 1 {
                self.step.output_violations.push((
                    "9",
                    format!(
                        "the failure of attempt #{} was reported again ({how})",
                        conn.0
                    ),
                ));
            }
        }
    }

    /// Servers whose tool listing has settled: connected, no listing and no list_changed in
    /// flight. `Some(tools)`: the set the manager last listed is the current one; `None`: the
    /// set changed (announced) since the last complete listing, and no re-list is under way.
    fn settled(&self, after: &View) -> Vec<(usize, Option<Vec<String>>)> {
        let mut v = Vec::new();
        for (i, st) in after.status.iter().enumerate() {
            if *st != ServerStatus::Connected {
                continue;
            }
            let Some(p) = self.obs.latest_conn[i].and_then(|c| self.procs.get(&c)) else {
                continue;
            };
            if !p.alive() || p.reported || !p.open_lists.is_empty() || p.changed_in_flight > 0 {
                continue;
            }
            // Without the tools capability it never declared tools.listChanged either.
            if matches!(p.plan.init, Init::NoTools { .. }) {
                continue;
            }
            match p.view_version {
                None => {}
                Some(x) if x == p.version => {
                    let s = &self.sc.servers[i];
                    let tools = if p.alt_tools { &s.alt_tools } else { &s.tools };
                    v.push((i, Some(tools.clone())));
                }
                Some(_) => v.push((i, None)),
            }
        }
        v
    }

    fn check(&mut self) {
        let after = View::observe(&self.m, &self.obs.names, Some(&self.view));
        let settled = self.settled(&after);
        self.cov.list_settled_checks += settled.len() as u64;
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
            reset_on_progress: self.sc.options.reset_timeout_on_progress,
            reconnect_off: self.sc.options.reconnect == ReconnectMode::Off,
            health: self
                .sc
                .options
                .health
                .map(|(i, t, _)| (Duration::from_millis(i), Duration::from_millis(t))),
            max_call_time: Duration::from_millis(self.sc.options.max_call_time_ms),
        };
        let mut failed = None;
        for (name, f) in invariants::SAFETY {
            if let Err(d) = f(&ctx) {
                failed = Some((*name, d));
                break;
            }
        }
        if failed.is_none() {
            let c = invariants::update_policy(
                &mut self.obs,
                &self.step,
                &self.view,
                &after,
                &self.m,
                self.now,
            );
            self.cov.backoff_delays_checked += c.backoffs;
            self.cov.breaker_trips_checked += c.trips;
            self.cov.syncs_restart_and_keep += c.sync_restart_and_keep;
            self.cov.syncs_restart_stopped += c.sync_restart_stopped;
            for (call, outcome) in &self.step.completed {
                if let CallOutcome::Err(e) = outcome {
                    if e.starts_with(invariants::CALL_TIMEOUT_PREFIX) {
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
        let refresh_names = invariants::names_need_fresh_check(&self.obs, &after);
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
        self.view = after;
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
            Ev::Action(i) => self.action(i),
            Ev::Heal => {
                self.healed = true;
                self.tr(|t| {
                    let _ = writeln!(t, "--- heal: faults off");
                });
            }
            Ev::Cache { server, key, tools } => {
                if let Some(&i) = self.obs.index.get(&server) {
                    // Not the answer the manager is waiting for (none is awaited, or it is for
                    // another config): stale, so it must change nothing and be counted.
                    let stale =
                        !matches!(&self.awaiting_cache[i], Some((_, h)) if *h == key.config_hash);
                    let c = self.m.counters();
                    let counted = (c.stale_events, c.stale_opened_closed, false);
                    self.cov.stale_cache_answers += u64::from(stale);
                    if let Some((c, h)) = &self.awaiting_cache[i] {
                        if *h == key.config_hash {
                            let c = *c;
                            if let Some(o) = self.obs.conns.get_mut(&c) {
                                o.cache_hit = Some(tools.is_some());
                            }
                            self.awaiting_cache[i] = None;
                        }
                    }
                    self.input(Input::CacheLoaded { server, key, tools }, |s| {
                        s.scope = Some(i);
                        s.stale = stale;
                        s.stale_counters_before = stale.then_some(counted);
                    });
                }
            }
            Ev::Deliver {
                conn,
                event,
                exit,
                tag,
            } => self.deliver(conn, event, exit, tag),
        }
    }

    fn deliver(&mut self, conn: ConnId, event: TransportEvent, exit: bool, tag: Tag) {
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let server = p.server;
        let dead_before = p.killed || p.reported || p.exited;
        if exit {
            p.exited = true;
        }
        if dead_before && tag != Tag::RacedOpen {
            // The OS has nothing to report for a dead process — unless it raced.
            let stale_pct = self.sc.mix.stale_pct;
            if !self.pct(stale_pct) {
                return;
            }
            self.cov.stale_events_delivered += 1;
        }
        let stale = !self.obs.mirror.contains(&conn);
        if !stale {
            self.note_tag(conn, server, tag);
        }
        if matches!(
            event,
            TransportEvent::Closed { .. } | TransportEvent::Failed { .. }
        ) {
            if let Some(p) = self.procs.get_mut(&conn) {
                p.reported = true;
            }
            self.obs.mirror.remove(&conn);
        }
        if let TransportEvent::Opened = event {
            let plan = self.procs.get(&conn).map(|p| p.plan.clone());
            if let Some(AttemptPlan {
                oversized_after_ms: Some(ms),
                ..
            }) = plan
            {
                if !stale {
                    let at = self.after_ms(ms);
                    let big = format!(
                        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"{}\"}}}}",
                        "x".repeat(self.sc.options.max_frame_len)
                    );
                    self.push(
                        at,
                        Ev::Deliver {
                            conn,
                            event: TransportEvent::Frame(Bytes::from(big)),
                            exit: false,
                            tag: Tag::None,
                        },
                    );
                }
            }
        }
        if let TransportEvent::Frame(f) = &event {
            if f.len() > self.sc.options.max_frame_len && !stale {
                self.cov.oversized_frames += 1;
            }
        }
        let c = self.m.counters();
        let counted = (c.stale_events, c.stale_opened_closed);
        let opened = matches!(event, TransportEvent::Opened);
        // Every attempt here was issued by the manager (it has a process).
        let stale_opened = (stale && opened).then_some(conn);
        let rejected = !stale
            && matches!(&event, TransportEvent::Frame(f)
                if f.len() > self.sc.options.max_frame_len || f.as_ref() == GARBAGE_FRAME);
        let bad_before = c.bad_frames;
        self.input(Input::Transport { conn, event }, |s| {
            s.scope = Some(server);
            s.stale = stale;
            s.stale_opened = stale_opened;
            s.stale_counters_before = stale.then_some((counted.0, counted.1, opened));
            s.rejected_frame_before = rejected.then_some(bad_before);
        });
    }

    /// The simulator's bookkeeping for a frame about to reach the manager.
    fn note_tag(&mut self, conn: ConnId, server: usize, tag: Tag) {
        match tag {
            Tag::None | Tag::RacedOpen => {}
            Tag::ListAnswer { id, kind } => {
                if let Some(p) = self.procs.get_mut(&conn) {
                    if p.open_lists.remove(&id) {
                        match kind {
                            ListKind::Page => {}
                            ListKind::Final(v) => p.view_version = Some(v),
                            ListKind::Failed => p.view_version = None,
                        }
                    }
                }
            }
            Tag::ListChanged => {
                let connected = self.view.status[server] == ServerStatus::Connected;
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.changed_in_flight = p.changed_in_flight.saturating_sub(1);
                    if connected && !p.open_lists.is_empty() {
                        self.cov.list_changed_while_listing += 1;
                    }
                }
            }
            Tag::Progress { call } => {
                let o = &self.sc.options;
                if !o.reset_timeout_on_progress {
                    return;
                }
                let max = Duration::from_millis(o.max_call_time_ms);
                let now = self.now;
                if let Some(t) = self
                    .obs
                    .calls
                    .get_mut(&CallId(call))
                    .and_then(|c| c.timing.as_mut())
                {
                    let new = (now + t.timeout).min(t.started + max);
                    if new > t.deadline {
                        t.deadline = new;
                        t.extended = true;
                        self.obs.progress_extensions += 1;
                    }
                }
            }
        }
    }

    fn action(&mut self, idx: usize) {
        let sc = self.sc;
        let a = &sc.actions[idx];
        let specs = |list: &Vec<(usize, u8)>| -> Vec<ServerSpec> {
            list.iter()
                .filter(|(i, _)| *i < sc.servers.len())
                .map(|&(i, v)| ServerSpec::new(sc.servers[i].name.clone(), config_for(sc, i, v)))
                .collect()
        };
        match &a.kind {
            ActionKind::Connect(list) => {
                let s = specs(list);
                self.input(Input::Connect { servers: s }, |_| {});
            }
            ActionKind::Reload(list) => {
                self.cov.reloads += 1;
                for w in self.obs.withdrawn.iter_mut() {
                    *w = true;
                }
                let s = specs(list);
                self.input(Input::Reload { servers: s }, |_| {});
            }
            ActionKind::Sync(list) => {
                self.cov.syncs += 1;
                let keep: Vec<usize> = list
                    .iter()
                    .filter(|(_, v)| *v != 3)
                    .map(|(i, _)| *i)
                    .collect();
                for (i, w) in self.obs.withdrawn.iter_mut().enumerate() {
                    if !keep.contains(&i) {
                        *w = true;
                    }
                }
                let s = specs(list);
                self.input(Input::Sync { servers: s }, |_| {});
            }
            &ActionKind::Disconnect(i) => {
                let i = i % sc.servers.len();
                if self.view.status[i] == ServerStatus::Connecting {
                    self.cov.disconnects_while_pending += 1;
                }
                self.obs.withdrawn[i] = true;
                let server = sc.servers[i].name.clone();
                self.input(Input::Disconnect { server }, |s| {
                    s.scope = Some(i);
                    s.disconnect = Some(i);
                });
            }
            ActionKind::DisconnectAll => {
                self.cov.disconnect_alls += 1;
                for w in self.obs.withdrawn.iter_mut() {
                    *w = true;
                }
                self.input(Input::DisconnectAll, |s| s.disconnect_all = true);
            }
            &ActionKind::RefreshTools(i) => {
                let i = i % sc.servers.len();
                self.cov.refreshes += 1;
                let server = sc.servers[i].name.clone();
                self.input(Input::RefreshTools { server }, |s| s.scope = Some(i));
            }
            &ActionKind::CallTool {
                target,
                pick,
                timeout_ms,
            } => self.call(target, pick, timeout_ms),
            &ActionKind::CancelCall(pick) => {
                let ids: Vec<CallId> = self.obs.calls.keys().copied().collect();
                let call = if ids.is_empty() {
                    CallId(pick as u64 + 1)
                } else {
                    self.cov.cancels += 1;
                    ids[pick % ids.len()]
                };
                self.input(Input::CancelCall { call }, |_| {});
            }
        }
    }

    fn call(&mut self, target: CallTarget, pick: usize, timeout_ms: Option<u64>) {
        let pick_from = |v: Vec<String>| -> Option<String> {
            (!v.is_empty()).then(|| v[pick % v.len()].clone())
        };
        let name = match target {
            CallTarget::Live => pick_from(
                self.view
                    .tools
                    .iter()
                    .filter(|t| !t.deferred)
                    .map(|t| t.qualified.clone())
                    .collect(),
            ),
            CallTarget::Deferred => pick_from(
                self.view
                    .tools
                    .iter()
                    .filter(|t| t.deferred)
                    .map(|t| t.qualified.clone())
                    .collect(),
            ),
            CallTarget::Unknown => None,
            CallTarget::Withdrawn => pick_from(
                self.ever_named
                    .iter()
                    .filter(|q| !self.view.tools.iter().any(|t| &t.qualified == *q))
                    .cloned()
                    .collect(),
            ),
        };
        let withdrawn_target = target == CallTarget::Withdrawn && name.is_some();
        let name = name.unwrap_or_else(|| format!("mcp_nosuch_tool_{pick}"));
        let deferred = self
            .view
            .tools
            .iter()
            .any(|t| t.qualified == name && t.deferred);
        if deferred {
            self.cov.deferred_calls += 1;
        }
        if withdrawn_target {
            self.cov.calls_withdrawn_tool += 1;
        }
        let server = self
            .m
            .resolve_tool(&name)
            .and_then(|(s, _)| self.obs.index.get(s).copied());
        let call = CallId(self.next_call);
        self.next_call += 1;
        let timeout = timeout_ms.map_or(
            Duration::from_millis(self.sc.options.call_timeout_ms),
            Duration::from_millis,
        );
        self.obs.calls.insert(
            call,
            CallObs {
                server,
                deferred,
                withdrawn_target,
                timing: Some(CallTiming {
                    started: self.now,
                    timeout,
                    deadline: self.now + timeout,
                    extended: false,
                }),
            },
        );
        self.input(
            Input::CallTool {
                call,
                tool: name,
                arguments: Some(json!({ "n": call.0 })),
                timeout: timeout_ms.map(Duration::from_millis),
            },
            |s| s.scope = server,
        );
    }

    // ----- the OS -------------------------------------------------------------------------------

    fn spawn(&mut self, conn: ConnId, server: &str) {
        let Some(&i) = self.obs.index.get(server) else {
            self.step
                .output_violations
                .push(("6", format!("OpenTransport for unknown server {server}")));
            return;
        };
        if self.procs.contains_key(&conn) {
            self.step
                .output_violations
                .push(("6", format!("OpenTransport reused attempt #{}", conn.0)));
            return;
        }
        let k = self.attempts[i];
        self.attempts[i] += 1;
        if std::mem::take(&mut self.session_lost[i]) {
            self.cov.http_session_failed_then_reopened += 1;
        }
        let plans = &self.sc.servers[i].attempts;
        let plan = if self.healed || plans.is_empty() {
            healthy()
        } else {
            plans[k.min(plans.len() - 1)].clone()
        };
        self.obs.mirror.insert(conn);
        self.obs.latest_conn[i] = Some(conn);
        self.obs.withdrawn[i] = false;
        let load_cache = self.pending_load[i].take();
        if let Some(h) = &load_cache {
            self.awaiting_cache[i] = Some((conn, h.clone()));
        }
        self.obs.conns.insert(
            conn,
            ConnObs {
                server: i,
                load_cache: load_cache.is_some(),
                ..ConnObs::default()
            },
        );
        let mut p = Proc {
            server: i,
            plan: plan.clone(),
            killed: false,
            exited: false,
            reported: false,
            spawned: true,
            lists: 0,
            calls: 0,
            alt_tools: false,
            next_peer_id: 0,
            peer_requests: BTreeMap::new(),
            call_ids: Default::default(),
            version: 0,
            list_version: None,
            open_lists: BTreeSet::new(),
            changed_in_flight: 0,
            view_version: None,
            deaf_at: None,
            cur_list: None,
        };
        match plan.spawn {
            Spawn::Ok { open_ms } => {
                let at = self.after_ms(open_ms);
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Opened,
                        exit: false,
                        tag: Tag::None,
                    },
                );
            }
            Spawn::Fail { after_ms } => {
                self.cov.spawn_failures += 1;
                p.spawned = false;
                let at = self.after_ms(after_ms);
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Failed {
                            error: format!("failed to start {server}: No such file or directory"),
                        },
                        exit: true,
                        tag: Tag::None,
                    },
                );
            }
            Spawn::NeverOpens => self.cov.opens_never_completed += 1,
            Spawn::DropBeforeOpen { after_ms } => {
                self.cov.drops_before_open += 1;
                let at = self.after_ms(after_ms);
                self.push(at, exit_event(conn, "exited before the transport opened"));
                // The shell's race: the spawn succeeded, the process exited at once, and its
                // exit reached the manager before the spawn's completion did. The manager
                // must close the transport that `Opened` hands it.
                self.push(
                    at,
                    Ev::Deliver {
                        conn,
                        event: TransportEvent::Opened,
                        exit: false,
                        tag: Tag::RacedOpen,
                    },
                );
            }
        }
        self.procs.insert(conn, p);
    }

    // ----- the simulated MCP server --------------------------------------------------------------

    /// Schedule a frame from the server `ms` from now (plus jitter), maybe with a frame fault.
    fn reply(&mut self, conn: ConnId, ms: u64, v: Value) {
        self.reply_tagged(conn, ms, v, Tag::None);
    }

    fn reply_tagged(&mut self, conn: ConnId, ms: u64, v: Value, tag: Tag) {
        let frame = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
        let j = self.jitter();
        let at = self.after_ms(ms + j);
        let ff = self.sc.mix.frame_fault_pct;
        if self.pct(ff) {
            let kind = self.rng.below(4);
            let extra: Bytes = match kind {
                0 => {
                    self.cov.garbage_frames += 1;
                    Bytes::from_static(GARBAGE_FRAME)
                }
                1 => {
                    self.cov.duplicate_responses += 1;
                    frame.clone()
                }
                2 => {
                    self.cov.unknown_id_responses += 1;
                    Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":987654,\"result\":{}}")
                }
                _ => {
                    self.cov.batch_frames += 1;
                    Bytes::from_static(b"[{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}]")
                }
            };
            // The fault frame lands just before (garbage, batch) or after (duplicate) the answer.
            let fat = if kind == 1 {
                at + Duration::from_millis(1)
            } else {
                at
            };
            // A duplicate carries what the original carries (a second progress resets too).
            let extra_tag = if kind == 1 { tag } else { Tag::None };
            if extra_tag == Tag::ListChanged {
                if let Some(p) = self.procs.get_mut(&conn) {
                    p.changed_in_flight += 1;
                }
            }
            self.push(
                fat,
                Ev::Deliver {
                    conn,
                    event: TransportEvent::Frame(extra),
                    exit: false,
                    tag: extra_tag,
                },
            );
        }
        self.push(
            at,
            Ev::Deliver {
                conn,
                event: TransportEvent::Frame(frame),
                exit: false,
                tag,
            },
        );
    }

    fn exit_in(&mut self, conn: ConnId, ms: u64, why: &str) {
        let at = self.after_ms(ms);
        self.push(at, exit_event(conn, why));
    }

    /// Its tool set changes, announced by a burst of 1–4 `list_changed` notifications (the
    /// set may change again between them).
    fn storm(&mut self, conn: ConnId) {
        let n = 1 + self.rng.below(4);
        let flips: Vec<bool> = (0..n).map(|k| k == 0 || self.rng.below(2) == 0).collect();
        let j = self.jitter();
        if n > 1 {
            self.cov.list_changed_storms += 1;
        }
        for (k, flip) in flips.into_iter().enumerate() {
            let Some(p) = self.procs.get_mut(&conn) else {
                return;
            };
            if flip {
                p.alt_tools = !p.alt_tools;
                p.version += 1;
            }
            p.changed_in_flight += 1;
            self.cov.list_changed_sent += 1;
            let v = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            self.reply_tagged(conn, 1 + j + k as u64, v, Tag::ListChanged);
        }
    }

    /// Maybe send one server-initiated message.
    fn chatter(&mut self, conn: ConnId) {
        let cp = self.sc.mix.chatter_pct;
        if !self.pct(cp) {
            return;
        }
        let lat = 1 + self.jitter();
        let kind = self.rng.below(6);
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let v = match kind {
            0..=2 => {
                let method = ["ping", "roots/list", "sampling/createMessage"][kind as usize];
                let id = p.next_peer_id;
                p.next_peer_id += 1;
                p.peer_requests.insert(id, method);
                self.cov.peer_requests_sent += 1;
                json!({"jsonrpc": "2.0", "id": format!("srv-{id}"), "method": method})
            }
            3 => {
                self.storm(conn);
                return;
            }
            4 => {
                self.cov.progress_sent += 1;
                // Progress for a token it does not own: another server's call in flight (it
                // must not move that call's deadline), or a token no call has.
                let me = self.procs.get(&conn).map(|p| p.server);
                let foreign = self
                    .obs
                    .calls
                    .iter()
                    .find(|(_, c)| c.server.is_some() && c.server != me)
                    .map(|(id, _)| id.0);
                let token = match foreign {
                    Some(id) => {
                        self.cov.foreign_progress_sent += 1;
                        json!(id)
                    }
                    None => json!("unsolicited"),
                };
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 0.5, "total": 1.0}})
            }
            _ => {
                // Every level in turn (no extra draw from the RNG); the first is a warning.
                let level = SIM_LOG_LEVELS[(self.cov.log_messages_sent % 6) as usize].0;
                self.cov.log_messages_sent += 1;
                let data = if level == "warning" {
                    "disk almost full".to_string()
                } else {
                    format!("sim log at {level}")
                };
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "logger": "sim", "data": data}})
            }
        };
        self.reply(conn, lat, v);
    }

    fn server_receives(&mut self, conn: ConnId, frame: &[u8]) {
        let v: Value = match serde_json::from_slice(frame) {
            Ok(v) => v,
            Err(e) => {
                self.step.output_violations.push((
                    "11",
                    format!("the manager sent a frame that is not JSON: {e}"),
                ));
                return;
            }
        };
        let Some(p) = self.procs.get(&conn) else {
            return;
        };
        if !p.alive() || p.reported {
            return; // lost: the process is gone
        }
        let i = p.server;
        let plan = p.plan.clone();
        let method = v.get("method").and_then(Value::as_str).map(str::to_string);
        let id = v.get("id").cloned();
        if method.as_deref() == Some("ping") && id.is_some() {
            // The manager's health check reached the server (answered or not).
            self.obs.pinged[i] = Some(self.now);
        }
        match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => {
                let gate = self.sc.options.gate_ms;
                let (ms, result) = match plan.init {
                    Init::Ok { ms } => (ms, Ok(true)),
                    Init::NoTools { ms } => {
                        self.cov.init_without_tools += 1;
                        (ms, Ok(false))
                    }
                    Init::Error { ms } => {
                        self.cov.init_errors += 1;
                        (ms, Err(()))
                    }
                    Init::Unsupported { ms } => {
                        self.cov.init_unsupported += 1;
                        let r = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "1999-01-01", "capabilities": {"tools": {}}}});
                        self.reply(conn, ms, r);
                        return;
                    }
                    Init::Hang => {
                        self.cov.init_hangs += 1;
                        return;
                    }
                    Init::Drop { ms } => {
                        self.cov.drops_during_init += 1;
                        self.exit_in(conn, ms, "crashed during initialize");
                        return;
                    }
                };
                if ms >= gate {
                    self.cov.init_slow_past_gate += 1;
                }
                let r = match result {
                    Ok(tools) => {
                        let caps = if tools {
                            json!({"tools": {"listChanged": true}, "logging": {}})
                        } else {
                            json!({"logging": {}})
                        };
                        json!({"jsonrpc": "2.0", "id": id, "result": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": caps,
                            "serverInfo": {"name": self.sc.servers[i].name, "version": "1.0.0"}
                        }})
                    }
                    Err(()) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "initialization failed"}})
                    }
                };
                self.reply(conn, ms, r);
            }
            (Some("tools/list"), Some(id)) => {
                if let (Some(n), Some(p)) = (id.as_u64(), self.procs.get_mut(&conn)) {
                    p.open_lists.insert(n);
                }
                self.list(conn, i, &plan, id, &v);
            }
            (Some("tools/call"), Some(id)) => self.tool_call(conn, i, &plan, id, &v),
            (Some("ping"), Some(id)) => {
                let now = self.now;
                let deaf = !self.healed
                    && self
                        .procs
                        .get(&conn)
                        .and_then(|p| p.deaf_at)
                        .is_some_and(|t| now >= t);
                if deaf {
                    self.cov.pings_unanswered += 1;
                } else {
                    self.reply(conn, 1, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                }
            }
            (Some(m), Some(id)) => {
                let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {m}")}});
                self.reply(conn, 1, r);
            }
            (Some("notifications/initialized"), None) => self.chatter(conn),
            (Some("notifications/cancelled"), None) => {
                self.cov.cancel_notifications_received += 1;
                let params = v.get("params");
                let rid = params
                    .and_then(|p| p.get("requestId"))
                    .and_then(Value::as_u64);
                let timed_out = params.and_then(|p| p.get("reason")).and_then(Value::as_str)
                    == Some("request timed out");
                let was_call = rid.is_some_and(|r| {
                    self.procs
                        .get(&conn)
                        .is_some_and(|p| p.call_ids.contains(&r))
                });
                if timed_out && was_call {
                    self.cov.call_timeout_with_cancel += 1;
                }
                // An abandoned listing: the manager keeps what it had (unknown here).
                if let (Some(r), Some(p)) = (rid, self.procs.get_mut(&conn)) {
                    if p.open_lists.remove(&r) {
                        p.view_version = None;
                    }
                }
            }
            (Some(_), None) => {}
            (None, id) => self.peer_answer(conn, id, &v),
        }
    }

    /// Check the client's answer to a request this server sent.
    fn peer_answer(&mut self, conn: ConnId, id: Option<Value>, v: &Value) {
        let key = id
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix("srv-"))
            .and_then(|s| s.parse::<u64>().ok());
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let resent = key.is_some_and(|k| k < p.next_peer_id && !p.peer_requests.contains_key(&k));
        let method = key.and_then(|k| p.peer_requests.remove(&k));
        let ok = resent
            || match method {
                Some("ping") => v.get("result") == Some(&json!({})),
                Some("roots/list") => v
                    .get("result")
                    .and_then(|r| r.get("roots"))
                    .is_some_and(Value::is_array),
                Some(_) => {
                    v.get("error")
                        .and_then(|e| e.get("code"))
                        .and_then(Value::as_i64)
                        == Some(-32601)
                }
                None => false,
            };
        self.cov.peer_answers_checked += 1;
        if !ok {
            self.step
                .output_violations
                .push(("11", format!("bad answer to a server request: {v}")));
        }
    }

    fn list(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value, req: &Value) {
        let has_cursor = req
            .get("params")
            .and_then(|p| p.get("cursor"))
            .is_some_and(|c| !c.is_null());
        let list_id = id.as_u64().unwrap_or(u64::MAX);
        let (first, alt, version) = match self.procs.get_mut(&conn) {
            Some(p) => {
                p.lists += 1;
                if !has_cursor {
                    p.list_version = Some(p.version);
                } else if p.list_version != Some(p.version) {
                    p.list_version = Some(u64::MAX);
                }
                (
                    p.lists == 1,
                    p.alt_tools,
                    p.list_version.unwrap_or(u64::MAX),
                )
            }
            None => return,
        };
        let s = &self.sc.servers[i];
        let tools: Vec<String> = if alt {
            s.alt_tools.clone()
        } else {
            s.tools.clone()
        };
        let cursor = req
            .get("params")
            .and_then(|p| p.get("cursor"))
            .and_then(Value::as_str)
            .map(str::to_string);
        // Only the first listing of an attempt (all its pages) follows the plan; refreshes
        // answer healthily.
        let ongoing = self.procs.get(&conn).and_then(|p| p.cur_list.clone());
        let behaviour = if first {
            plan.list.clone()
        } else if let (Some(b), true) = (ongoing, cursor.is_some()) {
            // Later pages of a listing behave as its first page did.
            b
        } else {
            // A refresh (list_changed or RefreshTools) can misbehave too.
            let cf = self.sc.mix.call_fault_pct;
            if self.pct(cf) {
                self.cov.refresh_faults += 1;
                match self.rng.below(3) {
                    0 => List::Error { ms: 20 },
                    1 => List::Hang,
                    _ => List::Ok { ms: 30, pages: 2 },
                }
            } else {
                List::Ok { ms: 5, pages: 1 }
            }
        };
        if cursor.is_none() {
            if let Some(p) = self.procs.get_mut(&conn) {
                p.cur_list = Some(behaviour.clone());
            }
        }
        let page_json = |names: &[String]| -> Vec<Value> {
            names
                .iter()
                .map(|n| json!({"name": n, "description": format!("{n} tool"), "inputSchema": {"type": "object"}}))
                .collect()
        };
        match behaviour {
            List::Ok { ms, pages } => {
                let pages = usize::from(pages.max(1));
                let k: usize = cursor
                    .as_deref()
                    .and_then(|c| c.strip_prefix('p'))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                if let Some(max) = self.sc.options.max_tool_pages {
                    if k + 1 > max {
                        self.step.output_violations.push((
                            "11",
                            format!(
                                "asked for page {} of a listing, past max_tool_pages {max}",
                                k + 1
                            ),
                        ));
                    } else if k + 1 == max && k + 1 < pages {
                        self.cov.list_page_limit_hit += 1;
                    }
                }
                if pages > 1 && k == 0 {
                    self.cov.list_paged += 1;
                }
                let per = tools.len().div_ceil(pages).max(1);
                let lo = (k * per).min(tools.len());
                let hi = ((k + 1) * per).min(tools.len());
                let mut result = json!({ "tools": page_json(&tools[lo..hi]) });
                let kind = if k + 1 < pages {
                    result["nextCursor"] = json!(format!("p{}", k + 1));
                    ListKind::Page
                } else {
                    ListKind::Final(version)
                };
                self.reply_tagged(
                    conn,
                    ms,
                    json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Tag::ListAnswer { id: list_id, kind },
                );
                // Now and then the tool set changes while this listing is under way.
                let cp = self.sc.mix.chatter_pct / 3;
                if self.pct(cp) {
                    self.cov.list_changed_during_list += 1;
                    self.storm(conn);
                }
                if k + 1 >= pages {
                    let startup = first || cursor.is_some();
                    let crash = self.sc.servers[i].crash_loop.clone().filter(|c| {
                        !self.healed && c.recover_after.is_none_or(|k| self.crashes[i] < k)
                    });
                    if let (Some(c), true) = (crash, startup) {
                        self.crashes[i] += 1;
                        self.cov.crash_loop_crashes += 1;
                        self.exit_in(conn, c.after_ready_ms + 1, "crashed again (crash loop)");
                    } else if let Some(ms) = plan.drop_after_ready_ms {
                        if startup {
                            self.cov.drops_after_ready += 1;
                            self.exit_in(conn, ms + 1, "exited after it was ready");
                        }
                    }
                    if let (Some(ms), true) = (plan.deaf_after_ms, startup) {
                        let at = self.after_ms(ms);
                        if let Some(p) = self.procs.get_mut(&conn) {
                            p.deaf_at = Some(at);
                        }
                    }
                    self.chatter(conn);
                }
            }
            List::Error { ms } => {
                self.cov.list_errors_after_init += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "tools unavailable"}});
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Failed,
                };
                self.reply_tagged(conn, ms, r, tag);
            }
            List::Hang => self.cov.list_hangs += 1,
            List::RepeatedCursor { ms } => {
                if cursor.is_some() {
                    self.cov.list_repeated_cursor += 1;
                }
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"tools": page_json(&tools), "nextCursor": "again"}});
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Page,
                };
                self.reply_tagged(conn, ms, r, tag);
            }
            List::Malformed { ms } => {
                self.cov.list_malformed += 1;
                let r = json!({"jsonrpc": "2.0", "id": id, "result": {"items": []}});
                let tag = Tag::ListAnswer {
                    id: list_id,
                    kind: ListKind::Failed,
                };
                self.reply_tagged(conn, ms, r, tag);
            }
            List::Drop { ms } => {
                self.cov.drops_during_list += 1;
                self.exit_in(conn, ms, "crashed during tools/list");
            }
        }
    }

    fn tool_call(&mut self, conn: ConnId, i: usize, plan: &AttemptPlan, id: Value, req: &Value) {
        let first = match self.procs.get_mut(&conn) {
            Some(p) => {
                p.calls += 1;
                if let Some(n) = id.as_u64() {
                    p.call_ids.insert(n);
                }
                p.calls == 1
            }
            None => return,
        };
        if plan.drop_on_call && first {
            self.cov.drops_during_call += 1;
            self.exit_in(conn, 1, "crashed during tools/call");
            return;
        }
        let session_delay_ms = match self.http_session_expiry(conn, i) {
            SessionExpiry::None => 0,
            SessionExpiry::Recovered { delay_ms } => delay_ms,
            SessionExpiry::Failed => return,
        };
        let tool = req
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let lat = self.sc.servers[i].call_latency_ms;
        // With `reset_timeout_on_progress` the call carries its id as a progress token.
        let token = req
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
            .and_then(Value::as_u64);
        let progress_tag = token.map_or(Tag::None, |call| Tag::Progress { call });
        let token_json = token.map_or_else(|| id.clone(), |t| json!(t));
        let call_timeout = token
            .and_then(|t| self.obs.calls.get(&CallId(t)))
            .and_then(|c| c.timing)
            .map(|t| t.timeout.as_millis() as u64);
        let cf = self.sc.mix.call_fault_pct;
        let fault = if self.pct(cf) {
            Some(self.rng.below(4))
        } else {
            None
        };
        let r = match fault {
            // A slow call that reports progress, each report within its timeout of the last.
            Some(0) if call_timeout.is_some_and(|t| t <= 3_000) => {
                let t = call_timeout.unwrap_or(0);
                let n = 1 + self.rng.below(6);
                let step = t * 6 / 10;
                // Now and then it never answers: it times out at its extended deadline or at
                // max_call_time.
                let answers = self.rng.below(3) != 0;
                self.cov.slow_calls_with_progress += 1;
                for k in 1..=n {
                    self.cov.progress_sent += 1;
                    let p = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token_json, "progress": k, "total": n + 1}});
                    self.reply_tagged(conn, k * step, p, progress_tag);
                }
                (
                    n * step + t / 2,
                    answers.then(|| {
                        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "slow but alive"}]}})
                    }),
                )
            }
            Some(0) => {
                self.cov.slow_calls += 1;
                let ms = self.sc.options.call_timeout_ms + 100;
                (
                    ms,
                    Some(
                        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "late"}]}}),
                    ),
                )
            }
            Some(1) => {
                self.cov.failing_calls += 1;
                (
                    lat,
                    Some(
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "tool exploded"}}),
                    ),
                )
            }
            Some(2) => {
                self.cov.error_result_calls += 1;
                (
                    lat,
                    Some(
                        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "bad input"}], "isError": true}}),
                    ),
                )
            }
            Some(_) => {
                self.cov.unanswered_calls += 1;
                (lat, None)
            }
            None => (
                lat,
                Some(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": format!("ok:{tool}")}]}}),
                ),
            ),
        };
        let cp = self.sc.mix.chatter_pct;
        if self.pct(cp) {
            self.cov.progress_sent += 1;
            let n = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token_json, "progress": 0.5}});
            self.reply_tagged(conn, lat / 2, n, progress_tag);
        }
        if let (ms, Some(r)) = r {
            self.reply(conn, ms + session_delay_ms, r);
        }
    }

    /// The HTTP session-expiry fault as the core sees it. A Streamable HTTP server that
    /// forgot the session answers this `tools/call` with 404; the transport then replays
    /// `initialize` once and retries (io/src/http/mod.rs). If that works, the core sees only
    /// a later answer; if it fails, the transport ends with `Failed`, like the shell's.
    fn http_session_expiry(&mut self, conn: ConnId, i: usize) -> SessionExpiry {
        let http = i % 3 == 2 && !self.sc.servers[i].invalid;
        let p = u64::from(self.sc.mix.call_fault_pct / 2);
        if !http || self.healed || p == 0 || self.http_rng.below(100) >= p {
            return SessionExpiry::None;
        }
        if self.http_rng.below(3) != 0 {
            self.cov.http_session_expired_recovered += 1;
            let lat = self.sc.servers[i].call_latency_ms;
            // The 404, then initialize and notifications/initialized, then the call again.
            SessionExpiry::Recovered {
                delay_ms: 3 * lat.max(1) + self.http_rng.below(20),
            }
        } else {
            self.cov.http_session_expired_failed += 1;
            self.session_lost[i] = true;
            let name = &self.sc.servers[i].name;
            let error = format!(
                "server \"{name}\": the session expired (HTTP 404) and a new one could not be started: HTTP 503: unavailable"
            );
            let ms = 1 + self.http_rng.below(20);
            let at = self.after_ms(ms);
            self.push(
                at,
                Ev::Deliver {
                    conn,
                    event: TransportEvent::Failed { error },
                    exit: true,
                    tag: Tag::None,
                },
            );
            SessionExpiry::Failed
        }
    }
}

/// What the HTTP session-expiry fault did to one call.
enum SessionExpiry {
    /// No 404 (or not an HTTP server).
    None,
    /// A new session was started inside the transport: the answer comes later.
    Recovered { delay_ms: u64 },
    /// The new session could not be started: the transport failed.
    Failed,
}

fn exit_event(conn: ConnId, why: &str) -> Ev {
    Ev::Deliver {
        conn,
        event: TransportEvent::Closed {
            reason: why.to_string(),
        },
        exit: true,
        tag: Tag::None,
    }
}

/// Run one scenario.
pub fn run_scenario(sc: &Scenario, tracing: bool) -> RunResult {
    World::new(sc, tracing).run()
}
