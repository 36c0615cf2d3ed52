//! The stdio transport: one MCP server as a child process speaking newline-delimited JSON on
//! its stdin/stdout, with process hygiene that never leaves a process behind.
//!
//! # Shape
//!
//! [`StdioTransport::spawn`] is *synchronous*: it forks/execs the server in its own process
//! group, registers the group in a [`ProcessRegistry`] and starts the tasks that serve it, all
//! before it returns. There is therefore no "spawn in flight" state inside this module: either
//! the caller holds a handle that owns the process group, or nothing was started. The only
//! slow step before a spawn is secret resolution ([`crate::secrets::resolve_secrets`]), which
//! is cancel-safe (dropping it kills any secret command it was running). The recommended
//! driver pattern for `OpenTransport`:
//!
//! ```text
//! let task = smol::spawn(async move {
//!     let config = resolve_secrets(&server, config, auth, provider, &secrets).await?;
//!     let cmd = StdioCommand::from_config(config).ok_or_else(|| "not stdio".to_string())?;
//!     StdioTransport::spawn(&server, cmd, &opts, &registry, conn, events)
//! });
//! // CloseTransport while the attempt is still opening:
//! if let Some(Ok(transport)) = task.cancel().await { transport.close().await }
//! ```
//!
//! `Task::cancel` hands back the transport if the spawn had already finished, so it can be
//! closed gracefully; if the task was still resolving secrets, dropping it stops everything it
//! started. A transport that is dropped anywhere (a cancelled future, a panicking driver)
//! SIGKILLs its process group synchronously in `Drop`.
//!
//! # Events
//!
//! Every transport reports on the caller's channel, tagged with the caller's `tag` (the
//! driver's `ConnId`): zero or more [`StdioEvent::Frame`]s, then exactly one
//! [`StdioEvent::Closed`] or [`StdioEvent::Failed`] — unless the events receiver is gone, or
//! the transport was dropped without `close`. After [`StdioTransport::close`] the terminal event
//! is `Closed { reason: "closed by client" }`, sent with `try_send` so `close` never waits on
//! the events channel (the driver may be the one awaiting `close`).
//!
//! # Framing decisions
//!
//! - A stdout line is a frame when its first non-space byte is `{` or `[` *and* it is valid
//!   JSON (checked with `serde::de::IgnoredAny`, which allocates nothing for the tree). Full
//!   validation costs a second parse, but it keeps log lines such as `[INFO] ready` (which
//!   start with `[`) out of the core and makes the garbage counter honest. Frames are bounded
//!   by `max_frame_len`, so the cost is bounded too.
//! - Anything else non-empty is garbage: logged at warn and dropped; `max_garbage_lines` in a
//!   row fail the server. Empty lines are ignored and do not break a run of garbage.
//! - A line longer than `max_frame_len` fails the server as soon as the limit is crossed; the
//!   reader never holds more than `max_frame_len` plus one read chunk in memory.
//! - A final line without a trailing newline at EOF is still delivered.
//!
//! # Close (MCP spec, "Shutdown" for stdio)
//!
//! Close stdin; wait up to `stdin_close_wait` for the process group to be gone; SIGTERM the
//! group; wait up to `sigterm_wait`; SIGKILL the group; reap. "Gone" means the leader has been
//! reaped *and* no live (non-zombie) member is left in the group, so a grandchild that
//! outlives a well-behaved leader is still terminated. The same sequence runs when a server
//! closes its stdout by itself or is failed by the reader.
//!
//! # Runtime
//!
//! Tasks run on smol's global executor (`smol::spawn`), or, inside a [`crate::Switchboard`]
//! built with [`crate::Builder::executor`], on the embedder's executor; the process reaper is
//! async-process's own. Nothing here needs a runtime for cleanup: `Drop` and [`ProcessRegistry::kill_all_now`]
//! are plain syscalls.

