//! The accumulator: per-partition batches filled record by record, bounded by `batch_size`
//! per batch and `buffer_memory` overall, closed when full or when the sender takes them,
//! and the deadlines of those batches (linger, retry, delivery timeout).
//!
//! Records are copied straight into the batch's buffer ([`BatchBuilder`]); per record the
//! accumulator keeps only its id and timestamp in a recycled vector, so the hot path does not
//! allocate. Buffers of settled batches are recycled too. The count of buffered bytes rises
//! when a record is taken and falls exactly once when it settles ([`Accumulator::recycle`]
//! for a batch, the waiting-record paths for a record that never reached one).

mod ending;
mod handover;

use super::ProducerRecord;
use super::batch::{BATCH_OVERHEAD, Batch, BatchRecord, BatchStage};
use super::clock::RecordClock;
use super::deadlines::{DeadlineRule, Deadlines};
use super::idempotence::{Identity, Stamp};
use super::outcomes::Outcomes;
use super::partitioning::{Partitioning, invalid_partition};
use super::pool::BufferPool;
use super::readiness::Candidates;
use super::topics::Topics;
use super::waiting::{WaitingRecord, WaitingRecords};
use super::{BatchFormat, DeliveryError, Partitioner, ProduceError, ProduceId, ProducerConfig};
use crate::metadata::MetadataCache;
use crate::shared::Shared;
use crate::trace::TraceIds;
use bytes::Bytes;
use std::time::Instant;
use stellflow_proto::record::{BatchBuilder, BatchParams, Envelope, HeaderRef, record_size};
use stellflow_proto::rng::Rng;

/// The smallest buffer a new batch starts with.
const MIN_BUFFER: usize = 16 * 1024;

/// A record's content as [`Accumulator::append`] writes it into a batch.
struct Appended<'a, H> {
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [H],
    /// Its size, as counted against the batch and the buffer.
    size: usize,
    /// The trace of the produce call, carried by the batch it opens.
    trace: Option<&'a TraceIds>,
}

/// The batches of every partition, the records waiting for metadata, and the memory they
/// hold.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// The producer's settings (read only).
    cfg: ProducerConfig,
    envelope: Envelope,
    /// Every topic and partition, with their batches.
    pub(crate) topics: Topics,
    partitioning: Partitioning,
    deadlines: Deadlines,
    /// The producer id batches are stamped with (kept in step by the sender).
    identity: Identity,
    /// Records whose topic's partitions are not known yet, in produce order.
    waiting: WaitingRecords,
    next_id: u64,
    next_serial: u64,
    /// Buffered bytes and recycled batch memory.
    pool: BufferPool,
    /// Records with an id below this are sent without waiting for linger (flush/close).
    flush_upto: u64,
    /// A record was refused for want of buffer space and none was taken since: open batches
    /// go out without waiting for their linger, so that space comes back (Kafka's rule while
    /// a sender waits for memory).
    exhausted: bool,
    /// The metadata generation the partitions were last synced with.
    meta_gen: u64,
    /// The timestamps of records produced without one.
    clock: RecordClock,
    /// The partitions the sender's next pass looks at.
    pub(crate) candidates: Candidates,
    /// A reused list of partitions (a pass's candidates).
    scratch: Vec<(usize, usize)>,
    /// Partitions whose queue may hold a batch in doubt or possibly written, in order.
    suspects: Vec<(usize, usize)>,
    /// Something may be sendable: the sender runs at the next pass.
    wake: bool,
    /// The producer wants a metadata refresh.
    wants_metadata: bool,
    /// Metadata moved a partition's leader: requests still queued for the old one are
    /// withdrawn at the next pass.
    leaders_moved: bool,
}

