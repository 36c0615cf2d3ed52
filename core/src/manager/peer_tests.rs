//! Requests a server of the initialize-based revisions sends the client, driven through the
//! manager's inputs: one waits in `pending_peer_requests` until the embedder answers it, a declined
//! elicitation reads as a decline to the server and one the embedder cannot handle as an error, one
//! the server cancels (or whose connection closes) is withdrawn and never answered, and past the
//! bound of waiting ones a request is refused; a ping and `roots/list` are answered at once; new
//! roots are announced to every initialized server (and neither declared nor announced by a client
//! that has none).

use super::era_tests::open;
use super::era_tests::{answer, drain, notified, sent};
use super::legacy_tests::{connected, initialize_ok, request_of};
use super::modern_ops_tests::asked;
use super::*;
use crate::protocol::{PeerAnswer, Root};
use crate::time::Instant;
use serde_json::{json, Value};

/// The frame sent on `conn` among `outs`, parsed.
fn reply_on(outs: &[Output], conn: ConnId) -> Option<Value> {
    outs.iter().find_map(|o| match o {
        Output::Send { conn: c, frame, .. } if *c == conn => serde_json::from_slice(frame).ok(),
        _ => None,
    })
}

#[test]
fn an_elicitation_waits_for_the_embedder_and_a_decline_reads_as_one_to_the_server() {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_form = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    assert!(m.pending_peer_requests().is_empty());
    let ask = json!({"jsonrpc": "2.0", "id": 5, "method": "elicitation/create",
        "params": {"message": "sure?", "requestedSchema": {"type": "object",
        "properties": {}}}});
    let outs = answer(&mut m, 3, conn, ask);
    let key = asked(&outs);
    assert_eq!(m.pending_peer_requests(), vec![(key, "s")]);
    m.handle(
        Instant::from_millis(4),
        Input::AnswerPeerRequest {
            request: key,
            answer: PeerAnswer::Decline,
        },
    );
    let reply = reply_on(&drain(&mut m), conn).expect("answered");
    assert_eq!(reply["id"], 5);
    assert_eq!(reply["result"]["action"], "decline");
    assert!(m.pending_peer_requests().is_empty());
    let c = m.counters();
    assert_eq!((c.peer_declined, c.peer_answered), (1, 0));
}

#[test]
fn new_roots_are_announced_once_to_each_initialized_server() {
    let mut o = ManagerOptions::default();
    o.client_features.roots = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    for (at, n) in [(3, 1), (4, 2)] {
        m.handle(
            Instant::from_millis(at),
            Input::SetRoots {
                roots: vec![Root {
                    uri: format!("file:///r{n}"),
                    name: None,
                }],
            },
        );
        let notes: Vec<ConnId> = notified(&drain(&mut m), "notifications/roots/list_changed")
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        assert_eq!(notes, vec![conn]);
        assert_eq!(m.counters().roots_list_changed_sent, n);
    }
}

#[test]
fn a_client_with_no_roots_does_not_declare_them_or_announce_new_ones() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let params = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "initialize")
        .expect("initialize")
        .3;
    assert!(params["capabilities"].get("roots").is_none(), "{params}");
    let init = request_of(&outs, "initialize");
    answer(&mut m, 1, conn, initialize_ok(init, json!({"tools": {}})));
    m.handle(
        Instant::from_millis(2),
        Input::SetRoots {
            roots: vec![Root {
                uri: "file:///r".into(),
                name: None,
            }],
        },
    );
    let outs = drain(&mut m);
    assert!(notified(&outs, "notifications/roots/list_changed").is_empty());
    assert_eq!(m.counters().roots_list_changed_sent, 0);
}

/// A URL elicitation `id` from the server on `conn`, answered by the embedder with `reply`.
fn url_elicitation(m: &mut Manager, at: u64, conn: ConnId, id: &str, reply: PeerAnswer) {
    let ask = json!({"jsonrpc": "2.0", "id": format!("q-{id}"), "method": "elicitation/create",
        "params": {"mode": "url", "message": "sign in", "url": "https://example.com/login",
        "elicitationId": id}});
    let key = asked(&answer(m, at, conn, ask));
    m.handle(
        Instant::from_millis(at),
        Input::AnswerPeerRequest {
            request: key,
            answer: reply,
        },
    );
    drain(m);
}

