//! The adversarial corpus, the cases no other module covers: a server that crashes with
//! calls in flight, a server that floods requests while never reading its stdin, secret
//! commands that print without end, leave a child holding their stdout, or start a process
//! that leaves their session. Each test asserts the bound or the error (by its typed kind
//! where the library has one, by the CLI's words where it is the CLI) and that no process
//! is left (by the pids the scripts record and the process groups). Never by timing. The
//! map from each attack to its test is the table "Under attack" in `ARCHITECTURE.md`.

use crate::support::{demo_server_bin, process_alive, repo_root, switchboard_bin};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use switchboard::__test::secrets::{resolve_secrets, SecretCache};
use switchboard::__test::stdio::ProcessRegistry;
use switchboard::core::config::{ServerConfig, ServerSpec};
use switchboard::core::manager::ReconnectPolicy;
use switchboard::{Builder, CallError, Error, ServerErrorKind, TransportConfig};

/// How long a test waits for something that should happen (a pid file, a process to go).
const WAIT: Duration = Duration::from_secs(20);

fn script(name: &str) -> String {
    repo_root()
        .join("tests/scripts")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The pid a script wrote to `path`, once it is there.
fn recorded_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `pid` to be gone; kills it and fails past [`WAIT`].
fn assert_gone(pid: i32, what: &str) {
    let deadline = Instant::now() + WAIT;
    while process_alive(pid) {
        if Instant::now() > deadline {
            // SAFETY: signalling a pid this test's script recorded.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} (pid {pid}) was left running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `switchboard` with a private home, no project config and no cache, reading `config`.
fn switchboard(dir: &Path, config: serde_json::Value, args: &[&str]) -> Output {
    std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new(switchboard_bin())
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"))
        .args(["--no-project-config", "--no-cache", "--config"])
        .arg(dir.join("mcp.json"))
        .args(args)
        .output()
        .unwrap()
}

// --- A server that dies with calls in flight -------------------------------------------------

/// Calls in flight when the server crashes.
const IN_FLIGHT: usize = 2000;

#[test]
fn every_call_in_flight_when_its_server_crashes_carries_the_exit_status_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // It crashes at the first call it reads, while the calls are still being made: some are
    // written before it dies, some while its close sequence runs (they must wait for it and
    // carry its end too, not a bare "transport is closed"), some after.
    let spec = ServerSpec::new(
        "crash",
        ServerConfig::stdio(
            "python3",
            &[
                script("crash_with_calls.py").as_str(),
                "1",
                pid_file.to_string_lossy().as_ref(),
            ],
        ),
    );
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            // Every call reaches the driver at once (none waits to be queued).
            .queue_options(switchboard::QueueOptions {
                requests: 2 * IN_FLIGHT,
                ..Default::default()
            })
            .manager_options(|o| o.reconnect = ReconnectPolicy::never())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["crash"], "{report:?}");
        let padding = "x".repeat(512);
        let mut calls = Vec::new();
        for i in 0..IN_FLIGHT {
            let args = json!({ "n": i, "padding": padding });
            calls.push(sb.call_with("mcp_crash_hold", args, Default::default()));
            if i % 16 == 0 {
                // Spread the calls over the crash (sequencing only: asserted on outcomes).
                smol::Timer::after(Duration::from_micros(200)).await;
            }
        }
        let (mut crashed, mut after) = (0, 0);
        for (i, call) in calls.into_iter().enumerate() {
            match call.await {
                // Made after the crash was known: the tool was gone by then.
                Err(Error::Call(CallError::WithdrawnTool { server, .. })) if server == "crash" => {
                    after += 1;
                }
                Err(Error::Call(CallError::Transport(e))) => {
                    crashed += 1;
                    assert_eq!(e.kind, ServerErrorKind::Closed, "call {i}: {e}");
                    assert!(
                        e.message.contains("server process exited (exit status: 3)"),
                        "call {i}: {e}"
                    );
                    let tail = e.stderr_tail.as_deref().unwrap_or_default();
                    assert!(
                        tail.contains("fatal: the index is corrupt"),
                        "call {i}: no stderr tail in {e:?}"
                    );
                }
                other => panic!("call {i}: expected the crash, got {other:?}"),
            }
        }
        println!("{crashed} calls failed with the crash, {after} were made after it");
        assert!(crashed > 0, "no call saw the crash");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
    assert_gone(recorded_pid(&pid_file), "the crashed server");
}

#[test]
fn the_cli_shows_the_exit_status_and_stderr_of_a_server_that_died_during_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"crash": {
        "command": "python3", "args": [script("crash_with_calls.py"), "1"]}}});
    let out = switchboard(dir.path(), config, &["call", "mcp_crash_hold", "{}"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("exit status: 3") && stderr.contains("fatal: the index is corrupt"),
        "{stderr}"
    );
}

