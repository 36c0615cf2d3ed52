//! Failures and what follows them, driven through the manager's inputs: a startup failure is
//! retried only when the policy says so, a failure after the gate is logged as late once, a
//! transport that closed by itself is not asked to close again, a refresh of a failed server is
//! answered at once with why, a call made against a cached tool is sent once its server connects,
//! nothing waits for a server that is down for good, and a request the transport could not deliver
//! fails alone, in the transport's words (a probe falls back to `initialize`); a stopped server
//! connected again with a new config runs (and is cached) under the new one; a health check fails
//! only after as many missed pings as allowed; only a connection made again after a loss counts as
//! a reconnect, and the breaker counts closes up to exactly one burst window apart; progress is
//! asked for whenever the caller wants it; a late answer to a call given up on is ignored quietly,
//! and one to a request never sent loudly; an answer that cannot be read fails its call at once.

use super::era_tests::{
    answer, deferred_on_cache, drain, lose_and_reconnect, open, probing, sent, transport_opened,
};
use super::legacy_tests::{call, call_outcome, connected, initialize_ok, request_id, request_of};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};
use std::time::Duration;

fn initialize_refused(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "broken"}})
}

fn tools_ok(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "t",
        "inputSchema": {"type": "object"}}]}})
}

fn reconnects(outs: &[Output]) -> usize {
    outs.iter()
        .filter(|o| matches!(o, Output::Event(Event::ReconnectScheduled { .. })))
        .count()
}

fn closes(outs: &[Output], conn: ConnId) -> usize {
    outs.iter()
        .filter(|o| matches!(o, Output::CloseTransport { conn: c } if *c == conn))
        .count()
}

#[test]
fn a_server_that_fails_during_startup_is_retried_only_when_the_policy_says_so() {
    for retry in [false, true] {
        let mut o = ManagerOptions::default();
        o.reconnect.retry_startup_failures = retry;
        let mut m = Manager::new(o, Instant::ZERO);
        let (conn, outs) = open(&mut m, 0);
        let init = request_of(&outs, "initialize");
        let outs = answer(&mut m, 1, conn, initialize_refused(init));
        assert_eq!(
            reconnects(&outs),
            usize::from(retry),
            "retry {retry}: {outs:?}"
        );
        assert_eq!(m.counters().startup_retries, u64::from(retry));
        let state = m.server_state("s").unwrap();
        assert_eq!(
            state.last_error.map(|e| e.kind),
            Some(ServerErrorKind::InitializeFailed)
        );
        // The core ended the attempt, so it closes its transport, once.
        assert_eq!(closes(&outs, conn), 1);
    }
}

#[test]
fn a_refresh_of_a_failed_server_is_answered_at_once_with_why_it_failed() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    answer(&mut m, 1, conn, initialize_refused(init));
    m.handle(
        Instant::from_millis(2),
        Input::RefreshTools {
            request: RequestId(9),
            server: "s".into(),
        },
    );
    let outs = drain(&mut m);
    let result = outs.iter().find_map(|o| match o {
        Output::Event(Event::RefreshCompleted {
            request: RequestId(9),
            result,
            ..
        }) => Some(result.clone()),
        _ => None,
    });
    match result {
        Some(Err(RefreshError::NotConnected { server, reason })) => {
            assert_eq!(server, "s");
            assert_eq!(
                reason.map(|e| e.kind),
                Some(ServerErrorKind::InitializeFailed)
            );
        }
        other => panic!("{other:?} in {outs:?}"),
    }
    assert_eq!(m.counters().refreshes_not_connected, 1);
}

