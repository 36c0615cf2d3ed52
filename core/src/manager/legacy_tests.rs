//! A server of the initialize-based revisions, driven through the manager's inputs: what a
//! refused version, an unanswered request, a repeated tool name, a list too long, a re-list
//! and a refresh lost with its connection are reported as, and the counters that count each.

use super::era_tests::{answer, drain, open, sent};
use super::*;
use crate::time::Instant;
use serde_json::{json, Value};
use std::time::Duration;

pub(super) fn initialize_ok(id: u64, caps: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25",
        "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}})
}

pub(super) fn tools(id: u64, tools: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})
}

/// The request of `method` among `outs`, if one was sent: its id.
pub(super) fn request_id(outs: &[Output], method: &str) -> Option<u64> {
    sent(outs).iter().find(|r| r.2 == method).map(|r| r.1)
}

/// The request of `method` among `outs`: its id.
pub(super) fn request_of(outs: &[Output], method: &str) -> u64 {
    request_id(outs, method).unwrap_or_else(|| panic!("no {method} in {outs:?}"))
}

/// Opened and initialized with `caps`: the connection and the `tools/list` request's id.
fn initialized(m: &mut Manager, caps: Value) -> (ConnId, u64) {
    let (conn, outs) = open(m, 0);
    let init = request_of(&outs, "initialize");
    let outs = answer(m, 1, conn, initialize_ok(init, caps));
    (conn, request_of(&outs, "tools/list"))
}

/// A server listing the tools `t`, connected.
pub(super) fn connected(o: ManagerOptions, caps: Value, t: Value) -> (Manager, ConnId) {
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, list) = initialized(&mut m, caps);
    answer(&mut m, 2, conn, tools(list, t));
    assert_eq!(m.server_state("s").unwrap().status, ServerStatus::Connected);
    (m, conn)
}

/// The attempt these outputs open, if any.
fn opened(outs: &[Output]) -> Option<ConnId> {
    outs.iter().find_map(|o| match o {
        Output::OpenTransport { conn, .. } => Some(*conn),
        _ => None,
    })
}

/// Connects `spec` at time zero; the attempt it opens.
fn connect_spec(m: &mut Manager, spec: crate::config::ServerSpec) -> ConnId {
    m.handle(
        Instant::ZERO,
        Input::Connect {
            request: RequestId(1),
            servers: vec![spec],
        },
    );
    opened(&drain(m)).expect("opened")
}

pub(super) fn call(m: &mut Manager, at: u64, id: u64, timeout: Option<Duration>) -> Vec<Output> {
    call_with(m, at, id, timeout, false)
}

fn call_with(
    m: &mut Manager,
    at: u64,
    id: u64,
    timeout: Option<Duration>,
    progress: bool,
) -> Vec<Output> {
    m.handle(
        Instant::from_millis(at),
        Input::CallTool {
            call: CallId(id),
            tool: "mcp_s_t".into(),
            arguments: None,
            timeout,
            progress,
            meta: None,
        },
    );
    drain(m)
}

pub(super) fn call_outcome(outs: &[Output]) -> Option<CallOutcome> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::CallCompleted { outcome, .. }) => Some(outcome.clone()),
        _ => None,
    })
}

