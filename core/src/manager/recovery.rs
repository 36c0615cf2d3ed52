//! What happens when an attempt fails or a connection drops: its calls fail, its tools are
//! withdrawn or turn deferred, and the server either stops or waits on the reconnect ladder
//! (doubling, capped, jittered delays from the manager's PRNG). Too many unexpected closes in
//! a short window trip a breaker that stops automatic attempts until an explicit connect.

use super::calls::CallState;
use super::errors::{CallError, RefreshError, ServerError, ServerErrorKind};
use super::servers::Stage;
use super::{CallId, CallOutcome, Event, Level, Manager, Output, TimerReason};
use crate::time::Instant;
use std::time::Duration;

impl Manager {
    /// A reconnect timer fired: start the attempt, if the server still waits for this one.
    pub(super) fn on_reconnect_due(&mut self, server: &str, at: Instant) {
        let due = matches!(
            self.servers.get(server).map(|s| &s.phase),
            Some(Stage::Backoff { at: a }) if *a == at
        );
        if due {
            self.retry(server);
        }
    }

    /// The server's current attempt failed. `close`: also close the transport (false when the
    /// shell reported it gone). Withdraws its tools, fails its calls, reports the error once.
    pub(super) fn fail_server(&mut self, server: &str, mut error: ServerError, close: bool) {
        let policy = self.opts.reconnect.clone();
        let now = self.now;
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        // An attempt the core ends itself still has its stderr tail: the error carries it.
        if error.stderr_tail.is_none() {
            error.stderr_tail = s
                .phase
                .conn()
                .and_then(|c| self.conns.get(&c))
                .and_then(|c| c.stderr.render());
        }
        let was_connected = matches!(s.phase, Stage::Connected { .. });
        // What it spoke or offered last may be what failed (or may change with a restarted
        // server): the next attempt probes again.
        s.handshake = None;
        let retrying = s.retry_attempt > 0;
        let in_round = s.round.is_some();
        s.last_error = Some(error.clone());
        // The round's report names this failure even if the server is no longer the round's
        // by then (a retry or a later `Connect` started another attempt).
        if let Some(r) = s.round.and_then(|id| self.rounds.open.get_mut(&id)) {
            r.errors.insert(server.to_string(), error.clone());
        }
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
                let tripped = ServerError {
                    kind: ServerErrorKind::BreakerTripped,
                    message: format!(
                        "{}; automatic reconnects stopped after {n} unexpected closes within {} s (connect, reload or sync it to try again)",
                        error.message,
                        policy.burst_window.as_secs()
                    ),
                    stderr_tail: error.stderr_tail.clone(),
                };
                s.last_error = Some(tripped.clone());
                self.counters.breakers_tripped += 1;
                self.stop_attempt(server, close, &error);
                self.diag(Some(server), Level::Error, tripped.to_string());
                return;
            }
            let delay = self.schedule_retry(server, 1, close, &error);
            self.emit(Event::ReconnectScheduled {
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
            let delay = self.schedule_retry(server, attempt, close, &error);
            self.emit(Event::ReconnectScheduled {
                server: server.to_string(),
                attempt,
                delay,
                error,
            });
            return;
        }
        self.stop_attempt(server, close, &error);
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
        error: &ServerError,
    ) -> Duration {
        self.drop_conn(server, close, error, true);
        let live = self
            .servers
            .get(server)
            .is_some_and(|s| s.exposed == Some(false));
        if live {
            self.expose(server, true);
            if self.servers.get(server).is_some_and(|s| s.round.is_none()) {
                self.emit(Event::ToolsChanged {
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
        self.set_phase(server, Stage::Backoff { at });
        self.timers.arm(
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
        self.emit(Event::ReconnectStarted {
            server: server.to_string(),
            attempt,
        });
        if let Err(e) = self.start_server(spec, None) {
            self.stop_attempt(server, false, &e);
            return;
        }
        if let Some(s) = self.servers.get_mut(server) {
            s.retry_attempt = attempt;
        }
    }

    /// Tear down the current attempt: close the transport if asked, fail its calls with
    /// `error`, withdraw its tools, go idle.
    pub(super) fn stop_attempt(&mut self, server: &str, close: bool, error: &ServerError) {
        self.drop_conn(server, close, error, false);
        self.withdraw(server);
        self.set_phase(server, Stage::Idle);
    }

    /// Forget the current connection (closing it if asked) and fail the calls that depend on
    /// it, and the refreshes waiting for it; with `keep_waiting`, calls still waiting for a
    /// connection stay.
    fn drop_conn(&mut self, server: &str, close: bool, error: &ServerError, keep_waiting: bool) {
        let Some(s) = self.servers.get(server) else {
            return;
        };
        let phase = s.phase.clone();
        if let Some(conn) = phase.conn() {
            if self.remove_conn(conn) && close {
                self.out.push_back(Output::CloseTransport { conn });
            }
            if let Stage::Opening { deadline, .. } | Stage::Initializing { deadline, .. } = phase {
                self.timers.disarm(
                    deadline,
                    TimerReason::Connect {
                        server: server.to_string(),
                        conn,
                    },
                );
            }
        }
        if let Stage::Backoff { at } = phase {
            self.timers.disarm(
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
            let e = if error.kind == ServerErrorKind::Disconnected {
                CallError::Disconnected {
                    server: server.to_string(),
                }
            } else {
                CallError::Transport(error.clone())
            };
            self.complete_call(call, CallOutcome::Err(e));
        }
        self.drop_ops(server, error, keep_waiting);
        let waiting = self.servers.get(server).map_or(0, |s| s.refreshes.len());
        self.counters.refreshes_lost += waiting as u64;
        self.answer_refreshes(server, |_| true, || Err(RefreshError::Lost(error.clone())));
    }
}
