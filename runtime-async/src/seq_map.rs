//! [`SeqMap`]: values keyed by ids handed out in increasing order (produce ids), for the
//! callers an adapter keeps waiting per record.
//!
//! A hash map costs a random memory access per insert and per remove, and with hundreds of
//! thousands of records waiting (a full producer buffer of small records) that access misses
//! the cache every time. Produce ids are handed out in increasing order and mostly complete in
//! that order, so [`SeqMap`] keeps them in a ring indexed by `id - base`: an insert is a push at
//! the back, a remove an index, and completed ids leave from the front. A straggler (an id far
//! older than the rest, e.g. a record waiting for a leaderless partition) moves to a small side
//! map (ordered: stragglers are few) once the ring would hold more than twice as many gaps as values, so memory stays
//! proportional to the values held, whatever the order they complete in.

use std::collections::{BTreeMap, VecDeque};

/// Gaps the ring may always hold, whatever the number of values (amortises compaction).
const SLACK: usize = 4096;

/// A map from `u64` ids to values, fastest when ids are inserted in increasing order and
/// removed roughly in that order. Any order is correct.
#[derive(Debug)]
pub struct SeqMap<V> {
    /// The id of `ring[0]`.
    base: u64,
    ring: VecDeque<Option<V>>,
    /// Values with ids below `base`.
    old: BTreeMap<u64, V>,
    /// Values in `ring`.
    in_ring: usize,
}

impl<V> Default for SeqMap<V> {
    fn default() -> Self {
        SeqMap {
            base: 0,
            ring: VecDeque::new(),
            old: BTreeMap::new(),
            in_ring: 0,
        }
    }
}

impl<V> SeqMap<V> {
    /// Values held.
    pub fn len(&self) -> usize {
        self.in_ring + self.old.len()
    }

    /// Whether no value is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts `value` at `id`, returning the value it replaces.
    pub fn insert(&mut self, id: u64, value: V) -> Option<V> {
        if self.ring.is_empty() {
            self.base = id;
        }
        if id < self.base {
            return self.old.insert(id, value);
        }
        let Ok(i) = usize::try_from(id - self.base) else {
            return self.old.insert(id, value);
        };
        if i >= self.ring.len() {
            self.ring.resize_with(i + 1, || None);
        }
        let before = self.ring.get_mut(i).and_then(|slot| slot.replace(value));
        if before.is_none() {
            self.in_ring += 1;
        }
        self.compact();
        before
    }

    /// Removes and returns the value at `id`.
    pub fn remove(&mut self, id: u64) -> Option<V> {
        if id < self.base {
            return self.old.remove(&id);
        }
        let i = usize::try_from(id - self.base).ok()?;
        let value = self.ring.get_mut(i)?.take()?;
        self.in_ring -= 1;
        while let Some(None) = self.ring.front() {
            self.ring.pop_front();
            self.base += 1;
        }
        self.compact();
        Some(value)
    }

    /// Drops every value.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.old.clear();
        self.in_ring = 0;
    }

    /// Removes every value, in no particular order (the tests' check that none is lost).
    #[cfg(test)]
    pub fn drain(&mut self) -> impl Iterator<Item = V> + '_ {
        self.in_ring = 0;
        let ring = self.ring.drain(..).flatten();
        ring.chain(std::mem::take(&mut self.old).into_values())
    }

    /// Moves the oldest values to the side map while the ring holds more than twice as many
    /// gaps as values (plus [`SLACK`]).
    fn compact(&mut self) {
        while self.ring.len() > 2 * self.in_ring + SLACK {
            let Some(front) = self.ring.pop_front() else {
                return;
            };
            if let Some(v) = front {
                self.old.insert(self.base, v);
                self.in_ring -= 1;
            }
            self.base += 1;
            while let Some(None) = self.ring.front() {
                self.ring.pop_front();
                self.base += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SLACK, SeqMap};

    #[test]
    fn insert_remove_len() {
        let mut m = SeqMap::default();
        m.insert(10, "a");
        m.insert(11, "b");
        assert_eq!(m.remove(11), Some("b"));
        assert_eq!(m.remove(11), None);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn in_order_and_out_of_order_removes_find_their_values() {
        let mut m = SeqMap::default();
        for id in 100..200u64 {
            assert_eq!(m.insert(id, id * 2), None);
        }
        assert_eq!(m.insert(150, 0), Some(300));
        assert_eq!(m.insert(150, 300), Some(0));
        for id in (100..200u64).rev().step_by(2) {
            assert_eq!(m.remove(id), Some(id * 2));
        }
        for id in (100..200u64).step_by(2) {
            assert_eq!(m.remove(id), Some(id * 2));
        }
        assert!(m.is_empty());
        assert_eq!(m.remove(150), None);
        assert_eq!(m.remove(5), None);
        assert_eq!(m.remove(u64::MAX), None);
    }

    #[test]
    fn an_id_below_the_ring_is_kept_too() {
        let mut m = SeqMap::default();
        m.insert(10, 'a');
        m.insert(3, 'b');
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove(3), Some('b'));
        assert_eq!(m.remove(10), Some('a'));
        assert!(m.is_empty());
    }

    #[test]
    fn a_straggler_does_not_make_the_ring_grow_with_every_later_id() {
        let mut m = SeqMap::default();
        m.insert(0, 0u64);
        for id in 1..1_000_000u64 {
            m.insert(id, id);
            assert_eq!(m.remove(id), Some(id));
            assert!(
                m.ring.len() <= 2 * m.in_ring + SLACK + 1,
                "ring {}",
                m.ring.len()
            );
        }
        assert_eq!(m.len(), 1);
        assert_eq!(m.remove(0), Some(0));
        assert!(m.is_empty());
    }

    #[test]
    fn drain_hands_out_every_value_once() {
        let mut m = SeqMap::default();
        m.insert(0, 0u64);
        for id in 1..10_000u64 {
            m.insert(id, id);
            if id % 3 != 0 {
                m.remove(id);
            }
        }
        let expect = m.len();
        let mut all: Vec<u64> = m.drain().collect();
        all.sort_unstable();
        assert_eq!(all.len(), expect);
        assert_eq!(all[0], 0);
        assert!(all[1..].iter().all(|v| v % 3 == 0));
        assert!(m.is_empty());
        m.insert(7, 7);
        assert_eq!(m.remove(7), Some(7));
        m.insert(0, 0);
        m.insert(9_000, 9);
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.remove(0), None);
    }
}
