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
//! driver's `ConnId`): zero or more [`StdioEvent::Frame`]s and [`StdioEvent::Stderr`] lines
//! (each sent with `send().await`: a full channel makes the reader wait, and the pipe fills
//! up — back-pressure on the server instead of memory in the client), then exactly one
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
//! # Close
//!
//! Write what is still queued, then close stdin (frames queued before the close, such as
//! the `notifications/cancelled` of calls given up at shutdown, reach the server first); wait
//! for the process group to be gone, the flush and this wait sharing `stdin_close_wait`
//! (a server that does not take its frames within it gets EOF without them); SIGTERM the
//! group; wait up to `sigterm_wait`; SIGKILL the group; reap. "Gone" means the leader has been
//! reaped *and* no live (non-zombie) member is left in the group, so a grandchild that
//! outlives a well-behaved leader is still terminated. The same sequence runs when a server
//! closes its stdout by itself or is failed by the reader.
//!
//! # Runtime
//!
//! Tasks run on the library's own executor thread, on an executor the embedder gave to
//! [`crate::Builder::executor`], or through [`crate::Builder::spawner`]; children are awaited
//! on pidfds (`crate::proc`), with no process-wide SIGCHLD handler. Nothing here needs a
//! runtime for cleanup: `Drop` and [`ProcessRegistry::kill_all_now`] are plain syscalls.
//!
//! # Layout
//!
//! - `spawn`: starting the server in its own process group and the tasks that serve it.
//! - `frames`: writing frames to stdin (bounded by `max_write_queue` bytes), reading frames
//!   from stdout, passing stderr lines on.
//! - `close`: the close sequence (stdin, SIGTERM, SIGKILL, reaping) and the terminal event.
//! - `kill`: the registry of live groups and the synchronous kill when a handle is dropped.

mod close;
mod frames;
mod kill;
mod spawn;

pub(crate) use kill::GroupGuard;
// Crate paths kept as they were before the split, for code elsewhere in the crate that
// signals process groups; nothing outside this module uses them today.
pub use kill::ProcessRegistry;
#[allow(unused_imports)]
pub(crate) use kill::{signal_group, Signal};

use async_channel::{Receiver, Sender};
use async_executor::Task;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchboard_core::config::TransportConfig;
use switchboard_core::manager::TransportEvent;

use crate::units::MIB;

/// Tuning for stdio transports. `Default` gives the values noted on each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioOptions {
    /// Longest stdout line accepted as a frame (16 MiB).
    pub max_frame_len: usize,
    /// How long a server may take to read the frames still queued at close and then exit
    /// after its stdin is closed (1 s, for both together).
    pub stdin_close_wait: Duration,
    /// How long the process group may take to exit after SIGTERM (2 s).
    pub sigterm_wait: Duration,
    /// Most bytes of frames waiting to be written to a server's stdin (16 MiB): a server
    /// that stops reading fails with an error saying so, instead of the queue growing.
    pub max_write_queue: usize,
    /// Working directory when the config sets none (`None`: the parent's).
    pub default_cwd: Option<PathBuf>,
    /// Non-JSON stdout lines in a row that fail the server (100).
    pub max_garbage_lines: usize,
    /// Pass only [`MINIMAL_ENV`] of the parent's environment (plus the config's own `env`)
    /// instead of all of it (`false`).
    pub minimal_env: bool,
    /// How long a start waits for a file descriptor when this process has none left
    /// (`EMFILE`/`ENFILE`: its open-files limit is reached) before that server fails with
    /// an error saying so (2 s). Running out is local back-pressure, not the server's fault:
    /// the start is tried again as descriptors come free, and the other servers go on.
    pub descriptor_wait: Duration,
}

/// The variables a server inherits with [`StdioOptions::minimal_env`]: the ones Codex passes
/// to MCP servers by default.
pub const MINIMAL_ENV: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "USER",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "TZ",
    "__CF_USER_TEXT_ENCODING",
];

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_frame_len: 16 * MIB,
            stdin_close_wait: Duration::from_secs(1),
            sigterm_wait: Duration::from_secs(2),
            max_write_queue: 16 * MIB,
            default_cwd: None,
            max_garbage_lines: 100,
            minimal_env: false,
            descriptor_wait: Duration::from_secs(2),
        }
    }
}

/// What a stdio transport reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioEvent {
    /// One JSON line from the server's stdout (without the newline).
    Frame(Bytes),
    /// One line the server wrote to stderr (without its newline); every line comes before
    /// the transport's `Closed`/`Failed` unless a process outside the group keeps stderr open.
    Stderr {
        /// The line.
        line: String,
    },
    /// The server went away (it exited, closed stdout, or `close` was called).
    Closed {
        /// Why (its exit status, ...).
        reason: String,
    },
    /// The transport gave up on a misbehaving server (oversized frame, non-MCP output, a read
    /// error); the server has been stopped.
    Failed {
        /// What went wrong.
        error: String,
    },
}

impl StdioEvent {
    /// The core's vocabulary for the same event.
    pub fn into_transport_event(self) -> TransportEvent {
        match self {
            StdioEvent::Frame(frame) => TransportEvent::Frame(frame),
            StdioEvent::Stderr { line } => TransportEvent::Stderr { line },
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
    /// Bytes of frames queued for the writer (each with its newline).
    queued: Arc<AtomicUsize>,
    max_queued: usize,
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
    /// Queues one frame; a writer task appends the newline. Never blocks. Fails if the frame
    /// contains a newline (it would split into two frames) or the server's stdin is closed.
    pub fn send(&self, frame: Bytes) -> Result<(), String> {
        if frame.contains(&b'\n') {
            return Err(format!(
                "server \"{}\": a stdio frame must be a single line, this one contains a newline",
                self.server
            ));
        }
        if self.frames.is_closed() {
            // Checked first: frames left behind by a writer that ended must not read as a
            // server that stopped reading.
            return Err(self.closed_error());
        }
        let len = frame.len() + 1;
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before + len > self.max_queued {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            return Err(format!(
                "server \"{}\": it is not reading its stdin ({} of frames are waiting to be written, the limit is {})",
                self.server,
                crate::units::human_size(before),
                crate::units::human_size(self.max_queued)
            ));
        }
        self.frames.try_send(frame).map_err(|_| {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.closed_error()
        })
    }

    fn closed_error(&self) -> String {
        format!("server \"{}\": the stdio transport is closed", self.server)
    }

    /// Whether the transport takes no more frames: the server's stdin is closed (it exited,
    /// or closed it) or the close sequence has begun. Its one terminal event, with the exit
    /// status, follows (or came already); a frame refused for this reason needs no report of
    /// its own.
    pub fn is_closed(&self) -> bool {
        self.frames.is_closed()
    }

    /// Bytes of frames waiting to be written to the server's stdin (newlines included).
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Shuts the server down with the close sequence (close stdin, wait, SIGTERM the group,
    /// wait, SIGKILL the group) and returns once the group is gone and reaped. Takes up to
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

    /// The server name this transport was started for.
    pub fn server(&self) -> &str {
        &self.server
    }
}
