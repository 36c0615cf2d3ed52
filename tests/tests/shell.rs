//! The smol shell against real `mcp-demo-server` processes: the startup gate with a warm and a
//! cold cache, deferred calls, per-server isolation of every fault, and no orphan processes.

use crate::stdio::assert_group_gone;
use crate::support::demo_server_bin;
use serde_json::json;
use std::time::{Duration, Instant};
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::core::manager::ReconnectPolicy;
use switchboard::{Builder, Error, Event, ServerStatus};

fn demo(name: &str, args: &[&str]) -> ServerSpec {
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
async fn wait_for(rx: &async_channel::Receiver<Event>, f: impl Fn(&Event) -> bool) -> Event {
    let deadline = async {
        async_io::Timer::after(Duration::from_secs(20)).await;
        None
    };
    let next = async {
        loop {
            match rx.recv().await {
                Ok(e) if f(&e) => return Some(e),
                Ok(_) => continue,
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
        // Cold: the slow server has no cache entry, so startup waits for it. Its delay is far
        // above the warm run's bounds below, so those prove startup did not wait for it even
        // on a loaded machine.
        let slow = demo("slow", &["--init-delay-ms", "4000"]);
        let (sb, report) = Builder::servers(vec![demo("fast", &[]), slow.clone()])
            .cache_dir(cache.path())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["fast", "slow"]);
        assert!(report.deferred.is_empty());
        assert!(
            report.elapsed >= Duration::from_millis(3900),
            "{:?}",
            report.elapsed
        );
        sb.shutdown().await;

        // Warm: the slow server's tools come from the cache, deferred, at the gate.
        let started = Instant::now();
        let (sb, report) = Builder::servers(vec![demo("fast", &[]), slow])
            .cache_dir(cache.path())
            .start()
            .await
            .unwrap();
        let gate_wall = started.elapsed();
        let events = sb.events();
        assert_eq!(report.deferred, vec!["slow"]);
        // The core's clock is the real one: the gate opens at 250 ms plus scheduling noise.
        assert!(
            report.elapsed >= Duration::from_millis(250),
            "{:?}",
            report.elapsed
        );
        assert!(
            report.elapsed < Duration::from_millis(3000),
            "{:?}",
            report.elapsed
        );
        assert!(
            gate_wall < Duration::from_millis(3500),
            "returned at the gate, took {gate_wall:?}"
        );
        let echo = report
            .tools
            .iter()
            .find(|t| t.qualified_name == "mcp_slow_echo")
            .expect("cached echo tool");
        assert!(echo.deferred);
        // A deferred call made before the server is ready waits, then succeeds.
        let r = sb
            .call("mcp_slow_echo", json!({"text": "waited"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "waited");
        assert_eq!(sb.status("slow"), ServerStatus::Connected);
        assert!(sb.tools().iter().all(|t| !t.deferred));
        drop(events);
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
            with_timeout(demo("hangs", &["--hang-init"]), 800),
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
        let err = |n: &str| report.errors.get(n).cloned().unwrap_or_default();
        assert_eq!(err("hangs"), "connect timed out after 800 ms");
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
        // The seed's behaviour (no reconnect), to see the crash itself.
        .manager_options(|o| o.reconnect = ReconnectPolicy::never())
        .start()
        .await
        .unwrap();
        let err = sb
            .call("mcp_crashy_sleep", json!({"ms": 5000}))
            .await
            .unwrap_err();
        let Error::Call(msg) = err else {
            panic!("expected a call error")
        };
        assert!(msg.contains("connection closed"), "{msg}");
        assert_eq!(sb.status("crashy"), ServerStatus::Disconnected);
        let state = sb.server_state("crashy").unwrap();
        assert!(
            state.last_error.unwrap().contains("exit"),
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

#[test]
fn dropping_a_call_future_cancels_it_and_the_server_keeps_serving() {
    smol::block_on(async {
        let (sb, _) = Builder::servers(vec![demo("a", &[])])
            .no_cache()
            .start()
            .await
            .unwrap();
        let slow = sb.call("mcp_a_sleep", json!({"ms": 60000}));
        let timeout = async {
            async_io::Timer::after(Duration::from_millis(200)).await;
        };
        futures_lite::future::or(
            async {
                drop(slow.await);
            },
            timeout,
        )
        .await;
        let r = sb
            .call("mcp_a_echo", json!({"text": "after"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after");
        let err = sb
            .call_with_timeout(
                "mcp_a_sleep",
                json!({"ms": 60000}),
                Some(Duration::from_millis(100)),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err,
            Error::Call("MCP error: tool call timed out after 100 ms".into())
        );
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
        .stdio_options(switchboard::stdio::StdioOptions {
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
            .stdio_options(switchboard::stdio::StdioOptions {
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
            matches!(e, Event::Diagnostic { message, .. } if message.contains("pings in a row went unanswered"))
        })
        .await;
        assert!(matches!(lost, Event::Diagnostic { server: Some(ref s), .. } if s == "stally"));
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
