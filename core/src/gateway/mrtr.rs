//! Multi round-trip requests downstream: a client of the stateless revision cannot be sent a
//! request, so a server's request for input in the middle of its call (sampling or
//! elicitation, however the server asked: a request of its own in the older revisions, an
//! `InputRequiredResult` in the stateless one, both reach the gateway as the manager's
//! `PeerRequest`) is answered to the client as an `InputRequiredResult`: the inputs asked so
//! far, each under its key, and a sealed `requestState` naming the call and the round.
//!
//! The key: a server of the stateless revision named its input itself, and the manager hands
//! that name over (`Event::PeerRequest::input`); the client is asked under the same name when
//! no other input of that call waiting for the client has it (the call's round), so a client
//! that knows the server sees the key it expects. A server request of the older revisions
//! has no name; it, and a name already taken by another input of the call still waiting for
//! the client or longer than [`MAX_KEY_LEN`], gets one of the gateway's (`input-<n>`,
//! suffixed until free).
//! Either way the key is sealed in the state with what it asks for, so the retry's answers
//! are matched by the gateway, never by the key's words.
//!
//! A server's `roots/list` input (handed over when the manager's `roots_inputs` is
//! `Embedder`) is asked of the client like sampling when the request declared `roots`;
//! otherwise it is answered at once from the roots the gateway keeps (see `roots`). The call stays in the manager meanwhile ("parked"); the client's retry, carrying
//! that state and its `inputResponses`, answers each input once and takes the call's answer
//! (or the next round's `InputRequiredResult`) on its own exchange.
//!
//! Every input is answered exactly once: by the retry that carries it, or with an error when
//! the client cannot give it (it did not declare the capability, or too many are waiting), or
//! never when the manager withdraws it. A state that does not open (changed, or sealed by
//! another gateway's key) or names a round that is over is refused with `-32602`. A parked
//! call whose client never comes back ends with the call's own timeout; its answer is kept
//! for a retry, a bounded number of them.

use super::modern::ExchangeStatus;
use super::peer::{answer_of, method_and_params, ClientCaps};
use super::seal;
use super::{id_key, wire, ExchangeId, Gateway, GatewayOutput, Pending, PendingKind, SessionId};
use crate::catalog::OperationOutcome;
use crate::manager::{CallError, CallId, CallOutcome, Event, Input, PeerRequestKey, RoundInput};
use crate::protocol::PeerRequestKind;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most inputs one call may wait for at once; one more is refused.
const MAX_INPUTS: usize = 64;
/// Most finished calls kept for a retry that has not come yet.
const MAX_FINISHED_PARKED: usize = 64;
/// Longest server key handed to the client as it is; a longer one gets a key of the
/// gateway's.
pub const MAX_KEY_LEN: usize = 256;

/// The key input `request` is asked under: the server's own (`upstream`) when it is free
/// among the call's inputs waiting now and not too long, else `input-<n>` (`n` the manager's
/// key), suffixed with `-1`, `-2`, ... until free.
fn input_key(
    asked: &BTreeMap<String, Asked>,
    upstream: Option<&str>,
    request: PeerRequestKey,
) -> String {
    if let Some(k) = upstream.filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN) {
        if !asked.contains_key(k) {
            return k.to_string();
        }
    }
    let base = format!("input-{}", request.0);
    let mut key = base.clone();
    let mut n = 0u32;
    while asked.contains_key(&key) {
        n += 1;
        key = format!("{base}-{n}");
    }
    key
}

/// A server's request for input, as the client is asked it.
#[derive(Debug, Clone)]
struct Asked {
    request: PeerRequestKey,
    kind: PeerRequestKind,
    /// Its fingerprint (see `seal`).
    fingerprint: String,
    /// The round it was handed out in, once it was.
    round: Option<u64>,
}

/// How a parked call ended before its client came back.
#[derive(Debug, Clone)]
enum Finished {
    Call(CallOutcome),
    Operation(OperationOutcome),
}

/// A call waiting for its client's retry.
#[derive(Debug, Clone)]
struct Parked {
    round: u64,
    pending: Pending,
    finished: Option<Finished>,
}

