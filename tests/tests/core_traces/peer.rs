//! Requests a server sends the client: sampling and elicitation reach the embedder as one
//! `PeerRequest` and are answered on the wire exactly once — the embedder's answer, a decline,
//! a timeout error, or an error at once when the feature is off — or withdrawn without an
//! answer when the server cancels them or the connection ends; the capabilities `initialize`
//! declares are exactly the features on; roots are the core's, and `SetRoots` tells every
//! initialized server.

use super::snap;
use crate::script::*;
use serde_json::{json, Value};
use switchboard_core::manager::{
    ConnId, Event, FrameKind, Input, ManagerOptions, Output, TransportEvent,
};
use switchboard_core::protocol::{
    form_defaults, ClientFeatures, PeerAnswer, PeerRequestKind, Root,
};
use switchboard_core::{PeerRequestKey, WithdrawReason};

fn all_features() -> ManagerOptions {
    ManagerOptions {
        client_features: ClientFeatures {
            sampling: true,
            elicitation_form: true,
            elicitation_url: true,
            roots: true,
        },
        peer_request_timeout: ms(5_000),
        max_peer_requests: 2,
        ..opts()
    }
}

/// A script with server "a" ready at 10 ms.
fn ready(o: ManagerOptions) -> (Script, ConnId) {
    let mut s = Script::with(o);
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["one"]);
    let conn = s.conn("a");
    (s, conn)
}

fn form_request(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
        "message": "Who are you?",
        "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "nickname": {"type": "string"}
        }}
    }})
}

fn sampling_request(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10
    }})
}

/// The responses written on `conn` since output `mark`, as JSON.
fn responses(s: &Script, conn: ConnId, mark: usize) -> Vec<Value> {
    s.outputs[mark..]
        .iter()
        .filter_map(|o| match o {
            Output::Send {
                conn: c,
                frame,
                meta,
            } if *c == conn && meta.kind == FrameKind::Response => {
                serde_json::from_slice(frame).ok()
            }
            _ => None,
        })
        .collect()
}

/// The keys of the `PeerRequest` events since `mark`, with what they ask.
fn peer_requests(s: &Script, mark: usize) -> Vec<(PeerRequestKey, PeerRequestKind)> {
    s.outputs[mark..]
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::PeerRequest { request, kind, .. }) => {
                Some((*request, kind.clone()))
            }
            _ => None,
        })
        .collect()
}

fn withdrawn(s: &Script) -> Vec<(PeerRequestKey, WithdrawReason)> {
    s.events()
        .filter_map(|e| match e {
            Event::PeerRequestWithdrawn {
                request, reason, ..
            } => Some((*request, *reason)),
            _ => None,
        })
        .collect()
}

fn answer(s: &mut Script, ms: u64, request: PeerRequestKey, answer: PeerAnswer) {
    s.at(ms, Input::AnswerPeerRequest { request, answer });
}

/// The `capabilities` of the `initialize` request on `conn`.
fn declared(s: &Script, conn: ConnId) -> Value {
    s.outputs
        .iter()
        .find_map(|o| match o {
            Output::Send {
                conn: c,
                frame,
                meta,
            } if *c == conn && meta.method == Some("initialize") => {
                let v: Value = serde_json::from_slice(frame).ok()?;
                Some(v["params"]["capabilities"].clone())
            }
            _ => None,
        })
        .expect("an initialize request")
}

#[test]
fn initialize_declares_exactly_the_features_that_are_on() {
    let (s, conn) = ready(opts());
    assert_eq!(declared(&s, conn), json!({}));
    let (s, conn) = ready(all_features());
    assert_eq!(
        declared(&s, conn),
        json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}, "url": {}}})
    );
    let (s, conn) = ready(ManagerOptions {
        client_features: ClientFeatures {
            elicitation_form: true,
            ..Default::default()
        },
        ..opts()
    });
    assert_eq!(declared(&s, conn), json!({"elicitation": {"form": {}}}));
}

#[test]
fn a_form_elicitation_is_answered_once_with_the_embedders_defaults() {
    let (mut s, conn) = ready(all_features());
    let mark = s.outputs.len();
    s.frame_on(20, conn, form_request(7));
    let asked = peer_requests(&s, mark);
    assert_eq!(asked.len(), 1);
    let (
        key,
        PeerRequestKind::ElicitForm {
            requested_schema,
            message,
        },
    ) = &asked[0]
    else {
        panic!("not a form: {asked:?}");
    };
    assert_eq!(message, "Who are you?");
    assert!(
        responses(&s, conn, mark).is_empty(),
        "nothing is answered before the embedder"
    );
    let content = form_defaults(requested_schema);
    answer(
        &mut s,
        30,
        *key,
        PeerAnswer::Accept {
            content: Some(content),
        },
    );
    // A second answer is ignored: the server gets one response.
    answer(&mut s, 31, *key, PeerAnswer::Decline);
    let r = responses(&s, conn, mark);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["id"], 7);
    assert_eq!(r[0]["result"]["action"], "accept");
    assert_eq!(
        r[0]["result"]["content"],
        json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
    );
    let c = s.m.counters();
    assert_eq!((c.peer_answered, c.peer_answers_ignored), (1, 1));
    // The timer went with the answer: nothing fires later.
    s.advance_to(60_000);
    assert_eq!(responses(&s, conn, mark).len(), 1);
    assert!(withdrawn(&s).is_empty());
    snap("peer_01_form_elicitation_accepted_with_defaults", &s);
}