/// The elicitations `outs` report complete.
pub(super) fn completed_elicitations(outs: &[Output]) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Event(Event::ElicitationComplete { elicitation_id, .. }) => {
                Some(elicitation_id.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn each_accepted_url_elicitation_completes_and_a_declined_one_does_not() {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_url = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    url_elicitation(&mut m, 3, conn, "e1", PeerAnswer::Accept { content: None });
    url_elicitation(&mut m, 4, conn, "e2", PeerAnswer::Accept { content: None });
    url_elicitation(&mut m, 5, conn, "e3", PeerAnswer::Decline);
    let complete = |id: &str| {
        json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
            "params": {"elicitationId": id}})
    };
    // Both accepted ones are remembered, the first one too.
    for (at, id) in [(6, "e1"), (7, "e2")] {
        assert_eq!(
            completed_elicitations(&answer(&mut m, at, conn, complete(id))),
            vec![id]
        );
    }
    // The declined one will not complete: a completion for it is ignored.
    assert!(completed_elicitations(&answer(&mut m, 8, conn, complete("e3"))).is_empty());
    assert_eq!(m.counters().elicitations_completed, 2);
}

#[test]
fn a_servers_ping_and_roots_request_are_answered_at_once() {
    let mut o = ManagerOptions::default();
    o.client_features.roots = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    m.handle(
        Instant::from_millis(3),
        Input::SetRoots {
            roots: vec![Root {
                uri: "file:///work".into(),
                name: None,
            }],
        },
    );
    drain(&mut m);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let reply = reply_on(&answer(&mut m, 4, conn, ping), conn).expect("answered");
    assert_eq!(
        (reply["id"].clone(), reply["result"].clone()),
        (json!(1), json!({}))
    );
    let roots = json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"});
    let reply = reply_on(&answer(&mut m, 5, conn, roots), conn).expect("answered");
    assert_eq!(reply["result"]["roots"][0]["uri"], "file:///work");
    assert!(m.pending_peer_requests().is_empty());
    assert_eq!(m.counters().peer_requests_answered, 2);
}

#[test]
fn a_request_past_the_bound_of_waiting_ones_is_refused_and_the_others_keep_waiting() {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_form = true;
    o.max_peer_requests = 2;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let ask = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create",
            "params": {"message": "sure?", "requestedSchema": {"type": "object",
            "properties": {}}}})
    };
    answer(&mut m, 3, conn, ask(1));
    answer(&mut m, 3, conn, ask(2));
    let reply = reply_on(&answer(&mut m, 4, conn, ask(3)), conn).expect("refused");
    assert_eq!(reply["id"], 3);
    assert!(reply["error"]["message"]
        .as_str()
        .is_some_and(|e| e.contains("at most 2")));
    assert_eq!(m.pending_peer_requests().len(), 2);
    assert_eq!(m.counters().peer_refused_full, 1);
}

/// Server `s`, connected, with an elicitation (`id` 5) waiting for the embedder: the
/// manager, the connection and the request's key.
fn elicited() -> (Manager, ConnId, crate::PeerRequestKey) {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_form = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let ask = json!({"jsonrpc": "2.0", "id": 5, "method": "elicitation/create",
        "params": {"message": "sure?", "requestedSchema": {"type": "object",
        "properties": {}}}});
    let key = asked(&answer(&mut m, 3, conn, ask));
    (m, conn, key)
}

#[test]
fn an_elicitation_the_embedder_cannot_handle_reads_as_an_error_to_the_server() {
    let (mut m, conn, key) = elicited();
    m.handle(
        Instant::from_millis(4),
        Input::AnswerPeerRequest {
            request: key,
            answer: PeerAnswer::Error {
                code: -32603,
                message: "no screen".into(),
            },
        },
    );
    let reply = reply_on(&drain(&mut m), conn).expect("answered");
    assert_eq!(reply["id"], 5);
    assert_eq!(reply["error"]["code"], -32603);
    let c = m.counters();
    assert_eq!((c.peer_answered_error, c.peer_answered), (1, 0));
}

