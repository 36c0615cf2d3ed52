//! Scripted traces of the core: one per startup failure users meet (the `seed_*` traces), one
//! per lifecycle bug this core must not have (the `flaw_*` traces), then the codec and the
//! lifecycle end to end. Each test asserts the behaviour it protects, by the kind of each
//! error, and snapshots the full trace (reviewed like code, under `snapshots/`), where the
//! errors' wording lives.

mod codec;
mod peer;
mod requests;

use crate::script::*;
use crate::support::with_snapshots;
use serde_json::json;
use switchboard_core::config::{ServerConfig, ServerSpec};
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, ConnId, Event, Input, ManagerOptions, Output, RequestError,
    ServerErrorKind, ServerStatus, StartupReport, TransportEvent,
};

fn snap(name: &str, s: &Script) {
    with_snapshots(|| insta::assert_snapshot!(name, s.finish()));
}

fn startup_reports(s: &Script) -> Vec<&StartupReport> {
    s.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::StartupComplete { report: r }) => Some(r),
            _ => None,
        })
        .collect()
}

/// The kind of error `server` failed its round with.
fn failed_with(r: &StartupReport, server: &str) -> ServerErrorKind {
    r.errors
        .get(server)
        .unwrap_or_else(|| panic!("{server} did not fail: {r:?}"))
        .kind
}

/// The one error call `call` completed with.
fn call_error(s: &Script, call: u64) -> &CallError {
    match s.outcome(call)[..] {
        [CallOutcome::Err(e)] => e,
        ref other => panic!("call {call} did not fail exactly once: {other:?}"),
    }
}

fn with_timeout(mut spec: ServerSpec, ms: i64) -> ServerSpec {
    spec.config.timeout_ms = Some(ms);
    spec
}

fn closes(s: &Script, conn: ConnId) -> usize {
    s.count(|o| matches!(o, Output::CloseTransport { conn: c } if *c == conn))
}

fn sends_after(s: &Script, conn: ConnId, index: usize) -> usize {
    s.outputs[index..]
        .iter()
        .filter(|o| matches!(o, Output::Send { conn: c, .. } if *c == conn))
        .count()
}

// ----- startup failures users meet ---------------------------------------------------------

