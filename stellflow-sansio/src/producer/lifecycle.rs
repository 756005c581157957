//! The producer's flushes and its end: `flush` (every record so far gets its outcome),
//! `close` (flush with a deadline, then fail the rest) and `abort` (fail everything now).

use super::batch::BatchStage;
use super::{DeliveryError, FlushId, ProducerCore};
use crate::shared::Shared;
use std::time::{Duration, Instant};

impl ProducerCore {
    /// Starts a flush; [`crate::Event::Flushed`] follows once every record produced so far
    /// has its outcome.
    pub(crate) fn flush(&mut self) -> FlushId {
        let upto = self.acc.next_id();
        self.acc.flush_up_to(upto);
        let id = self.outcomes.start_flush(upto);
        self.check_flushes();
        id
    }

    /// Stops accepting records, flushes, and fails what remains `timeout` from `now`.
    pub(crate) fn close(&mut self, now: Instant, timeout: Duration) {
        if self.closed || self.closing.is_some() {
            return;
        }
        self.closing = Some(now + timeout);
        self.acc.flush_up_to(self.acc.next_id());
        self.check_flushes();
    }

    /// Ends the flushes whose records all have their outcome, and the close once every
    /// record has one.
    pub(super) fn check_flushes(&mut self) {
        let min = self
            .acc
            .min_outstanding()
            .min(self.sender.min_outstanding());
        self.outcomes.end_flushes(min);
        if self.closing.is_some() && min == u64::MAX {
            self.closing = None;
            self.closed = true;
            self.sender.stop();
            self.outcomes.closed(0);
        }
    }

    /// Fails every record without an outcome with `error` and forgets the requests in flight
    /// (their answers are ignored). Used by close (deadline passed) and the client's `close`.
    pub(crate) fn abort(&mut self, sh: &Shared, error: DeliveryError) {
        let out = &mut self.outcomes;
        // Every batch still holding records, failed oldest first so that outcomes keep the
        // order the records were produced in (per partition, as a caller expects).
        let mut failing: Vec<(usize, usize, super::batch::Batch, BatchStage)> = Vec::new();
        let mut failed = self.acc.abandon(&error, &mut failing, out);
        self.sender.abandon(&sh.net, &mut failing);
        failing.sort_by_key(|(_, _, b, _)| b.first_id());
        for (ti, pi, b, stage) in failing {
            if !b.reported {
                failed += b.records.len() as u64;
            }
            self.acc.fail_batch(ti, pi, b, error.clone(), stage, out);
        }
        self.acc.clear_buffered();
        out.end_all_flushes();
        // Exactly one ProducerClosed per producer, used or not, whether `close_producer`
        // finished it earlier (then it was already said) or this abort does.
        let first = !self.closed;
        self.closing = None;
        self.closed = true;
        self.sender.stop();
        if first {
            out.closed(failed);
        }
    }
}