// --- A server that floods requests and never reads its stdin ---------------------------------

#[test]
fn a_server_flooding_requests_without_reading_its_stdin_fails_alone_at_the_write_bound() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let flood = ServerSpec::new(
        "flood",
        ServerConfig::stdio(
            "python3",
            &[
                script("request_flood.py").as_str(),
                pid_file.to_string_lossy().as_ref(),
            ],
        ),
    );
    let bin = demo_server_bin();
    let calm = ServerSpec::new(
        "calm",
        ServerConfig::stdio(bin.to_string_lossy(), &["--name", "calm"]),
    );
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![flood, calm])
            .no_cache()
            .stdio_options(switchboard::StdioOptions {
                max_write_queue: 1024 * 1024,
                ..Default::default()
            })
            .manager_options(|o| o.reconnect = ReconnectPolicy::never())
            .start()
            .await
            .unwrap();
        assert!(report.connected.contains(&"calm".to_string()), "{report:?}");
        let events = sb.events();
        // The flood fails the server once our answers fill its pipe and the write queue.
        let deadline = Instant::now() + WAIT;
        let error = loop {
            if let Some(e) = sb.server_state("flood").and_then(|s| s.last_error) {
                break e;
            }
            assert!(
                Instant::now() < deadline,
                "the flooding server never failed"
            );
            smol::Timer::after(Duration::from_millis(20)).await;
        };
        assert_eq!(error.kind, ServerErrorKind::TransportFailed, "{error}");
        assert!(
            error.message.contains("it is not reading its stdin")
                && error.message.contains("the limit is 1 MiB"),
            "{error}"
        );
        drop(events);
        // The other server is unaffected.
        let r = sb
            .call("mcp_calm_echo", json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "still here");
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
    assert_gone(recorded_pid(&pid_file), "the flooding server");
}

// --- Secret commands ---------------------------------------------------------------------------

fn stdio_with_env(name: &str, value: &str) -> TransportConfig {
    TransportConfig::Stdio {
        command: "server".into(),
        args: vec![],
        env: [(name.to_string(), value.to_string())].into(),
        cwd: None,
    }
}

#[test]
fn a_secret_command_that_prints_without_end_fails_at_its_output_bound() {
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let cache = SecretCache::new()
            .with_registry(registry.clone())
            // Far longer than reading 64 KiB takes: the bound ends it, not the clock.
            .with_timeout(Duration::from_secs(120));
        let config = stdio_with_env("K", "!cat /dev/zero");
        let err = resolve_secrets("s", config, None, None, &cache)
            .await
            .unwrap_err();
        assert!(
            err.contains(
                "secret command \"cat /dev/zero\" failed: it printed more than 65536 bytes"
            ),
            "{err}"
        );
        assert!(registry.is_empty(), "the command's group was killed");
    });
}

#[test]
fn a_secret_command_is_done_when_it_exits_even_if_a_child_holds_its_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("holder");
    smol::block_on(async {
        let registry = ProcessRegistry::new();
        let cache = SecretCache::new()
            .with_registry(registry.clone())
            // The child holds the pipe for five minutes: waiting for EOF would end in this
            // timeout's error instead of the value.
            .with_timeout(Duration::from_secs(120));
        let command = format!(
            "!sleep 300 & echo $! > '{}'; echo s3cret",
            pid_file.display()
        );
        let config = stdio_with_env("K", &command);
        let resolved = resolve_secrets("s", config, None, None, &cache)
            .await
            .unwrap();
        match resolved {
            TransportConfig::Stdio { env, .. } => assert_eq!(env["K"], "s3cret"),
            other => panic!("{other:?}"),
        }
        assert!(registry.is_empty(), "the command's group was killed");
    });
    assert_gone(recorded_pid(&pid_file), "the secret command's child");
}

