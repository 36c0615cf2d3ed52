//! Startup rounds and the gate. Every `Connect`, `Reload` or `Sync` that starts servers opens
//! a round; the round ends with one `StartupComplete` once every member has settled, or at
//! the gate when every member still in flight has cached tools to serve (deferred). Members
//! without a cache entry are waited for past the gate, as long as `uncached_wait` allows.

use super::errors::{ServerError, ServerErrorKind};
use super::servers::{CacheState, Stage};
use super::{Event, Manager, RequestId, StartupReport, TimerReason};
use crate::time::Instant;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// One startup round while it is open.
#[derive(Debug, Clone)]
pub(super) struct Round {
    request: RequestId,
    started: Instant,
    pub(super) members: BTreeSet<String>,
    pub(super) errors: BTreeMap<String, ServerError>,
    pub(super) skipped: Vec<String>,
    /// Members stopped (disconnected) while the round was open.
    pub(super) disconnected: BTreeSet<String>,
    gate_at: Instant,
    /// The member last seen in flight. `check_rounds` runs after every input and only needs
    /// to know whether some member is still in flight, so it starts looking here: most inputs
    /// do not settle that member, and a scan from it finds the next one in a few steps.
    in_flight_hint: Option<String>,
}

impl Round {
    /// A round `request` opened at `now` whose gate is at `gate_at`, with no members yet.
    pub(super) fn new(request: RequestId, now: Instant, gate_at: Instant) -> Self {
        Round {
            request,
            started: now,
            members: BTreeSet::new(),
            errors: BTreeMap::new(),
            skipped: Vec::new(),
            disconnected: BTreeSet::new(),
            gate_at,
            in_flight_hint: None,
        }
    }

    pub(super) fn gate_at(&self) -> Instant {
        self.gate_at
    }
}

/// The open rounds by number, and the number the next one gets (rounds count from 1).
#[derive(Debug, Clone)]
pub(super) struct Rounds {
    pub(super) open: BTreeMap<u64, Round>,
    next: u64,
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            open: BTreeMap::new(),
            next: 1,
        }
    }
}

impl Rounds {
    /// Number a new round.
    pub(super) fn next_id(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        id
    }
}

impl Manager {
    /// Emit `StartupComplete` for every open round whose gate condition holds.
    pub(super) fn check_rounds(&mut self) {
        // The rounds open now, in order, walked without copying their ids: completing one
        // removes only that one, and rounds opened meanwhile (none are) would number past
        // `last`.
        let Some(&last) = self.rounds.open.keys().next_back() else {
            return;
        };
        let mut next = 0;
        while let Some((&id, r)) = self
            .rounds
            .open
            .range(next..)
            .next()
            .filter(|(&id, _)| id <= last)
        {
            next = id + 1;
            let gate_passed = self.now >= r.gate_at;
            // Whether any member is still in flight, and (past the gate) whether one of those
            // has no cached tools; members are scanned from the last one seen in flight, and
            // the scan stops as soon as the answer is known.
            let mut all_settled = true;
            let mut uncached_pending = false;
            let mut first_in_flight: Option<&String> = None;
            let from = r.in_flight_hint.as_deref().unwrap_or("");
            let rotated = r
                .members
                .range::<str, _>((Bound::Included(from), Bound::Unbounded))
                .chain(
                    r.members
                        .range::<str, _>((Bound::Unbounded, Bound::Excluded(from))),
                );
            for m in rotated {
                let Some(s) = self.servers.get(m) else {
                    continue; // disconnected: settled
                };
                if s.round != Some(id) || !s.phase.in_flight() {
                    continue;
                }
                all_settled = false;
                first_in_flight.get_or_insert(m);
                if !matches!(s.cache, CacheState::Hit(_)) {
                    uncached_pending = true;
                }
                if !gate_passed || uncached_pending {
                    break;
                }
            }
            if first_in_flight != r.in_flight_hint.as_ref() {
                let hint = first_in_flight.cloned();
                if let Some(r) = self.rounds.open.get_mut(&id) {
                    r.in_flight_hint = hint;
                }
            }
            let Some(r) = self.rounds.open.get(&id) else {
                continue;
            };
            let wait_over = self
                .opts
                .uncached_wait
                .is_some_and(|w| self.now >= r.gate_at + w);
            if all_settled || (gate_passed && !uncached_pending) {
                self.complete_round(id);
            } else if gate_passed && wait_over {
                self.counters.uncached_waits_expired += 1;
                self.complete_round(id);
            } else if gate_passed {
                // Past the gate, servers without a cache entry are waited for, so their tools
                // make the report; bounded when the embedder asked for it.
                if let Some(wait) = self.opts.uncached_wait {
                    let at = r.gate_at + wait;
                    self.timers.arm(at, TimerReason::UncachedWait { round: id });
                }
            }
        }
    }

    fn complete_round(&mut self, id: u64) {
        let Some(r) = self.rounds.open.remove(&id) else {
            return;
        };
        self.timers
            .disarm(r.gate_at, TimerReason::Gate { round: id });
        if let Some(wait) = self.opts.uncached_wait {
            self.timers
                .disarm(r.gate_at + wait, TimerReason::UncachedWait { round: id });
        }
        let mut report = StartupReport {
            request: Some(r.request),
            round: id,
            elapsed: self.now - r.started,
            tools: Vec::new(),
            errors: r.errors,
            connected: Vec::new(),
            deferred: Vec::new(),
            pending: Vec::new(),
            skipped: r.skipped,
            disconnected: r.disconnected.into_iter().collect(),
            config_errors: Vec::new(),
            shadowed: Vec::new(),
            awaiting_approval: Vec::new(),
        };
        for m in &r.members {
            let Some(s) = self.servers.get_mut(m) else {
                continue;
            };
            if s.round != Some(id) {
                continue;
            }
            s.round = None;
            match (&s.phase, &s.cache) {
                (Stage::Connected { .. }, _) => report.connected.push(m.clone()),
                (Stage::Idle | Stage::Backoff { .. }, _) => {
                    let e = s.last_error.clone().unwrap_or_else(|| {
                        ServerError::new(ServerErrorKind::TransportFailed, "failed")
                    });
                    report.errors.insert(m.clone(), e);
                }
                (_, CacheState::Hit(_)) => {
                    report.deferred.push(m.clone());
                    self.counters.deferred_servers_at_gate += 1;
                    self.expose(m, true);
                }
                _ => report.pending.push(m.clone()),
            }
        }
        report.tools = self.tools();
        self.emit(Event::StartupComplete { report });
    }
}
