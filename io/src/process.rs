//! Process hygiene beyond a server's process group: children that die with Switchboard, and
//! descendants that escaped their group (a grandchild that called `setsid`) found and ended.
//!
//! - **Parent death.** Every child the library starts (servers, `!command` helpers) is
//!   started with `PR_SET_PDEATHSIG = SIGKILL` (Linux), so it dies even when Switchboard is
//!   killed with SIGKILL and no close sequence runs. The kernel sends that signal when the
//!   *thread* that forked the child ends, not the process: so every child is forked by one
//!   long-lived thread of the library's own (`switchboard-spawn`), never by whichever
//!   executor thread happened to run the task — an embedder's executor may retire its threads.
//! - **The rest of each group.** That signal reaches a server's main process only, not a
//!   grandchild in its group. So one small keeper process (`sh`, started once, outside our
//!   process group and without the parent-death signal) is told of every group as it is
//!   registered and released, on a socket whose other end only we hold: when this process
//!   ends, however it ends, the socket reaches EOF and the keeper SIGKILLs every group still
//!   held, then exits. [`descendants`] does not count it.
//! - **Escaped descendants.** A process that calls `setsid` leaves its server's process group
//!   and session, so closing the group does not reach it, and when its parent exits it is
//!   reparented — normally to init, where nothing can find it. With
//!   [`Builder::adopt_orphans`](crate::Builder::adopt_orphans) the process becomes a *child
//!   subreaper* (`PR_SET_CHILD_SUBREAPER`): orphans below it are reparented to it instead, and
//!   [`sweep_escaped`] (run after every server closes and at shutdown) kills and reaps every
//!   child of this process that the library did not start itself. That is only right in a
//!   program whose other children are none of the library's business to keep — the
//!   `switchboard` command line — so it is opt-in.
//!
//! [`descendants`] lists every live process below this one (by walking `/proc`), which is
//! what "no process outlives Switchboard" is checked against.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Processes this library started and has not reaped yet (by pid): a child of this process
/// outside this set is not ours, and with orphan adoption on it is an escaped descendant.
fn started() -> &'static Mutex<BTreeSet<u32>> {
    static STARTED: OnceLock<Mutex<BTreeSet<u32>>> = OnceLock::new();
    STARTED.get_or_init(|| Mutex::new(BTreeSet::new()))
}

fn lock_started() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    started().lock().unwrap_or_else(|e| e.into_inner())
}

/// Forget `pid`: it was reaped. A program that started a child with [`spawn`] and reaped it
/// itself calls this after the wait.
pub fn reaped(pid: u32) {
    lock_started().remove(&pid);
}

type SpawnJob = (Command, mpsc::SyncSender<io::Result<std::process::Child>>);

/// Spawns `command` on the library's spawn thread, with parent-death SIGKILL set between fork
/// and exec, and remembers its pid as one of the library's (so [`sweep_escaped`] spares it
/// until [`reaped`] is called). A program that adopts orphans starts its own helpers here.
pub fn spawn(command: Command) -> io::Result<std::process::Child> {
    static JOBS: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let jobs = JOBS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let started = std::thread::Builder::new()
            .name("switchboard-spawn".into())
            .spawn(move || {
                // Lives as long as the process: its children's parent-death signal is tied
                // to this thread.
                for (mut command, reply) in rx {
                    let _ = reply.send(spawn_here(&mut command));
                }
            });
        if let Err(e) = started {
            panic!("switchboard: cannot start the spawn thread: {e}");
        }
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::sync_channel(1);
    jobs.lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply_tx))
        .map_err(|_| io::Error::other("the spawn thread is gone"))?;
    let child = reply_rx
        .recv()
        .map_err(|_| io::Error::other("the spawn thread is gone"))??;
    Ok(child)
}

fn spawn_here(command: &mut Command) -> io::Result<std::process::Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid is async-signal-safe and has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid, kill); it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl: then no signal will come.
                if libc::getppid() != parent {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    // The pid is recorded while the set is locked, so a sweep never sees our own new child
    // as a stranger.
    let mut known = lock_started();
    let child = command.spawn()?;
    known.insert(child.id());
    Ok(child)
}