#[test]
fn seed_discovery_failure_gives_an_empty_tool_set_at_once() {
    // The loader turns a discovery failure into an empty server set (plus its own synthetic
    // error); the manager must complete that round immediately, not hang to the gate.
    let mut s = Script::new();
    s.connect(0, vec![]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert!(r[0].tools.is_empty() && r[0].errors.is_empty());
    assert_eq!(r[0].elapsed, ms(0));
    snap("seed_01_discovery_failure", &s);
}

#[test]
fn seed_invalid_config_is_skipped_with_an_error_and_others_continue() {
    let mut s = Script::new();
    let mut bad = ServerConfig::stdio("x", &[]);
    bad.url = Some("http://example.invalid/mcp".into());
    s.connect(0, vec![stdio("good"), ServerSpec::new("bad", bad)]);
    s.cache(1, "good", None);
    s.ready(20, "good", &["echo"]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(failed_with(r[0], "bad"), ServerErrorKind::InvalidConfig);
    assert_eq!(r[0].connected, vec!["good"]);
    assert_eq!(s.tool_names(), vec!["mcp_good_echo"]);
    assert_eq!(
        s.count(|o| matches!(o, Output::OpenTransport { server, .. } if server == "bad")),
        0
    );
    snap("seed_02_invalid_config", &s);
}

#[test]
fn seed_connect_timeout_and_init_failure_are_isolated_per_server() {
    let mut s = Script::new();
    s.connect(
        0,
        vec![
            stdio("ok"),
            stdio("refuses"),
            with_timeout(stdio("hangs"), 1000),
        ],
    );
    for n in ["ok", "refuses", "hangs"] {
        s.cache(1, n, None);
    }
    s.ready(10, "ok", &["echo"]);
    s.opened(10, "refuses");
    s.reply_error(15, "refuses", "initialize", -32603, "boom");
    s.opened(10, "hangs");
    s.advance_to(1500);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1, "one report for the round");
    assert_eq!(
        r[0].elapsed,
        ms(1000),
        "the uncached wait ends when 'hangs' times out"
    );
    assert_eq!(
        failed_with(r[0], "refuses"),
        ServerErrorKind::InitializeFailed
    );
    assert_eq!(failed_with(r[0], "hangs"), ServerErrorKind::ConnectTimeout);
    assert_eq!(s.m.status("ok"), ServerStatus::Connected);
    assert_eq!(closes(&s, s.conn("refuses")), 1);
    assert_eq!(closes(&s, s.conn("hangs")), 1);
    snap("seed_03_connect_timeout_and_init_failure", &s);
}

#[test]
fn seed_pending_list_with_cache_returns_deferred_tools_at_the_gate() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("fast"), stdio("slow")]);
    s.cache(2, "fast", None);
    s.cache(3, "slow", Some(&["search"]));
    s.ready(30, "fast", &["echo"]);
    s.opened(40, "slow");
    s.advance_to(250);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].elapsed, ms(250), "the gate opens at 250 ms");
    assert_eq!(r[0].deferred, vec!["slow"]);
    assert_eq!(
        s.tool_names(),
        vec!["mcp_fast_echo", "mcp_slow_search (deferred)"]
    );
    // A deferred call waits for the connection, then goes out and succeeds.
    s.call(300, 1, "mcp_slow_search", json!({"q": "x"}));
    assert!(s.outcome(1).is_empty());
    s.reply(900, "slow", "initialize", init_result());
    s.reply(950, "slow", "tools/list", tools_json(&["search", "fetch"]));
    s.reply(
        980,
        "slow",
        "tools/call",
        json!({"content": [{"type": "text", "text": "found"}]}),
    );
    assert!(matches!(s.outcome(1)[..], [CallOutcome::Ok(ref r)] if r.render_text() == "found"));
    assert_eq!(
        s.tool_names(),
        vec!["mcp_fast_echo", "mcp_slow_fetch", "mcp_slow_search"]
    );
    snap("seed_04_deferred_tools_from_cache", &s);
}

#[test]
fn seed_pending_list_without_cache_waits_for_the_server() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("fast"), stdio("slow")]);
    s.cache(2, "fast", None);
    s.cache(3, "slow", None);
    s.ready(30, "fast", &["echo"]);
    s.advance_to(1999);
    assert!(
        startup_reports(&s).is_empty(),
        "no report while an uncached server is pending"
    );
    s.ready(2000, "slow", &["search"]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].elapsed, ms(2000));
    assert_eq!(r[0].connected, vec!["fast", "slow"]);
    snap("seed_05_uncached_wait", &s);
}

#[test]
fn seed_late_background_failure_is_logged_once_and_withdraws_deferred_tools() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("slow")]);
    s.cache(1, "slow", Some(&["search"]));
    s.opened(10, "slow");
    s.reply(20, "slow", "initialize", init_result());
    s.advance_to(250);
    assert_eq!(startup_reports(&s)[0].deferred, vec!["slow"]);
    s.call(260, 7, "mcp_slow_search", json!({}));
    s.reply_error(1000, "slow", "tools/list", -32603, "index offline");
    let logged = s.count(|o| {
        matches!(o, Output::Event(Event::Diagnostic { server: Some(n), message, .. })
            if n == "slow" && message.contains("index offline"))
    });
    assert_eq!(logged, 1, "late failure logged exactly once");
    assert!(s.tool_names().is_empty(), "deferred tools withdrawn");
    assert!(
        matches!(call_error(&s, 7), CallError::Transport(e) if e.kind == ServerErrorKind::ListFailed),
        "the waiting call fails with the server's failure"
    );
    // The transport is closed; a trailing close event from the shell is stale and says nothing.
    let conn = s.conn("slow");
    s.at(
        1100,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "exit 1".into(),
            },
        },
    );
    assert_eq!(
        s.count(
            |o| matches!(o, Output::Event(Event::Diagnostic { server: Some(n), .. }) if n == "slow")
        ),
        1
    );
    snap("seed_06_late_failure", &s);
}

