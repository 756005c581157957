//! The accumulator: per-partition batches filled record by record, bounded by `batch_size`
//! per batch and `buffer_memory` overall, closed when full or when the sender takes them.
//!
//! Records are copied straight into the batch's buffer ([`BatchBuilder`]); per record the
//! accumulator keeps only its id and timestamp in a recycled vector, so the hot path does not
//! allocate. Buffers of delivered batches are recycled too.
//!
//! Why one file of about 640 lines: it is one state machine, a record's way from a send into
//! an open batch, the batch sealed when full, and sealed batches handed to the sender, with
//! `buffer_memory` accounted at every step. The count of buffered bytes rises when a record is
//! appended and falls exactly once when it settles, which holds only if the steps are read
//! side by side.

use super::idempotence::Stamp;
use super::partitioner::KeylessPartitioner;
use super::{DeliveryError, ProduceError, ProduceId, ProducerRecord};
use super::{Pending, Producer};
use crate::hooks::SentRecord;
use crate::metadata::MetadataCache;
use crate::topic::validate_topic_name;
use crate::trace::TraceIds;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use stellflow_proto::StrBytes;
use stellflow_proto::record::{BatchBuilder, BatchParams, HeaderRef, record_size};

/// Bytes a batch adds around its records: the SRFB envelope (37) and the v1 header (57).
pub(crate) const BATCH_OVERHEAD: usize = 37 + 57;

/// One record's bookkeeping inside a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub id: u64,
    pub timestamp: i64,
}

/// A record's content as `Producer::append` writes it into a batch.
pub(crate) struct Appended<'a, H> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [H],
    /// Its size, as counted against the batch and the buffer.
    pub size: usize,
    /// The trace of the produce call, carried by the batch it opens.
    pub trace: Option<&'a TraceIds>,
}

/// Whether a batch that fails was closed (counted in its partition's pipeline) or was still
/// the open one ([`Producer::fail_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchStage {
    /// Closed: a finished blob, counted in the partition's pipeline.
    Closed,
    /// The partition's open batch, not counted yet.
    Open,
}

/// One batch: open (a builder) or closed (a finished blob).
#[derive(Debug)]
pub(crate) struct Batch {
    /// Increases with every batch of the producer: retries go back in this order.
    pub serial: u64,
    pub builder: Option<BatchBuilder>,
    pub blob: Bytes,
    pub slots: Vec<Slot>,
    /// Bytes counted against `buffer_memory`.
    pub bytes: usize,
    pub created: Instant,
    pub deadline: Instant,
    pub attempts: u32,
    /// Consecutive 21 answers (lost producer state) for this batch.
    pub lost_state: u32,
    pub retry_at: Option<Instant>,
    /// `retry_at` is only a backoff after an error that asked for fresh metadata (a leader
    /// error, a lost connection): when the metadata names a new leader for the partition the
    /// backoff ends at once (Kafka's KIP-951), as nothing the backoff waits for remains.
    pub awaits_leader: bool,
    pub stamp: Stamp,
    pub last_error: Option<DeliveryError>,
    /// Outcomes already reported (acks = 0).
    pub reported: bool,
    /// A request carrying this batch was written and never answered (timed out, or its
    /// connection died): the records may be in the log whatever happens next, so a failure
    /// is reported as [`DeliveryError::MaybeWritten`].
    pub maybe_written: bool,
    /// Idempotence: the request that carried this batch was written on this connection of
    /// this slot and never answered, so it may still be executing on the broker. The batch
    /// is not re-sent before the broker answered on a newer connection
    /// ([`crate::net::Net::answered_since`]).
    pub in_doubt: Option<(usize, crate::request::ConnId)>,
    /// The trace context of its first record that had one: its Produce request carries it
    /// (see [`crate::Client::set_trace`]).
    pub trace: Option<TraceIds>,
}

impl Batch {
    pub fn size(&self) -> usize {
        match &self.builder {
            Some(b) => b.encoded_size(),
            None => self.blob.len(),
        }
    }

    pub fn first_id(&self) -> u64 {
        self.slots.first().map_or(u64::MAX, |s| s.id)
    }

    pub fn count(&self) -> i32 {
        i32::try_from(self.slots.len()).unwrap_or(i32::MAX)
    }
}