#[test]
fn a_failure_after_the_gate_is_counted_as_late_and_a_lost_connection_is_not() {
    let o = ManagerOptions {
        reconnect: ReconnectPolicy::never(),
        gate: Duration::from_millis(100),
        // Servers without a cached list are not waited for past the gate.
        uncached_wait: Some(Duration::ZERO),
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    // The gate passes while the server is still initializing...
    m.handle_timeout(Instant::from_millis(100));
    assert!(drain(&mut m)
        .iter()
        .any(|o| matches!(o, Output::Event(Event::StartupComplete { .. }))));
    // ...then it fails: a late failure.
    answer(&mut m, 150, conn, initialize_refused(init));
    assert_eq!(m.counters().late_failures, 1);
    // Connected again by hand, then lost: a lost connection, not a late failure.
    let (conn, outs) = open(&mut m, 200);
    let init = request_of(&outs, "initialize");
    let outs = answer(&mut m, 201, conn, initialize_ok(init, json!({"tools": {}})));
    answer(&mut m, 202, conn, tools_ok(request_of(&outs, "tools/list")));
    m.handle_timeout(Instant::from_millis(300));
    drain(&mut m);
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    m.handle(
        Instant::from_millis(400),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    let outs = drain(&mut m);
    assert_eq!(m.counters().late_failures, 1);
    // The transport closed by itself: it is not asked to close again.
    assert_eq!(closes(&outs, conn), 0, "{outs:?}");
}

#[test]
fn a_call_made_against_a_cached_tool_is_sent_once_its_server_connects() {
    // Past the gate, the cached tool is shown while the server starts; a call to it waits.
    let (mut m, conn) = deferred_on_cache(
        ManagerOptions::default(),
        vec![crate::tool::ToolDef::named("t")],
    );
    assert!(m.tools()[0].deferred);
    assert!(request_id(&call(&mut m, 2, 3, None), "tools/call").is_none());
    let init = request_of(&transport_opened(&mut m, 3, conn), "initialize");
    let outs = answer(&mut m, 4, conn, initialize_ok(init, json!({"tools": {}})));
    let outs = answer(&mut m, 5, conn, tools_ok(request_of(&outs, "tools/list")));
    let id = request_id(&outs, "tools/call").expect("the waiting call is sent");
    assert_eq!(m.counters().deferred_calls_sent, 1);
    let outs = answer(
        &mut m,
        6,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}),
    );
    assert!(
        outs.iter().any(|o| matches!(
            o,
            Output::Event(Event::CallCompleted {
                call: CallId(3),
                outcome: CallOutcome::Ok(_),
                ..
            })
        )),
        "{outs:?}"
    );
}

#[test]
fn an_operation_for_a_server_down_for_good_fails_at_once_with_why_and_its_tools_are_gone() {
    let (mut m, conn) = deferred_on_cache(
        ManagerOptions::default(),
        vec![crate::tool::ToolDef::named("t")],
    );
    let init = request_of(&transport_opened(&mut m, 101, conn), "initialize");
    // Refused, and startup failures are not retried by default: the server is down for good.
    answer(&mut m, 102, conn, initialize_refused(init));
    assert_eq!(
        m.server_state("s").unwrap().status,
        ServerStatus::Disconnected
    );
    // Its cached tool left the view with it: a call to it says so.
    let outs = call(&mut m, 103, 3, None);
    assert!(
        outs.iter().any(|o| matches!(
            o,
            Output::Event(Event::CallCompleted {
                call: CallId(3),
                outcome: CallOutcome::Err(CallError::WithdrawnTool { .. }),
            })
        )),
        "{outs:?}"
    );
    assert_eq!(m.counters().calls_to_retired_tools, 1);
    // An operation addressed to it by name does not wait for a start that will not come.
    m.handle(
        Instant::from_millis(104),
        Input::Operation {
            call: CallId(4),
            op: crate::catalog::Operation::ReadResource {
                uri: "file:///a".into(),
                server: Some("s".into()),
            },
            timeout: None,
        },
    );
    let outs = drain(&mut m);
    let failed = outs.iter().find_map(|o| match o {
        Output::Event(Event::OperationCompleted {
            call: CallId(4),
            outcome: crate::catalog::OperationOutcome::Err(CallError::NotConnected { reason, .. }),
        }) => Some(reason.as_ref().map(|e| e.kind)),
        _ => None,
    });
    assert_eq!(
        failed,
        Some(Some(ServerErrorKind::InitializeFailed)),
        "{outs:?}"
    );
    assert!(m.operations_in_flight().is_empty());
}

