//! Per-partition state (start resolution, positions, pause, fetch bookkeeping) and the
//! delivery queue: fetched blobs wait undecoded and are decoded record by record when polled.

use super::fetched::FetchedBlob;
use super::fetcher::{FetchLayout, LayoutPart};
use super::group::Group;
use super::lease::{LeasedBlob, RecordLease, build_record, record_bytes};
use super::offset_model::{self, Position};
use super::{ConsumerConfig, ConsumerEvent, ConsumerRecord, OffsetReset, TopicPartition};
use crate::event::Event;
use crate::metrics::Counters;
use crate::request::RequestOptions;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::messages::FetchPartitionResponse;
use stellflow_proto::record::{BlobRecords, blob_records};

/// Most blobs one [`RecordLease`] lends (when they hold few records each).
const MAX_LEASED_BLOBS: usize = 64;

/// How far a partition is in finding its starting position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Nothing asked yet: OffsetFetch with a group, else the reset policy.
    Unknown,
    /// OffsetFetch in flight.
    AwaitCommitted,
    /// ListOffsets needed for this policy (Earliest or Latest).
    NeedsReset(OffsetReset),
    /// ListOffsets by time needed (a seek to a timestamp, ms since the epoch).
    NeedsTime(i64),
    /// ListOffsets in flight.
    AwaitReset,
    /// Positioned: fetching.
    Ready,
    /// A Fetch answered nothing with a high watermark below the position: ListOffsets
    /// LATEST must tell whether the position is past the log end (the server never answers
    /// OFFSET_OUT_OF_RANGE, PROTOCOL.md §3.4) or the high watermark only lags the log end.
    CheckEnd,
    /// No position and no policy: waits for a seek.
    Stopped,
}

/// The state of one assigned partition.
#[derive(Debug)]
pub struct PartState {
    /// Start resolution.
    pub start: Start,
    /// The next record to deliver, not counting progress inside the blob being delivered.
    pub delivered: Position,
    /// The next blob offset to fetch (every blob below is delivered or buffered).
    pub fetch_next: i64,
    /// Changes on every seek or reset: answers for an older epoch are dropped.
    pub epoch: u64,
    /// Paused by the user: no fetching, no delivery.
    pub paused: bool,
    /// Fetch requests of this epoch that ask for this partition and are not answered yet.
    pub in_flight: usize,
    /// The end (exclusive) of the blobs asked for by the current pipeline: the next request
    /// starts at the larger of this and `fetch_next`.
    pub asked_until: i64,
    /// The current pipeline: bumped whenever an answer leaves a hole (an error, a short or
    /// empty answer), after which answers of the older pipeline are dropped and fetching
    /// starts again at `fetch_next`.
    pub pipeline: u64,
    /// Answers of the current pipeline that overtook an earlier one, by first offset, held
    /// until `fetch_next` reaches them (the server reorders answers, PROTOCOL.md §1).
    pub held: BTreeMap<i64, HeldAnswer>,
    /// Not fetched before this instant (empty-fetch or error backoff).
    pub not_before: Option<Instant>,
    /// The current empty-fetch backoff (zero after data).
    pub empty_backoff: Duration,
    /// The largest recent blob size, for sizing the number of entries.
    pub blob_size: Option<usize>,
    /// High watermark from the latest fetch.
    pub high_watermark: Option<i64>,
    /// Log start from the latest fetch.
    pub log_start: Option<i64>,
    /// The last committed position known (read or written by this consumer).
    pub committed: Option<Position>,
    /// Blobs held back while paused, in order.
    pub parked: VecDeque<ReadyBlob>,
    /// Start resolution is retried no earlier than this.
    pub retry_at: Option<Instant>,
    /// Backing off because no leader was known: ends as soon as the metadata names one.
    pub leader_wait: bool,
    /// A ListOffsets check found this fetch offset within the log (the high watermark only
    /// lags the log end); no new check for it before the instant.
    pub end_checked: Option<(i64, Instant)>,
    /// Being handed over to another group member: not fetched, nothing delivered; the
    /// position is kept for the commit that comes before the release.
    pub handing_over: bool,
    /// The trace context of the seek whose target is being resolved (`Client::seek` with the
    /// caller's [`crate::Client::set_trace`]): the ListOffsets or OffsetFetch that resolves it
    /// carries it, retries too; cleared once the position is known.
    pub seek_trace: Option<crate::trace::TraceIds>,
}