/// One partition's batches.
#[derive(Debug, Default)]
pub(crate) struct PartState {
    /// The batch being filled.
    pub open: Option<Batch>,
    /// Closed batches waiting to be sent (retries first, in serial order).
    pub queue: VecDeque<Batch>,
    /// Produce requests in flight for this partition.
    pub in_flight: usize,
    /// The leader, from the latest metadata.
    pub leader: Option<i32>,
    /// Whether the latest metadata names more than one replica (an `acks = -1` Produce may
    /// then wait for followers at the broker, up to its ack timeout).
    pub replicated: bool,
    /// Why the metadata names no usable leader (reported when records time out waiting).
    pub leaderless: Option<crate::metadata::LeaderlessReason>,
    /// Idempotence: the next sequence the broker expects (advances on success only).
    pub next_seq: i32,
    /// The epoch `next_seq` belongs to.
    pub seq_epoch: i16,
    /// Records in closed, unacknowledged batches (to guess the next batch's sequence).
    pub pipeline: i64,
}

/// One topic's partitions and partitioner state.
#[derive(Debug)]
pub(crate) struct TopicState {
    pub name: Arc<str>,
    pub wire_name: StrBytes,
    pub parts: Vec<PartState>,
    /// Partition count from metadata; 0 while unknown.
    pub count: i32,
    /// Sticky partitioner: the partition and the serial of the batch it sticks to.
    pub sticky: Option<(i32, Option<u64>)>,
    pub rr: u32,
    /// Records of this topic waiting for metadata.
    pub pending: usize,
    /// Since when every broker has confirmed the topic unknown (while records wait for it).
    pub unknown_since: Option<Instant>,
    /// A creation was asked for (`create_missing_topics`).
    pub create_asked: bool,
}

impl TopicState {
    fn new(name: &str) -> Self {
        TopicState {
            name: Arc::from(name),
            wire_name: StrBytes::from(name),
            parts: Vec::new(),
            count: 0,
            sticky: None,
            rr: 0,
            pending: 0,
            unknown_since: None,
            create_asked: false,
        }
    }
}

impl Producer {
    /// Finds or registers a topic (validating its name once).
    pub(crate) fn topic_index(&mut self, name: &str) -> Result<usize, ProduceError> {
        if let Some(t) = self.topics.get(self.last_topic)
            && same_name(&t.name, name)
        {
            return Ok(self.last_topic);
        }
        let idx = match self.topic_ids.get(name) {
            Some(i) => *i,
            None => {
                validate_topic_name(name)?;
                let i = self.topics.len();
                self.topics.push(TopicState::new(name));
                self.topic_ids.insert(name.to_owned(), i);
                self.meta_gen = u64::MAX; // pick up its partitions at the next sync
                i
            }
        };
        self.last_topic = idx;
        Ok(idx)
    }

    /// Refreshes partition counts and leaders when the metadata changed, and places records
    /// that were waiting for it. Called for every record: the check is inlined, the refresh
    /// is not (its frame is large, and a record mostly finds nothing changed).
    #[inline]
    pub(crate) fn sync_metadata(&mut self, now: Instant, meta: &MetadataCache) {
        if meta.generation() != self.meta_gen {
            self.refresh_metadata(now, meta);
        }
    }

