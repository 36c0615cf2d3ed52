//! Servers' requests to the client, both sides: simulated servers ask for sampling and
//! elicitation (form and URL mode) when initialized and during calls, cancel some of them a
//! little later, and check every answer that reaches them; the simulated embedder answers
//! promptly, declines, fails, answers late (past the timeout), never, or twice, and changes
//! its roots now and then. Runs whose scenario has no `PeerPlan` draw nothing here, so their
//! traces are as they were.
//!
//! What the servers check, on the wire: each request is answered at most once and never after
//! the manager received its cancellation (`PeerRequestsAnsweredOnce`,
//! `NothingSentForCancelledRequests`); a request for a declared capability reaches the
//! embedder (never "method not found") and one for an undeclared one is refused
//! (`DeclaredCapabilitiesHaveHandlers`); and, after the heal, none is left unanswered on a
//! live connection once its timeout has passed.

use super::received::{self, Received};
use super::server::Tag;
use super::{Ev, World};
use crate::json::At;
use crate::verdict::Invariant;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_core::manager::{ConnId, Input, TransportEvent};
use switchboard_core::protocol::{form_defaults, PeerAnswer, PeerRequestKind, Root};
use switchboard_core::{Instant, PeerRequestKey};

/// One request a server sent, as it sees it.
#[derive(Debug, Clone)]
pub(super) struct Wire {
    method: &'static str,
    /// URL mode (needs the `url` mode declared).
    url: bool,
    sent_at: Instant,
    state: WireState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WireState {
    Waiting,
    Answered,
    /// The manager received the cancellation.
    Cancelled,
}

/// A process's side of its requests to the client.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcPeer {
    next: u64,
    wire: BTreeMap<u64, Wire>,
    /// The capabilities the manager declared in `initialize`.
    declared: Option<Value>,
    /// URL elicitations the client accepted, not yet announced complete.
    accepted_urls: Vec<String>,
}

/// The wire id of a request a server sent (`peer-<n>`).
fn wire_id(id: Option<&Value>) -> Option<u64> {
    id?.as_str()?.strip_prefix("peer-")?.parse().ok()
}