impl PartState {
    fn new(epoch: u64) -> Self {
        PartState {
            start: Start::Unknown,
            delivered: Position::default(),
            fetch_next: 0,
            epoch,
            paused: false,
            in_flight: 0,
            asked_until: 0,
            pipeline: 0,
            held: BTreeMap::new(),
            not_before: None,
            empty_backoff: Duration::ZERO,
            blob_size: None,
            high_watermark: None,
            log_start: None,
            committed: None,
            parked: VecDeque::new(),
            retry_at: None,
            leader_wait: false,
            end_checked: None,
            handing_over: false,
            seek_trace: None,
        }
    }

    /// Ends a backoff that only waited for a leader once `known` (metadata names one).
    pub fn leader_known(&mut self, known: bool) {
        if self.leader_wait && known {
            self.leader_wait = false;
            self.retry_at = None;
            self.not_before = None;
        }
    }

    /// Fetchable now: positioned, not paused, not backing off, and either nothing asked yet
    /// or streaming (blob size known, the last answer full) with fewer than `depth` requests
    /// in flight or held.
    pub fn fetchable(&self, now: Instant, depth: usize) -> bool {
        if self.start != Start::Ready
            || self.paused
            || self.handing_over
            || self.not_before.is_some_and(|t| t > now)
        {
            return false;
        }
        let asked = self.in_flight + self.held.len();
        asked == 0 || (asked < depth && self.blob_size.is_some() && self.empty_backoff.is_zero())
    }

    /// Ends the current pipeline: answers already asked for are dropped when they come, and
    /// the next request starts at `fetch_next`.
    pub fn break_pipeline(&mut self) {
        self.pipeline = self.pipeline.wrapping_add(1);
        self.asked_until = 0;
        self.held.clear();
    }

    /// Bytes of the answers held for later.
    pub fn held_bytes(&self) -> usize {
        self.held.values().map(|h| h.size).sum()
    }

    /// Records a blob size seen (the max decays slowly so one big blob does not shrink
    /// fetches forever).
    pub fn saw_blob(&mut self, size: usize) {
        let decayed = self.blob_size.map_or(0, |s| s - s / 16);
        self.blob_size = Some(size.max(decayed).max(1));
    }
}

/// A partition's part of a Fetch answer that arrived before an earlier one.
#[derive(Debug)]
pub struct HeldAnswer {
    pub(crate) part: LayoutPart,
    pub(crate) entries: Vec<FetchPartitionResponse>,
    /// Blob bytes in `entries`.
    pub(crate) size: usize,
}

/// A fetched blob waiting for delivery.
#[derive(Debug)]
pub struct ReadyBlob {
    /// Tells this blob from every other the queue held (set by `Consumer::push_blob`).
    pub(crate) id: u64,
    pub(crate) tp: TopicPartition,
    pub(crate) offset: i64,
    pub(crate) epoch: u64,
    pub(crate) size: usize,
    /// Records below this index were delivered before (mid-blob resume or seek).
    pub(crate) skip: u32,
    /// Decoded lazily, once the blob reaches the front of the queue: the batch checks (CRC)
    /// then run right before its records are read, while the bytes are still in cache. After
    /// each record it says whether that was the blob's last ([`BlobRecords::at_end`]), so the
    /// blob is finished (and the position moves to the next blob) as soon as that record is
    /// taken, without decoding ahead.
    records: BlobRecords,
    /// The blob itself, for its declared record count when it is handed over whole.
    bytes: Bytes,
}