use crate::rt::Spawner;
use async_channel::{Receiver, Sender};
use async_io::{Async, Timer};
use async_process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus, Stdio};
use bytes::Bytes;
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use smol::Task;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use switchboard_core::config::TransportConfig;
use switchboard_core::manager::TransportEvent;

const MIB: usize = 1024 * 1024;
/// How long to wait for the group to disappear after SIGKILL before giving up (logged).
const SIGKILL_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for stderr to reach EOF once the group is gone (a process outside the
/// group may still hold the pipe).
const STDERR_DRAIN_WAIT: Duration = Duration::from_secs(1);
/// Poll interval while waiting for a process group to empty.
const GROUP_POLL: Duration = Duration::from_millis(25);
/// Read chunk size for stdout; also the unit of work between yields. Each live server keeps
/// one, so it is kept small (a larger frame just takes several reads).
const CHUNK: usize = 16 * 1024;
/// Read chunk size for stderr (diagnostics only; lines are cut at `MAX_STDERR_LINE`).
const STDERR_CHUNK: usize = 4 * 1024;
/// Frames the stdout reader delivers before it yields to other tasks.
const FRAMES_PER_TURN: usize = 256;
/// Longest stderr line kept (the rest of the line is dropped).
const MAX_STDERR_LINE: usize = 4096;
/// Longest preview of a garbage stdout line in logs and errors.
const GARBAGE_PREVIEW: usize = 200;

/// Tuning for stdio transports. `Default` gives the values the design asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioOptions {
    /// Longest stdout line accepted as a frame (16 MiB).
    pub max_frame_len: usize,
    /// How long a server may take to exit after its stdin is closed (1 s).
    pub stdin_close_wait: Duration,
    /// How long the process group may take to exit after SIGTERM (2 s).
    pub sigterm_wait: Duration,
    /// How many stderr lines are kept for error reports (20).
    pub stderr_tail_lines: usize,
    /// Working directory when the config sets none (`None`: the parent's).
    pub default_cwd: Option<PathBuf>,
    /// Non-JSON stdout lines in a row that fail the server (100).
    pub max_garbage_lines: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_frame_len: 16 * MIB,
            stdin_close_wait: Duration::from_secs(1),
            sigterm_wait: Duration::from_secs(2),
            stderr_tail_lines: 20,
            default_cwd: None,
            max_garbage_lines: 100,
        }
    }
}

/// What a stdio transport reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioEvent {
    /// One JSON line from the server's stdout (without the newline).
    Frame(Bytes),
    /// The server went away (it exited, closed stdout, or `close` was called).
    Closed {
        /// Why, with the server's last stderr lines.
        reason: String,
    },
    /// The transport gave up on a misbehaving server (oversized frame, non-MCP output, a read
    /// error); the server has been stopped.
    Failed {
        /// What went wrong, with the server's last stderr lines.
        error: String,
    },
}

impl StdioEvent {
    /// The core's vocabulary for the same event.
    pub fn into_transport_event(self) -> TransportEvent {
        match self {
            StdioEvent::Frame(frame) => TransportEvent::Frame(frame),
            StdioEvent::Closed { reason } => TransportEvent::Closed { reason },
            StdioEvent::Failed { error } => TransportEvent::Failed { error },
        }
    }
}

/// The process to run: a resolved `TransportConfig::Stdio`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioCommand {
    /// The program (looked up in `PATH` when it has no slash).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Added to (and overriding) the parent's environment.
    pub env: BTreeMap<String, String>,
    /// The working directory (default: [`StdioOptions::default_cwd`], else the parent's).
    pub cwd: Option<String>,
}

impl StdioCommand {
    /// `command` with `args`, no extra environment, no working directory.
    pub fn new<I, S>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        StdioCommand {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
    }

    /// The stdio command of a resolved config; `None` for HTTP/SSE configs.
    pub fn from_config(config: TransportConfig) -> Option<Self> {
        match config {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => Some(StdioCommand {
                command,
                args,
                env,
                cwd,
            }),
            _ => None,
        }
    }
}

