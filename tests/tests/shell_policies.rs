//! The recovery policies against real `mcp-demo-server` processes: `Sync` reconciliation,
//! progress and call timeouts, the reconnect breaker, startup retries, and tools removed by
//! `list_changed`.

use crate::shell::{demo, stats, wait_for};
use crate::stdio::assert_group_gone;
use serde_json::json;
use std::time::{Duration, Instant};
use switchboard::{Builder, CallError, Error, Event, ServerErrorKind, ServerStatus};

/// The pid of the live demo server started with `--name <name>` (its command line says so).
fn pid_of(sb: &switchboard::Switchboard, name: &str) -> Option<u32> {
    sb.live_processes().into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
            let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
            args.windows(2)
                .any(|w| w[0] == b"--name" && w[1] == name.as_bytes())
        })
    })
}

/// Wait (generously) until `done()` holds, re-checking after every event.
async fn wait_until(rx: &switchboard::Events, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = async {
            match rx.recv().await {
                Err(switchboard::RecvError::Closed) => None,
                _ => Some(()),
            }
        };
        let timer = async {
            async_io::Timer::after(left).await;
            None
        };
        if futures_lite::future::or(next, timer).await.is_none() {
            assert!(done(), "timed out after 20 s waiting until {what}");
            return;
        }
    }
}

fn tool_names(sb: &switchboard::Switchboard, server: &str) -> Vec<String> {
    let prefix = format!("mcp_{server}_");
    sb.tools()
        .iter()
        .filter(|t| t.qualified_name.starts_with(&prefix))
        .map(|t| t.qualified_name.clone())
        .collect()
}

#[test]
fn sync_keeps_unchanged_servers_restarts_changed_ones_stops_removed_ones_and_starts_new_ones() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("keep", &[]),
            demo("change", &[]),
            demo("drop", &[]),
        ])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected.len(), 3, "{report:?}");
        let events = sb.events();
        let keep_pid = pid_of(&sb, "keep").unwrap();
        let change_pid = pid_of(&sb, "change").unwrap();
        let drop_pid = pid_of(&sb, "drop").unwrap();
        let keep_tools = tool_names(&sb, "keep");
        // A call in flight on the unchanged server must survive the sync (polled once, its
        // request reaches the driver before the sync does).
        let mut in_flight = Box::pin(sb.call("mcp_keep_sleep", json!({"ms": 1500})));
        assert!(futures_lite::future::poll_once(&mut in_flight)
            .await
            .is_none());

        sb.sync(vec![
            demo("keep", &[]),
            demo("change", &["--tools", "1"]),
            demo("new", &[]),
        ])
        .await
        .unwrap();
        wait_until(&events, "the sync settled", || {
            sb.status("change") == ServerStatus::Connected
                && sb.status("new") == ServerStatus::Connected
                && sb
                    .server_state("drop")
                    .is_none_or(|s| s.status == ServerStatus::Disconnected)
                && tool_names(&sb, "change").contains(&"mcp_change_tool_0".to_string())
        })
        .await;

        // Unchanged: same process, same tools, its call went on.
        assert_eq!(pid_of(&sb, "keep"), Some(keep_pid));
        assert_eq!(sb.server_state("keep").unwrap().attempts, 1);
        assert_eq!(tool_names(&sb, "keep"), keep_tools);
        let r = in_flight.await.unwrap();
        assert_eq!(r.render_text(), "slept 1500ms");
        // Changed: a new process with the new config's tools. The old one may still be
        // closing beside it (and is listed first, having the lower pid) until its group is
        // gone; a process that is gone no longer matches `pid_of`.
        assert_group_gone(change_pid);
        let new_change_pid = pid_of(&sb, "change").unwrap();
        assert_ne!(new_change_pid, change_pid);
        // Removed: stopped, its tools gone.
        assert_group_gone(drop_pid);
        assert_eq!(pid_of(&sb, "drop"), None);
        assert!(tool_names(&sb, "drop").is_empty());
        // New: started.
        assert!(pid_of(&sb, "new").is_some());
        let r = sb
            .call("mcp_new_add", json!({"a": 1, "b": 2}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "3");
        sb.shutdown().await;
    });
}

