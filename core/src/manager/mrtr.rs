//! Multi round-trip requests: a stateless server answers a `tools/call`, `resources/read` or
//! `prompts/get` with an `InputRequiredResult` instead of sending requests of its own. Each
//! input it asks for goes to the embedder's handler like a server's request would
//! (`Event::PeerRequest`, answered with `AnswerPeerRequest`, naming the server's key for it);
//! `roots/list` is answered from the roots the core holds, or handed to the embedder the same
//! way when `ManagerOptions::roots_inputs` says so (a gateway asks its own client). Once every input is in, the request is sent again — a new JSON-RPC id
//! — with `inputResponses` and the server's `requestState` echoed exactly as it was written
//! (never read). A server may ask again, round after round, within the request's deadline and
//! at most [`MAX_INPUT_ROUNDS`] times. An input the client cannot give (no handler, malformed)
//! fails the request with `CallError::InputUnavailable`. Tool calls and operations share the
//! [`CallId`] space, so one input machinery serves both.

use super::calls::CallState;
use super::errors::CallError;
use super::operations::OpState;
use super::peer::{Origin, PeerRequestKey, Pending, RoundInput, WithdrawReason};
use super::{CallId, CallOutcome, ConnId, Event, Manager, TimerReason};
use crate::catalog::OperationOutcome;
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

