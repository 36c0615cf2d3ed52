//! What the simulator observes of a run, shared by the world (which records it) and the
//! invariants (which read it): the getters' view after each step, what the step was and what
//! it drained, and the bookkeeping kept across steps — rounds, attempts, calls, policies.
//! Neither side owns the other: both import these types from here.

use crate::verdict::Invariant;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{
    CallId, CallOutcome, ConnId, Level, Manager, ServerStatus, StartupReport,
};
use switchboard_core::names::NameTable;
use switchboard_core::tool::ToolRef;
use switchboard_core::Instant;

/// One tool of the view, as observed (the definition itself is not needed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewTool {
    pub qualified: String,
    pub server: String,
    pub raw: String,
    pub deferred: bool,
}

/// What the getters show after a step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// `status()` of every scenario server, by index.
    pub status: Vec<ServerStatus>,
    /// Shared with the previous step's view while the tool view is unchanged, so most steps
    /// neither copy it nor compare it twice.
    pub tools: Arc<Vec<ViewTool>>,
    /// The manager's `view_generation()` when `tools` was read.
    pub tools_gen: u64,
    /// The manager's `phase_generation()` when `status` was read.
    pub phase_gen: u64,
    /// `calls_in_flight()`, `open_conns()` and `open_rounds()`, each shared with the previous
    /// step's view while it is unchanged (most steps), so it is compared, not collected.
    pub calls: Arc<Vec<CallId>>,
    pub conns: Arc<Vec<ConnId>>,
    pub rounds: Arc<Vec<u64>>,
}

impl View {
    /// What the getters show now; `prev` is the view of the step before (its tool list is
    /// reused when the manager's `view_generation()` has not moved, or when its `tool_refs()`
    /// still equal it field by field).
    /// `index`: every scenario server's name with its index (its name order lets the
    /// statuses be read in one pass over the manager's servers).
    pub fn observe(m: &Manager, index: &BTreeMap<String, usize>, prev: Option<&View>) -> View {
        Self::observe_into(m, index, prev, Vec::new())
    }

    /// `observe`, writing the statuses into `spare` (emptied first: the buffer of a view no
    /// longer needed, so a step allocates no list for them).
    pub fn observe_into(
        m: &Manager,
        index: &BTreeMap<String, usize>,
        prev: Option<&View>,
        mut spare: Vec<ServerStatus>,
    ) -> View {
        let gen = m.view_generation();
        let tools = match prev {
            // The manager says its view cannot have changed: keep the list without reading
            // it (debug builds, the tests among them, check that promise every step).
            Some(p) if p.tools_gen == gen => {
                debug_assert!(
                    Self::same_tools(&p.tools, &m.tool_refs()),
                    "the tool view changed but view_generation() did not"
                );
                Arc::clone(&p.tools)
            }
            _ => {
                let refs = m.tool_refs();
                match prev {
                    Some(p) if Self::same_tools(&p.tools, &refs) => Arc::clone(&p.tools),
                    _ => Arc::new(
                        refs.iter()
                            .map(|t| ViewTool {
                                qualified: t.qualified_name.to_string(),
                                server: t.server.to_string(),
                                raw: t.def.name.clone(),
                                deferred: t.deferred,
                            })
                            .collect(),
                    ),
                }
            }
        };
        let phase_gen = m.phase_generation();
        let status = match prev {
            // No phase replaced and no server started or forgotten: the statuses are those
            // read before (debug builds read them again and compare).
            Some(p) if p.phase_gen == phase_gen => {
                debug_assert_eq!(
                    p.status,
                    Self::statuses(m, index, Vec::new()),
                    "a status changed but phase_generation() did not"
                );
                spare.clear();
                spare.extend_from_slice(&p.status);
                spare
            }
            _ => Self::statuses(m, index, spare),
        };
        let (conns, calls, rounds) = m.open_ids();
        let view = View {
            status,
            tools,
            tools_gen: gen,
            phase_gen,
            calls: Self::shared(prev.map(|p| &p.calls), calls),
            conns: Self::shared(prev.map(|p| &p.conns), conns),
            rounds: Self::shared(prev.map(|p| &p.rounds), rounds),
        };
        debug_assert_eq!(*view.calls, m.calls_in_flight());
        debug_assert_eq!(*view.conns, m.open_conns());
        debug_assert_eq!(*view.rounds, m.open_rounds());
        view
    }

