//! Shared helpers for the tests.
#![allow(dead_code)]

/// Run `f` with insta configured to keep snapshots in the top-level `snapshots/` folder.
pub fn with_snapshots<R>(f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(f)
}

// ---------------------------------------------------------------------------------------------
// mcp-demo-server: our standalone stdio MCP peer, driven line by line.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long a test waits for an answer that should come.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The `mcp-demo-server` binary next to this test binary (`target/<profile>/deps/all-*` →
/// `target/<profile>/mcp-demo-server`). `cargo test --workspace` builds it (the CLI package's
/// own integration test asks for it); a narrower `cargo test -p switchboard-tests` does not.
pub fn demo_server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("mcp-demo-server{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p switchboard-cli --bins` (or `cargo test --workspace`) first",
        bin.display()
    );
    bin
}

/// The `switchboard` binary next to this test binary, like [`demo_server_bin`]. A narrow
/// `cargo test -p switchboard-tests` does not build it: run `cargo build -p switchboard-cli --bins`.
pub fn switchboard_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("switchboard{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p switchboard-cli --bins` (or `cargo test --workspace`) first",
        bin.display()
    );
    bin
}

/// The library's example `name` (`target/<profile>/examples/<name>`), like [`demo_server_bin`].
/// `cargo test --workspace` builds every example; a narrow `cargo test -p switchboard-tests`
/// does not: run `cargo build -p switchboard --examples`.
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let bin = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p switchboard --examples` (or `cargo test --workspace`) first",
        bin.display()
    );
    bin
}

/// The repository root (for `tests/peers`, `scripts/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A running `mcp-demo-server` in its own process group. Dropping it kills the whole group
/// (SIGKILL) and reaps the child, so no test leaves a process behind, grandchildren included.
pub struct DemoServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// Messages read while waiting for something else (notifications, other responses).
    pub backlog: VecDeque<Value>,
    /// Non-JSON lines seen on stdout.
    pub garbage: Vec<String>,
    next_id: u64,
}

impl DemoServer {
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_program(&demo_server_bin(), args, &[])
    }

    /// Any line-oriented JSON-RPC process (`switchboard serve`, say), driven the same way,
    /// with these environment variables set.
    pub fn spawn_program(program: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn mcp-demo-server");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&line).trim_end().to_string();
                        if tx.send(text).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        DemoServer {
            child,
            stdin,
            lines,
            stderr,
            backlog: VecDeque::new(),
            garbage: Vec::new(),
            next_id: 1,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line.as_bytes()).expect("write to server");
        stdin.write_all(b"\n").expect("write to server");
        stdin.flush().expect("flush to server");
    }

    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request without waiting; returns its id.
    pub fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next raw stdout line, or `None` if none came within `timeout` (or stdout closed).
    pub fn next_line(&mut self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next JSON message from stdout (non-JSON lines go to `garbage`).
    pub fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.next_line(left)?;
            match serde_json::from_str(&line) {
                Ok(value) => return Some(value),
                Err(_) => self.garbage.push(line),
            }
        }
    }

    /// Wait for the message that `matches`; others go to the backlog. `None` on timeout.
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        if let Some(pos) = self.backlog.iter().position(&matches) {
            return self.backlog.remove(pos);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.next_message(left)?;
            if matches(&message) {
                return Some(message);
            }
            self.backlog.push_back(message);
        }
    }

    /// The response to request `id`, within `timeout`.
    pub fn response(&mut self, id: u64, timeout: Duration) -> Option<Value> {
        self.wait_for(timeout, |m| {
            m.get("id") == Some(&json!(id)) && m.get("method").is_none()
        })
    }

    /// Send a request and wait for its response (panics if none comes).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        self.response(id, ANSWER_TIMEOUT).unwrap_or_else(|| {
            panic!(
                "no response to {method} (id {id}); stderr:\n{}",
                self.stderr()
            )
        })
    }

    /// `initialize` (returns its response) followed by `notifications/initialized`.
    pub fn initialize(&mut self) -> Value {
        let response = self.request("initialize", initialize_params("2025-11-25"));
        assert!(
            response.get("result").is_some(),
            "initialize failed: {response}"
        );
        self.notify("notifications/initialized", json!({}));
        response
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The exit status if the process exits within `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until stderr contains `needle` (the reader thread may lag); returns all of stderr.
    pub fn wait_stderr(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let stderr = self.stderr();
            if stderr.contains(needle) || Instant::now() >= deadline {
                return stderr;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Send `signal` to the server process only (not its group).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        self.stdin = None;
        // SAFETY: the child leads its own process group (process_group(0)); this kills it
        // and anything it spawned, never the test runner.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `initialize` params as a client sends them.
pub fn initialize_params(protocol_version: &str) -> Value {
    json!({
        "protocolVersion": protocol_version,
        "capabilities": {},
        "clientInfo": {"name": "switchboard-tests", "version": "0.0.0"},
    })
}

/// Whether a process with this pid exists (and is not a zombie we could still reap).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    if !exists {
        return false;
    }
    // A zombie still "exists" for kill(2); treat it as dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
