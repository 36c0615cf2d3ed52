//! The policies that keep servers usable after startup: reconnect with backoff and a burst
//! breaker, health pings, progress-aware call timeouts, `tools/list_changed`, and `Sync`
//! reconciliation — each decided in the core and shown here as a scripted trace.

use crate::script::*;
use crate::support::with_snapshots;
use serde_json::json;
use switchboard_core::config::ServerConfig;
use switchboard_core::manager::{
    CallError, CallId, CallOutcome, ConnId, Event, HealthPolicy, Input, ManagerOptions, Output,
    ReconnectPolicy, ServerErrorKind, ServerStatus, TimerReason, TransportEvent,
};
use switchboard_core::{Instant, ServerSpec};

fn closed(s: &mut Script, ms: u64, server: &str) {
    let conn = s.conn(server);
    s.at(
        ms,
        Input::Transport {
            conn,
            event: TransportEvent::Closed {
                reason: "process exited (exit status: 1)".into(),
            },
        },
    );
}

fn opens_of(s: &Script, server: &str) -> Vec<(usize, ConnId)> {
    s.outputs
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Output::OpenTransport {
                conn, server: n, ..
            } if n == server => Some((i, *conn)),
            _ => None,
        })
        .collect()
}

fn connected(s: &mut Script, server: &str, tools: &[&str]) {
    s.connect(0, vec![stdio(server)]);
    s.cache(1, server, None);
    s.ready(10, server, tools);
}

#[test]
fn unexpected_close_reconnects_with_deferred_tools_and_waiting_calls_succeed() {
    let mut s = Script::new();
    connected(&mut s, "a", &["echo"]);
    s.call(100, 1, "mcp_a_echo", json!({"text": "in flight"}));
    closed(&mut s, 200, "a");
    // The call that was on the dead connection fails; the server is reconnecting.
    assert!(
        matches!(s.outcome(1)[..], [CallOutcome::Err(CallError::Transport(ref e))]
            if e.kind == ServerErrorKind::Closed),
        "{:?}",
        s.outcome(1)
    );
    assert_eq!(s.m.status("a"), ServerStatus::Connecting);
    assert_eq!(s.tool_names(), vec!["mcp_a_echo (deferred)"]);
    let st = s.m.server_state("a").unwrap();
    assert_eq!(st.reconnect_attempt, 1);
    let next = st.next_attempt_at.expect("a scheduled attempt");
    let delay = next.as_millis() - 200;
    assert!(
        (400..=600).contains(&delay),
        "first delay 500 ms ± 20%, got {delay}"
    );
    // A call made while reconnecting waits for the connection.
    s.call(300, 2, "mcp_a_echo", json!({"text": "waited"}));
    s.advance_to(next.as_millis() + 1);
    assert_eq!(opens_of(&s, "a").len(), 2, "one new attempt");
    s.ready(next.as_millis() + 5, "a", &["echo"]);
    s.reply(
        next.as_millis() + 6,
        "a",
        "tools/call",
        json!({"content": [{"type": "text", "text": "waited"}]}),
    );
    assert!(matches!(s.outcome(2)[..], [CallOutcome::Ok(ref r)] if r.render_text() == "waited"));
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    assert_eq!(s.tool_names(), vec!["mcp_a_echo"]);
    assert_eq!(s.m.counters().reconnects_succeeded, 1);
    with_snapshots(|| insta::assert_snapshot!("policy_reconnect", s.finish()));
}