fn cancelled_ids(outs: &[Output]) -> Vec<u64> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { meta, .. } => match meta.kind {
                FrameKind::Notification { cancels: Some(id) } => Some(id),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn a_version_refused_by_initialize_fails_the_server_as_unsupported_version() {
    for (code, kind, counted) in [
        (-32022, ServerErrorKind::UnsupportedVersion, 1),
        (-32603, ServerErrorKind::InitializeFailed, 0),
    ] {
        let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
        let (conn, outs) = open(&mut m, 0);
        let init = request_of(&outs, "initialize");
        let refusal = json!({"jsonrpc": "2.0", "id": init, "error": {"code": code,
            "message": "no", "data": {"supported": ["2026-07-28"]}}});
        answer(&mut m, 1, conn, refusal);
        let state = m.server_state("s").unwrap();
        assert_eq!(state.last_error.map(|e| e.kind), Some(kind), "code {code}");
        assert_eq!(m.counters().unsupported_versions, counted, "code {code}");
    }
}

#[test]
fn an_unanswered_first_list_fails_the_server_and_cancels_the_request_once() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (_, list) = initialized(&mut m, json!({"tools": {}}));
    m.handle_timeout(Instant::from_millis(1) + Duration::from_secs(30));
    let outs = drain(&mut m);
    assert_eq!(cancelled_ids(&outs), vec![list]);
    let state = m.server_state("s").unwrap();
    assert_eq!(
        state.last_error.map(|e| e.kind),
        Some(ServerErrorKind::ListFailed)
    );
    assert_eq!(m.counters().request_timeouts, 1);
}

#[test]
fn a_call_past_its_deadline_fails_with_a_timeout_counted_once() {
    let (mut m, _) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"}}]),
    );
    let outs = call(&mut m, 10, 1, Some(Duration::from_secs(1)));
    let id = request_of(&outs, "tools/call");
    m.handle_timeout(Instant::from_millis(1010));
    let outs = drain(&mut m);
    assert!(
        matches!(
            call_outcome(&outs),
            Some(CallOutcome::Err(CallError::Timeout {
                waiting_for: None,
                ..
            }))
        ),
        "{outs:?}"
    );
    assert_eq!(cancelled_ids(&outs), vec![id]);
    assert_eq!(m.counters().call_timeouts, 1);
}

#[test]
fn progress_moves_a_calls_deadline_out_up_to_its_ceiling_and_no_further() {
    let o = ManagerOptions {
        reset_timeout_on_progress: true,
        max_call_time: Duration::from_millis(1500),
        ..ManagerOptions::default()
    };
    let (mut m, conn) = connected(
        o,
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"}}]),
    );
    let outs = call_with(&mut m, 10, 1, Some(Duration::from_secs(1)), true);
    let params = sent(&outs)
        .into_iter()
        .find(|r| r.2 == "tools/call")
        .unwrap()
        .3;
    let token = params["_meta"]["progressToken"].clone();
    assert!(!token.is_null(), "{params}");
    let progress = |m: &mut Manager, at: u64| {
        answer(
            m,
            at,
            conn,
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": at}}),
        );
    };
    // Due at 1,010 ms; progress at 600 ms moves it to the ceiling, 1,510 ms...
    progress(&mut m, 600);
    assert_eq!(m.counters().progress_resets, 1);
    // ...where later progress leaves it.
    progress(&mut m, 700);
    progress(&mut m, 900);
    assert_eq!(m.counters().progress_resets, 1);
    m.handle_timeout(Instant::from_millis(1509));
    assert!(call_outcome(&drain(&mut m)).is_none());
    m.handle_timeout(Instant::from_millis(1510));
    assert!(matches!(
        call_outcome(&drain(&mut m)),
        Some(CallOutcome::Err(CallError::Timeout { .. }))
    ));
}

#[test]
fn a_result_of_an_unknown_type_fails_the_call_as_a_protocol_error() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"}}]),
    );
    let id = request_of(&call(&mut m, 10, 1, None), "tools/call");
    let outs = answer(
        &mut m,
        11,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "later", "content": []}}),
    );
    assert!(
        matches!(
            call_outcome(&outs),
            Some(CallOutcome::Err(CallError::Protocol(_)))
        ),
        "{outs:?}"
    );
    assert_eq!(m.counters().unknown_result_types, 1);
}

#[test]
fn a_repeated_tool_name_keeps_the_first_definition_and_is_counted() {
    let (m, _) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([
            {"name": "a", "description": "first", "inputSchema": {"type": "object"}},
            {"name": "a", "description": "second", "inputSchema": {"type": "object"}},
            {"name": "a", "description": "third", "inputSchema": {"type": "object"}},
            {"name": "b", "inputSchema": {"type": "object"}},
            {"name": "b", "inputSchema": {"type": "object"}}
        ]),
    );
    assert_eq!(m.tool_count(), 2);
    let a = m
        .tools()
        .into_iter()
        .find(|t| t.qualified_name == "mcp_s_a")
        .unwrap();
    assert_eq!(a.def.description.as_deref(), Some("first"));
    // One for each name listed more than once.
    assert_eq!(m.counters().duplicate_tool_names, 2);
}