#[test]
fn seed_dropped_transport_fails_calls_and_leaves_the_server_disconnected() {
    // With automatic reconnects off (they are a policy, on by default; see `policies.rs` for
    // the reconnect traces).
    let mut s = Script::with(ManagerOptions {
        reconnect: switchboard_core::manager::ReconnectPolicy::never(),
        ..opts()
    });
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(10, "a", &["echo"]);
    s.ready(10, "b", &["echo"]);
    s.call(100, 1, "mcp_a_echo", json!({"text": "hi"}));
    let conn = s.conn("a");
    s.at(
        150,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "process exited with status 1".into(),
            },
        },
    );
    assert!(
        matches!(call_error(&s, 1), CallError::Transport(e) if e.kind == ServerErrorKind::Closed)
    );
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert_eq!(s.m.status("b"), ServerStatus::Connected);
    assert_eq!(s.tool_names(), vec!["mcp_b_echo"]);
    assert_eq!(closes(&s, conn), 0, "the shell already closed it");
    assert_eq!(
        s.count(|o| matches!(o, Output::OpenTransport { .. })),
        2,
        "no reconnect"
    );
    snap("seed_07_dropped_transport", &s);
}

#[test]
fn seed_all_healthy_startup_returns_live_tools_before_the_gate() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("alpha"), stdio("beta")]);
    s.cache(1, "alpha", Some(&["old"]));
    s.cache(1, "beta", None);
    s.ready(40, "beta", &["b1", "b2"]);
    s.ready(60, "alpha", &["a1"]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].elapsed,
        ms(60),
        "no waiting for the gate once all settled"
    );
    assert!(r[0].tools.iter().all(|t| !t.deferred));
    assert_eq!(
        s.tool_names(),
        vec!["mcp_alpha_a1", "mcp_beta_b1", "mcp_beta_b2"]
    );
    assert_eq!(s.count(|o| matches!(o, Output::StoreCache { .. })), 2);
    snap("seed_08_all_healthy", &s);
}

// ----- lifecycle bugs this core must not have ----------------------------------------------

#[test]
fn flaw_01_late_connect_after_disconnect_closes_transport() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    let conn = s.conn("a");
    s.disconnect(10, "a");
    let mark = s.outputs.len();
    s.opened(50, "a");
    s.frame_on(
        60,
        conn,
        json!({"jsonrpc": "2.0", "id": 0, "result": init_result()}),
    );
    // Closed when abandoned (the shell aborts the open), and again in answer to the late
    // `Opened`: the shell may hold a live transport for it, which nobody else would close.
    assert_eq!(closes(&s, conn), 2);
    assert!(matches!(
        s.outputs[mark..],
        [Output::CloseTransport { conn: c }] if c == conn
    ));
    assert_eq!(
        sends_after(&s, conn, mark),
        0,
        "nothing is sent on it afterwards"
    );
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.m.open_conns().is_empty());
    assert_eq!(s.m.counters().stale_events, 2);
    assert_eq!(s.m.counters().stale_opened_closed, 1);
    // The round reports its member as disconnected instead of dropping it.
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].disconnected, vec!["a"]);
    assert!(r[0].errors.is_empty() && r[0].pending.is_empty());
    snap("flaw_01_late_connect_after_disconnect", &s);
}

