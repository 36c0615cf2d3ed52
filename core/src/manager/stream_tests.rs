//! The subscriptions stream of a stateless connection, driven through the manager's inputs:
//! a stream that keeps ending before the server acknowledges it is asked again later each
//! time (even when the timer runs late), and only an acknowledgement of the open stream, not
//! any notification on it nor one of a stream a subscription replaced, counts as one; a stream
//! follows at most its bound of resources.

use super::era_tests::{answer, drain, probing, sent};
use super::modern_ops_tests::{connected_with, frame, stream_frame, LISTING_CAPS};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};

/// Ends stream `sub` at `at` ms with a result, unacknowledged.
fn end(m: &mut Manager, at: u64, conn: ConnId, sub: u64) {
    let end = json!({"jsonrpc": "2.0", "id": sub, "result": {"resultType": "complete"}});
    answer(m, at, conn, end);
}

/// The stream asked for when the timers due at `at` ms run, if one is.
fn asked_at(m: &mut Manager, at: u64) -> Option<u64> {
    m.handle_timeout(Instant::from_millis(at));
    sent(&drain(m))
        .into_iter()
        .find(|r| r.2 == "subscriptions/listen")
        .map(|r| r.1)
}

#[test]
fn a_stream_that_ends_unacknowledged_is_asked_again_later_each_time() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, conn, listen) = connected_with(probing(), caps);
    let (sub, _) = listen.expect("a stream is asked for");
    // Ends before any acknowledgement: the first rung, 500 ms.
    end(&mut m, 10, conn, sub);
    assert_eq!(asked_at(&mut m, 509), None);
    let sub2 = asked_at(&mut m, 510).expect("asked again after 500 ms");
    // A change heard on it is not an acknowledgement of it.
    frame(
        &mut m,
        520,
        conn,
        stream_frame(sub2, "notifications/tools/list_changed"),
    );
    assert_eq!(m.counters().listens_acknowledged, 0);
    // Ends unacknowledged again: the second rung, 1,000 ms.
    end(&mut m, 530, conn, sub2);
    assert_eq!(asked_at(&mut m, 1529), None);
    let sub3 = asked_at(&mut m, 1530).expect("asked again after 1,000 ms");
    // Acknowledged at last: the ladder starts over.
    frame(
        &mut m,
        1540,
        conn,
        stream_frame(sub3, "notifications/subscriptions/acknowledged"),
    );
    assert_eq!(m.counters().listens_acknowledged, 1);
    end(&mut m, 1550, conn, sub3);
    assert!(asked_at(&mut m, 2050).is_some(), "back on the first rung");
    let c = m.counters();
    assert_eq!((c.listen_streams_closed, c.listens_sent), (3, 4));
}

#[test]
fn a_stream_due_again_is_asked_for_even_when_its_timer_runs_late() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, conn, listen) = connected_with(probing(), caps);
    let (sub, _) = listen.expect("a stream is asked for");
    end(&mut m, 10, conn, sub);
    // The embedder's loop woke 200 ms after the deadline it was given.
    assert!(asked_at(&mut m, 710).is_some());
    assert_eq!(m.counters().listens_resent, 1);
}

/// Asks to follow (`add`) or stop following `uri` on server `s` as operation `call`: what
/// that produced.
fn follow(m: &mut Manager, at: u64, call: u64, uri: &str, add: bool) -> Vec<Output> {
    let (uri, server) = (uri.to_string(), Some("s".to_string()));
    let op = if add {
        crate::catalog::Operation::Subscribe { uri, server }
    } else {
        crate::catalog::Operation::Unsubscribe { uri, server }
    };
    m.handle(
        Instant::from_millis(at),
        Input::Operation {
            call: CallId(call),
            op,
            timeout: None,
        },
    );
    drain(m)
}

fn outcome(outs: &[Output]) -> Option<crate::catalog::OperationOutcome> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::OperationCompleted { outcome, .. }) => Some(outcome.clone()),
        _ => None,
    })
}

#[test]
fn an_acknowledgement_of_the_stream_a_subscription_replaced_counts_for_nothing() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, conn, listen) = connected_with(probing(), caps);
    let (old, _) = listen.expect("a stream is asked for");
    let outs = follow(&mut m, 10, 4, "sim://s/a", true);
    let new = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "subscriptions/listen")
        .expect("asked again with the new filter")
        .1;
    assert_eq!(m.counters().stream_subscriptions_changed, 1);
    let ack = "notifications/subscriptions/acknowledged";
    frame(&mut m, 20, conn, stream_frame(old, ack));
    assert_eq!(m.counters().listens_acknowledged, 0);
    frame(&mut m, 30, conn, stream_frame(new, ack));
    assert_eq!(m.counters().listens_acknowledged, 1);
}

#[test]
fn a_stream_follows_at_most_its_bound_of_resources() {
    let caps: Value = serde_json::from_str(LISTING_CAPS).unwrap();
    let (mut m, _, _) = connected_with(probing(), caps);
    for i in 0..super::subscriptions::MAX_SUBSCRIBED_URIS as u64 {
        let outs = follow(&mut m, 10, 100 + i, &format!("sim://s/{i}"), true);
        assert!(
            matches!(
                outcome(&outs),
                Some(crate::catalog::OperationOutcome::Ok(_))
            ),
            "{i}: {outs:?}"
        );
    }
    // One more is refused; one it already follows is not.
    let outs = follow(&mut m, 11, 1, "sim://s/new", true);
    assert!(
        matches!(
            outcome(&outs),
            Some(crate::catalog::OperationOutcome::Err(CallError::Protocol(
                _
            )))
        ),
        "{outs:?}"
    );
    let outs = follow(&mut m, 12, 2, "sim://s/0", true);
    assert!(
        matches!(
            outcome(&outs),
            Some(crate::catalog::OperationOutcome::Ok(_))
        ),
        "{outs:?}"
    );
}
