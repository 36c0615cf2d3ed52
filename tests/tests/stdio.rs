//! The stdio transport against real child processes (`sh`, `cat`, `python3`): framing, the
//! garbage and size limits, stderr tails, the close sequence, and process hygiene (no process
//! is ever left behind, grandchildren included).
//!
//! Timing is generous everywhere: the machine is shared and slow, so tests only assert that
//! things happen within a large bound, never how fast.

use bytes::Bytes;
use smol::channel::Receiver;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use switchboard::__test::stdio::{ProcessRegistry, StdioCommand, StdioEvent, StdioTransport};
use switchboard::StdioOptions;

/// Upper bound for anything that "eventually" happens.
const EVENTUALLY: Duration = Duration::from_secs(30);

type Events = Receiver<((), StdioEvent)>;

fn sh(script: &str) -> StdioCommand {
    StdioCommand::new("sh", ["-c", script])
}

/// Short close waits so the escalation tests do not take seconds each.
fn quick_opts() -> StdioOptions {
    StdioOptions {
        stdin_close_wait: Duration::from_millis(200),
        sigterm_wait: Duration::from_millis(300),
        ..StdioOptions::default()
    }
}

fn spawn(
    cmd: StdioCommand,
    opts: &StdioOptions,
    registry: &ProcessRegistry,
) -> (StdioTransport, Events) {
    let (tx, rx) = smol::channel::unbounded();
    let transport = StdioTransport::spawn("test-server", cmd, opts, registry, (), tx)
        .expect("spawn should succeed");
    (transport, rx)
}

/// The next event that is not a stderr line.
async fn next_event(rx: &Events) -> StdioEvent {
    loop {
        match next_event_or_line(rx).await {
            StdioEvent::Stderr { .. } => continue,
            event => return event,
        }
    }
}

async fn next_event_or_line(rx: &Events) -> StdioEvent {
    let got = smol::future::or(async { rx.recv().await.ok() }, async {
        smol::Timer::after(EVENTUALLY).await;
        None
    })
    .await;
    got.map(|((), event)| event)
        .expect("an event should arrive (or the channel closed unexpectedly)")
}

/// Frames until the terminal event; returns both.
async fn collect_until_end(rx: &Events) -> (Vec<Bytes>, StdioEvent) {
    let mut frames = Vec::new();
    loop {
        match next_event(rx).await {
            StdioEvent::Frame(frame) => frames.push(frame),
            end => return (frames, end),
        }
    }
}

/// The live (non-zombie) members of process group `pgid`, read from `/proc`. Zombies are not
/// counted: this machine's init does not reap orphans, so a killed grandchild stays a zombie,
/// which `kill(-pgid, 0)` would still report as present.
pub(crate) fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return members;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (state, pgrp) = (fields.first().copied(), fields.get(2).copied());
        if pgrp == Some(pgid.to_string().as_str()) && state != Some("Z") && state != Some("X") {
            members.push(pid);
        }
    }
    members
}

/// `kill(-pgid, 0)`: false once the kernel has no such group (ESRCH).
pub(crate) fn group_signalable(pgid: u32) -> bool {
    let pgid = i32::try_from(pgid).expect("pid fits i32");
    assert!(pgid > 1);
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

pub(crate) fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < EVENTUALLY,
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn assert_group_gone(pgid: u32) {
    wait_until(&format!("process group {pgid} is gone"), || {
        !group_signalable(pgid) || live_group_members(pgid).is_empty()
    });
}

#[test]
fn frames_round_trip_through_cat() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let (transport, rx) = spawn(
            StdioCommand::new("cat", Vec::<String>::new()),
            &StdioOptions::default(),
            &registry,
        );
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
            r#"[{"a":1},{"b":[1,2,3]}]"#,
            r#"{"text":"unicode ✓ and \"escapes\"\n"}"#,
        ];
        for frame in frames {
            transport.send(Bytes::from(frame)).unwrap();
        }
        for frame in frames {
            assert_eq!(next_event(&rx).await, StdioEvent::Frame(Bytes::from(frame)));
        }
        let err = transport.send(Bytes::from("{\n}")).unwrap_err();
        assert!(err.contains("newline"), "{err}");

        let pid = transport.pid();
        assert!(registry.contains(pid));
        transport.close().await;
        assert_eq!(
            next_event(&rx).await,
            StdioEvent::Closed {
                reason: "closed by client".into()
            }
        );
        assert!(registry.is_empty());
        assert_group_gone(pid);
    });
}

