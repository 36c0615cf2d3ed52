//! No process outlives the `switchboard` command line: not a server's grandchild that left
//! its process group with `setsid` (the CLI adopts orphans and ends them), and not a server
//! that ignores stdin EOF and SIGTERM when the CLI itself is killed with SIGKILL (children
//! die with their parent). Each server here is a shell script that records the pids to check
//! and then runs `mcp-demo-server`.

use crate::support::{demo_server_bin, process_alive, switchboard_bin};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen (a file to appear, a process to go).
const WAIT: Duration = Duration::from_secs(20);

/// A project whose one server `hostile` runs `script` (sh) before `exec`-ing the demo server;
/// `$PIDS` in the script is a directory for the pid files it writes.
fn project(dir: &Path, script: &str) {
    let pids = dir.join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let body = format!(
        "export PIDS='{}'\nDEMO='{}'\n{script}\n",
        pids.display(),
        demo_server_bin().display()
    );
    std::fs::write(dir.join("server.sh"), body).unwrap();
    let config = json!({"mcpServers": {"hostile": {
        "command": "sh",
        "args": [dir.join("server.sh").to_string_lossy()],
    }}});
    std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
}

fn switchboard(dir: &Path) -> Command {
    let mut cmd = Command::new(switchboard_bin());
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    cmd.current_dir(dir)
        .env_remove("RUST_LOG")
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"))
        .args(["--no-project-config", "--no-cache", "--config"])
        .arg(dir.join("mcp.json"));
    cmd
}