#[test]
fn backoff_delays_follow_the_ladder_within_jitter_up_to_the_cap() {
    let mut s = Script::with(ManagerOptions { seed: 7, ..opts() });
    connected(&mut s, "a", &["echo"]);
    closed(&mut s, 100, "a");
    let mut expected = 500u64;
    for attempt in 1..=12u32 {
        let st = s.m.server_state("a").unwrap();
        assert_eq!(st.reconnect_attempt, attempt);
        let at = st.next_attempt_at.unwrap().as_nanos();
        let from = s.now.as_nanos();
        let delay_ms = (at - from) as f64 / 1e6;
        let base = expected.min(300_000) as f64;
        assert!(
            delay_ms >= base * 0.8 - 1.0 && delay_ms <= base * 1.2 + 1.0,
            "attempt {attempt}: delay {delay_ms} ms outside {base} ± 20%"
        );
        expected *= 2;
        // The attempt starts, and fails at once (spawn failure).
        s.advance_to(st.next_attempt_at.unwrap().as_millis() + 1);
        let conn = s.conn("a");
        let now = s.now.as_millis();
        s.at(
            now,
            Input::Transport {
                conn,
                event: TransportEvent::Failed {
                    error: "spawn failed".into(),
                },
            },
        );
    }
    assert_eq!(
        s.m.status("a"),
        ServerStatus::Connecting,
        "a down server is retried forever"
    );
    assert_eq!(s.tool_names(), vec!["mcp_a_echo (deferred)"]);
}

#[test]
fn the_breaker_trips_after_more_than_five_unexpected_closes_within_30_s() {
    let mut s = Script::new();
    connected(&mut s, "a", &["echo"]);
    let mut t = 100;
    for round in 0..6 {
        closed(&mut s, t, "a");
        if round == 5 {
            break;
        }
        let at =
            s.m.server_state("a")
                .unwrap()
                .next_attempt_at
                .unwrap()
                .as_millis()
                + 1;
        s.advance_to(at);
        s.ready(at + 1, "a", &["echo"]);
        t = at + 100;
    }
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert!(s.tool_names().is_empty(), "tools withdrawn");
    let err = s.m.server_state("a").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::BreakerTripped, "{err}");
    let opens = opens_of(&s, "a").len();
    s.advance_to(t + 600_000);
    assert_eq!(
        opens_of(&s, "a").len(),
        opens,
        "no attempt after the breaker tripped"
    );
    // An explicit Connect starts it again.
    s.connect(t + 600_001, vec![stdio("a")]);
    assert_eq!(opens_of(&s, "a").len(), opens + 1);
    with_snapshots(|| insta::assert_snapshot!("policy_breaker", s.finish()));
}

/// Close `a` at `t`, let its reconnect attempt run and succeed.
fn crash_and_recover(s: &mut Script, t: u64) {
    closed(s, t, "a");
    if s.m.status("a") != ServerStatus::Connecting {
        return; // the breaker tripped
    }
    let at =
        s.m.server_state("a")
            .unwrap()
            .next_attempt_at
            .unwrap()
            .as_millis()
            + 1;
    s.advance_to(at);
    s.ready(at + 1, "a", &["echo"]);
}

#[test]
fn the_breaker_counts_only_closes_within_its_window_boundary_included() {
    // Eight closes 7 s apart never put six within 30 s: the server keeps coming back.
    let mut s = Script::new();
    connected(&mut s, "a", &["echo"]);
    for k in 0..8 {
        crash_and_recover(&mut s, 100 + k * 7_000);
        assert_eq!(s.m.status("a"), ServerStatus::Connected, "close {}", k + 1);
    }
    assert_eq!(s.m.counters().breakers_tripped, 0);

    // Six closes with the sixth exactly 30 s after the first: all six are within the window.
    let mut s = Script::new();
    connected(&mut s, "a", &["echo"]);
    for k in 0..5 {
        crash_and_recover(&mut s, 100 + k * 6_000);
    }
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    closed(&mut s, 100 + 30_000, "a");
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
    assert_eq!(s.m.counters().breakers_tripped, 1);
}

#[test]
fn no_reconnect_ever_follows_an_explicit_disconnect() {
    let mut s = Script::new();
    connected(&mut s, "a", &["echo"]);
    closed(&mut s, 100, "a");
    s.disconnect(150, "a");
    s.advance_to(3_600_000);
    assert_eq!(opens_of(&s, "a").len(), 1);
    assert_eq!(s.m.poll_timeout(), None, "no timer left behind");
}

