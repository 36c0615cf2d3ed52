//! Starting a stdio server: the command in its own process group (so every process it starts
//! can be signalled together), registered before anything else can fail, and the reader,
//! writer, stderr and supervisor tasks that serve it.

use super::close::{ending_on_panic, Supervisor, Tasks};
use super::frames::{read_stderr, read_stdout, write_frames, StdoutReader};
use super::kill::{pid_to_pgid, signal_group, Signal};
use super::{ProcessRegistry, StdioCommand, StdioEvent, StdioOptions, StdioTransport};
use crate::rt::Spawner;
use async_channel::Sender;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        .map_err(|e| e.message)
    }

    /// [`spawn`](Self::spawn), tried again while this process has no file descriptor left
    /// (for up to [`StdioOptions::descriptor_wait`], 10 ms doubling to 250 ms between tries),
    /// so a burst of starts past the open-files limit waits for descriptors to come free
    /// instead of failing; past the wait the error says that the limit, not the server, is
    /// why. Every other failure is returned at once.
    pub(crate) async fn spawn_waiting_on<T, M>(
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
        let deadline = Instant::now() + opts.descriptor_wait;
        let mut pause = FD_RETRY_FIRST;
        loop {
            let attempt = Self::spawn_on(
                spawner,
                server,
                cmd.clone(),
                opts,
                registry,
                tag.clone(),
                events.clone(),
            );
            match attempt {
                Ok(t) => return Ok(t),
                Err(e) if e.out_of_descriptors && Instant::now() < deadline => {
                    tracing::debug!(target: "switchboard::server", server, "no file descriptor to start the server; trying again in {pause:?}");
                    async_io::Timer::after(pause.min(deadline - Instant::now())).await;
                    pause = (pause * 2).min(FD_RETRY_MAX);
                }
                Err(e) => return Err(e.message),
            }
        }
    }

    /// [`spawn`](Self::spawn) with the transport's tasks on `spawner`, sending
    /// `M::from((tag, event))` (the driver's channel carries other inputs too).
    fn spawn_on<T, M>(
        spawner: &Spawner,
        server: &str,
        cmd: StdioCommand,
        opts: &StdioOptions,
        registry: &ProcessRegistry,
        tag: T,
        events: Sender<M>,
    ) -> Result<StdioTransport, SpawnError>
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
                return Err(SpawnError::other(format!(
                    "cannot start server \"{server}\": working directory \"{}\" does not exist",
                    dir.display()
                )));
            }
        }

        let mut std_cmd = std::process::Command::new(&cmd.command);
        if opts.minimal_env {
            std_cmd.env_clear();
            for name in super::MINIMAL_ENV {
                if let Some(value) = std::env::var_os(name) {
                    std_cmd.env(name, value);
                }
            }
        }
        std_cmd.args(&cmd.args).envs(&cmd.env);
        if let Some(dir) = &cwd {
            std_cmd.current_dir(dir);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            std_cmd.process_group(0);
        }
        std_cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Killed when dropped before it was reaped (the group is killed separately).
        let mut child = crate::proc::Child::spawn(std_cmd).map_err(|e| SpawnError {
            out_of_descriptors: out_of_descriptors(&e),
            message: spawn_error(server, &cmd.command, &e),
        })?;
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
            return Err(SpawnError::other(format!(
                "cannot start server \"{server}\": the pipes to \"{}\" were not created",
                cmd.command
            )));
        };

        let (frames_tx, frames_rx) = async_channel::unbounded();
        let (close_tx, close_rx) = async_channel::bounded(1);
        let queued = Arc::new(AtomicUsize::new(0));

        let writer = spawner.spawn(write_frames(
            server.to_string(),
            stdin,
            frames_rx.clone(),
            queued.clone(),
        ));
        let stderr_task = spawner.spawn(read_stderr(
            server.to_string(),
            stderr,
            tag.clone(),
            events.clone(),
        ));
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
            frames: frames_rx,
        };
        let (gone_tx, gone_rx) = async_channel::bounded(1);
        let run = supervisor.run(
            Tasks {
                reader,
                writer,
                stderr: stderr_task,
            },
            close_rx,
            gone_tx,
            tag.clone(),
            events.clone(),
        );
        let supervisor = spawner.spawn(ending_on_panic(
            run,
            server.to_string(),
            pgid,
            pid,
            registry.clone(),
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
            queued,
            max_queued: opts.max_write_queue,
        })
    }
}

/// The first wait for a file descriptor after `EMFILE`/`ENFILE`; it doubles up to
/// [`FD_RETRY_MAX`].
const FD_RETRY_FIRST: Duration = Duration::from_millis(10);
const FD_RETRY_MAX: Duration = Duration::from_millis(250);

/// Why a start failed, and whether trying again when descriptors come free may help.
#[derive(Debug)]
pub(crate) struct SpawnError {
    pub(crate) message: String,
    pub(crate) out_of_descriptors: bool,
}

impl SpawnError {
    fn other(message: String) -> Self {
        SpawnError {
            message,
            out_of_descriptors: false,
        }
    }
}

/// `EMFILE` or `ENFILE`: no descriptor left, in this process or in the system.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// This process's open-files limit (the soft one), if it can be read.
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    #[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not everywhere
    Some(u64::from(limit.rlim_cur))
}

fn spawn_error(server: &str, command: &str, e: &std::io::Error) -> String {
    if out_of_descriptors(e) {
        let limit = match (e.raw_os_error(), open_files_limit()) {
            (Some(libc::EMFILE), Some(n)) => format!("its open-files limit of {n} is reached"),
            (Some(libc::EMFILE), None) => "its open-files limit is reached".to_string(),
            _ => "the system's open-files limit is reached".to_string(),
        };
        return format!(
            "cannot start server \"{server}\": this process has no file descriptor left ({limit}; \
             stop other servers or raise the limit)"
        );
    }
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