impl Accumulator {
    /// An empty accumulator for `cfg` (already validated).
    pub(crate) fn new(cfg: ProducerConfig, identity: Identity) -> Self {
        let envelope = match cfg.effective_format() {
            BatchFormat::V1 => Envelope::V1,
            BatchFormat::Native(c) => Envelope::Srfb(c),
        };
        Accumulator {
            partitioning: Partitioning::new(&cfg),
            pool: BufferPool::new(cfg.batch_size, cfg.buffer_memory, cfg.max_request_size),
            cfg,
            envelope,
            topics: Topics::default(),
            deadlines: Deadlines::default(),
            identity,
            waiting: WaitingRecords::default(),
            next_id: 0,
            next_serial: 0,
            flush_upto: 0,
            exhausted: false,
            meta_gen: u64::MAX,
            clock: RecordClock::default(),
            candidates: Candidates::default(),
            scratch: Vec::new(),
            suspects: Vec::new(),
            wake: false,
            wants_metadata: false,
            leaders_moved: false,
        }
    }

    /// Installs a custom partitioner.
    pub(crate) fn set_partitioner(&mut self, p: Box<dyn Partitioner>) {
        self.partitioning.set_custom(p);
    }

    /// Anchors the wall clock: `unix_ms` is the time at `now`.
    pub(crate) fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.clock.set(now, unix_ms);
    }

    /// The producer id new batches are stamped with, and whether batches may be sent.
    pub(crate) fn set_identity(&mut self, identity: Identity) {
        if identity != self.identity {
            let was_sending = self.identity.sending();
            self.identity = identity;
            if identity.sending() && !was_sending {
                self.rebuild_deadlines();
            }
        }
    }

    /// The identity new batches are stamped with.
    pub(crate) fn identity(&self) -> Identity {
        self.identity
    }

    /// Bytes of records held now.
    pub(crate) fn buffered(&self) -> usize {
        self.pool.buffered()
    }

    /// Whether any record waits for its outcome here (in a batch, in flight or waiting).
    pub(crate) fn has_records(&self) -> bool {
        self.pool.buffered() > 0
    }

    /// The id the next record gets is above every id handed out so far.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id + 1
    }

    /// Sends every record with an id below `upto` without waiting for its linger.
    pub(crate) fn flush_up_to(&mut self, upto: u64) {
        self.flush_upto = self.flush_upto.max(upto);
        self.mark_holding();
        self.wake = true;
    }

    /// Asks the sender to run at the next pass.
    pub(crate) fn wake(&mut self) {
        self.wake = true;
    }

    /// Whether the sender should run (clears the wish).
    pub(crate) fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// Whether the sender should run or metadata is wanted.
    pub(crate) fn needs_attention(&self) -> bool {
        self.wake || self.wants_metadata
    }

    /// Asks for a metadata refresh.
    pub(crate) fn ask_metadata(&mut self) {
        self.wants_metadata = true;
    }

    /// Whether a metadata refresh is wanted (clears the wish).
    pub(crate) fn take_metadata_wish(&mut self) -> bool {
        std::mem::take(&mut self.wants_metadata)
    }

    /// Whether a partition's leader moved since the last call (clears it).
    pub(crate) fn take_leaders_moved(&mut self) -> bool {
        std::mem::take(&mut self.leaders_moved)
    }

    fn rule(&self) -> DeadlineRule {
        DeadlineRule {
            linger: self.cfg.linger,
            max_in_flight: self.cfg.max_in_flight_per_partition,
            sending: self.identity.sending(),
        }
    }

    /// Partition `(ti, pi)` changed: records its next deadline (the change may have made it
    /// earlier) and makes it a candidate of the sender's next pass.
    pub(crate) fn touch(&mut self, ti: usize, pi: usize) {
        let rule = self.rule();
        self.deadlines.touch(&self.topics, rule, ti, pi);
        self.candidates.mark(&mut self.topics, ti, pi);
    }

    /// Recomputes every partition's deadline and makes every partition a candidate
    /// (metadata changes, producer id known).
    pub(crate) fn rebuild_deadlines(&mut self) {
        let rule = self.rule();
        self.deadlines.rebuild(&self.topics, rule);
        self.candidates.mark_all(&mut self.topics);
    }

    /// The earliest deadline of the batches and the waiting records.
    pub(crate) fn deadline(&mut self) -> Option<Instant> {
        let rule = self.rule();
        let parts = self.deadlines.earliest(&self.topics, rule);
        #[cfg(debug_assertions)]
        debug_assert_eq!(parts, Deadlines::scan(&self.topics, rule), "deadline heap");
        [parts, self.waiting.deadline()].into_iter().flatten().min()
    }

    /// The smallest id of a record without an outcome here (`u64::MAX` if none); records in
    /// flight are the sender's.
    pub(crate) fn min_outstanding(&self) -> u64 {
        let mut min = self.waiting.min_id();
        for t in self.topics.iter() {
            for ps in &t.parts {
                if let Some(b) = &ps.open {
                    min = min.min(b.first_id());
                }
                for b in &ps.queue {
                    min = min.min(b.first_id());
                }
            }
        }
        min
    }

    // ---- metadata ------------------------------------------------------------------------

    /// Refreshes partition counts and leaders when the metadata changed, and places records
    /// that were waiting for it. Called for every record: the check is inlined, the refresh
    /// is not (its frame is large, and a record mostly finds nothing changed).
    #[inline]
    pub(crate) fn sync_metadata(
        &mut self,
        now: Instant,
        meta: &MetadataCache,
        rng: &mut Rng,
        out: &mut Outcomes,
    ) {
        if meta.generation() != self.meta_gen {
            self.refresh_metadata(now, meta, rng, out);
        }
    }

    #[inline(never)]
    fn refresh_metadata(
        &mut self,
        now: Instant,
        meta: &MetadataCache,
        rng: &mut Rng,
        out: &mut Outcomes,
    ) {
        self.meta_gen = meta.generation();
        self.wake = true;
        let moved = self.topics.apply_metadata(meta.cluster());
        if moved {
            self.leaders_moved = true;
            self.rebuild_deadlines();
        }
        if let Some(waiting) = self.waiting.take_all() {
            for r in waiting {
                self.place_waiting(now, r, rng, out);
            }
        }
    }

    // ---- taking a record -----------------------------------------------------------------

    /// Takes one record: into its partition's batch, or held until its topic's partitions
    /// are known. Its partition goes to `partition` when known (for the hooks).
    #[inline]
    pub(crate) fn take(
        &mut self,
        sh: &Shared,
        now: Instant,
        rec: &ProducerRecord<'_>,
        (rng, out): (&mut Rng, &mut Outcomes),
        partition: &mut Option<i32>,
    ) -> Result<ProduceId, ProduceError> {
        let trace = sh.trace.as_ref();
        // 1. The topic, and the record's size against the request and buffer limits.
        self.sync_metadata(now, &sh.metadata, rng, out);
        let (ti, new) = self.topics.index(rec.topic)?;
        if new {
            self.meta_gen = u64::MAX; // pick up its partitions at the next sync
        }
        let size = record_size(rec.key, rec.value, rec.headers.iter());
        if let Err(e) = self.pool.check(size) {
            if matches!(e, ProduceError::BufferFull { .. }) {
                self.buffer_exhausted();
            }
            return Err(e);
        }
        self.exhausted = false;
        let timestamp = match rec.timestamp {
            Some(t) => t,
            None => self.clock.at(now),
        };
        // 2. Unknown topic (or records ahead of this one still wait): held until metadata
        //    names its partitions.
        let (count, waiting) = match self.topics.get(ti) {
            Some(t) => (t.count, t.waiting > 0),
            None => (0, false),
        };
        if count == 0 || waiting {
            if let (Some(p), true) = (rec.partition, count > 0)
                && (p < 0 || p >= count)
            {
                return Err(self
                    .topics
                    .get(ti)
                    .map_or(ProduceError::Closed, |t| invalid_partition(t, p)));
            }
            return Ok(self.hold(now, ti, rec, size, timestamp, trace));
        }
        // 3. Known partitions: into its partition's batch.
        let p = self.choose_partition(ti, rec.partition, rec.key, size, rng)?;
        let id = self.alloc_id();
        let appended = Appended {
            key: rec.key,
            value: rec.value,
            headers: rec.headers,
            size,
            trace,
        };
        self.append(now, ti, p, BatchRecord { id, timestamp }, appended, out);
        *partition = Some(p);
        Ok(ProduceId(id))
    }

    /// The buffer refused a record: open batches are ready at the next pass whatever their
    /// linger (with partial batches of many partitions holding the whole buffer, waiting for
    /// their linger would keep the caller waiting for nothing).
    #[cold]
    fn buffer_exhausted(&mut self) {
        if !self.exhausted {
            self.mark_holding();
        }
        self.exhausted = true;
        self.wake = true;
    }

    /// Keeps an owned copy of a record whose topic's partitions are not known yet (a cold
    /// path), and asks for metadata.
    fn hold(
        &mut self,
        now: Instant,
        ti: usize,
        rec: &ProducerRecord<'_>,
        size: usize,
        timestamp: i64,
        trace: Option<&TraceIds>,
    ) -> ProduceId {
        let id = self.alloc_id();
        self.pool.hold(size);
        self.wants_metadata = true;
        if let Some(t) = self.topics.get_mut(ti) {
            t.waiting += 1;
        }
        self.waiting.push(WaitingRecord {
            id,
            topic: ti,
            partition: rec.partition,
            key: rec.key.map(Bytes::copy_from_slice),
            value: rec.value.map(Bytes::copy_from_slice),
            headers: rec
                .headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(Bytes::copy_from_slice)))
                .collect(),
            timestamp,
            size,
            deadline: now + self.cfg.delivery_timeout,
            trace: trace.cloned(),
        });
        ProduceId(id)
    }

    fn alloc_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Places a record that waited for metadata (its id is already handed out).
    fn place_waiting(&mut self, now: Instant, r: WaitingRecord, rng: &mut Rng, out: &mut Outcomes) {
        let count = self.topics.get(r.topic).map_or(0, |t| t.count);
        if count == 0 {
            self.waiting.push(r);
            return;
        }
        if let Some(t) = self.topics.get_mut(r.topic) {
            t.waiting = t.waiting.saturating_sub(1);
        }
        if let Some(p) = r.partition
            && (p < 0 || p >= count)
        {
            self.pool.free(r.size);
            let err = DeliveryError::Broker {
                code: stellflow_proto::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            };
            out.fail_record(r.id, err);
            return;
        }
        let key = r.key.as_deref();
        let p = self
            .choose_partition(r.topic, r.partition, key, r.size, rng)
            .unwrap_or_default();
        self.pool.free(r.size);
        let record = BatchRecord {
            id: r.id,
            timestamp: r.timestamp,
        };
        let appended = Appended {
            key,
            value: r.value.as_deref(),
            headers: &r.headers,
            size: r.size,
            trace: r.trace.as_ref(),
        };
        self.append(now, r.topic, p, record, appended, out);
    }

    /// Chooses the partition of a record whose topic's partition count is known.
    fn choose_partition(
        &mut self,
        ti: usize,
        explicit: Option<i32>,
        key: Option<&[u8]>,
        size: usize,
        rng: &mut Rng,
    ) -> Result<i32, ProduceError> {
        match self.topics.get_mut(ti) {
            Some(t) => self.partitioning.choose(t, explicit, key, size, rng),
            None => Ok(0),
        }
    }

    /// Appends one record to partition `p`'s open batch, opening or closing batches as needed.
    fn append<H: HeaderRef>(
        &mut self,
        now: Instant,
        ti: usize,
        p: i32,
        record: BatchRecord,
        rec: Appended<'_, H>,
        out: &mut Outcomes,
    ) {
        let Appended {
            key,
            value,
            headers,
            size,
            trace,
        } = rec;
        let batch_size = self.cfg.batch_size;
        let pi = usize::try_from(p).unwrap_or(0);
        // Close the open batch if the record does not fit.
        let full = (self.topics.part(ti, pi))
            .and_then(|ps| ps.open.as_ref())
            .is_some_and(|b| !b.records.is_empty() && b.size() + size > batch_size);
        if full {
            self.close_open(ti, pi, out);
        }
        if self.topics.part(ti, pi).is_some_and(|ps| ps.open.is_none()) {
            let batch = self.new_batch(now, ti, pi, record.timestamp, size);
            if let Some(ps) = self.topics.part_mut(ti, pi) {
                ps.open = Some(batch);
            }
        }
        let mut failed = None;
        let mut now_full = false;
        let mut serial = None;
        let mut first = false;
        if let Some(ps) = self.topics.part_mut(ti, pi)
            && let Some(b) = &mut ps.open
            && let Some(builder) = &mut b.builder
        {
            match builder.append_with_headers(record.timestamp, key, value, headers.iter()) {
                Ok(()) => {
                    if b.trace.is_none()
                        && let Some(t) = trace
                    {
                        b.trace = Some(t.clone());
                    }
                    b.records.push(record);
                    b.bytes += size;
                    now_full = builder.encoded_size() + size > batch_size;
                    serial = Some(b.serial);
                    first = b.records.len() == 1;
                }
                Err(e) => failed = Some(DeliveryError::Encode(e.to_string())),
            }
        }
        if let Some(e) = failed {
            out.fail_record(record.id, e);
            return;
        }
        self.pool.hold(size);
        if first {
            // A batch got its first record: its linger and delivery deadlines start.
            self.touch(ti, pi);
        }
        if let Some(t) = self.topics.get_mut(ti)
            && let Some((sp, s @ None)) = &mut t.sticky
            && *sp == p
        {
            *s = serial;
        }
        if now_full || self.cfg.linger.is_zero() || record.id < self.flush_upto {
            if now_full {
                self.close_open(ti, pi, out);
            }
            self.wake = true;
        }
    }

    fn new_batch(
        &mut self,
        now: Instant,
        ti: usize,
        pi: usize,
        timestamp: i64,
        first: usize,
    ) -> Batch {
        self.next_serial += 1;
        let stamp = self.guess_stamp(ti, pi);
        let params = BatchParams {
            base_timestamp: timestamp,
            producer_id: stamp.producer_id,
            producer_epoch: stamp.epoch,
            base_sequence: stamp.sequence,
            ..BatchParams::default()
        };
        // A partition whose batches stay small (keyed records spread over many partitions)
        // gets a buffer the size its last batch needed, twice over: a heap block, where a
        // `batch_size` buffer for each of thousands of partitions would be mapped and unmapped
        // by the allocator batch after batch. The buffer grows if the batch does.
        let last = self
            .topics
            .part(ti, pi)
            .map_or(usize::MAX, |ps| ps.last_batch);
        let expect = last.saturating_mul(2).max(MIN_BUFFER);
        let want = self.cfg.batch_size.min(expect).max(first) + BATCH_OVERHEAD + 64;
        let buf = self.pool.buffer(want);
        let builder = BatchBuilder::in_buffer(buf, params, self.envelope)
            .with_gzip_level(self.cfg.gzip_level);
        Batch {
            serial: self.next_serial,
            builder: Some(builder),
            blob: Bytes::new(),
            records: self.pool.record_list(),
            bytes: 0,
            created: now,
            deadline: now + self.cfg.delivery_timeout,
            attempts: 0,
            lost_state: 0,
            awaits_leader: false,
            retry_at: None,
            stamp,
            last_error: None,
            reported: false,
            maybe_written: false,
            in_doubt: None,
            trace: None,
        }
    }

    /// The stamp a new batch of partition `pi` will most likely be sent with.
    fn guess_stamp(&self, ti: usize, pi: usize) -> Stamp {
        let Identity::Known { producer_id, epoch } = self.identity else {
            return Stamp::NONE;
        };
        let sequence = self.topics.part(ti, pi).map_or(0, |ps| ps.seq.guess(epoch));
        Stamp {
            producer_id,
            epoch,
            sequence,
        }
    }

    /// Closes partition `pi`'s open batch: finishes its blob and queues it.
    pub(crate) fn close_open(&mut self, ti: usize, pi: usize, out: &mut Outcomes) {
        let Some(mut batch) = self.topics.part_mut(ti, pi).and_then(|ps| ps.open.take()) else {
            return;
        };
        if let Some(t) = self.topics.get_mut(ti)
            && let Some((p, _)) = t.sticky
            && usize::try_from(p).ok() == Some(pi)
        {
            t.sticky = None;
        }
        self.wake = true;
        if batch.records.is_empty() {
            self.recycle(batch);
            return;
        }
        match batch.builder.take().map(BatchBuilder::finish_into) {
            Some(Ok(buf)) => {
                if let Some(ps) = self.topics.part_mut(ti, pi) {
                    ps.last_batch = buf.len();
                }
                batch.blob = buf.freeze();
                let count = i64::from(batch.count());
                if let Some(ps) = self.topics.part_mut(ti, pi) {
                    ps.seq.closed(count);
                    ps.queue.push_back(batch);
                }
                self.touch(ti, pi);
            }
            Some(Err(e)) => {
                let err = DeliveryError::Encode(e.to_string());
                self.fail_batch(ti, pi, batch, err, BatchStage::Open, out);
            }
            None => {}
        }
    }

    // ---- settling ----------------------------------------------------------------------

    /// Reports every record of a delivered batch (`offset`: none with acks = 0) and frees it.
    pub(crate) fn succeed_batch(
        &mut self,
        ti: usize,
        pi: usize,
        batch: Batch,
        offset: Option<i64>,
        out: &mut Outcomes,
    ) {
        if let Some(t) = self.topics.get(ti) {
            let partition = i32::try_from(pi).unwrap_or(0);
            out.report(&t.name, partition, &batch.records, Ok(offset));
        }
        self.release(ti, pi, batch);
    }

    /// Reports every record of a batch as failed and frees it. `stage` says whether the
    /// batch had been counted in the partition's pipeline (closed batches).
    pub(crate) fn fail_batch(
        &mut self,
        ti: usize,
        pi: usize,
        batch: Batch,
        error: DeliveryError,
        stage: BatchStage,
        out: &mut Outcomes,
    ) {
        let error = self.topics.with_leaderless_cause(ti, pi, error);
        let error = match error {
            DeliveryError::MaybeWritten { .. } => error,
            e if batch.maybe_written => DeliveryError::MaybeWritten { last: Box::new(e) },
            e => e,
        };
        if !batch.reported {
            match self.topics.get(ti) {
                Some(t) => {
                    let partition = i32::try_from(pi).unwrap_or(0);
                    out.report(&t.name, partition, &batch.records, Err(error));
                }
                None => (batch.records.iter()).for_each(|s| out.fail_record(s.id, error.clone())),
            }
        }
        if stage == BatchStage::Closed {
            self.release(ti, pi, batch);
        } else {
            self.recycle(batch);
        }
    }

    /// Frees a closed batch (its records have their outcomes).
    pub(crate) fn release(&mut self, ti: usize, pi: usize, batch: Batch) {
        let count = i64::from(batch.count());
        if let Some(ps) = self.topics.part_mut(ti, pi) {
            ps.seq.settled(count);
        }
        self.recycle(batch);
    }

    /// Returns a settled batch's memory to the pool and its bytes to the buffer.
    fn recycle(&mut self, batch: Batch) {
        self.pool.recycle(batch);
    }
}
