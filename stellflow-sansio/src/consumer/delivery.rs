//! The delivery queue: fetched blobs wait undecoded and are decoded record by record when
//! polled ([`Consumer::poll_record`]), handed over whole ([`Consumer::poll_blob`]) or lent
//! out ([`Consumer::lease_records`]); taking the last record of a blob moves its partition's
//! position past it and frees its buffer space.

use super::lease::{LeasedBlob, RecordLease, build_record};
use super::partition::ReadyBlob;
use super::{Consumer, ConsumerEvent, ConsumerRecord, TopicPartition};
use crate::event::Event;
use crate::fetched_blob::FetchedBlob;
use crate::metrics::Counters;
use crate::offset_model::{self, Position};
use std::collections::VecDeque;

/// Most blobs one [`RecordLease`] lends (when they hold few records each).
const MAX_LEASED_BLOBS: usize = 64;

impl Consumer {
    /// Drops every queued blob of `tp`.
    pub(crate) fn drop_ready(&mut self, tp: &TopicPartition) {
        let Some(id) = self.parts.id_of(tp) else {
            return;
        };
        let mut freed = 0;
        self.ready.retain(|b| {
            let keep = b.part != id;
            if !keep {
                freed += b.size;
            }
            keep
        });
        if let Some((_, p)) = self.parts.by_id_mut(id) {
            freed += p.parked.drain(..).map(|b| b.size).sum::<usize>();
        }
        self.release(freed);
    }

    /// Frees `bytes` of buffer space; wakes fetching when the buffer stops being full.
    pub(super) fn release(&mut self, bytes: usize) {
        let was_full = self.buffered >= self.config.max_buffered_bytes;
        self.buffered = self.buffered.saturating_sub(bytes);
        if was_full && self.buffered < self.config.max_buffered_bytes {
            self.fetch_wake = true;
        }
    }

    /// Queues a fetched blob for delivery.
    pub(crate) fn push_blob(&mut self, mut blob: ReadyBlob) {
        blob.id = self.next_blob_id;
        self.next_blob_id += 1;
        self.buffered += blob.size;
        let paused = (self.parts.by_id(blob.part)).is_some_and(|(_, p)| p.paused);
        match self.parts.by_id_mut_quiet(blob.part) {
            Some(p) if paused => p.parked.push_back(blob),
            _ => self.ready.push_back(blob),
        }
    }

    /// The next record, decoded from the front blob; `None` when nothing is buffered.
    pub(crate) fn poll_record(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
    ) -> Option<ConsumerRecord> {
        self.next_record(events, counters, |r| r)
    }

    /// Appends up to `max` records to `out` and returns how many; each record is built in
    /// its slot of `out` rather than moved there (a `ConsumerRecord` is ~150 bytes, and a
    /// move per record showed in profiles of small records).
    pub(crate) fn poll_records(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
        out: &mut Vec<ConsumerRecord>,
        max: usize,
    ) -> usize {
        let mut n = 0;
        while n < max
            && self
                .next_record(events, counters, |r| out.push(r))
                .is_some()
        {
            n += 1;
        }
        n
    }

    /// Decodes the next record and hands it to `emit` (inlined so that `emit` can build it in
    /// place, see `RecordParts`); `None` when nothing is buffered.
    #[inline(always)]
    fn next_record<T>(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
        emit: impl FnOnce(ConsumerRecord) -> T,
    ) -> Option<T> {
        let mut emit = Some(emit);
        loop {
            let front = self.ready.front_mut()?;
            let (tp, offset, skip) = (&front.tp, front.offset, front.skip);
            let step = front.records.next_with(|p| {
                let last = p.is_last_in_blob();
                if p.index_in_blob() < skip {
                    return (None, last);
                }
                let bytes = p.key_and_value_len();
                let out = emit.take().map(|emit| emit(build_record(tp, offset, &p)));
                (out.map(|out| (out, bytes)), last)
            });
            match step {
                None => self.finish_front(),
                Some(Err(error)) => {
                    events.push_back(Event::Consumer(ConsumerEvent::CorruptBlob {
                        partition: front.tp.clone(),
                        offset: front.offset,
                        error,
                    }));
                    self.finish_front();
                }
                Some(Ok((out, last))) => {
                    if let Some((_, bytes)) = &out {
                        crate::metrics::emit::consumed(counters, &front.tp.topic, 1, *bytes);
                    }
                    if last {
                        self.finish_front();
                    }
                    if let Some((out, _)) = out {
                        return Some(out);
                    }
                }
            }
        }
    }

