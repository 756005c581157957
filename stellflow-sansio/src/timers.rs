//! A timer queue: deadlines in, the earliest one out.
//!
//! Entries are never cancelled in place; the owner checks, when a timer fires or is peeked,
//! whether what it refers to still exists and drops it otherwise (lazy deletion). In steady
//! state scheduling allocates nothing: the heap reuses its capacity.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Deadlines with a payload `K`, earliest first; ties fire in scheduling order.
#[derive(Debug)]
pub(crate) struct TimerQueue<K: Ord> {
    heap: BinaryHeap<Reverse<(Instant, u64, K)>>,
    seq: u64,
}

impl<K: Ord> Default for TimerQueue<K> {
    fn default() -> Self {
        TimerQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<K: Ord> TimerQueue<K> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Schedules `key` at `at`.
    pub(crate) fn schedule(&mut self, at: Instant, key: K) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, key)));
    }

    /// The earliest deadline and its key.
    pub(crate) fn peek(&self) -> Option<(Instant, &K)> {
        self.heap.peek().map(|Reverse((at, _, k))| (*at, k))
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<(Instant, K)> {
        self.heap.pop().map(|Reverse((at, _, k))| (at, k))
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<K> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now => self.pop().map(|(_, k)| k),
            _ => None,
        }
    }

    /// Entries, stale ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no entry is scheduled.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn earliest_first_and_only_when_due() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new();
        q.schedule(t0 + Duration::from_secs(3), 'c');
        q.schedule(t0 + Duration::from_secs(1), 'a');
        q.schedule(t0 + Duration::from_secs(1), 'b');
        assert_eq!(q.peek(), Some((t0 + Duration::from_secs(1), &'a')));
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.pop_due(t0 + Duration::from_secs(2)), Some('a'));
        assert_eq!(q.pop_due(t0 + Duration::from_secs(2)), Some('b'));
        assert_eq!(q.pop_due(t0 + Duration::from_secs(2)), None);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop(), Some((t0 + Duration::from_secs(3), 'c')));
        assert!(q.is_empty());
    }
}
