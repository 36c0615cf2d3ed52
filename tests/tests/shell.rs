//! The smol shell against real `mcp-demo-server` processes: the startup gate with a warm and a
//! cold cache, deferred calls, cancellation seen by the server, per-server isolation of every
//! fault, no orphan processes, and the recovery policies (reconnect and its burst breaker, startup
//! retries, health pings, progress-aware timeouts, Sync, list_changed).

use crate::stdio::assert_group_gone;
use crate::support::demo_server_bin;
use serde_json::json;
use std::time::Duration;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::core::manager::ReconnectPolicy;
use switchboard::{Builder, CallError, Error, Event, ServerErrorKind, ServerStatus};

pub(crate) fn demo(name: &str, args: &[&str]) -> ServerSpec {
    let bin = demo_server_bin();
    let mut all = vec!["--name", name];
    all.extend_from_slice(args);
    ServerSpec::new(name, ServerConfig::stdio(bin.to_string_lossy(), &all))
}

fn with_timeout(mut s: ServerSpec, ms: i64) -> ServerSpec {
    s.config.timeout_ms = Some(ms);
    s
}

/// Wait (generously) for an event that satisfies `f`.
pub(crate) async fn wait_for(rx: &switchboard::Events, f: impl Fn(&Event) -> bool) -> Event {
    let deadline = async {
        async_io::Timer::after(Duration::from_secs(20)).await;
        None
    };
    let next = async {
        loop {
            match rx.recv().await {
                Ok(e) if f(&e) => return Some(e),
                Ok(_) | Err(switchboard::RecvError::Lagged { .. }) => continue,
                Err(_) => return None,
            }
        }
    };
    futures_lite::future::or(next, deadline)
        .await
        .expect("the expected event did not arrive within 20 s")
}

#[test]
fn warm_cache_serves_deferred_tools_at_the_gate_and_the_deferred_call_succeeds() {
    let cache = tempfile::tempdir().unwrap();
    smol::block_on(async {
        // Cold: the slow server has no cache entry, so startup waits for it to connect.
        let slow = demo("slow", &["--init-delay-ms", "2000"]);
        let (sb, report) = Builder::servers(vec![demo("fast", &[]), slow.clone()])
            .cache_dir(cache.path())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["fast", "slow"]);
        assert!(report.deferred.is_empty());
        assert_eq!(sb.status("slow"), ServerStatus::Connected);
        sb.shutdown().await;

        // Warm: the slow server's tools come from the cache, deferred, at the gate. The gate
        // is a second here, not 250 ms: the fast server must connect before it even on a
        // loaded machine, and the slow one still cannot (its answer comes 2 s after it).
        let (sb, report) = Builder::servers(vec![demo("fast", &[]), slow])
            .cache_dir(cache.path())
            .gate(Duration::from_secs(1))
            .start()
            .await
            .unwrap();
        let events = sb.events();
        // Returned before the slow server connected: it is still connecting (its initialize
        // answer is 2 s away) and its tools are the cached ones, deferred.
        assert_eq!(report.connected, vec!["fast"]);
        assert_eq!(report.deferred, vec!["slow"]);
        assert_eq!(sb.status("slow"), ServerStatus::Connecting);
        let echo = report
            .tools
            .iter()
            .find(|t| t.qualified_name == "mcp_slow_echo")
            .expect("cached echo tool");
        assert!(echo.deferred);
        assert!(report
            .tools
            .iter()
            .filter(|t| t.qualified_name.starts_with("mcp_fast_"))
            .all(|t| !t.deferred));
        // A deferred call made now, before the server is ready: its request reaches the
        // driver on the first poll and waits there.
        let mut call = Box::pin(sb.call("mcp_slow_echo", json!({"text": "waited"})));
        assert!(futures_lite::future::poll_once(&mut call).await.is_none());
        assert_eq!(sb.status("slow"), ServerStatus::Connecting);
        // Later, the server connects and its live tools replace the cached ones.
        wait_for(
            &events,
            |e| matches!(e, Event::ToolsChanged { servers } if servers == &["slow"]),
        )
        .await;
        assert_eq!(sb.status("slow"), ServerStatus::Connected);
        assert!(sb.tools().iter().all(|t| !t.deferred));
        // The call made before it connected succeeds.
        let r = call.await.unwrap();
        assert_eq!(r.render_text(), "waited");
        sb.shutdown().await;
    });
}