#[test]
fn progress_resets_a_calls_timeout_up_to_the_hard_maximum() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo(
            "p",
            &["--progress-every-ms", "100", "--stats-tool"],
        )])
        .no_cache()
        .manager_options(|o| {
            o.reset_timeout_on_progress = true;
            o.max_call_time = Duration::from_millis(3000);
        })
        .start()
        .await
        .unwrap();
        // Three times its 500 ms timeout, kept alive by progress every 100 ms.
        let r = sb
            .call_with_timeout(
                "mcp_p_sleep",
                json!({"ms": 1500}),
                Some(Duration::from_millis(500)),
            )
            .await
            .unwrap();
        assert_eq!(r.render_text(), "slept 1500ms");
        assert!(stats(&sb, "p").await["progress_sent"].as_u64().unwrap() >= 14);
        // Progress never pushes a call past the hard maximum: it fails, and is cancelled.
        let err = sb
            .call_with_timeout(
                "mcp_p_sleep",
                json!({"ms": 60000}),
                Some(Duration::from_millis(500)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Call(CallError::Timeout { .. })),
            "{err:?}"
        );
        let s = stats(&sb, "p").await;
        assert_eq!(s["cancelled_in_flight"], 1, "{s}");
        // A hard maximum of 3 s with progress every 100 ms: far more than the 500 ms timeout
        // alone would have allowed.
        assert!(s["progress_sent"].as_u64().unwrap() >= 14 + 10, "{s}");
        sb.shutdown().await;
    });
}

#[test]
fn without_progress_a_long_call_times_out_and_the_server_is_told() {
    smol::block_on(async {
        // The server would report progress, but the client asks for none (no progress token):
        // the timeout stands.
        let (sb, _) = Builder::servers(vec![demo(
            "p",
            &["--progress-every-ms", "100", "--stats-tool"],
        )])
        .no_cache()
        .start()
        .await
        .unwrap();
        let err = sb
            .call_with_timeout(
                "mcp_p_sleep",
                json!({"ms": 60000}),
                Some(Duration::from_millis(500)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Call(CallError::Timeout { after, waiting_for: None }) if after.as_millis() == 500),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "MCP error: tool call timed out after 500 ms"
        );
        let s = stats(&sb, "p").await;
        assert_eq!(s["cancelled_in_flight"], 1, "{s}");
        assert_eq!(s["progress_sent"], 0, "{s}");
        sb.shutdown().await;
    });
}

