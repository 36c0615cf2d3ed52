//! The safety invariants, checked after every step of a run, and the observations they read.
//!
//! The simulator does not re-decide what the manager should have done: it observes the
//! manager's outputs and public getters and checks the promises DESIGN.md and the seed make.
//! Each invariant is one function; a violation names it.

use crate::world::CallObs;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{
    CallId, CallOutcome, ConnId, Manager, ReconnectPolicy, ServerStatus, StartupReport,
};
use switchboard_core::names::{NameTable, MAX_NAME_LEN};
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
    pub calls: Vec<CallId>,
    pub conns: Vec<ConnId>,
    pub rounds: Vec<u64>,
}

impl View {
    /// What the getters show now; `prev` is the view of the step before (its tool list is
    /// reused when the manager's `tool_refs()` still equal it field by field).
    pub fn observe(m: &Manager, names: &[String], prev: Option<&View>) -> View {
        let refs = m.tool_refs();
        let same = |p: &View| {
            p.tools.len() == refs.len()
                && p.tools.iter().zip(&refs).all(|(a, b)| {
                    a.qualified == b.qualified_name
                        && a.server == b.server
                        && a.raw == b.def.name
                        && a.deferred == b.deferred
                })
        };
        let tools = match prev {
            Some(p) if same(p) => Arc::clone(&p.tools),
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
        };
        View {
            status: names.iter().map(|n| m.status(n)).collect(),
            tools,
            calls: m.calls_in_flight(),
            conns: m.open_conns(),
            rounds: m.open_rounds(),
        }
    }

    /// The (server, raw tool) pairs one server has in the view.
    pub fn pairs_of(&self, server: &str) -> Vec<(&str, &str)> {
        self.tools
            .iter()
            .filter(|t| t.server == server)
            .map(|t| (t.server.as_str(), t.raw.as_str()))
            .collect()
    }
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
    /// Violations spotted while draining outputs: (invariant, detail).
    pub output_violations: Vec<(&'static str, String)>,
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
    /// Servers that must show no tools until their next attempt starts (disconnected, or
    /// their late failure was reported).
    pub withdrawn: Vec<bool>,
    /// Views whose (qualified, server, raw) triples were checked against a fresh `NameTable`
    /// (the names are a function of the pairs, so a view seen again needs no rebuild); the
    /// most recent last, at most `NAMES_VERIFIED_KEPT`.
    pub names_verified: Vec<Arc<Vec<ViewTool>>>,
    /// Deadline extensions the progress of calls' own servers allows (invariant 17).
    pub progress_extensions: u64,
    /// Per server: when it was last pinged by the manager (or became connected), while connected.
    pub pinged: Vec<Option<Instant>>,
    /// Invariant 3's reference table (updated while the check reads the rest immutably).
    pub shadow: RefCell<ShadowNames>,
    /// Per server, by index.
    pub policy: Vec<PolicyObs>,
}

pub struct Ctx<'a> {
    pub m: &'a Manager,
    pub obs: &'a Observer,
    pub before: &'a View,
    pub after: &'a View,
    pub step: &'a StepInfo,
    pub now: Instant,
    pub gate: Duration,
    pub uncached_wait: Option<Duration>,
    pub double_underscore: bool,
    /// Servers whose tool listing settled, with the tools they offer now (`None`: their set
    /// changed and was announced since the last complete listing, and no re-list is under way).
    pub settled: &'a [(usize, Option<Vec<String>>)],
    pub reset_on_progress: bool,
    /// The scenario switched automatic reconnects off (`ReconnectPolicy::never()`).
    pub reconnect_off: bool,
    /// Health pings: (interval, timeout), when on.
    pub health: Option<(Duration, Duration)>,
    pub max_call_time: Duration,
}

pub type Check = fn(&Ctx) -> Result<(), String>;

/// Every safety invariant, in order, with its name.
pub const SAFETY: &[(&str, Check)] = &[
    (
        "1 status agrees with registries",
        status_agrees_with_registries,
    ),
    (
        "2 exposed tools belong to live servers",
        exposed_tools_belong_to_live_servers,
    ),
    (
        "3 qualified names are valid, unique and sorted",
        qualified_names_are_valid,
    ),
    (
        "4 startup complete once per round and on time",
        startup_complete_once_and_on_time,
    ),
    ("5 stale events change nothing", stale_events_change_nothing),
    (
        "6 every open is closed exactly once",
        every_open_is_closed_exactly_once,
    ),
    ("7 one server's failure is isolated", failures_are_isolated),
    (
        "8 calls complete exactly once and correctly",
        calls_complete_once_and_correctly,
    ),
    ("9 late failures are logged once", late_failures_logged_once),
    (
        "10 disconnect withdraws exactly that server's tools",
        disconnect_withdraws_by_identity,
    ),
    (
        "11 the client speaks valid JSON-RPC",
        client_speaks_valid_json_rpc,
    ),
    (
        "12 no reconnect after an explicit disconnect",
        no_reconnect_after_explicit_disconnect,
    ),
    (
        "13 backoff delays follow the ladder",
        backoff_follows_the_ladder,
    ),
    (
        "14 the breaker trips exactly past the burst limit",
        breaker_trips_exactly_past_the_limit,
    ),
    (
        "15 sync leaves unchanged servers alone",
        sync_keeps_unchanged_servers,
    ),
    (
        "16 settled list_changed shows the current tools",
        list_changed_settles_to_current_tools,
    ),
    (
        "17 call timeouts honour their deadlines",
        call_timeouts_honour_deadlines,
    ),
    (
        "18 server_state agrees with status and the registries",
        server_state_is_coherent,
    ),
    (
        "19 peer input is accounted for (rejected frames counted, log levels kept)",
        rejected_frames_are_counted,
    ),
    (
        "20 health pings keep coming while a server is connected",
        health_pings_keep_coming,
    ),
];

