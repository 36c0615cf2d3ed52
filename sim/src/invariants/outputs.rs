//! Checks made on the output stream while a step is drained, before the world acts on each
//! output: what only the order of outputs shows (a second close, a send on a closed attempt,
//! a report of an unknown round, a reconnect that starts off its schedule, a log line the
//! server never sent). Each finding is kept in the step under the invariant it breaks, and
//! that invariant's check reports it after the drain. The observations these checks depend
//! on (which attempts are open, which rounds reported) are kept up to date here too.

use super::{ladder_ok, Invariant};
use crate::observe::{sim_log_level, Observer, RoundObs, StepInfo};
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_core::manager::{ConnId, Event, Level, Output, ReconnectPolicy, ServerStatus};
use switchboard_core::Instant;

/// What the output checks need besides the observations.
pub struct Watch<'a> {
    pub now: Instant,
    pub reconnect: &'a ReconnectPolicy,
    pub reset_on_progress: bool,
}

/// Check one drained output and record what it tells. `false`: it is malformed (a transport
/// the world must not open or write to, a call that is not in flight), so the world must not
/// act on it.
pub fn observe(w: &Watch, obs: &mut Observer, step: &mut StepInfo, o: &Output) -> bool {
    let found = |step: &mut StepInfo, inv: Invariant, d: String| {
        step.output_violations.push((inv, d));
    };
    match o {
        Output::OpenTransport { conn, server, .. } => {
            if !obs.index.contains_key(server) {
                let d = format!("OpenTransport for unknown server {server}");
                found(step, Invariant::EveryOpenIsClosedOnce, d);
                return false;
            }
            if obs.conns.contains_key(conn) {
                let d = format!("OpenTransport reused attempt #{}", conn.0);
                found(step, Invariant::EveryOpenIsClosedOnce, d);
                return false;
            }
        }
        Output::Send { conn, .. } if !obs.mirror.contains(conn) => {
            let d = format!("Send on attempt #{} that is not open", conn.0);
            found(step, Invariant::EveryOpenIsClosedOnce, d);
            return false;
        }
        Output::Send { conn, frame, meta }
            if matches!(meta.method, Some("tasks/get" | "tasks/result")) =>
        {
            let method = meta.method.unwrap_or_default();
            super::tasks::task_request_sent(w.now, obs, step, *conn, method, frame);
        }
        Output::CloseTransport { conn } => {
            step.closes.push(*conn);
            let answers_stale_open = step.stale_opened == Some(*conn);
            if !obs.mirror.remove(conn) && !answers_stale_open {
                let why = match obs.conns.get(conn) {
                    Some(c) if c.ended => "after it reported its own close",
                    Some(_) => "twice",
                    None => "for an attempt never opened",
                };
                let d = format!("CloseTransport #{} {why}", conn.0);
                found(step, Invariant::EveryOpenIsClosedOnce, d);
            }
        }
        Output::Event(Event::StartupComplete { report: r }) => {
            let snapshot = step.running_status.clone();
            step.report_status.push(snapshot);
            match obs.rounds.get_mut(&r.round) {
                Some(round) if round.reported => {
                    let d = format!("StartupComplete twice for round {}", r.round);
                    found(step, Invariant::StartupCompleteOncePerRound, d);
                }
                Some(round) => {
                    round.reported = true;
                    let members: Vec<(usize, ConnId)> =
                        round.members.iter().map(|(&i, &c)| (i, c)).collect();
                    for (i, c) in members {
                        if r.errors.contains_key(&obs.names[i]) && obs.latest_conn[i] == Some(c) {
                            failure_reported(obs, step, c, "in the round's report");
                        }
                    }
                }
                // A round opened in this very step: recorded after the drain.
                None if r.round > obs.max_round => {}
                None => {
                    let d = format!("StartupComplete for unknown round {}", r.round);
                    found(step, Invariant::StartupCompleteOncePerRound, d);
                }
            }
        }
        Output::Event(Event::StatusChanged { server, status }) => {
            step.status_events.insert(server.clone(), *status);
            if let Some(&i) = obs.index.get(server) {
                step.running_status[i] = *status;
                if *status == ServerStatus::Connected {
                    if let Some(c) = obs.latest_conn[i] {
                        if let Some(o) = obs.conns.get_mut(&c) {
                            o.ready = true;
                        }
                    }
                }
            }
        }
        Output::Event(Event::CallCompleted { call, .. }) if !obs.calls.contains_key(call) => {
            let d = format!("call {} completed twice (or was never issued)", call.0);
            found(step, Invariant::EveryCallCompletesOnce, d);
            return false;
        }
        Output::Event(Event::ReconnectScheduled {
            server,
            attempt,
            delay,
            error,
        }) => {
            if let Err(e) = ladder_ok(w.reconnect, *delay, *attempt) {
                let d = format!("ReconnectScheduled {server} ({error}): {e}");
                found(step, Invariant::BackoffFollowsTheLadder, d);
            }
            obs.announced
                .insert(server.clone(), (*attempt, w.now + *delay));
        }
        Output::Event(Event::ReconnectStarted { server, attempt }) => {
            let announced = obs.announced.remove(server);
            if announced != Some((*attempt, w.now)) {
                let d = format!(
                    "ReconnectStarted {server} attempt {attempt} at {}ns, announced {announced:?}",
                    w.now.as_nanos()
                );
                found(step, Invariant::BackoffFollowsTheLadder, d);
            }
        }
        Output::Event(Event::ServerLog {
            server,
            level,
            severity,
            logger,
            data,
        }) => {
            let text = data.as_str().unwrap_or_default();
            let want = sim_log_level(severity, text);
            if logger.as_deref() != Some("sim") || want.is_none() {
                let d =
                    format!("a ServerLog the server did not send: {severity} {logger:?} {data}");
                found(step, Invariant::PeerInputIsAccountedFor, d);
            } else if want != Some(*level) {
                let d = format!(
                    "a server log message at {severity:?} became {level:?}, not {want:?}: {text}"
                );
                found(step, Invariant::PeerInputIsAccountedFor, d);
            }
            if !obs.index.contains_key(server) {
                let d = format!("a ServerLog from unknown server {server}");
                found(step, Invariant::PeerInputIsAccountedFor, d);
            }
        }
        Output::Event(Event::Progress {
            server,
            call: Some(call),
            progress,
            ..
        }) => {
            // Progress names a call only when it is one of ours, in flight, to that server.
            let ok = obs.calls.get(call).is_some_and(|c| {
                (w.reset_on_progress || c.progress)
                    && c.server.map(|i| obs.names[i].as_str()) == Some(server.as_str())
            }) && !step.completed.iter().any(|(c, _)| c == call);
            if !ok {
                let d = format!(
                    "Progress {progress} from {server} names call {} that is not one of its calls in flight",
                    call.0
                );
                found(step, Invariant::PeerInputIsAccountedFor, d);
            }
        }
        Output::Event(Event::Diagnostic {
            server,
            level,
            message,
        }) => diagnostic(obs, step, server.as_deref(), *level, message),
        Output::Event(Event::Progress { call: None, .. })
        | Output::LoadCache { .. }
        | Output::StoreCache { .. }
        | Output::Event(Event::ToolsChanged { .. }) => {}
        // The requests' completions are checked by the world's request ledger.
        _ => {}
    }
    true
}