/// Every live child process group started by this library (pid → process group id).
///
/// Transports register their group at spawn and remove it once the group is gone. The library
/// handle calls [`kill_all_now`](Self::kill_all_now) in its `Drop`, which needs no runtime:
/// whatever state the async world is in, every group gets a SIGKILL.
#[derive(Clone, Default)]
pub struct ProcessRegistry {
    groups: Arc<Mutex<BTreeMap<u32, i32>>>,
}

impl fmt::Debug for ProcessRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessRegistry")
            .field("groups", &*self.lock())
            .finish()
    }
}

impl ProcessRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, i32>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn register(&self, pid: u32, pgid: i32) {
        self.lock().insert(pid, pgid);
    }

    /// Removes `pid`; returns its group if it was still registered (then the caller owns
    /// killing it).
    pub(crate) fn take(&self, pid: u32) -> Option<i32> {
        self.lock().remove(&pid)
    }

    /// Whether `pid`'s group is still tracked (started and not yet confirmed gone).
    pub fn contains(&self, pid: u32) -> bool {
        self.lock().contains_key(&pid)
    }

    /// How many groups are tracked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No group is tracked.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The pids of every tracked group leader, ascending.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().keys().copied().collect()
    }

    /// SIGKILLs every tracked process group now, synchronously, and forgets them. Returns how
    /// many groups were signalled. Safe to call from `Drop` with no runtime left.
    pub fn kill_all_now(&self) -> usize {
        let groups = std::mem::take(&mut *self.lock());
        for &pgid in groups.values() {
            signal_group(pgid, Signal::Kill);
        }
        groups.len()
    }
}

/// Kills (SIGKILL) a registered process group when dropped, unless it is no longer registered.
/// Used for short-lived helper processes (secret commands).
pub(crate) struct GroupGuard {
    registry: ProcessRegistry,
    pid: u32,
}

impl GroupGuard {
    pub(crate) fn new(registry: &ProcessRegistry, pid: u32) -> Self {
        registry.register(pid, pid_to_pgid(pid));
        GroupGuard {
            registry: registry.clone(),
            pid,
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.registry.take(self.pid) {
            signal_group(pgid, Signal::Kill);
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    Term,
    Kill,
}

/// The process group of a child spawned with `process_group(0)`: its own pid. Pids that do not
/// fit an `i32` cannot occur on Unix; 0 is returned then, which `signal_group` refuses.
fn pid_to_pgid(pid: u32) -> i32 {
    i32::try_from(pid).unwrap_or(0)
}

/// Sends `signal` to the whole process group `pgid`. Returns false if the group no longer
/// exists. Refuses `pgid <= 1`: `kill(0)`/`kill(-1)` would hit our own group or everything.
#[cfg(unix)]
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> bool {
    if pgid <= 1 {
        return false;
    }
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid addresses a group.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

#[cfg(not(unix))]
pub(crate) fn signal_group(_pgid: i32, _signal: Signal) -> bool {
    false
}

/// Whether process group `pgid` still has a live member. Zombies do not count: an orphaned
/// grandchild that was killed stays a zombie forever under an init that does not reap, and it
/// is not running anything.
#[cfg(unix)]
fn group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(-pgid, 0) } != 0 {
        // ESRCH: no such group. EPERM: a member we may not signal — alive, but nothing we do
        // will change that; treat it as alive so the caller escalates and logs.
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    }
    #[cfg(target_os = "linux")]
    {
        proc_group_has_live_member(pgid).unwrap_or(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

#[cfg(not(unix))]
fn group_alive(_pgid: i32) -> bool {
    false
}

/// Scans `/proc` for a member of `pgid` that is not a zombie. `None` if `/proc` is unreadable.
#[cfg(target_os = "linux")]
fn proc_group_has_live_member(pgid: i32) -> Option<bool> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue; // exited meanwhile
        };
        // "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let _ppid = fields.next();
        let pgrp = fields.next().and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != "Z" && state != "X" {
            return Some(true);
        }
    }
    Some(false)
}

/// `Some(output)` if `fut` finishes within `limit`.
async fn timeout<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    future::or(async { Some(fut.await) }, async {
        Timer::after(limit).await;
        None
    })
    .await
}

/// `n` bytes in words ("16 MiB", "64 KiB", "1000 bytes").
#[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than the workspace MSRV
fn human_size(n: usize) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// The last lines a server wrote to stderr.
#[derive(Clone)]
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    cap: usize,
}