impl World<'_> {
    /// A frame the server received: remember what `initialize` declared.
    pub(super) fn peer_saw_frame(&mut self, conn: ConnId, r: &Received) {
        if r.method() == Some("initialize") {
            let caps = r.params.capabilities.map(received::value_of);
            if let Some(p) = self.procs.get_mut(&conn) {
                p.peer.declared = caps;
            }
        }
    }

    /// Maybe ask the client something (a chance the server takes when it is initialized and
    /// on each call).
    pub(super) fn peer_ask(&mut self, conn: ConnId) {
        let Some(plan) = self.sc.options.peer.clone() else {
            return;
        };
        if self.healed || self.peer_rng.below(100) >= u64::from(plan.ask_pct) {
            return;
        }
        let kind = self.peer_rng.below(3);
        let now = self.now;
        let Some(p) = self.procs.get_mut(&conn) else {
            return;
        };
        let n = p.peer.next;
        p.peer.next += 1;
        let (method, params, url) = match kind {
            0 => (
                "sampling/createMessage",
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 8}),
                false,
            ),
            1 => (
                "elicitation/create",
                json!({"message": "Who?", "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "default": "sim"},
                    "n": {"type": "integer", "default": 3},
                    "ok": {"type": "boolean"}
                }}}),
                false,
            ),
            _ => (
                "elicitation/create",
                json!({"mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": format!("e-{n}")}),
                true,
            ),
        };
        p.peer.wire.insert(
            n,
            Wire {
                method,
                url,
                sent_at: now,
                state: WireState::Waiting,
            },
        );
        self.cov.peer_client_requests_sent += 1;
        let frame = json!({"jsonrpc": "2.0", "id": format!("peer-{n}"), "method": method, "params": params});
        let wait = 1 + self.peer_rng.below(20);
        let at = self.after_ms(wait);
        self.push_frame(conn, at, frame, Tag::None);
        if self.peer_rng.below(100) < u64::from(plan.cancel_pct) {
            let later = at + Duration::from_millis(self.peer_rng.below(plan.timeout_ms + 200));
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": format!("peer-{n}"), "reason": "changed my mind"}});
            self.push_frame(conn, later, cancel, Tag::PeerCancel { id: n });
        }
    }

    /// A frame from the server, without the frame faults of ordinary answers (a request sent
    /// twice would rightly be answered twice).
    fn push_frame(&mut self, conn: ConnId, at: Instant, v: Value, tag: Tag) {
        let frame = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
        self.push(
            at,
            Ev::Deliver {
                conn,
                event: TransportEvent::Frame(frame),
                exit: false,
                tag,
            },
        );
    }

    /// The manager received the server's cancellation of request `id`.
    pub(super) fn peer_cancel_delivered(&mut self, conn: ConnId, id: u64) {
        if let Some(w) = self
            .procs
            .get_mut(&conn)
            .and_then(|p| p.peer.wire.get_mut(&id))
        {
            if w.state == WireState::Waiting {
                w.state = WireState::Cancelled;
                self.cov.peer_cancels_delivered += 1;
            }
        }
    }

    /// A response the server received; `true` when it answers one of its `peer-` requests.
    pub(super) fn peer_wire_answer(&mut self, conn: ConnId, id: Option<&Value>, v: &Value) -> bool {
        let Some(n) = wire_id(id) else {
            return false;
        };
        let Some(p) = self.procs.get_mut(&conn) else {
            return true;
        };
        let declared = p.peer.declared.clone().unwrap_or(Value::Null);
        let Some(w) = p.peer.wire.get_mut(&n) else {
            let d = format!("an answer to a request the server never sent: {v}");
            self.step
                .output_violations
                .push((Invariant::PeerRequestsAnsweredOnce, d));
            return true;
        };
        let state = w.state;
        w.state = WireState::Answered;
        let (method, url) = (w.method, w.url);
        self.cov.peer_client_answers_checked += 1;
        match state {
            WireState::Answered => {
                let d = format!("request peer-{n} ({method}) answered twice: {v}");
                self.step
                    .output_violations
                    .push((Invariant::PeerRequestsAnsweredOnce, d));
                return true;
            }
            WireState::Cancelled => {
                let d = format!(
                    "request peer-{n} ({method}) answered after the server cancelled it: {v}"
                );
                self.step
                    .output_violations
                    .push((Invariant::NothingSentForCancelledRequests, d));
                return true;
            }
            WireState::Waiting => {}
        }
        let feature_on = match method {
            "sampling/createMessage" => declared.get("sampling").is_some(),
            _ => declared
                .get("elicitation")
                .is_some_and(|e| e.get(if url { "url" } else { "form" }).is_some()),
        };
        let code = v
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64);
        let ok = if feature_on {
            // Handled: a result, or the embedder's or the core's error — never "not found".
            code != Some(-32601) && (code.is_some() || v.get("result").is_some())
        } else {
            // Refused: not offered at all, or not in this mode.
            matches!(code, Some(-32601) | Some(-32602))
        };
        if !ok {
            let d = format!("request peer-{n} ({method}, declared {declared}) got {v}");
            self.step
                .output_violations
                .push((Invariant::DeclaredCapabilitiesHaveHandlers, d));
            return true;
        }
        if url && v.at("/result/action") == Some(&json!("accept")) {
            // The interaction is done out of band a little later (sometimes announced twice).
            let eid = format!("e-{n}");
            if let Some(p) = self.procs.get_mut(&conn) {
                p.peer.accepted_urls.push(eid.clone());
            }
            let wait = 5 + self.peer_rng.below(50);
            let at = self.after_ms(wait);
            let done = json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": eid}});
            self.push_frame(conn, at, done.clone(), Tag::None);
            if self.peer_rng.below(4) == 0 {
                self.push_frame(conn, at + Duration::from_millis(3), done, Tag::None);
            }
        }
        true
    }

    /// The embedder sees a request of a server's: it answers as the plan's weights draw.
    pub(super) fn embedder_peer_request(
        &mut self,
        request: PeerRequestKey,
        kind: &PeerRequestKind,
    ) {
        let Some(plan) = self.sc.options.peer.clone() else {
            return;
        };
        let on = match kind {
            PeerRequestKind::Sampling { .. } => plan.sampling,
            PeerRequestKind::ElicitForm { .. } => plan.form,
            PeerRequestKind::ElicitUrl { .. } => plan.url,
            _ => false,
        };
        if !on {
            let d = format!("the embedder was handed {kind:?}, a feature it does not offer");
            self.step
                .output_violations
                .push((Invariant::DeclaredCapabilitiesHaveHandlers, d));
            return;
        }
        let good = match kind {
            PeerRequestKind::Sampling { .. } => PeerAnswer::Result {
                result: json!({"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "sim"}),
            },
            PeerRequestKind::ElicitForm {
                requested_schema, ..
            } => PeerAnswer::Accept {
                content: Some(form_defaults(requested_schema)),
            },
            _ => PeerAnswer::Accept { content: None },
        };
        let total: u64 = plan
            .answers
            .iter()
            .map(|&w| u64::from(w))
            .sum::<u64>()
            .max(1);
        let mut pick = self.peer_rng.below(total);
        let mut choice = 0;
        for (k, &w) in plan.answers.iter().enumerate() {
            if pick < u64::from(w) {
                choice = k;
                break;
            }
            pick -= u64::from(w);
        }
        let wait = 1 + self.peer_rng.below(100);
        let soon = self.after_ms(wait);
        let timeout = Duration::from_millis(plan.timeout_ms);
        match choice {
            0 => self.push(
                soon,
                Ev::PeerAnswer {
                    request,
                    answer: good,
                },
            ),
            1 => self.push(
                soon,
                Ev::PeerAnswer {
                    request,
                    answer: PeerAnswer::Decline,
                },
            ),
            2 => self.push(
                soon,
                Ev::PeerAnswer {
                    request,
                    answer: PeerAnswer::Error {
                        code: -32603,
                        message: "the embedder failed".into(),
                    },
                },
            ),
            3 => {
                let late = self.now + timeout + Duration::from_millis(50);
                self.push(
                    late,
                    Ev::PeerAnswer {
                        request,
                        answer: good,
                    },
                );
            }
            4 => self.cov.peer_never_answered += 1,
            _ => {
                self.push(
                    soon,
                    Ev::PeerAnswer {
                        request,
                        answer: good.clone(),
                    },
                );
                let again = soon + Duration::from_millis(1 + self.peer_rng.below(10));
                self.push(
                    again,
                    Ev::PeerAnswer {
                        request,
                        answer: good,
                    },
                );
            }
        }
    }

    /// The embedder's answer reaches the manager.
    pub(super) fn peer_answer_input(&mut self, request: PeerRequestKey, answer: PeerAnswer) {
        self.input(Input::AnswerPeerRequest { request, answer }, |_| {});
    }

    /// After an embedder action: maybe the roots change.
    pub(super) fn maybe_set_roots(&mut self) {
        let Some(plan) = &self.sc.options.peer else {
            return;
        };
        let pct = u64::from(plan.set_roots_pct);
        if self.peer_rng.below(100) >= pct {
            return;
        }
        let n = self.peer_rng.below(3);
        let roots = (0..n)
            .map(|k| Root {
                uri: format!("file:///work/root-{k}-{}", self.events),
                name: None,
            })
            .collect();
        self.input(Input::SetRoots { roots }, |_| {});
    }

    /// After the heal: no request is left unanswered on a live connection past its timeout.
    pub(super) fn peer_requests_settled(&self) -> Result<(), String> {
        let Some(plan) = &self.sc.options.peer else {
            return Ok(());
        };
        let slack = Duration::from_millis(plan.timeout_ms + 1_000);
        for (conn, p) in &self.procs {
            if !p.alive() || p.reported {
                continue;
            }
            for (n, w) in &p.peer.wire {
                if w.state == WireState::Waiting && w.sent_at + slack <= self.now {
                    return Err(format!(
                        "request peer-{n} ({}) on #{} was never answered",
                        w.method, conn.0
                    ));
                }
            }
        }
        Ok(())
    }
}