#[test]
fn decline_cancel_and_sampling_rejection_read_as_the_protocol_says() {
    let (mut s, conn) = ready(all_features());
    let mark = s.outputs.len();
    s.frame_on(20, conn, form_request(1));
    s.frame_on(20, conn, sampling_request(2));
    let asked = peer_requests(&s, mark);
    answer(&mut s, 30, asked[0].0, PeerAnswer::Cancel);
    answer(&mut s, 30, asked[1].0, PeerAnswer::Decline);
    let r = responses(&s, conn, mark);
    assert_eq!(r[0]["result"], json!({"action": "cancel"}));
    assert_eq!(
        r[1]["error"]["code"], -1,
        "a rejected sampling request is an error"
    );
    assert_eq!(s.m.counters().peer_declined, 2);
    // A sampling result goes out as given.
    s.frame_on(40, conn, sampling_request(3));
    let key = peer_requests(&s, mark)[2].0;
    let result =
        json!({"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"});
    answer(
        &mut s,
        50,
        key,
        PeerAnswer::Result {
            result: result.clone(),
        },
    );
    assert_eq!(responses(&s, conn, mark)[2]["result"], result);
}

#[test]
fn an_unanswered_request_times_out_with_an_error_and_a_late_answer_is_ignored() {
    let (mut s, conn) = ready(all_features());
    let mark = s.outputs.len();
    s.frame_on(20, conn, sampling_request(5));
    let key = peer_requests(&s, mark)[0].0;
    s.advance_to(5_019);
    assert!(responses(&s, conn, mark).is_empty());
    s.advance_to(5_020);
    let r = responses(&s, conn, mark);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["id"], 5);
    assert_eq!(r[0]["error"]["code"], -32001);
    assert_eq!(withdrawn(&s), vec![(key, WithdrawReason::TimedOut)]);
    answer(&mut s, 6_000, key, PeerAnswer::Decline);
    assert_eq!(
        responses(&s, conn, mark).len(),
        1,
        "a late answer sends nothing"
    );
    assert_eq!(s.m.counters().peer_timed_out, 1);
    snap("peer_02_timeout", &s);
}

#[test]
fn a_request_the_server_cancels_is_withdrawn_and_never_answered() {
    let (mut s, conn) = ready(all_features());
    let mark = s.outputs.len();
    s.frame_on(20, conn, form_request(8));
    let key = peer_requests(&s, mark)[0].0;
    s.frame_on(
        25,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}),
    );
    assert_eq!(
        withdrawn(&s),
        vec![(key, WithdrawReason::CancelledByServer)]
    );
    answer(&mut s, 30, key, PeerAnswer::Decline);
    s.advance_to(60_000);
    assert!(
        responses(&s, conn, mark).is_empty(),
        "nothing for a cancelled request"
    );
    assert_eq!(s.m.counters().peer_cancelled_by_server, 1);
}

#[test]
fn a_closed_connection_withdraws_its_requests() {
    let (mut s, conn) = ready(ManagerOptions {
        reconnect: switchboard_core::manager::ReconnectPolicy::never(),
        ..all_features()
    });
    let mark = s.outputs.len();
    s.frame_on(20, conn, form_request(1));
    s.frame_on(21, conn, sampling_request(2));
    let keys: Vec<_> = peer_requests(&s, mark)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    s.at(
        30,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit status 1".into(),
            },
        },
    );
    assert_eq!(
        withdrawn(&s),
        vec![
            (keys[0], WithdrawReason::ConnectionClosed),
            (keys[1], WithdrawReason::ConnectionClosed)
        ]
    );
    assert!(s.m.pending_peer_requests().is_empty());
    answer(&mut s, 40, keys[0], PeerAnswer::Decline);
    assert!(responses(&s, conn, mark).is_empty());
    assert_eq!(s.m.counters().peer_withdrawn_on_close, 2);
    snap("peer_03_close_withdraws", &s);
}

