//! The in-flight table of one connection: requests sent and not yet answered, keyed by
//! correlation id.
//!
//! Responses may come back in any order (PROTOCOL.md §1.1), so matching is by id, never FIFO.
//! Ids are unique per connection: they count up from 0, wrap from `i32::MAX` back to 0 and skip
//! any id still in use, so even a request that waits for a very long time keeps its id.

use std::collections::HashMap;

/// Requests in flight on one connection, with a bound on how many.
#[derive(Debug)]
pub(crate) struct InFlight<T> {
    entries: HashMap<i32, T>,
    next: i32,
    max: usize,
}

impl<T> InFlight<T> {
    /// An empty table holding at most `max` requests (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        InFlight {
            entries: HashMap::with_capacity(max.min(1024)),
            next: 0,
            max,
        }
    }

    /// An empty table whose first correlation id is `start` (tests of wrapping).
    #[cfg(test)]
    pub(crate) fn starting_at(max: usize, start: i32) -> Self {
        let mut t = Self::new(max);
        t.next = start.max(0);
        t
    }

    /// Whether another request may be sent.
    pub(crate) fn has_room(&self) -> bool {
        self.entries.len() < self.max
    }

    /// Requests in flight.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is in flight.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records `value` under a fresh correlation id and returns the id.
    ///
    /// Callers check [`InFlight::has_room`] first; the table itself never refuses (it can
    /// always find a free id, since it holds far fewer than 2³¹ entries).
    pub(crate) fn insert(&mut self, value: T) -> i32 {
        let id = self.fresh_id();
        self.entries.insert(id, value);
        id
    }

    fn fresh_id(&mut self) -> i32 {
        loop {
            let id = self.next;
            self.next = if id == i32::MAX { 0 } else { id + 1 };
            if !self.entries.contains_key(&id) {
                return id;
            }
        }
    }

    /// Takes the request answered by `correlation_id`, if it is in flight.
    pub(crate) fn remove(&mut self, correlation_id: i32) -> Option<T> {
        self.entries.remove(&correlation_id)
    }

    /// The request under `correlation_id`.
    pub(crate) fn get(&self, correlation_id: i32) -> Option<&T> {
        self.entries.get(&correlation_id)
    }

    /// The request under `correlation_id`, mutably.
    pub(crate) fn get_mut(&mut self, correlation_id: i32) -> Option<&mut T> {
        self.entries.get_mut(&correlation_id)
    }

    /// Finds the id of the first entry matching `pred`.
    #[cfg(test)]
    pub(crate) fn find(&self, mut pred: impl FnMut(&T) -> bool) -> Option<i32> {
        self.entries
            .iter()
            .find_map(|(id, v)| pred(v).then_some(*id))
    }

    /// Takes every request (the connection is gone), in correlation-id order.
    pub(crate) fn drain_sorted(&mut self) -> Vec<(i32, T)> {
        let mut all: Vec<(i32, T)> = self.entries.drain().collect();
        all.sort_by_key(|(id, _)| *id);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_matched_in_any_order() {
        let mut t = InFlight::new(3);
        let a = t.insert("a");
        let b = t.insert("b");
        let c = t.insert("c");
        assert!(!t.has_room());
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(t.remove(c), Some("c"));
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.remove(a), None, "an answered id is unknown afterwards");
        assert!(t.has_room());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn wraps_and_skips_ids_in_use() {
        let mut t = InFlight::starting_at(10, i32::MAX - 1);
        let x = t.insert(1);
        let y = t.insert(2);
        let z = t.insert(3);
        assert_eq!((x, y, z), (i32::MAX - 1, i32::MAX, 0));
        // Force the counter onto an id still in use.
        let mut t = InFlight::starting_at(10, 5);
        assert_eq!(t.insert('a'), 5);
        t.next = 5;
        assert_eq!(t.insert('b'), 6);
    }

    #[test]
    fn drain_returns_everything_in_order() {
        let mut t = InFlight::new(8);
        for i in 0..5 {
            t.insert(i);
        }
        let all = t.drain_sorted();
        assert_eq!(
            all.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        assert!(t.is_empty());
        assert_eq!(t.find(|v| *v == 3), None);
    }
}
