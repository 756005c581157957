//! The accumulator's early ends: batches and waiting records whose delivery timeout passed,
//! topics that never appeared, a fatal producer error and an abort.

use super::Accumulator;
use crate::producer::DeliveryError;
use crate::producer::batch::{Batch, BatchStage};
use crate::producer::outcomes::Outcomes;
use std::time::Instant;

impl Accumulator {
    /// Fails every waiting record and batch whose delivery timeout passed (batches in flight
    /// are the sender's). Looks only at the partitions whose deadline passed or whose state
    /// changed since the last pass (every expired batch's partition is one of them); they stay
    /// candidates for the sender's next pass.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Outcomes) {
        let after = self.cfg.delivery_timeout;
        let counts = (&mut self.topics, &mut self.pool, &mut *out);
        self.waiting.expire(now, after, counts);
        self.collect_due(now);
        let mut list = std::mem::take(&mut self.scratch);
        list.clear();
        list.extend_from_slice(self.candidates.sorted());
        #[cfg(test)]
        {
            self.candidates.visited += list.len() as u64;
        }
        for &(ti, pi) in &list {
            while let Some(ps) = self.topics.part_mut(ti, pi)
                && let Some(b) = ps.queue.pop_front_if(|b| b.deadline <= now)
            {
                let last = b.last_error.clone().map(Box::new);
                let e = DeliveryError::Timeout { after, last };
                self.fail_batch(ti, pi, b, e, BatchStage::Closed, out);
            }
            let expired = (self.topics.part(ti, pi))
                .and_then(|ps| ps.open.as_ref())
                .is_some_and(|b| !b.records.is_empty() && b.deadline <= now);
            if expired && let Some(b) = self.topics.part_mut(ti, pi).and_then(|ps| ps.open.take()) {
                let e = DeliveryError::Timeout { after, last: None };
                self.fail_batch(ti, pi, b, e, BatchStage::Open, out);
            }
            self.touch(ti, pi);
        }
        list.clear();
        self.scratch = list;
    }

    /// Fails the waiting records of the topics `due` with [`DeliveryError::UnknownTopic`].
    pub(crate) fn fail_waiting_of(&mut self, due: &[usize], out: &mut Outcomes) {
        let counts = (&mut self.topics, &mut self.pool, out);
        self.waiting.fail_topics(due, counts);
    }

    /// Fails everything not in flight with `error` at once (the producer became fatal);
    /// returns how many records failed.
    pub(crate) fn fail_all(&mut self, error: &DeliveryError, out: &mut Outcomes) -> u64 {
        let counts = Some((&mut self.topics, &mut self.pool));
        let mut failed = self.waiting.fail_all(error, counts, out);
        for ti in 0..self.topics.len() {
            for pi in 0..self.topics.parts(ti) {
                while let Some(b) = self
                    .topics
                    .part_mut(ti, pi)
                    .and_then(|ps| ps.queue.pop_front())
                {
                    failed += b.records.len() as u64;
                    self.fail_batch(ti, pi, b, error.clone(), BatchStage::Closed, out);
                }
                if let Some(b) = self.topics.part_mut(ti, pi).and_then(|ps| ps.open.take()) {
                    failed += b.records.len() as u64;
                    self.fail_batch(ti, pi, b, error.clone(), BatchStage::Open, out);
                }
            }
        }
        failed
    }

    /// Fails every waiting record with `error` and takes every batch out (in-flight counts
    /// back to 0), for the producer's abort; returns how many records failed.
    pub(crate) fn abandon(
        &mut self,
        error: &DeliveryError,
        batches: &mut Vec<(usize, usize, Batch, BatchStage)>,
        out: &mut Outcomes,
    ) -> u64 {
        let failed = self.waiting.fail_all(error, None, out);
        self.topics.take_all_batches(batches);
        failed
    }

    /// Nothing is held any more (the producer was aborted).
    pub(crate) fn clear_buffered(&mut self) {
        self.pool.clear();
    }
}