#[test]
fn a_line_over_the_limit_fails_the_server_with_a_clear_error() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        // 17 MiB without a newline after one good frame; then the server hangs around.
        let script = "import sys, time\n\
                      sys.stdout.write('{\"ok\":true}\\n')\n\
                      sys.stdout.write('{\"big\":\"' + 'a' * (17 * 1024 * 1024))\n\
                      sys.stdout.flush()\n\
                      time.sleep(1000)\n";
        let (transport, rx) = spawn(
            StdioCommand::new("python3", ["-c", script]),
            &quick_opts(),
            &registry,
        );
        let pid = transport.pid();
        let (frames, end) = collect_until_end(&rx).await;
        assert_eq!(frames, vec![Bytes::from(r#"{"ok":true}"#)]);
        match end {
            StdioEvent::Failed { error } => {
                assert!(error.contains("exceeds the 16 MiB limit"), "{error}")
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        // The transport stopped the server by itself.
        assert_group_gone(pid);
        assert!(registry.is_empty());
        transport.close().await;
    });
}

#[test]
fn small_limits_are_worded_in_their_own_unit() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let opts = StdioOptions {
            max_frame_len: 1024,
            ..quick_opts()
        };
        let script = r#"printf '{"x":"%02000d"}\n' 0; sleep 1000"#;
        let (transport, rx) = spawn(sh(script), &opts, &registry);
        let (frames, end) = collect_until_end(&rx).await;
        assert!(frames.is_empty());
        match end {
            StdioEvent::Failed { error } => {
                assert!(error.contains("exceeds the 1 KiB limit"), "{error}")
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn non_json_lines_are_dropped_and_empty_lines_ignored() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let script = r#"
            echo 'starting up'
            echo ''
            echo '{"a":1}'
            echo '[INFO] ready'
            printf '[1,2]\r\n'
            echo '{"broken": '
            echo '42'
            echo '   {"spaced":true}'
        "#;
        let (transport, rx) = spawn(sh(script), &StdioOptions::default(), &registry);
        let pid = transport.pid();
        let (frames, end) = collect_until_end(&rx).await;
        assert_eq!(
            frames,
            vec![
                Bytes::from(r#"{"a":1}"#),
                Bytes::from("[1,2]"),
                Bytes::from(r#"   {"spaced":true}"#),
            ]
        );
        match end {
            StdioEvent::Closed { reason } => {
                assert!(reason.contains("exited (exit status: 0)"), "{reason}")
            }
            other => panic!("expected Closed, got {other:?}"),
        }
        assert_group_gone(pid);
        assert!(registry.is_empty());
        transport.close().await;
    });
}

#[test]
fn a_hundred_garbage_lines_in_a_row_fail_the_server() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        // 99 garbage lines, a frame (resets the run), then garbage until it fails.
        let script = r#"
            for i in $(seq 1 99); do echo "log line $i"; done
            echo '{"still":"mcp"}'
            for i in $(seq 1 150); do echo "noise $i"; done
            sleep 1000
        "#;
        let (transport, rx) = spawn(sh(script), &quick_opts(), &registry);
        let pid = transport.pid();
        let (frames, end) = collect_until_end(&rx).await;
        assert_eq!(frames, vec![Bytes::from(r#"{"still":"mcp"}"#)]);
        match end {
            StdioEvent::Failed { error } => {
                assert!(
                    error.contains("server writes non-MCP output to stdout"),
                    "{error}"
                );
                assert!(error.contains("noise 100"), "{error}");
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        assert_group_gone(pid);
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn a_server_that_dies_reports_its_stderr_lines_then_its_exit_status() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let script = r#"for i in $(seq 1 30); do echo "err line $i" >&2; done; exit 3"#;
        let (transport, rx) = spawn(sh(script), &StdioOptions::default(), &registry);
        // Every stderr line comes as an event of its own, before the end (the core keeps
        // the tail); the end itself names the exit status only.
        let mut lines = Vec::new();
        let end = loop {
            match next_event_or_line(&rx).await {
                StdioEvent::Stderr { line } => lines.push(line),
                StdioEvent::Frame(f) => panic!("unexpected frame {f:?}"),
                end => break end,
            }
        };
        let StdioEvent::Closed { reason } = end else {
            panic!("expected Closed, got {end:?}");
        };
        assert!(reason.contains("exit status: 3"), "{reason}");
        assert!(!reason.contains("err line"), "{reason}");
        let expected: Vec<String> = (1..=30).map(|i| format!("err line {i}")).collect();
        assert_eq!(lines, expected);
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn a_server_that_closes_stdout_but_keeps_running_is_stopped() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let (transport, rx) = spawn(sh("exec >&-; sleep 1000"), &quick_opts(), &registry);
        let pid = transport.pid();
        let (_, end) = collect_until_end(&rx).await;
        let StdioEvent::Closed { reason } = end else {
            panic!("expected Closed, got {end:?}");
        };
        assert!(
            reason.contains("closed its stdout but kept running"),
            "{reason}"
        );
        assert_group_gone(pid);
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn a_server_that_closes_stdin_but_keeps_running_is_stopped() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        // Its stdout stays open (held by `sleep`) and its main process runs on: the write
        // after `ready` breaks, and that is the first thing the transport learns. The writer
        // has ended then; the close sequence must not wait on it a second time.
        let script = r#"exec <&-; echo '{"ready":true}'; exec sleep 1000"#;
        let (transport, rx) = spawn(sh(script), &quick_opts(), &registry);
        let pid = transport.pid();
        match next_event(&rx).await {
            StdioEvent::Frame(frame) => assert_eq!(&frame[..], br#"{"ready":true}"#),
            other => panic!("expected the ready frame, got {other:?}"),
        }
        transport
            .send(Bytes::from_static(
                br#"{"jsonrpc":"2.0","method":"ping","id":1}"#,
            ))
            .expect("the first frame is queued");
        let (_, end) = collect_until_end(&rx).await;
        let StdioEvent::Failed { error } = end else {
            panic!("expected Failed, got {end:?}");
        };
        assert!(
            error.contains("closed its stdin but kept running"),
            "{error}"
        );
        assert!(transport.is_closed());
        assert_group_gone(pid);
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn close_of_a_well_behaved_server_does_not_need_signals() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        // If close had to wait out stdin_close_wait and escalate, it would take two minutes;
        // a server that exits on stdin EOF must be done long before.
        let opts = StdioOptions {
            stdin_close_wait: Duration::from_secs(60),
            sigterm_wait: Duration::from_secs(60),
            ..StdioOptions::default()
        };
        let (transport, _rx) = spawn(
            StdioCommand::new("cat", Vec::<String>::new()),
            &opts,
            &registry,
        );
        let pid = transport.pid();
        let start = Instant::now();
        transport.close().await;
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "close waited for the stdin-close timeout"
        );
        assert!(registry.is_empty());
        assert_group_gone(pid);
    });
}

/// Starts a server that ignores SIGTERM and has a grandchild, and waits until all of its group
/// is running.
fn spawn_stubborn(registry: &ProcessRegistry) -> (StdioTransport, Events) {
    let (transport, rx) = spawn(
        sh(r#"trap "" TERM; sleep 1000 & sleep 1000"#),
        &quick_opts(),
        registry,
    );
    let pid = transport.pid();
    wait_until("the stubborn server's group has its grandchildren", || {
        live_group_members(pid).len() >= 2
    });
    (transport, rx)
}

#[test]
fn close_kills_a_term_ignoring_server_and_its_grandchildren() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let (transport, _rx) = spawn_stubborn(&registry);
        let pid = transport.pid();
        transport.close().await;
        assert!(registry.is_empty());
        assert_group_gone(pid);
        assert!(live_group_members(pid).is_empty());
    });
}

#[test]
fn dropping_a_transport_without_close_kills_its_group() {
    let registry = ProcessRegistry::new();
    let (transport, rx) = smol::block_on(async { spawn_stubborn(&registry) });
    let pid = transport.pid();
    // Outside any executor: Drop must not need one.
    drop(transport);
    assert!(registry.is_empty(), "drop unregisters the group");
    assert_group_gone(pid);
    drop(rx);
}

#[test]
fn kill_all_now_kills_every_group_without_a_runtime() {
    let registry = ProcessRegistry::new();
    let (a, _rx_a) = smol::block_on(async { spawn_stubborn(&registry) });
    let (b, _rx_b) = smol::block_on(async { spawn_stubborn(&registry) });
    let pids = [a.pid(), b.pid()];
    assert_eq!(registry.len(), 2);
    assert_eq!(registry.kill_all_now(), 2);
    assert!(registry.is_empty());
    for pid in pids {
        assert_group_gone(pid);
    }
    // Already killed: dropping the handles does not signal again.
    drop(a);
    drop(b);
}

#[test]
fn spawn_of_a_missing_command_is_a_clear_error() {
    let registry = ProcessRegistry::new();
    let (tx, _rx) = smol::channel::unbounded::<((), StdioEvent)>();
    let err = StdioTransport::spawn(
        "ghost",
        StdioCommand::new("switchboard-no-such-command-xyz", ["--stdio"]),
        &StdioOptions::default(),
        &registry,
        (),
        tx.clone(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        "cannot start server \"ghost\": command \"switchboard-no-such-command-xyz\" not found"
    );

    let mut cmd = StdioCommand::new("cat", Vec::<String>::new());
    cmd.cwd = Some("/no/such/dir/for/switchboard".into());
    let err = StdioTransport::spawn("ghost", cmd, &StdioOptions::default(), &registry, (), tx)
        .unwrap_err();
    assert!(err.contains("working directory \"/no/such/dir/for/switchboard\" does not exist"));
    assert!(registry.is_empty());
}

#[test]
fn env_is_added_to_the_parents_and_cwd_falls_back_to_the_default() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let dir = tempfile::tempdir().unwrap();
        let dir_path = dir.path().canonicalize().unwrap();
        let opts = StdioOptions {
            default_cwd: Some(dir_path.clone()),
            ..StdioOptions::default()
        };
        let mut cmd = sh(
            r#"printf '{"cwd":"%s","foo":"%s","path_set":%s}\n' "$(pwd -P)" "$FOO" "$([ -n "$PATH" ] && echo true || echo false)""#,
        );
        cmd.env = BTreeMap::from([("FOO".to_string(), "bar baz".to_string())]);
        let (transport, rx) = spawn(cmd, &opts, &registry);
        let (frames, _) = collect_until_end(&rx).await;
        let got: serde_json::Value = serde_json::from_slice(&frames[0]).unwrap();
        assert_eq!(
            got,
            serde_json::json!({
                "cwd": dir_path.to_str().unwrap(),
                "foo": "bar baz",
                "path_set": true,
            })
        );
        transport.close().await;
        assert!(registry.is_empty());
    });
}

#[test]
fn close_never_waits_on_a_full_events_channel() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        // Room for one event, never drained. First case: the reader is stuck behind the first
        // frame when close is called.
        let (tx, rx) = smol::channel::bounded(1);
        let script = r#"echo '{"a":1}'; echo '{"b":2}'; sleep 1000"#;
        let transport =
            StdioTransport::spawn("full", sh(script), &quick_opts(), &registry, (), tx).unwrap();
        let pid = transport.pid();
        wait_until("the channel is full", || rx.is_full());
        transport.close().await;
        assert!(registry.is_empty());
        assert_group_gone(pid);
        drop(rx);

        // Second case: the server already exited and its terminal event is stuck behind the
        // frame; close must still return.
        let (tx, rx) = smol::channel::bounded(1);
        let transport = StdioTransport::spawn(
            "full",
            sh(r#"echo '{"a":1}'; exit 0"#),
            &quick_opts(),
            &registry,
            (),
            tx,
        )
        .unwrap();
        wait_until("the server is gone and unregistered", || {
            registry.is_empty()
        });
        assert!(rx.is_full());
        transport.close().await;
        drop(rx);
    });
}

#[test]
fn many_small_frames_arrive_in_order() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let script = "import sys\n\
                      for i in range(20000):\n    sys.stdout.write('{\"i\":%d}\\n' % i)\n";
        let (transport, rx) = spawn(
            StdioCommand::new("python3", ["-c", script]),
            &StdioOptions::default(),
            &registry,
        );
        let (frames, end) = collect_until_end(&rx).await;
        assert_eq!(frames.len(), 20000);
        for (i, frame) in frames.iter().enumerate() {
            assert_eq!(frame, &Bytes::from(format!("{{\"i\":{i}}}")));
        }
        assert!(matches!(end, StdioEvent::Closed { .. }), "{end:?}");
        transport.close().await;
        assert!(registry.is_empty());
    });
}
