//! Requests of upstream servers for the client (sampling, elicitation), forwarded to the
//! downstream client that can answer them; a roots input that no stateless client's request
//! takes is answered from the roots the gateway keeps.
//!
//! The manager hands each such request over as [`Event::PeerRequest`](crate::manager::Event)
//! under its key; the gateway picks the session to ask: the one with the oldest tool call in
//! flight to that server (a server asks in the middle of a call, and over stdio nothing else
//! says which call). It writes the request on that call's exchange (over HTTP: the stream of
//! the POST that carried the call) under an id of its own, and turns the client's response
//! into the manager's [`Input::AnswerPeerRequest`]. Every forwarded request is answered
//! exactly once: by the client's response, or with an error naming why when there is nobody
//! to ask (no call in flight to that server, or a client that did not declare the
//! capability), when the client's session ends, or never when the manager withdraws it
//! (the server cancelled, its connection ended, it timed out): then the client is told with
//! `notifications/cancelled` and a late response is ignored.

use super::{wire, ExchangeId, Gateway, GatewayOutput, PendingKind, SessionId, Target};
use crate::manager::{Input, PeerRequestKey};
use crate::protocol::{codes, PeerAnswer, PeerRequestKind};
use serde_json::{Map, Value};

/// What a downstream client declared it can answer (`capabilities` of its `initialize`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ClientCaps {
    pub sampling: bool,
    pub elicit_form: bool,
    pub elicit_url: bool,
    /// `roots`: a stateless client's request that declared it is asked the roots a server
    /// asks for as an input (a session's roots are mirrored instead, see `roots`).
    pub roots: bool,
}

impl ClientCaps {
    /// From `initialize`'s params. An `elicitation` capability without modes means form mode
    /// (the 2025-06-18 shape).
    pub fn from_initialize(params: &Value) -> Self {
        Self::from_capabilities(params.get("capabilities"))
    }

    /// From a `capabilities` object as `initialize` carries it (or the stateless envelope):
    /// read where it lies, without wrapping a copy in an `initialize`-shaped object.
    pub(super) fn from_capabilities(caps: Option<&Value>) -> Self {
        let sampling = caps
            .and_then(|c| c.get("sampling"))
            .is_some_and(Value::is_object);
        let elicitation = caps
            .and_then(|c| c.get("elicitation"))
            .and_then(Value::as_object);
        let (elicit_form, elicit_url) = match elicitation {
            None => (false, false),
            Some(e) if !e.contains_key("form") && !e.contains_key("url") => (true, false),
            Some(e) => (e.contains_key("form"), e.contains_key("url")),
        };
        ClientCaps {
            sampling,
            elicit_form,
            elicit_url,
            roots: super::roots::declares_roots_in(caps),
        }
    }