#[test]
fn a_secret_command_s_process_that_left_its_session_is_ended_by_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("escaped");
    // The helper starts a process in a session of its own (out of the helper's process
    // group) that would sleep for five minutes, prints its value and exits.
    // It prints its value only once the escaped process has recorded its pid.
    let secret = format!(
        "!setsid sh -c 'echo $$ > \"{f}\"; exec sleep 300' </dev/null >/dev/null 2>&1 & \
         while [ ! -s \"{f}\" ]; do sleep 0.05; done; echo v",
        f = pid_file.display()
    );
    let bin = demo_server_bin();
    let config = json!({"mcpServers": {"s": {
        "command": bin.to_string_lossy(), "args": ["--name", "s"],
        "env": {"TOKEN": secret}}}});
    let out = switchboard(dir.path(), config, &["tools", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let escaped = recorded_pid(&pid_file);
    // The CLI adopts orphans and ends them before it exits: gone now, not eventually.
    assert!(
        !process_alive(escaped),
        "the secret helper's setsid process {escaped} outlived `switchboard tools`"
    );
}

// --- A server that floods log messages while the CLI waits -----------------------------------

/// Peak resident memory the command line may reach while a server floods it: far above what
/// it needs (tens of MiB), far below what an unread, unbounded queue reaches in seconds.
const MAX_RSS_KIB: i64 = 200 * 1024;

/// Runs `switchboard args…` against `log_flood.py --delay 3` (the flood runs while the CLI
/// waits for the list, and for the call); returns (exit code, stdout, peak RSS in KiB). The
/// peak is read by `peak_rss.py`, which spawns the CLI and reads `wait4`'s figure for it: read
/// here, it would start at this test process's own peak (Linux carries the spawner's
/// high-water mark into the new process), which depends on the other tests running in it.
fn under_a_log_flood(args: &[&str]) -> (i32, String, i64) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("flood");
    let config = json!({"mcpServers": {"flood": {"command": "python3",
        "args": [script("log_flood.py"), pid_file.to_string_lossy(), "--delay", "3"]}}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let peak_file = dir.path().join("peak-rss");
    let out = Command::new("python3")
        .arg(script("peak_rss.py"))
        .arg(&peak_file)
        .arg(switchboard_bin())
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env("HOME", &home)
        .args(["--no-project-config", "--no-cache", "--config"])
        .arg(dir.path().join("mcp.json"))
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let peak = std::fs::read_to_string(&peak_file)
        .unwrap_or_else(|e| panic!("{args:?}: no peak memory figure ({e})"));
    assert_gone(recorded_pid(&pid_file), "the flooding server");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (code, stdout, peak.trim().parse().unwrap())
}

#[test]
fn status_tools_and_call_keep_their_memory_bounded_while_a_server_floods_logs() {
    let runs: Vec<_> = [
        &["status"][..],
        &["tools"],
        &["call", "mcp_flood_noop", "{}"],
    ]
    .into_iter()
    .map(|args| std::thread::spawn(move || (args, under_a_log_flood(args))))
    .collect();
    for run in runs {
        let (args, (code, stdout, rss)) = run.join().unwrap();
        println!("{args:?}: peak RSS {rss} KiB");
        assert_eq!(code, 0, "{args:?}: {stdout}");
        assert!(
            stdout.contains("flood") || stdout.contains("done"),
            "{args:?}: {stdout}"
        );
        assert!(rss < MAX_RSS_KIB, "{args:?}: peak RSS {rss} KiB");
    }
}

// --- Protocol warnings the command line shows by default -------------------------------------

#[test]
fn the_cli_warns_by_default_of_frames_without_jsonrpc_and_answers_to_requests_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"broken": {
        "command": "python3", "args": [script("broken_answers.py")]}}});
    for (tool, warning) in [
        (
            "mcp_broken_note_no_jsonrpc",
            "ignored a frame: frame is not a JSON-RPC 2.0 message: missing \"jsonrpc\": \"2.0\"",
        ),
        (
            "mcp_broken_stray_id",
            "ignored a response to request id 987654, which this connection never sent",
        ),
    ] {
        let out = switchboard(dir.path(), config.clone(), &["call", tool, "{}"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{tool}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "fine");
        assert!(
            stderr.contains("WARN") && stderr.contains(warning),
            "{tool}: no warning in {stderr}"
        );
        // What the server logs is not shown without -v.
        assert!(!stderr.contains("hello"), "{stderr}");
    }
}

// --- Unbounded inputs --------------------------------------------------------------------------

#[test]
fn a_tool_list_that_never_ends_fails_that_server_at_the_page_bound() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages");
    let endless = ServerSpec::new(
        "endless",
        ServerConfig::stdio(
            "python3",
            &[
                script("endless_pages.py").as_str(),
                pages.to_string_lossy().as_ref(),
            ],
        ),
    );
    let bin = demo_server_bin();
    let calm = ServerSpec::new(
        "calm",
        ServerConfig::stdio(bin.to_string_lossy(), &["--name", "calm"]),
    );
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![endless, calm])
            .no_cache()
            .manager_options(|o| {
                o.max_tool_pages = 50;
                o.reconnect = ReconnectPolicy::never();
            })
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["calm"], "{report:?}");
        let error = &report.errors["endless"];
        assert_eq!(error.kind, ServerErrorKind::ListFailed, "{error}");
        assert!(error.message.contains("more than 50 pages"), "{error}");
        // None of its tools is offered.
        assert!(sb.tools().iter().all(|t| t.server == "calm"));
        sb.shutdown().await;
        assert!(sb.live_processes().is_empty());
    });
    let read = std::fs::read_to_string(&pages).unwrap().lines().count();
    assert_eq!(read, 50, "pages the client asked for");
}