/// `n` distinct tools, as a `tools/list` result's array.
fn many_tools(n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"name": format!("t{i}")})).collect())
}

#[test]
fn a_list_of_exactly_the_most_tools_is_taken_and_one_more_fails_the_server() {
    for (n, ok) in [(MAX_TOOLS, true), (MAX_TOOLS + 1, false)] {
        let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
        let (conn, list) = initialized(&mut m, json!({"tools": {}}));
        answer(&mut m, 2, conn, tools(list, many_tools(n)));
        let state = m.server_state("s").unwrap();
        if ok {
            assert_eq!(state.status, ServerStatus::Connected);
            assert_eq!(m.tool_count(), MAX_TOOLS);
        } else {
            assert_eq!(
                state.last_error.map(|e| e.kind),
                Some(ServerErrorKind::ListFailed)
            );
            assert_eq!(m.tool_count(), 0);
        }
    }
}

#[test]
fn a_list_changed_notification_relists_and_the_new_list_is_applied_once() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {"listChanged": true}}),
        json!([{"name": "t"}]),
    );
    let outs = answer(
        &mut m,
        10,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    let list = request_of(&outs, "tools/list");
    answer(
        &mut m,
        11,
        conn,
        tools(list, json!([{"name": "t"}, {"name": "u"}])),
    );
    assert_eq!(m.tool_count(), 2);
    assert_eq!(m.counters().list_changed_applied, 1);
}

#[test]
fn a_refresh_waiting_when_its_connection_closes_is_answered_as_lost() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    m.handle(
        Instant::from_millis(10),
        Input::RefreshTools {
            request: RequestId(5),
            server: "s".into(),
        },
    );
    request_of(&drain(&mut m), "tools/list");
    m.handle(
        Instant::from_millis(11),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    let outs = drain(&mut m);
    let result = outs.iter().find_map(|o| match o {
        Output::Event(Event::RefreshCompleted {
            request: RequestId(5),
            result,
            ..
        }) => Some(result.clone()),
        _ => None,
    });
    assert!(
        matches!(result, Some(Err(RefreshError::Lost(_)))),
        "{outs:?}"
    );
    assert_eq!(m.counters().refreshes_lost, 1);
}

