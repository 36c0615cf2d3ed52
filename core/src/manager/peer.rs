//! Requests a server sends the client, and the roots it is shown. `ping` and `roots/list` are
//! answered here at once; `sampling/createMessage` and `elicitation/create` become a
//! [`Event::PeerRequest`] under a key the core issues, and the embedder answers it with
//! [`Input::AnswerPeerRequest`](super::Input::AnswerPeerRequest). Each such request is
//! answered on the wire exactly once: with the embedder's answer, with a timeout error when
//! `peer_request_timeout` passes, or at once with an error when the feature is off, the
//! request is malformed or too many are waiting. A server's `notifications/cancelled` for it,
//! or the end of its connection, withdraws it instead (nothing is sent), and the embedder is
//! told with [`Event::PeerRequestWithdrawn`]. A second answer, or one for a key the core no
//! longer holds, is ignored with a diagnostic.

use super::{CallId, ConnId, Event, FrameKind, FrameMeta, Level, Manager, TimerReason};
use crate::protocol::{
    self, AnswerClass, PeerAnswer, PeerRequestId, PeerRequestKind, Root, REQUEST_TIMEOUT,
};
use crate::time::Instant;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};

/// The core's key for one request of a server's waiting for the embedder's answer: unique for
/// the manager's life, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PeerRequestKey(pub u64);

/// One input of a stateless server's `InputRequiredResult`, as the embedder is handed it
/// (`Event::PeerRequest::input`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoundInput {
    /// The server's key for it. An embedder that asks a client of its own for the inputs may
    /// ask under the same keys.
    pub key: String,
    /// How many inputs of that answer the embedder is handed, this one included: they come
    /// one event after the other, so an embedder that asks for them all at once knows when
    /// it has them all.
    pub of: usize,
}

/// Why a request of a server's no longer waits for the embedder's answer (other than the
/// answer itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WithdrawReason {
    /// The server cancelled it (`notifications/cancelled`); nothing is sent for it.
    CancelledByServer,
    /// Its connection ended; nothing can be sent for it.
    ConnectionClosed,
    /// `peer_request_timeout` passed; the server was answered with a timeout error.
    TimedOut,
    /// It was an input a stateless request asked for, and that request ended (completed,
    /// timed out, cancelled) before the answer came.
    RequestEnded,
}

/// Most roots the manager holds; a longer list given to `SetRoots` is cut, with a warning.
pub const MAX_ROOTS: usize = 1024;

/// Most URL-mode elicitation ids remembered per connection, for matching their completion
/// notices; the oldest is forgotten first.
const MAX_URL_IDS: usize = 64;

/// Where a request waiting for the embedder came from.
#[derive(Debug, Clone)]
pub(super) enum Origin {
    /// A server's JSON-RPC request, answered on the wire under this id.
    Wire(PeerRequestId),
    /// An input a stateless request of ours (`call`) asked for under `key`; the answer goes
    /// into that request's retry.
    Input { call: CallId, key: String },
}

/// A request waiting for the embedder.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub(super) conn: ConnId,
    pub(super) server: String,
    pub(super) origin: Origin,
    pub(super) kind: PeerRequestKind,
    pub(super) deadline: Instant,
}

/// The requests waiting for the embedder, the roots, and the URL elicitations whose
/// completion may still be announced.
#[derive(Debug, Clone, Default)]
pub(super) struct PeerState {
    pub(super) pending: BTreeMap<PeerRequestKey, Pending>,
    pub(super) next: u64,
    roots: Vec<Root>,
    /// URL-mode elicitation ids by connection, oldest first.
    url_ids: BTreeMap<ConnId, VecDeque<String>>,
}

impl PeerState {
    pub(super) fn new(roots: Vec<Root>) -> Self {
        PeerState {
            roots,
            ..Default::default()
        }
    }
}

const RESPONSE: FrameMeta = FrameMeta {
    kind: FrameKind::Response,
    method: None,
    protocol: None,
    name: None,
    params: Vec::new(),
};

impl Manager {
    /// The roots answered to `roots/list`.
    pub fn roots(&self) -> &[Root] {
        &self.peer.roots
    }

    /// Requests of servers waiting for the embedder's answer, oldest first, with the server
    /// that sent each.
    pub fn pending_peer_requests(&self) -> Vec<(PeerRequestKey, &str)> {
        self.peer
            .pending
            .iter()
            .map(|(k, p)| (*k, p.server.as_str()))
            .collect()
    }

    /// The `roots` capability is declared (at `initialize`, for every connection alike).
    fn roots_declared(&self) -> bool {
        self.opts.client_features.roots
            || !self.opts.roots.is_empty()
            || self.opts.roots_inputs == super::RootsInputs::Embedder
    }

