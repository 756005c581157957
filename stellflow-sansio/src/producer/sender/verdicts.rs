//! What the sender does with a batch once its answer is read: written (the sequence moves
//! on), appended but not replicated, the broker lost the producer's state (epoch bump),
//! worth a retry (after the backoff, in order), or failed — and a failure that fences the
//! idempotent producer makes it fatal.

use super::{Parts, Sender};
use crate::net::Net;
use crate::producer::DeliveryError;
use crate::producer::accumulator::Accumulator;
use crate::producer::batch::{Batch, BatchStage};
use crate::producer::idempotence::PidState;
use crate::producer::outcomes::Outcomes;
use crate::shared::Shared;
use std::time::{Duration, Instant};
use stellflow_proto::ErrorCode;
use stellflow_proto::rng::Rng;

/// What to do with a batch after its answer.
pub(super) enum Verdict {
    Written(i64),
    NotReplicated(i64),
    Retry { refresh: bool, error: DeliveryError },
    LostState,
    Fail(DeliveryError),
}

impl Sender {
    /// Applies the broker's verdict on one batch of partition `(ti, pi)`; once the producer is
    /// fatal, what would be retried fails with the fatal error.
    pub(super) fn apply(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        (ti, pi): (usize, usize),
        batch: Batch,
        verdict: Verdict,
        (acc, out, rng): Parts<'_>,
    ) {
        let verdict = match (&self.fatal, verdict) {
            // Fatal already: what would be retried fails with the fatal error instead.
            (Some(e), Verdict::Retry { .. } | Verdict::LostState) => Verdict::Fail(e.clone()),
            (_, v) => v,
        };
        let net = &mut sh.net;
        match verdict {
            Verdict::Written(offset) => {
                if let Some(ps) = acc.topics.part_mut(ti, pi) {
                    ps.seq.written(batch.stamp, batch.count());
                }
                net.counters.producer_records += batch.records.len() as u64;
                if let Some(t) = acc.topics.get(ti) {
                    let (n, bytes) = (batch.records.len(), batch.bytes);
                    crate::metrics::emit::produced(&mut net.counters, &t.name, n, bytes);
                }
                acc.succeed_batch(ti, pi, batch, Some(offset), out);
            }
            Verdict::NotReplicated(offset) => {
                // Every record fails as `NotReplicated` (its outcome unknown; decision 3).
                net.counters.producer_record_errors += batch.records.len() as u64;
                for (index, s) in batch.records.iter().enumerate() {
                    let index = index as u32;
                    out.fail_record(s.id, DeliveryError::NotReplicated { offset, index });
                }
                acc.release(ti, pi, batch);
            }
            Verdict::LostState => self.on_lost_state(net, now, (ti, pi), batch, (acc, out)),
            Verdict::Retry { refresh, error } => {
                let why = (refresh, error);
                self.on_retry(net, now, (ti, pi), batch, why, (acc, out, rng));
            }
            Verdict::Fail(e) => self.on_failed(net, (ti, pi), batch, e, (acc, out)),
        }
    }

    /// The broker lost the producer's sequence state: bump the epoch and re-send at once, or
    /// fail the batch after three such answers.
    fn on_lost_state(
        &mut self,
        net: &mut Net,
        now: Instant,
        (ti, pi): (usize, usize),
        mut batch: Batch,
        (acc, out): (&mut Accumulator, &mut Outcomes),
    ) {
        batch.lost_state += 1;
        let code = ErrorCode::OUT_OF_ORDER_SEQUENCE;
        if batch.lost_state > 3 {
            net.counters.producer_record_errors += batch.records.len() as u64;
            let e = DeliveryError::Broker { code };
            acc.fail_batch(ti, pi, batch, e, BatchStage::Closed, out);
            return;
        }
        if let Some(idem) = &mut self.idem
            && idem.bump_from(batch.stamp.epoch)
        {
            net.counters.producer_epoch_bumps += 1;
        }
        acc.set_identity(self.identity());
        net.counters.producer_retries += 1;
        batch.retry_at = Some(now);
        batch.awaits_leader = false;
        batch.last_error = Some(DeliveryError::Broker { code });
        acc.requeue(ti, pi, batch);
    }