#[test]
fn an_elicitation_the_server_cancels_is_withdrawn_and_never_answered() {
    let (mut m, conn, key) = elicited();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5}});
    let outs = answer(&mut m, 4, conn, cancel);
    withdrawn_for_good(&mut m, conn, key, &outs, WithdrawReason::CancelledByServer);
    assert_eq!(m.counters().peer_cancelled_by_server, 1);
}

/// `outs` withdrew request `key` of `conn` for `why`, nothing is pending, and an answer given
/// afterwards goes nowhere.
fn withdrawn_for_good(
    m: &mut Manager,
    conn: ConnId,
    key: crate::PeerRequestKey,
    outs: &[Output],
    why: WithdrawReason,
) {
    assert!(outs.iter().any(|o| matches!(o,
        Output::Event(Event::PeerRequestWithdrawn { request, reason, .. })
            if *request == key && *reason == why)));
    assert!(m.pending_peer_requests().is_empty());
    m.handle(
        Instant::from_millis(5),
        Input::AnswerPeerRequest {
            request: key,
            answer: PeerAnswer::Decline,
        },
    );
    assert_eq!(reply_on(&drain(m), conn), None);
}

#[test]
fn a_request_for_a_feature_turned_off_is_refused_quietly_and_a_malformed_one_with_a_diagnostic() {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_form = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let debug = |outs: &[Output]| {
        outs.iter()
            .filter(|o| {
                matches!(o, Output::Event(Event::Diagnostic { level: Level::Debug, message, .. })
                    if message.starts_with("refused a"))
            })
            .count()
    };
    // Sampling is off: answered like any method this client does not offer.
    let sample = json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 10}});
    let outs = answer(&mut m, 3, conn, sample);
    let reply = reply_on(&outs, conn).expect("refused");
    assert_eq!(reply["error"]["code"], -32601);
    assert_eq!(debug(&outs), 0, "{outs:?}");
    // An elicitation without its message: refused as invalid, and said why.
    let bad = json!({"jsonrpc": "2.0", "id": 2, "method": "elicitation/create",
        "params": {"requestedSchema": {"type": "object", "properties": {}}}});
    let outs = answer(&mut m, 4, conn, bad);
    let reply = reply_on(&outs, conn).expect("refused");
    assert_eq!(reply["error"]["code"], -32602);
    assert_eq!(debug(&outs), 1, "{outs:?}");
    assert!(m.pending_peer_requests().is_empty());
    let c = m.counters();
    assert_eq!((c.peer_refused_off, c.peer_refused_invalid), (1, 1));
}

#[test]
fn an_elicitation_left_unanswered_times_out_to_the_server_and_a_late_answer_is_ignored() {
    let (mut m, conn, key) = elicited();
    let due = m.poll_timeout().expect("the request has a deadline");
    m.handle_timeout(due);
    let outs = drain(&mut m);
    let reply = reply_on(&outs, conn).expect("answered with a timeout");
    assert_eq!(reply["id"], 5);
    assert!(reply["error"].is_object(), "{reply}");
    assert!(outs.iter().any(|o| matches!(o,
        Output::Event(Event::PeerRequestWithdrawn { reason, .. })
            if *reason == WithdrawReason::TimedOut)));
    m.handle(
        due,
        Input::AnswerPeerRequest {
            request: key,
            answer: PeerAnswer::Decline,
        },
    );
    assert_eq!(reply_on(&drain(&mut m), conn), None);
    let c = m.counters();
    assert_eq!((c.peer_timed_out, c.peer_answers_ignored), (1, 1));
}

#[test]
fn an_elicitation_of_a_connection_that_closes_is_withdrawn_and_a_late_answer_goes_nowhere() {
    let (mut m, conn, key) = elicited();
    let outs = super::era_tests::closed(&mut m, 4, conn);
    withdrawn_for_good(&mut m, conn, key, &outs, WithdrawReason::ConnectionClosed);
    assert_eq!(m.counters().peer_withdrawn_on_close, 1);
}