/// The stderr tail the failure of an attempt that wrote `lines` carries.
fn tail_after(lines: &[String]) -> Option<String> {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let (conn, _) = open(&mut m, 0);
    for line in lines {
        m.handle(
            Instant::from_millis(1),
            Input::Transport {
                conn,
                event: TransportEvent::Stderr { line: line.clone() },
            },
        );
        drain(&mut m);
    }
    m.handle(
        Instant::from_millis(2),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    drain(&mut m);
    m.server_state("s").unwrap().last_error.unwrap().stderr_tail
}

#[test]
fn a_failed_attempt_carries_the_last_stderr_lines_within_their_bounds() {
    assert_eq!(tail_after(&[]), None);
    // The last 20 lines, one per line.
    let lines: Vec<String> = (0..25).map(|i| format!("line {i}")).collect();
    assert_eq!(tail_after(&lines), Some(lines[5..].join("\n")));
    // At most 4,096 bytes: older lines go first...
    let long = vec!["a".repeat(3000), "b".repeat(3000)];
    assert_eq!(tail_after(&long), Some("b".repeat(3000)));
    // ...and a longer line keeps its first 4,096 bytes, cut on a character boundary.
    let line = format!("{}{}", "c".repeat(4095), "é".repeat(10));
    assert_eq!(tail_after(&[line]), Some("c".repeat(4095)));
    // Lines of exactly 4,096 bytes in all are all kept.
    let exact = vec!["e".repeat(2048), "f".repeat(2048)];
    assert_eq!(tail_after(&exact), Some(exact.join("\n")));
    // The byte bound still holds after lines left by count: 21 lines of 100 bytes (the first
    // leaves), then one of 3,000 bytes, which pushes out the ten oldest of the rest.
    let mut lines: Vec<String> = (0..21).map(|i| format!("{i:0>100}")).collect();
    lines.push("d".repeat(3000));
    assert_eq!(tail_after(&lines), Some(lines[11..].join("\n")));
    // Blank lines are lines too.
    assert_eq!(tail_after(&vec![String::new(); 25]), Some("\n".repeat(19)));
}

#[test]
fn the_configs_tool_filters_hide_tools_and_say_how_many() {
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let mut config = crate::config::ServerConfig::stdio("srv", &[]);
    config.disabled_tools = vec!["b".into()];
    let spec = crate::config::ServerSpec::new("s", config);
    let conn = connect_spec(&mut m, spec);
    m.handle(
        Instant::ZERO,
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    let init = request_of(&drain(&mut m), "initialize");
    let outs = answer(&mut m, 1, conn, initialize_ok(init, json!({"tools": {}})));
    let list = request_of(&outs, "tools/list");
    answer(
        &mut m,
        2,
        conn,
        tools(list, json!([{"name": "a"}, {"name": "b"}, {"name": "c"}])),
    );
    let state = m.server_state("s").unwrap();
    assert_eq!(state.status, ServerStatus::Connected);
    assert_eq!((state.tool_count, state.filtered_tools), (2, 1));
    let names: Vec<String> = m.tools().iter().map(|t| t.qualified_name.clone()).collect();
    assert_eq!(names, vec!["mcp_s_a".to_string(), "mcp_s_c".to_string()]);
}

#[test]
fn a_resource_update_the_server_announces_reaches_the_embedder() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}}),
        json!([{"name": "t"}]),
    );
    let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": "file:///notes.txt"}});
    let outs = answer(&mut m, 3, conn, note);
    let updated: Vec<(&str, &str)> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::ResourceUpdated { server, uri }) => {
                Some((server.as_str(), uri.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(updated, vec![("s", "file:///notes.txt")]);
    assert_eq!(m.counters().resource_updates, 1);
}

#[test]
fn a_server_that_does_not_initialize_in_time_fails_with_a_connect_timeout() {
    let o = ManagerOptions {
        default_connect_timeout: Duration::from_secs(5),
        ..ManagerOptions::default()
    };
    let mut m = Manager::new(o, Instant::ZERO);
    let (conn, outs) = open(&mut m, 0);
    request_of(&outs, "initialize");
    m.handle_timeout(Instant::from_millis(4_999));
    drain(&mut m);
    assert_eq!(m.counters().connect_timeouts, 0);
    m.handle_timeout(Instant::from_millis(5_000));
    let outs = drain(&mut m);
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::CloseTransport { conn: c } if *c == conn)));
    let state = m.server_state("s").unwrap();
    assert_eq!(
        state.last_error.map(|e| e.kind),
        Some(ServerErrorKind::ConnectTimeout)
    );
    assert_eq!(m.counters().connect_timeouts, 1);
}

