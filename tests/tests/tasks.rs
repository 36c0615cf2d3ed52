//! Tool calls that run as tasks (MCP 2025-11-25), as scripted core traces: a tool whose
//! `execution.taskSupport` is `required` is called with a `task` param on a server that
//! declared task-augmented `tools/call`; the core polls `tasks/get` at the server's
//! `pollInterval` (bounded), fetches `tasks/result`, and the caller sees exactly one
//! `CallCompleted` whether the task finishes, fails, stalls past the deadline or is
//! cancelled.

use crate::script::*;
use crate::support::with_snapshots;
use serde_json::{json, Value};
use std::time::Duration;
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, Input, Output, TimerReason, TASK_POLL_MAX, TASK_POLL_MIN,
};

fn init_with_tasks() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
        "serverInfo": {"name": "tasks", "version": "1.0"}
    })
}

fn task_tools() -> Value {
    json!({"tools": [
        {"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        {"name": "either", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
    ]})
}

/// Server `a`, connected at 10 ms with the two tools; `tasks` says whether it declared them.
fn connected(s: &mut Script, tasks: bool) {
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(10, "a");
    let init = if tasks {
        init_with_tasks()
    } else {
        init_result()
    };
    s.reply(10, "a", "initialize", init);
    s.reply(10, "a", "tools/list", task_tools());
}

/// The params of the last request of `method` sent.
fn last_sent(s: &Script, method: &str) -> Option<Value> {
    s.outputs.iter().rev().find_map(|o| match o {
        Output::Send { frame, meta, .. } if meta.method == Some(method) => {
            let v: Value = serde_json::from_slice(frame).ok()?;
            Some(v["params"].clone())
        }
        _ => None,
    })
}

fn sent_count(s: &Script, method: &str) -> usize {
    s.count(|o| matches!(o, Output::Send { meta, .. } if meta.method == Some(method)))
}

fn task(status: &str, poll_ms: u64) -> Value {
    json!({"taskId": "t-1", "status": status, "createdAt": "2025-11-25T10:30:00Z",
           "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": poll_ms})
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn ok_text(s: &Script, call: u64) -> Option<String> {
    match s.outcome(call)[..] {
        [CallOutcome::Ok(r)] => Some(r.render_text()),
        _ => None,
    }
}

#[test]
fn a_task_that_finishes_is_polled_at_its_interval_and_completes_once() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_long", json!({}));
    assert_eq!(last_sent(&s, "tools/call").unwrap()["task"], json!({}));
    s.reply(
        110,
        "a",
        "tools/call",
        json!({"task": task("working", 500)}),
    );
    assert_eq!(
        s.m.next_timer(),
        Some((
            switchboard_core::Instant::from_millis(610),
            TimerReason::TaskPoll { call: CallId(1) }
        ))
    );
    s.advance_to(610);
    assert_eq!(
        last_sent(&s, "tasks/get").unwrap(),
        json!({"taskId": "t-1"})
    );
    s.reply(620, "a", "tasks/get", task("working", 1000));
    s.advance_to(1619);
    assert_eq!(
        sent_count(&s, "tasks/get"),
        1,
        "the next poll waits its interval"
    );
    s.advance_to(1620);
    assert_eq!(sent_count(&s, "tasks/get"), 2);
    s.reply(1630, "a", "tasks/get", task("completed", 1000));
    assert_eq!(
        last_sent(&s, "tasks/result").unwrap(),
        json!({"taskId": "t-1"})
    );
    assert!(s.outcome(1).is_empty());
    s.reply(1640, "a", "tasks/result", text_result("done"));
    assert_eq!(ok_text(&s, 1).as_deref(), Some("done"));
    assert!(s.m.calls_in_flight().is_empty());
    assert_eq!(s.m.counters().task_calls, 1);
    assert_eq!(s.m.counters().task_polls, 2);
    // Nothing of the task is left: no poll timer, only the server's own timers.
    assert!(!matches!(
        s.m.next_timer(),
        Some((_, TimerReason::TaskPoll { .. }))
    ));
    with_snapshots(|| insta::assert_snapshot!("tasks_finish", s.finish()));
}

#[test]
fn optional_tools_and_servers_without_the_capability_are_called_directly() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_either", json!({}));
    assert_eq!(last_sent(&s, "tools/call").unwrap().get("task"), None);
    s.reply(110, "a", "tools/call", text_result("direct"));
    assert_eq!(ok_text(&s, 1).as_deref(), Some("direct"));

    let mut s = Script::new();
    connected(&mut s, false);
    s.call(100, 1, "mcp_a_long", json!({}));
    assert_eq!(last_sent(&s, "tools/call").unwrap().get("task"), None);
    s.reply(110, "a", "tools/call", text_result("direct"));
    assert_eq!(ok_text(&s, 1).as_deref(), Some("direct"));
    assert_eq!(s.m.counters().task_calls, 0);
}

