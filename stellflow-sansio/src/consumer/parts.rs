//! The assigned partitions, each under a small id ([`PartId`]) that the hot paths carry (a
//! Fetch's layout, a queued blob) instead of looking its name up, and the partitions to look
//! at in the consumer's next pass: those changed since the last one ("woken") and those whose
//! wait ends by then. A pass looks at these only, never at every assigned partition, so its
//! cost follows what changed, not how many partitions are assigned.
//!
//! Every mutable access wakes the partition ([`Parts::get_mut`], [`Parts::by_id_mut`]): any
//! change may make it fetchable or give it start work, and a pass that finds nothing to do
//! for it lets it sleep until the next change or [`Parts::wake_at`].

use super::TopicPartition;
pub(crate) use super::partition::PartId;
use super::partition::PartState;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Instant;

/// One assigned partition.
#[derive(Debug)]
struct Slot {
    tp: TopicPartition,
    state: PartState,
    /// In the woken queue.
    woken: bool,
    /// In a broker's queue of partitions to fetch (`consumer/schedule.rs`).
    queued: bool,
}

/// The assigned partitions, by name (in name order) and by id, and the ones to look at next.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    index: BTreeMap<TopicPartition, PartId>,
    slots: Vec<Option<Slot>>,
    free: Vec<PartId>,
    woken: VecDeque<PartId>,
    timers: BinaryHeap<Reverse<(Instant, PartId)>>,
}

impl Parts {
    /// How many partitions are assigned.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether none is.
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Whether `tp` is assigned.
    pub(crate) fn contains_key(&self, tp: &TopicPartition) -> bool {
        self.index.contains_key(tp)
    }

    /// The id of `tp`, if assigned.
    pub(crate) fn id_of(&self, tp: &TopicPartition) -> Option<PartId> {
        self.index.get(tp).copied()
    }