#[test]
fn a_servers_sampling_request_is_forwarded_to_the_embedder_and_answered_under_its_id() {
    let mut o = ManagerOptions::default();
    o.client_features.sampling = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let ask = json!({"jsonrpc": "2.0", "id": "q-1", "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10}});
    let outs = answer(&mut m, 3, conn, ask);
    let key = outs
        .iter()
        .find_map(|o| match o {
            Output::Event(Event::PeerRequest {
                server, request, ..
            }) if server == "s" => Some(*request),
            _ => None,
        })
        .expect("the embedder is asked");
    assert_eq!(m.counters().peer_requests_forwarded, 1);
    m.handle(
        Instant::from_millis(4),
        Input::AnswerPeerRequest {
            request: key,
            answer: crate::protocol::PeerAnswer::Result {
                result: json!({"role": "assistant", "model": "m",
                    "content": {"type": "text", "text": "hello"}}),
            },
        },
    );
    let reply = drain(&mut m)
        .iter()
        .find_map(|o| match o {
            Output::Send { conn: c, frame, .. } if *c == conn => {
                serde_json::from_slice::<Value>(frame).ok()
            }
            _ => None,
        })
        .expect("answered");
    assert_eq!(reply["id"], "q-1");
    assert_eq!(reply["result"]["content"]["text"], "hello");
    assert_eq!(m.counters().peer_answered, 1);
}

#[test]
fn a_servers_phase_reads_by_its_status_name_at_every_step() {
    let phase = |m: &Manager| m.server_state("s").unwrap().phase.to_string();
    let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
    let spec = crate::config::ServerSpec::new("s", crate::config::ServerConfig::stdio("srv", &[]));
    let conn = connect_spec(&mut m, spec);
    assert_eq!(phase(&m), "opening");
    m.handle(
        Instant::ZERO,
        Input::Transport {
            conn,
            event: TransportEvent::Opened,
        },
    );
    let init = request_of(&drain(&mut m), "initialize");
    assert_eq!(phase(&m), "initializing");
    let outs = answer(&mut m, 1, conn, initialize_ok(init, json!({"tools": {}})));
    let list = request_of(&outs, "tools/list");
    assert_eq!(phase(&m), "listing-tools");
    answer(&mut m, 2, conn, tools(list, json!([{"name": "t"}])));
    assert_eq!(phase(&m), "connected");
    m.handle(
        Instant::from_millis(3),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exited".into(),
            },
        },
    );
    drain(&mut m);
    assert_eq!(phase(&m), "backoff");
    // With reconnects off, a lost server stays down.
    let o = ManagerOptions {
        reconnect: ReconnectPolicy::never(),
        ..ManagerOptions::default()
    };
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    m.handle(
        Instant::from_millis(3),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exited".into(),
            },
        },
    );
    drain(&mut m);
    assert_eq!(phase(&m), "idle");
}

#[test]
fn a_servers_log_message_reaches_the_embedder_with_its_data_as_text() {
    let (mut m, conn) = connected(
        ManagerOptions::default(),
        json!({"tools": {}, "logging": {}}),
        json!([{"name": "t"}]),
    );
    let mut texts = Vec::new();
    for data in [json!("disk almost full"), json!({"free": 3})] {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "warning", "logger": "disk", "data": data}});
        for o in answer(&mut m, 3, conn, note) {
            if let Output::Event(Event::ServerLog {
                server,
                level,
                data,
                ..
            }) = o
            {
                assert_eq!((server.as_str(), level), ("s", Level::Warn));
                texts.push(log_text(&data).into_owned());
            }
        }
    }
    assert_eq!(texts, vec!["disk almost full", r#"{"free":3}"#]);
}

#[test]
fn a_url_elicitation_completes_once_and_only_when_the_server_asked_for_it() {
    let mut o = ManagerOptions::default();
    o.client_features.elicitation_url = true;
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    let completions = super::peer_tests::completed_elicitations;
    let complete = |id: &str| {
        json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
            "params": {"elicitationId": id}})
    };
    // A completion nobody asked for is ignored.
    assert!(completions(&answer(&mut m, 3, conn, complete("e1"))).is_empty());
    let ask = json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create",
        "params": {"mode": "url", "message": "sign in", "url": "https://example.com/login",
        "elicitationId": "e1"}});
    let key = answer(&mut m, 4, conn, ask)
        .iter()
        .find_map(|o| match o {
            Output::Event(Event::PeerRequest { request, .. }) => Some(*request),
            _ => None,
        })
        .expect("the embedder is asked");
    m.handle(
        Instant::from_millis(5),
        Input::AnswerPeerRequest {
            request: key,
            answer: crate::protocol::PeerAnswer::Accept { content: None },
        },
    );
    drain(&mut m);
    // The one it asked for completes once; a repeat is ignored.
    assert_eq!(
        completions(&answer(&mut m, 6, conn, complete("e1"))),
        vec!["e1"]
    );
    assert!(completions(&answer(&mut m, 7, conn, complete("e1"))).is_empty());
    assert_eq!(m.counters().elicitations_completed, 1);
}