impl StderrTail {
    fn new(cap: usize) -> Self {
        StderrTail {
            lines: Arc::new(Mutex::new(VecDeque::with_capacity(cap.min(64)))),
            cap,
        }
    }

    fn push(&self, line: String) {
        if self.cap == 0 {
            return;
        }
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == self.cap {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `"; last stderr lines:\n..."`, or nothing if the server wrote nothing to stderr.
    fn render(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.is_empty() {
            return String::new();
        }
        let mut out = String::from("; last stderr lines:");
        for line in lines.iter() {
            out.push('\n');
            out.push_str(line);
        }
        out
    }
}

/// A running MCP server on stdio. See the module documentation for the contract.
pub struct StdioTransport {
    server: String,
    pid: u32,
    frames: Sender<Bytes>,
    /// Closing this channel asks the supervisor to shut the server down.
    close_requests: Sender<()>,
    /// Closed by the supervisor once the process group is gone and unregistered.
    group_gone: Receiver<()>,
    supervisor: Option<Task<()>>,
    registry: ProcessRegistry,
    tail: StderrTail,
}

impl fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioTransport")
            .field("server", &self.server)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl StdioTransport {
    /// Starts `cmd` for `server` in its own process group, registers the group in `registry`,
    /// and starts the tasks that serve it. Events are sent on `events` as `(tag.clone(),
    /// event)`. Synchronous: when this returns `Ok`, the handle owns the process group; when
    /// it returns `Err`, nothing is running. The error names the server and the command.
    pub fn spawn<T>(
        server: &str,
        cmd: StdioCommand,
        opts: &StdioOptions,
        registry: &ProcessRegistry,
        tag: T,
        events: Sender<(T, StdioEvent)>,
    ) -> Result<StdioTransport, String>
    where
        T: Clone + Send + 'static,
    {
        Self::spawn_on(
            &Spawner::default(),
            server,
            cmd,
            opts,
            registry,
            tag,
            events,
        )
    }

    /// [`spawn`](Self::spawn) with the transport's tasks on `spawner`, sending
    /// `M::from((tag, event))` (the driver's channel carries other inputs too).
    pub(crate) fn spawn_on<T, M>(
        spawner: &Spawner,
        server: &str,
        cmd: StdioCommand,
        opts: &StdioOptions,
        registry: &ProcessRegistry,
        tag: T,
        events: Sender<M>,
    ) -> Result<StdioTransport, String>
    where
        T: Clone + Send + 'static,
        M: From<(T, StdioEvent)> + Send + 'static,
    {
        let cwd = cmd
            .cwd
            .as_deref()
            .map(PathBuf::from)
            .or_else(|| opts.default_cwd.clone());
        if let Some(dir) = &cwd {
            // Checked first: a missing cwd makes exec fail with ENOENT, which would otherwise
            // read as "command not found".
            if !dir.is_dir() {
                return Err(format!(
                    "cannot start server \"{server}\": working directory \"{}\" does not exist",
                    dir.display()
                ));
            }
        }

        let mut std_cmd = std::process::Command::new(&cmd.command);
        std_cmd.args(&cmd.args).envs(&cmd.env);
        if let Some(dir) = &cwd {
            std_cmd.current_dir(dir);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            std_cmd.process_group(0);
        }
        let mut command = async_process::Command::from(std_cmd);
        // The From impl resets stdio to "inherit"; pipes must be set on the async command.
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| spawn_error(server, &cmd.command, &e))?;
        let pid = child.id();
        let pgid = pid_to_pgid(pid);
        registry.register(pid, pgid);
        tracing::debug!(target: "switchboard::server", server, pid, command = %cmd.command, "started stdio server");

        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Cannot happen (all three were piped); never leave the process behind anyway.
            signal_group(pgid, Signal::Kill);
            registry.take(pid);
            return Err(format!(
                "cannot start server \"{server}\": the pipes to \"{}\" were not created",
                cmd.command
            ));
        };

        let (frames_tx, frames_rx) = async_channel::unbounded();
        let (close_tx, close_rx) = async_channel::bounded(1);
        let tail = StderrTail::new(opts.stderr_tail_lines);

        let writer = spawner.spawn(write_frames(server.to_string(), stdin, frames_rx));
        let stderr_task = spawner.spawn(read_stderr(server.to_string(), stderr, tail.clone()));
        let reader = spawner.spawn(read_stdout(
            StdoutReader {
                server: server.to_string(),
                max_frame_len: opts.max_frame_len,
                max_garbage_lines: opts.max_garbage_lines.max(1),
            },
            stdout,
            tag.clone(),
            events.clone(),
        ));
        let supervisor = Supervisor {
            server: server.to_string(),
            child,
            pid,
            pgid,
            status: None,
            opts: opts.clone(),
            registry: registry.clone(),
        };
        let (gone_tx, gone_rx) = async_channel::bounded(1);
        let supervisor = spawner.spawn(supervisor.run(
            Tasks {
                reader,
                writer,
                stderr: stderr_task,
            },
            tail.clone(),
            close_rx,
            gone_tx,
            tag,
            events,
        ));

        Ok(StdioTransport {
            server: server.to_string(),
            pid,
            frames: frames_tx,
            close_requests: close_tx,
            group_gone: gone_rx,
            supervisor: Some(supervisor),
            registry: registry.clone(),
            tail,
        })
    }