#[test]
fn an_opened_that_arrives_after_its_attempt_reported_closed_is_closed() {
    // The shell's race: the process exits at once, and its exit reaches the core before the
    // spawn's completion does. The transport the late `Opened` stands for must be closed, or
    // the shell waits for it forever at shutdown.
    let mut s = Script::with(ManagerOptions {
        reconnect: switchboard_core::manager::ReconnectPolicy::never(),
        ..opts()
    });
    s.connect(0, vec![stdio("a")]);
    let conn = s.conn("a");
    s.at(
        5,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "process exited (exit status: 1)".into(),
            },
        },
    );
    assert_eq!(closes(&s, conn), 0, "it reported its own end");
    let mark = s.outputs.len();
    s.opened(6, "a");
    assert!(matches!(
        s.outputs[mark..],
        [Output::CloseTransport { conn: c }] if c == conn
    ));
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.m.open_conns().is_empty());
    // An `Opened` for an attempt never issued is not answered.
    let mark = s.outputs.len();
    s.at(
        7,
        Input::Transport {
            conn: ConnId(99),
            event: TransportEvent::Opened,
        },
    );
    assert_eq!(s.outputs.len(), mark);
}

#[test]
fn flaw_02_connect_timeout_closes_the_attempt_even_if_it_later_succeeds() {
    let mut s = Script::new();
    s.connect(0, vec![with_timeout(stdio("a"), 500)]);
    s.cache(1, "a", None);
    s.opened(10, "a");
    let conn = s.conn("a");
    s.advance_to(500);
    assert_eq!(closes(&s, conn), 1);
    let mark = s.outputs.len();
    s.reply(700, "a", "initialize", init_result());
    assert_eq!(sends_after(&s, conn, mark), 0);
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.tool_names().is_empty());
    snap("flaw_02_connect_timeout_then_success", &s);
}

#[test]
fn flaw_03_connecting_one_server_keeps_the_other_servers_tools() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["one"]);
    s.connect(100, vec![stdio("b"), stdio("a")]);
    s.cache(101, "b", None);
    s.ready(120, "b", &["two"]);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 2);
    assert_eq!(
        r[1].skipped,
        vec!["a"],
        "already connected: skipped, not restarted"
    );
    assert_eq!(s.tool_names(), vec!["mcp_a_one", "mcp_b_two"]);
    snap("flaw_03_connect_keeps_other_tools", &s);
}

#[test]
fn flaw_04_disconnect_withdraws_tools_by_identity_not_by_prefix() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("a-b"), stdio("My.Server")]);
    for n in ["a", "a-b", "My.Server"] {
        s.cache(1, n, None);
    }
    s.ready(10, "a", &["x"]);
    s.ready(10, "a-b", &["y"]);
    s.ready(10, "My.Server", &["z"]);
    assert_eq!(
        s.tool_names(),
        vec!["mcp_a_b_y", "mcp_a_x", "mcp_my_server_z"]
    );
    s.disconnect(100, "a");
    assert_eq!(s.tool_names(), vec!["mcp_a_b_y", "mcp_my_server_z"]);
    s.disconnect(110, "My.Server");
    assert_eq!(
        s.tool_names(),
        vec!["mcp_a_b_y"],
        "sanitized names are withdrawn too"
    );
    snap("flaw_04_withdraw_by_identity", &s);
}

#[test]
fn flaw_05_names_keep_digits_limit_length_and_resolve_collisions() {
    let mut s = Script::new();
    let long = "an_extremely_long_tool_name_that_goes_on_and_on_past_the_sixty_four_limit";
    s.connect(0, vec![stdio("s3"), stdio("a-b"), stdio("a")]);
    for n in ["s3", "a-b", "a"] {
        s.cache(1, n, None);
    }
    s.ready(10, "s3", &["s3_list_buckets", long]);
    s.ready(10, "a-b", &["c"]);
    s.ready(10, "a", &["b_c"]);
    let names = s.tool_names();
    assert!(
        names.contains(&"mcp_s3_list_buckets".to_string()),
        "{names:?}"
    );
    assert!(names.iter().all(|n| n.len() <= 64), "{names:?}");
    assert_eq!(names.len(), 4);
    // The colliding pair route to their own servers.
    let ab = s.m.tools().into_iter().find(|t| t.server == "a-b").unwrap();
    let a = s.m.tools().into_iter().find(|t| t.server == "a").unwrap();
    assert_ne!(ab.qualified_name, a.qualified_name);
    s.call(20, 1, &ab.qualified_name, json!({}));
    s.call(20, 2, &a.qualified_name, json!({}));
    let sent_to = |conn| {
        s.outputs.iter().any(|o| {
            matches!(o, Output::Send { conn: c, meta, .. }
            if *c == conn && meta.method == Some("tools/call"))
        })
    };
    assert!(sent_to(s.conn("a-b")) && sent_to(s.conn("a")));
    snap("flaw_05_names", &s);
}