/// With health checks on, a connected server hears a `ping` at least every interval plus
/// timeout (a ping goes out an interval after the last answer, or at once after a miss).
pub fn health_pings_keep_coming(ctx: &Ctx) -> Result<(), String> {
    let Some((interval, timeout)) = ctx.health else {
        return Ok(());
    };
    for (i, at) in ctx.obs.pinged.iter().enumerate() {
        if let Some(at) = at {
            let silent = ctx.now.saturating_duration_since(*at);
            if ctx.after.status[i] == ServerStatus::Connected && silent > interval + timeout {
                return Err(format!(
                    "{} is connected but was not pinged for {silent:?} (interval {interval:?}, timeout {timeout:?})",
                    ctx.obs.names[i]
                ));
            }
        }
    }
    Ok(())
}

/// A frame the codec rejects (not JSON, or over the size limit) on a live connection is
/// counted exactly once in `bad_frames`; a server's log message surfaces as a diagnostic at
/// its level (debug; info and notice; warning; error and above).
pub fn rejected_frames_are_counted(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "19")?;
    let Some(before) = ctx.step.rejected_frame_before else {
        return Ok(());
    };
    let now = ctx.m.counters().bad_frames;
    if now != before + 1 {
        return Err(format!(
            "a rejected frame moved bad_frames {before} -> {now} (expected one more)"
        ));
    }
    Ok(())
}

fn output_violation(ctx: &Ctx, name: &str) -> Result<(), String> {
    match ctx.step.output_violations.iter().find(|(n, _)| *n == name) {
        Some((_, d)) => Err(d.clone()),
        None => Ok(()),
    }
}