#[test]
fn features_off_and_excess_requests_are_refused_at_once() {
    // Nothing on: sampling and elicitation are -32601, and nothing reaches the embedder.
    let (mut s, conn) = ready(opts());
    let mark = s.outputs.len();
    s.frame_on(20, conn, form_request(1));
    s.frame_on(21, conn, sampling_request(2));
    assert!(peer_requests(&s, mark).is_empty());
    let r = responses(&s, conn, mark);
    assert_eq!(r[0]["error"]["code"], -32601);
    assert_eq!(r[1]["error"]["code"], -32601);
    assert_eq!(s.m.counters().peer_refused_off, 2);

    // Form mode only: a URL request is refused, a form is taken; past two waiting, refused.
    let (mut s, conn) = ready(ManagerOptions {
        client_features: ClientFeatures {
            elicitation_form: true,
            ..Default::default()
        },
        max_peer_requests: 2,
        ..opts()
    });
    let mark = s.outputs.len();
    s.frame_on(
        20,
        conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {
            "mode": "url", "message": "m", "url": "https://example.com", "elicitationId": "e1"}}),
    );
    for id in 2..=4 {
        s.frame_on(21, conn, form_request(id));
    }
    assert_eq!(peer_requests(&s, mark).len(), 2);
    let r = responses(&s, conn, mark);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (r[0]["id"].clone(), r[0]["error"]["code"].clone()),
        (json!(1), json!(-32602))
    );
    assert_eq!(
        (r[1]["id"].clone(), r[1]["error"]["code"].clone()),
        (json!(4), json!(-32603))
    );
    assert_eq!(s.m.counters().peer_refused_full, 1);
}

#[test]
fn url_elicitation_and_its_completion_notice() {
    let (mut s, conn) = ready(all_features());
    let mark = s.outputs.len();
    s.frame_on(
        20,
        conn,
        json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": {
            "mode": "url", "message": "Sign in", "url": "https://example.com/login", "elicitationId": "e-1"}}),
    );
    let asked = peer_requests(&s, mark);
    let (
        key,
        PeerRequestKind::ElicitUrl {
            url,
            elicitation_id,
            ..
        },
    ) = &asked[0]
    else {
        panic!("{asked:?}");
    };
    assert_eq!(
        (url.as_str(), elicitation_id.as_str()),
        ("https://example.com/login", "e-1")
    );
    answer(&mut s, 30, *key, PeerAnswer::Accept { content: None });
    assert_eq!(
        responses(&s, conn, mark)[0]["result"],
        json!({"action": "accept"})
    );
    let complete = |id: &str| json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": id}});
    s.frame_on(40, conn, complete("e-1"));
    s.frame_on(41, conn, complete("e-1"));
    s.frame_on(42, conn, complete("unknown"));
    let done: Vec<_> = s
        .events()
        .filter(|e| matches!(e, Event::ElicitationComplete { .. }))
        .collect();
    assert_eq!(
        done.len(),
        1,
        "a known id once; repeats and unknown ids are ignored"
    );
}

#[test]
fn roots_are_the_cores_and_set_roots_tells_every_initialized_server() {
    let root = |uri: &str| Root {
        uri: uri.into(),
        name: None,
    };
    let mut s = Script::with(ManagerOptions {
        roots: vec![root("file:///one")],
        ..opts()
    });
    s.connect(0, vec![stdio("a"), stdio("b"), stdio("c")]);
    for n in ["a", "b", "c"] {
        s.cache(1, n, None);
    }
    s.ready(10, "a", &["x"]);
    s.ready(10, "b", &["x"]);
    s.opened(10, "c"); // still initializing: not told
    let mark = s.outputs.len();
    s.at(
        20,
        Input::SetRoots {
            roots: vec![root("file:///two")],
        },
    );
    let told: Vec<ConnId> = s.outputs[mark..]
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn, meta, .. }
                if meta.method == Some("notifications/roots/list_changed") =>
            {
                Some(*conn)
            }
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![s.conn("a"), s.conn("b")]);
    let a = s.conn("a");
    s.frame_on(
        30,
        a,
        json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}),
    );
    assert_eq!(
        responses(&s, a, mark)[0]["result"],
        json!({"roots": [{"uri": "file:///two"}]})
    );
    // The same roots again change nothing.
    let mark = s.outputs.len();
    s.at(
        40,
        Input::SetRoots {
            roots: vec![root("file:///two")],
        },
    );
    assert_eq!(s.outputs.len(), mark);
    assert_eq!(s.m.counters().roots_list_changed_sent, 2);
    snap("peer_04_set_roots", &s);
}

#[test]
fn form_defaults_take_only_defaults_of_their_own_type() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string", "default": "x"},
        "bad_int": {"type": "integer", "default": 1.5},
        "n": {"type": "number", "default": 2},
        "b": {"type": "boolean", "default": "yes"},
        "e": {"type": "string", "enum": ["a", "b"], "default": "c"},
        "o": {"type": "string", "oneOf": [{"const": "p"}, {"const": "q"}], "default": "q"},
        "m": {"type": "array", "items": {"enum": ["r", "g"]}, "default": ["r"]},
        "none": {"type": "string"}
    }});
    assert_eq!(
        Value::Object(form_defaults(&schema)),
        json!({"s": "x", "n": 2, "o": "q", "m": ["r"]})
    );
    assert!(form_defaults(&json!({})).is_empty());
}
