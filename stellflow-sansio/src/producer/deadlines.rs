//! Per-partition deadlines — linger, retry backoff, delivery timeout — as a lazily checked
//! min-heap of `(instant, topic, partition)`: every change that can make a partition's next
//! deadline earlier pushes it ([`Deadlines::touch`]), [`Deadlines::earliest`] drops entries
//! that no longer match. Invariant: a partition whose next deadline is `d` has an entry at
//! or before `d`.

use super::topics::{PartitionState, Topics};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// What a partition's deadline depends on besides its own batches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeadlineRule {
    /// `producer.linger`.
    pub linger: Duration,
    /// `producer.max_in_flight_per_partition`.
    pub max_in_flight: usize,
    /// Whether batches may be sent (no producer id is awaited).
    pub sending: bool,
}

impl DeadlineRule {
    /// A partition's next deadline: its oldest batch's delivery timeout, and — when it could
    /// send (producer id known, leader known, room in flight) — its queued batch's retry time
    /// or its open batch's linger.
    pub(crate) fn of(self, ps: &PartitionState) -> Option<Instant> {
        let oldest = ps.queue.front().or(ps.open.as_ref());
        let expiry = oldest.filter(|b| !b.records.is_empty()).map(|b| b.deadline);
        if !self.sending || ps.leader.is_none() || ps.in_flight >= self.max_in_flight {
            return expiry;
        }
        let due = match ps.queue.front() {
            // In doubt: it waits for a round trip (the probe's answer wakes the producer).
            Some(b) if b.in_doubt.is_some() => None,
            Some(b) => b.retry_at,
            None => ps
                .open
                .as_ref()
                .filter(|b| !b.records.is_empty())
                .map(|b| b.created + self.linger),
        };
        match (expiry, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The heap of partition deadlines.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, usize, usize)>>,
}

impl Deadlines {
    /// Records partition `(ti, pi)`'s next deadline after a change that may have made it
    /// earlier (per batch, never per record). Keeps the heap within a few entries per
    /// partition by rebuilding it when stale entries pile up (amortised O(1) per push).
    pub(crate) fn touch(&mut self, topics: &Topics, rule: DeadlineRule, ti: usize, pi: usize) {
        let Some(d) = topics.part(ti, pi).and_then(|ps| rule.of(ps)) else {
            return;
        };
        if self.heap.len() >= 4 * topics.total_parts() + 64 {
            self.rebuild(topics, rule);
        }
        self.heap.push(Reverse((d, ti, pi)));
    }

    /// Rebuilds the heap from every partition (metadata changes, producer id known).
    pub(crate) fn rebuild(&mut self, topics: &Topics, rule: DeadlineRule) {
        self.heap.clear();
        for (ti, pi) in topics.all_parts() {
            if let Some(d) = topics.part(ti, pi).and_then(|ps| rule.of(ps)) {
                self.heap.push(Reverse((d, ti, pi)));
            }
        }
    }

    /// The earliest partition deadline. O(1) when nothing changed, otherwise O(log n) per
    /// stale entry dropped (amortised over the changes that pushed them).
    pub(crate) fn earliest(&mut self, topics: &Topics, rule: DeadlineRule) -> Option<Instant> {
        while let Some(&Reverse((t, ti, pi))) = self.heap.peek() {
            match topics.part(ti, pi).and_then(|ps| rule.of(ps)) {
                Some(d) if d == t => return Some(t),
                Some(d) => {
                    self.heap.pop();
                    self.heap.push(Reverse((d, ti, pi)));
                }
                None => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// Takes out every entry due at `now` (a linger, retry backoff or delivery timeout passed,
    /// or the entry is stale), handing its partition to `due`. The caller touches every
    /// partition it was handed before the pass ends, which restores the invariant.
    pub(crate) fn pop_due(&mut self, now: Instant, mut due: impl FnMut(usize, usize)) {
        while let Some(&Reverse((t, ti, pi))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            due(ti, pi);
        }
    }

    /// The partition of every entry (stale ones included, some more than once): every
    /// partition holding records has one.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, usize)> + use<'_> {
        self.heap.iter().map(|Reverse((_, ti, pi))| (*ti, *pi))
    }

    /// The same as [`Deadlines::earliest`] by scanning every partition: checks the heap in
    /// debug builds.
    #[cfg(debug_assertions)]
    pub(crate) fn scan(topics: &Topics, rule: DeadlineRule) -> Option<Instant> {
        (topics.all_parts())
            .filter_map(|(ti, pi)| topics.part(ti, pi).and_then(|ps| rule.of(ps)))
            .min()
    }
}