/// What the keeper runs: it holds the process groups it is told of (`+ PGID` and `- PGID`
/// lines on its stdin) and, when its stdin ends — which happens when this process exits, even
/// by SIGKILL, since the kernel closes our end of the socket — kills each group still held.
/// The parent-death signal reaches a server's main process only; this reaches the rest of
/// its group (a grandchild that outlives its parent, say).
const KEEPER_SCRIPT: &str = "trap '' INT TERM HUP; set -f; groups=' '; \
    while read -r op g; do case \"$op\" in \
    +) groups=\"$groups$g \" ;; \
    -) case \"$groups\" in *\" $g \"*) groups=\"${groups%% $g *} ${groups#* $g }\" ;; esac ;; \
    esac; done; for g in $groups; do kill -9 -$g 2>/dev/null; done";

/// The keeper: our end of its stdin, and its pid. `None` inside once it could not be started
/// or went away (then only the parent-death signal is left).
struct Keeper {
    socket: std::os::unix::net::UnixStream,
    pid: u32,
}

fn keeper() -> &'static Mutex<Option<Keeper>> {
    static KEEPER: OnceLock<Mutex<Option<Keeper>>> = OnceLock::new();
    KEEPER.get_or_init(|| Mutex::new(start_keeper().ok()))
}

fn start_keeper() -> io::Result<Keeper> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let mut command = Command::new("sh");
    command
        .args(["-c", KEEPER_SCRIPT])
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            theirs,
        )))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Out of the terminal's process group: a Ctrl-C meant for us does not end it first.
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and makes one syscall.
    unsafe {
        command.pre_exec(|| {
            // It outlives us: it must hold nothing of ours but its stdin (an inherited pipe
            // held open would keep someone waiting for its end). Older kernels lack the call;
            // then what is inherited stays.
            #[cfg(target_os = "linux")]
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            Ok(())
        });
    }
    // Started directly, not on the spawn thread: it must outlive this process to do its job.
    let child = command.spawn()?;
    let pid = child.id();
    // Never reaped while we live (it ends after us); one of ours, so never swept.
    lock_started().insert(pid);
    std::mem::forget(child);
    Ok(Keeper { socket: ours, pid })
}

/// Tells the keeper (`+` hold, `-` release) about process group `pgid`. A keeper that went
/// away is dropped; nothing here can raise SIGPIPE.
fn tell_keeper(op: char, pgid: i32) {
    use std::os::fd::AsRawFd;
    if pgid <= 1 {
        return;
    }
    let mut keeper = keeper().lock().unwrap_or_else(|e| e.into_inner());
    let Some(k) = keeper.as_ref() else {
        return;
    };
    let line = format!("{op} {pgid}\n");
    // SAFETY: sending a buffer we own on a socket we own; MSG_NOSIGNAL turns a gone reader
    // into EPIPE instead of a signal.
    let sent = unsafe {
        libc::send(
            k.socket.as_raw_fd(),
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if usize::try_from(sent).ok() != Some(line.len()) {
        tracing::debug!(target: "switchboard::server", "the process-group keeper is gone; only the parent-death signal is left");
        *keeper = None;
    }
}

/// Process group `pgid` (of a server or a helper) is killed if this process dies before it
/// is released, even by SIGKILL: the whole group, not only its leader.
pub(crate) fn hold_group(pgid: i32) {
    tell_keeper('+', pgid);
}

/// Process group `pgid` is gone (or being killed by us): the keeper forgets it.
pub(crate) fn release_group(pgid: i32) {
    tell_keeper('-', pgid);
}

/// The keeper's pid, if it runs (it is not one of the processes a server left behind).
fn keeper_pid() -> Option<u32> {
    keeper()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|k| k.pid)
}

/// Makes this process a child subreaper (Linux): orphaned descendants are reparented to it
/// instead of to init, so [`sweep_escaped`] can find them. Elsewhere, an error.
pub fn become_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
            return Err(io::Error::last_os_error());
        }
        ADOPTING.store(true, Ordering::Relaxed);
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "child subreapers exist only on Linux",
        ))
    }
}

/// This process is a child subreaper: the library sweeps after every close.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// After a server's process group is gone (and at shutdown): when this process adopts
/// orphans, end the ones that escaped, on a thread of its own (it reads `/proc` and waits
/// for exits), without blocking the caller's executor.
pub(crate) async fn sweep_after_close() {
    if !ADOPTING.load(Ordering::Relaxed) {
        return;
    }
    let (tx, rx) = async_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("switchboard-sweep".into())
        .spawn(move || {
            let _ = tx.send_blocking(sweep_escaped());
        });
    if spawned.is_ok() {
        let _ = rx.recv().await;
    }
}