/// `status()` is Connected iff in `connections()`, Connecting iff pending, else Disconnected,
/// and no server is in two exclusive registries.
pub fn status_agrees_with_registries(ctx: &Ctx) -> Result<(), String> {
    let c = ctx.m.connections();
    let pc = ctx.m.pending_connections();
    let pt = ctx.m.pending_tool_loads();
    for n in c.iter().chain(&pc).chain(&pt) {
        if !ctx.obs.index.contains_key(*n) {
            return Err(format!("registry holds unknown server {n:?}"));
        }
    }
    for (i, name) in ctx.obs.names.iter().enumerate() {
        let n = name.as_str();
        let (a, b, d) = (c.contains(&n), pc.contains(&n), pt.contains(&n));
        if u8::from(a) + u8::from(b) + u8::from(d) > 1 {
            return Err(format!("{n} is in two registries (connections={a}, pending connections={b}, pending tool loads={d})"));
        }
        let derived = if a {
            ServerStatus::Connected
        } else if b || d {
            ServerStatus::Connecting
        } else {
            ServerStatus::Disconnected
        };
        if ctx.after.status[i] != derived {
            return Err(format!(
                "status({n}) = {:?} but the registries say {derived:?}",
                ctx.after.status[i]
            ));
        }
        match ctx.step.status_events.get(n) {
            Some(e) if *e != ctx.after.status[i] => {
                return Err(format!(
                    "the last StatusChanged for {n} says {e:?} but status() is {:?}",
                    ctx.after.status[i]
                ))
            }
            None if ctx.before.status[i] != ctx.after.status[i] => {
                return Err(format!(
                    "{n} went {:?} -> {:?} without a StatusChanged",
                    ctx.before.status[i], ctx.after.status[i]
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every exposed tool belongs to a connected server or a pending one with deferred tools, and
/// never to one that was disconnected or whose late failure was reported; a change of a
/// server's slice is announced (`ToolsChanged` or `StartupComplete`) unless its round is open.
pub fn exposed_tools_belong_to_live_servers(ctx: &Ctx) -> Result<(), String> {
    if !Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools)
        && ctx.before.tools != ctx.after.tools
        && ctx.step.reports.is_empty()
    {
        for (i, name) in ctx.obs.names.iter().enumerate() {
            if ctx.step.tools_changed.contains(name)
                || ctx.before.pairs_of(name) == ctx.after.pairs_of(name)
            {
                continue;
            }
            let in_open_round = ctx.obs.rounds.values().any(|r| {
                !r.reported
                    && r.members
                        .get(&i)
                        .is_some_and(|c| ctx.obs.latest_conn[i] == Some(*c))
            });
            if !in_open_round {
                return Err(format!("{name}'s tools changed without a ToolsChanged"));
            }
        }
    }
    if ctx.m.tool_count() != ctx.after.tools.len() {
        return Err(format!(
            "tool_count() = {} but the view has {} tools",
            ctx.m.tool_count(),
            ctx.after.tools.len()
        ));
    }
    let unchanged =
        Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools) && ctx.before.status == ctx.after.status;
    let mut last: Option<&str> = None;
    for t in ctx.after.tools.iter() {
        if last == Some(t.server.as_str()) {
            continue;
        }
        let Some(&i) = ctx.obs.index.get(&t.server) else {
            return Err(format!(
                "tool {} belongs to unknown server {}",
                t.qualified, t.server
            ));
        };
        if ctx.obs.withdrawn[i] {
            return Err(format!(
                "tool {} of {} is exposed after the server was disconnected or its failure reported",
                t.qualified, t.server
            ));
        }
        match ctx.after.status[i] {
            ServerStatus::Connected => {
                if t.deferred {
                    return Err(format!(
                        "tool {} is deferred but {} is connected",
                        t.qualified, t.server
                    ));
                }
            }
            ServerStatus::Connecting => {
                if !t.deferred {
                    return Err(format!(
                        "tool {} is live but {} is still connecting",
                        t.qualified, t.server
                    ));
                }
            }
            ServerStatus::Disconnected => {
                return Err(format!(
                    "tool {} is exposed but {} is disconnected",
                    t.qualified, t.server
                ))
            }
        }
        // The rich state agrees with the view (count and deferred flag); it is derived from the
        // same fields, so it is re-read only when the view or a status moved.
        if !unchanged {
            server_state_agrees(ctx, t)?;
        }
        last = Some(t.server.as_str());
    }
    Ok(())
}

/// `server_state()` of `t`'s server counts what the view shows and agrees on `deferred`.
fn server_state_agrees(ctx: &Ctx, t: &ViewTool) -> Result<(), String> {
    let n = ctx
        .after
        .tools
        .iter()
        .filter(|u| u.server == t.server)
        .count();
    match ctx.m.server_state(&t.server) {
        Some(st) if st.tool_count != n || st.deferred != t.deferred => Err(format!(
            "server_state({}) says {} tools, deferred={}, but the view has {n}, deferred={}",
            t.server, st.tool_count, st.deferred, t.deferred
        )),
        _ => Ok(()),
    }
}

/// How many verified views a run remembers.
pub const NAMES_VERIFIED_KEPT: usize = 32;

/// Whether the view's triples are none of those already checked against a fresh `NameTable`.
pub fn names_need_fresh_check(obs: &Observer, view: &View) -> bool {
    let same = |v: &Vec<ViewTool>| {
        v.len() == view.tools.len()
            && v.iter()
                .zip(view.tools.iter())
                .all(|(a, b)| a.qualified == b.qualified && a.server == b.server && a.raw == b.raw)
    };
    !obs.names_verified.iter().rev().any(|v| same(v))
}

/// Qualified names are unique, at most 64 characters of `[a-z0-9_]`, sorted, route back to
/// their pair, and equal what a fresh `NameTable` builds from the same pairs.
pub fn qualified_names_are_valid(ctx: &Ctx) -> Result<(), String> {
    if Arc::ptr_eq(&ctx.before.tools, &ctx.after.tools) {
        return Ok(()); // the very list the last step checked
    }
    let tools: &[ViewTool] = &ctx.after.tools;
    for w in tools.windows(2) {
        if w[0].qualified >= w[1].qualified {
            return Err(format!(
                "view not strictly sorted: {:?} then {:?}",
                w[0].qualified, w[1].qualified
            ));
        }
    }
    for t in tools {
        let q = &t.qualified;
        if q.is_empty()
            || q.len() > MAX_NAME_LEN
            || !q
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!("invalid qualified name {q:?}"));
        }
    }
    if !names_need_fresh_check(ctx.obs, ctx.after) {
        return Ok(());
    }
    for t in tools {
        if ctx.m.resolve_tool(&t.qualified) != Some((t.server.as_str(), t.raw.as_str())) {
            return Err(format!(
                "{} does not route to ({}, {})",
                t.qualified, t.server, t.raw
            ));
        }
    }
    // Independent of arrival order: a table built from scratch, servers in reverse order.
    let scheme = if ctx.double_underscore {
        switchboard_core::NamingScheme::DoubleUnderscore
    } else {
        switchboard_core::NamingScheme::Seed
    };
    let mut by_server: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in tools {
        by_server.entry(&t.server).or_default().push(&t.raw);
    }
    let mut shadow = ctx.obs.shadow.borrow_mut();
    shadow.changes += 1;
    let from_scratch =
        shadow.table.scheme() != scheme || shadow.changes % SHADOW_REBUILD_EVERY == 1;
    if from_scratch {
        let mut fresh = NameTable::new(scheme);
        for (server, raws) in by_server.iter().rev() {
            fresh.set_server_tools(server, raws.iter().rev().copied());
        }
        shadow.table = fresh;
        shadow.slices = by_server
            .iter()
            .map(|(s, r)| (s.to_string(), r.iter().map(|t| t.to_string()).collect()))
            .collect();
    } else {
        // Only the servers whose slice changed, in reverse order (the manager applies them as
        // they arrive): the table must still come out as the rule says for these pairs.
        let gone: Vec<String> = shadow
            .slices
            .keys()
            .filter(|k| !by_server.contains_key(k.as_str()))
            .cloned()
            .collect();
        for server in gone.iter().rev() {
            shadow.table.remove_server(server);
            shadow.slices.remove(server);
        }
        for (server, raws) in by_server.iter().rev() {
            if shadow
                .slices
                .get(*server)
                .is_some_and(|old| old.iter().eq(raws.iter()))
            {
                continue;
            }
            shadow
                .table
                .set_server_tools(server, raws.iter().rev().copied());
            shadow.slices.insert(
                server.to_string(),
                raws.iter().map(|t| t.to_string()).collect(),
            );
        }
    }
    let seen = tools
        .iter()
        .map(|t| (t.qualified.as_str(), t.server.as_str(), t.raw.as_str()));
    if !shadow.table.iter().eq(seen) {
        let rebuilt: Vec<(&str, &str, &str)> = shadow.table.iter().collect();
        let seen: Vec<(&str, &str, &str)> = tools
            .iter()
            .map(|t| (t.qualified.as_str(), t.server.as_str(), t.raw.as_str()))
            .collect();
        let how = if from_scratch {
            "a table built from scratch"
        } else {
            "a table fed the changes in another order"
        };
        return Err(format!(
            "names depend on arrival order: view {seen:?}, {how} {rebuilt:?}"
        ));
    }
    Ok(())
}

/// Every how many changes of the view's pairs invariant 3 rebuilds its reference table from
/// scratch (in between, it feeds its own table only the servers whose slice changed).
pub const SHADOW_REBUILD_EVERY: u64 = 8;

/// Invariant 3's reference naming table and the slices it was last fed.
#[derive(Debug, Clone, Default)]
pub struct ShadowNames {
    pub table: NameTable,
    pub slices: BTreeMap<String, Vec<String>>,
    pub changes: u64,
}

/// `StartupComplete` comes exactly once per round; when every still-pending member had a
/// cache hit it comes no later than the gate; it never omits a member that had settled.
pub fn startup_complete_once_and_on_time(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "4")?;
    for (k, r) in ctx.step.reports.iter().enumerate() {
        let at_report = ctx.step.report_status.get(k).unwrap_or(&ctx.after.status);
        let Some(round) = ctx.obs.rounds.get(&r.round) else {
            return Err(format!("StartupComplete for unknown round {}", r.round));
        };
        if r.elapsed != ctx.now - round.started {
            return Err(format!(
                "round {} reports elapsed {:?} but it began {:?} ago",
                r.round,
                r.elapsed,
                ctx.now - round.started
            ));
        }
        for (&i, &conn) in &round.members {
            let name = &ctx.obs.names[i];
            if ctx.obs.latest_conn[i] != Some(conn) || ctx.m.server_state(name).is_none() {
                continue; // restarted in a later round, or disconnected: settled elsewhere
            }
            let lists = [
                ("connected", r.connected.contains(name)),
                ("errors", r.errors.contains_key(name)),
                ("deferred", r.deferred.contains(name)),
                ("pending", r.pending.contains(name)),
            ];
            let hits: Vec<&str> = lists.iter().filter(|(_, b)| *b).map(|(n, _)| *n).collect();
            let want: &[&str] = match at_report[i] {
                ServerStatus::Connected => &["connected"],
                ServerStatus::Disconnected => &["errors"],
                // Waiting to reconnect after its attempt in this round failed: an error.
                ServerStatus::Connecting
                    if ctx
                        .m
                        .server_state(name)
                        .is_some_and(|s| s.phase == "backoff") =>
                {
                    &["errors"]
                }
                ServerStatus::Connecting => &["deferred", "pending"],
            };
            if hits.len() != 1 || !want.contains(&hits[0]) {
                return Err(format!(
                    "round {} report lists {name} under {hits:?}, but it is {:?}",
                    r.round, at_report[i]
                ));
            }
        }
        // No member vanishes from its report: disconnected ones say so, and one whose attempt
        // failed before another attempt replaced it is reported with that failure.
        for (&i, &conn) in &round.members {
            let name = &ctx.obs.names[i];
            let live = [
                r.connected.contains(name),
                r.deferred.contains(name),
                r.pending.contains(name),
            ];
            let listed = live.contains(&true)
                || r.errors.contains_key(name)
                || r.disconnected.contains(name);
            if !listed {
                return Err(format!(
                    "round {} report leaves out its member {name}",
                    r.round
                ));
            }
            let replaced =
                ctx.obs.latest_conn[i] != Some(conn) || ctx.m.server_state(name).is_none();
            if r.disconnected.contains(name) && (!replaced || live.contains(&true)) {
                return Err(format!(
                    "round {} report lists {name} as disconnected, but its attempt of the round is live",
                    r.round
                ));
            }
        }
        for name in &r.disconnected {
            if !ctx
                .obs
                .index
                .get(name)
                .is_some_and(|i| round.members.contains_key(i))
            {
                return Err(format!(
                    "round {} report lists {name} as disconnected, but it is not a member",
                    r.round
                ));
            }
        }
        for &i in &round.invalid {
            let name = &ctx.obs.names[i];
            if !r.errors.contains_key(name) {
                return Err(format!(
                    "round {} report omits the invalid config of {name}",
                    r.round
                ));
            }
        }
    }
    for round in ctx.obs.rounds.values().filter(|r| !r.reported) {
        if !ctx.after.rounds.contains(&round.id) {
            return Err(format!(
                "round {} closed without a StartupComplete",
                round.id
            ));
        }
        let pending: Vec<(usize, ConnId)> = round
            .members
            .iter()
            .filter(|(&i, &c)| {
                ctx.obs.latest_conn[i] == Some(c) && ctx.after.status[i] == ServerStatus::Connecting
            })
            .map(|(&i, &c)| (i, c))
            .collect();
        if pending.is_empty() {
            return Err(format!(
                "every member of round {} settled but no StartupComplete",
                round.id
            ));
        }
        if ctx.now >= round.gate_at
            && pending
                .iter()
                .all(|(_, c)| ctx.obs.conns.get(c).and_then(|o| o.cache_hit) == Some(true))
        {
            return Err(format!(
                "round {}: the gate passed and every pending member had a cache entry, but no StartupComplete",
                round.id
            ));
        }
        if let Some(w) = ctx.uncached_wait {
            if ctx.now >= round.gate_at + w {
                return Err(format!(
                    "round {}: the uncached wait ran out but no StartupComplete",
                    round.id
                ));
            }
        }
    }
    Ok(())
}

/// A transport event for an old `ConnId` changes no state and produces no output — except a
/// stale `Opened` of an attempt the manager issued, which is answered with exactly one
/// `CloseTransport` of that attempt and nothing else.
pub fn stale_events_change_nothing(ctx: &Ctx) -> Result<(), String> {
    if !ctx.step.stale {
        return Ok(());
    }
    match ctx.step.stale_opened {
        Some(conn) if ctx.step.outputs != 1 || ctx.step.closes != [conn] => {
            return Err(format!(
                "a stale Opened of #{} must be answered with exactly its CloseTransport, but it produced {} outputs (closes {:?})",
                conn.0, ctx.step.outputs, ctx.step.closes
            ));
        }
        Some(_) => {}
        None if ctx.step.outputs > 0 => {
            return Err(format!(
                "a stale event produced {} outputs",
                ctx.step.outputs
            ));
        }
        None => {}
    }
    if ctx.before != ctx.after {
        return Err("a stale event changed the manager's state".into());
    }
    // It is counted once, as what it is (an `Opened` of an abandoned attempt is also counted
    // apart: the close that answers it).
    if let Some((events, opened_closed, opened)) = ctx.step.stale_counters_before {
        let c = ctx.m.counters();
        if c.stale_events != events + 1
            || c.stale_opened_closed != opened_closed + u64::from(opened)
        {
            return Err(format!(
                "a stale {} moved the counters stale_events {events} -> {}, stale_opened_closed {opened_closed} -> {}",
                if opened { "Opened" } else { "event" },
                c.stale_events,
                c.stale_opened_closed
            ));
        }
    }
    Ok(())
}

/// Every `OpenTransport` is matched by exactly one close (ours or the process's own exit), no
/// command goes to a closed connection, and the manager tracks exactly the open attempts. The
/// one extra close allowed is the answer to a stale `Opened` (invariant 5): the shell may
/// have opened a transport after the manager abandoned its attempt or heard of its end.
pub fn every_open_is_closed_exactly_once(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "6")?;
    let mirror: Vec<ConnId> = ctx.obs.mirror.iter().copied().collect();
    if mirror != ctx.after.conns {
        return Err(format!(
            "the manager tracks attempts {:?} but the open, unclosed ones are {mirror:?} (an attempt was dropped without a close)",
            ctx.after.conns
        ));
    }
    Ok(())
}