#[test]
fn a_one_gib_config_and_dev_zero_as_call_arguments_are_refused_at_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // Sparse: a gibibyte of zeros that takes no disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str], stdin: std::process::Stdio| {
        Command::new(switchboard_bin())
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .env("HOME", &home)
            .args(["--no-project-config", "--no-cache"])
            .args(args)
            .stdin(stdin)
            .output()
            .unwrap()
    };
    let out = run(
        &["status", "--config", big.to_str().unwrap()],
        std::process::Stdio::null(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("larger than the 4 MiB a file may have"),
        "{out:?}"
    );
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"mcpServers": {}}"#).unwrap();
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let out = run(
        &["call", "mcp_x_y", "-", "--config", empty.to_str().unwrap()],
        zero.into(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the arguments on stdin are larger than 16 MiB"),
        "{out:?}"
    );
}

// --- Escaped descendants of a server that keeps crashing ---------------------------------------

#[test]
fn setsid_grandchildren_of_a_crashing_server_are_ended_and_watch_counts_none_left() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    // Each attempt leaves a grandchild in a session of its own, then crashes after its list;
    // `watch` reconnects it, so there are several.
    let body = format!(
        "setsid sh -c 'echo $$ > \"{p}/escaped-$$\"; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         while [ -z \"$(ls '{p}')\" ]; do sleep 0.05; done\n\
         exec '{demo}' --name crashy --crash-after-list-ms 300\n",
        p = pids.display(),
        demo = demo_server_bin().display()
    );
    std::fs::write(dir.path().join("server.sh"), body).unwrap();
    let config = json!({"mcpServers": {"crashy": {
        "command": "sh", "args": [dir.path().join("server.sh").to_string_lossy()]}}});
    let out = switchboard(dir.path(), config, &["watch", "--json", "--for-ms", "3000"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stopped = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "stopped")
        .unwrap_or_else(|| panic!("no stopped event in {stdout}"));
    assert_eq!(stopped["processes_left"], 0, "{stopped}");
    let escaped: Vec<i32> = std::fs::read_dir(&pids)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect();
    assert!(!escaped.is_empty());
    for pid in escaped {
        assert!(
            !process_alive(pid),
            "escaped grandchild {pid} outlived `watch`"
        );
    }
}

// --- A log flood inside an HTTP call's SSE answer ----------------------------------------------

#[test]
fn a_log_flood_inside_an_sse_answer_stays_within_each_subscriber_s_bound() {
    use crate::http_edge::{empty, json_reply, mcp_answer, EdgeServer, Reply, Req};
    use std::sync::Arc;
    const PIECES: usize = 100;
    const PER_PIECE: usize = 200;
    let server = EdgeServer::start(Arc::new(|req: &Req| {
        if req.method != "POST" {
            return empty(405);
        }
        let msg = req.json();
        if msg["method"] == "tools/call" {
            // The answer comes last, after 20,000 log messages on the same stream.
            let mut pieces = Vec::new();
            for p in 0..PIECES {
                let mut piece = String::new();
                for i in 0..PER_PIECE {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": format!("line {p}.{i} {}", "x".repeat(100))}});
                    piece.push_str(&format!("event: message\ndata: {note}\n\n"));
                }
                pieces.push(piece.into_bytes());
            }
            let answer = mcp_answer(&msg).unwrap();
            pieces.push(format!("event: message\ndata: {answer}\n\n").into_bytes());
            return Reply::Stream {
                headers: vec![("content-type".into(), "text/event-stream".into())],
                pieces,
                hang: false,
            };
        }
        match mcp_answer(&msg) {
            Some(answer) => json_reply(200, vec![], &answer),
            None => empty(202),
        }
    }));
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![ServerSpec::new(
            "web",
            ServerConfig::http(server.url()),
        )])
        .no_cache()
        .queue_options(switchboard::QueueOptions {
            events: 256,
            ..Default::default()
        })
        .start()
        .await
        .unwrap();
        assert_eq!(report.connected, vec!["web"], "{report:?}");
        // Subscribed and never read while the flood lasts.
        let unread = sb.events();
        let r = sb
            .call("mcp_web_echo", json!({"text": "after the flood"}))
            .await
            .unwrap();
        assert_eq!(r.render_text(), "after the flood");
        assert!(unread.len() <= 256, "{} events held", unread.len());
        let mut missed = 0;
        while let Ok(item) = unread.try_recv() {
            if let Err(switchboard::RecvError::Lagged { missed: n }) = item {
                missed += n;
            }
        }
        assert!(
            missed >= (PIECES * PER_PIECE - 256) as u64,
            "missed {missed}"
        );
        sb.shutdown().await;
    });
}
