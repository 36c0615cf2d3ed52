//! Multi round-trip requests: a stateless server answers a tool call with an
//! `InputRequiredResult` instead of sending requests of its own. Each input it asks for goes to
//! the embedder's handler like a server's request would (`Event::PeerRequest`, answered with
//! `AnswerPeerRequest`); `roots/list` is answered from the roots the core holds. Once every
//! input is in, the call is sent again — a new JSON-RPC id — with `inputResponses` and the
//! server's `requestState` echoed exactly as it was written (never read). A server may ask
//! again, round after round, within the call's deadline and at most [`MAX_INPUT_ROUNDS`]
//! times. An input the client cannot give (no handler, malformed) fails the call with
//! `CallError::InputUnavailable`.

use super::calls::CallState;
use super::errors::CallError;
use super::peer::{Origin, PeerRequestKey, Pending, WithdrawReason};
use super::{CallId, CallOutcome, ConnId, Event, Manager, TimerReason};
use crate::protocol::{self, PeerRequestKind};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Most input rounds one call may take: a server that asks for ever is cut off.
pub const MAX_INPUT_ROUNDS: u32 = 32;

/// One round of inputs a call waits for.
#[derive(Debug, Clone)]
pub(super) struct InputRound {
    /// Inputs still unanswered, by the server's key, with the embedder request for each.
    waiting: BTreeMap<String, PeerRequestKey>,
    /// The answers so far, by key.
    responses: Map<String, Value>,
    /// The server's `requestState`, as written.
    state: Option<Box<RawValue>>,
}

/// What a retry carries besides the original params.
#[derive(Debug, Clone)]
pub(super) struct Retry {
    /// `inputResponses` (absent when the server asked for none).
    pub(super) responses: Option<Map<String, Value>>,
    /// `requestState`, exactly as the server wrote it.
    pub(super) state: Option<Box<RawValue>>,
}