/// A request of a stateless client in the manager.
#[derive(Debug, Clone)]
pub(super) struct ModernCall {
    pub(super) server: Option<String>,
    /// The level of the servers' logs the request asked for (`_meta`), if any.
    pub(super) log_level: Option<crate::catalog::LogLevel>,
    caps: ClientCaps,
    method: String,
    /// Inputs not answered yet, by the key the client sees.
    asked: BTreeMap<String, Asked>,
    /// The client's answers so far, by the fingerprint of what they answer: a server asking
    /// the same again (a call run again by another gateway) is answered from here.
    answers: BTreeMap<String, Value>,
    parked: Option<Parked>,
    /// Inputs of the server's current `InputRequiredResult` still to arrive.
    arriving: usize,
    /// Inputs of that round the client did not declare it can give, refused once the round
    /// is in.
    undeclared: Vec<(PeerRequestKey, PeerRequestKind)>,
}

impl ModernCall {
    pub(super) fn new(server: Option<String>, caps: ClientCaps, method: &str) -> Self {
        ModernCall {
            server,
            log_level: None,
            caps,
            method: method.to_string(),
            asked: BTreeMap::new(),
            answers: BTreeMap::new(),
            parked: None,
            arriving: 0,
            undeclared: Vec::new(),
        }
    }
}

impl Gateway {
    /// The calls of stateless clients waiting for the client's retry (an
    /// `InputRequiredResult` went out, the call is still the manager's).
    pub fn parked_calls(&self) -> impl Iterator<Item = CallId> + '_ {
        self.modern
            .calls
            .iter()
            .filter(|(_, c)| c.parked.is_some())
            .map(|(k, _)| *k)
    }
}

impl Gateway {
    /// Run a call again for a retry whose call is not here, with the answers the client
    /// gave so far.
    #[allow(clippy::too_many_arguments)]
    fn replay(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: &Value,
        params: &Value,
        envelope: super::modern::Envelope,
        method: &str,
        known: BTreeMap<String, Value>,
    ) -> Option<super::modern::Refusal> {
        self.counters.replayed += 1;
        if let Some(call) =
            self.modern_forward(session, exchange, id.clone(), method, params, envelope)
        {
            if let Some(m) = self.modern.calls.get_mut(&call) {
                m.answers = known;
            }
        }
        None
    }
}

/// The client capability a server's request needs.
fn capability_of(kind: &PeerRequestKind) -> &'static str {
    match kind {
        PeerRequestKind::Sampling { .. } => "sampling",
        PeerRequestKind::Roots => "roots",
        _ => "elicitation",
    }
}

/// The refusal of a retry whose state does not name a call waiting for it.
fn stale(message: &str) -> super::modern::Refusal {
    super::modern::Refusal::new(wire::INVALID_PARAMS, message, ExchangeStatus::Ok)
}

impl Gateway {
    /// A server asks for input (`input`: which input of its `InputRequiredResult` it is,
    /// if it came in one): when the oldest call to that server is a stateless client's, the
    /// client is asked through an `InputRequiredResult` (or the request refused, or roots
    /// answered from the gateway's) and this returns `true`; else the session machinery
    /// forwards it. The inputs of one `InputRequiredResult` arrive one by one: the client is
    /// answered once the last is in, with all those it can give.
    pub(super) fn mrtr_peer_request(
        &mut self,
        server: &str,
        request: PeerRequestKey,
        kind: &PeerRequestKind,
        input: Option<&RoundInput>,
    ) -> bool {
        // The oldest call to that server that is running (a call waiting for its client's
        // retry asks nothing new until it runs again), else the oldest waiting one.
        let running = self.pending.iter().find_map(|(c, p)| {
            let to_server = match &p.kind {
                PendingKind::Tool { server: Some(s) } => s == server,
                _ => self
                    .modern
                    .calls
                    .get(c)
                    .is_some_and(|m| m.server.as_deref() == Some(server)),
            };
            to_server.then_some(*c)
        });
        let waiting = self
            .modern
            .calls
            .iter()
            .find(|(_, m)| m.server.as_deref() == Some(server) && m.parked.is_some())
            .map(|(c, _)| *c);
        let Some(call) = running.or(waiting) else {
            return false;
        };
        let Some(m) = self.modern.calls.get_mut(&call) else {
            return false;
        };
        // A request of the server's own is a round of one.
        if let Some(i) = input {
            if m.arriving == 0 {
                m.arriving = i.of;
            }
            m.arriving = m.arriving.saturating_sub(1);
        }
        let last = m.arriving == 0;
        self.take_input(server, call, request, kind, input.map(|i| i.key.as_str()));
        if last {
            self.round_in(server, call);
        }
        true
    }