/// An event about one server never changes another server's status, tools or calls.
pub fn failures_are_isolated(ctx: &Ctx) -> Result<(), String> {
    let Some(x) = ctx.step.scope else {
        return Ok(());
    };
    let deferred_now: BTreeSet<&str> = ctx
        .step
        .reports
        .iter()
        .flat_map(|r| r.deferred.iter().map(String::as_str))
        .collect();
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if i == x {
            continue;
        }
        if ctx.before.status[i] != ctx.after.status[i] {
            return Err(format!(
                "an event for {} changed {name}'s status {:?} -> {:?}",
                ctx.obs.names[x], ctx.before.status[i], ctx.after.status[i]
            ));
        }
        if !deferred_now.contains(name.as_str())
            && ctx.before.pairs_of(name) != ctx.after.pairs_of(name)
        {
            return Err(format!(
                "an event for {} changed {name}'s tools",
                ctx.obs.names[x]
            ));
        }
    }
    for (call, _) in &ctx.step.completed {
        if let Some(obs) = ctx.obs.calls.get(call) {
            if obs.server.is_some_and(|s| s != x) {
                return Err(format!(
                    "an event for {} completed call {} of another server",
                    ctx.obs.names[x], call.0
                ));
            }
        }
    }
    Ok(())
}

/// Every call completes exactly once; a deferred call is sent only after its server connected;
/// a call failed by its server's failure names that failure.
pub fn calls_complete_once_and_correctly(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "8")?;
    // "No longer offered" is said only of a tool its server's live list lacks.
    for (call, outcome) in &ctx.step.completed {
        let CallOutcome::Err(e) = outcome else {
            continue;
        };
        let Some(rest) = e.strip_prefix("MCP error: tool \"") else {
            continue;
        };
        let Some((tool, server)) = rest.split_once("\" is no longer offered by server \"") else {
            continue;
        };
        let server = server.split('"').next().unwrap_or_default();
        if ctx
            .after
            .tools
            .iter()
            .any(|t| t.server == server && t.raw == tool && !t.deferred)
        {
            return Err(format!(
                "call {} failed with {e:?}, but {server} offers {tool} live",
                call.0
            ));
        }
    }
    let done: BTreeSet<CallId> = ctx.step.completed.iter().map(|(c, _)| *c).collect();
    let ours: Vec<CallId> = ctx
        .obs
        .calls
        .keys()
        .copied()
        .filter(|c| !done.contains(c))
        .collect();
    if ours != ctx.after.calls {
        return Err(format!(
            "calls in flight {:?}, but issued and not completed: {ours:?}",
            ctx.after.calls
        ));
    }
    for (call, outcome) in &ctx.step.completed {
        let CallOutcome::Err(msg) = outcome else {
            continue;
        };
        let Some(i) = ctx.obs.calls.get(call).and_then(|o| o.server) else {
            continue;
        };
        if ctx.after.status[i] != ServerStatus::Disconnected
            || ctx.before.status[i] == ServerStatus::Disconnected
        {
            continue;
        }
        let name = &ctx.obs.names[i];
        if ctx.step.timer && msg.contains("timed out") {
            continue;
        }
        let ok = match ctx.m.server_state(name) {
            // The call names the failure; the server's last error may add to it (e.g. that
            // automatic reconnects stopped).
            Some(s) => s.last_error.as_ref().is_some_and(|e| {
                msg.strip_prefix("MCP error: ")
                    .is_some_and(|body| !body.is_empty() && e.starts_with(body))
            }),
            None => msg.contains(&format!("server \"{name}\" was disconnected")),
        };
        if !ok {
            return Err(format!(
                "call {} failed with {msg:?}, which does not name why {name} went down",
                call.0
            ));
        }
    }
    Ok(())
}