    #[inline(never)]
    fn refresh_metadata(&mut self, now: Instant, meta: &MetadataCache) {
        self.meta_gen = meta.generation();
        self.dirty = true;
        let cluster = meta.cluster();
        let mut moved = false;
        for t in &mut self.topics {
            let Some(info) = cluster.topics.get(&*t.name) else {
                for p in &mut t.parts {
                    moved |= p.leader.take().is_some();
                }
                continue;
            };
            let count = info
                .partitions
                .keys()
                .next_back()
                .map_or(0, |p| p.saturating_add(1).max(0));
            if count > t.count {
                t.count = count;
                t.parts
                    .resize_with(usize::try_from(count).unwrap_or(0), PartState::default);
            }
            for (i, p) in t.parts.iter_mut().enumerate() {
                let leader = i32::try_from(i)
                    .ok()
                    .and_then(|i| info.partitions.get(&i))
                    .and_then(|pi| pi.leader().ok());
                if leader != p.leader {
                    p.leader = leader;
                    moved = true;
                    if leader.is_some() {
                        for b in &mut p.queue {
                            if std::mem::take(&mut b.awaits_leader) {
                                b.retry_at = None;
                            }
                        }
                    }
                }
                let part = i32::try_from(i).ok().and_then(|i| info.partitions.get(&i));
                p.replicated = part.is_some_and(|pi| pi.replicas.len() > 1);
                p.leaderless = part.and_then(|pi| pi.leaderless.clone());
            }
        }
        if moved {
            // Requests queued for a former leader are moved at the next `process`.
            self.leaders_moved = true;
            self.touch_all();
        }
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            for r in pending {
                self.place_pending(now, r);
            }
        }
    }

    /// The produce hot path (see [`crate::Client::produce`]), with the producer hooks around
    /// it when there are any.
    pub(crate) fn produce(
        &mut self,
        now: Instant,
        rec: &ProducerRecord<'_>,
        meta: &MetadataCache,
        trace: Option<&TraceIds>,
    ) -> Result<ProduceId, ProduceError> {
        if self.hooks.producer.is_empty() {
            // Returned as it comes: a conversion of the result here (dropping the partition)
            // would cost a store-forwarding stall per record.
            return self.produce_record(now, rec, meta, trace, &mut None);
        }
        self.produce_hooked(now, rec, meta, trace)
    }

    /// `produce` with hooks: headers they add go into the record's copy in its batch (the
    /// caller's record is not changed), and `on_send` follows once it is accepted.
    #[cold]
    fn produce_hooked(
        &mut self,
        now: Instant,
        rec: &ProducerRecord<'_>,
        meta: &MetadataCache,
        trace: Option<&TraceIds>,
    ) -> Result<ProduceId, ProduceError> {
        let hooks = std::mem::take(&mut self.hooks.producer);
        let mut sink = std::mem::take(&mut self.header_sink);
        sink.clear();
        for h in &hooks {
            h.add_headers(rec, trace, &mut sink);
        }
        let mut partition = None;
        let result = if sink.is_empty() {
            self.produce_record(now, rec, meta, trace, &mut partition)
        } else {
            let mut headers = Vec::with_capacity(rec.headers.len() + sink.len());
            headers.extend_from_slice(rec.headers);
            headers.extend(sink.iter());
            let with = ProducerRecord {
                headers: &headers,
                ..*rec
            };
            self.produce_record(now, &with, meta, trace, &mut partition)
        };
        if let Ok(id) = &result {
            let sent = SentRecord {
                id: *id,
                record: rec,
                partition,
                trace,
            };
            hooks.iter().for_each(|h| h.on_send(&sent));
        }
        self.header_sink = sink;
        self.hooks.producer = hooks;
        result
    }

    /// The timestamp of a record produced at `now` without one of its own (the wall clock
    /// in ms), computed once per distinct `now`.
    #[inline]
    fn record_time(&mut self, now: Instant) -> i64 {
        if let Some((at, ms)) = self.last_stamp
            && at == now
        {
            return ms;
        }
        let ms = self.wall_ms(now);
        self.last_stamp = Some((now, ms));
        ms
    }

    /// Accepts one record: its id; its partition goes to `partition` when its topic's
    /// metadata is known (for the hooks, the only ones who need it).
    fn produce_record(
        &mut self,
        now: Instant,
        rec: &ProducerRecord<'_>,
        meta: &MetadataCache,
        trace: Option<&TraceIds>,
        partition: &mut Option<i32>,
    ) -> Result<ProduceId, ProduceError> {
        // 1. A closing or fenced producer takes nothing.
        if self.closing.is_some() || self.closed {
            return Err(ProduceError::Closed);
        }
        if self.fenced() {
            return Err(ProduceError::Fenced);
        }
        // 2. The topic, and the record's size against the request and buffer limits.
        self.sync_metadata(now, meta);
        let ti = self.topic_index(rec.topic)?;
        let size = record_size(rec.key, rec.value, rec.headers.iter());
        if let Err(e) = self.check_size(size) {
            if matches!(e, ProduceError::BufferFull { .. }) {
                self.buffer_exhausted();
            }
            return Err(e);
        }
        self.exhausted = false;
        let timestamp = match rec.timestamp {
            Some(t) => t,
            None => self.record_time(now),
        };
        // 3. Unknown topic (or records ahead of this one still wait): held until metadata
        //    names its partitions.
        let (count, waiting) = match self.topics.get(ti) {
            Some(t) => (t.count, t.pending > 0),
            None => (0, false),
        };
        if count == 0 || waiting {
            if let (Some(p), true) = (rec.partition, count > 0)
                && (p < 0 || p >= count)
            {
                return Err(self.invalid_partition(ti, p, count));
            }
            return Ok(self.hold_pending(now, ti, rec, size, timestamp, trace));
        }
        // 4. Known partitions: into its partition's batch.
        let p = self.choose_partition(ti, rec.partition, rec.key, size)?;
        let id = self.alloc_id();
        let appended = Appended {
            key: rec.key,
            value: rec.value,
            headers: rec.headers,
            size,
            trace,
        };
        self.append(now, ti, p, Slot { id, timestamp }, appended);
        *partition = Some(p);
        Ok(ProduceId(id))
    }

    /// The buffer refused a record: open batches are ready at the next pass whatever their
    /// linger (with partial batches of many partitions holding the whole buffer, waiting for
    /// their linger would keep the caller waiting for nothing).
    #[cold]
    fn buffer_exhausted(&mut self) {
        self.exhausted = true;
        self.dirty = true;
    }

    /// Refuses a record of `size` bytes that no request could carry or the buffer could
    /// never hold, or that does not fit in the buffer now.
    fn check_size(&self, size: usize) -> Result<(), ProduceError> {
        let overhead = BATCH_OVERHEAD + 512;
        let max = self.cfg.max_request_size.saturating_sub(overhead);
        if size > max {
            return Err(ProduceError::RecordTooLarge {
                size,
                max,
                setting: "producer.max_request_size",
                configured: self.cfg.max_request_size,
                overhead,
            });
        }
        if size > self.cfg.buffer_memory {
            return Err(ProduceError::RecordTooLarge {
                size,
                max: self.cfg.buffer_memory,
                setting: "producer.buffer_memory",
                configured: self.cfg.buffer_memory,
                overhead: 0,
            });
        }
        if self.buffered + size > self.cfg.buffer_memory {
            return Err(ProduceError::BufferFull {
                buffered: self.buffered,
                needed: size,
                limit: self.cfg.buffer_memory,
            });
        }
        Ok(())
    }

    /// Keeps an owned copy of a record whose topic's partitions are not known yet (a cold
    /// path), and asks for metadata.
    fn hold_pending(
        &mut self,
        now: Instant,
        ti: usize,
        rec: &ProducerRecord<'_>,
        size: usize,
        timestamp: i64,
        trace: Option<&TraceIds>,
    ) -> ProduceId {
        let id = self.alloc_id();
        self.buffered += size;
        self.want_refresh = true;
        if let Some(t) = self.topics.get_mut(ti) {
            t.pending += 1;
        }
        self.pending.push_back(Pending {
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

    fn invalid_partition(&self, ti: usize, partition: i32, count: i32) -> ProduceError {
        ProduceError::InvalidPartition {
            topic: self
                .topics
                .get(ti)
                .map(|t| t.name.to_string())
                .unwrap_or_default(),
            partition,
            count,
        }
    }

    /// Places a record that waited for metadata (its id is already handed out).
    fn place_pending(&mut self, now: Instant, r: Pending) {
        let count = self.topics.get(r.topic).map_or(0, |t| t.count);
        if count == 0 {
            self.pending.push_back(r);
            return;
        }
        if let Some(t) = self.topics.get_mut(r.topic) {
            t.pending = t.pending.saturating_sub(1);
        }
        if let Some(p) = r.partition
            && (p < 0 || p >= count)
        {
            self.buffered = self.buffered.saturating_sub(r.size);
            let err = DeliveryError::Broker {
                code: stellflow_proto::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            };
            self.emit_failure(r.id, err);
            return;
        }
        let key = r.key.as_deref();
        let p = self
            .choose_partition(r.topic, r.partition, key, r.size)
            .unwrap_or_default();
        self.buffered = self.buffered.saturating_sub(r.size);
        let slot = Slot {
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
        self.append(now, r.topic, p, slot, appended);
    }

    /// Chooses the partition of a record whose topic's partition count is known.
    fn choose_partition(
        &mut self,
        ti: usize,
        explicit: Option<i32>,
        key: Option<&[u8]>,
        size: usize,
    ) -> Result<i32, ProduceError> {
        let batch_size = self.cfg.batch_size;
        let Some(t) = self.topics.get_mut(ti) else {
            return Ok(0);
        };
        let n = t.count.max(1);
        if let Some(p) = explicit {
            if p < 0 || p >= t.count {
                let count = t.count;
                return Err(self.invalid_partition(ti, p, count));
            }
            return Ok(p);
        }
        let key = key.filter(|k| !k.is_empty());
        if let Some(c) = &mut self.custom {
            return Ok(c.partition(&t.name, key, n).rem_euclid(n));
        }
        if let Some(k) = key {
            return Ok(self.cfg.keyed.partition(k, n));
        }
        match self.cfg.keyless {
            KeylessPartitioner::RoundRobin => {
                let p = (t.rr % n as u32) as i32;
                t.rr = t.rr.wrapping_add(1);
                Ok(p)
            }
            _ => {
                if let Some((p, serial)) = t.sticky
                    && let Some(ps) = usize::try_from(p).ok().and_then(|i| t.parts.get(i))
                {
                    let keep = match (&ps.open, serial) {
                        (Some(b), s) => {
                            s.is_none_or(|s| s == b.serial)
                                && (b.slots.is_empty() || b.size() + size <= batch_size)
                        }
                        (None, None) => true,
                        (None, Some(_)) => false,
                    };
                    if keep {
                        return Ok(p);
                    }
                }
                // A new sticky partition: random, preferring one with a leader and not the
                // previous one.
                let prev = t.sticky.map(|(p, _)| p);
                let start = self.rng.below(n as u64) as i32;
                let mut choice = start;
                for k in 0..n {
                    let p = (start + k) % n;
                    let has_leader = usize::try_from(p)
                        .ok()
                        .and_then(|i| t.parts.get(i))
                        .is_some_and(|ps| ps.leader.is_some());
                    if has_leader && (Some(p) != prev || n == 1) {
                        choice = p;
                        break;
                    }
                }
                t.sticky = Some((choice, None));
                Ok(choice)
            }
        }
    }

    /// Appends one record to partition `p`'s open batch, opening or closing batches as needed.
    pub(crate) fn append<H: HeaderRef>(
        &mut self,
        now: Instant,
        ti: usize,
        p: i32,
        slot: Slot,
        rec: Appended<'_, H>,
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
        let full = self
            .part(ti, pi)
            .and_then(|ps| ps.open.as_ref())
            .is_some_and(|b| !b.slots.is_empty() && b.size() + size > batch_size);
        if full {
            self.close_open(ti, pi);
        }
        if self.part(ti, pi).is_some_and(|ps| ps.open.is_none()) {
            let batch = self.new_batch(now, ti, pi, slot.timestamp, size);
            if let Some(ps) = self.part_mut(ti, pi) {
                ps.open = Some(batch);
            }
        }
        let mut failed = None;
        let mut now_full = false;
        let mut serial = None;
        let mut first = false;
        if let Some(ps) = self.part_mut(ti, pi)
            && let Some(b) = &mut ps.open
            && let Some(builder) = &mut b.builder
        {
            match builder.append_with_headers(slot.timestamp, key, value, headers.iter()) {
                Ok(()) => {
                    if b.trace.is_none()
                        && let Some(t) = trace
                    {
                        b.trace = Some(t.clone());
                    }
                    b.slots.push(slot);
                    b.bytes += size;
                    now_full = builder.encoded_size() + size > batch_size;
                    serial = Some(b.serial);
                    first = b.slots.len() == 1;
                }
                Err(e) => failed = Some(DeliveryError::Encode(e.to_string())),
            }
        }
        if let Some(e) = failed {
            self.emit_failure(slot.id, e);
            return;
        }
        self.buffered += size;
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
        if now_full || self.cfg.linger.is_zero() || slot.id < self.flush_upto {
            if now_full {
                self.close_open(ti, pi);
            }
            self.dirty = true;
        }
    }

    pub(crate) fn part(&self, ti: usize, pi: usize) -> Option<&PartState> {
        self.topics.get(ti).and_then(|t| t.parts.get(pi))
    }

    pub(crate) fn part_mut(&mut self, ti: usize, pi: usize) -> Option<&mut PartState> {
        self.topics.get_mut(ti).and_then(|t| t.parts.get_mut(pi))
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
        let envelope = self.envelope;
        let params = BatchParams {
            base_timestamp: timestamp,
            producer_id: stamp.producer_id,
            producer_epoch: stamp.epoch,
            base_sequence: stamp.sequence,
            ..BatchParams::default()
        };
        let want = self.cfg.batch_size.max(first) + BATCH_OVERHEAD + 64;
        let buf = match self.buffers.pop() {
            Some(mut b) if b.capacity() >= want => {
                b.clear();
                b
            }
            _ => BytesMut::with_capacity(want),
        };
        let builder =
            BatchBuilder::in_buffer(buf, params, envelope).with_gzip_level(self.cfg.gzip_level);
        Batch {
            serial: self.next_serial,
            builder: Some(builder),
            blob: Bytes::new(),
            slots: self.slot_vecs.pop().unwrap_or_default(),
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
        let Some((producer_id, epoch)) = self.idem.as_ref().and_then(|i| i.current()) else {
            return if self.idem.is_some() {
                Stamp {
                    producer_id: -1,
                    epoch: -1,
                    sequence: -1,
                }
            } else {
                Stamp::NONE
            };
        };
        let sequence = match self.part(ti, pi) {
            Some(ps) if ps.seq_epoch == epoch => {
                i32::try_from(i64::from(ps.next_seq) + ps.pipeline).unwrap_or(0)
            }
            _ => 0,
        };
        Stamp {
            producer_id,
            epoch,
            sequence,
        }
    }

    /// Closes partition `pi`'s open batch: finishes its blob and queues it.
    pub(crate) fn close_open(&mut self, ti: usize, pi: usize) {
        let Some(mut batch) = self.part_mut(ti, pi).and_then(|ps| ps.open.take()) else {
            return;
        };
        if let Some(t) = self.topics.get_mut(ti)
            && let Some((p, _)) = t.sticky
            && usize::try_from(p).ok() == Some(pi)
        {
            t.sticky = None;
        }
        self.dirty = true;
        if batch.slots.is_empty() {
            self.recycle(batch);
            return;
        }
        match batch.builder.take().map(BatchBuilder::finish_into) {
            Some(Ok(buf)) => {
                batch.blob = buf.freeze();
                let count = i64::from(batch.count());
                if let Some(ps) = self.part_mut(ti, pi) {
                    ps.pipeline += count;
                    ps.queue.push_back(batch);
                }
                self.touch(ti, pi);
            }
            Some(Err(e)) => {
                let err = DeliveryError::Encode(e.to_string());
                self.fail_batch(ti, pi, batch, err, BatchStage::Open);
            }
            None => {}
        }
    }

    /// Returns a finished batch's memory to the pools.
    pub(crate) fn recycle(&mut self, mut batch: Batch) {
        self.buffered = self.buffered.saturating_sub(batch.bytes);
        let mut slots = std::mem::take(&mut batch.slots);
        if self.slot_vecs.len() < 64 {
            slots.clear();
            self.slot_vecs.push(slots);
        }
        let blob = std::mem::take(&mut batch.blob);
        let buf = match batch.builder.take() {
            Some(b) => b.finish_into().ok(),
            None => blob.try_into_mut().ok(),
        };
        if let Some(buf) = buf
            && buf.capacity() >= self.cfg.batch_size
            && self.buffers.len() < self.max_pooled_buffers()
        {
            self.buffers.push(buf);
        }
    }

    fn max_pooled_buffers(&self) -> usize {
        (self.cfg.buffer_memory / self.cfg.batch_size.max(1)).clamp(1, 64)
    }
}

/// Whether two topic names are equal, compared in place for names of up to 16 bytes (every
/// record of a send compares its topic with the last one's, and a call to `memcmp` each time
/// is a visible share of a produce run).
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // The first and the last `W` bytes cover a name of `W..=2W` bytes (one load each).
    #[inline]
    fn ends<const W: usize>(a: &[u8], b: &[u8]) -> bool {
        a.first_chunk::<W>() == b.first_chunk::<W>() && a.last_chunk::<W>() == b.last_chunk::<W>()
    }
    match n {
        8..=16 => ends::<8>(a, b),
        4..=7 => ends::<4>(a, b),
        2..=3 => ends::<2>(a, b),
        1 => ends::<1>(a, b),
        0 => true,
        _ => a == b,
    }
}

#[cfg(test)]
mod same_name_tests {
    use super::same_name;

    /// Names of every length up to 40 bytes equal themselves and differ from a copy with any
    /// one byte changed or with another length.
    #[test]
    fn compares_every_byte_at_every_length() {
        for n in 0..=40usize {
            let name: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same_name(&name, &name.clone()), "length {n}");
            for i in 0..n {
                let mut other = name.clone().into_bytes();
                other[i] = b'Z';
                let other = String::from_utf8(other).unwrap();
                assert!(!same_name(&name, &other), "length {n}, byte {i}");
            }
            assert!(!same_name(&name, &format!("{name}x")), "length {n}");
        }
    }
}