/// The `ReconnectScheduled` among `outs`: (attempt, delay).
fn scheduled(outs: &[Output]) -> Option<(u32, Duration)> {
    outs.iter().find_map(|o| match o {
        Output::Event(Event::ReconnectScheduled { attempt, delay, .. }) => Some((*attempt, *delay)),
        _ => None,
    })
}

/// Connected with `o`, then lost: the reconnect it schedules.
fn lost(o: ManagerOptions) -> (Manager, Option<(u32, Duration)>) {
    let (mut m, conn) = connected(o, json!({"tools": {}}), json!([{"name": "t"}]));
    m.handle(
        Instant::from_millis(3),
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exited".into(),
            },
        },
    );
    let first = scheduled(&drain(&mut m));
    (m, first)
}

#[test]
fn reconnect_delays_follow_the_ladder_exactly_without_jitter_and_spread_with_it() {
    let mut o = ManagerOptions::default();
    o.reconnect.jitter = 0.0;
    let (mut m, first) = lost(o);
    assert_eq!(first, Some((1, Duration::from_millis(500))));
    // The attempt opens when due and fails: the next waits twice as long.
    m.handle_timeout(Instant::from_millis(503));
    let conn = opened(&drain(&mut m)).expect("the reconnect opens");
    m.handle(
        Instant::from_millis(504),
        Input::Transport {
            conn,
            event: TransportEvent::Failed {
                error: "refused".into(),
            },
        },
    );
    assert_eq!(
        scheduled(&drain(&mut m)),
        Some((2, Duration::from_millis(1_000)))
    );
    assert_eq!(m.counters().reconnects_scheduled, 2);
    // With the default jitter (±20 %), delays drawn under different seeds spread over the
    // whole band around 500 ms, on both sides of it, instead of all landing on it.
    let delays: Vec<Duration> = (0..16)
        .map(|seed| {
            let o = ManagerOptions {
                seed,
                ..ManagerOptions::default()
            };
            lost(o).1.expect("scheduled").1
        })
        .collect();
    for d in &delays {
        assert!(
            (Duration::from_millis(400)..=Duration::from_millis(600)).contains(d),
            "{d:?}"
        );
    }
    let (min, max) = (*delays.iter().min().unwrap(), *delays.iter().max().unwrap());
    assert!(min < Duration::from_millis(450), "{delays:?}");
    assert!(max > Duration::from_millis(550), "{delays:?}");
}

#[test]
fn a_task_call_is_polled_at_the_servers_interval_then_answered_by_its_result() {
    let caps = json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}});
    let tool = json!([{"name": "t", "execution": {"taskSupport": "required"}}]);
    let (mut m, conn) = connected(ManagerOptions::default(), caps, tool);
    let call = call(&mut m, 3, 1, Some(Duration::from_secs(60)));
    let first = request_of(&call, "tools/call");
    let created = json!({"jsonrpc": "2.0", "id": first, "result": {
        "task": {"taskId": "job-1", "status": "working", "pollInterval": 200}}});
    assert!(sent(&answer(&mut m, 4, conn, created)).is_empty());
    assert_eq!(m.counters().task_calls, 1);
    // Polled when the server said, not before.
    m.handle_timeout(Instant::from_millis(203));
    assert!(sent(&drain(&mut m)).is_empty());
    m.handle_timeout(Instant::from_millis(204));
    let outs = drain(&mut m);
    let get = request_of(&outs, "tasks/get");
    assert_eq!(sent(&outs)[0].3, json!({"taskId": "job-1"}));
    assert_eq!(m.counters().task_polls, 1);
    let done = json!({"jsonrpc": "2.0", "id": get, "result": {"taskId": "job-1",
        "status": "completed"}});
    let result = request_of(&answer(&mut m, 205, conn, done), "tasks/result");
    let answer_of = json!({"jsonrpc": "2.0", "id": result, "result": {
        "content": [{"type": "text", "text": "done"}]}});
    let outs = answer(&mut m, 206, conn, answer_of);
    assert!(
        matches!(call_outcome(&outs), Some(CallOutcome::Ok(_))),
        "{outs:?}"
    );
    assert_eq!(m.counters().task_polls, 1);
    assert!(m.calls_in_flight().is_empty());
}