#[test]
fn uncached_wait_bounds_startup_when_a_server_is_slow() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("fast", &[]),
            // Far above the upper bound below, so that bound proves startup did not wait.
            demo("slow", &["--init-delay-ms", "6000"]),
        ])
        .no_cache()
        .uncached_wait(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
        assert!(
            report.elapsed >= Duration::from_millis(450),
            "{:?}",
            report.elapsed
        );
        assert!(
            report.elapsed < Duration::from_millis(4500),
            "{:?}",
            report.elapsed
        );
        assert_eq!(report.pending, vec!["slow"]);
        let events = sb.events();
        wait_for(
            &events,
            |e| matches!(e, Event::ToolsChanged { servers } if servers == &["slow"]),
        )
        .await;
        assert_eq!(sb.status("slow"), ServerStatus::Connected);
        sb.shutdown().await;
    });
}

#[test]
fn every_fault_is_isolated_to_its_server_with_a_precise_error() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("good", &[]),
            // Long enough for the server to start and say why it hangs on a loaded machine.
            with_timeout(demo("hangs", &["--hang-init"]), 2500),
            demo("refuses", &["--fail-init"]),
            demo("nolist", &["--fail-list"]),
            demo("garbage", &["--garbage-stdout"]),
            demo("huge", &["--oversized-frame"]),
            ServerSpec::new(
                "missing",
                ServerConfig::stdio("/nonexistent/mcp-server", &[]),
            ),
        ])
        .no_cache()
        .start()
        .await
        .unwrap();
        let err = |n: &str| {
            report
                .errors
                .get(n)
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let kind = |n: &str| report.errors.get(n).map(|e| e.kind);
        // The client ended this attempt (no transport event carries the stderr): the error
        // still ends with the server's last stderr lines.
        assert_eq!(
            err("hangs"),
            "connect timed out after 2500 ms; last stderr lines:\n[hangs] --hang-init: not answering initialize"
        );
        assert_eq!(
            sb.server_state("hangs").unwrap().last_error.as_ref(),
            report.errors.get("hangs")
        );
        assert_eq!(kind("hangs"), Some(ServerErrorKind::ConnectTimeout));
        assert_eq!(kind("refuses"), Some(ServerErrorKind::InitializeFailed));
        assert_eq!(kind("nolist"), Some(ServerErrorKind::ListFailed));
        // The stdio transport caught the oversized frame: the transport failed.
        assert_eq!(kind("huge"), Some(ServerErrorKind::TransportFailed));
        assert!(
            err("refuses").starts_with("initialize failed: MCP error"),
            "{}",
            err("refuses")
        );
        assert!(
            err("nolist").starts_with("tools/list failed: MCP error"),
            "{}",
            err("nolist")
        );
        assert!(err("huge").contains("16 MiB"), "{}", err("huge"));
        assert!(
            err("missing").contains("/nonexistent/mcp-server"),
            "{}",
            err("missing")
        );
        // Garbage lines on stdout are dropped; the server still works.
        assert!(
            report.connected.contains(&"garbage".to_string()),
            "{report:?}"
        );
        assert!(report.connected.contains(&"good".to_string()));
        let r = sb
            .call("mcp_good_add", json!({"a": 2, "b": 3}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "5");
        let r = sb
            .call("mcp_garbage_echo", json!({"text": "ok"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "ok");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}

#[test]
fn a_crash_mid_call_fails_that_call_and_leaves_the_others_working() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![
            demo("good", &[]),
            // The crash timer starts with the process: long enough for a loaded machine to
            // finish startup and send the call first.
            demo("crashy", &["--crash-after-ms", "1500"]),
        ])
        .no_cache()
        // Reconnects off, to see the crash itself.
        .manager_options(|o| o.reconnect = ReconnectPolicy::never())
        .start()
        .await
        .unwrap();
        let err = sb
            .call("mcp_crashy_sleep", json!({"ms": 5000}))
            .await
            .unwrap_err();
        let Error::Call(CallError::Transport(e)) = err else {
            panic!("expected the connection's failure, got {err:?}")
        };
        assert!(e.message.contains("connection closed"), "{e}");
        assert_eq!(sb.status("crashy"), ServerStatus::Disconnected);
        let state = sb.server_state("crashy").unwrap();
        assert!(
            state.last_error.unwrap().message.contains("exit"),
            "the exit status is reported"
        );
        let r = sb
            .call("mcp_good_echo", json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "still here");
        sb.shutdown().await;
    });
}