#[test]
fn flaw_06_tools_list_failure_after_initialize_fails_the_server() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a"), stdio("b")]);
    s.cache(1, "a", None);
    s.cache(1, "b", None);
    s.ready(10, "b", &["ok"]);
    s.opened(10, "a");
    s.reply(20, "a", "initialize", init_result());
    s.reply_error(30, "a", "tools/list", -32603, "database locked");
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert_eq!(closes(&s, s.conn("a")), 1);
    assert_eq!(
        failed_with(startup_reports(&s)[0], "a"),
        ServerErrorKind::ListFailed
    );
    let st = s.m.server_state("a").unwrap();
    assert_eq!(st.last_error.unwrap().kind, ServerErrorKind::ListFailed);
    snap("flaw_06_list_failure_fails_server", &s);
}

#[test]
fn flaw_07_list_changed_relists_and_server_requests_get_answers() {
    let mut o = opts();
    o.roots = vec![switchboard_core::protocol::Root {
        uri: "file:///project".into(),
        name: Some("project".into()),
    }];
    let mut s = Script::with(o);
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["one"]);
    let conn = s.conn("a");
    let mark = s.outputs.len();
    s.frame_on(
        20,
        conn,
        json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"}),
    );
    s.frame_on(
        21,
        conn,
        json!({"jsonrpc": "2.0", "id": 9, "method": "roots/list"}),
    );
    s.frame_on(
        22,
        conn,
        json!({"jsonrpc": "2.0", "id": 10, "method": "sampling/createMessage"}),
    );
    let answers: Vec<String> = s.outputs[mark..]
        .iter()
        .filter_map(|o| match o {
            Output::Send { frame, .. } => Some(String::from_utf8_lossy(frame).into_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(answers[0], r#"{"id":"p1","jsonrpc":"2.0","result":{}}"#);
    assert!(answers[1].contains("file:///project"));
    assert!(answers[2].contains("-32601"));
    // list_changed: two notifications while a list is in flight coalesce into one more list.
    let notify = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    s.frame_on(30, conn, notify.clone());
    s.frame_on(31, conn, notify.clone());
    s.frame_on(32, conn, notify);
    s.reply(40, "a", "tools/list", tools_json(&["one", "two"]));
    s.reply(50, "a", "tools/list", tools_json(&["one", "two", "three"]));
    let lists = s.outputs[mark..]
        .iter()
        .filter(|o| matches!(o, Output::Send { frame, .. } if String::from_utf8_lossy(frame).contains("tools/list")))
        .count();
    assert_eq!(lists, 2, "three notifications, two lists");
    assert_eq!(
        s.tool_names(),
        vec!["mcp_a_one", "mcp_a_three", "mcp_a_two"]
    );
    snap("flaw_07_list_changed_and_peer_requests", &s);
}

#[test]
fn flaw_08_uncached_wait_bounds_the_startup_wait() {
    let mut s = Script::with(ManagerOptions {
        uncached_wait: Some(ms(1000)),
        ..opts()
    });
    s.connect(0, vec![stdio("fast"), stdio("stuck")]);
    s.cache(1, "fast", None);
    s.cache(1, "stuck", None);
    s.ready(10, "fast", &["echo"]);
    s.opened(10, "stuck");
    s.advance_to(5000);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].elapsed,
        ms(1250),
        "gate + uncached_wait, not the 30 s connect timeout"
    );
    assert_eq!(r[0].pending, vec!["stuck"]);
    assert_eq!(s.m.status("stuck"), ServerStatus::Connecting);
    snap("flaw_08_bounded_uncached_wait", &s);
}

#[test]
fn flaw_09_disconnect_all_aborts_pending_connects() {
    let mut s = Script::new();
    s.connect(
        0,
        vec![stdio("ready"), stdio("opening"), stdio("initializing")],
    );
    s.ready(10, "ready", &["t"]);
    s.opened(10, "initializing");
    s.disconnect_all(20);
    for n in ["ready", "opening", "initializing"] {
        assert_eq!(closes(&s, s.conn(n)), 1, "{n} closed");
        assert_eq!(s.m.status(n), ServerStatus::Disconnected);
    }
    assert!(s.m.open_conns().is_empty());
    assert!(s.m.sources().is_empty());
    assert!(s.tool_names().is_empty());
    snap("flaw_09_disconnect_all_aborts_pending", &s);
}

#[test]
fn flaw_10_timed_out_and_cancelled_calls_send_notifications_cancelled() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.ready(10, "a", &["slow"]);
    s.at(
        100,
        Input::CallTool {
            call: CallId(1),
            tool: "mcp_a_slow".into(),
            arguments: None,
            timeout: Some(ms(1000)),
            progress: false,
            meta: None,
        },
    );
    s.call(200, 2, "mcp_a_slow", json!({}));
    s.at(300, Input::CancelCall { call: CallId(2) });
    s.advance_to(1100);
    let cancels: Vec<String> = s
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { frame, .. } => {
                let t = String::from_utf8_lossy(frame).into_owned();
                t.contains("notifications/cancelled").then_some(t)
            }
            _ => None,
        })
        .collect();
    assert_eq!(cancels.len(), 2);
    assert!(
        cancels[0].contains(r#""requestId":3"#) && cancels[0].contains("cancelled by the client")
    );
    assert!(cancels[1].contains(r#""requestId":2"#) && cancels[1].contains("timed out"));
    assert_eq!(
        call_error(&s, 1),
        &CallError::Timeout {
            after: ms(1000),
            waiting_for: None
        }
    );
    assert!(matches!(s.outcome(2)[..], [CallOutcome::Cancelled]));
    // A late answer to the timed-out call changes nothing.
    s.reply(1200, "a", "tools/call", json!({"content": []}));
    assert_eq!(s.outcome(1).len(), 1);
    snap("flaw_10_cancel_notifications", &s);
}

#[test]
fn a_connect_timeout_due_with_the_uncached_wait_is_reported_as_an_error_not_pending() {
    // Found by the simulator: when the bounded wait and a member's connect timeout fall due at
    // the same instant, the report must see the timeout (every due timer runs before the round
    // is judged).
    let mut s = Script::with(ManagerOptions {
        uncached_wait: Some(ms(1000)),
        ..opts()
    });
    s.connect(0, vec![with_timeout(stdio("slow"), 1250)]);
    s.cache(1, "slow", None);
    s.opened(10, "slow");
    s.advance_to(1250);
    let r = startup_reports(&s);
    assert_eq!(r.len(), 1);
    assert!(r[0].pending.is_empty(), "{:?}", r[0]);
    assert_eq!(failed_with(r[0], "slow"), ServerErrorKind::ConnectTimeout);
    assert_eq!(
        s.count(|o| matches!(o, Output::Event(Event::Diagnostic { .. }))),
        0,
        "reported once, in the report, not again as a late failure"
    );
}

// ----- the codec and the lifecycle, end to end ---------------------------------------------

/// `a` through open and initialize, with its cache answered `miss`; `init` is its answer.
fn initialized(s: &mut Script, init: serde_json::Value) {
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(10, "a");
    s.reply(20, "a", "initialize", init);
}

fn sent_methods(s: &Script, conn: ConnId) -> Vec<String> {
    s.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, meta, .. } if *c == conn => meta.method.map(str::to_string),
            _ => None,
        })
        .collect()
}

fn never_reconnect() -> ManagerOptions {
    ManagerOptions {
        reconnect: switchboard_core::manager::ReconnectPolicy::never(),
        ..opts()
    }
}
