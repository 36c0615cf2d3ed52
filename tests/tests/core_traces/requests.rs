//! Every embedder request completes exactly once, with its own event: a round's report names
//! the request that opened it, a refresh reports its own result (queued behind a list under
//! way, answered by a connecting server's first list, refused at once when not connected),
//! and the transport's own faults (an undeliverable request, a renewed HTTP session, stderr
//! lines) reach exactly the call, attempt or server they belong to.

use super::{call_error, never_reconnect, sent_methods, snap, startup_reports, with_timeout};
use crate::script::*;
use serde_json::json;
use switchboard_core::manager::{
    CallError, CallOutcome, ConnId, Event, FrameKind, Input, Output, RefreshError, RequestError,
    RequestId, ServerErrorKind, TransportEvent,
};

/// The one completion of `request` (a round's start does not complete it), asserting there
/// is exactly one.
fn completion(s: &Script, request: RequestId) -> &Event {
    let done: Vec<_> = s
        .completions(request)
        .into_iter()
        .filter(|e| !matches!(e, Event::RoundStarted { .. }))
        .collect();
    match done[..] {
        [e] => e,
        _ => panic!(
            "request {request:?} completed {} times: {done:?}",
            done.len()
        ),
    }
}

/// The result of refresh `request`, asserting it completed exactly once.
fn refresh_result(s: &Script, request: RequestId) -> &Result<(), RefreshError> {
    match completion(s, request) {
        Event::RefreshCompleted { result, .. } => result,
        other => panic!("refresh {request:?} completed with {other:?}"),
    }
}

fn transport(s: &mut Script, ms: u64, conn: ConnId, event: TransportEvent) {
    s.at(ms, Input::Transport { conn, event });
}

/// The JSON-RPC id of the `n`th `tools/call` sent on `conn`.
fn call_request_id(s: &Script, conn: ConnId, n: usize) -> u64 {
    s.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, meta, .. }
                if *c == conn && meta.method == Some("tools/call") =>
            {
                match meta.kind {
                    FrameKind::Request { id } => Some(id),
                    _ => None,
                }
            }
            _ => None,
        })
        .nth(n)
        .expect("a tools/call request")
}

#[test]
fn every_request_completes_exactly_once_with_its_own_event() {
    let mut s = Script::new();
    let connect = s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(10, "a", &["x"]);
    s.ready(10, "b", &["y"]);
    // The round's start and its report both name the request that opened it.
    assert!(matches!(
        s.completions(connect)[..],
        [
            Event::RoundStarted { round: 1, .. },
            Event::StartupComplete { .. }
        ]
    ));
    assert_eq!(startup_reports(&s)[0].request, Some(connect));

    // A Sync that changes nothing starts no round: SyncCompleted is its only answer.
    let sync = s.sync(100, vec![stdio("a"), stdio("b")]);
    assert_eq!(
        completion(&s, sync),
        &Event::SyncCompleted { request: sync }
    );

    let (a, b) = (s.conn("a"), s.conn("b"));
    let one = s.disconnect(200, "a");
    assert_eq!(
        completion(&s, one),
        &Event::Disconnected {
            request: one,
            closed: vec![a],
        }
    );
    // An already-forgotten server is refused, by name.
    let again = s.disconnect(210, "a");
    assert_eq!(
        completion(&s, again),
        &Event::RequestFailed {
            request: again,
            error: RequestError::UnknownServer("a".into()),
        }
    );
    let all = s.disconnect_all(220);
    assert_eq!(
        completion(&s, all),
        &Event::Disconnected {
            request: all,
            closed: vec![b],
        }
    );
    // Nothing later answers any of them a second time.
    s.advance_to(60_000);
    for r in [connect, sync, one, again, all] {
        completion(&s, r);
    }
    snap("requests_complete_once", &s);
}

#[test]
fn a_refresh_asked_during_a_listing_waits_for_a_list_fetched_after_it() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["x"]);
    let first = s.refresh(100, "a");
    let queued = s.refresh(105, "a");
    assert_eq!(s.m.counters().refreshes_queued, 1);
    s.reply(110, "a", "tools/list", tools_json(&["x", "y"]));
    // The list under way answers the first refresh only: the second was asked after it was
    // sent, so it waits for one more list.
    assert_eq!(refresh_result(&s, first), &Ok(()));
    assert!(s.completions(queued).is_empty());
    assert_eq!(
        sent_methods(&s, s.conn("a")).last().map(String::as_str),
        Some("tools/list")
    );
    s.reply(120, "a", "tools/list", tools_json(&["x", "y", "z"]));
    assert_eq!(refresh_result(&s, queued), &Ok(()));
    assert_eq!(s.tool_names(), vec!["mcp_a_x", "mcp_a_y", "mcp_a_z"]);
    // A failed re-list is that refresh's error; the server keeps its tools.
    let failing = s.refresh(200, "a");
    s.reply_error(210, "a", "tools/list", -32603, "database locked");
    assert!(matches!(
        refresh_result(&s, failing),
        Err(RefreshError::Failed(e)) if e.kind == ServerErrorKind::ListFailed
    ));
    assert_eq!(s.tool_names().len(), 3);
    snap("requests_refresh_queued", &s);
}