/// What the demo server (`--stats-tool`) says it received.
pub(crate) async fn stats(sb: &switchboard::Switchboard, server: &str) -> serde_json::Value {
    let r = sb
        .call(&format!("mcp_{server}_stats"), json!({}))
        .await
        .unwrap();
    serde_json::from_str(&r.render_text()).unwrap()
}

#[test]
fn dropping_a_call_future_cancels_it_and_the_server_keeps_serving() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo("a", &["--stats-tool"])])
            .no_cache()
            .start()
            .await
            .unwrap();
        // Poll the call once (its request goes out), then drop the future.
        let mut slow = Box::pin(sb.call("mcp_a_sleep", json!({"ms": 60000})));
        assert!(futures_lite::future::poll_once(&mut slow).await.is_none());
        // The sleep is in flight on the server once a call sent after it was answered.
        let r = sb
            .call("mcp_a_echo", json!({"text": "after"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after");
        drop(slow);
        // The server handles notifications/cancelled before the next request on its stdin,
        // so the counters below already include it: the in-flight sleep was cancelled.
        let s = stats(&sb, "a").await;
        assert_eq!(s["cancelled"].as_array().unwrap().len(), 1, "{s}");
        assert_eq!(s["cancelled_in_flight"], 1, "{s}");

        let err = sb
            .call_with_timeout(
                "mcp_a_sleep",
                json!({"ms": 60000}),
                Some(Duration::from_millis(100)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Call(CallError::Timeout { after, waiting_for: None }) if after.as_millis() == 100),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "MCP error: tool call timed out after 100 ms"
        );
        // A timed-out call is cancelled too.
        let s = stats(&sb, "a").await;
        assert_eq!(s["cancelled_in_flight"], 2, "{s}");
        sb.shutdown().await;
    });
}

#[test]
fn on_the_embedders_executor_calls_cancellation_and_shutdown_work() {
    // The executor is run by this thread only: the driver, the transports and the callers
    // all share it.
    let ex = std::sync::Arc::new(smol::Executor::new());
    let cache = tempfile::tempdir().unwrap();
    smol::block_on(ex.run(async {
        let (sb, report) = Builder::servers(vec![demo("a", &[]), demo("b", &["--tools", "2"])])
            .cache_dir(cache.path())
            .executor(ex.clone())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["a", "b"]);
        assert_eq!(sb.tools().len(), 3 + 5);
        // Sequential, then concurrent callers spawned on the same executor.
        for i in 0..50 {
            let r = sb
                .call("mcp_a_echo", json!({"text": format!("seq {i}")}))
                .await
                .unwrap();
            assert_eq!(r.render_text(), format!("seq {i}"));
        }
        let callers: Vec<_> = (0..32)
            .map(|i| {
                let sb = sb.clone();
                ex.spawn(async move {
                    let tool = if i % 2 == 0 {
                        "mcp_a_echo"
                    } else {
                        "mcp_b_tool_1"
                    };
                    let r = sb
                        .call(tool, json!({"text": format!("c {i}")}))
                        .await
                        .unwrap();
                    assert_eq!(r.render_text(), format!("c {i}"));
                })
            })
            .collect();
        for c in callers {
            c.await;
        }
        // Dropping a call future still cancels the call; the server keeps serving.
        let slow = sb.call("mcp_a_sleep", json!({"ms": 60000}));
        futures_lite::future::or(
            async {
                drop(slow.await);
            },
            async {
                async_io::Timer::after(Duration::from_millis(100)).await;
            },
        )
        .await;
        let r = sb
            .call("mcp_a_echo", json!({"text": "after"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after");
        let groups = sb.live_processes();
        assert_eq!(groups.len(), 2);
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
        for g in groups {
            assert_group_gone(g);
        }
    }));
}

#[test]
fn no_orphan_after_shutdown_even_when_sigterm_is_ignored_and_a_grandchild_was_spawned() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("stubborn", &["--ignore-sigterm", "--spawn-grandchild"]),
            demo("plain", &[]),
        ])
        .no_cache()
        .stdio_options(switchboard::StdioOptions {
            stdin_close_wait: Duration::from_millis(200),
            sigterm_wait: Duration::from_millis(300),
            ..Default::default()
        })
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected.len(), 2);
        let groups = sb.live_processes();
        assert_eq!(groups.len(), 2);
        sb.shutdown().await;
        for g in groups {
            assert_group_gone(g);
        }
    });
}