/// A script whose manager pings every second, 300 ms to answer, two misses allowed.
fn with_health() -> Script {
    Script::with(ManagerOptions {
        health: Some(HealthPolicy {
            interval: ms(1000),
            timeout: ms(300),
            misses: 2,
        }),
        ..opts()
    })
}

#[test]
fn health_pings_detect_a_stalled_server_and_reconnect_it() {
    let mut s = with_health();
    connected(&mut s, "a", &["echo"]);
    let first = s.conn("a");
    // The first ping is answered.
    s.advance_to(1010);
    s.reply(1020, "a", "ping", json!({}));
    // Then the server stalls: two pings in a row go unanswered.
    s.advance_to(2700);
    assert_eq!(s.m.counters().ping_timeouts, 2);
    assert_eq!(
        s.count(|o| matches!(o, Output::CloseTransport { conn } if *conn == first)),
        1,
        "the stalled connection is closed"
    );
    assert_eq!(s.m.status("a"), ServerStatus::Connecting);
    let err = s.m.server_state("a").unwrap().last_error.unwrap();
    assert_eq!(err.kind, ServerErrorKind::HealthCheck, "{err}");
    let at = s.m.server_state("a").unwrap().next_attempt_at.unwrap();
    s.advance_to(at.as_millis() + 1);
    assert_eq!(opens_of(&s, "a").len(), 2, "reconnected");
    with_snapshots(|| insta::assert_snapshot!("policy_health_ping", s.finish()));
}

#[test]
fn an_answered_ping_and_a_closed_connection_leave_no_health_timer_behind() {
    let mut s = with_health();
    connected(&mut s, "a", &["echo"]);
    let conn = s.conn("a");
    s.advance_to(1010);
    s.reply(1020, "a", "ping", json!({}));
    // The answer disarms its deadline: the only timer left is the next ping.
    assert_eq!(
        s.m.next_timer(),
        Some((Instant::from_millis(2020), TimerReason::Ping { conn }))
    );
    // A crash takes the health timer with it: what is left is the reconnect attempt.
    closed(&mut s, 1500, "a");
    let next = s.m.next_timer();
    assert!(
        matches!(next, Some((_, TimerReason::Reconnect { .. }))),
        "{next:?}"
    );
    // And an explicit disconnect leaves nothing to wake the shell.
    s.disconnect(1600, "a");
    assert_eq!(s.m.next_timer(), None, "no timer outlives the server");
}

#[test]
fn progress_resets_a_call_timeout_but_never_past_the_ceiling() {
    let mut s = Script::with(ManagerOptions {
        reset_timeout_on_progress: true,
        max_call_time: ms(2500),
        ..opts()
    });
    connected(&mut s, "a", &["slow"]);
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
    let sent = s.outputs.iter().rev().find_map(|o| match o {
        Output::Send { frame, .. } => Some(String::from_utf8_lossy(frame).into_owned()),
        _ => None,
    });
    assert!(sent.unwrap().contains(r#""_meta":{"progressToken":1}"#));
    let conn = s.conn("a");
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": 1, "progress": 1}});
    for t in [900, 1800, 2500] {
        s.frame_on(t, conn, progress.clone());
        assert!(s.outcome(1).is_empty(), "still running at {t} ms");
    }
    // The ceiling: 100 ms + 2500 ms, whatever progress says.
    s.advance_to(2599);
    assert!(s.outcome(1).is_empty());
    s.advance_to(2600);
    assert!(matches!(s.outcome(1)[..], [CallOutcome::Err(_)]));
    assert_eq!(s.m.counters().progress_resets, 2);
}

#[test]
fn a_calls_own_meta_goes_out_merged_and_the_progress_token_stays_ours() {
    let mut s = Script::new();
    connected(&mut s, "a", &["slow"]);
    let meta = json!({"progressToken": "theirs", "vendor/trace": "abc"});
    for (call, progress) in [(1, true), (2, false)] {
        s.at(
            100,
            Input::CallTool {
                call: CallId(call),
                tool: "mcp_a_slow".into(),
                arguments: None,
                timeout: None,
                progress,
                meta: meta.as_object().cloned(),
            },
        );
        let sent = s.outputs.iter().rev().find_map(|o| match o {
            Output::Send { frame, .. } => serde_json::from_slice::<serde_json::Value>(frame).ok(),
            _ => None,
        });
        let sent = sent.unwrap();
        // A caller's token could name another call: it never goes out.
        let expected = if progress {
            json!({"progressToken": call, "vendor/trace": "abc"})
        } else {
            json!({"vendor/trace": "abc"})
        };
        assert_eq!(sent["params"]["_meta"], expected, "{sent}");
        assert_eq!(sent["params"]["name"], "slow");
    }
}

#[test]
fn list_changed_is_ignored_unless_the_server_declared_it() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(5, "a");
    s.reply(
        6,
        "a",
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}),
    );
    s.reply(7, "a", "tools/list", tools_json(&["one"]));
    let conn = s.conn("a");
    let mark = s.outputs.len();
    s.frame_on(
        20,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    assert!(!s.outputs[mark..]
        .iter()
        .any(|o| matches!(o, Output::Send { .. })));
}

