//! Event subscriptions: every subscriber gets its own bounded queue of the core's [`Event`]s.
//! The driver never waits on a subscriber: when one's queue is full, the events it misses are
//! counted, and it reads [`RecvError::Lagged`] with that count where they would have been —
//! memory stays bounded whether or not anybody reads.

use async_channel::{Receiver, Sender, TryRecvError, TrySendError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use switchboard_core::manager::Event;

/// How many events a subscriber's queue holds before it lags (see [`Events`]).
pub const EVENT_QUEUE_LEN: usize = 1024;

/// What a subscriber's queue holds: an event, or how many it missed just there. (Events are
/// not boxed: the queue is bounded anyway, and boxing would cost an allocation per event.)
#[allow(clippy::large_enum_variant)]
enum Slot {
    Event(Event),
    Lagged(u64),
}

/// Why [`Events::recv`] returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The subscriber did not keep up: `missed` events were dropped here, between the event
    /// before and the event after. Keep reading.
    #[error("missed {missed} events")]
    Lagged {
        /// How many events were dropped.
        missed: u64,
    },
    /// The switchboard has shut down and every event was read.
    #[error("the switchboard has shut down")]
    Closed,
}

/// One subscription to a switchboard's events ([`Switchboard::events`](crate::Switchboard::events)),
/// in the order the core produced them. Bounded: it holds at most [`EVENT_QUEUE_LEN`] unread
/// events; past that, events are counted instead and reported as [`RecvError::Lagged`].
/// Dropping it unsubscribes.
pub struct Events {
    rx: Receiver<Slot>,
    missed: Arc<AtomicU64>,
}

impl Events {
    /// The next event; `Err(Lagged)` where events were missed, `Err(Closed)` at the end.
    pub async fn recv(&self) -> Result<Event, RecvError> {
        match self.try_recv() {
            Err(TryRecvError::Empty) => {}
            other => return other.map_err(|_| RecvError::Closed).and_then(|r| r),
        }
        match self.rx.recv().await {
            Ok(slot) => unslot(slot),
            Err(_) => Err(self.take_missed().unwrap_or(RecvError::Closed)),
        }
    }

    /// The next event if one is queued (`Err(Empty)` if none). The inner `Result` is
    /// `Err(Lagged)` where events were missed.
    pub fn try_recv(&self) -> Result<Result<Event, RecvError>, TryRecvError> {
        match self.rx.try_recv() {
            Ok(slot) => Ok(unslot(slot)),
            Err(e) => match self.take_missed() {
                // Missed after the last queued event: say so now, not at the next event.
                Some(lagged) => Ok(Err(lagged)),
                None => Err(e),
            },
        }
    }

    /// How many events are queued unread.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether no event is queued.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    fn take_missed(&self) -> Option<RecvError> {
        match self.missed.swap(0, Ordering::AcqRel) {
            0 => None,
            missed => Some(RecvError::Lagged { missed }),
        }
    }
}

fn unslot(slot: Slot) -> Result<Event, RecvError> {
    match slot {
        Slot::Event(e) => Ok(e),
        Slot::Lagged(missed) => Err(RecvError::Lagged { missed }),
    }
}

struct Subscriber {
    tx: Sender<Slot>,
    missed: Arc<AtomicU64>,
}

impl Subscriber {
    /// Queues `ev`, or counts it; false once the subscription is gone.
    fn offer(&self, ev: &Event) -> bool {
        let missed = self.missed.swap(0, Ordering::AcqRel);
        if missed > 0 {
            match self.tx.try_send(Slot::Lagged(missed)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    self.missed.fetch_add(missed + 1, Ordering::AcqRel);
                    return true;
                }
                Err(TrySendError::Closed(_)) => return false,
            }
        }
        match self.tx.try_send(Slot::Event(ev.clone())) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.missed.fetch_add(1, Ordering::AcqRel);
                true
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

/// Every subscription of one switchboard; shared by the handle (which adds) and the driver
/// (which publishes).
#[derive(Clone, Default)]
pub(crate) struct Subscribers {
    inner: Arc<Mutex<Vec<Subscriber>>>,
    capacity: Option<usize>,
}

impl Subscribers {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Subscribers {
            inner: Arc::default(),
            capacity: Some(capacity.max(1)),
        }
    }

    pub(crate) fn subscribe(&self) -> Events {
        let (tx, rx) = async_channel::bounded(self.capacity.unwrap_or(EVENT_QUEUE_LEN));
        let missed = Arc::new(AtomicU64::new(0));
        if let Ok(mut subs) = self.inner.lock() {
            subs.push(Subscriber {
                tx,
                missed: missed.clone(),
            });
        }
        Events { rx, missed }
    }

    /// Whether anybody is subscribed (nobody: events need not be built).
    pub(crate) fn any(&self) -> bool {
        self.inner.lock().is_ok_and(|s| !s.is_empty())
    }

    pub(crate) fn publish(&self, ev: &Event) {
        if let Ok(mut subs) = self.inner.lock() {
            subs.retain(|s| s.offer(ev));
        }
    }

    /// Ends every subscription: readers get what is queued, then `Closed`.
    pub(crate) fn close(&self) {
        if let Ok(mut subs) = self.inner.lock() {
            subs.clear();
        }
    }
}