/// How a round begins.
enum RoundStart {
    /// Nothing to wait for (only roots, or no inputs at all): retry at once.
    Ready(Retry),
    /// Inputs asked of the embedder.
    Waiting(InputRound),
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
        let (server, rounds) = (c.server.clone(), c.input_rounds + 1);
        match self.open_round(call, conn, &server, "tools/call", rounds, raw) {
            Err(error) => self.complete_call(call, CallOutcome::Err(error)),
            Ok(start) => {
                if let Some(c) = self.calls.get_mut(&call) {
                    c.input_rounds = rounds;
                    match start {
                        RoundStart::Ready(retry) => {
                            c.state = CallState::Sent {
                                conn,
                                req: u64::MAX,
                            };
                            self.retry_call(call, conn, retry);
                        }
                        RoundStart::Waiting(round) => {
                            c.state = CallState::Input {
                                conn,
                                round: Box::new(round),
                            };
                        }
                    }
                }
            }
        }
    }

    /// Operation `call` (a read or a prompt) was answered with an `InputRequiredResult`.
    pub(super) fn on_op_input_required(&mut self, call: CallId, raw: &RawValue) {
        let Some(o) = self.catalog.ops.get(&call) else {
            return;
        };
        let OpState::Sent { conn, .. } = o.state else {
            return;
        };
        let (server, method, rounds) = (o.server.clone(), o.op.method(), o.input_rounds + 1);
        match self.open_round(call, conn, &server, method, rounds, raw) {
            Err(error) => self.complete_op(call, OperationOutcome::Err(error)),
            Ok(start) => {
                if let Some(o) = self.catalog.ops.get_mut(&call) {
                    o.input_rounds = rounds;
                    match start {
                        RoundStart::Ready(retry) => {
                            o.state = OpState::Sent {
                                conn,
                                req: u64::MAX,
                            };
                            self.retry_op(call, conn, retry);
                        }
                        RoundStart::Waiting(round) => {
                            o.state = OpState::Input {
                                conn,
                                round: Box::new(round),
                            };
                        }
                    }
                }
            }
        }
    }

    /// Read round `rounds` of request `call` (`method` on `conn`): answer what the core can,
    /// hand the rest to the embedder.
    fn open_round(
        &mut self,
        call: CallId,
        conn: ConnId,
        server: &str,
        method: &str,
        rounds: u32,
        raw: &RawValue,
    ) -> Result<RoundStart, CallError> {
        self.counters.input_required_rounds += 1;
        if rounds > MAX_INPUT_ROUNDS {
            return Err(CallError::Protocol(format!(
                "the server asked for input more than {MAX_INPUT_ROUNDS} times"
            )));
        }
        let ir = protocol::parse_input_required(raw, method)
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        let asked = !ir.requests.is_empty();
        let mut round = InputRound {
            waiting: BTreeMap::new(),
            responses: Map::new(),
            state: ir.state,
        };
        let features = self.opts.client_features;
        let mut kinds = Vec::new();
        for r in ir.requests {
            if r.method == "roots/list" {
                if self.opts.roots_inputs == super::RootsInputs::Embedder {
                    kinds.push((r.key, PeerRequestKind::Roots));
                } else {
                    round
                        .responses
                        .insert(r.key, protocol::roots_result(self.roots()));
                }
                continue;
            }
            let reason = match protocol::parse_client_request(&r.method, &r.params, &features) {
                Ok(Some(kind)) => {
                    kinds.push((r.key, kind));
                    continue;
                }
                Ok(None) => "the client does not know this request".to_string(),
                Err(refusal) => refusal.message,
            };
            self.counters.inputs_unavailable += 1;
            return Err(CallError::InputUnavailable {
                method: r.method,
                reason,
            });
        }
        let of = kinds.len();
        for (key, kind) in kinds {
            let pkey = self.issue_input(
                conn,
                server,
                call,
                RoundInput {
                    key: key.clone(),
                    of,
                },
                kind,
            );
            round.waiting.insert(key, pkey);
        }
        if round.waiting.is_empty() {
            Ok(RoundStart::Ready(Retry {
                responses: asked.then_some(round.responses),
                state: round.state,
            }))
        } else {
            Ok(RoundStart::Waiting(round))
        }
    }

    /// Hand one input to the embedder, as a server's request would be.
    fn issue_input(
        &mut self,
        conn: ConnId,
        server: &str,
        call: CallId,
        input: RoundInput,
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
                origin: Origin::Input {
                    call,
                    key: input.key.clone(),
                },
                kind: kind.clone(),
                deadline,
            },
        );
        self.emit(Event::PeerRequest {
            server: server.to_string(),
            request: pkey,
            kind,
            input: Some(input),
        });
        pkey
    }

    /// The round request `call` (a tool call or an operation) waits in, and its connection.
    fn waiting_round(&mut self, call: CallId) -> Option<(ConnId, &mut InputRound)> {
        if let Some(c) = self.calls.get_mut(&call) {
            return match &mut c.state {
                CallState::Input { conn, round } => Some((*conn, &mut **round)),
                _ => None,
            };
        }
        match &mut self.catalog.ops.get_mut(&call)?.state {
            OpState::Input { conn, round } => Some((*conn, &mut **round)),
            _ => None,
        }
    }

    /// Fail request `call` (a tool call or an operation) with `error`.
    fn fail_request(&mut self, call: CallId, error: CallError) {
        if self.calls.contains_key(&call) {
            self.complete_call(call, CallOutcome::Err(error));
        } else {
            self.complete_op(call, OperationOutcome::Err(error));
        }
    }

    /// The embedder answered input `key` of request `call`.
    pub(super) fn on_input_answer(
        &mut self,
        call: CallId,
        key: String,
        kind: &PeerRequestKind,
        result: Result<Value, (i64, String)>,
    ) {
        let Some((conn, round)) = self.waiting_round(call) else {
            return;
        };
        let value = match result {
            Ok(v) => v,
            Err((_, message)) => {
                self.counters.inputs_unavailable += 1;
                let error = CallError::InputUnavailable {
                    method: kind.method().into(),
                    reason: message,
                };
                self.fail_request(call, error);
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
        if self.calls.contains_key(&call) {
            self.retry_call(call, conn, retry);
        } else {
            self.retry_op(call, conn, retry);
        }
    }

    /// An input of request `call` went unanswered for `peer_request_timeout`.
    pub(super) fn on_input_timeout(&mut self, call: CallId, kind: &PeerRequestKind, why: String) {
        self.counters.inputs_unavailable += 1;
        let error = CallError::InputUnavailable {
            method: kind.method().into(),
            reason: why,
        };
        self.fail_request(call, error);
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

    /// Send operation `call` again with its inputs.
    fn retry_op(&mut self, call: CallId, conn: ConnId, retry: Retry) {
        self.counters.input_retries += 1;
        match self.resend_op(conn, call, retry) {
            Some(req) => {
                if let Some(o) = self.catalog.ops.get_mut(&call) {
                    o.state = OpState::Sent { conn, req };
                }
            }
            None => {
                let server = self
                    .catalog
                    .ops
                    .get(&call)
                    .map(|o| o.server.clone())
                    .unwrap_or_default();
                let error = CallError::Disconnected { server };
                self.complete_op(call, OperationOutcome::Err(error));
            }
        }
    }

    /// Request `call` ended while inputs were still asked of the embedder: withdraw them.
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