#[test]
fn sync_restarts_only_changed_servers_and_leaves_the_rest_untouched() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("keep"), stdio("change"), stdio("drop")]);
    for n in ["keep", "change", "drop"] {
        s.cache(1, n, None);
        s.ready(10, n, &["t"]);
    }
    let keep = s.conn("keep");
    s.call(50, 1, "mcp_keep_t", json!({}));
    let mark = s.outputs.len();
    let changed = ServerSpec::new("change", ServerConfig::stdio("change-server", &["--v2"]));
    s.sync(100, vec![stdio("keep"), changed, stdio("new")]);
    let after = &s.outputs[mark..];
    assert!(!after
        .iter()
        .any(|o| matches!(o, Output::CloseTransport { conn } if *conn == keep)));
    assert!(!after
        .iter()
        .any(|o| matches!(o, Output::OpenTransport { server, .. } if server == "keep")));
    assert!(after
        .iter()
        .any(|o| matches!(o, Output::OpenTransport { server, .. } if server == "change")));
    assert!(after
        .iter()
        .any(|o| matches!(o, Output::OpenTransport { server, .. } if server == "new")));
    assert_eq!(s.m.status("drop"), ServerStatus::Disconnected);
    assert_eq!(s.m.status("keep"), ServerStatus::Connected);
    assert!(
        s.outcome(1).is_empty(),
        "the kept server's call is still in flight"
    );
    s.reply(120, "keep", "tools/call", json!({"content": []}));
    assert!(matches!(s.outcome(1)[..], [CallOutcome::Ok(_)]));
    with_snapshots(|| insta::assert_snapshot!("policy_sync", s.finish()));
}

#[test]
fn reconnect_can_be_switched_off() {
    let mut s = Script::with(ManagerOptions {
        reconnect: ReconnectPolicy::never(),
        ..opts()
    });
    connected(&mut s, "a", &["echo"]);
    closed(&mut s, 100, "a");
    s.advance_to(600_000);
    assert_eq!(opens_of(&s, "a").len(), 1);
    assert_eq!(s.m.status("a"), ServerStatus::Disconnected);
}