impl ReadyBlob {
    pub(crate) fn new(tp: TopicPartition, offset: i64, epoch: u64, skip: u32, blob: Bytes) -> Self {
        let size = blob.len();
        ReadyBlob {
            id: 0,
            tp,
            offset,
            epoch,
            size,
            skip,
            records: blob_records(blob.clone()),
            bytes: blob,
        }
    }

    /// The index of the next record to deliver.
    fn progress(&self) -> u32 {
        self.records.next_index().max(self.skip)
    }
}

/// The whole consumer state, owned by the [`crate::Client`].
#[derive(Debug)]
pub struct Consumer {
    pub(crate) config: ConsumerConfig,
    pub(crate) parts: BTreeMap<TopicPartition, PartState>,
    pub(crate) ready: VecDeque<ReadyBlob>,
    pub(crate) buffered: usize,
    pub(crate) fetch_wake: bool,
    pub(crate) fetches: HashMap<u64, FetchLayout>,
    /// Fetch requests in flight per broker.
    pub(crate) fetching: HashMap<i32, usize>,
    pub(crate) resets: HashMap<u64, Vec<(TopicPartition, u64, super::start::Ask)>>,
    pub(crate) offset_fetches: HashMap<u64, Vec<(TopicPartition, u64)>>,
    pub(crate) group: Group,
    pub(crate) next_epoch: u64,
    /// Counts Fetch requests built, to alternate and rotate partitions of unknown blob size.
    pub(crate) fetch_turn: usize,
    pub(crate) max_frame: usize,
    /// `close_consumer` was called.
    pub(crate) closing: bool,
    /// Fully closed: nothing more happens.
    pub(crate) closed: bool,
    /// `close_consumer` calls made while a close was under way; each gets its own `Closed`.
    pub(crate) extra_close_waiters: u32,
    /// The id the next queued blob gets.
    pub(crate) next_blob_id: u64,
    /// What the application marked processed (`consumer/processed.rs`).
    pub(crate) processed: super::processed::Processed,
    /// When `close_consumer` was called.
    pub(crate) close_started: Option<Instant>,
    /// The trace context of the latest poll ([`crate::Client::set_fetch_trace`]) and the
    /// request options carrying it, which Fetch requests are sent with.
    pub(crate) fetch_trace: Option<crate::trace::TraceIds>,
    pub(crate) fetch_options: RequestOptions,
}

impl Consumer {
    /// A consumer with no assignment.
    pub fn new(
        config: ConsumerConfig,
        bootstrap: Option<crate::BrokerAddress>,
        max_frame: usize,
    ) -> Self {
        let group = Group::new(&config, bootstrap);
        Consumer {
            fetch_trace: None,
            fetch_options: RequestOptions::default(),
            config,
            parts: BTreeMap::new(),
            ready: VecDeque::new(),
            buffered: 0,
            fetch_wake: false,
            fetches: HashMap::new(),
            fetching: HashMap::new(),
            resets: HashMap::new(),
            offset_fetches: HashMap::new(),
            group,
            next_epoch: 1,
            fetch_turn: 0,
            max_frame,
            closing: false,
            closed: false,
            extra_close_waiters: 0,
            next_blob_id: 0,
            processed: Default::default(),
            close_started: None,
        }
    }

    /// Whether the consumer has anything to do.
    pub fn active(&self) -> bool {
        !self.closed && (!self.parts.is_empty() || self.group.active())
    }

