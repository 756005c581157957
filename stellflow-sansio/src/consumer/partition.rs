//! The state of one assigned partition and what it holds: how far its start is resolved
//! ([`Start`]), its position and fetch bookkeeping ([`PartState`]), the Fetch answers it
//! waits to apply ([`HeldAnswer`], [`LayoutPart`]) and its fetched blobs ([`ReadyBlob`]).
//! Plain data the consumer's steps (`fetcher.rs`, `start.rs`, `delivery.rs`, `positions.rs`)
//! share; it imports none of them.

use super::{OffsetReset, TopicPartition};
use crate::offset_model::Position;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::messages::FetchPartitionResponse;
use stellflow_proto::record::{BlobRecords, blob_records};

/// A partition's id while it is assigned (`consumer/parts.rs`); an id is given again after
/// its partition left, so a holder checks the partition's epoch (epochs are never reused)
/// before it trusts one.
pub(crate) type PartId = u32;

/// How far a partition is in finding its starting position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
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
pub(crate) struct PartState {
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
    /// caller's [`crate::DriverExt::with_trace`]): the ListOffsets or OffsetFetch that resolves it
    /// carries it, retries too; cleared once the position is known.
    pub seek_trace: Option<crate::trace::TraceIds>,
    /// An answer it shared with other partitions was too large: asked alone, one blob at a
    /// time, until a blob of it is seen.
    pub ask_alone: bool,
}

impl PartState {
    /// A partition just assigned, with nothing known of its start.
    pub(super) fn new(epoch: u64) -> Self {
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
            ask_alone: false,
        }
    }

    /// Ends a backoff that only waited for a leader once `known` (metadata names one).
    pub(crate) fn leader_known(&mut self, known: bool) {
        if self.leader_wait && known {
            self.leader_wait = false;
            self.retry_at = None;
            self.not_before = None;
        }
    }

    /// Fetchable now: positioned, not paused, not backing off, and either nothing asked yet
    /// or streaming (blob size known, the last answer full, blobs known to be there below
    /// the high watermark not all asked for) with fewer than `depth` requests in flight or
    /// held.
    pub(crate) fn fetchable(&self, now: Instant, depth: usize) -> bool {
        if self.start != Start::Ready
            || self.paused
            || self.handing_over
            || self.not_before.is_some_and(|t| t > now)
        {
            return false;
        }
        let asked = self.in_flight + self.held.len();
        asked == 0
            || (asked < depth
                && self.blob_size.is_some()
                && self.empty_backoff.is_zero()
                && self.high_watermark.is_none_or(|hw| self.asked_until < hw))
    }

    /// How many blobs a request starting at `first` may ask for: `wanted`, but no more than
    /// the latest answer's high watermark says are there (at least one, which also asks
    /// whether more came): entries past the end only cost the broker a lookup each, and
    /// reserve buffer room for blobs that do not exist.
    pub(crate) fn entries_from(&self, first: i64, wanted: usize) -> usize {
        match self.high_watermark {
            Some(hw) => {
                let there = usize::try_from(hw.saturating_sub(first)).unwrap_or(0);
                wanted.min(there).max(1)
            }
            None => wanted,
        }
    }

    /// Ends the current pipeline: answers already asked for are dropped when they come, and
    /// the next request starts at `fetch_next`.
    pub(crate) fn break_pipeline(&mut self) {
        self.pipeline = self.pipeline.wrapping_add(1);
        self.asked_until = 0;
        self.held.clear();
    }

    /// Bytes of the answers held for later.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.values().map(|h| h.size).sum()
    }

    /// Records a blob size seen (the max decays slowly so one big blob does not shrink
    /// fetches forever).
    pub(crate) fn saw_blob(&mut self, size: usize) {
        let decayed = self.blob_size.map_or(0, |s| s - s / 16);
        self.blob_size = Some(size.max(decayed).max(1));
        self.ask_alone = false;
    }
}

/// A partition's part of a Fetch answer that arrived before an earlier one.
#[derive(Debug)]
pub(crate) struct HeldAnswer {
    pub(crate) part: LayoutPart,
    pub(crate) entries: Vec<FetchPartitionResponse>,
    /// Blob bytes in `entries`.
    pub(crate) size: usize,
}

/// A fetched blob waiting for delivery.
#[derive(Debug)]
pub(crate) struct ReadyBlob {
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
    pub(super) records: BlobRecords,
    /// The blob itself, for its declared record count when it is handed over whole.
    pub(super) bytes: Bytes,
    /// The id of its partition (checked against `epoch` before use: ids are given again).
    pub(crate) part: PartId,
}

impl ReadyBlob {
    pub(crate) fn new(
        (part, tp): (PartId, TopicPartition),
        offset: i64,
        epoch: u64,
        skip: u32,
        blob: Bytes,
    ) -> Self {
        let size = blob.len();
        ReadyBlob {
            id: 0,
            part,
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
    pub(super) fn progress(&self) -> u32 {
        self.records.next_index().max(self.skip)
    }
}

/// One partition's entries in a Fetch request: blobs `first .. first + count`.
#[derive(Debug, Clone)]
pub(crate) struct LayoutPart {
    /// The id of the partition asked for (checked against `epoch` before use).
    pub(super) id: PartId,
    pub(super) partition: i32,
    pub(super) first: i64,
    pub(super) count: usize,
    pub(super) epoch: u64,
    pub(super) pipeline: u64,
}

/// A Fetch request's partitions by topic, in request order.
pub(super) type Topics = Vec<(std::sync::Arc<str>, Vec<LayoutPart>)>;

/// What a Fetch in flight asked for, in request order.
#[derive(Debug, Clone)]
pub(crate) struct FetchLayout {
    pub(crate) broker: i32,
    pub(super) topics: Topics,
    /// Blob bytes the request may bring (blob sizes seen times entries).
    pub(super) estimate: usize,
}

/// Groups `(topic, partition)` pairs into per-topic lists, keeping first-seen topic order.
pub(crate) fn by_topic<T>(
    items: impl IntoIterator<Item = (TopicPartition, T)>,
) -> Vec<(TopicPartition, Vec<(i32, T)>)> {
    let mut out: Vec<(TopicPartition, Vec<(i32, T)>)> = Vec::new();
    for (tp, t) in items {
        match out
            .iter_mut()
            .find(|(k, _)| same_topic(&k.topic, &tp.topic))
        {
            Some((_, v)) => v.push((tp.partition, t)),
            None => {
                let p = tp.partition;
                out.push((tp, vec![(p, t)]));
            }
        }
    }
    out
}

/// Whether two topic names are the same, comparing bytes only when the names are not one
/// allocation (the consumer's names of one topic share one `Arc`).
pub(crate) fn same_topic(a: &std::sync::Arc<str>, b: &std::sync::Arc<str>) -> bool {
    std::sync::Arc::ptr_eq(a, b) || a == b
}