/// At most this many `/proc` entries are read per scan: a scan is bounded even on a machine
/// running an absurd number of processes (those past the cap are not seen).
const MAX_PROC_ENTRIES: usize = 1 << 20;

/// One process as `/proc/<pid>/stat` shows it.
struct Stat {
    ppid: u32,
    zombie: bool,
}

fn read_stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses: split at the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some(Stat {
        ppid,
        zombie: state == "Z" || state == "X",
    })
}

/// Every live (non-zombie) process, by pid, with its parent.
fn process_table() -> BTreeMap<u32, u32> {
    let mut table = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in dir.flatten().take(MAX_PROC_ENTRIES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = read_stat(pid) {
            if !stat.zombie {
                table.insert(pid, stat.ppid);
            }
        }
    }
    table
}

/// Every live process below this one (children, their children, ...), sorted by pid; empty
/// where there is no `/proc`.
pub fn descendants() -> Vec<u32> {
    let table = process_table();
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, &ppid) in &table {
        children.entry(ppid).or_default().push(pid);
    }
    let keeper = keeper_pid();
    let mut out = Vec::new();
    let mut todo = vec![std::process::id()];
    while let Some(pid) = todo.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            if Some(child) == keeper {
                continue;
            }
            out.push(child);
            todo.push(child);
        }
    }
    out.sort_unstable();
    out
}

/// Direct children of this process that the library did not start (zombies included).
fn strangers() -> Vec<(u32, bool)> {
    let me = std::process::id();
    let known = lock_started().clone();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten().take(MAX_PROC_ENTRIES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if known.contains(&pid) {
            continue;
        }
        if let Some(stat) = read_stat(pid) {
            if stat.ppid == me {
                out.push((pid, stat.zombie));
            }
        }
    }
    out
}

/// Rounds of [`sweep_escaped`]: killing an escaped process may orphan its own children, which
/// are reparented here and found by the next round.
const SWEEP_ROUNDS: usize = 8;

/// Kills (SIGKILL, its process group too when it leads one) and reaps every child of this
/// process that the library did not start — with [`become_subreaper`], the escaped
/// descendants of servers and helpers. Returns how many processes it ended. Meant for a
/// program whose only children are the library's (see the module docs).
pub fn sweep_escaped() -> usize {
    let mut ended = 0;
    for _ in 0..SWEEP_ROUNDS {
        let found = strangers();
        if found.is_empty() {
            break;
        }
        for (pid, zombie) in found {
            let Ok(id) = libc::pid_t::try_from(pid) else {
                continue;
            };
            if !zombie {
                // SAFETY: plain signal syscalls on a pid that is our own child (it cannot be
                // reused before we reap it).
                unsafe {
                    if libc::getpgid(id) == id {
                        libc::kill(-id, libc::SIGKILL);
                    }
                    libc::kill(id, libc::SIGKILL);
                }
                tracing::warn!(target: "switchboard::server", pid, "ended a process that escaped its server's process group");
            }
            if reap(id) {
                ended += usize::from(!zombie);
            }
        }
    }
    ended
}

/// Waits (up to a second) for our child `pid` to exit, and reaps it.
fn reap(pid: libc::pid_t) -> bool {
    for _ in 0..200 {
        let mut status = 0;
        // SAFETY: waitpid on our own child with WNOHANG.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid || r < 0 {
            return r == pid;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Raises this process's soft limit on open files to its hard limit (as most servers and
/// browsers do at start), capped at 1,048,576; returns the soft limit now in force. Every
/// stdio server takes three descriptors and every HTTP connection one, so the usual soft
/// limit of 1,024 is reached by a few hundred servers or calls.
pub fn raise_open_files_limit() -> io::Result<u64> {
    const CAP: libc::rlim_t = 1 << 20;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(io::Error::last_os_error());
        }
        let want = limit.rlim_max.min(CAP);
        if want > limit.rlim_cur {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(io::Error::last_os_error());
            }
            limit.rlim_cur = want;
        }
    }
    #[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not everywhere
    Ok(u64::from(limit.rlim_cur))
}
