//! Outstanding requests of one connection, matched to their answers by id.

use std::collections::BTreeMap;

/// Outstanding requests of one connection: ids increase per connection and each response is
/// matched exactly once. `T` is what the caller wants back when the answer comes.
#[derive(Debug, Clone)]
pub struct RequestTracker<T> {
    next_id: u64,
    pending: BTreeMap<u64, T>,
}

impl<T> Default for RequestTracker<T> {
    fn default() -> Self {
        RequestTracker {
            next_id: 0,
            pending: BTreeMap::new(),
        }
    }
}

impl<T> RequestTracker<T> {
    /// Issue a request id, tracked with `tag`; the caller writes the frame.
    pub fn issue(&mut self, tag: T) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, tag);
        id
    }

    /// Match a response; `None` for an unknown or already answered id.
    pub fn complete(&mut self, id: u64) -> Option<T> {
        self.pending.remove(&id)
    }

    /// Forget a request (timed out or cancelled); a late answer is then unknown.
    pub fn forget(&mut self, id: u64) -> Option<T> {
        self.pending.remove(&id)
    }

    /// The tag of an outstanding request, left in place.
    pub fn get(&self, id: u64) -> Option<&T> {
        self.pending.get(&id)
    }

    /// Is this request still waiting for its answer?
    pub fn is_pending(&self, id: u64) -> bool {
        self.pending.contains_key(&id)
    }

    /// How many requests are waiting for an answer.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Is no request waiting for an answer?
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Has this id ever been issued?
    pub fn was_issued(&self, id: u64) -> bool {
        id < self.next_id
    }

    /// Remove and return every outstanding request, in id order.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        std::mem::take(&mut self.pending).into_iter().collect()
    }
}