    /// One input of call `call`'s server: answered from the client's earlier answers or
    /// the gateway's roots, kept to be asked of the client, kept to be refused once its
    /// round is in (the client did not declare what it needs), or refused now.
    fn take_input(
        &mut self,
        server: &str,
        call: CallId,
        request: PeerRequestKey,
        kind: &PeerRequestKind,
        key: Option<&str>,
    ) {
        let Some(m) = self.modern.calls.get_mut(&call) else {
            return;
        };
        let (method, params) = method_and_params(kind);
        let fingerprint = seal::fingerprint(method, &params);
        if let Some(given) = m.answers.get(&fingerprint) {
            // Answered in an earlier round (this call runs again for a retry).
            let answer = answer_of(kind.is_elicitation(), Ok(given.clone()));
            self.counters.peer_forwarded += 1;
            self.counters.peer_answered += 1;
            self.outputs
                .push_back(GatewayOutput::Manager(Input::AnswerPeerRequest {
                    request,
                    answer,
                }));
            return;
        }
        if *kind == PeerRequestKind::Roots && !m.caps.roots {
            // The client did not offer its roots: the gateway's answer them, as for a
            // server's own roots/list.
            self.answer_roots(request);
            return;
        }
        if !m.caps.takes(kind) {
            m.undeclared.push((request, kind.clone()));
            return;
        }
        let refusal = if self.options.request_state_key.is_none() {
            Some("switchboard serve has no key to seal the state of multi round-trip requests with")
        } else if m.asked.len() >= MAX_INPUTS {
            Some("too many inputs are waiting for the client")
        } else {
            None
        };
        if let Some(why) = refusal {
            self.refuse_peer(
                request,
                format!("switchboard serve cannot ask its client for server \"{server}\": {why}"),
            );
            return;
        }
        let key = input_key(&m.asked, key, request);
        m.asked.insert(
            key,
            Asked {
                request,
                kind: kind.clone(),
                fingerprint,
                round: None,
            },
        );
        self.counters.peer_forwarded += 1;
    }

    /// Every input of the server's round is in: the client is asked those it can give. The
    /// ones it cannot (it did not declare what they need) are refused; when it can give none
    /// and was asked nothing yet, the call ends with MissingRequiredClientCapability.
    fn round_in(&mut self, server: &str, call: CallId) {
        let Some(m) = self.modern.calls.get_mut(&call) else {
            return;
        };
        let undeclared = std::mem::take(&mut m.undeclared);
        let (asked, parked) = (!m.asked.is_empty(), m.parked.is_some());
        if asked && !parked {
            self.park(call);
        }
        for (request, kind) in &undeclared {
            let required = capability_of(kind);
            self.refuse_peer(
                *request,
                format!(
                    "switchboard serve cannot ask its client for server \"{server}\": the \
                     client did not declare the {required} capability"
                ),
            );
        }
        if !asked && !parked {
            if let Some((_, kind)) = undeclared.first() {
                // The call needs what the client did not declare: the revision's answer is
                // MissingRequiredClientCapability.
                self.missing_capability(call, capability_of(kind));
            }
        }
    }

    /// Answer call `call`'s client with MissingRequiredClientCapability, and cancel the call.
    fn missing_capability(&mut self, call: CallId, required: &str) {
        let Some(p) = self.take_pending(call) else {
            return;
        };
        self.modern.calls.remove(&call);
        self.modern.resulting.remove(&(p.session, p.exchange));
        self.counters.cancelled += 1;
        self.outputs
            .push_back(GatewayOutput::Manager(Input::CancelCall { call }));
        self.modern_status(p.session, p.exchange, ExchangeStatus::BadRequest);
        let frame = wire::error(
            &p.id,
            crate::protocol::modern_codes::MISSING_CLIENT_CAPABILITY,
            &format!(
                "the request needs the client's {required} capability, which it did not declare"
            ),
            Some(&json!({ "requiredCapabilities": { required: {} } })),
        );
        self.answer(p.session, p.exchange, frame);
    }