    /// The ids `now` lists: the previous step's list when it holds the same ids in the same
    /// order, collected otherwise.
    fn shared<T: Copy + PartialEq>(
        prev: Option<&Arc<Vec<T>>>,
        now: impl ExactSizeIterator<Item = T> + Clone,
    ) -> Arc<Vec<T>> {
        match prev {
            Some(p) if p.len() == now.len() && p.iter().copied().eq(now.clone()) => Arc::clone(p),
            _ => Arc::new(now.collect()),
        }
    }

    /// `status()` of every scenario server, by index (written into `status`, emptied first).
    fn statuses(
        m: &Manager,
        index: &BTreeMap<String, usize>,
        mut status: Vec<ServerStatus>,
    ) -> Vec<ServerStatus> {
        // Both sides are in name order: a merge, one comparison per server, where a lookup
        // per name would compare names down the manager's map each time. A name the manager
        // does not know is `Disconnected`, as `status()` says.
        status.clear();
        status.resize(index.len(), ServerStatus::Disconnected);
        let mut known = m.statuses().peekable();
        for (name, &i) in index {
            while known.next_if(|(k, _)| *k < name.as_str()).is_some() {}
            if let Some((_, st)) = known.next_if(|(k, _)| *k == name.as_str()) {
                status[i] = st;
            }
            debug_assert_eq!(
                status[i],
                m.status(name),
                "statuses() disagrees with status()"
            );
        }
        status
    }

    /// Whether an observed tool list equals the manager's view field by field.
    fn same_tools(tools: &[ViewTool], refs: &[ToolRef<'_>]) -> bool {
        tools.len() == refs.len()
            && tools.iter().zip(refs).all(|(a, b)| {
                a.qualified == b.qualified_name
                    && a.server == b.server
                    && a.raw == b.def.name
                    && a.deferred == b.deferred
            })
    }

    /// Whether one server has the same (server, raw tool) pairs, in the same order, in both
    /// views. Most steps keep the very tool list of the step before, which answers at once;
    /// otherwise the two slices are compared in place, without collecting them.
    #[inline]
    pub fn same_slice(&self, other: &View, server: &str) -> bool {
        Arc::ptr_eq(&self.tools, &other.tools) || self.same_slice_in_place(other, server)
    }

    /// `same_slice` for two different lists: the slices compared in place.
    #[inline(never)]
    fn same_slice_in_place(&self, other: &View, server: &str) -> bool {
        let mut a = self.tools.iter().filter(|t| t.server == server);
        let mut b = other.tools.iter().filter(|t| t.server == server);
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(x), Some(y)) if x.raw == y.raw => {}
                _ => return false,
            }
        }
    }
}

/// A transport's report that a server refused a request's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The attempt.
    pub conn: ConnId,
    /// A person must log in (otherwise the credentials were rejected).
    pub login: bool,
    /// The refused request was the attempt's handshake (`initialize` or `server/discover`).
    pub handshake: bool,
    /// The refused frame was a request (the report names its id), not a notification.
    pub request: bool,
}

