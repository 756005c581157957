//! Handing batches to the sender: the partitions with a batch ready (found among the
//! candidates of [`crate::producer::readiness`], never by a walk over every partition), the
//! next batch of a partition, a batch put back for a retry, and the partitions whose queue
//! holds a batch in doubt or possibly written.

use super::Accumulator;
use crate::producer::batch::Batch;
use crate::producer::outcomes::Outcomes;
use crate::producer::readiness::{OpenRule, holds_records, is_ready};
use std::time::Instant;

impl Accumulator {
    /// Adds `(leader, topic, partition)` to `picks` for every partition with a batch ready
    /// to send and room in its pipeline ([`is_ready`]); `closing`: open batches go without
    /// their linger. A ready partition without a known leader asks for metadata.
    ///
    /// Only the candidates are looked at: the partitions whose state changed or whose
    /// deadline passed since the last pass.
    pub(crate) fn ready(
        &mut self,
        now: Instant,
        closing: bool,
        picks: &mut Vec<(i32, usize, usize)>,
    ) {
        let open = OpenRule {
            linger: self.cfg.linger,
            flush_upto: self.flush_upto,
            no_linger: closing || self.exhausted,
        };
        let max_in_flight = self.cfg.max_in_flight_per_partition;
        let rule = self.rule();
        self.collect_due(now);
        let mut list = std::mem::take(&mut self.scratch);
        list.clear();
        self.candidates.take(&mut self.topics, &mut list);
        #[cfg(debug_assertions)]
        let first = picks.len();
        let mut leaderless = false;
        for &(ti, pi) in &list {
            let Some(ps) = self.topics.part(ti, pi) else {
                continue;
            };
            if is_ready(ps, now, open, max_in_flight) {
                match ps.leader {
                    Some(l) => picks.push((l, ti, pi)),
                    None => leaderless = true,
                }
            }
            // A partition without a leader has no linger or retry deadline to make it a
            // candidate when it becomes ready: while it holds records it is looked at at
            // every pass (asking for metadata once ready), until metadata names a leader.
            let stays = ps.leader.is_none() && holds_records(ps);
            // Its deadline entry may have been taken by `collect_due`.
            self.deadlines.touch(&self.topics, rule, ti, pi);
            if stays {
                self.candidates.mark(&mut self.topics, ti, pi);
            }
        }
        list.clear();
        self.scratch = list;
        #[cfg(debug_assertions)]
        {
            let mut scan = Vec::new();
            let scanned = crate::producer::readiness::scan_ready(
                &self.topics,
                now,
                open,
                max_in_flight,
                &mut scan,
            );
            scan.sort_unstable();
            let mut found = picks[first..].to_vec();
            found.sort_unstable();
            assert_eq!(found, scan, "the candidates missed a ready partition");
            assert_eq!(
                leaderless, scanned,
                "the candidates missed a leaderless partition"
            );
        }
        if leaderless {
            self.wants_metadata = true;
        }
    }

    /// Lists as candidates the partitions whose deadline passed (their heap entries are
    /// taken out: every candidate is touched again before its pass ends).
    pub(super) fn collect_due(&mut self, now: Instant) {
        let (topics, candidates) = (&mut self.topics, &mut self.candidates);
        self.deadlines
            .pop_due(now, |ti, pi| candidates.mark(topics, ti, pi));
    }

    /// Lists as candidates every partition holding records (each has a deadline entry): a
    /// flush, a close or an exhausted buffer makes their open batches ready at once.
    pub(super) fn mark_holding(&mut self) {
        let (topics, candidates) = (&mut self.topics, &mut self.candidates);
        for (ti, pi) in self.deadlines.entries() {
            candidates.mark(topics, ti, pi);
        }
    }

    /// Takes partition `(ti, pi)`'s next batch to send (closing its open batch when nothing
    /// is queued) and counts it in flight.
    pub(crate) fn take_next(&mut self, ti: usize, pi: usize, out: &mut Outcomes) -> Option<Batch> {
        if self
            .topics
            .part(ti, pi)
            .is_some_and(|ps| ps.queue.is_empty())
        {
            self.close_open(ti, pi, out);
        }
        let ps = self.topics.part_mut(ti, pi)?;
        let batch = ps.queue.pop_front()?;
        ps.in_flight += 1;
        Some(batch)
    }

    /// Puts a batch back in its partition's queue, before every later batch; a batch in
    /// doubt or possibly written makes its partition a suspect.
    pub(crate) fn requeue(&mut self, ti: usize, pi: usize, batch: Batch) {
        let suspect = batch.in_doubt.is_some() || batch.maybe_written;
        if let Some(ps) = self.topics.part_mut(ti, pi) {
            let pos = ps
                .queue
                .iter()
                .position(|b| b.serial > batch.serial)
                .unwrap_or(ps.queue.len());
            ps.queue.insert(pos, batch);
            if suspect && let Err(at) = self.suspects.binary_search(&(ti, pi)) {
                self.suspects.insert(at, (ti, pi));
            }
            self.touch(ti, pi);
        }
    }

    /// The partitions whose queue may hold a batch in doubt or possibly written, in
    /// `(topic, partition)` order (every partition that holds one is listed).
    pub(crate) fn suspects(&self) -> &[(usize, usize)] {
        &self.suspects
    }

    /// Forgets the suspects whose queue holds no batch in doubt or possibly written any more.
    pub(crate) fn prune_suspects(&mut self) {
        let topics = &self.topics;
        self.suspects.retain(|&(ti, pi)| {
            (topics.part(ti, pi)).is_some_and(|ps| {
                (ps.queue.iter()).any(|b| b.in_doubt.is_some() || b.maybe_written)
            })
        });
    }
}
