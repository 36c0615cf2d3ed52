//! The subscriptions stream of a stateless connection, driven through the manager's inputs:
//! a stream that keeps ending before the server acknowledges it is asked again later each
//! time (even when the timer runs late), and only an acknowledgement, not any notification on
//! it, counts as one.

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
