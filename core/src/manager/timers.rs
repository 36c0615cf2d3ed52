//! The manager's deadlines: one ordered set of (when, why) pairs. Every timer says what it is
//! for, so a trace names the reason of each wake-up, and a handled or disarmed timer leaves
//! nothing behind: `poll_timeout` is always the earliest deadline still meaningful.

use super::{CallId, ConnId, PeerRequestKey};
use crate::time::Instant;
use serde::Serialize;
use std::collections::BTreeSet;

/// Why the next deadline is due: what the manager does when it passes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum TimerReason {
    /// The startup gate of round `round`: report what is ready.
    Gate {
        /// The startup round.
        round: u64,
    },
    /// The bounded wait past the gate for round `round`'s uncached servers ran out.
    UncachedWait {
        /// The startup round.
        round: u64,
    },
    /// Attempt `conn` of `server` has not finished connecting in its connect timeout.
    Connect {
        /// The server being connected.
        server: String,
        /// The attempt the timeout belongs to.
        conn: ConnId,
    },
    /// A `tools/list` page (request `id` on `conn`) went unanswered for the request timeout.
    Request {
        /// The connection the request went out on.
        conn: ConnId,
        /// The JSON-RPC id of the request.
        id: u64,
    },
    /// Tool call `call` reached its deadline.
    Call {
        /// The call that timed out.
        call: CallId,
    },
    /// `server`'s next reconnect attempt, scheduled for `at`, is due.
    Reconnect {
        /// The server waiting in backoff.
        server: String,
        /// When the attempt was scheduled for (a later schedule makes this one stale).
        at: Instant,
    },
    /// Time to send `conn` its next health ping.
    Ping {
        /// The connection to check.
        conn: ConnId,
    },
    /// Health ping `id` on `conn` went unanswered for the ping timeout.
    PingTimeout {
        /// The connection that was pinged.
        conn: ConnId,
        /// The JSON-RPC id of the ping.
        id: u64,
    },
    /// Time to ask `tasks/get` about the task tool call `call` runs as.
    TaskPoll {
        /// The call whose task is polled.
        call: CallId,
    },
    /// A request of a server's (`key`) went unanswered by the embedder for
    /// `peer_request_timeout`.
    PeerRequest {
        /// The core's key for the request.
        key: PeerRequestKey,
    },
    /// The `subscriptions/listen` stream of `conn`, closed, is due to be asked again.
    Relisten {
        /// The connection whose stream closed.
        conn: ConnId,
    },
    /// The lists stateless connection `conn` became ready from without listing (the cache
    /// said they were fresh) expire: they are asked again.
    CacheExpiry {
        /// The connection served from the cache.
        conn: ConnId,
    },
    /// The `server/discover` probe `id` on stdio connection `conn` went unanswered: the
    /// server is taken for one of the `initialize`-based revisions.
    Probe {
        /// The connection probed.
        conn: ConnId,
        /// The JSON-RPC id of the probe.
        id: u64,
    },
}

/// The armed timers, earliest first. Arming the same (when, why) twice keeps one; disarming
/// one that is not armed does nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct Timers {
    set: BTreeSet<(Instant, TimerReason)>,
}

impl Timers {
    #[inline]
    pub(super) fn arm(&mut self, at: Instant, reason: TimerReason) {
        self.set.insert((at, reason));
    }

    #[inline]
    pub(super) fn disarm(&mut self, at: Instant, reason: TimerReason) {
        self.set.remove(&(at, reason));
    }

    /// Disarm a timer kept whole (as a connection keeps its health timer).
    #[inline]
    pub(super) fn remove(&mut self, timer: &(Instant, TimerReason)) {
        self.set.remove(timer);
    }

    #[inline]
    pub(super) fn first(&self) -> Option<&(Instant, TimerReason)> {
        self.set.first()
    }

    #[inline]
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.set.first().map(|(t, _)| *t)
    }

    /// Take the earliest timer if it is due at `now`.
    #[inline]
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<TimerReason> {
        match self.set.first() {
            Some((at, _)) if *at <= now => self.set.pop_first().map(|(_, reason)| reason),
            _ => None,
        }
    }

    /// Disarm the page timeout of request `id` on `conn`, whatever its deadline.
    pub(super) fn disarm_request(&mut self, conn: ConnId, id: u64) {
        let found = self
            .set
            .iter()
            .find(|(_, r)| *r == TimerReason::Request { conn, id })
            .cloned();
        if let Some(t) = found {
            self.set.remove(&t);
        }
    }
}
