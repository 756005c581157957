//! The producer's lane: records that found the core's buffer full, the batch sends and the
//! commands (flush, close) that wait behind them, fed to the core in order as room frees up.

use super::{Job, ReplySender, State};
use crate::batch::Fed;
use crate::{Error, Record};
use std::borrow::Borrow;
use std::time::{Duration, Instant};
use stellflow_sansio::DriverExt;
use stellflow_sansio::{ProduceError, RecordMetadata, TraceIds};

/// Records that may wait in the lane for buffer space (beyond it, `enqueue` waits).
const LANE: usize = 1024;

/// What waits in the producer's lane while the core's buffer is full: records, the commands
/// that must stay behind them (flush, close), and the place of a batch whose records wait on
/// its caller's task (`Producer::enqueue_all`: they enter the core when it reaches the front).
pub(super) enum Parked {
    Record(LaneRecord),
    Job(Job),
    Batch(u64),
}

/// A record on its way into the core.
pub(crate) struct LaneRecord {
    pub record: Record,
    /// The trace context of the call that sent it (its span's, `opentelemetry` feature).
    pub trace: Option<TraceIds>,
    pub deadline: Instant,
    pub reply: ReplySender<Result<RecordMetadata, Error>>,
}

impl State {
    /// Hands a record to the core, or parks it in the lane behind the others; gives it back
    /// when the lane is full.
    pub fn enqueue(&mut self, now: Instant, p: LaneRecord) -> Option<LaneRecord> {
        if self.parked.is_empty() {
            match self.produce(now, &p) {
                Ok(id) => drop(self.deliveries.insert(id.0, p.reply)),
                Err(ProduceError::BufferFull { .. }) => return self.park(p),
                Err(e) => drop(p.reply.send(Err(e.into()))),
            }
            return None;
        }
        self.park(p)
    }

    /// Hands one record to the core, with the trace context of the call that sent it.
    fn produce(
        &mut self,
        now: Instant,
        p: &LaneRecord,
    ) -> Result<stellflow_sansio::ProduceId, ProduceError> {
        let record = &p.record;
        (self.client).with_trace(p.trace.as_ref(), |c| {
            record.with_borrowed(|r| c.produce(now, r))
        })
    }

    fn park(&mut self, p: LaneRecord) -> Option<LaneRecord> {
        if self.parked_records >= LANE {
            return Some(p);
        }
        self.parked_records += 1;
        self.parked.push_back(Parked::Record(p));
        self.replan = true; // the driver wakes at its deadline
        None
    }

    /// Runs `job` now, or behind the records waiting in the lane.
    pub fn in_lane(
        &mut self,
        now: Instant,
        job: impl FnOnce(&mut State, Instant) + Send + 'static,
    ) {
        match self.parked.is_empty() {
            true => job(self, now),
            false => self.parked.push_back(Parked::Job(Box::new(job))),
        }
    }

    /// Offers the lane to the core again, in order; fails the records whose time is up. Stops
    /// at a batch's place: its caller feeds it (woken after the driver's pass).
    pub fn retry_parked(&mut self, now: Instant) {
        while let Some(front) = self.parked.pop_front() {
            let p = match front {
                Parked::Job(job) => {
                    job(self, now);
                    continue;
                }
                Parked::Batch(key) => {
                    self.parked.push_front(Parked::Batch(key));
                    return;
                }
                Parked::Record(p) => p,
            };
            let outcome = match self.produce(now, &p) {
                Err(ProduceError::BufferFull { .. }) if now < p.deadline => {
                    self.parked.push_front(Parked::Record(p));
                    return;
                }
                Err(ProduceError::BufferFull { .. }) => {
                    Err(Error::BufferFull(self.options.max_block))
                }
                Err(e) => Err(e.into()),
                Ok(id) => Ok(id),
            };
            self.parked_records -= 1;
            match outcome {
                Ok(id) => drop(self.deliveries.insert(id.0, p.reply)),
                Err(e) => drop(p.reply.send(Err(e))),
            }
        }
    }