    /// A retriable failure: retry after the backoff (after a metadata refresh when
    /// `refresh`), or fail once the retries or the delivery timeout are spent.
    fn on_retry(
        &mut self,
        net: &mut Net,
        now: Instant,
        (ti, pi): (usize, usize),
        mut batch: Batch,
        (refresh, error): (bool, DeliveryError),
        (acc, out, rng): Parts<'_>,
    ) {
        batch.attempts += 1;
        if refresh {
            acc.ask_metadata();
        }
        if batch.attempts > self.cfg.retries {
            let attempts = batch.attempts;
            net.counters.producer_record_errors += batch.records.len() as u64;
            let e = DeliveryError::RetriesExhausted {
                attempts,
                last: Box::new(error),
            };
            acc.fail_batch(ti, pi, batch, e, BatchStage::Closed, out);
        } else if now >= batch.deadline {
            net.counters.producer_record_errors += batch.records.len() as u64;
            let e = DeliveryError::Timeout {
                after: self.cfg.delivery_timeout,
                last: Some(Box::new(error)),
            };
            acc.fail_batch(ti, pi, batch, e, BatchStage::Closed, out);
        } else {
            net.counters.producer_retries += 1;
            let topic = acc.topics.get(ti).map(|t| &*t.name);
            tracing::debug!(
                topic,
                partition = pi,
                attempt = batch.attempts,
                "retrying a batch: {error}"
            );
            batch.retry_at = Some(now + self.retry_delay(batch.attempts, rng));
            batch.awaits_leader = refresh;
            batch.last_error = Some(error);
            acc.requeue(ti, pi, batch);
        }
    }

    /// A final failure: the batch fails, and a fencing of the idempotent producer makes it
    /// fatal.
    fn on_failed(
        &mut self,
        net: &mut Net,
        (ti, pi): (usize, usize),
        batch: Batch,
        e: DeliveryError,
        (acc, out): (&mut Accumulator, &mut Outcomes),
    ) {
        net.counters.producer_record_errors += batch.records.len() as u64;
        let fatal = matches!(e, DeliveryError::Fenced | DeliveryError::ProducerIdConflict)
            && self.idem.is_some();
        acc.fail_batch(ti, pi, batch, e.clone(), BatchStage::Closed, out);
        if fatal {
            self.make_fatal(net, e, acc, out);
        }
    }

    /// Makes `error` fatal for this producer (fenced, or its producer id bound to another
    /// producer): retrying cannot help, so every record not in flight fails with it at once —
    /// nothing waits for its delivery timeout — answers still due fail with it unless they
    /// report success, and `produce` refuses new records.
    fn make_fatal(
        &mut self,
        net: &mut Net,
        error: DeliveryError,
        acc: &mut Accumulator,
        out: &mut Outcomes,
    ) {
        if self.fatal.is_some() {
            return;
        }
        self.fatal = Some(error.clone());
        if let Some(idem) = &mut self.idem {
            idem.pid = PidState::Fenced;
        }
        acc.set_identity(self.identity());
        net.counters.producer_record_errors += acc.fail_all(&error, out);
    }

    /// Exponential retry delay with jitter for attempt `n` (1-based).
    pub(super) fn retry_delay(&self, n: u32, rng: &mut Rng) -> Duration {
        let factor = 1u32
            .checked_shl(n.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        let cap = self.cfg.retry_backoff_max.max(self.cfg.retry_backoff);
        let raw = self.cfg.retry_backoff.saturating_mul(factor).min(cap);
        // Jitter, then the cap again: the cap is a bound (Kafka's `ExponentialBackoff`).
        raw.mul_f64(0.8 + 0.4 * rng.next_f64()).min(cap)
    }
}
