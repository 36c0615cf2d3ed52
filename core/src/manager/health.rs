//! Health checks: while a connection is ready, a `ping` every interval; each one unanswered
//! within its timeout is a miss, and enough misses in a row fail the connection (which the
//! reconnect ladder then picks up). Each connection has at most one health timer armed.

use super::errors::{ServerError, ServerErrorKind};
use super::servers::Stage;
use super::sessions::Req;
use super::{ConnId, Manager, TimerReason};
use crate::protocol;
use crate::time::Instant;

impl Manager {
    fn current_conn_of(&self, conn: ConnId) -> Option<String> {
        let server = self.conns.get(&conn)?.server.clone();
        let s = self.servers.get(&server)?;
        matches!(s.phase, Stage::Connected { conn: c, .. } if c == conn).then_some(server)
    }

    pub(super) fn send_ping(&mut self, conn: ConnId) {
        let Some(h) = self.opts.health.clone() else {
            return;
        };
        if self.current_conn_of(conn).is_none() {
            return;
        }
        let method = self.health_method(conn);
        let Some(id) = self.request(conn, method, protocol::NO_PARAMS, Req::Ping) else {
            return;
        };
        self.arm_ping(
            conn,
            self.now + h.timeout,
            TimerReason::PingTimeout { conn, id },
        );
    }

    pub(super) fn on_pong(&mut self, conn: ConnId, server: &str) {
        if let Some(s) = self.servers.get_mut(server) {
            s.ping_misses = 0;
        }
        if let Some(h) = &self.opts.health {
            let at = self.now + h.interval;
            self.arm_ping(conn, at, TimerReason::Ping { conn });
        }
    }

    /// Arm `conn`'s one health timer, replacing the one it had (an answered ping's deadline).
    pub(super) fn arm_ping(&mut self, conn: ConnId, at: Instant, reason: TimerReason) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(old) = c.ping_timer.replace((at, reason.clone())) {
            self.timers.remove(&old);
        }
        self.timers.arm(at, reason);
    }

    pub(super) fn on_ping_timeout(&mut self, conn: ConnId, id: u64) {
        let Some(server) = self.current_conn_of(conn) else {
            return;
        };
        let pending = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.tracker.forget(id))
            .is_some();
        if !pending {
            return; // answered in time
        }
        self.counters.ping_timeouts += 1;
        let limit = self.opts.health.as_ref().map_or(2, |h| h.misses.max(1));
        let misses = match self.servers.get_mut(&server) {
            Some(s) => {
                s.ping_misses += 1;
                s.ping_misses
            }
            None => return,
        };
        if misses >= limit {
            self.counters.health_failures += 1;
            let error = ServerError::new(
                ServerErrorKind::HealthCheck,
                format!("health check failed: {misses} pings in a row went unanswered"),
            );
            self.fail_server(&server, error, true);
        } else {
            self.send_ping(conn);
        }
    }
}
