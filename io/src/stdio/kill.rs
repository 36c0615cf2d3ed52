//! The registry of live process groups and the synchronous kill: whatever state the async
//! world is in (a dropped handle, a cancelled close, a panicking driver), every group this
//! library started gets a SIGKILL from plain syscalls, with no runtime needed.

use super::StdioTransport;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

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
        crate::process::hold_group(pgid);
    }

    /// Removes `pid`; returns its group if it was still registered (then the caller owns
    /// killing it).
    pub(crate) fn take(&self, pid: u32) -> Option<i32> {
        let pgid = self.lock().remove(&pid);
        if let Some(pgid) = pgid {
            crate::process::release_group(pgid);
        }
        pgid
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
            crate::process::release_group(pgid);
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
pub(super) fn pid_to_pgid(pid: u32) -> i32 {
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
        // kill-on-drop semantics and is reaped off-thread (see `proc`).
    }
}