/// A checker whose every schema asks for `{"ok": true}`.
pub(super) struct NeedsOk;

impl crate::schema::OutputValidator for NeedsOk {
    fn compile(
        &self,
        _: &crate::tool::RawJson,
    ) -> Result<std::sync::Arc<dyn crate::schema::CompiledSchema>, String> {
        Ok(std::sync::Arc::new(NeedsOk))
    }
}

impl crate::schema::CompiledSchema for NeedsOk {
    fn check(&self, instance: &Value) -> Result<(), crate::schema::SchemaMismatch> {
        match instance.get("ok") {
            Some(Value::Bool(true)) => Ok(()),
            _ => Err(crate::schema::SchemaMismatch {
                path: "/ok".into(),
                message: "must be true".into(),
                more: 0,
            }),
        }
    }
}

#[test]
fn structured_results_are_checked_against_the_tools_output_schema_and_counted() {
    let o = ManagerOptions {
        output_validator: Some(crate::schema::SharedValidator::new(NeedsOk)),
        ..ManagerOptions::default()
    };
    let (mut m, conn) = connected(
        o,
        json!({"tools": {}}),
        json!([{"name": "t", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"}}]),
    );
    let mut outcomes = Vec::new();
    for (n, ok) in [(1, true), (2, false)] {
        let id = request_of(&call(&mut m, 10 * n, n, None), "tools/call");
        let result = json!({"content": [], "structuredContent": {"ok": ok}});
        let outs = answer(
            &mut m,
            10 * n + 1,
            conn,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
        outcomes.push(call_outcome(&outs));
    }
    assert!(
        matches!(outcomes[0], Some(CallOutcome::Ok(_))),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[1],
            Some(CallOutcome::Err(CallError::OutputSchema { .. }))
        ),
        "{outcomes:?}"
    );
    // An error result is the tool's failure, not its output: passed on unchecked.
    let id = request_of(&call(&mut m, 30, 3, None), "tools/call");
    let result = json!({"content": [], "isError": true, "structuredContent": {"ok": false}});
    let outs = answer(
        &mut m,
        31,
        conn,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    );
    assert!(matches!(call_outcome(&outs), Some(CallOutcome::Ok(_))));
    let c = m.counters();
    assert_eq!(
        (
            c.output_schema_passed,
            c.output_schema_refused,
            c.output_schema_error_results
        ),
        (1, 1, 1)
    );
}

#[test]
fn roots_are_kept_up_to_their_bound_and_a_longer_list_is_cut_with_a_warning() {
    let roots = |n: usize| -> Vec<crate::protocol::Root> {
        (0..n)
            .map(|i| crate::protocol::Root {
                uri: format!("file:///r{i}"),
                name: None,
            })
            .collect()
    };
    for (given, warned) in [(MAX_ROOTS, false), (MAX_ROOTS + 1, true)] {
        let mut m = Manager::new(ManagerOptions::default(), Instant::ZERO);
        m.handle(
            Instant::ZERO,
            Input::SetRoots {
                roots: roots(given),
            },
        );
        let outs = drain(&mut m);
        let warnings = outs
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    Output::Event(Event::Diagnostic {
                        level: Level::Warn,
                        ..
                    })
                )
            })
            .count();
        assert_eq!(warnings, usize::from(warned), "{given} roots");
        assert_eq!(m.roots(), &roots(MAX_ROOTS)[..], "{given} roots");
    }
}
