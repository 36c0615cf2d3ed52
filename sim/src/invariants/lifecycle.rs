//! The lifecycle invariants: startup rounds report once and on time, stale events change
//! nothing, every open is closed once, failures stay isolated, calls complete once, late
//! failures are logged once, disconnects withdraw by identity, and the client's frames are
//! valid JSON-RPC.

use super::{output_violation, Ctx, Invariant};
use std::collections::BTreeSet;
use switchboard_core::manager::{CallError, CallId, CallOutcome, ConnId, Phase, ServerStatus};

/// `StartupComplete` comes exactly once per round; when every still-pending member had a
/// cache hit it comes no later than the gate; it never omits a member that had settled.
pub fn startup_complete_once_and_on_time(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::StartupCompleteOncePerRound)?;
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
            if ctx.obs.latest_conn[i] != Some(conn) || ctx.summaries.get(ctx.m, i, name).is_none() {
                continue; // restarted in a later round, or disconnected: settled elsewhere
            }
            let lists = [
                ("connected", r.connected.contains(name)),
                ("errors", r.errors.contains_key(name)),
                ("deferred", r.deferred.contains(name)),
                ("pending", r.pending.contains(name)),
            ];
            let mut hits = lists.iter().filter(|(_, b)| *b).map(|(n, _)| *n);
            let (first, second) = (hits.next(), hits.next());
            let want: &[&str] = match at_report[i] {
                ServerStatus::Connected => &["connected"],
                ServerStatus::Disconnected => &["errors"],
                // Waiting to reconnect after its attempt in this round failed: an error.
                ServerStatus::Connecting
                    if ctx
                        .summaries
                        .get(ctx.m, i, name)
                        .is_some_and(|s| s.phase == Phase::Backoff) =>
                {
                    &["errors"]
                }
                ServerStatus::Connecting => &["deferred", "pending"],
                _ => &[],
            };
            if second.is_some() || !first.is_some_and(|h| want.contains(&h)) {
                let hits: Vec<&str> = lists.iter().filter(|(_, b)| *b).map(|(n, _)| *n).collect();
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
                ctx.obs.latest_conn[i] != Some(conn) || ctx.summaries.get(ctx.m, i, name).is_none();
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
        let mut pending = round.members.iter().filter(|(&i, &c)| {
            ctx.obs.latest_conn[i] == Some(c) && ctx.after.status[i] == ServerStatus::Connecting
        });
        if pending.clone().next().is_none() {
            return Err(format!(
                "every member of round {} settled but no StartupComplete",
                round.id
            ));
        }
        if ctx.now >= round.gate_at
            && pending.all(|(_, c)| ctx.obs.conns.get(c).and_then(|o| o.cache_hit) == Some(true))
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
/// one extra close allowed is the answer to a stale `Opened` (the stale-event invariant): the shell may
/// have opened a transport after the manager abandoned its attempt or heard of its end.
pub fn every_open_is_closed_exactly_once(ctx: &Ctx) -> Result<(), String> {
    output_violation(ctx, Invariant::EveryOpenIsClosedOnce)?;
    if !ctx.obs.mirror.iter().eq(ctx.after.conns.iter()) {
        let mirror: Vec<ConnId> = ctx.obs.mirror.iter().copied().collect();
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
    // Deferred in a report of this step: looked up only for a server whose slice moved.
    let deferred_now = |name: &String| ctx.step.reports.iter().any(|r| r.deferred.contains(name));
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
        if !ctx.before.same_slice(ctx.after, name) && !deferred_now(name) {
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
    output_violation(ctx, Invariant::EveryCallCompletesOnce)?;
    // "No longer offered" is said only of a tool its server's live list lacks.
    for (call, outcome) in &ctx.step.completed {
        let CallOutcome::Err(
            e @ CallError::RetiredTool {
                server, raw: tool, ..
            },
        ) = outcome
        else {
            continue;
        };
        if ctx
            .after
            .tools
            .iter()
            .any(|t| t.server == *server && t.raw == *tool && !t.deferred)
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
    if ours != *ctx.after.calls {
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
        if ctx.step.timer && matches!(msg, CallError::Timeout { .. }) {
            continue;
        }
        let ok = match (ctx.m.server_state(name), msg) {
            // The call carries the failure; the server's last error may add to it (e.g. that
            // automatic reconnects stopped).
            (Some(s), CallError::Transport(cause)) => s.last_error.as_ref().is_some_and(|e| {
                !cause.message.is_empty() && e.message.starts_with(&cause.message)
            }),
            (None, CallError::Disconnected { server }) => server == name,
            _ => false,
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
    output_violation(ctx, Invariant::LateFailuresLoggedOnce)
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
    output_violation(ctx, Invariant::ClientSpeaksValidJsonRpc)
}

/// 40: a frame refused for its credentials (on a live attempt) ends that attempt — the
/// core closes the transport, which stayed open — when the refusal says a person must log
/// in, when the refused request was the handshake (nothing can follow it) or when the frame
/// was no request (nothing names what to fail); a refused step-up on an established
/// connection fails that request alone and leaves the connection open.
pub fn refusals_decided_by_the_core(ctx: &Ctx) -> Result<(), String> {
    let Some(r) = ctx.step.refused else {
        return Ok(());
    };
    let conn = r.conn;
    let closed = ctx.step.closes.contains(&conn);
    let open = ctx.m.open_conns().contains(&conn);
    let ends = r.login || r.handshake || !r.request;
    match (ends, closed, open) {
        (true, true, false) | (false, false, true) => Ok(()),
        (true, ..) if r.handshake => Err(format!(
            "a refused handshake left attempt #{} going (closed: {closed}, open: {open})",
            conn.0
        )),
        (true, ..) if !r.request => Err(format!(
            "a refused notification left attempt #{} going (closed: {closed}, open: {open})",
            conn.0
        )),
        (true, ..) => Err(format!(
            "a refusal that needs a login left attempt #{} going (closed: {closed}, open: {open})",
            conn.0
        )),
        (false, ..) => Err(format!(
            "a refused step-up ended attempt #{} (closed: {closed}, open: {open})",
            conn.0
        )),
    }
}
