//! Where the library's tasks run — the library's own executor thread, an executor the embedder gave to
//! [`Builder::executor`](crate::Builder::executor), or any executor's spawn function given to
//! [`Builder::spawner`](crate::Builder::spawner) — and the one-value channel calls reply on.
//!
//! Every task is an `async_task` task whatever runs it, so the driver and the transports hold
//! the same `Task` handle (cancel on drop, `cancel().await`, `detach`, `is_finished`) in
//! every setup. For an embedder's spawn function each task becomes one long-lived future
//! (a pump) that the embedder's executor polls with its own waker: a wake-up of the task
//! hands its `Runnable` to the pump and wakes the pump, so the embedder's spawn function runs
//! once per task, not once per wake-up, and no wake-up crosses to a thread of ours.

use async_executor::{Executor, Task};
use async_task::Runnable;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// One of the library's tasks, as handed to the function given to
/// [`Builder::spawner`](crate::Builder::spawner): the embedder's executor polls it to
/// completion. It never blocks, and it ends by itself once the library is done with the task.
pub type TaskFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// An embedder's spawn function. It may be called from any thread (a task woken by the IO
/// reactor is rescheduled from the reactor's thread), so it must not rely on a thread-local
/// runtime context: with tokio, capture a `Handle`.
type SpawnFn = dyn Fn(TaskFuture) + Send + Sync;

/// Spawns the driver's and the transports' tasks. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Spawner {
    on: On,
}

#[derive(Clone, Default)]
enum On {
    /// The library's own executor thread ([`global`]).
    #[default]
    Global,
    /// A smol executor: tasks go straight to its queue (no pump in between).
    Executor(Arc<Executor<'static>>),
    /// Any executor, through its spawn function and one pump per task.
    Embedder(Arc<SpawnFn>),
}

impl Spawner {
    pub(crate) fn on(executor: Arc<Executor<'static>>) -> Self {
        Spawner {
            on: On::Executor(executor),
        }
    }

    pub(crate) fn with(spawn: impl Fn(TaskFuture) + Send + Sync + 'static) -> Self {
        Spawner {
            on: On::Embedder(Arc::new(spawn)),
        }
    }

    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Task<T> {
        match &self.on {
            On::Global => global().spawn(future),
            On::Executor(ex) => ex.spawn(future),
            On::Embedder(spawn) => spawn_pumped(&**spawn, future),
        }
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.on {
            On::Global => "Spawner(the library's executor thread)",
            On::Executor(_) => "Spawner(embedder's smol executor)",
            On::Embedder(_) => "Spawner(embedder's spawn function)",
        })
    }
}

/// The library's own executor for embedders that name none: one thread that runs its tasks
/// and, while they wait, drives async-io's reactor itself (so a readiness event wakes a task on
/// the thread that polls it). Started on first use; it lives as long as the process, like the
/// reactor.
fn global() -> &'static Executor<'static> {
    static GLOBAL: std::sync::OnceLock<Executor<'static>> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("switchboard".into())
            .spawn(|| loop {
                // A panicking task must not take every other task's executor with it.
                let run = std::panic::catch_unwind(|| {
                    async_io::block_on(global().run(futures_lite::future::pending::<()>()))
                });
                if run.is_err() {
                    tracing::error!(target: "switchboard", "a task panicked; the executor goes on");
                }
            });
        if let Err(e) = spawned {
            // Without its thread nothing would ever run: fail loudly at the first spawn.
            panic!("switchboard: cannot start the executor thread: {e}");
        }
        Executor::new()
    })
}

/// What a task and its pump share.
#[derive(Default)]
struct PumpState {
    /// The task, when it is scheduled and waits for the pump to run it.
    runnable: Option<Runnable>,
    /// The pump's waker, from its last `Pending`.
    waker: Option<Waker>,
    /// The task's future completed or was dropped: the pump ends.
    done: bool,
    /// The embedder's executor dropped the pump: a later schedule drops the task instead of
    /// parking it where nobody would run it (and where it would keep itself alive).
    pump_gone: bool,
}

