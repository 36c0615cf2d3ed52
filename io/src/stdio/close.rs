//! The close sequence: write what is queued and close stdin, wait for the group to be gone,
//! SIGTERM the group, wait, SIGKILL the group, reap — run by the supervisor task that owns
//! the child, whether the client asked to close or the server ended by itself, followed by
//! the transport's one terminal event.

use super::frames::StdoutEnd;
use super::kill::{signal_group, Signal};
use super::{ProcessRegistry, StdioEvent, StdioOptions};
use async_channel::{Receiver, Sender};
use async_executor::Task;
use async_io::Timer;
use futures_lite::future;
use std::future::Future;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How long to wait for the group to disappear after SIGKILL before giving up (logged).
const SIGKILL_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for stderr to reach EOF once the group is gone (a process outside the
/// group may still hold the pipe).
const STDERR_DRAIN_WAIT: Duration = Duration::from_secs(1);
/// After the server's main process exited: how long its stdout may take to reach EOF (what
/// it wrote before exiting is read first) before the connection is closed without it.
const EXIT_DRAIN_WAIT: Duration = Duration::from_millis(250);
/// Poll interval while waiting for a process group to empty.
const GROUP_POLL: Duration = Duration::from_millis(25);

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

/// After the server's main process exited: what it wrote before is read for
/// [`EXIT_DRAIN_WAIT`]; past that, a process it left holds its stdout (`orphaned`).
async fn drain_after_exit(reader: &mut Task<StdoutEnd>, orphaned: &mut bool) -> Option<StdoutEnd> {
    match timeout(EXIT_DRAIN_WAIT, reader).await {
        // What it wrote before exiting has been read; the pipe closed with it.
        Some(end) => Some(end),
        None => {
            *orphaned = true;
            Some(StdoutEnd::Eof)
        }
    }
}

/// What ended the wait for the server: its stdout, our close, or its main process's exit.
enum End {
    Stdout(StdoutEnd),
    CloseRequested,
    LeaderExited,
    /// Writing to its stdin failed (it exited, or closed its stdin).
    StdinBroken,
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
pub(super) struct Supervisor {
    pub(super) server: String,
    pub(super) child: crate::proc::Child,
    pub(super) pid: u32,
    pub(super) pgid: i32,
    pub(super) status: Option<ExitStatus>,
    pub(super) opts: StdioOptions,
    pub(super) registry: ProcessRegistry,
    /// The write queue (the writer's end of it): closed at shutdown, so the writer writes
    /// what is queued and then ends.
    pub(super) frames: Receiver<bytes::Bytes>,
}

/// The tasks that serve one server's pipes.
pub(super) struct Tasks {
    pub(super) reader: Task<StdoutEnd>,
    pub(super) writer: Task<()>,
    pub(super) stderr: Task<()>,
}

impl Supervisor {
    pub(super) async fn run<T: Send + 'static, M: From<(T, StdioEvent)>>(
        mut self,
        tasks: Tasks,
        close_requests: Receiver<()>,
        group_gone: Sender<()>,
        tag: T,
        events: Sender<M>,
    ) {
        let Tasks {
            mut reader,
            mut writer,
            mut stderr,
        } = tasks;
        let first = future::or(
            async { End::Stdout((&mut reader).await) },
            future::or(
                async {
                    let _ = close_requests.recv().await;
                    End::CloseRequested
                },
                future::or(
                    async {
                        // The leader's exit ends the connection even when a descendant still
                        // holds its stdout open (then no EOF would ever come).
                        match self.child.status().await {
                            Ok(status) => self.status = Some(status),
                            Err(_) => future::pending::<()>().await,
                        }
                        End::LeaderExited
                    },
                    async {
                        // The writer ends by itself only when the server's stdin broke.
                        (&mut writer).await;
                        End::StdinBroken
                    },
                ),
            ),
        )
        .await;
        // A task that has finished must not be awaited again (its `Task` panics, and the
        // panic would take the supervisor, and with it the terminal event, away): the
        // writer ended in the race above when the server's stdin broke.
        let writer = match first {
            End::StdinBroken => None,
            _ => Some(writer),
        };
        let mut orphaned_pipes = false;
        let mut stdin_broken = false;
        // `None`: close requested.
        let end = match first {
            End::Stdout(end) => Some(end),
            End::CloseRequested => None,
            End::LeaderExited => drain_after_exit(&mut reader, &mut orphaned_pipes).await,
            // Usually the server died (its stdout ends with it, and its exit status is the
            // story); a server that closed its stdin but runs on can take no request again.
            End::StdinBroken => match timeout(EXIT_DRAIN_WAIT, &mut reader).await {
                Some(end) => Some(end),
                // Its main process is gone: it did not close its stdin and run on, it exited
                // (its stdout is read on as after any exit).
                None if self.leader_exited() => {
                    drain_after_exit(&mut reader, &mut orphaned_pipes).await
                }
                None => {
                    stdin_broken = true;
                    Some(StdoutEnd::Eof)
                }
            },
        };
        if end.is_none() || orphaned_pipes || stdin_broken {
            // Nobody wants frames any more; dropping stdout also tells the server.
            reader.cancel().await;
        }

        let ended = self.shutdown(writer).await;
        // The group is gone, so stderr reaches EOF promptly unless a process outside the group
        // holds it; bound the wait so its last lines come before the end in the common case.
        if timeout(STDERR_DRAIN_WAIT, &mut stderr).await.is_none() {
            stderr.cancel().await;
        }
        self.registry.take(self.pid);
        // A descendant that left the group (setsid) was reparented to us if we adopt
        // orphans: end it before saying the server is gone.
        crate::process::sweep_after_close().await;
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
            Some(StdoutEnd::Eof) if stdin_broken => StdioEvent::Failed {
                error: format!(
                    "server \"{}\" closed its stdin but kept running, so it can take no more requests; stopped it ({})",
                    self.server,
                    self.status_text()
                ),
            },
            Some(StdoutEnd::Eof) if orphaned_pipes => StdioEvent::Closed {
                reason: format!(
                    "{}; its other processes kept its pipes open and were stopped",
                    self.describe_exit(Ended::ByItself)
                ),
            },
            Some(StdoutEnd::Eof) => StdioEvent::Closed {
                reason: self.describe_exit(ended),
            },
            Some(StdoutEnd::Failed(error)) => StdioEvent::Failed { error },
        };
        tracing::debug!(target: "switchboard::server", server = %self.server, event = ?event, "stdio transport ended");
        let _ = events.send(M::from((tag, event))).await;
    }

    /// Whether the main process has exited (reaped now if so, its status kept).
    fn leader_exited(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_status() {
                self.status = Some(status);
            }
        }
        self.status.is_some()
    }

    fn status_text(&self) -> String {
        match &self.status {
            Some(status) => status.to_string(),
            None => "exit status unknown".to_string(),
        }
    }

    fn describe_exit(&self, ended: Ended) -> String {
        let status = self.status_text();
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

    /// Flush what is queued and close stdin, wait, SIGTERM the group, wait, SIGKILL the
    /// group, reap.
    /// `writer`: `None` when it has ended already.
    async fn shutdown(&mut self, writer: Option<Task<()>>) -> Ended {
        // Frames queued before the close (a `notifications/cancelled` for each call given up
        // at shutdown, say) still reach the server, in order, before its stdin closes; the
        // flush shares the first grace period with the wait for the server to exit, so a
        // server that stopped reading costs no more than before.
        let grace = self.opts.stdin_close_wait;
        let started = Instant::now();
        self.frames.close();
        if let Some(mut writer) = writer {
            if timeout(grace, &mut writer).await.is_none() {
                tracing::debug!(target: "switchboard::server", server = %self.server, pid = self.pid, "the server did not take its queued frames within the grace period; closing its stdin without them");
                writer.cancel().await;
            }
        }
        // The writer has ended and dropped its ChildStdin: the server sees EOF on stdin.
        if self
            .wait_gone(grace.saturating_sub(started.elapsed()))
            .await
        {
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

/// Runs a supervisor, and if it panics still ends the server and sends the transport's
/// terminal event: without it, a defect in the close sequence would leave every call in
/// flight waiting for its timeout, because nothing else tells the core the connection is gone.
/// The panicking supervisor's child handle, dropped while unwinding, kills and reaps the
/// server's main process; this kills the rest of its group and unregisters it.
pub(super) async fn ending_on_panic<T, M>(
    supervisor: impl Future<Output = ()>,
    server: String,
    pgid: i32,
    pid: u32,
    registry: ProcessRegistry,
    tag: T,
    events: Sender<M>,
) where
    M: From<(T, StdioEvent)>,
{
    use futures_lite::FutureExt;
    let Err(panic) = std::panic::AssertUnwindSafe(supervisor)
        .catch_unwind()
        .await
    else {
        return;
    };
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string());
    tracing::error!(target: "switchboard::server", server = %server, pid, "the stdio transport's supervisor panicked: {what}");
    signal_group(pgid, Signal::Kill);
    registry.take(pid);
    let error = format!(
        "server \"{server}\": the stdio transport failed inside switchboard ({what}); the server was stopped"
    );
    let _ = events
        .send(M::from((tag, StdioEvent::Failed { error })))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_supervisor_still_ends_the_server_and_sends_a_terminal_event() {
        let registry = ProcessRegistry::new();
        // A process group of our own to end: `sleep`, in a group it leads.
        let mut child = {
            use std::os::unix::process::CommandExt;
            std::process::Command::new("sleep")
                .arg("1000")
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let pid = child.id();
        registry.register(pid, pid as i32);
        let (tx, rx) = async_channel::bounded::<(u8, StdioEvent)>(4);
        futures_lite::future::block_on(ending_on_panic(
            async { panic!("a defect") },
            "s".to_string(),
            pid as i32,
            pid,
            registry.clone(),
            7u8,
            tx,
        ));
        let (tag, event) = rx.try_recv().expect("a terminal event");
        assert_eq!(tag, 7);
        match event {
            StdioEvent::Failed { error } => assert_eq!(
                error,
                "server \"s\": the stdio transport failed inside switchboard (a defect); the server was stopped"
            ),
            other => panic!("expected Failed, got {other:?}"),
        }
        assert!(registry.take(pid).is_none(), "still registered");
        // The group was killed: the process ends (reaped here).
        let status = child.wait().unwrap();
        assert!(!status.success());
    }

    #[test]
    fn a_supervisor_that_finishes_sends_nothing_more() {
        let (tx, rx) = async_channel::bounded::<(u8, StdioEvent)>(4);
        futures_lite::future::block_on(ending_on_panic(
            async {},
            "s".to_string(),
            0,
            0,
            ProcessRegistry::new(),
            1u8,
            tx,
        ));
        assert!(rx.try_recv().is_err());
    }
}