    /// The capabilities `initialize` declares.
    pub(super) fn client_capabilities(&self) -> protocol::ClientCapabilities {
        let mut f = self.opts.client_features;
        f.roots = self.roots_declared();
        protocol::client_capabilities(&f)
    }

    /// A request from the server on `conn`.
    pub(super) fn on_peer_request(
        &mut self,
        conn: ConnId,
        server: &str,
        id: PeerRequestId,
        method: &str,
        params: &Value,
    ) {
        let features = self.opts.client_features;
        let kind = match protocol::parse_client_request(method, params, &features) {
            Ok(Some(kind)) => kind,
            Ok(None) => {
                // `ping`, `roots/list`, or a method we do not know.
                self.counters.peer_requests_answered += 1;
                let answer = protocol::answer_peer_request(&id, method, &self.peer.roots);
                self.send(conn, answer, RESPONSE);
                return;
            }
            Err(refusal) => {
                if refusal.off {
                    self.counters.peer_refused_off += 1;
                } else {
                    self.counters.peer_refused_invalid += 1;
                }
                // A method not offered at all is answered like any unknown method.
                if refusal.code != protocol::codes::METHOD_NOT_FOUND {
                    self.diag(
                        Some(server),
                        Level::Debug,
                        format!("refused a {method} request: {}", refusal.message),
                    );
                }
                let frame = protocol::encode_error(&id, refusal.code, &refusal.message);
                self.send(conn, frame, RESPONSE);
                return;
            }
        };
        let waiting = self
            .peer
            .pending
            .values()
            .filter(|p| p.server == server)
            .count();
        if waiting >= self.opts.max_peer_requests {
            self.counters.peer_refused_full += 1;
            let message = format!(
                "too many requests from this server wait for an answer (at most {})",
                self.opts.max_peer_requests
            );
            self.diag(
                Some(server),
                Level::Warn,
                format!("refused a {method} request: {message}"),
            );
            let frame = protocol::encode_error(&id, protocol::codes::INTERNAL_ERROR, &message);
            self.send(conn, frame, RESPONSE);
            return;
        }
        if let PeerRequestKind::ElicitUrl { elicitation_id, .. } = &kind {
            let ids = self.peer.url_ids.entry(conn).or_default();
            if !ids.contains(elicitation_id) {
                if ids.len() >= MAX_URL_IDS {
                    ids.pop_front();
                }
                ids.push_back(elicitation_id.clone());
            }
        }
        let key = PeerRequestKey(self.peer.next);
        self.peer.next += 1;
        let deadline = self.now + self.opts.peer_request_timeout;
        self.timers.arm(deadline, TimerReason::PeerRequest { key });
        self.counters.peer_requests_forwarded += 1;
        self.peer.pending.insert(
            key,
            Pending {
                conn,
                server: server.to_string(),
                origin: Origin::Wire(id),
                kind: kind.clone(),
                deadline,
            },
        );
        self.emit(Event::PeerRequest {
            server: server.to_string(),
            request: key,
            kind,
            input: None,
        });
    }

    /// Take a pending request out, disarming its timer.
    pub(super) fn take_pending(&mut self, key: PeerRequestKey) -> Option<Pending> {
        let p = self.peer.pending.remove(&key)?;
        self.timers
            .disarm(p.deadline, TimerReason::PeerRequest { key });
        Some(p)
    }

    /// The embedder's answer to request `key`.
    pub(super) fn answer_peer_request(&mut self, key: PeerRequestKey, answer: PeerAnswer) {
        let Some(p) = self.take_pending(key) else {
            self.counters.peer_answers_ignored += 1;
            self.diag(
                None,
                Level::Debug,
                format!(
                    "ignored an answer to server request {}: it was answered, withdrawn or never issued",
                    key.0
                ),
            );
            return;
        };
        let id = match p.origin {
            Origin::Wire(id) => id,
            Origin::Input { call, key: input } => {
                let (result, class) = protocol::peer_answer_result(&p.kind, &answer);
                self.count_answer(class);
                self.on_input_answer(call, input, &p.kind, result);
                return;
            }
        };
        let (frame, class) = protocol::encode_peer_answer(&id, &p.kind, &answer);
        self.count_answer(class);
        // A URL elicitation that was not accepted will not complete.
        if class != AnswerClass::Answered {
            self.forget_url_id(p.conn, &p.kind);
        }
        self.send(p.conn, frame, RESPONSE);
    }

    fn count_answer(&mut self, class: AnswerClass) {
        match class {
            AnswerClass::Answered => self.counters.peer_answered += 1,
            AnswerClass::Declined => self.counters.peer_declined += 1,
            AnswerClass::Failed => self.counters.peer_answered_error += 1,
        }
    }

