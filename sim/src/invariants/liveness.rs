//! The liveness invariants, checked once the faults are healed: no step loops or runs away,
//! all work finishes, every valid server comes back and serves a call, and the final
//! `DisconnectAll` leaves nothing behind. The world drives the phases; these functions judge.

use crate::observe::{Observer, View};
use switchboard_core::manager::{CallId, CallOutcome, Manager, ServerStatus, TimerReason};
use switchboard_core::Instant;

/// A run that takes more steps than this is a runaway (a bug in the manager or the world).
pub const MAX_STEPS: u64 = 1_000_000;

/// `NoRunaway`: the run is still within its step budget.
pub fn within_step_budget(events: u64) -> Result<(), String> {
    if events > MAX_STEPS {
        return Err(format!("more than {MAX_STEPS} steps: runaway run"));
    }
    Ok(())
}

/// `NoBusyLoop`: once a deadline is handled, `poll_timeout` moves past it.
pub fn deadline_moved(
    before: Option<(Instant, TimerReason)>,
    after: Option<(Instant, TimerReason)>,
) -> Result<(), String> {
    if after == before {
        return Err(format!(
            "busy loop: the deadline {before:?} is still due after handle_timeout"
        ));
    }
    Ok(())
}

/// `WorkFinishes`: once the budget after the heal ran out, the manager has no work left, every
/// call completed and every round reported. `idle`: it has no deadline and nothing is queued.
pub fn work_finished(
    m: &Manager,
    obs: &Observer,
    idle: bool,
    budget: Instant,
) -> Result<(), String> {
    let work_left = !m.calls_in_flight().is_empty()
        || !m.operations_in_flight().is_empty()
        || !m.open_rounds().is_empty()
        || !m.pending_connections().is_empty()
        || !m.pending_tool_loads().is_empty();
    if work_left {
        let why = if idle {
            "stall: the manager has work but no deadline and nothing is queued"
        } else {
            "work still pending when the liveness budget ran out"
        };
        return Err(format!(
            "{why} (calls {:?}, rounds {:?}, pending connections {:?}, pending tool loads {:?}, budget {}ms)",
            m.calls_in_flight(),
            m.open_rounds(),
            m.pending_connections(),
            m.pending_tool_loads(),
            budget.as_millis()
        ));
    }
    if !obs.calls.is_empty() {
        let left: Vec<u64> = obs.calls.keys().map(|c| c.0).collect();
        return Err(format!("calls never completed: {left:?}"));
    }
    if let Some(r) = obs.rounds.values().find(|r| !r.reported) {
        return Err(format!("round {} never reported", r.id));
    }
    Ok(())
}

/// `HealedServersServe`: after the heal and a reconnect, server `i` is connected; when it was
/// started anew (`fresh`), it shows exactly the tools it offers.
pub fn healed_server_back(
    view: &View,
    i: usize,
    name: &str,
    fresh: bool,
    tools: &[String],
) -> Result<(), String> {
    if view.status[i] != ServerStatus::Connected {
        return Err(format!(
            "{name} is {:?} after the heal and a reconnect",
            view.status[i]
        ));
    }
    if !fresh {
        return Ok(()); // already connected: kept as it was (tools may have changed since)
    }
    let mut want: Vec<&str> = Vec::new();
    for t in tools {
        if !want.contains(&t.as_str()) {
            want.push(t);
        }
    }
    want.sort_unstable();
    let mut got: Vec<&str> = view
        .tools
        .iter()
        .filter(|t| t.server == name && !t.deferred)
        .map(|t| t.raw.as_str())
        .collect();
    got.sort_unstable();
    if want != got {
        return Err(format!(
            "{name} came back with tools {got:?}, expected {want:?}"
        ));
    }
    Ok(())
}

/// `HealedServersServe`: a call to a healed server succeeds.
pub fn healed_call_ok(call: CallId, outcome: &CallOutcome) -> Result<(), String> {
    if !matches!(outcome, CallOutcome::Ok(_)) {
        return Err(format!(
            "call {} to a healed server failed: {outcome:?}",
            call.0
        ));
    }
    Ok(())
}

/// `HealedServersServe`: every call to a healed server completed.
pub fn healed_calls_done<'a>(left: impl IntoIterator<Item = &'a CallId>) -> Result<(), String> {
    let left: Vec<u64> = left.into_iter().map(|c| c.0).collect();
    if !left.is_empty() {
        return Err(format!("healed calls never succeeded: {left:?}"));
    }
    Ok(())
}

/// `TeardownLeavesNothing`: no process outlives the final `DisconnectAll`.
pub fn no_process_alive(alive: &[u64]) -> Result<(), String> {
    if !alive.is_empty() {
        return Err(format!(
            "processes still alive after DisconnectAll: {alive:?}"
        ));
    }
    Ok(())
}

/// `StartupRetriesFollowPolicy`: startup failures are retried only when the policy says so.
pub fn startup_retries_allowed(m: &Manager, retry_startup: bool) -> Result<(), String> {
    let retries = m.counters().startup_retries;
    if !retry_startup && retries > 0 {
        return Err(format!(
            "{retries} startup failures were retried with startup retries off"
        ));
    }
    Ok(())
}

/// `TeardownLeavesNothing`: after the final `DisconnectAll` every registry is empty and no
/// timer is armed.
pub fn registries_empty(m: &Manager) -> Result<(), String> {
    if !m.servers().is_empty()
        || !m.connections().is_empty()
        || !m.pending_connections().is_empty()
        || !m.pending_tool_loads().is_empty()
        || m.tool_count() != 0
        || !m.open_conns().is_empty()
        || !m.calls_in_flight().is_empty()
        || !m.operations_in_flight().is_empty()
        || !m.sources().is_empty()
        || !m.pending_peer_requests().is_empty()
    {
        return Err("a registry is not empty after the final DisconnectAll".into());
    }
    if m.poll_timeout().is_some() {
        let t = m.next_timer();
        return Err(format!(
            "a timer is still armed after the final DisconnectAll: {t:?}"
        ));
    }
    Ok(())
}
