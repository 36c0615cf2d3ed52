//! Subscriptions on a stateless connection. The revision has no spontaneous notifications:
//! a client opts in with one long-lived `subscriptions/listen` request whose answer *is* the
//! stream. Its filter asks for what the server declared it announces (tool, prompt and
//! resource list changes) and for updates of the resources the embedder subscribed to; every
//! notification on it carries the listen request's id as its `subscriptionId`. One that names
//! a stream already replaced is counted but still acted on: a change the server announced is
//! true whichever stream carried it, and acting on it costs one list. `resources/subscribe`
//! and `unsubscribe` become changes of that filter: the stream is cancelled and asked again.
//! Nothing is replayed after a stream ends, so when a stream asked again is acknowledged the
//! lists it covers are fetched again.
//!
//! A stream that ends while its server is connected (the server answered the listen request,
//! or the transport lost it) is asked again after a delay from a ladder like the reconnect
//! one (500 ms, 1 s, 2 s, ... up to [`MAX_RELISTEN_DELAY`]), which restarts once a stream is
//! acknowledged. So no stream stays closed while its server is connected.

use super::servers::Stage;
use super::sessions::Req;
use super::{ConnId, Level, Manager, TimerReason};
use crate::catalog::Operation;
use crate::protocol;

use crate::time::Instant;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The longest wait before a closed stream is asked again.
pub const MAX_RELISTEN_DELAY: Duration = Duration::from_secs(8);
/// Most resources one server's stream may follow (a subscription past it is refused).
pub const MAX_SUBSCRIBED_URIS: usize = 256;

/// A connection's `subscriptions/listen` stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Listen {
    /// None asked (a legacy connection, or nothing to listen for).
    #[default]
    Off,
    /// Request `id` is the open stream; `acked` once the server acknowledged it; `resent`
    /// when it replaces one that ended (what it missed is listed again on its
    /// acknowledgement).
    Open { id: u64, acked: bool, resent: bool },
    /// The stream ended; asked again at `at` (the `failures`-th ended in a row).
    Closed { at: Instant, failures: u32 },
}

impl Manager {
    /// The filter a stream of `server` asks for, or `None` when there is nothing to hear.
    fn listen_filter(&self, server: &str) -> Option<Value> {
        let caps = self.capabilities(server)?;
        let mut f = Map::new();
        if caps.tools_list_changed {
            f.insert("toolsListChanged".into(), json!(true));
        }
        if caps.prompts_list_changed {
            f.insert("promptsListChanged".into(), json!(true));
        }
        if caps.resources_list_changed {
            f.insert("resourcesListChanged".into(), json!(true));
        }
        let uris = self.servers.get(server).map(|s| &s.listen_uris);
        if let Some(uris) = uris.filter(|u| caps.resources_subscribe && !u.is_empty()) {
            f.insert("resourceSubscriptions".into(), json!(uris));
        }
        (!f.is_empty()).then_some(Value::Object(f))
    }