    pub(super) fn takes(&self, kind: &PeerRequestKind) -> bool {
        match kind {
            PeerRequestKind::Sampling { .. } => self.sampling,
            PeerRequestKind::ElicitForm { .. } => self.elicit_form,
            PeerRequestKind::ElicitUrl { .. } => self.elicit_url,
            PeerRequestKind::Roots => self.roots,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

/// A server's request waiting for a downstream client's response.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Forwarded {
    pub session: SessionId,
    /// The id the gateway gave it downstream.
    pub id: Value,
    /// It is an elicitation (else sampling): how the response reads.
    pub elicitation: bool,
}

pub(super) fn method_and_params(kind: &PeerRequestKind) -> (&'static str, Value) {
    match kind {
        PeerRequestKind::Sampling { params } => ("sampling/createMessage", params.clone()),
        PeerRequestKind::ElicitForm {
            message,
            requested_schema,
        } => (
            "elicitation/create",
            serde_json::json!({
                "mode": "form", "message": message, "requestedSchema": requested_schema
            }),
        ),
        PeerRequestKind::ElicitUrl {
            message,
            url,
            elicitation_id,
        } => (
            "elicitation/create",
            serde_json::json!({
                "mode": "url", "message": message, "url": url, "elicitationId": elicitation_id
            }),
        ),
        PeerRequestKind::Roots => ("roots/list", serde_json::json!({})),
        #[allow(unreachable_patterns)]
        _ => ("", Value::Null),
    }
}

fn what(kind: &PeerRequestKind) -> &'static str {
    match kind {
        PeerRequestKind::Sampling { .. } => "sampling",
        PeerRequestKind::ElicitUrl { .. } => "URL-mode elicitation",
        PeerRequestKind::Roots => "roots",
        _ => "elicitation",
    }
}

/// A downstream response as the manager's answer.
pub(super) fn answer_of(elicitation: bool, outcome: Result<Value, (i64, String)>) -> PeerAnswer {
    let result = match outcome {
        Ok(result) => result,
        Err((code, message)) => return PeerAnswer::Error { code, message },
    };
    if !elicitation {
        return PeerAnswer::Result { result };
    }
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => PeerAnswer::Accept {
            content: result.get("content").and_then(Value::as_object).cloned(),
        },
        Some("decline") => PeerAnswer::Decline,
        Some("cancel") => PeerAnswer::Cancel,
        _ => PeerAnswer::Error {
            code: codes::INVALID_PARAMS,
            message: "the downstream client answered the elicitation without a valid action".into(),
        },
    }
}

impl Gateway {
    /// A server asks: forward it, or answer it at once with why nobody can.
    pub(super) fn peer_request(
        &mut self,
        server: &str,
        request: PeerRequestKey,
        kind: &PeerRequestKind,
    ) {
        if *kind == PeerRequestKind::Roots {
            // Not a call of a stateless client that declared roots: the roots this gateway
            // keeps (mirrored from its sessions, else the configured ones) answer it.
            return self.answer_roots(request);
        }
        // The oldest call in flight to this server (call ids grow with time).
        let call = self
            .pending
            .iter()
            .find(|(_, p)| matches!(&p.kind, PendingKind::Tool { server: Some(s) } if s == server));
        let Some((_, p)) = call else {
            let message = format!(
                "switchboard serve cannot forward {} from server \"{server}\": no request of a \
                 downstream client to that server is in flight",
                what(kind)
            );
            return self.refuse_peer(request, message);
        };
        let (session, exchange) = (p.session, p.exchange);
        let takes = self
            .sessions
            .get(&session)
            .is_some_and(|s| s.caps.takes(kind));
        if !takes {
            let message = format!(
                "the client of switchboard serve did not declare {} support, so the request \
                 of server \"{server}\" is declined",
                what(kind)
            );
            return self.refuse_peer(request, message);
        }
        self.next_peer += 1;
        let id = Value::String(format!("switchboard-{}", self.next_peer));
        let (method, params) = method_and_params(kind);
        let frame = wire::request(&id, method, params);
        self.counters.peer_forwarded += 1;
        self.peers.insert(
            request,
            Forwarded {
                session,
                id,
                elicitation: kind.is_elicitation(),
            },
        );
        self.send_on(session, exchange, frame);
    }

    fn send_on(&mut self, session: SessionId, exchange: ExchangeId, frame: bytes::Bytes) {
        self.send(
            session,
            Target::Exchange {
                exchange,
                last: false,
            },
            frame,
        );
    }

    /// Answer a server's roots input with the roots that apply (see `roots`).
    pub(super) fn answer_roots(&mut self, request: PeerRequestKey) {
        let roots = self.roots_applied.as_ref().unwrap_or(&self.options.roots);
        let result = crate::protocol::roots_result(roots);
        self.counters.roots_answered += 1;
        self.outputs
            .push_back(GatewayOutput::Manager(Input::AnswerPeerRequest {
                request,
                answer: PeerAnswer::Result { result },
            }));
    }