/// What kind of step this was, and which server it concerned.
#[derive(Debug, Clone, Default)]
pub struct StepInfo {
    pub timer: bool,
    /// The one server an event concerned (transport event, cache answer, disconnect, refresh).
    pub scope: Option<usize>,
    /// A transport event for a connection the manager no longer has (or never had).
    pub stale: bool,
    /// A stale `Opened` of an attempt the manager issued: it must be answered with exactly
    /// one `CloseTransport` of that attempt (the shell holds a live transport nobody tracks).
    pub stale_opened: Option<ConnId>,
    /// A frame of a live attempt refused for its credentials.
    pub refused: Option<Refusal>,
    /// The attempts of every `CloseTransport` in this step, in order.
    pub closes: Vec<ConnId>,
    /// For a stale event: the manager's `stale_events` and `stale_opened_closed` counters
    /// before it, and whether it was an `Opened`.
    pub stale_counters_before: Option<(u64, u64, bool)>,
    /// A frame the codec must reject (not JSON, or over the size limit) reached a live
    /// connection: the manager's `bad_frames` counter before it.
    pub rejected_frame_before: Option<u64>,
    pub disconnect: Option<usize>,
    pub disconnect_all: bool,
    pub outputs: usize,
    pub reports: Vec<StartupReport>,
    /// Every server's status at the moment each report was emitted (the status before the
    /// step, updated by the `StatusChanged` events that preceded the report).
    pub report_status: Vec<Vec<ServerStatus>>,
    /// Status as of the latest output drained (see `report_status`).
    pub running_status: Vec<ServerStatus>,
    pub completed: Vec<(CallId, CallOutcome)>,
    /// Violations spotted while draining outputs (or by the simulated server reading the
    /// client's frames), reported by the invariant they break after the drain.
    pub output_violations: Vec<(Invariant, String)>,
    /// The last `StatusChanged` of each server in this step.
    pub status_events: BTreeMap<String, ServerStatus>,
    /// Servers named by a `ToolsChanged` in this step.
    pub tools_changed: BTreeSet<String>,
    /// An embedder `Connect`, `Reload` or `Sync`: servers it opens are started explicitly.
    pub explicit_start: bool,
    /// Any embedder lifecycle request (those above, `Disconnect`, `DisconnectAll`).
    pub lifecycle: bool,
    /// Servers explicitly stopped by this request (before any restart in the same request).
    pub removed: Vec<usize>,
    /// Servers a `Sync` lists with the config they run now, and that are running
    /// (connected, connecting or waiting to reconnect): the Sync must leave them alone.
    pub sync_unchanged: Vec<usize>,
    /// Servers a `Sync` lists with the config they have, but that are stopped (failed, their
    /// breaker tripped, lost with reconnects off): the Sync must start them.
    pub sync_stopped: Vec<usize>,
    /// Known servers a `Sync` lists with a changed config: the Sync must restart them.
    pub sync_changed: Vec<usize>,
    /// Servers with an `OpenTransport` / a `CloseTransport` in this step.
    pub opened: BTreeSet<usize>,
    pub closed: BTreeSet<usize>,
}

impl StepInfo {
    /// Make this the record of a new step: every field as `StepInfo::default()` has it, but
    /// `timer` and `running_status` (the statuses before the step). The lists keep their
    /// allocations from the step before. Every field is named here, so a new one cannot be
    /// missed; builds with debug assertions compare the result with a default record.
    pub fn begin(&mut self, timer: bool, status: &[ServerStatus]) {
        let StepInfo {
            timer: is_timer,
            scope,
            stale,
            stale_opened,
            refused,
            closes,
            stale_counters_before,
            rejected_frame_before,
            disconnect,
            disconnect_all,
            outputs,
            reports,
            report_status,
            running_status,
            completed,
            output_violations,
            status_events,
            tools_changed,
            explicit_start,
            lifecycle,
            removed,
            sync_unchanged,
            sync_stopped,
            sync_changed,
            opened,
            closed,
        } = self;
        *is_timer = timer;
        *scope = None;
        *stale = false;
        *stale_opened = None;
        *refused = None;
        closes.clear();
        *stale_counters_before = None;
        *rejected_frame_before = None;
        *disconnect = None;
        *disconnect_all = false;
        *outputs = 0;
        reports.clear();
        report_status.clear();
        running_status.clear();
        running_status.extend_from_slice(status);
        completed.clear();
        output_violations.clear();
        status_events.clear();
        tools_changed.clear();
        *explicit_start = false;
        *lifecycle = false;
        removed.clear();
        sync_unchanged.clear();
        sync_stopped.clear();
        sync_changed.clear();
        opened.clear();
        closed.clear();
        debug_assert_eq!(
            format!("{self:?}"),
            format!(
                "{:?}",
                StepInfo {
                    timer,
                    running_status: status.to_vec(),
                    ..StepInfo::default()
                }
            ),
            "a step record begun in place differs from a new one"
        );
    }
}

