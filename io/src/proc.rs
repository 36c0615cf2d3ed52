//! Child processes on async-io, without a process crate.
//!
//! The library spawns servers and `!command` helpers with `std::process::Command` and drives
//! their pipes as `async_io::Async` handles. A child's exit is awaited on a pidfd (Linux 5.3
//! and later), which the reactor reports readable once the process has exited; where there is
//! none, the wait polls `try_wait` with a short, growing interval. This replaces a process
//! crate that installs a process-wide SIGCHLD handler (through a signal crate): a library
//! embedded in someone else's program should not own a signal, and it keeps the embedder's
//! dependency tree free of signal handling.
//!
//! A [`Child`] dropped before it was reaped kills its process (the leader; callers kill the
//! whole group themselves) and reaps it off the caller's thread, so no zombie is left behind.

use async_io::{Async, Timer};
use futures_lite::{future, AsyncReadExt};
use std::fs::File;
use std::io;
use std::process::{Command, ExitStatus, Output};
use std::time::Duration;

/// The write end of a child's stdin.
pub(crate) type ChildStdin = Async<std::process::ChildStdin>;
/// The read end of a child's stdout.
pub(crate) type ChildStdout = Async<std::process::ChildStdout>;
/// The read end of a child's stderr.
pub(crate) type ChildStderr = Async<std::process::ChildStderr>;

/// The first and the longest interval of the polling wait (no pidfd).
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(50);

/// A spawned child whose exit can be awaited.
pub(crate) struct Child {
    /// `None` once handed to the background reaper in `drop`.
    inner: Option<std::process::Child>,
    /// Readable once the process exited (Linux); `None` where pidfds are not available.
    pidfd: Option<Async<File>>,
    status: Option<ExitStatus>,
    /// The pipes the command asked for, taken by the caller.
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<ChildStdout>,
    pub(crate) stderr: Option<ChildStderr>,
}

impl Child {
    /// Spawns `command` (its stdio as the caller configured it) and wraps its pipes. The
    /// child is forked by the library's spawn thread and dies with this process (see
    /// [`crate::process`]).
    pub(crate) fn spawn(command: Command) -> io::Result<Child> {
        let mut child = crate::process::spawn(command)?;
        let wrap = |child: &mut std::process::Child| -> io::Result<_> {
            let stdin = child.stdin.take().map(Async::new).transpose()?;
            let stdout = child.stdout.take().map(Async::new).transpose()?;
            let stderr = child.stderr.take().map(Async::new).transpose()?;
            Ok((stdin, stdout, stderr))
        };
        let (stdin, stdout, stderr) = match wrap(&mut child) {
            Ok(pipes) => pipes,
            Err(e) => {
                // Never leave a process behind because its pipes could not be registered.
                let _ = child.kill();
                let _ = child.wait();
                crate::process::reaped(child.id());
                return Err(e);
            }
        };
        let pidfd = pidfd_open(child.id());
        Ok(Child {
            inner: Some(child),
            pidfd,
            status: None,
            stdin,
            stdout,
            stderr,
        })
    }

    /// The process id.
    pub(crate) fn id(&self) -> u32 {
        self.inner.as_ref().map_or(0, std::process::Child::id)
    }

    /// Reaps the process if it has exited, without waiting.
    pub(crate) fn try_status(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let Some(child) = self.inner.as_mut() else {
            return Ok(None);
        };
        let status = child.try_wait()?;
        if status.is_some() {
            crate::process::reaped(child.id());
        }
        self.status = status;
        Ok(status)
    }

    /// Waits for the process to exit and reaps it.
    pub(crate) async fn status(&mut self) -> io::Result<ExitStatus> {
        let mut interval = POLL_FIRST;
        loop {
            if let Some(status) = self.try_status()? {
                return Ok(status);
            }
            match &self.pidfd {
                Some(pidfd) => pidfd.readable().await?,
                None => {
                    Timer::after(interval).await;
                    interval = (interval * 2).min(POLL_MAX);
                }
            }
        }
    }