impl Manager {
    /// Call `call` was answered with an `InputRequiredResult`.
    pub(super) fn on_call_input_required(&mut self, call: CallId, raw: &RawValue) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        let CallState::Sent { conn, .. } = c.state else {
            return;
        };
        let server = c.server.clone();
        let rounds = c.input_rounds + 1;
        self.counters.input_required_rounds += 1;
        if rounds > MAX_INPUT_ROUNDS {
            let error = CallError::Protocol(format!(
                "the server asked for input more than {MAX_INPUT_ROUNDS} times"
            ));
            self.complete_call(call, CallOutcome::Err(error));
            return;
        }
        let ir = match protocol::parse_input_required(raw, "tools/call") {
            Ok(ir) => ir,
            Err(e) => {
                self.complete_call(call, CallOutcome::Err(CallError::Protocol(e.to_string())));
                return;
            }
        };
        let asked = !ir.requests.is_empty();
        let mut round = InputRound {
            waiting: BTreeMap::new(),
            responses: Map::new(),
            state: ir.state,
        };
        let features = self.opts.client_features;
        let mut unavailable = None;
        let mut kinds = Vec::new();
        for r in ir.requests {
            if r.method == "roots/list" {
                round
                    .responses
                    .insert(r.key, protocol::roots_result(self.roots()));
                continue;
            }
            match protocol::parse_client_request(&r.method, &r.params, &features) {
                Ok(Some(kind)) => kinds.push((r.key, kind)),
                Ok(None) => {
                    unavailable = Some((r.method, "the client does not know this request".into()))
                }
                Err(refusal) => unavailable = Some((r.method, refusal.message)),
            }
            if unavailable.is_some() {
                break;
            }
        }
        if let Some((method, reason)) = unavailable {
            self.counters.inputs_unavailable += 1;
            self.complete_call(
                call,
                CallOutcome::Err(CallError::InputUnavailable { method, reason }),
            );
            return;
        }
        for (key, kind) in kinds {
            let pkey = self.issue_input(conn, &server, call, key.clone(), kind);
            round.waiting.insert(key, pkey);
        }
        if let Some(c) = self.calls.get_mut(&call) {
            c.input_rounds = rounds;
            if round.waiting.is_empty() {
                c.state = CallState::Sent {
                    conn,
                    req: u64::MAX,
                };
                let retry = Retry {
                    responses: asked.then_some(round.responses),
                    state: round.state,
                };
                self.retry_call(call, conn, retry);
            } else {
                c.state = CallState::Input {
                    conn,
                    round: Box::new(round),
                };
            }
        }
    }

    /// Hand one input to the embedder, as a server's request would be.
    fn issue_input(
        &mut self,
        conn: ConnId,
        server: &str,
        call: CallId,
        key: String,
        kind: PeerRequestKind,
    ) -> PeerRequestKey {
        let pkey = PeerRequestKey(self.peer.next);
        self.peer.next += 1;
        let deadline = self.now + self.opts.peer_request_timeout;
        self.timers
            .arm(deadline, TimerReason::PeerRequest { key: pkey });
        self.counters.peer_requests_forwarded += 1;
        self.peer.pending.insert(
            pkey,
            Pending {
                conn,
                server: server.to_string(),
                origin: Origin::Input { call, key },
                kind: kind.clone(),
                deadline,
            },
        );
        self.emit(Event::PeerRequest {
            server: server.to_string(),
            request: pkey,
            kind,
        });
        pkey
    }

    /// The embedder answered input `key` of call `call`.
    pub(super) fn on_input_answer(
        &mut self,
        call: CallId,
        key: String,
        kind: &PeerRequestKind,
        result: Result<Value, (i64, String)>,
    ) {
        let Some(c) = self.calls.get_mut(&call) else {
            return;
        };
        let CallState::Input { conn, round } = &mut c.state else {
            return;
        };
        let conn = *conn;
        let value = match result {
            Ok(v) => v,
            Err((_, message)) => {
                self.counters.inputs_unavailable += 1;
                let error = CallError::InputUnavailable {
                    method: kind_method(kind).into(),
                    reason: message,
                };
                self.complete_call(call, CallOutcome::Err(error));
                return;
            }
        };
        round.waiting.remove(&key);
        round.responses.insert(key, value);
        if !round.waiting.is_empty() {
            return;
        }
        let retry = Retry {
            responses: Some(std::mem::take(&mut round.responses)),
            state: round.state.take(),
        };
        self.retry_call(call, conn, retry);
    }

    /// An input of call `call` went unanswered for `peer_request_timeout`.
    pub(super) fn on_input_timeout(&mut self, call: CallId, kind: &PeerRequestKind, why: String) {
        self.counters.inputs_unavailable += 1;
        let error = CallError::InputUnavailable {
            method: kind_method(kind).into(),
            reason: why,
        };
        self.complete_call(call, CallOutcome::Err(error));
    }

    /// Send call `call` again with its inputs.
    fn retry_call(&mut self, call: CallId, conn: ConnId, retry: Retry) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        let (raw, args, meta, progress) = (
            c.tool.clone(),
            c.arguments.clone(),
            c.meta.clone(),
            c.progress,
        );
        self.counters.input_retries += 1;
        match self.send_call(conn, call, &raw, args, progress, meta, Some(retry)) {
            Some((req, _)) => {
                if let Some(c) = self.calls.get_mut(&call) {
                    c.state = CallState::Sent { conn, req };
                }
            }
            None => {
                let error = CallError::Disconnected {
                    server: self
                        .calls
                        .get(&call)
                        .map(|c| c.server.clone())
                        .unwrap_or_default(),
                };
                self.complete_call(call, CallOutcome::Err(error));
            }
        }
    }

    /// Call `call` ended while inputs were still asked of the embedder: withdraw them.
    pub(super) fn withdraw_inputs(&mut self, call: CallId) {
        let keys: Vec<PeerRequestKey> = self
            .peer
            .pending
            .iter()
            .filter(|(_, p)| matches!(&p.origin, Origin::Input { call: c, .. } if *c == call))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(p) = self.take_pending(key) {
                self.emit(Event::PeerRequestWithdrawn {
                    server: p.server,
                    request: key,
                    reason: WithdrawReason::RequestEnded,
                });
            }
        }
    }
}

fn kind_method(kind: &PeerRequestKind) -> &'static str {
    if kind.is_elicitation() {
        "elicitation/create"
    } else {
        "sampling/createMessage"
    }
}