    /// A stateless connection became ready (or its stream is due again): ask for the stream.
    pub(super) fn open_listen(&mut self, conn: ConnId, server: &str) {
        if !self.is_modern(conn) {
            return;
        }
        let (failures, resent) = match self.conns.get(&conn).map(|c| &c.listen) {
            Some(Listen::Closed { failures, .. }) => (*failures, true),
            _ => (0, false),
        };
        let Some(filter) = self.listen_filter(server) else {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.listen = Listen::Off;
            }
            return;
        };
        let params = json!({ "notifications": filter });
        let Some(id) = self.request(conn, "subscriptions/listen", Some(params), Req::Listen) else {
            return;
        };
        self.counters.listens_sent += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.listen = Listen::Open {
                id,
                acked: false,
                resent,
            };
            c.listen_failures = failures;
        }
    }

    /// The stream `id` on `conn` ended: its answer came, or the transport lost it.
    pub(super) fn on_listen_ended(&mut self, conn: ConnId, server: &str, id: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !matches!(c.listen, Listen::Open { id: open, .. } if open == id) {
            return;
        }
        c.tracker.forget(id);
        let connected = self
            .servers
            .get(server)
            .is_some_and(|s| matches!(s.phase, Stage::Connected { conn: c, .. } if c == conn));
        if !connected {
            c.listen = Listen::Off;
            return;
        }
        let failures = c.listen_failures + 1;
        let shift = failures.saturating_sub(1).min(16);
        let delay = (Duration::from_millis(500) * (1u32 << shift)).min(MAX_RELISTEN_DELAY);
        let at = self.now + delay;
        c.listen = Listen::Closed { at, failures };
        self.counters.listen_streams_closed += 1;
        self.timers.arm(at, TimerReason::Relisten { conn });
        self.diag(
            Some(server),
            Level::Debug,
            format!(
                "the subscriptions stream closed; asked again in {} ms",
                delay.as_millis()
            ),
        );
    }

    /// The server answered stream `id` with an error: it will not serve one, and asking again
    /// would only be refused again, so the connection goes without (until the next attempt).
    pub(super) fn on_listen_refused(
        &mut self,
        conn: ConnId,
        server: &str,
        id: u64,
        error: protocol::RpcError,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !matches!(c.listen, Listen::Open { id: open, .. } if open == id) {
            return;
        }
        c.listen = Listen::Off;
        self.counters.listens_refused += 1;
        self.diag(
            Some(server),
            Level::Warn,
            format!(
                "subscriptions/listen refused (MCP error {}: {}): changes will not be announced",
                error.code, error.message
            ),
        );
    }

    /// A closed stream is due again.
    pub(super) fn on_relisten_due(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let Listen::Closed { at, .. } = c.listen else {
            return;
        };
        if at > self.now {
            return;
        }
        let server = c.server.clone();
        let connected = self
            .servers
            .get(&server)
            .is_some_and(|s| matches!(s.phase, Stage::Connected { conn: c, .. } if c == conn));
        if connected {
            self.counters.listens_resent += 1;
            self.open_listen(conn, &server);
        }
    }

    /// A notification on `conn` named stream `subscription`. An acknowledgement of the open
    /// stream restarts the ladder and, for a stream asked again, lists what it covers again.
    pub(super) fn on_stream_notification(
        &mut self,
        conn: ConnId,
        server: &str,
        subscription: u64,
        acknowledged: bool,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let refetch = match &mut c.listen {
            Listen::Open { id, acked, resent } if *id == subscription => {
                let first_ack = acknowledged && !*acked;
                if first_ack {
                    *acked = true;
                    c.listen_failures = 0;
                    self.counters.listens_acknowledged += 1;
                }
                first_ack && *resent
            }
            _ => false,
        };
        if refetch {
            self.counters.lists_refetched_after_stream += 1;
            let caps = self.capabilities(server).cloned().unwrap_or_default();
            if caps.tools_list_changed {
                self.on_list_changed(server);
            }
            if caps.resources_list_changed {
                self.on_catalog_list_changed(server, false);
            }
            if caps.prompts_list_changed {
                self.on_catalog_list_changed(server, true);
            }
        }
    }

    /// `resources/subscribe` or `unsubscribe` on a stateless connection: a change of the
    /// stream's filter, so the stream is asked again; `Some(result)` when it was one.
    pub(super) fn subscription_on_stream(
        &mut self,
        conn: ConnId,
        server: &str,
        op: &Operation,
    ) -> Option<Result<(), super::CallError>> {
        if !self.is_modern(conn) {
            return None;
        }
        let (uri, add) = match op {
            Operation::Subscribe { uri, .. } => (uri, true),
            Operation::Unsubscribe { uri, .. } => (uri, false),
            _ => return None,
        };
        let s = self.servers.get_mut(server)?;
        if add && !s.listen_uris.contains(uri) && s.listen_uris.len() >= MAX_SUBSCRIBED_URIS {
            return Some(Err(super::CallError::Protocol(format!(
                "{server} already follows {MAX_SUBSCRIBED_URIS} resources"
            ))));
        }
        let changed = if add {
            s.listen_uris.insert(uri.clone())
        } else {
            s.listen_uris.remove(uri)
        };
        self.counters.stream_subscriptions_changed += 1;
        if changed {
            if let Some(Listen::Open { id, .. }) = self.conns.get(&conn).map(|c| c.listen.clone()) {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tracker.forget(id);
                }
                self.send_cancelled(conn, id, "the subscriptions changed");
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                // Asked at once, not on the ladder.
                c.listen = Listen::Off;
            }
            self.open_listen(conn, server);
        }
        Some(Ok(()))
    }
}
