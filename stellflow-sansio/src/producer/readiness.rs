//! Which partitions may have a batch to send: the candidates of the sender's next pass, so
//! that a pass looks at what changed since the last one instead of at every partition.
//!
//! A partition becomes a candidate when its state changes (a batch opens, closes, is taken or
//! comes back for a retry, an answer frees its pipeline, a doubt clears: every
//! [`super::accumulator::Accumulator::touch`]), when one of its deadlines passes (linger, retry
//! backoff, delivery timeout: the deadline heap), and all at once when something changes the
//! readiness of many partitions (leaders moved, a producer id arrived, a flush or close, the
//! buffer ran out). A pass evaluates each candidate once and forgets it: a partition that is
//! not ready then becomes a candidate again only through one of these events. The one
//! exception is a partition without a known leader (it has no linger or retry deadline): it
//! stays a candidate while it holds records, so that each pass asks for metadata once it is
//! ready.

use super::topics::{PartitionState, Topics};
use std::time::{Duration, Instant};

/// When a partition's open batch may go before its linger, besides its linger passing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenRule {
    /// `producer.linger`.
    pub linger: Duration,
    /// Records with an id below this were flushed.
    pub flush_upto: u64,
    /// Open batches go without their linger (closing, or the buffer is exhausted).
    pub no_linger: bool,
}

/// Whether partition `ps` has a batch to send now and room in its pipeline (fewer than
/// `max_in_flight` requests): its first queued batch (not in doubt, its retry due), or its
/// open batch once it lingered, was flushed or goes without linger.
pub(crate) fn is_ready(
    ps: &PartitionState,
    now: Instant,
    open: OpenRule,
    max_in_flight: usize,
) -> bool {
    if ps.in_flight >= max_in_flight {
        return false;
    }
    match ps.queue.front() {
        Some(b) => b.in_doubt.is_none() && b.retry_at.is_none_or(|r| r <= now),
        None => ps.open.as_ref().is_some_and(|b| {
            !b.records.is_empty()
                && (b.created + open.linger <= now
                    || b.first_id() < open.flush_upto
                    || open.no_linger)
        }),
    }
}

/// Adds `(leader, topic, partition)` to `picks` for every partition with a batch ready to send
/// ([`is_ready`]), looking at every partition; returns whether a ready partition has no known
/// leader. The reference the candidates are checked against in debug builds.
#[cfg(debug_assertions)]
pub(crate) fn scan_ready(
    topics: &Topics,
    now: Instant,
    open: OpenRule,
    max_in_flight: usize,
    picks: &mut Vec<(i32, usize, usize)>,
) -> bool {
    let mut leaderless = false;
    for (ti, t) in topics.iter().enumerate() {
        for (pi, ps) in t.parts.iter().enumerate() {
            if !is_ready(ps, now, open, max_in_flight) {
                continue;
            }
            match ps.leader {
                Some(l) => picks.push((l, ti, pi)),
                None => leaderless = true,
            }
        }
    }
    leaderless
}

/// Whether partition `ps` holds records not in flight (queued, or in its open batch).
pub(crate) fn holds_records(ps: &PartitionState) -> bool {
    !ps.queue.is_empty() || ps.open.as_ref().is_some_and(|b| !b.records.is_empty())
}

/// The partitions to look at in the next pass, each listed once (its
/// [`PartitionState::candidate`] flag says it is listed).
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    list: Vec<(usize, usize)>,
    /// Partitions the passes evaluated so far: what a pass costs, for the tests.
    #[cfg(test)]
    pub visited: u64,
}

impl Candidates {
    /// Lists partition `(ti, pi)` unless it is listed already.
    #[inline]
    pub(crate) fn mark(&mut self, topics: &mut Topics, ti: usize, pi: usize) {
        if let Some(ps) = topics.part_mut(ti, pi)
            && !ps.candidate
        {
            ps.candidate = true;
            self.list.push((ti, pi));
        }
    }

    /// Lists every partition of every topic (metadata moved leaders, a producer id arrived).
    pub(crate) fn mark_all(&mut self, topics: &mut Topics) {
        for ti in 0..topics.len() {
            for pi in 0..topics.parts(ti) {
                self.mark(topics, ti, pi);
            }
        }
    }

    /// The listed partitions in `(topic, partition)` order, still listed (for passes that
    /// settle batches in a deterministic order and leave readiness to the next pass).
    pub(crate) fn sorted(&mut self) -> &[(usize, usize)] {
        self.list.sort_unstable();
        &self.list
    }

    /// Moves the listed partitions to `into` (in no particular order) and unlists them.
    pub(crate) fn take(&mut self, topics: &mut Topics, into: &mut Vec<(usize, usize)>) {
        for &(ti, pi) in &self.list {
            if let Some(ps) = topics.part_mut(ti, pi) {
                ps.candidate = false;
            }
        }
        #[cfg(test)]
        {
            self.visited += self.list.len() as u64;
        }
        into.append(&mut self.list);
    }
}