#[test]
fn a_server_that_keeps_crashing_trips_the_breaker_and_is_left_disconnected() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("good", &[]),
            // Connects, then exits right after its first tools/list: every attempt is an
            // unexpected close of an established connection.
            demo("flappy", &["--crash-after-list-ms", "0"]),
        ])
        .no_cache()
        .manager_options(|o| {
            // The default burst limit (more than 5 closes within 30 s) with a fast ladder.
            o.reconnect.initial = Duration::from_millis(50);
            o.reconnect.max = Duration::from_millis(100);
        })
        .start()
        .await
        .unwrap();
        assert!(report.connected.contains(&"good".to_string()), "{report:?}");
        let events = sb.events();
        wait_until(&events, "the breaker tripped", || {
            sb.server_state("flappy")
                .and_then(|s| s.last_error)
                .is_some_and(|e| e.kind == ServerErrorKind::BreakerTripped)
        })
        .await;
        let state = sb.server_state("flappy").unwrap();
        assert_eq!(state.status, ServerStatus::Disconnected);
        let error = state.last_error.unwrap();
        assert!(
            error
                .message
                .contains("after 6 unexpected closes within 30 s"),
            "{error}"
        );
        assert_eq!(state.attempts, 6, "one start and five reconnects");
        assert_eq!(state.next_attempt_at, None, "no attempt scheduled");
        assert!(
            tool_names(&sb, "flappy").is_empty(),
            "its tools are withdrawn"
        );
        assert_eq!(pid_of(&sb, "flappy"), None);
        // Nothing more is spawned: it never turns `Connecting` again within many ladder
        // steps (10 times the 100 ms cap).
        let quiet = async {
            loop {
                match events.recv().await {
                    Ok(Event::StatusChanged {
                        server,
                        status: ServerStatus::Connecting,
                    }) if server == "flappy" => return Some(()),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
        };
        let timer = async {
            async_io::Timer::after(Duration::from_millis(1000)).await;
            None
        };
        assert_eq!(futures_lite::future::or(quiet, timer).await, None);
        assert_eq!(sb.server_state("flappy").unwrap().attempts, 6);
        assert_eq!(pid_of(&sb, "flappy"), None);
        // The other server never noticed.
        let r = sb
            .call("mcp_good_echo", json!({"text": "fine"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "fine");
        sb.shutdown().await;
    });
}

#[test]
fn startup_failures_are_retried_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    smol::block_on(async {
        // Off by default: a server whose first start fails stays failed.
        let marker = dir.path().join("off");
        let marker = marker.to_str().unwrap();
        let (sb, report) = Builder::servers(vec![demo("once", &["--fail-init-once", marker])])
            .no_cache()
            .manager_options(|o| o.reconnect.initial = Duration::from_millis(50))
            .start()
            .await
            .unwrap();
        assert!(report.errors.contains_key("once"), "{report:?}");
        let state = sb.server_state("once").unwrap();
        assert_eq!(state.status, ServerStatus::Disconnected);
        assert_eq!(state.next_attempt_at, None, "no retry scheduled");
        sb.shutdown().await;

        // On: the failed start is retried on the ladder, and the second start succeeds.
        let marker = dir.path().join("on");
        let marker = marker.to_str().unwrap();
        let (sb, _) = Builder::servers(vec![demo("once", &["--fail-init-once", marker])])
            .no_cache()
            .manager_options(|o| {
                o.reconnect.initial = Duration::from_millis(50);
                o.reconnect.retry_startup_failures = true;
            })
            .start()
            .await
            .unwrap();
        let events = sb.events();
        wait_until(&events, "the retry connected", || {
            sb.status("once") == ServerStatus::Connected
        })
        .await;
        assert_eq!(sb.server_state("once").unwrap().attempts, 2);
        let r = sb
            .call("mcp_once_echo", json!({"text": "second start"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "second start");
        sb.shutdown().await;
    });
}

#[test]
fn a_tool_removed_by_list_changed_fails_by_name_and_calls_in_flight_finish() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo(
            "lc",
            &[
                "--list-changed-after-ms",
                "1500",
                "--remove-on-change",
                "echo",
            ],
        )])
        .no_cache()
        .start()
        .await
        .unwrap();
        let events = sb.events();
        assert!(tool_names(&sb, "lc").contains(&"mcp_lc_echo".to_string()));
        let mut in_flight = Box::pin(sb.call("mcp_lc_sleep", json!({"ms": 6000})));
        assert!(futures_lite::future::poll_once(&mut in_flight)
            .await
            .is_none());
        wait_for(
            &events,
            |e| matches!(e, Event::ToolsChanged { servers } if servers == &["lc"]),
        )
        .await;
        let names = tool_names(&sb, "lc");
        assert!(names.contains(&"mcp_lc_late_tool".to_string()), "{names:?}");
        assert!(!names.contains(&"mcp_lc_echo".to_string()), "{names:?}");
        let err = sb
            .call("mcp_lc_echo", json!({"text": "gone?"}))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Call(CallError::RetiredTool { server, raw, .. }) if server == "lc" && raw == "echo"),
            "{err:?}"
        );
        let r = sb
            .call("mcp_lc_late_tool", json!({"text": "new"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "new");
        // The call that was in flight when the list changed is unaffected.
        assert!(
            futures_lite::future::poll_once(&mut in_flight)
                .await
                .is_none(),
            "the sleep outlasts the list change"
        );
        assert_eq!(in_flight.await.unwrap().render_text(), "slept 6000ms");
        assert_eq!(sb.status("lc"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}