/// What the simulator tracks of one server's reconnect policy.
#[derive(Debug, Clone, Default)]
pub struct PolicyObs {
    /// Explicitly disconnected and not explicitly started since.
    pub explicit_off: bool,
    /// Unexpected closes of its established connections (pruned to the burst window).
    pub closes: VecDeque<Instant>,
    /// The breaker tripped and no explicit start came since.
    pub tripped: bool,
    /// The reconnect scheduled: (when the close happened, attempt number, when it starts).
    pub backoff: Option<(Instant, u32, Instant)>,
    /// The attempt number of the latest scheduled reconnect (0 after a success).
    pub retry_n: u32,
}

/// A startup round as the simulator saw it begin.
#[derive(Debug, Clone)]
pub struct RoundObs {
    pub id: u64,
    pub started: Instant,
    pub gate_at: Instant,
    /// Members by server index, with the attempt the round started.
    pub members: BTreeMap<usize, ConnId>,
    /// Servers of the request whose config is invalid (they must be in `errors`).
    pub invalid: Vec<usize>,
    pub reported: bool,
}

/// Per-attempt facts the simulator observed.
#[derive(Debug, Clone, Default)]
pub struct ConnObs {
    pub server: usize,
    /// `StatusChanged Connected` was seen while this was the server's attempt.
    pub ready: bool,
    /// This attempt's failure was reported (in a round's `errors` or as a late diagnostic).
    pub failure_reports: u32,
    /// The cache lookup issued with this attempt, and whether it answered with tools.
    pub cache_hit: Option<bool>,
    pub load_cache: bool,
    /// Its end (`Closed`/`Failed`) was reported to the manager.
    pub ended: bool,
}