    /// Queues one frame; a writer task appends the newline. Never blocks. Fails if the frame
    /// contains a newline (it would split into two frames) or the server's stdin is closed.
    pub fn send(&self, frame: Bytes) -> Result<(), String> {
        if frame.contains(&b'\n') {
            return Err(format!(
                "server \"{}\": a stdio frame must be a single line, this one contains a newline",
                self.server
            ));
        }
        self.frames
            .try_send(frame)
            .map_err(|_| format!("server \"{}\": the stdio transport is closed", self.server))
    }

    /// Shuts the server down as the MCP spec says (close stdin, wait, SIGTERM the group, wait,
    /// SIGKILL the group) and returns once the group is gone and reaped. Takes up to
    /// `stdin_close_wait + sigterm_wait` plus a little; drivers should run it in its own task.
    /// Never waits on the events channel. If this future is dropped early, `Drop` SIGKILLs the
    /// group.
    pub async fn close(mut self) {
        self.close_requests.close();
        // Err once the supervisor dropped its sender: the group is gone.
        let _ = self.group_gone.recv().await;
        if let Some(supervisor) = self.supervisor.take() {
            // If the server ended by itself just before, the supervisor may still be handing
            // its terminal event to a full channel; let it finish in the background.
            supervisor.detach();
        }
    }

    /// The server process's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's last stderr lines so far, as `"; last stderr lines:\n..."` (empty if it
    /// wrote none): for errors of attempts the client ends (a connect timeout, a failed
    /// `initialize`), which do not come from the transport's own `Closed`/`Failed`.
    pub fn stderr_tail(&self) -> String {
        self.tail.render()
    }

    /// The server name this transport was started for.
    pub fn server(&self) -> &str {
        &self.server
    }
}

impl Drop for StdioTransport {
    /// Dropped without `close` (or with `close` cancelled): SIGKILL the whole group now,
    /// synchronously. If the group is no longer registered it is already gone (the supervisor
    /// confirmed it, or `kill_all_now` got it) and is not signalled again.
    fn drop(&mut self) {
        if let Some(pgid) = self.registry.take(self.pid) {
            signal_group(pgid, Signal::Kill);
            tracing::debug!(target: "switchboard::server", server = %self.server, pid = self.pid, "stdio transport dropped: killed its process group");
        }
        // `supervisor` is dropped after this, which cancels it; the child inside it has
        // kill_on_drop set and is reaped by async-process's reaper.
    }
}