    /// Feeds up to `limit` records of batch `key` to the core, in order: `held` first (a
    /// record that found the buffer full before), then `records`; counts the records it took
    /// (queued or refused) in `fed`; each goes with the trace context the batch was sent with. A
    /// batch waits behind the
    /// lane: when the lane holds something else first, it takes a place at the lane's back
    /// and waits; when the core's buffer is full, it keeps the record in `held`, takes the
    /// lane's front and waits (`Fed::WaitForRoom`: wake the caller once there is room).
    pub fn feed<I>(
        &mut self,
        now: Instant,
        key: u64,
        held: &mut Option<I::Item>,
        records: &mut I,
        limit: usize,
        fed: &mut usize,
    ) -> Fed
    where
        I: Iterator,
        I::Item: Borrow<Record>,
    {
        if !self.parked.is_empty() {
            self.retry_parked(now);
        }
        let at_front = match self.parked.front() {
            None => true,
            Some(Parked::Batch(k)) => *k == key,
            Some(_) => false,
        };
        if !at_front {
            if !self
                .parked
                .iter()
                .any(|p| matches!(p, Parked::Batch(k) if *k == key))
            {
                self.parked.push_back(Parked::Batch(key));
            }
            return Fed::Wait;
        }
        let trace = self.batches.trace(key).cloned();
        let mut noting = self.batches.noting(key);
        let mut step = Fed::More;
        for _ in 0..limit {
            let Some(record) = held.take().or_else(|| records.next()) else {
                step = Fed::Done;
                break;
            };
            *fed += 1;
            let record_ref = record.borrow();
            let result = (self.client).with_trace(trace.as_ref(), |c| {
                record_ref.with_borrowed(|rec| c.produce(now, rec))
            });
            match result {
                Ok(id) => noting.queued(&mut self.batches, id.0),
                Err(ProduceError::BufferFull { needed, limit, .. }) => {
                    *held = Some(record);
                    *fed -= 1;
                    if self.parked.is_empty() {
                        self.parked.push_back(Parked::Batch(key));
                        self.replan = true; // the driver re-plans and wakes us after its pass
                    }
                    self.room_mark = limit.saturating_sub(needed.max(limit / 8));
                    step = Fed::WaitForRoom;
                    break;
                }
                Err(e) => noting.refused(&mut self.batches, e.into()),
            }
        }
        noting.done(&mut self.batches);
        if step == Fed::Done {
            self.leave_lane(now, key);
            self.batches.seal(key);
        }
        step
    }

    /// Ends batch `key`'s wait for buffer space at `max_block` (the call's bound): `held` and
    /// the rest of `records` fail with [`Error::BufferFull`], and the lane moves on. Returns
    /// how many records failed so.
    pub fn expire_batch<I>(
        &mut self,
        now: Instant,
        key: u64,
        max_block: Duration,
        held: Option<I::Item>,
        records: I,
    ) -> usize
    where
        I: Iterator,
    {
        let failed = held.into_iter().chain(records).count();
        self.batches
            .push_refused(key, Error::BufferFull(max_block), failed);
        self.leave_lane(now, key);
        self.batches.seal(key);
        failed
    }

    /// A batch's caller went away before feeding every record: the records fed are still
    /// sent (their outcomes discarded), the others are not, and the lane moves on.
    pub fn abandon_batch(&mut self, now: Instant, key: u64) {
        self.leave_lane(now, key);
        self.batches.abandon(key);
    }

    /// Takes batch `key`'s place out of the lane and lets the lane behind it move on.
    fn leave_lane(&mut self, now: Instant, key: u64) {
        let before = self.parked.len();
        self.parked
            .retain(|p| !matches!(p, Parked::Batch(k) if *k == key));
        if self.parked.len() != before {
            self.retry_parked(now);
        }
    }

    /// Whether nothing waits in the lane.
    pub fn lane_empty(&self) -> bool {
        self.parked.is_empty()
    }
}