#[test]
fn no_orphan_after_dropping_the_handle_without_shutdown() {
    let groups = smol::block_on(async {
        let (sb, _) = Builder::servers(vec![
            demo("stubborn", &["--ignore-sigterm", "--spawn-grandchild"]),
            demo("plain", &[]),
        ])
        .no_cache()
        .start()
        .await
        .unwrap();
        let groups = sb.live_processes();
        assert_eq!(groups.len(), 2);
        groups
        // `sb` is dropped here, without shutdown().
    });
    for g in groups {
        assert_group_gone(g);
    }
}

#[test]
fn a_crashed_server_is_reconnected_and_its_tools_come_back() {
    smol::block_on(async {
        // The crash timer starts with the process: long enough for a loaded machine to finish
        // startup and subscribe to events before it fires (and the reconnected process to be
        // checked before it crashes again).
        let (sb, report) = Builder::servers(vec![demo("crashy", &["--crash-after-ms", "1500"])])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["crashy"]);
        let events = sb.events();
        wait_for(&events, |e| {
            matches!(
                e,
                Event::StatusChanged {
                    status: ServerStatus::Connecting,
                    ..
                }
            )
        })
        .await;
        // While reconnecting, its tools stay in the view, deferred.
        assert!(sb
            .tools()
            .iter()
            .any(|t| t.qualified_name == "mcp_crashy_echo" && t.deferred));
        wait_for(&events, |e| {
            matches!(
                e,
                Event::StatusChanged {
                    status: ServerStatus::Connected,
                    ..
                }
            )
        })
        .await;
        let state = sb.server_state("crashy").unwrap();
        assert_eq!(state.attempts, 2, "one reconnect attempt");
        assert!(sb
            .tools()
            .iter()
            .any(|t| t.qualified_name == "mcp_crashy_echo" && !t.deferred));
        sb.shutdown().await;
    });
}

#[test]
fn the_disk_cache_is_ignored_when_the_config_changes_and_survives_a_corrupt_file() {
    let cache = tempfile::tempdir().unwrap();
    smol::block_on(async {
        let start = |spec: ServerSpec| Builder::servers(vec![spec]).cache_dir(cache.path()).start();
        let (sb, report) = start(demo("slow", &["--init-delay-ms", "600"]))
            .await
            .unwrap();
        assert!(report.deferred.is_empty(), "cold: nothing cached yet");
        sb.shutdown().await;
        assert!(
            std::fs::read_dir(cache.path()).unwrap().count() > 0,
            "written after connect"
        );

        // Same server, changed config: the cached entry has another config hash — a miss.
        let (sb, report) = start(demo("slow", &["--init-delay-ms", "600", "--tools", "2"]))
            .await
            .unwrap();
        assert!(
            report.deferred.is_empty(),
            "a changed config must not use the old tools"
        );
        assert_eq!(report.connected, vec!["slow"]);
        sb.shutdown().await;

        // Every cache file corrupted: a miss with a warning, never an error.
        for entry in std::fs::read_dir(cache.path()).unwrap() {
            std::fs::write(entry.unwrap().path(), b"{ not json").unwrap();
        }
        let (sb, report) = start(demo("slow", &["--init-delay-ms", "600"]))
            .await
            .unwrap();
        assert!(report.deferred.is_empty());
        assert!(report.errors.is_empty(), "{report:?}");
        assert_eq!(report.connected, vec!["slow"]);
        sb.shutdown().await;
    });
}