type Shared = Arc<Mutex<PumpState>>;

fn spawn_pumped<T: Send + 'static>(
    spawn: &SpawnFn,
    future: impl Future<Output = T> + Send + 'static,
) -> Task<T> {
    let state = Shared::default();
    let done = Done(state.clone());
    let future = async move {
        let _done = done;
        future.await
    };
    let schedule = {
        let state = state.clone();
        move |runnable: Runnable| {
            let (waker, orphan) = {
                let mut s = lock(&state);
                if s.pump_gone {
                    (None, Some(runnable))
                } else {
                    s.runnable = Some(runnable);
                    (s.waker.take(), None)
                }
            };
            drop(orphan);
            if let Some(w) = waker {
                w.wake();
            }
        }
    };
    let (runnable, task) = async_task::spawn(future, schedule);
    lock(&state).runnable = Some(runnable);
    spawn(Box::pin(Pump(state)));
    task
}

/// Marks the pump's task as over when the task's future is dropped (completed or cancelled).
struct Done(Shared);

impl Drop for Done {
    fn drop(&mut self) {
        let waker = {
            let mut s = lock(&self.0);
            s.done = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The future the embedder's executor runs for one task: it runs the task each time the task
/// is scheduled, and ends when the task's future is gone.
struct Pump(Shared);

impl Pump {
    /// `Pending` with the waker stored, or `Ready` if the task is over; `None` if the task is
    /// scheduled already (the caller runs it).
    fn park(s: &mut PumpState, cx: &Context<'_>) -> Option<Poll<()>> {
        if s.runnable.is_some() {
            return None;
        }
        if s.done {
            return Some(Poll::Ready(()));
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Some(Poll::Pending)
    }
}

impl Future for Pump {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let runnable = {
            let mut s = lock(&self.0);
            if let Some(poll) = Self::park(&mut s, cx) {
                return poll;
            }
            s.runnable.take()
        };
        if let Some(r) = runnable {
            r.run();
        }
        let mut s = lock(&self.0);
        match Self::park(&mut s, cx) {
            Some(poll) => poll,
            None => {
                // Woken while it ran: yield to the embedder's other tasks, then run it again.
                drop(s);
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        let orphan = {
            let mut s = lock(&self.0);
            s.pump_gone = true;
            s.waker = None;
            s.runnable.take()
        };
        // Dropping the runnable cancels the task and drops its future (outside the lock: the
        // future's `Done` takes it).
        drop(orphan);
    }
}

/// A one-value channel for call replies: one allocation, no event listener, no queue. The
/// receiver resolves to `Err(Closed)` if the sender is dropped without sending.
pub(crate) fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    }));
    (OneshotSender(Some(slot.clone())), OneshotReceiver(slot))
}

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section below is a few field updates: a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct OneshotSender<T>(Option<Arc<Mutex<Slot<T>>>>);

/// The sender went away without sending.
#[derive(Debug)]
pub(crate) struct Closed;

impl<T> OneshotSender<T> {
    /// Hands `value` to the receiver; gives it back if the receiver is gone.
    pub(crate) fn send(mut self, value: T) -> Result<(), T> {
        let Some(slot) = self.0.take() else {
            return Err(value);
        };
        let waker = {
            let mut s = lock(&slot);
            if s.receiver_gone {
                return Err(value);
            }
            s.value = Some(value);
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            let waker = {
                let mut s = lock(&slot);
                s.sender_gone = true;
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

pub(crate) struct OneshotReceiver<T>(Arc<Mutex<Slot<T>>>);

impl<T> Future for OneshotReceiver<T> {
    type Output = Result<T, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = lock(&self.0);
        if let Some(value) = s.value.take() {
            return Poll::Ready(Ok(value));
        }
        if s.sender_gone {
            return Poll::Ready(Err(Closed));
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for OneshotReceiver<T> {
    fn drop(&mut self) {
        let value = {
            let mut s = lock(&self.0);
            s.receiver_gone = true;
            s.waker = None;
            s.value.take()
        };
        drop(value);
    }
}