fn spawn_error(server: &str, command: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("cannot start server \"{server}\": command \"{command}\" not found")
        }
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot start server \"{server}\": command \"{command}\" is not executable (permission denied)"
        ),
        _ => format!("cannot start server \"{server}\": command \"{command}\" failed to start: {e}"),
    }
}

/// Writes queued frames to the server's stdin, one per line. Ends (closing stdin) when the
/// queue's sender is gone, on a write error, or when cancelled by the supervisor.
async fn write_frames(server: String, stdin: ChildStdin, frames: Receiver<Bytes>) {
    let mut out = futures_lite::io::BufWriter::new(stdin);
    while let Ok(frame) = frames.recv().await {
        let written = async {
            out.write_all(&frame).await?;
            out.write_all(b"\n").await?;
            if frames.is_empty() {
                out.flush().await?;
            }
            Ok::<(), std::io::Error>(())
        }
        .await;
        if let Err(e) = written {
            // Usually EPIPE: the server exited; the stdout reader reports that.
            tracing::debug!(target: "switchboard::server", server = %server, error = %e, "writing to the server's stdin failed");
            frames.close();
            return;
        }
    }
}

/// Reads stderr line by line into `tracing` and the tail. Ends at EOF.
async fn read_stderr(server: String, mut stderr: ChildStderr, tail: StderrTail) {
    let mut chunk = vec![0u8; STDERR_CHUNK];
    let mut line: Vec<u8> = Vec::new();
    let emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        if !text.is_empty() {
            tracing::debug!(target: "switchboard::server", server = %server, "{text}");
            tail.push(text.to_string());
        }
        line.clear();
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (piece, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            let room = MAX_STDERR_LINE.saturating_sub(line.len());
            line.extend_from_slice(&piece[..piece.len().min(room)]);
            if newline {
                emit(&mut line);
                rest = &rest[piece.len() + 1..];
            } else {
                rest = &[];
            }
        }
        future::yield_now().await;
    }
    emit(&mut line);
}

struct StdoutReader {
    server: String,
    max_frame_len: usize,
    max_garbage_lines: usize,
}

/// Why the stdout reader stopped.
enum StdoutEnd {
    Eof,
    Failed(String),
    /// Nobody listens to events any more.
    EventsGone,
}