    /// Answer a server's request with an error saying why nobody downstream can take it.
    /// Not "method not found": the manager declared the capability upstream (any client may
    /// connect later and take the next one), so the server must not conclude that the
    /// client lacks the feature altogether.
    pub(super) fn refuse_peer(&mut self, request: PeerRequestKey, message: String) {
        self.counters.peer_refused += 1;
        self.outputs
            .push_back(GatewayOutput::Manager(Input::AnswerPeerRequest {
                request,
                answer: PeerAnswer::Error {
                    code: codes::INTERNAL_ERROR,
                    message,
                },
            }));
    }

    /// A downstream response: the answer to the forwarded request with that id, once.
    pub(super) fn peer_response(
        &mut self,
        session: SessionId,
        id: &Value,
        outcome: Result<Value, (i64, String)>,
    ) {
        let found = self
            .peers
            .iter()
            .find(|(_, f)| f.session == session && &f.id == id)
            .map(|(k, f)| (*k, f.elicitation));
        let Some((request, elicitation)) = found else {
            return;
        };
        self.peers.remove(&request);
        self.counters.peer_answered += 1;
        self.outputs
            .push_back(GatewayOutput::Manager(Input::AnswerPeerRequest {
                request,
                answer: answer_of(elicitation, outcome),
            }));
    }

    /// The manager gave up on a request (withdrawn): tell the client, ignore its answer.
    pub(super) fn peer_withdrawn(&mut self, request: PeerRequestKey) {
        let Some(f) = self.peers.remove(&request) else {
            return;
        };
        let mut params = Map::new();
        params.insert("requestId".into(), f.id);
        params.insert(
            "reason".into(),
            Value::String("the server no longer needs the answer".into()),
        );
        let frame = wire::notification("notifications/cancelled", Some(params));
        self.send(f.session, Target::Session, frame);
    }

    /// A session ended: what it was asked is answered with an error.
    pub(super) fn peer_session_closed(&mut self, session: SessionId) {
        let asked: Vec<PeerRequestKey> = self
            .peers
            .iter()
            .filter(|(_, f)| f.session == session)
            .map(|(k, _)| *k)
            .collect();
        for request in asked {
            self.peers.remove(&request);
            self.refuse_peer(
                request,
                "the downstream client's session ended before it answered".into(),
            );
        }
    }

    /// The requests forwarded and not answered yet.
    pub fn forwarded_peer_requests(&self) -> impl Iterator<Item = PeerRequestKey> + '_ {
        self.peers.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_capabilities_read_both_elicitation_shapes() {
        let caps =
            |v: Value| ClientCaps::from_initialize(&serde_json::json!({ "capabilities": v }));
        assert_eq!(
            caps(serde_json::json!({ "sampling": {}, "elicitation": {} })),
            ClientCaps {
                sampling: true,
                elicit_form: true,
                elicit_url: false,
                roots: false
            }
        );
        assert_eq!(
            caps(serde_json::json!({ "elicitation": { "url": {} } })),
            ClientCaps {
                sampling: false,
                elicit_form: false,
                elicit_url: true,
                roots: false
            }
        );
        assert_eq!(caps(serde_json::json!({})), ClientCaps::default());
    }

    #[test]
    fn responses_read_as_the_answers_they_are() {
        let accept = answer_of(
            true,
            Ok(serde_json::json!({ "action": "accept", "content": { "a": 1 } })),
        );
        assert!(matches!(accept, PeerAnswer::Accept { content: Some(c) } if c["a"] == 1));
        assert_eq!(
            answer_of(true, Ok(serde_json::json!({ "action": "decline" }))),
            PeerAnswer::Decline
        );
        assert!(matches!(
            answer_of(true, Ok(serde_json::json!({}))),
            PeerAnswer::Error { .. }
        ));
        assert_eq!(
            answer_of(false, Ok(serde_json::json!({ "role": "assistant" }))),
            PeerAnswer::Result {
                result: serde_json::json!({ "role": "assistant" })
            }
        );
        assert_eq!(
            answer_of(false, Err((-1, "no".into()))),
            PeerAnswer::Error {
                code: -1,
                message: "no".into()
            }
        );
    }
}
