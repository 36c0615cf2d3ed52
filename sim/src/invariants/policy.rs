//! The policy invariants: reconnects follow the backoff ladder and the breaker, syncs keep
//! unchanged servers, listings settle, call timeouts keep their deadlines, peer input is
//! accounted for and health pings keep coming; and the per-server policy observations they
//! read, advanced after each step that passed.

use super::{output_violation, Ctx, Invariant, Summaries};
use crate::observe::{Observer, PolicyObs, StepInfo, View};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::manager::{
    CallError, CallOutcome, Manager, ReconnectPolicy, ServerErrorKind, ServerStatus,
};
use switchboard_core::Instant;

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
    output_violation(ctx, Invariant::PeerInputIsAccountedFor)?;
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
    output_violation(ctx, Invariant::BackoffFollowsTheLadder)?;
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
        let Some(st) = ctx.summaries.get(ctx.m, i, name) else {
            continue;
        };
        if st.phase.as_str() != "backoff" {
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
                .and_then(|s| s.last_error.as_ref())
                .is_some_and(|e| e.kind == ServerErrorKind::BreakerTripped);
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
        } else if st.as_ref().map(|s| s.phase.as_str()) != Some("backoff") {
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
            || (!reported_deferred && !ctx.before.same_slice(ctx.after, name))
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
    // A server that matched the same tool set (the scenario's lists never change, so the same
    // address and length are the same names) in the very same view list (kept alive by the
    // memo, so the pointer cannot be reused) would match again: it is skipped. Builds with
    // debug assertions compare anyway and would report such a server failing.
    let mut memo = ctx.obs.tools_checked.borrow_mut();
    if memo.len() < ctx.obs.names.len() {
        memo.resize(ctx.obs.names.len(), None);
    }
    for (i, want) in ctx.settled {
        let name = &ctx.obs.names[*i];
        let Some(want) = want else {
            return Err(format!(
                "{name} announced a new tool set (list_changed) and it was never listed again"
            ));
        };
        let unchanged = memo[*i].as_ref().is_some_and(|(at, len, tools)| {
            *at == want.as_ptr() as usize
                && *len == want.len()
                && Arc::ptr_eq(tools, &ctx.after.tools)
        });
        if unchanged && !cfg!(debug_assertions) {
            continue;
        }
        let mut want_names: Vec<&str> = want.iter().map(String::as_str).collect();
        want_names.sort_unstable();
        want_names.dedup();
        let mut got: Vec<&str> = ctx
            .after
            .tools
            .iter()
            .filter(|t| t.server == *name)
            .map(|t| t.raw.as_str())
            .collect();
        got.sort_unstable();
        if got != want_names {
            let stale = if unchanged {
                "(unchanged since it last matched) "
            } else {
                ""
            };
            return Err(format!(
                "{stale}{name} settled with tools {got:?} in the view, but it offers {want_names:?}"
            ));
        }
        memo[*i] = Some((
            want.as_ptr() as usize,
            want.len(),
            Arc::clone(&ctx.after.tools),
        ));
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
        let CallOutcome::Err(CallError::Timeout { .. }) = outcome else {
            continue;
        };
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
    for call in ctx.after.calls.iter() {
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
    summaries: &Summaries,
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
                if let Some(st) = summaries.get(m, i, name) {
                    if st.phase.as_str() == "backoff" {
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
            // Nothing happened to it: same wait as before.
            _ => {}
        }
    }
    c
}

/// Whether a step could have changed server `i`'s state: an embedder request (any server),
/// an event for it, a status change, or a transport the manager opened or closed for it
/// (timers act through those: a reconnect opens, a timeout closes).
#[inline]
pub fn touched(step: &StepInfo, before: &View, after: &View, i: usize) -> bool {
    step.lifecycle
        || step.disconnect_all
        || step.scope == Some(i)
        || before.status[i] != after.status[i]
        || step.opened.contains(&i)
        || step.closed.contains(&i)
}