/// Splits stdout into frames and sends them. Memory is bounded by `max_frame_len` + `CHUNK`.
async fn read_stdout<T: Clone, M: From<(T, StdioEvent)>>(
    cfg: StdoutReader,
    stdout: ChildStdout,
    tag: T,
    events: Sender<M>,
) -> StdoutEnd {
    // Our own registration of the pipe, for `readable()`: after a short read the pipe is
    // (almost always) empty, so the reader waits for readiness instead of paying a `read`
    // that would only say EAGAIN. Once per answer in a sequential exchange.
    let stdout = match OwnedFd::try_from(stdout).and_then(|fd| Async::new(File::from(fd))) {
        Ok(stdout) => stdout,
        Err(e) => return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}")),
    };
    let mut drained = false;
    let mut chunk = vec![0u8; CHUNK];
    let mut line: Vec<u8> = Vec::new();
    let mut garbage_run = 0usize;
    let mut frames_this_turn = 0usize;
    let too_long = || {
        StdoutEnd::Failed(format!(
            "stdout frame exceeds the {} limit (more than {} bytes without a newline)",
            human_size(cfg.max_frame_len),
            cfg.max_frame_len
        ))
    };
    loop {
        if drained {
            if let Err(e) = stdout.readable().await {
                return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}"));
            }
        }
        let n = match stdout.read_with(|f| (&*f).read(&mut chunk)).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return StdoutEnd::Failed(format!("reading the server's stdout failed: {e}")),
        };
        drained = n < chunk.len();
        let mut rest = &chunk[..n];
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if line.len() + i > cfg.max_frame_len {
                return too_long();
            }
            let whole = if line.is_empty() {
                Bytes::copy_from_slice(&rest[..i])
            } else {
                line.extend_from_slice(&rest[..i]);
                Bytes::from(std::mem::take(&mut line))
            };
            rest = &rest[i + 1..];
            match classify_line(&cfg, whole, &mut garbage_run) {
                Line::Skip => {}
                Line::Frame(frame) => {
                    if events
                        .send(M::from((tag.clone(), StdioEvent::Frame(frame))))
                        .await
                        .is_err()
                    {
                        return StdoutEnd::EventsGone;
                    }
                    frames_this_turn += 1;
                    if frames_this_turn == FRAMES_PER_TURN {
                        frames_this_turn = 0;
                        future::yield_now().await;
                    }
                }
                Line::End(end) => return end,
            }
        }
        if line.len() + rest.len() > cfg.max_frame_len {
            return too_long();
        }
        line.extend_from_slice(rest);
        // At most one chunk (and FRAMES_PER_TURN frames) of work per turn: a chatty server
        // must not starve other tasks.
        frames_this_turn = 0;
        future::yield_now().await;
    }
    if !line.is_empty() {
        match classify_line(&cfg, Bytes::from(line), &mut garbage_run) {
            Line::Skip => {}
            Line::Frame(frame) => {
                if events
                    .send(M::from((tag, StdioEvent::Frame(frame))))
                    .await
                    .is_err()
                {
                    return StdoutEnd::EventsGone;
                }
            }
            Line::End(end) => return end,
        }
    }
    StdoutEnd::Eof
}

enum Line {
    Skip,
    Frame(Bytes),
    End(StdoutEnd),
}

/// Classifies one stdout line (see "Framing decisions" in the module documentation).
fn classify_line(cfg: &StdoutReader, mut line: Bytes, garbage_run: &mut usize) -> Line {
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    let Some(first) = line.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Line::Skip; // empty line
    };
    // A JSON-RPC message is an object: a line that starts with `{` and ends with `}` goes to
    // the core as it is (the core parses it anyway and reports a malformed one), so the hot
    // path parses each frame once. Anything else is checked fully: log lines like
    // `[INFO] ready` must not reach the core.
    let last = line.iter().rev().find(|b| !b.is_ascii_whitespace());
    let is_json = match (first, last) {
        (b'{', Some(b'}')) => true,
        (b'{' | b'[', _) => serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_ok(),
        _ => false,
    };
    if is_json {
        *garbage_run = 0;
        return Line::Frame(line);
    }
    *garbage_run += 1;
    let preview = preview(&line);
    tracing::warn!(target: "switchboard::server", server = %cfg.server, line = %preview, "dropping a non-JSON line from the server's stdout");
    if *garbage_run >= cfg.max_garbage_lines {
        return Line::End(StdoutEnd::Failed(format!(
            "server writes non-MCP output to stdout ({} non-JSON lines in a row; the last: {preview:?})",
            *garbage_run
        )));
    }
    Line::Skip
}

fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    match text.char_indices().nth(GARBAGE_PREVIEW) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// How the process group ended during a shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Gone within `stdin_close_wait` of stdin being closed.
    ByItself,
    AfterSigterm,
    AfterSigkill,
}

/// Owns the child process; runs the shutdown sequence and reports the one terminal event.
struct Supervisor {
    server: String,
    child: async_process::Child,
    pid: u32,
    pgid: i32,
    status: Option<ExitStatus>,
    opts: StdioOptions,
    registry: ProcessRegistry,
}

/// The tasks that serve one server's pipes.
struct Tasks {
    reader: Task<StdoutEnd>,
    writer: Task<()>,
    stderr: Task<()>,
}