#[test]
fn a_call_the_transport_could_not_deliver_fails_alone_as_a_transport_error() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"}}]),
    );
    let id = request_of(&call(&mut m, 10, 1, None), "tools/call");
    let failed = |m: &mut Manager, at: u64, id: u64| {
        m.handle(
            Instant::from_millis(at),
            Input::Transport {
                conn,
                event: TransportEvent::RequestFailed {
                    id,
                    error: "connection reset".into(),
                },
            },
        );
        drain(m)
    };
    let outs = failed(&mut m, 11, id);
    match call_outcome(&outs) {
        Some(CallOutcome::Err(CallError::Transport(e))) => {
            assert_eq!(e.kind, ServerErrorKind::RequestFailed);
        }
        other => panic!("{other:?} in {outs:?}"),
    }
    assert_eq!(m.counters().requests_failed_by_transport, 1);
    // The server itself is fine; a failure for a request not in flight is only counted.
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    let outs = failed(&mut m, 12, id);
    assert_eq!(call_outcome(&outs), None);
    let c = m.counters();
    assert_eq!(
        (c.requests_failed_by_transport, c.unknown_responses),
        (1, 1)
    );
}

#[test]
fn a_stopped_server_connected_again_with_a_new_config_is_started_and_cached_under_it() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let init = request_of(&outs, "initialize");
    // Fails to start and is not retried: stopped.
    answer(&mut m, 1, conn, initialize_refused(init));
    assert_eq!(
        m.server_state("s").unwrap().status,
        ServerStatus::Disconnected
    );
    let config = crate::config::ServerConfig::stdio("srv", &["--fixed"]);
    m.handle(
        Instant::from_millis(2),
        Input::Connect {
            request: RequestId(2),
            servers: vec![crate::config::ServerSpec::new("s", config.clone())],
        },
    );
    let outs = drain(&mut m);
    let asked: Vec<String> = outs
        .iter()
        .filter_map(|o| match o {
            Output::LoadCache { key, .. } => Some(key.config_hash.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![crate::config::config_hash(&config)], "{outs:?}");
    let opened: Vec<Vec<String>> = outs
        .iter()
        .filter_map(|o| match o {
            Output::OpenTransport {
                config: crate::config::TransportConfig::Stdio { args, .. },
                ..
            } => Some(args.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(opened, vec![vec!["--fixed".to_string()]], "{outs:?}");
}

#[test]
fn a_probe_the_transport_could_not_deliver_falls_back_to_initialize() {
    let mut m = Manager::new(probing(), Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    let probe = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "server/discover")
        .expect("probed")
        .1;
    m.handle(
        Instant::from_millis(1),
        Input::Transport {
            conn,
            event: TransportEvent::RequestFailed {
                id: probe,
                error: "HTTP 404".into(),
            },
        },
    );
    let outs = drain(&mut m);
    assert!(request_id(&outs, "initialize").is_some(), "{outs:?}");
    assert_eq!(m.counters().probes_legacy, 1);
}

#[test]
fn progress_is_asked_for_whenever_the_caller_wants_it() {
    let (mut m, _) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"}}]),
    );
    for (call, progress) in [(1, false), (2, true)] {
        m.handle(
            Instant::from_millis(10),
            Input::CallTool {
                call: CallId(call),
                tool: "mcp_s_t".into(),
                arguments: None,
                timeout: None,
                progress,
                meta: None,
            },
        );
        let params = sent(&drain(&mut m))
            .into_iter()
            .find(|r| r.2 == "tools/call")
            .expect("sent")
            .3;
        assert_eq!(
            params["_meta"].get("progressToken").is_some(),
            progress,
            "{params}"
        );
    }
}

#[test]
fn a_server_fails_its_health_check_only_after_as_many_missed_pings_as_allowed() {
    let o = ManagerOptions {
        health: Some(HealthPolicy {
            interval: Duration::from_secs(1),
            timeout: Duration::from_millis(100),
            misses: 2,
        }),
        ..ManagerOptions::default()
    };
    let (mut m, _) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let pings = |outs: &[Output]| sent(outs).iter().filter(|r| r.2 == "ping").count();
    let mut at = 2;
    let mut asked = 0;
    // Ping, then let each one go unanswered: the first miss pings again at once.
    while asked < 2 && at < 5_000 {
        m.handle_timeout(Instant::from_millis(at));
        asked += pings(&drain(&mut m));
        at += 1;
    }
    assert_eq!(asked, 2, "a ping, and one more after the first miss");
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.counters().ping_timeouts, 1);
    m.handle_timeout(Instant::from_millis(at + 200));
    drain(&mut m);
    let state = m.server_state("s").unwrap();
    assert_eq!(
        state.last_error.map(|e| e.kind),
        Some(ServerErrorKind::HealthCheck)
    );
    assert_eq!(m.counters().health_failures, 1);
}

#[test]
fn only_a_connection_made_again_after_a_loss_counts_as_a_reconnect() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    assert_eq!(m.counters().reconnects_succeeded, 0);
    let (conn, at, outs) = lose_and_reconnect(&mut m, conn, 3);
    let init = request_of(&outs, "initialize");
    let t = at.as_millis();
    let outs = answer(
        &mut m,
        t + 1,
        conn,
        initialize_ok(init, json!({"tools": {}})),
    );
    answer(
        &mut m,
        t + 2,
        conn,
        tools_ok(request_of(&outs, "tools/list")),
    );
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    assert_eq!(m.counters().reconnects_succeeded, 1);
}

#[test]
fn a_close_exactly_one_burst_window_after_another_still_counts_toward_the_breaker() {
    for (second_close, tripped) in [(1_010, true), (1_011, false)] {
        let o = ManagerOptions {
            reconnect: ReconnectPolicy {
                initial: Duration::from_millis(10),
                jitter: 0.0,
                burst_limit: 1,
                burst_window: Duration::from_secs(1),
                ..ReconnectPolicy::default()
            },
            ..ManagerOptions::default()
        };
        let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
        // Lost at 10 ms, reconnected at once.
        let (conn2, at, outs) = lose_and_reconnect(&mut m, conn, 10);
        let t = at.as_millis();
        let init = request_of(&outs, "initialize");
        let outs = answer(&mut m, t, conn2, initialize_ok(init, json!({"tools": {}})));
        answer(&mut m, t, conn2, tools_ok(request_of(&outs, "tools/list")));
        assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
        // Lost again, exactly one window after the first loss or just past it.
        m.handle(
            Instant::from_millis(second_close),
            Input::Transport {
                conn: conn2,
                event: TransportEvent::Closed {
                    reason: "exit 1".into(),
                },
            },
        );
        let outs = drain(&mut m);
        assert_eq!(
            reconnects(&outs),
            usize::from(!tripped),
            "{second_close}: {outs:?}"
        );
        assert_eq!(
            m.counters().breakers_tripped,
            u64::from(tripped),
            "{second_close}"
        );
    }
}

#[test]
fn a_late_answer_to_a_call_given_up_on_is_ignored_quietly_and_a_strange_one_loudly() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    let id = request_of(
        &call(&mut m, 3, 1, Some(Duration::from_millis(100))),
        "tools/call",
    );
    m.handle_timeout(Instant::from_millis(103));
    assert!(matches!(
        call_outcome(&drain(&mut m)),
        Some(CallOutcome::Err(CallError::Timeout { .. }))
    ));
    let levels = |outs: &[Output]| -> Vec<Level> {
        outs.iter()
            .filter_map(|o| match o {
                Output::Event(Event::Diagnostic { level, .. }) => Some(*level),
                _ => None,
            })
            .collect()
    };
    let late = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}});
    let outs = answer(&mut m, 104, conn, late);
    assert_eq!(call_outcome(&outs), None);
    assert_eq!(levels(&outs), vec![Level::Debug]);
    let never = json!({"jsonrpc": "2.0", "id": 777, "result": {}});
    assert_eq!(levels(&answer(&mut m, 105, conn, never)), vec![Level::Warn]);
    assert_eq!(m.counters().unknown_responses, 2);
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
}

#[test]
fn an_answer_that_cannot_be_read_fails_its_call_now_and_the_connection_goes_on() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    let id = request_of(
        &call(&mut m, 3, 1, Some(Duration::from_secs(60))),
        "tools/call",
    );
    // Invalid UTF-8 in a string: not a frame this client reads, but its id still shows.
    let mut frame =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#)
            .into_bytes();
    frame.extend_from_slice(b"\xff\xfe\"}]}}");
    m.handle(
        Instant::from_millis(4),
        Input::Transport {
            conn,
            event: TransportEvent::Frame(bytes::Bytes::from(frame)),
        },
    );
    let outs = drain(&mut m);
    match call_outcome(&outs) {
        Some(CallOutcome::Err(CallError::Transport(e))) => {
            assert_eq!(e.kind, ServerErrorKind::RequestFailed, "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.connections(), vec!["s"]);
    let c = m.counters();
    assert_eq!((c.unreadable_answers, c.bad_frames), (1, 1));
}
