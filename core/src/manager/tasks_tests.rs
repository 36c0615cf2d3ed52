//! Tool calls run as tasks on a server of the initialize-based revisions, driven through the
//! manager's inputs: one request about a task is out at a time (a status notification waits for the
//! poll in flight, and a status of a task no call here runs changes nothing), a task call given up
//! cancels both the request in flight and the task, a call not sent as a task takes even a
//! task-shaped answer as its result, and a task id is read up to its length bound.

use super::era_tests::{answer, drain, notified, sent};
use super::legacy_tests::{call, call_outcome, connected, request_id, request_of};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};
use std::time::Duration;

/// A server that runs `t` as a task, connected; a call of it made and its task created
/// (`job-1`, polled every 200 ms), then polled once: the connection and the poll's id.
fn polling() -> (Manager, ConnId, u64) {
    let caps = json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}});
    let tool = json!([{"name": "t", "execution": {"taskSupport": "required"}}]);
    let (mut m, conn) = connected(ManagerOptions::default(), caps, tool);
    let first = request_of(
        &call(&mut m, 3, 1, Some(Duration::from_secs(60))),
        "tools/call",
    );
    let created = json!({"jsonrpc": "2.0", "id": first, "result": {
        "task": {"taskId": "job-1", "status": "working", "pollInterval": 200}}});
    answer(&mut m, 4, conn, created);
    m.handle_timeout(Instant::from_millis(204));
    let get = request_of(&drain(&mut m), "tasks/get");
    (m, conn, get)
}

fn status(status: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
        "params": {"taskId": "job-1", "status": status}})
}

#[test]
fn a_status_notification_during_a_poll_waits_for_the_polls_answer() {
    let (mut m, conn, get) = polling();
    let outs = answer(&mut m, 205, conn, status("completed"));
    assert_eq!(request_id(&outs, "tasks/result"), None, "{outs:?}");
    assert_eq!(m.counters().task_status_notifications, 1);
    // The poll's answer fetches the result, once.
    let done = json!({"jsonrpc": "2.0", "id": get, "result": {"taskId": "job-1",
        "status": "completed"}});
    let outs = answer(&mut m, 206, conn, done);
    let result = request_of(&outs, "tasks/result");
    let outs = answer(&mut m, 207, conn, status("completed"));
    assert_eq!(request_id(&outs, "tasks/result"), None, "{outs:?}");
    let outs = answer(
        &mut m,
        208,
        conn,
        json!({"jsonrpc": "2.0", "id": result, "result": {"content": []}}),
    );
    assert!(matches!(call_outcome(&outs), Some(CallOutcome::Ok(_))));
    assert_eq!(m.counters().task_status_notifications, 2);
}

#[test]
fn a_task_call_cancelled_during_a_poll_cancels_the_poll_and_the_task() {
    let (mut m, conn, get) = polling();
    m.handle(
        Instant::from_millis(205),
        Input::CancelCall { call: CallId(1) },
    );
    let outs = drain(&mut m);
    assert_eq!(call_outcome(&outs), Some(CallOutcome::Cancelled));
    let cancelled: Vec<(ConnId, Value)> = notified(&outs, "notifications/cancelled")
        .into_iter()
        .map(|(c, p)| (c, p["requestId"].clone()))
        .collect();
    assert_eq!(cancelled, vec![(conn, json!(get))], "{outs:?}");
    let cancel = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "tasks/cancel")
        .expect("the task is cancelled on the server");
    assert_eq!(cancel.3, json!({"taskId": "job-1"}));
    let c = m.counters();
    assert_eq!((c.task_cancels, c.calls_cancelled), (1, 1));
}

#[test]
fn a_call_not_sent_as_a_task_takes_a_task_shaped_answer_as_its_result() {
    // The server runs tools as tasks, but not this one: its call is plain, and whatever the
    // answer carries beside its content is not a task to poll.
    let caps = json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}});
    let (mut m, conn) = connected(ManagerOptions::default(), caps, json!([{"name": "t"}]));
    let first = request_of(
        &call(&mut m, 3, 1, Some(Duration::from_secs(60))),
        "tools/call",
    );
    let answered = json!({"jsonrpc": "2.0", "id": first, "result": {
        "content": [{"type": "text", "text": "done"}],
        "task": {"taskId": "job-1", "status": "working", "pollInterval": 200}}});
    let outs = answer(&mut m, 4, conn, answered);
    assert!(
        matches!(call_outcome(&outs), Some(CallOutcome::Ok(_))),
        "{outs:?}"
    );
    assert_eq!(m.counters().task_calls, 0);
    m.handle_timeout(Instant::from_millis(300));
    assert_eq!(request_id(&drain(&mut m), "tasks/get"), None);
}

#[test]
fn a_task_id_is_read_up_to_its_length_bound_and_refused_past_it() {
    let task = |len: usize| json!({"taskId": "x".repeat(len), "status": "working"});
    assert!(super::tasks::parse_task(&task(1)).is_some());
    assert!(super::tasks::parse_task(&task(1024)).is_some());
    assert!(super::tasks::parse_task(&task(1025)).is_none());
    assert!(super::tasks::parse_task(&task(0)).is_none());
}

#[test]
fn a_status_of_a_task_no_call_here_runs_changes_nothing() {
    // The server runs tasks for other clients too: a finished `job-2` is not our `job-1`.
    let (mut m, conn, get) = polling();
    let other = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
        "params": {"taskId": "job-2", "status": "completed"}});
    answer(&mut m, 205, conn, other);
    assert_eq!(m.counters().task_status_notifications, 0);
    // Our task is still working: its poll's answer asks again later, nothing is fetched.
    let working = json!({"jsonrpc": "2.0", "id": get, "result": {"taskId": "job-1",
        "status": "working"}});
    let outs = answer(&mut m, 206, conn, working);
    assert_eq!(request_id(&outs, "tasks/result"), None, "{outs:?}");
    assert_eq!(m.calls_in_flight(), vec![CallId(1)]);
}
