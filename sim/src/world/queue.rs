//! The world's event queue: events in order of (time, sequence number). The heap orders only
//! those keys with the slot of the event, so its sifting moves 24 bytes per entry instead of
//! whole events; the events sit in slots reused as they are taken.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use switchboard_core::Instant;

/// Events in order of (time, sequence number); sequence numbers are unique, so the order is
/// total and the same whatever the layout.
#[derive(Debug)]
pub(super) struct Queue<E> {
    heap: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    slots: Vec<Option<E>>,
    free: Vec<usize>,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<E> Queue<E> {
    /// Queue `ev` for `at`, after every event already queued for `at` with a smaller `seq`.
    pub(super) fn push(&mut self, at: Instant, seq: u64, ev: E) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(ev);
                slot
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.heap.push(Reverse((at, seq, slot)));
    }

    /// When the first event is due.
    pub(super) fn peek_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The first event (the earliest time, then the smallest sequence number).
    pub(super) fn pop(&mut self) -> Option<E> {
        let Reverse((_, _, slot)) = self.heap.pop()?;
        let ev = self.slots[slot].take();
        debug_assert!(ev.is_some(), "a queued slot was empty");
        self.free.push(slot);
        ev
    }

    pub(super) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;
    use std::time::Duration;
    use switchboard_core::Instant;

    /// The queue hands events out by (time, sequence number), slots reused or not.
    #[test]
    fn events_come_out_by_time_then_sequence() {
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        let mut q = Queue::default();
        q.push(t(5), 1, "a");
        q.push(t(1), 2, "b");
        q.push(t(5), 3, "c");
        assert_eq!(q.peek_at(), Some(t(1)));
        assert_eq!(q.pop(), Some("b"));
        q.push(t(5), 0, "d");
        q.push(t(2), 4, "e");
        assert_eq!(q.pop(), Some("e"));
        assert_eq!(q.pop(), Some("d"));
        assert_eq!(q.pop(), Some("a"));
        assert_eq!(q.pop(), Some("c"));
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }
}