    /// The state of `tp`.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<&PartState> {
        self.by_id(self.id_of(tp)?).map(|(_, p)| p)
    }

    /// The state of `tp`, to change it (which wakes it).
    pub(crate) fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut PartState> {
        let id = self.id_of(tp)?;
        self.by_id_mut(id).map(|(_, p)| p)
    }

    /// The partition under `id` and its state.
    pub(crate) fn by_id(&self, id: PartId) -> Option<(&TopicPartition, &PartState)> {
        let s = self.slots.get(id as usize)?.as_ref()?;
        Some((&s.tp, &s.state))
    }

    /// The partition under `id` and its state, to change it (which wakes it).
    pub(crate) fn by_id_mut(&mut self, id: PartId) -> Option<(&TopicPartition, &mut PartState)> {
        let s = self.slots.get_mut(id as usize)?.as_mut()?;
        if !s.woken {
            s.woken = true;
            self.woken.push_back(id);
        }
        Some((&s.tp, &mut s.state))
    }

    /// The partition under `id` and its state, for a change that neither lets it fetch nor
    /// gives it start work (its delivered position, a blob parked while it is paused): it is
    /// not woken.
    pub(crate) fn by_id_mut_quiet(&mut self, id: PartId) -> Option<&mut PartState> {
        Some(&mut self.slots.get_mut(id as usize)?.as_mut()?.state)
    }

    /// The assigned partitions in name order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &TopicPartition> {
        self.index.keys()
    }

    /// Assigns `tp` with `state` (replacing any state it had), woken.
    pub(crate) fn insert(&mut self, tp: TopicPartition, state: PartState) -> PartId {
        if let Some(id) = self.id_of(&tp) {
            if let Some((_, p)) = self.by_id_mut(id) {
                *p = state;
            }
            return id;
        }
        // Partitions of one topic share one name allocation, so that comparing their names
        // is a pointer comparison.
        let tp = match self.index.range(&tp..).next() {
            Some((next, _)) if next.topic == tp.topic => TopicPartition {
                topic: next.topic.clone(),
                partition: tp.partition,
            },
            _ => match self.index.range(..&tp).next_back() {
                Some((prev, _)) if prev.topic == tp.topic => TopicPartition {
                    topic: prev.topic.clone(),
                    partition: tp.partition,
                },
                _ => tp,
            },
        };
        let slot = Some(Slot {
            tp: tp.clone(),
            state,
            woken: false,
            queued: false,
        });
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(s) = self.slots.get_mut(id as usize) {
                    *s = slot;
                }
                id
            }
            None => {
                self.slots.push(slot);
                PartId::try_from(self.slots.len() - 1).unwrap_or(PartId::MAX)
            }
        };
        self.index.insert(tp, id);
        self.wake(id);
        id
    }

    /// Unassigns `tp`, returning its state; its id may be given to another partition later.
    pub(crate) fn remove(&mut self, tp: &TopicPartition) -> Option<PartState> {
        let id = self.index.remove(tp)?;
        let slot = self.slots.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some(slot.state)
    }

    /// Puts `id` in the queue of the next pass (once, however often it is woken).
    pub(crate) fn wake(&mut self, id: PartId) {
        if let Some(Some(s)) = self.slots.get_mut(id as usize)
            && !s.woken
        {
            s.woken = true;
            self.woken.push_back(id);
        }
    }

    /// Wakes `id` at `at` (at once if `at` is not after `now`).
    pub(crate) fn wake_at(&mut self, id: PartId, at: Instant, now: Instant) {
        if at <= now {
            self.wake(id);
        } else {
            self.timers.push(Reverse((at, id)));
        }
    }

    /// Wakes every partition whose wait ends by `now`.
    pub(crate) fn wake_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            self.wake(id);
        }
    }

    /// The earliest instant a waiting partition wakes at (a partition woken meanwhile by a
    /// change may still have its instant here: it is then looked at once more, for nothing).
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _))| *at)
    }

    /// Marks `id` as in a broker's fetch queue.
    pub(crate) fn set_queued(&mut self, id: PartId) {
        if let Some(Some(s)) = self.slots.get_mut(id as usize) {
            s.queued = true;
        }
    }

    /// Whether `id` is in a broker's fetch queue.
    pub(crate) fn is_queued(&self, id: PartId) -> bool {
        matches!(self.slots.get(id as usize), Some(Some(s)) if s.queued)
    }

    /// Takes `id` out of the fetch queues: whether it was in one (an entry left over from a
    /// partition that left, or a second entry of one partition, is not).
    pub(crate) fn take_queued(&mut self, id: PartId) -> bool {
        match self.slots.get_mut(id as usize) {
            Some(Some(s)) => std::mem::take(&mut s.queued),
            _ => false,
        }
    }

    /// Takes the queue of the next pass, in the order the partitions were woken; a partition
    /// changed from here on is woken again.
    pub(crate) fn take_woken(&mut self) -> Vec<PartId> {
        let mut ids = Vec::with_capacity(self.woken.len());
        for id in self.woken.drain(..) {
            // An id queued twice (freed and given again while queued) or whose partition left
            // is skipped: each assigned partition comes once.
            if let Some(Some(s)) = self.slots.get_mut(id as usize)
                && s.woken
            {
                s.woken = false;
                ids.push(id);
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::{PartState, Parts};
    use crate::topic_partition::TopicPartition;
    use std::time::{Duration, Instant};

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn a_change_wakes_a_partition_once_and_a_timer_wakes_it_when_due() {
        let mut parts = Parts::default();
        let a = parts.insert(tp(0), PartState::new(1));
        let b = parts.insert(tp(1), PartState::new(2));
        assert_eq!(parts.take_woken(), vec![a, b]);
        assert!(parts.take_woken().is_empty(), "nothing changed since");
        parts.get_mut(&tp(1)).unwrap().paused = true;
        parts.by_id_mut(b).unwrap().1.paused = false;
        assert_eq!(parts.take_woken(), vec![b], "woken once for two changes");
        let now = Instant::now();
        parts.wake_at(a, now + Duration::from_secs(1), now);
        parts.wake_due(now);
        assert!(parts.take_woken().is_empty(), "not due yet");
        assert_eq!(parts.next_wake(), Some(now + Duration::from_secs(1)));
        parts.wake_due(now + Duration::from_secs(1));
        assert_eq!(parts.take_woken(), vec![a]);
        assert_eq!(parts.next_wake(), None);
    }

    #[test]
    fn a_freed_id_is_given_again_and_names_stay_in_order() {
        let mut parts = Parts::default();
        let a = parts.insert(tp(2), PartState::new(1));
        parts.insert(tp(1), PartState::new(2));
        assert!(parts.remove(&tp(2)).is_some());
        assert!(parts.by_id(a).is_none());
        let c = parts.insert(tp(0), PartState::new(3));
        assert_eq!(c, a, "the freed id is reused");
        assert_eq!(parts.by_id(c).unwrap().1.epoch, 3);
        let names: Vec<i32> = parts.keys().map(|t| t.partition).collect();
        assert_eq!(names, vec![0, 1]);
        let (t0, t1) = (parts.by_id(c).unwrap().0, parts.keys().nth(1).unwrap());
        assert!(
            std::sync::Arc::ptr_eq(&t0.topic, &t1.topic),
            "one name allocation"
        );
        assert_eq!(parts.len(), 2);
        assert_eq!(parts.get(&tp(1)).unwrap().epoch, 2);
    }
}