    /// Answer call `call`'s client with the inputs asked so far, and keep the call for its
    /// retry.
    fn park(&mut self, call: CallId) {
        let Some(key) = self.options.request_state_key else {
            return;
        };
        let Some(pending) = self.take_pending(call) else {
            return;
        };
        self.modern.next_round += 1;
        let round = self.modern.next_round;
        let Some(m) = self.modern.calls.get_mut(&call) else {
            return;
        };
        let mut requests = Map::new();
        let mut fingerprints = Map::new();
        for (k, a) in m.asked.iter_mut() {
            a.round = Some(round);
            let (method, params) = method_and_params(&a.kind);
            requests.insert(k.clone(), json!({ "method": method, "params": params }));
            fingerprints.insert(k.clone(), Value::from(a.fingerprint.clone()));
        }
        let mut payload = json!({
            "i": self.options.instance, "c": call.0, "r": round, "k": fingerprints, "a": m.answers,
        });
        if payload.to_string().len() > seal::MAX_STATE {
            payload["a"] = json!({});
        }
        let state = seal::seal(&key.0, &payload);
        let (session, exchange, id) = (pending.session, pending.exchange, pending.id.clone());
        m.parked = Some(Parked {
            round,
            pending,
            finished: None,
        });
        self.modern.resulting.remove(&(session, exchange));
        let frame = wire::result(
            &id,
            json!({
                "resultType": "input_required",
                "inputRequests": requests,
                "requestState": state,
            }),
        );
        self.answer(session, exchange, frame);
    }