/// A late failure is logged once per attempt, and never for an error already reported.
pub fn late_failures_logged_once(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "9")
}

/// Disconnect removes exactly that server's tools (by identity), calls and registry entries.
pub fn disconnect_withdraws_by_identity(ctx: &Ctx) -> Result<(), String> {
    if let Some(x) = ctx.step.disconnect {
        let name = &ctx.obs.names[x];
        if ctx.after.tools.iter().any(|t| t.server == *name) {
            return Err(format!("{name} still has tools after Disconnect"));
        }
        if ctx.after.status[x] != ServerStatus::Disconnected {
            return Err(format!(
                "{name} is {:?} after Disconnect",
                ctx.after.status[x]
            ));
        }
        let done: BTreeSet<CallId> = ctx.step.completed.iter().map(|(c, _)| *c).collect();
        if ctx
            .obs
            .calls
            .iter()
            .any(|(id, c)| c.server == Some(x) && !done.contains(id))
        {
            return Err(format!("{name} still has calls in flight after Disconnect"));
        }
    }
    if ctx.step.disconnect_all
        && (!ctx.after.tools.is_empty()
            || !ctx.after.calls.is_empty()
            || !ctx.after.conns.is_empty()
            || ctx
                .after
                .status
                .iter()
                .any(|s| *s != ServerStatus::Disconnected))
    {
        return Err("DisconnectAll left tools, calls, attempts or a live status behind".into());
    }
    if ctx.step.disconnect_all {
        if let Some(t) = ctx.m.next_timer() {
            return Err(format!("DisconnectAll left a timer armed: {t:?}"));
        }
    }
    Ok(())
}

/// Every frame the manager sends is JSON, every server request gets a well-formed answer
/// (`ping` → `{}`, `roots/list` → roots, anything else → -32601), and no listing asks for
/// more pages than `max_tool_pages`.
pub fn client_speaks_valid_json_rpc(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "11")
}

