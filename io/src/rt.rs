//! Where the library's tasks run: smol's global executor, or an executor the embedder gave to
//! [`Builder::executor`](crate::Builder::executor).

use smol::{Executor, Task};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Spawns the driver's and the transports' tasks. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Spawner {
    /// `None`: smol's global executor (`smol::spawn`).
    executor: Option<Arc<Executor<'static>>>,
}

impl Spawner {
    pub(crate) fn on(executor: Arc<Executor<'static>>) -> Self {
        Spawner {
            executor: Some(executor),
        }
    }

    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Task<T> {
        match &self.executor {
            Some(ex) => ex.spawn(future),
            None => smol::spawn(future),
        }
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.executor {
            Some(_) => "Spawner(embedder's executor)",
            None => "Spawner(smol global executor)",
        })
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