    /// Hands over the front blob whole (see [`FetchedBlob`]); `None` when nothing is
    /// buffered. Its records count as delivered now: the position moves past the blob and its
    /// buffer space is freed.
    pub(crate) fn poll_blob(&mut self, counters: &mut Counters) -> Option<FetchedBlob> {
        let b = self.take_front()?;
        let skip = b.progress();
        let declared = stellflow_proto::record::declared_record_count(&b.bytes)
            .unwrap_or(0)
            .saturating_sub(u64::from(skip));
        crate::metrics::emit::consumed(counters, &b.tp.topic, declared, b.size);
        Some(FetchedBlob::new(
            b.tp.topic,
            b.tp.partition,
            b.offset,
            skip,
            b.records,
            declared,
        ))
    }

    /// Lends out up to `max` records of the front blobs (see [`RecordLease`]); `None` when
    /// nothing is buffered.
    pub(crate) fn lease_records(&self, max: usize) -> Option<RecordLease> {
        if self.ready.is_empty() || max == 0 {
            return None;
        }
        let mut blobs = Vec::new();
        let mut declared = 0;
        for b in &self.ready {
            blobs.push(LeasedBlob::new(b.id, &b.tp, b.offset, b.skip, &b.records));
            let count = stellflow_proto::record::declared_record_count(&b.bytes).unwrap_or(0);
            declared += count.saturating_sub(u64::from(b.progress()));
            if declared >= max as u64 || blobs.len() >= MAX_LEASED_BLOBS {
                break;
            }
        }
        Some(RecordLease::new(blobs, max))
    }

    /// Delivers the decoded records of `lease` (decoding them first if the caller did not):
    /// positions move past them, finished blobs leave the queue, corrupt remainders become
    /// [`ConsumerEvent::CorruptBlob`]. `None`, with nothing changed, when the lease is stale:
    /// the blobs it decoded are no longer at the front of the queue as they were lent.
    pub(crate) fn redeem_lease(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
        lease: RecordLease,
    ) -> Option<Vec<ConsumerRecord>> {
        let (blobs, records) = lease.into_parts();
        let current = (self.ready.iter()).map(|q| (q.id, q.records.next_index()));
        if !blobs
            .iter()
            .map(|b| (b.id, b.start))
            .eq(current.take(blobs.len()))
        {
            return None;
        }
        for b in blobs {
            crate::metrics::emit::consumed(counters, &b.tp.topic, b.taken, b.bytes);
            if !b.finished {
                // The lease stopped inside this blob (it must be the last one it reached).
                if let Some(front) = self.ready.front_mut() {
                    front.records = b.records;
                }
                break;
            }
            if let Some(error) = b.error {
                events.push_back(Event::Consumer(ConsumerEvent::CorruptBlob {
                    partition: b.tp,
                    offset: b.offset,
                    error,
                }));
            }
            self.finish_front();
        }
        Some(records)
    }

    /// Drops the front blob once its records are taken.
    fn finish_front(&mut self) {
        self.take_front();
    }

    /// Removes the front blob, moving its partition's position past it and freeing its space.
    fn take_front(&mut self) -> Option<ReadyBlob> {
        let b = self.ready.pop_front()?;
        // By id, checked by epoch (ids are given again, epochs never): no name compared.
        let current = (self.parts.by_id(b.part))
            .is_some_and(|(_, p)| p.epoch == b.epoch && b.offset >= p.delivered.offset);
        if current && let Some(p) = self.parts.by_id_mut_quiet(b.part) {
            p.delivered = Position::blob(offset_model::next_after(b.offset));
        }
        self.release(b.size);
        Some(b)
    }
}