// ----- policies (issue 7) ---------------------------------------------------------------------

/// How a call completed by its timeout is worded (the manager's `Call` timer).
pub const CALL_TIMEOUT_PREFIX: &str = "MCP error: tool call timed out after";

pub fn ladder_ok(policy: &ReconnectPolicy, delay: Duration, n: u32) -> Result<(), String> {
    let base = policy.base_delay(n).as_nanos() as f64;
    let (lo, hi) = (base * (1.0 - policy.jitter), base * (1.0 + policy.jitter));
    let d = delay.as_nanos() as f64;
    // One microsecond of slack for float rounding.
    if d + 1_000.0 < lo || d > hi + 1_000.0 {
        return Err(format!(
            "attempt {n}: delay {delay:?} is outside {:?} x [{:.1}, {:.1}]",
            policy.base_delay(n),
            1.0 - policy.jitter,
            1.0 + policy.jitter
        ));
    }
    Ok(())
}

fn recent_closes(o: &PolicyObs, now: Instant, window: Duration) -> usize {
    o.closes
        .iter()
        .filter(|t| now.saturating_duration_since(**t) <= window)
        .count()
}

/// No reconnect attempt (`OpenTransport`) follows an explicit disconnect of a server until it
/// is started explicitly again; with reconnects off, no attempt ever starts by itself.
pub fn no_reconnect_after_explicit_disconnect(ctx: &Ctx) -> Result<(), String> {
    if ctx.step.explicit_start {
        return Ok(());
    }
    if ctx.reconnect_off {
        if let Some(&i) = ctx.step.opened.first() {
            return Err(format!(
                "reconnects are off, yet an attempt of {} started by itself",
                ctx.obs.names[i]
            ));
        }
    }
    for &i in &ctx.step.opened {
        if ctx.obs.policy[i].explicit_off {
            return Err(format!(
                "{} was explicitly disconnected, yet an attempt started by itself",
                ctx.obs.names[i]
            ));
        }
    }
    Ok(())
}

/// A reconnect attempt n starts exactly when scheduled, base(n) x [0.8, 1.2] (capped) after the
/// close that scheduled it; the attempt number climbs 1, 2, 3... from a lost connection.
pub fn backoff_follows_the_ladder(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, "13")?;
    let policy = &ctx.m.options().reconnect;
    if !ctx.step.explicit_start {
        for &i in &ctx.step.opened {
            let name = &ctx.obs.names[i];
            let Some((closed, n, at)) = ctx.obs.policy[i].backoff else {
                return Err(format!(
                    "{name}: an attempt started by itself with no reconnect scheduled"
                ));
            };
            if ctx.now != at {
                return Err(format!(
                    "{name}: reconnect attempt {n} started at {}ns, scheduled for {}ns",
                    ctx.now.as_nanos(),
                    at.as_nanos()
                ));
            }
            ladder_ok(policy, ctx.now.saturating_duration_since(closed), n)
                .map_err(|e| format!("{name}: {e}"))?;
        }
    }
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if ctx.after.status[i] != ServerStatus::Connecting
            || !touched(ctx.step, ctx.before, ctx.after, i)
        {
            continue;
        }
        let Some(st) = ctx.m.server_state(name) else {
            continue;
        };
        if st.phase != "backoff" {
            continue;
        }
        let Some(at) = st.next_attempt_at else {
            return Err(format!(
                "{name} waits to reconnect but next_attempt_at is None"
            ));
        };
        let o = &ctx.obs.policy[i];
        if o.backoff.is_some_and(|b| b.2 == at) && !ctx.step.opened.contains(&i) {
            continue; // the same wait as before
        }
        let n = if ctx.before.status[i] == ServerStatus::Connected {
            1
        } else {
            o.retry_n + 1
        };
        if o.explicit_off || o.tripped {
            return Err(format!(
                "{name} scheduled a reconnect after an explicit disconnect or a tripped breaker"
            ));
        }
        if st.reconnect_attempt != n {
            return Err(format!(
                "{name}: reconnect attempt {} scheduled, but the ladder is at {n}",
                st.reconnect_attempt
            ));
        }
        ladder_ok(policy, at.saturating_duration_since(ctx.now), n)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// More than `burst_limit` unexpected closes within `burst_window` trip the breaker — exactly
/// then: the server is Disconnected, its tools withdrawn, its error says so; no attempt starts
/// until an explicit start. Fewer closes schedule a reconnect.
pub fn breaker_trips_exactly_past_the_limit(ctx: &Ctx) -> Result<(), String> {
    let policy = &ctx.m.options().reconnect;
    if !ctx.step.explicit_start {
        for &i in &ctx.step.opened {
            if ctx.obs.policy[i].tripped {
                return Err(format!(
                    "{}: an attempt started after the breaker tripped",
                    ctx.obs.names[i]
                ));
            }
        }
    }
    if ctx.step.lifecycle || !policy.enabled {
        return Ok(());
    }
    // Nothing but the breaker (or an explicit request) ends the ladder: a failed reconnect
    // attempt, or with startup retries any failed attempt, waits for the next one.
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if ctx.before.status[i] == ServerStatus::Connecting
            && ctx.after.status[i] == ServerStatus::Disconnected
            && (ctx.obs.policy[i].retry_n > 0 || policy.retry_startup_failures)
        {
            return Err(format!(
                "{name} gave up retrying (reconnect attempt {}, startup retries {}) without its breaker or an explicit request",
                ctx.obs.policy[i].retry_n, policy.retry_startup_failures
            ));
        }
    }
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if ctx.before.status[i] != ServerStatus::Connected
            || ctx.after.status[i] == ServerStatus::Connected
        {
            continue;
        }
        let count = recent_closes(&ctx.obs.policy[i], ctx.now, policy.burst_window) + 1;
        let st = ctx.m.server_state(name);
        if count > policy.burst_limit {
            let said = st
                .as_ref()
                .and_then(|s| s.last_error.as_deref())
                .is_some_and(|e| e.contains("automatic reconnects stopped"));
            if ctx.after.status[i] != ServerStatus::Disconnected
                || !said
                || ctx.after.tools.iter().any(|t| t.server == *name)
            {
                return Err(format!(
                    "{name}: unexpected close {count} within {:?} must trip the breaker, but it is {:?} (error {:?})",
                    policy.burst_window,
                    ctx.after.status[i],
                    st.and_then(|s| s.last_error)
                ));
            }
        } else if st.as_ref().map(|s| s.phase) != Some("backoff") {
            return Err(format!(
                "{name}: unexpected close {count} within {:?} must schedule a reconnect, but the phase is {:?}",
                policy.burst_window,
                st.map(|s| s.phase)
            ));
        }
    }
    Ok(())
}