#[test]
fn health_pings_catch_a_stalled_server_and_reconnect_it() {
    use switchboard::core::manager::HealthPolicy;
    smol::block_on(async {
        // The stall timer starts with the process: long enough for a loaded machine to finish
        // startup and subscribe to events before it fires.
        let (sb, report) = Builder::servers(vec![demo("stally", &["--stall-after-ms", "1500"])])
            .no_cache()
            .manager_options(|o| {
                o.health = Some(HealthPolicy {
                    interval: Duration::from_millis(200),
                    timeout: Duration::from_millis(200),
                    misses: 2,
                })
            })
            .stdio_options(switchboard::StdioOptions {
                stdin_close_wait: Duration::from_millis(100),
                sigterm_wait: Duration::from_millis(300),
                ..Default::default()
            })
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["stally"]);
        let first = sb.live_processes();
        let events = sb.events();
        let lost = wait_for(&events, |e| {
            matches!(e, Event::ReconnectScheduled { error, attempt: 1, .. } if error.kind == ServerErrorKind::HealthCheck)
        })
        .await;
        assert!(matches!(lost, Event::ReconnectScheduled { ref server, .. } if server == "stally"));
        wait_for(&events, |e| {
            matches!(
                e,
                Event::StatusChanged {
                    status: ServerStatus::Connected,
                    ..
                }
            )
        })
        .await;
        assert_eq!(sb.server_state("stally").unwrap().attempts, 2);
        // The stalled process (which ignores stdin EOF once stalled) was stopped.
        for g in first {
            assert_group_gone(g);
        }
        sb.shutdown().await;
    });
}

/// The process group of the server started with `--name <name>`, among `groups`.
fn group_of(groups: &[u32], name: &str) -> u32 {
    let needle = format!("--name\0{name}\0");
    *groups
        .iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .unwrap_or_else(|| panic!("no live process for server {name} among {groups:?}"))
}

/// Nothing of the group is alive: checked once, at once (the caller awaited the close).
fn group_gone_now(pgid: u32) -> bool {
    !crate::stdio::group_signalable(pgid) || crate::stdio::live_group_members(pgid).is_empty()
}

#[test]
fn disconnect_returns_once_the_servers_processes_are_gone_and_unknown_names_are_errors() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("a", &["--spawn-grandchild"]),
            demo("b", &["--ignore-sigterm", "--spawn-grandchild"]),
            demo("c", &[]),
        ])
        .no_cache()
        .stdio_options(switchboard::StdioOptions {
            stdin_close_wait: Duration::from_millis(100),
            sigterm_wait: Duration::from_millis(300),
            ..Default::default()
        })
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected.len(), 3, "{report:?}");
        let groups = sb.live_processes();
        let (a, b, c) = (
            group_of(&groups, "a"),
            group_of(&groups, "b"),
            group_of(&groups, "c"),
        );

        sb.disconnect("a").await.unwrap();
        assert!(
            group_gone_now(a),
            "disconnect returned while a's group lived"
        );
        assert!(!sb.live_processes().contains(&a));
        assert_eq!(sb.status("a"), ServerStatus::Disconnected);
        assert!(sb.tools().iter().all(|t| t.server != "a"));
        // The others are untouched.
        assert!(!group_gone_now(b) && !group_gone_now(c));
        let r = sb.call("mcp_b_echo", json!({"text": "b"})).await.unwrap();
        assert_eq!(r.render_text(), "b");

        // Unknown names (never configured, or already disconnected) are typed errors.
        assert_eq!(
            sb.disconnect("nope").await,
            Err(Error::UnknownServer("nope".into()))
        );
        assert_eq!(
            sb.disconnect("a").await,
            Err(Error::UnknownServer("a".into()))
        );
        assert_eq!(
            sb.refresh_tools("nope").await,
            Err(Error::UnknownServer("nope".into()))
        );

        // `b` ignores SIGTERM: disconnect_all returns only after the SIGKILL reaped it.
        sb.disconnect_all().await.unwrap();
        assert!(
            group_gone_now(b),
            "disconnect_all returned while b's group lived"
        );
        assert!(
            group_gone_now(c),
            "disconnect_all returned while c's group lived"
        );
        assert!(sb.live_processes().is_empty());
        assert!(sb.tools().is_empty());
        sb.shutdown().await;
    });
}