    fn forget_url_id(&mut self, conn: ConnId, kind: &PeerRequestKind) {
        if let PeerRequestKind::ElicitUrl { elicitation_id, .. } = kind {
            if let Some(ids) = self.peer.url_ids.get_mut(&conn) {
                ids.retain(|i| i != elicitation_id);
            }
        }
    }

    /// `peer_request_timeout` passed for request `key`: the server gets a timeout error.
    pub(super) fn on_peer_request_timeout(&mut self, key: PeerRequestKey) {
        let Some(p) = self.take_pending(key) else {
            return;
        };
        self.counters.peer_timed_out += 1;
        let message = format!(
            "the client did not answer within {} ms",
            self.opts.peer_request_timeout.as_millis()
        );
        let withdrawn = Event::PeerRequestWithdrawn {
            server: p.server.clone(),
            request: key,
            reason: WithdrawReason::TimedOut,
        };
        match p.origin {
            Origin::Wire(id) => {
                let frame = protocol::encode_error(&id, REQUEST_TIMEOUT, &message);
                self.forget_url_id(p.conn, &p.kind);
                self.send(p.conn, frame, RESPONSE);
                self.emit(withdrawn);
            }
            Origin::Input { call, .. } => {
                self.emit(withdrawn);
                self.on_input_timeout(call, &p.kind, message);
            }
        }
    }

    /// The server on `conn` cancelled one of its requests: if it waits for the embedder, it
    /// is withdrawn and never answered.
    pub(super) fn on_peer_cancelled(&mut self, conn: ConnId, request_id: &Value) {
        let key = self
            .peer
            .pending
            .iter()
            .find(|(_, p)| {
                p.conn == conn && matches!(&p.origin, Origin::Wire(id) if id.0 == *request_id)
            })
            .map(|(k, _)| *k);
        let Some(p) = key.and_then(|k| self.take_pending(k)) else {
            return;
        };
        self.counters.peer_cancelled_by_server += 1;
        self.forget_url_id(conn, &p.kind);
        if let Some(key) = key {
            self.emit(Event::PeerRequestWithdrawn {
                server: p.server,
                request: key,
                reason: WithdrawReason::CancelledByServer,
            });
        }
    }

    /// Connection `conn` is gone: its requests are withdrawn.
    pub(super) fn withdraw_peer_requests(&mut self, conn: ConnId) {
        self.peer.url_ids.remove(&conn);
        let keys: Vec<PeerRequestKey> = self
            .peer
            .pending
            .iter()
            .filter(|(_, p)| p.conn == conn)
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(p) = self.take_pending(key) {
                self.counters.peer_withdrawn_on_close += 1;
                self.emit(Event::PeerRequestWithdrawn {
                    server: p.server,
                    request: key,
                    reason: WithdrawReason::ConnectionClosed,
                });
            }
        }
    }

    /// `notifications/elicitation/complete` from the server on `conn`: reported when it names
    /// a URL elicitation of this connection not yet completed, ignored otherwise.
    pub(super) fn on_elicitation_complete(&mut self, conn: ConnId, server: &str, id: String) {
        let known = self
            .peer
            .url_ids
            .get_mut(&conn)
            .and_then(|ids| ids.iter().position(|i| *i == id).map(|at| ids.remove(at)))
            .is_some();
        if !known {
            self.diag(
                Some(server),
                Level::Debug,
                format!("ignored the completion of an unknown elicitation {id:?}"),
            );
            return;
        }
        self.counters.elicitations_completed += 1;
        self.emit(Event::ElicitationComplete {
            server: server.to_string(),
            elicitation_id: id,
        });
    }

    /// Replace the roots; every initialized server is told they changed when the `roots`
    /// capability was declared.
    pub(super) fn set_roots(&mut self, mut roots: Vec<Root>) {
        if roots.len() > MAX_ROOTS {
            self.diag(
                None,
                Level::Warn,
                format!(
                    "kept the first {MAX_ROOTS} of {} roots (the most the client holds)",
                    roots.len()
                ),
            );
            roots.truncate(MAX_ROOTS);
        }
        if roots == self.peer.roots {
            return;
        }
        self.peer.roots = roots;
        if !self.roots_declared() {
            return;
        }
        let ready: Vec<ConnId> = self
            .servers
            .values()
            .filter(|s| s.init.is_some())
            .filter_map(|s| s.phase.conn())
            // The stateless revision has no such notification: each request carries what it
            // needs.
            .filter(|c| !self.is_modern(*c))
            .collect();
        for conn in ready {
            self.counters.roots_list_changed_sent += 1;
            self.notify(conn, "notifications/roots/list_changed");
        }
    }
}