/// The simulator's bookkeeping the invariants read.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    pub names: Vec<String>,
    pub index: BTreeMap<String, usize>,
    pub conns: BTreeMap<ConnId, ConnObs>,
    pub latest_conn: Vec<Option<ConnId>>,
    /// Attempts the manager has open: opened, not closed by it, not reported gone.
    pub mirror: BTreeSet<ConnId>,
    pub rounds: BTreeMap<u64, RoundObs>,
    pub max_round: u64,
    pub calls: BTreeMap<CallId, CallObs>,
    /// Results sent that break their tool's output schema, per (server, tool), not yet
    /// answered by an output-schema error.
    pub bad_outputs: BTreeMap<(String, String), u64>,
    /// Servers that must show no tools until their next attempt starts (disconnected, or
    /// their late failure was reported).
    pub withdrawn: Vec<bool>,
    /// Views whose (qualified, server, raw) triples were checked against a fresh `NameTable`
    /// (the names are a function of the pairs, so a view seen again needs no rebuild); the
    /// most recent last, at most `NAMES_VERIFIED_KEPT`.
    pub names_verified: Vec<Arc<Vec<ViewTool>>>,
    /// Deadline extensions the progress of calls' own servers allows (the call-timeout
    /// invariant compares the manager's count with it).
    pub progress_extensions: u64,
    /// Per server: when it was last pinged by the manager (or became connected), while connected.
    pub pinged: Vec<Option<Instant>>,
    /// The qualified-name invariant's reference table (updated while the check reads the rest
    /// immutably).
    pub shadow: RefCell<ShadowNames>,
    /// Per server, by index.
    pub policy: Vec<PolicyObs>,
    /// Per server: the reconnect attempt the manager announced (`ReconnectScheduled`) and
    /// when it is due, until `ReconnectStarted`.
    pub announced: BTreeMap<String, (u32, Instant)>,
    /// When each task (attempt, task id) was last polled with `tasks/get`.
    pub task_polls: BTreeMap<(ConnId, String), Instant>,
    /// Tasks whose `tasks/result` was asked for.
    pub task_results_asked: BTreeSet<(ConnId, String)>,
    /// Operations (reads, prompt gets, completions, subscriptions) made and not completed.
    pub ops: BTreeMap<switchboard_core::manager::CallId, ()>,
    /// Per server, by index: what its settled catalog last passed the catalog invariant with
    /// (the manager's `catalog_generation()`, the attempt, the attempt's lists generation).
    /// Updated by the check itself while it reads the rest immutably.
    pub catalog_checked: RefCell<Vec<Option<CatalogChecked>>>,
    /// Per server, by index: the tool set (address and length of the scenario's list) and
    /// the very view its settled tools last matched, for the list-changed invariant.
    pub tools_checked: RefCell<Vec<Option<ToolsChecked>>>,
    /// The view list, statuses and withdrawn marks the exposed-tools invariant last passed.
    pub exposed_checked: RefCell<Option<ExposedChecked>>,
    /// The manager's `phase_generation()` when the registry invariant last compared the
    /// registries with the statuses and passed.
    pub registries_checked: Cell<Option<u64>>,
}

/// A view list with the statuses and withdrawn marks it was checked under.
pub type ExposedChecked = (Arc<Vec<ViewTool>>, Vec<ServerStatus>, Vec<bool>);

/// A settled tool set (where the scenario keeps it, its length) and the view it matched.
pub type ToolsChecked = (usize, usize, Arc<Vec<ViewTool>>);

/// The inputs a settled catalog passed the catalog invariant with: while all three are the
/// same, the comparison reads the same values and passes again.
pub type CatalogChecked = (u64, ConnId, u64);

/// Every how many changes of the view's pairs the qualified-name invariant rebuilds its
/// reference table from scratch (in between, it feeds its own table only the servers whose
/// slice changed).
pub const SHADOW_REBUILD_EVERY: u64 = 8;

/// The qualified-name invariant's reference naming table and the slices it was last fed.
#[derive(Debug, Clone, Default)]
pub struct ShadowNames {
    pub table: NameTable,
    pub slices: BTreeMap<String, Vec<String>>,
    pub changes: u64,
}

/// What the simulator remembers about a call it issued.
#[derive(Debug, Clone)]
pub struct CallObs {
    pub server: Option<usize>,
    pub deferred: bool,
    pub withdrawn_target: bool,
    /// It asked for progress (`CallTool.progress`), so progress may name it.
    pub progress: bool,
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

/// The MCP log levels the simulated servers use, with the level each must surface at.
pub const SIM_LOG_LEVELS: [(&str, Level); 6] = [
    ("warning", Level::Warn),
    ("debug", Level::Debug),
    ("info", Level::Info),
    ("notice", Level::Info),
    ("error", Level::Error),
    ("critical", Level::Error),
];

/// The level a simulated server's log message (its MCP level and text) must surface at.
pub fn sim_log_level(severity: &str, text: &str) -> Option<Level> {
    if text == "disk almost full" {
        return (severity == "warning").then_some(Level::Warn);
    }
    let name = text.strip_prefix("sim log at ")?;
    SIM_LOG_LEVELS
        .iter()
        .find(|(n, _)| *n == name && *n == severity)
        .map(|(_, l)| *l)
}