#[test]
fn refresh_tools_returns_once_the_new_list_is_applied() {
    smol::block_on(async {
        // Every tools/list is answered (and computed) 1 s after it arrived; 1.6 s after
        // `initialized` the server adds `late_tool` (and says so, which makes the core re-list
        // too). The first list, answered at about 1 s, lacks it. A re-list asked for after
        // start() returned is answered at 2 s or later, so it has it; an early answer, or the
        // core's own re-list (answered at 2.6 s or later), would come too late for the check.
        let (sb, report) = Builder::servers(vec![
            demo(
                "lc",
                &["--list-changed-after-ms", "1600", "--list-delay-ms", "1000"],
            ),
            demo("failing", &["--fail-init"]),
        ])
        .no_cache()
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["lc"]);
        let has_late = |sb: &switchboard::Switchboard| {
            sb.tools()
                .iter()
                .any(|t| t.qualified_name == "mcp_lc_late_tool")
        };
        assert!(!has_late(&sb), "the first list predates late_tool");
        let events = sb.events();
        sb.refresh_tools("lc").await.unwrap();
        assert!(
            has_late(&sb),
            "refresh_tools returned before the new list was applied"
        );
        // The view changed before the answer: its ToolsChanged is already queued.
        let mut saw = false;
        while let Ok(e) = events.try_recv() {
            saw |= matches!(&e, Ok(Event::ToolsChanged { servers }) if servers == &["lc"]);
        }
        assert!(saw);
        // Again, with no re-list under way: answered after one more list.
        sb.refresh_tools("lc").await.unwrap();
        assert!(has_late(&sb));
        // A server that failed to start is known but not connected.
        let err = sb.refresh_tools("failing").await.unwrap_err();
        assert!(
            matches!(&err, Error::NotConnected { server, reason: Some(reason) } if server == "failing" && reason.kind == ServerErrorKind::InitializeFailed),
            "{err:?}"
        );
        sb.shutdown().await;
    });
}

#[test]
fn max_frame_len_limits_every_transport_whatever_the_setter_order() {
    smol::block_on(async {
        // 200 generated tools make a tools/list answer far above 4 KiB; `initialize` fits.
        let (sb, report) =
            Builder::servers(vec![demo("big", &["--tools", "200"]), demo("small", &[])])
                .no_cache()
                .max_frame_len(4096)
                // Set after the limit: it does not undo it.
                .stdio_options(switchboard::StdioOptions::default())
                .start()
                .await
                .unwrap();
        let err = report.errors.get("big").unwrap();
        assert_eq!(err.kind, ServerErrorKind::TransportFailed, "{report:?}");
        assert!(err.message.contains("4 KiB"), "{report:?}");
        assert_eq!(report.connected, ["small"]);
        sb.shutdown().await;
    });
}

#[test]
fn reload_after_sync_connects_the_synced_set() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![demo("a", &[]), demo("b", &[])])
            .no_cache()
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, ["a", "b"]);
        // The sync started `c`: it returns with that round's report.
        let synced = sb.sync(vec![demo("a", &[]), demo("c", &[])]).await.unwrap();
        let synced = synced.expect("a sync that starts a server reports its round");
        assert_eq!(synced.connected, ["c"], "{synced:?}");
        assert_eq!(sb.status("c"), ServerStatus::Connected);
        // The same set again starts nothing: no round, no report.
        let again = sb.sync(vec![demo("a", &[]), demo("c", &[])]).await.unwrap();
        assert!(again.is_none(), "{again:?}");
        let report = sb.reload().await.unwrap();
        assert_eq!(report.connected, ["a", "c"], "{report:?}");
        assert_eq!(sb.server_state("b"), None);
        sb.shutdown().await;
    });
}

#[test]
fn a_server_flooding_stdout_with_non_mcp_lines_fails_and_the_others_keep_working() {
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![
            demo("good", &[]),
            demo("noisy", &["--garbage-lines", "150"]),
        ])
        .no_cache()
        .manager_options(|o| o.reconnect = ReconnectPolicy::never())
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["good"]);
        let err = report.errors.get("noisy").unwrap();
        assert!(
            err.message
                .contains("server writes non-MCP output to stdout"),
            "{report:?}"
        );
        assert_eq!(sb.status("noisy"), ServerStatus::Disconnected);
        assert!(!sb
            .tools()
            .iter()
            .any(|t| t.qualified_name.starts_with("mcp_noisy_")));
        let r = sb
            .call("mcp_good_echo", json!({"text": "unaffected"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "unaffected");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
}