/// Found by the simulator (invariant 16): a `list_changed` that arrived while the first
/// `tools/list` was in flight was dropped, so the server connected with the tool set from
/// before the change and kept it. It now lists again once connected.
#[test]
fn list_changed_during_the_first_listing_lists_again_once_connected() {
    let mut s = Script::new();
    s.connect(0, vec![stdio("a")]);
    s.cache(1, "a", None);
    s.opened(5, "a");
    s.reply(6, "a", "initialize", init_result());
    let conn = s.conn("a");
    // The server's tools change while its answer to the first tools/list is on the way.
    s.frame_on(
        7,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    let mark = s.outputs.len();
    s.reply(8, "a", "tools/list", tools_json(&["old"]));
    assert_eq!(s.m.status("a"), ServerStatus::Connected);
    let relists = s.outputs[mark..]
        .iter()
        .filter(|o| matches!(o, Output::Send { frame, .. } if String::from_utf8_lossy(frame).contains("tools/list")))
        .count();
    assert_eq!(relists, 1, "one more tools/list once connected");
    s.reply(9, "a", "tools/list", tools_json(&["old", "new"]));
    assert_eq!(s.tool_names(), vec!["mcp_a_new", "mcp_a_old"]);
}

/// Sync is "this is the set I want": a listed server whose config did not change but that is
/// stopped — it failed with reconnects off, or its breaker tripped — is started again, while a
/// running one with an unchanged config keeps its transport, its calls and its tools.
#[test]
fn sync_starts_stopped_servers_it_lists_unchanged_and_keeps_running_ones() {
    let mut s = Script::with(ManagerOptions {
        // The first unexpected close trips the breaker.
        reconnect: ReconnectPolicy {
            burst_limit: 0,
            ..ReconnectPolicy::default()
        },
        ..opts()
    });
    s.connect(0, vec![stdio("tripped"), stdio("failed"), stdio("up")]);
    for n in ["tripped", "failed", "up"] {
        s.cache(1, n, None);
    }
    s.ready(10, "tripped", &["t"]);
    s.ready(10, "up", &["u"]);
    // `failed` fails its startup (no retry of startup failures by default).
    s.opened(10, "failed");
    s.reply_error(11, "failed", "initialize", -32603, "boom");
    closed(&mut s, 50, "tripped");
    assert_eq!(s.m.counters().breakers_tripped, 1);
    for n in ["tripped", "failed"] {
        assert_eq!(s.m.status(n), ServerStatus::Disconnected, "{n}");
    }
    let up = s.conn("up");
    s.call(60, 1, "mcp_up_u", json!({}));
    let mark = s.outputs.len();
    s.sync(100, vec![stdio("tripped"), stdio("failed"), stdio("up")]);
    let after = &s.outputs[mark..];
    for n in ["tripped", "failed"] {
        assert_eq!(
            after
                .iter()
                .filter(|o| matches!(o, Output::OpenTransport { server, .. } if server == n))
                .count(),
            1,
            "{n} is started again"
        );
        assert_eq!(s.m.status(n), ServerStatus::Connecting, "{n}");
    }
    assert!(!after.iter().any(|o| matches!(o,
        Output::CloseTransport { conn } | Output::Send { conn, .. } if *conn == up)));
    assert!(!after
        .iter()
        .any(|o| matches!(o, Output::OpenTransport { server, .. } if server == "up")));
    assert_eq!(s.m.status("up"), ServerStatus::Connected);
    assert!(
        s.outcome(1).is_empty(),
        "the running server's call is untouched"
    );
    assert_eq!(s.m.counters().syncs_restarted_stopped, 2);
    // A Sync that lists them again while they connect leaves them alone.
    let mark = s.outputs.len();
    let request = s.sync(110, vec![stdio("tripped"), stdio("failed"), stdio("up")]);
    assert_eq!(
        s.outputs[mark..],
        [Output::Event(Event::SyncCompleted { request })],
        "its one completion, and nothing else"
    );
    s.ready(120, "tripped", &["t"]);
    s.ready(120, "failed", &["f"]);
    assert_eq!(
        s.tool_names(),
        vec!["mcp_failed_f", "mcp_tripped_t", "mcp_up_u"]
    );
    with_snapshots(|| insta::assert_snapshot!("policy_sync_restarts_stopped", s.finish()));
}

/// After `list_changed`, a call to a tool the server no longer offers fails with an
/// error that says so (and names the server), not "unknown tool".
#[test]
fn a_call_to_a_tool_removed_by_list_changed_fails_with_a_clear_error() {
    let mut s = Script::new();
    connected(&mut s, "a", &["keep", "gone"]);
    let conn = s.conn("a");
    s.frame_on(
        20,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    s.reply(30, "a", "tools/list", tools_json(&["keep"]));
    assert_eq!(s.tool_names(), vec!["mcp_a_keep"]);
    s.call(40, 1, "mcp_a_gone", json!({}));
    assert_eq!(
        s.outcome(1),
        [&CallOutcome::Err(CallError::RetiredTool {
            server: "a".into(),
            raw: "gone".into(),
            called_as: Some("mcp_a_gone".into()),
        })]
    );
    assert_eq!(s.m.counters().calls_to_retired_tools, 1);
    // When it comes back, the name routes again.
    s.frame_on(
        50,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    s.reply(60, "a", "tools/list", tools_json(&["keep", "gone"]));
    s.call(70, 2, "mcp_a_gone", json!({}));
    assert!(s.outcome(2).is_empty(), "sent, in flight");
    s.reply(80, "a", "tools/call", json!({"content": []}));
    assert!(matches!(s.outcome(2)[..], [CallOutcome::Ok(_)]));
    // A name never in the view says so.
    s.call(90, 3, "mcp_a_never", json!({}));
    assert_eq!(
        s.outcome(3),
        [&CallOutcome::Err(CallError::UnknownTool {
            tool: "mcp_a_never".into()
        })]
    );
}

/// `notifications/progress` and `notifications/message` surface as typed events: progress
/// names the call it is about (when its token is one we issued), a log message keeps its
/// level, logger and data — and is not also a `Diagnostic`.
#[test]
fn progress_and_log_messages_are_typed_events() {
    use switchboard_core::manager::Level;
    let mut s = Script::with(ManagerOptions {
        reset_timeout_on_progress: true,
        ..opts()
    });
    connected(&mut s, "a", &["slow"]);
    let conn = s.conn("a");
    s.call(100, 7, "mcp_a_slow", json!({}));
    let mark = s.outputs.len();
    s.frame_on(
        200,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": 7, "progress": 1, "total": 4, "message": "a quarter"}}),
    );
    s.frame_on(
        210,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": "theirs", "progress": 0.5}}),
    );
    for (t, level) in [(220, "warning"), (230, "notice"), (240, "emergency")] {
        s.frame_on(
            t,
            conn,
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": level, "logger": "db", "data": {"disk": "full"}}}),
        );
    }
    assert_eq!(
        s.outputs[mark..],
        [
            Output::Event(Event::Progress {
                server: "a".into(),
                call: Some(CallId(7)),
                progress: 1.0,
                total: Some(4.0),
                message: Some("a quarter".into()),
            }),
            Output::Event(Event::Progress {
                server: "a".into(),
                call: None,
                progress: 0.5,
                total: None,
                message: None,
            }),
            Output::Event(Event::ServerLog {
                server: "a".into(),
                level: Level::Warn,
                severity: "warning".into(),
                logger: Some("db".into()),
                data: json!({"disk": "full"}),
            }),
            Output::Event(Event::ServerLog {
                server: "a".into(),
                level: Level::Info,
                severity: "notice".into(),
                logger: Some("db".into()),
                data: json!({"disk": "full"}),
            }),
            Output::Event(Event::ServerLog {
                server: "a".into(),
                level: Level::Error,
                severity: "emergency".into(),
                logger: Some("db".into()),
                data: json!({"disk": "full"}),
            }),
        ]
    );
    // Once the call completed, its token no longer names it.
    s.reply(300, "a", "tools/call", json!({"content": []}));
    let mark = s.outputs.len();
    s.frame_on(
        310,
        conn,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": 7, "progress": 2}}),
    );
    assert!(matches!(
        s.outputs[mark..],
        [Output::Event(Event::Progress { call: None, .. })]
    ));
    with_snapshots(|| insta::assert_snapshot!("policy_progress_and_logs", s.finish()));
}