    /// A retry of a stateless client: `params` carry `requestState` and the `inputResponses`.
    /// When the call is this gateway's and waits for that round, the retry continues it;
    /// when it is not here (another gateway sharing the key issued the state, or the call is
    /// gone), the call runs again, its server's requests answered from the state's answers.
    pub(super) fn retry(
        &mut self,
        session: SessionId,
        exchange: ExchangeId,
        id: &Value,
        params: &Value,
        envelope: super::modern::Envelope,
        method: &str,
    ) -> Option<super::modern::Refusal> {
        let Some(key) = self.options.request_state_key else {
            return Some(stale("this server does not take requestState"));
        };
        let state = params.get("requestState").and_then(Value::as_str);
        let Some(payload) = state.and_then(|s| seal::open(&key.0, s)) else {
            return Some(stale("invalid or expired requestState"));
        };
        let (Some(instance), Some(call), Some(round)) = (
            payload.get("i").and_then(Value::as_u64),
            payload.get("c").and_then(Value::as_u64),
            payload.get("r").and_then(Value::as_u64),
        ) else {
            return Some(stale("invalid or expired requestState"));
        };
        let call = CallId(call);
        // Every answer the client has given, by fingerprint: earlier rounds' and this one's.
        let responses = params.get("inputResponses").and_then(Value::as_object);
        let mut known: BTreeMap<String, Value> = payload
            .get("a")
            .and_then(Value::as_object)
            .map(|a| a.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        if let (Some(asked), Some(responses)) =
            (payload.get("k").and_then(Value::as_object), responses)
        {
            for (k, fingerprint) in asked {
                if let (Some(fp), Some(v)) = (
                    fingerprint.as_str(),
                    responses.get(k).filter(|v| v.is_object()),
                ) {
                    known.insert(fp.to_string(), v.clone());
                }
            }
        }
        if instance != self.options.instance || !self.modern.calls.contains_key(&call) {
            return self.replay(session, exchange, id, params, envelope, method, known);
        }
        let waiting = self.modern.calls.get(&call).is_some_and(|m| {
            m.method == method && m.parked.as_ref().is_some_and(|p| p.round == round)
        });
        if !waiting {
            return Some(stale(
                "the request this requestState belongs to is not waiting for input any more",
            ));
        }
        let m = self.modern.calls.get_mut(&call)?;
        m.caps = envelope.caps;
        m.log_level = envelope.log_level;
        m.answers.extend(known);
        let parked = m.parked.take()?;
        let responses = params.get("inputResponses").and_then(Value::as_object);
        let mut answers = Vec::new();
        m.asked.retain(|k, a| {
            let given = responses
                .and_then(|r| r.get(k))
                .filter(|v| v.is_object() && a.round == Some(parked.round));
            match given {
                Some(v) => {
                    answers.push((a.request, answer_of(a.kind.is_elicitation(), Ok(v.clone()))));
                    false
                }
                None => true,
            }
        });
        let more = !m.asked.is_empty();
        for (request, answer) in answers {
            self.counters.peer_answered += 1;
            self.outputs
                .push_back(GatewayOutput::Manager(Input::AnswerPeerRequest {
                    request,
                    answer,
                }));
        }
        // The call's answer now goes to this exchange.
        let mut pending = parked.pending;
        pending.session = session;
        pending.exchange = exchange;
        pending.id = id.clone();
        pending.progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned();
        if let Some(s) = self.sessions.get_mut(&session) {
            s.in_flight.insert(id_key(id), call);
        }
        self.pending.insert(call, pending);
        let cacheable = method == "resources/read";
        self.modern.resulting.insert((session, exchange), cacheable);
        self.modern_status(session, exchange, ExchangeStatus::Ok);
        match parked.finished {
            Some(Finished::Call(outcome)) => {
                self.modern.calls.remove(&call);
                self.event(&Event::CallCompleted { call, outcome });
            }
            Some(Finished::Operation(outcome)) => {
                self.modern.calls.remove(&call);
                self.event(&Event::OperationCompleted { call, outcome });
            }
            None if more => self.park(call),
            None => {}
        }
        None
    }

    /// The manager's events about stateless clients' calls: a parked call's completion is
    /// kept for its retry, a withdrawn input forgotten. `true` when the event was handled.
    pub(super) fn mrtr_event(&mut self, event: &Event) -> bool {
        let (call, finished) = match event {
            Event::CallCompleted { call, outcome } => (*call, Finished::Call(outcome.clone())),
            Event::OperationCompleted { call, outcome } => {
                (*call, Finished::Operation(outcome.clone()))
            }
            Event::PeerRequestWithdrawn { request, .. } => {
                let mut found = false;
                for m in self.modern.calls.values_mut() {
                    let before = m.asked.len();
                    m.asked.retain(|_, a| a.request != *request);
                    found |= m.asked.len() != before;
                }
                return found;
            }
            _ => return false,
        };
        let Some(m) = self.modern.calls.get_mut(&call) else {
            return false;
        };
        let Some(p) = m.parked.as_mut() else {
            self.modern.calls.remove(&call);
            // The stateless revision says a resource that is not there with -32602.
            if let Finished::Operation(OperationOutcome::Err(
                e @ CallError::UnknownResource { uri },
            )) = &finished
            {
                if let Some(p) = self.take_pending(call) {
                    self.modern.resulting.remove(&(p.session, p.exchange));
                    let data = json!({ "uri": uri });
                    let frame =
                        wire::error(&p.id, wire::INVALID_PARAMS, &e.to_string(), Some(&data));
                    self.answer(p.session, p.exchange, frame);
                    return true;
                }
            }
            // Answered on its exchange as any call is.
            return false;
        };
        p.finished = Some(finished);
        m.asked.clear();
        let done: Vec<CallId> = self
            .modern
            .calls
            .iter()
            .filter(|(_, m)| m.parked.as_ref().is_some_and(|p| p.finished.is_some()))
            .map(|(c, _)| *c)
            .collect();
        for old in done
            .iter()
            .take(done.len().saturating_sub(MAX_FINISHED_PARKED))
        {
            self.modern.calls.remove(old);
        }
        true
    }

    /// Forget the stateless calls that are neither in flight nor parked (their session
    /// ended and cancelled them).
    pub(super) fn mrtr_forget_cancelled(&mut self) {
        let pending = &self.pending;
        self.modern
            .calls
            .retain(|c, m| m.parked.is_some() || pending.contains_key(c));
    }
}