impl Supervisor {
    async fn run<T: Send + 'static, M: From<(T, StdioEvent)>>(
        mut self,
        tasks: Tasks,
        tail: StderrTail,
        close_requests: Receiver<()>,
        group_gone: Sender<()>,
        tag: T,
        events: Sender<M>,
    ) {
        let Tasks {
            mut reader,
            writer,
            mut stderr,
        } = tasks;
        // `None`: close requested.
        let end = future::or(async { Some((&mut reader).await) }, async {
            let _ = close_requests.recv().await;
            None
        })
        .await;
        if end.is_none() {
            // Nobody wants frames any more; dropping stdout also tells the server.
            reader.cancel().await;
        }

        let ended = self.shutdown(writer).await;
        // The group is gone, so stderr reaches EOF promptly unless a process outside the group
        // holds it; bound the wait so the tail is complete in the common case.
        if timeout(STDERR_DRAIN_WAIT, &mut stderr).await.is_none() {
            stderr.cancel().await;
        }
        self.registry.take(self.pid);
        drop(group_gone);

        let event = match end {
            None => {
                // close() may be awaited by the very task that drains `events`: never block.
                let _ = events.try_send(M::from((
                    tag,
                    StdioEvent::Closed {
                        reason: "closed by client".to_string(),
                    },
                )));
                return;
            }
            Some(StdoutEnd::EventsGone) => return,
            Some(StdoutEnd::Eof) => StdioEvent::Closed {
                reason: format!("{}{}", self.describe_exit(ended), tail.render()),
            },
            Some(StdoutEnd::Failed(error)) => StdioEvent::Failed {
                error: format!("{error}{}", tail.render()),
            },
        };
        tracing::debug!(target: "switchboard::server", server = %self.server, event = ?event, "stdio transport ended");
        let _ = events.send(M::from((tag, event))).await;
    }

    fn describe_exit(&self, ended: Ended) -> String {
        let status = match &self.status {
            Some(status) => status.to_string(),
            None => "exit status unknown".to_string(),
        };
        match ended {
            Ended::ByItself => format!("server process exited ({status})"),
            Ended::AfterSigterm => {
                format!(
                    "server closed its stdout but kept running; stopped it with SIGTERM ({status})"
                )
            }
            Ended::AfterSigkill => {
                format!(
                    "server closed its stdout but kept running; killed it with SIGKILL ({status})"
                )
            }
        }
    }

    /// Close stdin, wait, SIGTERM the group, wait, SIGKILL the group, reap.
    async fn shutdown(&mut self, writer: Task<()>) -> Ended {
        // Cancelling the writer drops its ChildStdin: the server sees EOF on stdin.
        writer.cancel().await;
        if self.wait_gone(self.opts.stdin_close_wait).await {
            return Ended::ByItself;
        }
        tracing::debug!(target: "switchboard::server", server = %self.server, pid = self.pid, "server did not exit after stdin was closed; sending SIGTERM to its process group");
        signal_group(self.pgid, Signal::Term);
        if self.wait_gone(self.opts.sigterm_wait).await {
            return Ended::AfterSigterm;
        }
        tracing::debug!(target: "switchboard::server", server = %self.server, pid = self.pid, "server did not exit after SIGTERM; sending SIGKILL to its process group");
        signal_group(self.pgid, Signal::Kill);
        if !self.wait_gone(SIGKILL_WAIT).await {
            tracing::warn!(target: "switchboard::server", server = %self.server, pid = self.pid, "process group still has live members after SIGKILL");
        }
        Ended::AfterSigkill
    }

    /// Waits up to `limit` for the leader to be reaped and the group to have no live member.
    async fn wait_gone(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        if self.status.is_none() {
            match timeout(limit, self.child.status()).await {
                None => return false,
                Some(Ok(status)) => self.status = Some(status),
                Some(Err(e)) => {
                    tracing::debug!(target: "switchboard::server", server = %self.server, error = %e, "waiting for the server process failed");
                }
            }
        }
        loop {
            if !group_alive(self.pgid) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            Timer::after(GROUP_POLL.min(deadline - now)).await;
        }
    }
}