    pub(crate) fn bump_epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    /// Replaces the assignment; returns (revoked, added).
    pub(crate) fn set_assignment(
        &mut self,
        wanted: &[TopicPartition],
    ) -> (Vec<TopicPartition>, Vec<TopicPartition>) {
        let wanted_set: HashSet<&TopicPartition> = wanted.iter().collect();
        let revoked: Vec<TopicPartition> = self
            .parts
            .keys()
            .filter(|tp| !wanted_set.contains(tp))
            .cloned()
            .collect();
        for tp in &revoked {
            self.remove_partition(tp);
        }
        let mut added = Vec::new();
        for tp in wanted {
            if !self.parts.contains_key(tp) {
                let e = self.bump_epoch();
                self.parts.insert(tp.clone(), PartState::new(e));
                added.push(tp.clone());
            }
        }
        (revoked, added)
    }

    fn remove_partition(&mut self, tp: &TopicPartition) {
        self.processed.forget(tp);
        if let Some(p) = self.parts.remove(tp) {
            self.buffered = self
                .buffered
                .saturating_sub(p.parked.iter().map(|b| b.size).sum());
        }
        self.drop_ready(tp);
    }

    /// Drops every queued blob of `tp`.
    pub(crate) fn drop_ready(&mut self, tp: &TopicPartition) {
        let mut freed = 0;
        self.ready.retain(|b| {
            let keep = b.tp != *tp;
            if !keep {
                freed += b.size;
            }
            keep
        });
        if let Some(p) = self.parts.get_mut(tp) {
            freed += p.parked.drain(..).map(|b| b.size).sum::<usize>();
        }
        self.release(freed);
    }

    fn release(&mut self, bytes: usize) {
        let was_full = self.buffered >= self.config.max_buffered_bytes;
        self.buffered = self.buffered.saturating_sub(bytes);
        if was_full && self.buffered < self.config.max_buffered_bytes {
            self.fetch_wake = true;
        }
    }