fn diagnostic(
    obs: &mut Observer,
    step: &mut StepInfo,
    server: Option<&str>,
    level: Level,
    message: &str,
) {
    // A server's log message is a ServerLog, never a Diagnostic as well.
    if message.starts_with("[sim] ") {
        step.output_violations.push((
            Invariant::PeerInputIsAccountedFor,
            format!("a server log message became a Diagnostic ({level:?}): {message}"),
        ));
    }
    let index = server.and_then(|s| obs.index.get(s).copied());
    // A failed attempt of a round still open is the round's to report (in its
    // StartupComplete), never a diagnostic of its own as well.
    if message.starts_with("attempt failed:") {
        if let Some(i) = index {
            let in_open_round = obs.rounds.values().any(|r| {
                !r.reported
                    && r.members
                        .get(&i)
                        .is_some_and(|c| obs.latest_conn[i] == Some(*c))
            });
            if in_open_round {
                step.output_violations.push((
                    Invariant::LateFailuresLoggedOnce,
                    format!("a failed attempt of an open round was also logged: {message}"),
                ));
            }
        }
    }
    // With reconnects on, a lost connection is a warning ("...; reconnecting"): not a
    // failure report (the attempt goes on).
    let lost = message.starts_with("connection lost:");
    let late = message.starts_with("failed after startup:");
    if level == Level::Error && (late || lost) {
        if let Some(i) = index {
            obs.withdrawn[i] = true;
            if let Some(c) = obs.latest_conn[i] {
                failure_reported(obs, step, c, "as a late failure");
            }
        }
    }
}

/// An attempt's failure was reported (in a round's errors or as a late failure): once only.
fn failure_reported(obs: &mut Observer, step: &mut StepInfo, conn: ConnId, how: &str) {
    if let Some(o) = obs.conns.get_mut(&conn) {
        o.failure_reports += 1;
        if o.failure_reports > 1 {
            step.output_violations.push((
                Invariant::LateFailuresLoggedOnce,
                format!(
                    "the failure of attempt #{} was reported again ({how})",
                    conn.0
                ),
            ));
        }
    }
}

/// After the drain of an embedder request that may start a round (`must`: a `Connect` or
/// `Reload`, which always does): record the round it opened, with the members it started and
/// the servers of the request whose config is invalid.
#[allow(clippy::too_many_arguments)]
pub fn round_opened(
    obs: &mut Observer,
    step: &mut StepInfo,
    open_rounds: Vec<u64>,
    now: Instant,
    gate: Duration,
    members: BTreeMap<usize, ConnId>,
    must: bool,
    invalid: Vec<usize>,
) {
    let candidate = open_rounds
        .into_iter()
        .chain(step.reports.iter().map(|r| r.round))
        .filter(|&r| r > obs.max_round)
        .max();
    match candidate {
        Some(id) => {
            obs.max_round = id;
            let reported = step.reports.iter().any(|r| r.round == id);
            obs.rounds.insert(
                id,
                RoundObs {
                    id,
                    started: now,
                    gate_at: now + gate,
                    members,
                    invalid,
                    reported,
                },
            );
        }
        None if must => step.output_violations.push((
            Invariant::StartupCompleteOncePerRound,
            "a Connect/Reload opened no startup round".into(),
        )),
        None => {}
    }
}