/// A `Sync` never closes the transport of, restarts or changes a running server whose config
/// it lists unchanged; it starts a stopped one it lists unchanged, and restarts one whose
/// config changed (servers with an invalid config are left out: they cannot start).
pub fn sync_keeps_unchanged_servers(ctx: &Ctx) -> Result<(), String> {
    for &i in ctx.step.sync_stopped.iter().chain(&ctx.step.sync_changed) {
        let name = &ctx.obs.names[i];
        if !ctx.step.opened.contains(&i) {
            return Err(format!(
                "Sync listed {name} ({}) but did not start it",
                if ctx.step.sync_stopped.contains(&i) {
                    "stopped, config unchanged"
                } else {
                    "config changed"
                }
            ));
        }
    }
    for &i in &ctx.step.sync_unchanged {
        let name = &ctx.obs.names[i];
        if ctx.step.closed.contains(&i) || ctx.step.opened.contains(&i) {
            return Err(format!(
                "Sync restarted {name}, whose config did not change"
            ));
        }
        // A round that completes in this step may expose its deferred tools (its other
        // members were removed or restarted): that is the round's report, not the Sync.
        let reported_deferred = ctx.step.reports.iter().any(|r| r.deferred.contains(name));
        if ctx.before.status[i] != ctx.after.status[i]
            || (!reported_deferred && ctx.before.pairs_of(name) != ctx.after.pairs_of(name))
        {
            return Err(format!(
                "Sync changed {name} ({:?} -> {:?}), whose config did not change",
                ctx.before.status[i], ctx.after.status[i]
            ));
        }
    }
    Ok(())
}

/// Once `list_changed` settles (connected, nothing listed or announced in flight), the view
/// holds exactly the server's current tools.
pub fn list_changed_settles_to_current_tools(ctx: &Ctx) -> Result<(), String> {
    for (i, want) in ctx.settled {
        let name = &ctx.obs.names[*i];
        let Some(want) = want else {
            return Err(format!(
                "{name} announced a new tool set (list_changed) and it was never listed again"
            ));
        };
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort_unstable();
        want.dedup();
        let mut got: Vec<&str> = ctx
            .after
            .tools
            .iter()
            .filter(|t| t.server == *name)
            .map(|t| t.raw.as_str())
            .collect();
        got.sort_unstable();
        if got != want {
            return Err(format!(
                "{name} settled with tools {got:?} in the view, but it offers {want:?}"
            ));
        }
    }
    Ok(())
}

/// A call completed by its timeout completes exactly at its (possibly progress-extended)
/// deadline — never before it, never after `max_call_time` — and no call outlives it.
pub fn call_timeouts_honour_deadlines(ctx: &Ctx) -> Result<(), String> {
    // Only the progress of a call's own server, while it is sent, moves its deadline out.
    let resets = ctx.m.counters().progress_resets;
    if resets != ctx.obs.progress_extensions {
        return Err(format!(
            "the manager moved call deadlines {resets} times, the progress the calls' own servers sent allows {}",
            ctx.obs.progress_extensions
        ));
    }
    for (call, outcome) in &ctx.step.completed {
        let CallOutcome::Err(msg) = outcome else {
            continue;
        };
        if !msg.starts_with(CALL_TIMEOUT_PREFIX) {
            continue;
        }
        let Some(t) = ctx.obs.calls.get(call).and_then(|c| c.timing) else {
            continue;
        };
        if !ctx.step.timer || ctx.now != t.deadline {
            return Err(format!(
                "call {} timed out at {}ns, its deadline is {}ns",
                call.0,
                ctx.now.as_nanos(),
                t.deadline.as_nanos()
            ));
        }
        let ceiling = t.started
            + t.timeout.max(if ctx.reset_on_progress {
                ctx.max_call_time
            } else {
                t.timeout
            });
        if ctx.now > ceiling {
            return Err(format!(
                "call {} timed out {:?} after it started, past max_call_time",
                call.0,
                ctx.now.saturating_duration_since(t.started)
            ));
        }
    }
    for call in &ctx.after.calls {
        if let Some(t) = ctx.obs.calls.get(call).and_then(|c| c.timing) {
            if ctx.now > t.deadline {
                return Err(format!(
                    "call {} is still in flight past its deadline ({}ns > {}ns)",
                    call.0,
                    ctx.now.as_nanos(),
                    t.deadline.as_nanos()
                ));
            }
        }
    }
    Ok(())
}

/// What [`update_policy`] saw, for the coverage counters.
#[derive(Debug, Default)]
pub struct PolicyCounts {
    pub backoffs: u64,
    pub trips: u64,
    pub sync_restart_and_keep: u64,
    pub sync_restart_stopped: u64,
}