    /// Moves `tp` to `position`: drops what was fetched, invalidates fetches in flight.
    pub(crate) fn reposition(&mut self, tp: &TopicPartition, position: Position) {
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            p.epoch = e;
            p.delivered = position;
            p.fetch_next = position.offset;
            p.start = Start::Ready;
            p.seek_trace = None;
            p.in_flight = 0;
            p.break_pipeline();
            p.not_before = None;
            p.empty_backoff = Duration::ZERO;
            self.fetch_wake = true;
        }
    }

    /// Stops `tp` for a handover to another group member: its undelivered records are
    /// dropped, fetches in flight are ignored when they answer, nothing more is fetched, and
    /// its position (mid-blob included) stays what was delivered, for the commit that comes
    /// before the release.
    pub(crate) fn stop_for_handover(&mut self, tp: &TopicPartition) {
        let position = self.position(tp);
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            if let Some(pos) = position {
                p.delivered = pos;
            }
            p.epoch = e;
            p.in_flight = 0;
            p.break_pipeline();
            p.handing_over = true;
        }
    }

    /// Sets `tp` back to start resolution `start` (seek to beginning/end/committed).
    pub(crate) fn restart(&mut self, tp: &TopicPartition, start: Start) {
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            p.epoch = e;
            p.start = start;
            p.in_flight = 0;
            p.break_pipeline();
            p.retry_at = None;
        }
    }

    /// The position of `tp`, counting records delivered from a partly consumed blob.
    pub fn position(&self, tp: &TopicPartition) -> Option<Position> {
        let p = self.parts.get(tp)?;
        if !matches!(p.start, Start::Ready) {
            return None;
        }
        let front = if p.paused {
            p.parked.front()
        } else {
            self.ready.iter().find(|b| b.tp == *tp)
        };
        match front {
            Some(b) if b.offset == p.delivered.offset && b.epoch == p.epoch => {
                Some(Position::new(b.offset, b.progress()))
            }
            _ => Some(p.delivered),
        }
    }

    /// Every positioned partition with its position.
    pub fn positions(&self) -> Vec<(TopicPartition, Position)> {
        self.parts
            .keys()
            .filter_map(|tp| self.position(tp).map(|p| (tp.clone(), p)))
            .collect()
    }

    /// Pauses or resumes `tp`; its buffered blobs are held aside meanwhile.
    pub(crate) fn set_paused(&mut self, tp: &TopicPartition, paused: bool) {
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        if p.paused == paused {
            return;
        }
        p.paused = paused;
        if paused {
            let (mine, rest): (VecDeque<ReadyBlob>, VecDeque<ReadyBlob>) =
                std::mem::take(&mut self.ready)
                    .into_iter()
                    .partition(|b| b.tp == *tp);
            self.ready = rest;
            p.parked = mine;
        } else {
            self.ready.extend(p.parked.drain(..));
            self.fetch_wake = true;
        }
    }

    /// Queues a fetched blob for delivery.
    pub(crate) fn push_blob(&mut self, mut blob: ReadyBlob) {
        blob.id = self.next_blob_id;
        self.next_blob_id += 1;
        self.buffered += blob.size;
        match self.parts.get_mut(&blob.tp) {
            Some(p) if p.paused => p.parked.push_back(blob),
            _ => self.ready.push_back(blob),
        }
    }

    /// The next record, decoded from the front blob; `None` when nothing is buffered.
    pub fn poll_record(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
    ) -> Option<ConsumerRecord> {
        self.next_record(events, counters, |r| r)
    }

    /// Appends up to `max` records to `out` and returns how many; each record is built in
    /// its slot of `out` rather than moved there (a `ConsumerRecord` is ~150 bytes, and a
    /// move per record showed in profiles of small records).
    pub fn poll_records(
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
    /// place); `None` when nothing is buffered.
    #[inline(always)]
    fn next_record<T>(
        &mut self,
        events: &mut VecDeque<Event>,
        counters: &mut Counters,
        emit: impl FnOnce(ConsumerRecord) -> T,
    ) -> Option<T> {
        loop {
            let front = self.ready.front_mut()?;
            match front.records.next() {
                None => self.finish_front(),
                Some(Err(error)) => {
                    events.push_back(Event::Consumer(ConsumerEvent::CorruptBlob {
                        partition: front.tp.clone(),
                        offset: front.offset,
                        error,
                    }));
                    self.finish_front();
                }
                Some(Ok(r)) => {
                    let done = front.records.at_end();
                    if r.index_in_blob < front.skip {
                        if done {
                            self.finish_front();
                        }
                        continue;
                    }
                    let record = build_record(&front.tp, front.offset, r, done);
                    crate::metrics::emit::consumed(
                        counters,
                        &front.tp.topic,
                        1,
                        record_bytes(&record),
                    );
                    let out = emit(record);
                    if done {
                        self.finish_front();
                    }
                    return Some(out);
                }
            }
        }
    }

    /// Hands over the front blob whole (see [`FetchedBlob`]); `None` when nothing is
    /// buffered. Its records count as delivered now: the position moves past the blob and its
    /// buffer space is freed.
    pub fn poll_blob(&mut self, counters: &mut Counters) -> Option<FetchedBlob> {
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
    pub fn lease_records(&self, max: usize) -> Option<RecordLease> {
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
    pub fn redeem_lease(
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

    fn finish_front(&mut self) {
        self.take_front();
    }

    /// Removes the front blob, moving its partition's position past it and freeing its space.
    fn take_front(&mut self) -> Option<ReadyBlob> {
        let b = self.ready.pop_front()?;
        if let Some(p) = self.parts.get_mut(&b.tp)
            && p.epoch == b.epoch
            && b.offset >= p.delivered.offset
        {
            p.delivered = Position::blob(offset_model::next_after(b.offset));
        }
        self.release(b.size);
        Some(b)
    }

    /// Lag of `tp`: high watermark − position, from the latest fetch.
    pub fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        let hw = self.parts.get(tp)?.high_watermark?;
        let pos = self.position(tp)?;
        Some((hw - pos.offset).max(0))
    }
}