#[test]
fn poll_intervals_are_bounded_and_a_status_notification_fetches_the_result_early() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_long", json!({}));
    // 1 ms asked: polled no sooner than the floor.
    s.reply(100, "a", "tools/call", json!({"task": task("working", 1)}));
    let floor = 100 + TASK_POLL_MIN.as_millis() as u64;
    s.advance_to(floor - 1);
    assert_eq!(sent_count(&s, "tasks/get"), 0);
    s.advance_to(floor);
    assert_eq!(sent_count(&s, "tasks/get"), 1);
    // An hour asked: polled no later than the ceiling.
    s.reply(floor, "a", "tasks/get", task("working", 3_600_000));
    let ceiling = floor + TASK_POLL_MAX.as_millis() as u64;
    assert_eq!(
        s.m.next_timer().map(|(at, _)| at.as_millis()),
        Some(ceiling)
    );
    // The server says it is done before that: the result is fetched now, the poll dropped.
    let conn = s.conn("a");
    s.frame_on(
        floor + 50,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
               "params": task("completed", 1000)}),
    );
    assert_eq!(sent_count(&s, "tasks/result"), 1);
    assert!(!matches!(
        s.m.next_timer(),
        Some((_, TimerReason::TaskPoll { .. }))
    ));
    s.reply(floor + 60, "a", "tasks/result", text_result("early"));
    assert_eq!(ok_text(&s, 1).as_deref(), Some("early"));
    assert_eq!(s.m.counters().task_status_notifications, 1);
}

#[test]
fn a_failed_task_completes_with_the_servers_answer() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_long", json!({}));
    s.reply(110, "a", "tools/call", json!({"task": task("failed", 500)}));
    // Already terminal: no poll, straight to the result.
    assert_eq!(sent_count(&s, "tasks/get"), 0);
    s.reply_error(120, "a", "tasks/result", -32603, "the job crashed");
    assert!(
        matches!(s.outcome(1)[..], [CallOutcome::Err(CallError::Rpc { code: -32603, ref message, .. })]
            if message == "the job crashed"),
        "{:?}",
        s.outcome(1)
    );
}

#[test]
fn a_stalled_task_times_out_once_and_is_cancelled_on_the_server() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.at(
        100,
        Input::CallTool {
            call: CallId(1),
            tool: "mcp_a_long".into(),
            arguments: None,
            timeout: Some(Duration::from_millis(2000)),
            progress: false,
            meta: None,
        },
    );
    s.reply(
        110,
        "a",
        "tools/call",
        json!({"task": task("working", 500)}),
    );
    s.advance_to(610);
    // The poll is never answered; the call's deadline still holds.
    s.advance_to(2100);
    assert!(
        matches!(
            s.outcome(1)[..],
            [CallOutcome::Err(CallError::Timeout { .. })]
        ),
        "{:?}",
        s.outcome(1)
    );
    assert_eq!(
        last_sent(&s, "tasks/cancel").unwrap(),
        json!({"taskId": "t-1"})
    );
    // The unanswered tasks/get was cancelled too.
    assert_eq!(sent_count(&s, "notifications/cancelled"), 1);
    // Late answers change nothing: still one outcome.
    s.reply(2200, "a", "tasks/get", task("completed", 500));
    s.reply(2200, "a", "tasks/cancel", task("cancelled", 500));
    assert_eq!(s.outcome(1).len(), 1);
    assert_eq!(sent_count(&s, "tasks/result"), 0);
    assert_eq!(s.m.counters().task_cancels, 1);
    with_snapshots(|| insta::assert_snapshot!("tasks_stall_timeout", s.finish()));
}

#[test]
fn a_cancelled_task_call_completes_cancelled_once() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_long", json!({}));
    s.reply(
        110,
        "a",
        "tools/call",
        json!({"task": task("working", 500)}),
    );
    s.at(300, Input::CancelCall { call: CallId(1) });
    assert!(matches!(s.outcome(1)[..], [CallOutcome::Cancelled]));
    assert_eq!(
        last_sent(&s, "tasks/cancel").unwrap(),
        json!({"taskId": "t-1"})
    );
    // No poll is left behind, and none goes out.
    s.advance_to(5000);
    assert_eq!(sent_count(&s, "tasks/get"), 0);
    assert_eq!(s.outcome(1).len(), 1);
    assert!(s.m.calls_in_flight().is_empty());
}

#[test]
fn a_task_answer_without_a_valid_task_is_a_protocol_error() {
    let mut s = Script::new();
    connected(&mut s, true);
    s.call(100, 1, "mcp_a_long", json!({}));
    s.reply(
        110,
        "a",
        "tools/call",
        json!({"task": {"status": "working"}}),
    );
    assert!(
        matches!(s.outcome(1)[..], [CallOutcome::Err(CallError::Protocol(_))]),
        "{:?}",
        s.outcome(1)
    );
}