#[test]
fn a_refresh_of_a_connecting_server_is_answered_by_its_first_list() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.opened(10, "a");
    let r = s.refresh(15, "a");
    assert!(
        s.completions(r).is_empty(),
        "no answer before the first list"
    );
    s.reply(20, "a", "initialize", init_result());
    s.reply(30, "a", "tools/list", tools_json(&["x"]));
    assert_eq!(refresh_result(&s, r), &Ok(()));
    assert_eq!(s.m.counters().refreshes_of_connecting, 1);
    // A connecting server whose first list fails loses the refresh with it.
    s.opened(40, "b");
    let lost = s.refresh(45, "b");
    s.reply(50, "b", "initialize", init_result());
    s.reply_error(60, "b", "tools/list", -32603, "tools unavailable");
    assert!(matches!(
        refresh_result(&s, lost),
        Err(RefreshError::Lost(_))
    ));
}

#[test]
fn a_refresh_of_a_server_that_is_not_connected_fails_at_once_with_its_reason() {
    let mut s = Script::with(never_reconnect());
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["x"]);
    let conn = s.conn("a");
    let reason = "exit status 1".to_string();
    transport(&mut s, 20, conn, TransportEvent::Closed { reason });
    let mark = s.outputs.len();
    let r = s.refresh(30, "a");
    assert!(matches!(
        refresh_result(&s, r),
        Err(RefreshError::NotConnected { server, reason: Some(e) })
            if server == "a" && e.kind == ServerErrorKind::Closed
    ));
    assert!(
        s.outputs[mark..]
            .iter()
            .all(|o| !matches!(o, Output::Send { .. } | Output::OpenTransport { .. })),
        "a refused refresh sends and opens nothing"
    );
    assert_eq!(s.m.counters().refreshes_not_connected, 1);
}

#[test]
fn a_stderr_tail_belongs_to_the_attempt_that_wrote_it() {
    let mut s = Script::with(never_reconnect());
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["x"]);
    let first = s.conn("a");
    for line in ["warming up", "panicked at src/main.rs"] {
        let line = line.to_string();
        transport(&mut s, 15, first, TransportEvent::Stderr { line });
    }
    let reason = "exit status 101".to_string();
    transport(&mut s, 20, first, TransportEvent::Closed { reason });
    let failed = s.m.server_state("a").unwrap().last_error.unwrap();
    assert_eq!(failed.kind, ServerErrorKind::Closed);
    assert_eq!(
        failed.stderr_tail.as_deref(),
        Some("warming up\npanicked at src/main.rs")
    );
    // A new attempt starts with no tail: its own failure never shows the old lines.
    s.connect(100, vec![with_timeout(stdio("a"), 500)]);
    s.cache(101, "a", None);
    assert_ne!(s.conn("a"), first);
    s.opened(110, "a");
    s.advance_to(700);
    let report = startup_reports(&s)[1];
    assert_eq!(report.errors["a"].kind, ServerErrorKind::ConnectTimeout);
    assert_eq!(report.errors["a"].stderr_tail, None);
    snap("requests_stderr_tail_per_attempt", &s);
}

#[test]
fn an_undeliverable_request_fails_exactly_that_call_with_a_transport_error() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["echo"]);
    s.call(20, 1, "mcp_a_echo", json!({}));
    s.call(20, 2, "mcp_a_echo", json!({}));
    let conn = s.conn("a");
    let id = call_request_id(&s, conn, 0);
    let error = "POST failed: connection reset".to_string();
    transport(
        &mut s,
        30,
        conn,
        TransportEvent::RequestFailed { id, error },
    );
    let e = call_error(&s, 1);
    assert!(
        matches!(e, CallError::Transport(t) if t.kind == ServerErrorKind::RequestFailed),
        "{e:?}"
    );
    assert!(
        !e.to_string().contains("-32000"),
        "a local failure never reads as a server's error: {e}"
    );
    // The other call and the server are untouched.
    assert!(s.outcome(2).is_empty());
    let id2 = call_request_id(&s, conn, 1);
    let answer = json!({"jsonrpc": "2.0", "id": id2, "result": {"content": []}});
    s.frame_on(40, conn, answer);
    assert!(matches!(s.outcome(2)[..], [CallOutcome::Ok(_)]));
    assert_eq!(s.outcome(1).len(), 1, "the failed call completes only once");
    assert_eq!(s.m.counters().requests_failed_by_transport, 1);
    snap("requests_transport_failed_call", &s);
}

#[test]
fn a_renewed_session_lists_the_tools_again() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["x"]);
    let conn = s.conn("a");
    let lists = |s: &Script| {
        sent_methods(s, conn)
            .iter()
            .filter(|m| *m == "tools/list")
            .count()
    };
    let before = lists(&s);
    transport(&mut s, 50, conn, TransportEvent::SessionRenewed);
    assert_eq!(
        s.count(|o| matches!(o, Output::Event(Event::SessionRenewed { server }) if server == "a")),
        1
    );
    assert_eq!(lists(&s), before + 1, "the renewed session lists again");
    s.reply(60, "a", "tools/list", tools_json(&["x", "y"]));
    assert_eq!(s.tool_names(), vec!["mcp_a_x", "mcp_a_y"]);
    assert_eq!(s.m.counters().sessions_renewed, 1);
}