/// The pid a script wrote to `$PIDS/<name>`, once it is there.
fn recorded_pid(dir: &Path, name: &str) -> i32 {
    let path = dir.join("pids").join(name);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} was never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_gone(pid: i32, what: &str) {
    let deadline = Instant::now() + WAIT;
    while process_alive(pid) {
        if Instant::now() > deadline {
            // Never leave it behind for the next test.
            // SAFETY: signalling a pid this test's script recorded.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} (pid {pid}) outlived switchboard");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_grandchild_that_left_the_process_group_is_ended_with_its_server() {
    let dir = tempfile::tempdir().unwrap();
    // The grandchild starts a session of its own, so closing the server's process group does
    // not reach it; it would sleep on for five minutes. The server waits for its pid to be
    // recorded, so nothing can end it before the test knows it.
    project(
        dir.path(),
        "setsid sh -c 'echo $$ > \"$PIDS/escaped\"; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         while [ ! -s \"$PIDS/escaped\" ]; do sleep 0.05; done\n\
         exec \"$DEMO\" --name hostile",
    );
    let out = switchboard(dir.path())
        .args(["tools", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let escaped = recorded_pid(dir.path(), "escaped");
    // The CLI ended it before exiting (it adopts orphans): gone now, not eventually.
    assert!(
        !process_alive(escaped),
        "the setsid grandchild {escaped} outlived `switchboard tools`"
    );
}

#[test]
fn watch_counts_escaped_descendants_and_leaves_none() {
    let dir = tempfile::tempdir().unwrap();
    project(
        dir.path(),
        "setsid sh -c 'echo $$ > \"$PIDS/escaped\"; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         while [ ! -s \"$PIDS/escaped\" ]; do sleep 0.05; done\n\
         exec \"$DEMO\" --name hostile",
    );
    let out = switchboard(dir.path())
        .args(["watch", "--json", "--for-ms", "1500"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stopped = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "stopped")
        .unwrap_or_else(|| panic!("no stopped event in {stdout}"));
    assert_eq!(stopped["processes_left"], 0, "{stopped}");
    let escaped = recorded_pid(dir.path(), "escaped");
    assert!(!process_alive(escaped), "pid {escaped} outlived `watch`");
}

#[test]
fn a_server_that_ignores_eof_and_sigterm_dies_with_a_killed_switchboard() {
    let dir = tempfile::tempdir().unwrap();
    // The leader ignores SIGTERM and outlives its stdin: only its parent's death (SIGKILL,
    // from the kernel) ends it once switchboard is gone.
    project(
        dir.path(),
        "trap '' TERM HUP\n\
         echo $$ > \"$PIDS/leader\"\n\
         \"$DEMO\" --name hostile\n\
         while :; do sleep 1; done",
    );
    let mut watch = switchboard(dir.path())
        .args(["watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the server is connected, so the leader is surely running under watch.
    let stdout = watch.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let connected = lines.by_ref().map_while(Result::ok).any(|l| {
        serde_json::from_str::<serde_json::Value>(&l)
            .is_ok_and(|v| v["event"] == "startup_complete" || v["event"] == "status_changed")
    });
    assert!(connected, "watch ended before the server connected");
    let leader = recorded_pid(dir.path(), "leader");
    assert!(process_alive(leader));
    watch.kill().unwrap(); // SIGKILL: no close sequence runs
    watch.wait().unwrap();
    wait_gone(leader, "a server that ignores EOF and SIGTERM");
}

#[test]
fn a_server_whose_main_process_exits_is_closed_even_while_a_child_holds_its_pipes() {
    use switchboard::core::config::{ServerConfig, ServerSpec};
    use switchboard::core::manager::ReconnectPolicy;
    use switchboard::{Builder, Event, ServerStatus};
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("holder");
    // `sleep` inherits the server's stdout and stderr and holds them for five minutes after
    // the server (the exec'd demo server) crashes: no EOF comes.
    let script = format!(
        "sleep 300 & echo $! > '{}'; exec '{}' --name holder --crash-after-list-ms 200",
        pid_file.display(),
        demo_server_bin().display()
    );
    let spec = ServerSpec::new("holder", ServerConfig::stdio("sh", &["-c", &script]));
    smol::block_on(async {
        let (sb, report) = Builder::servers(vec![spec])
            .no_cache()
            .manager_options(|o| o.reconnect = ReconnectPolicy::never())
            .start()
            .await
            .unwrap();
        assert_eq!(report.connected, vec!["holder"]);
        let events = sb.events();
        crate::shell::wait_for(&events, |e| {
            matches!(e, Event::StatusChanged { server, status: ServerStatus::Disconnected } if server == "holder")
        })
        .await;
        let error = sb.server_state("holder").unwrap().last_error.unwrap();
        assert!(
            error
                .message
                .contains("server process exited (exit status: 1)")
                && error.message.contains("kept its pipes open"),
            "{error}"
        );
        let holder: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The close sequence ended the server's whole group, the pipe holder with it.
        assert!(
            !process_alive(holder),
            "the pipe holder {holder} is still running"
        );
        sb.shutdown().await;
    });
}

/// `watch` on a stdout nobody reads (a paused pager) while a server floods log messages: the
/// output waits on a thread of its own, so the deadline and the signals still end the watch,
/// its servers are shut down (the one here ignores SIGTERM, so it takes the SIGKILL), and its
/// memory stays bounded (the events lag instead of piling up).
fn watch_with_an_unread_stdout(extra: &[&str]) -> (std::process::Child, i32, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script = crate::support::repo_root().join("tests/scripts/log_flood.py");
    let pid_file = dir.path().join("pids").join("flood");
    std::fs::create_dir_all(dir.path().join("pids")).unwrap();
    let config = json!({"mcpServers": {"flood": {
        "command": "python3",
        "args": [script.to_string_lossy(), pid_file.to_string_lossy(), "--ignore-sigterm"],
    }}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let child = switchboard(dir.path())
        .args(["watch", "--json"])
        .args(extra)
        // Piped and never read: once the pipe's buffer is full, every write blocks.
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = recorded_pid(dir.path(), "flood");
    (child, server, dir)
}

/// Waits for `child` to exit, for at most [`WAIT`]; kills it (and fails) past that.
fn exit_within_wait(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: watch did not exit while its stdout was not read");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_for_ms_ends_even_when_nobody_reads_its_output() {
    let (mut watch, server, _dir) = watch_with_an_unread_stdout(&["--for-ms", "1500"]);
    let status = exit_within_wait(&mut watch, "--for-ms");
    assert!(status.success(), "{status:?}");
    wait_gone(server, "a flooding server that ignores SIGTERM");
}

#[test]
fn watch_ends_on_sigterm_even_when_nobody_reads_its_output() {
    let (mut watch, server, _dir) = watch_with_an_unread_stdout(&[]);
    // Give the flood time to fill the pipe, so the writer is surely blocked.
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(watch.id() as i32, libc::SIGTERM) };
    let status = exit_within_wait(&mut watch, "SIGTERM");
    assert_eq!(status.code(), Some(143), "{status:?}");
    wait_gone(server, "a flooding server that ignores SIGTERM");
}

#[test]
fn a_server_s_grandchild_in_its_group_dies_with_a_killed_switchboard() {
    let dir = tempfile::tempdir().unwrap();
    // The grandchild ignores SIGTERM and stays in the server's process group: the parent-death
    // signal reaches only the server itself; the process-group keeper reaches the rest.
    project(
        dir.path(),
        "sh -c 'trap \"\" TERM HUP; echo $$ > \"$PIDS/grandchild\"; exec sleep 300' &\n\
         exec \"$DEMO\" --name hostile",
    );
    let mut watch = switchboard(dir.path())
        .args(["watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let connected = lines.by_ref().map_while(Result::ok).any(|l| {
        serde_json::from_str::<serde_json::Value>(&l)
            .is_ok_and(|v| v["event"] == "startup_complete" || v["event"] == "status_changed")
    });
    assert!(connected, "watch ended before the server connected");
    let grandchild = recorded_pid(dir.path(), "grandchild");
    assert!(process_alive(grandchild));
    watch.kill().unwrap(); // SIGKILL: no close sequence runs
    watch.wait().unwrap();
    wait_gone(grandchild, "a server's grandchild");
}