    /// What a short-lived helper command printed: stdout and stderr read (each up to
    /// `max_bytes`; more is an error) while waiting for the exit. The command is done when it
    /// exits: pipes still held open by a process it left behind are read for
    /// [`EXIT_DRAIN_WAIT`] more, not until that process ends.
    pub(crate) async fn output(&mut self, max_bytes: usize) -> io::Result<Output> {
        let stdout = self.stdout.take();
        let stderr = self.stderr.take();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut status = None;
        let reads = future::zip(
            read_capped(stdout, max_bytes, &mut out),
            read_capped(stderr, max_bytes, &mut err),
        );
        let exited = async {
            status = Some(self.status().await);
            Timer::after(EXIT_DRAIN_WAIT).await;
            (Ok(()), Ok(()))
        };
        let (read_out, read_err) = future::or(reads, exited).await;
        let status = match status {
            Some(status) => status?,
            None => self.status().await?,
        };
        read_out?;
        read_err?;
        Ok(Output {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

/// How long a helper's pipes are still read after it exited (see [`Child::output`]).
const EXIT_DRAIN_WAIT: Duration = Duration::from_millis(100);

async fn read_capped<R: futures_lite::AsyncRead + Unpin>(
    pipe: Option<R>,
    max_bytes: usize,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let Some(mut pipe) = pipe else {
        return Ok(());
    };
    let mut buf = [0u8; 8192];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        if out.len() + n > max_bytes {
            return Err(io::Error::other(format!(
                "it printed more than {max_bytes} bytes"
            )));
        }
        out.extend_from_slice(&buf[..n]);
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(mut child) = self.inner.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            crate::process::reaped(child.id());
            return;
        }
        let _ = child.kill();
        // SIGKILL is not ignorable, but the exit still takes a moment: reap it on a thread of
        // its own rather than block whoever dropped the handle.
        let reaped = std::thread::Builder::new()
            .name("switchboard-reap".into())
            .spawn(move || {
                let _ = child.wait();
                crate::process::reaped(child.id());
            });
        if reaped.is_err() {
            tracing::debug!(target: "switchboard::server", "could not start a thread to reap a killed child");
        }
    }
}

/// A pidfd for `pid`, registered with the reactor; `None` where the kernel has none.
#[cfg(target_os = "linux")]
fn pidfd_open(pid: u32) -> Option<Async<File>> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new file descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Async::new(File::from(owned)).ok()
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: u32) -> Option<Async<File>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn status_reports_the_exit_code_and_output_what_was_printed() {
        smol::block_on(async {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "echo out; echo err >&2; exit 3"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = Child::spawn(cmd).unwrap();
            let output = child.output(1024).await.unwrap();
            assert_eq!(output.status.code(), Some(3));
            assert_eq!(output.stdout, b"out\n");
            assert_eq!(output.stderr, b"err\n");
        });
    }

    #[test]
    fn a_helper_is_done_when_it_exits_even_if_its_child_keeps_stdout_open() {
        use std::os::unix::process::CommandExt;
        smol::block_on(async {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "sleep 60 & echo value"])
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = Child::spawn(cmd).unwrap();
            let pgid = child.id() as libc::pid_t;
            // Without the exit ending the read, it would wait for `sleep`: a minute.
            let output = future::or(async { Some(child.output(1024).await) }, async {
                Timer::after(Duration::from_secs(20)).await;
                None
            })
            .await;
            // SAFETY: kill the test's own process group (the `sleep`).
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let output = output
                .expect("output() waited for the child's child")
                .unwrap();
            assert!(output.status.success());
            assert_eq!(output.stdout, b"value\n");
        });
    }

    #[test]
    fn output_past_its_cap_is_an_error_not_memory() {
        smol::block_on(async {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "head -c 5000 /dev/zero"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut child = Child::spawn(cmd).unwrap();
            let err = child.output(1000).await.unwrap_err();
            assert!(err.to_string().contains("more than 1000 bytes"), "{err}");
        });
    }

    #[test]
    fn a_dropped_child_is_killed_and_reaped() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30").stdin(Stdio::null());
        let child = Child::spawn(cmd).unwrap();
        let pid = child.id() as libc::pid_t;
        drop(child);
        // Killed and then reaped by the background thread: kill(pid, 0) fails with ESRCH.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            // SAFETY: signal 0 only checks for the process's existence.
            let alive = unsafe { libc::kill(pid, 0) } == 0;
            if !alive {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} still exists"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