/// After a step passed every check: advance the per-server policy observations.
pub fn update_policy(
    obs: &mut Observer,
    step: &StepInfo,
    before: &View,
    after: &View,
    m: &Manager,
    now: Instant,
) -> PolicyCounts {
    let policy = &m.options().reconnect;
    let mut c = PolicyCounts::default();
    for &i in &step.removed {
        obs.policy[i] = PolicyObs {
            explicit_off: true,
            ..PolicyObs::default()
        };
    }
    for &i in &step.opened {
        if step.explicit_start {
            obs.policy[i] = PolicyObs::default();
        } else {
            obs.policy[i].backoff = None;
        }
    }
    if step.sync_changed.iter().any(|i| step.opened.contains(i))
        && step.sync_unchanged.iter().any(|&i| {
            before.status[i] == ServerStatus::Connected
                && after.status[i] == ServerStatus::Connected
        })
    {
        c.sync_restart_and_keep += 1;
    }
    if step.sync_stopped.iter().any(|i| step.opened.contains(i)) {
        c.sync_restart_stopped += 1;
    }
    for (i, name) in obs.names.iter().enumerate() {
        let o = &mut obs.policy[i];
        if !step.lifecycle
            && policy.enabled
            && before.status[i] == ServerStatus::Connected
            && after.status[i] != ServerStatus::Connected
        {
            o.closes.push_back(now);
            while o
                .closes
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) > policy.burst_window)
            {
                o.closes.pop_front();
            }
            if o.closes.len() > policy.burst_limit {
                o.tripped = true;
                o.closes.clear();
                o.retry_n = 0;
                o.backoff = None;
                c.trips += 1;
            }
        }
        match after.status[i] {
            ServerStatus::Connected => o.retry_n = 0,
            ServerStatus::Disconnected => o.backoff = None,
            ServerStatus::Connecting if touched(step, before, after, i) => {
                if let Some(st) = m.server_state(name) {
                    if st.phase == "backoff" {
                        if let Some(at) = st.next_attempt_at {
                            if o.backoff.is_none_or(|b| b.2 != at) {
                                o.backoff = Some((now, st.reconnect_attempt, at));
                                o.retry_n = st.reconnect_attempt;
                                c.backoffs += 1;
                            }
                        }
                    }
                }
            }
            ServerStatus::Connecting => {} // nothing happened to it: same wait as before
        }
    }
    c
}

/// Whether a step could have changed server `i`'s state: an embedder request (any server),
/// an event for it, a status change, or a transport the manager opened or closed for it
/// (timers act through those: a reconnect opens, a timeout closes).
pub fn touched(step: &StepInfo, before: &View, after: &View, i: usize) -> bool {
    step.lifecycle
        || step.disconnect_all
        || step.scope == Some(i)
        || before.status[i] != after.status[i]
        || step.opened.contains(&i)
        || step.closed.contains(&i)
}

/// `server_state()` tells the same story as `status()`: its phase names the status, it has a
/// connection exactly while an attempt is open (the latest one opened), a next attempt time
/// exactly while it waits to reconnect, and a time to ready for a connected server;
/// `servers()` and `sources()` list exactly the servers `server_state()` knows.
///
/// Checked for the servers a step touched (its scope, every server whose status changed or
/// whose transport was opened or closed), and for all of them on embedder requests.
pub fn server_state_is_coherent(ctx: &Ctx) -> Result<(), String> {
    let step = ctx.step;
    let all = step.lifecycle || step.disconnect_all;
    let mut known = 0usize;
    for (i, name) in ctx.obs.names.iter().enumerate() {
        if !touched(step, ctx.before, ctx.after, i) {
            continue;
        }
        let Some(st) = ctx.m.server_state(name) else {
            if ctx.after.status[i] != ServerStatus::Disconnected {
                return Err(format!(
                    "server_state({name}) is None but status() is {:?}",
                    ctx.after.status[i]
                ));
            }
            continue;
        };
        known += 1;
        let status = ctx.after.status[i];
        if st.name != *name || st.status != status {
            return Err(format!(
                "server_state({name}) says {:?} {:?}, status() says {status:?}",
                st.name, st.status
            ));
        }
        let phase_ok = match status {
            ServerStatus::Connected => st.phase == "connected",
            ServerStatus::Connecting => {
                ["opening", "initializing", "listing-tools", "backoff"].contains(&st.phase)
            }
            ServerStatus::Disconnected => st.phase == "idle",
        };
        if !phase_ok {
            return Err(format!(
                "server_state({name}).phase = {:?} while it is {status:?}",
                st.phase
            ));
        }
        if status != ServerStatus::Disconnected && st.attempts == 0 {
            return Err(format!(
                "{name} is {status:?} but server_state counts no attempt"
            ));
        }
        let waiting = st.phase == "backoff";
        if st.next_attempt_at.is_some() != waiting
            || st.next_attempt_at.is_some_and(|at| at < ctx.now)
        {
            return Err(format!(
                "server_state({name}) is in phase {} with next attempt {:?} at {:?}",
                st.phase, st.next_attempt_at, ctx.now
            ));
        }
        let attempt_open = !waiting && status != ServerStatus::Disconnected;
        if attempt_open != st.conn.is_some() || (attempt_open && st.conn != ctx.obs.latest_conn[i])
        {
            return Err(format!(
                "server_state({name}).conn = {:?} in phase {} (latest attempt {:?})",
                st.conn, st.phase, ctx.obs.latest_conn[i]
            ));
        }
        if status == ServerStatus::Connected {
            let ok = match (st.started_at, st.ready_at, st.time_to_ready) {
                (Some(a), Some(b), Some(t)) => b >= a && b - a == t && b <= ctx.now,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "connected {name} has started {:?}, ready {:?}, time to ready {:?}",
                    st.started_at, st.ready_at, st.time_to_ready
                ));
            }
        } else if let (Some(a), Some(b)) = (st.started_at, st.ready_at) {
            if b < a && st.time_to_ready.is_some() {
                return Err(format!(
                    "{name} is on a new attempt (started {a:?}, last ready {b:?}) but shows a time to ready"
                ));
            }
        }
    }
    if all {
        let listed: Vec<String> = ctx.m.servers().into_iter().map(|s| s.name).collect();
        let sources: Vec<&str> = ctx.m.sources().into_keys().collect();
        if listed.len() != known
            || sources.len() != known
            || listed.iter().zip(&sources).any(|(a, b)| a != b)
        {
            return Err(format!(
                "servers() lists {listed:?} and sources() {sources:?}, but server_state() knows {known}"
            ));
        }
    }
    Ok(())
}
