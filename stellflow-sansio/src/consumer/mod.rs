//! The consumer: assignment and groups on timers, positions, fetching without server
//! long-poll, exact resumable commits (DESIGN §3.1, §3.6, §3.7).
//!
//! # Layout
//!
//! One way down, no circle (`api-surface/tests/import_circles.rs` checks it):
//!
//! * **Above:** the client. Its public consumer methods (`client/consume.rs`) are thin: set
//!   the clock, call a [`Consumer`] method, run the loop. The consumer never names the client.
//! * **The consumer** ([`Consumer`], here) and its steps, each an `impl Consumer` in its own
//!   file taking the client's non-feature state as one explicit borrow (`sh: &mut Shared`):
//!   `commands` (the client's commands), `drive` (its pass, deadline and answer routing),
//!   `schedule` (per leader broker, the queue of partitions the next Fetch asks for),
//!   [`positions`] (assignment, seeks, resets, pauses), `delivery` (the delivery queue: lazy,
//!   zero-copy decoding), [`fetcher`] (one Fetch per leader broker, one entry per blob,
//!   empty-fetch backoff), `start` (start positions), `processed` (marks), `commit`, [`group`] (coordinator,
//!   JoinGroup/SyncGroup/Heartbeat, rebalances) and `membership` (the member registry). A step
//!   calls another through `Consumer`'s methods, never by importing its file.
//! * **Plain data the steps share**, importing no step: `partition` (one partition's state:
//!   start, position, fetch bookkeeping, its blobs), `parts` (the assigned partitions by id,
//!   and the ones the next pass looks at: changed since the last, or whose wait ended), `member` (the member's protocol state),
//!   `registry`, `assignor`, `lease`, `view`.
//! * **Below the consumer**, importing nothing of it, the contract it shares with the rest of
//!   the crate: [`crate::offset_model`] (the one module that knows how offsets and blobs
//!   relate, with [`Position`]), `topic_partition.rs`, `consumer_record.rs`,
//!   `consumer_event.rs` (events and errors), `consumer_config.rs`, `fetched_blob.rs` (a blob
//!   handed over whole, [`FetchedBlob`]), and `shared.rs`.
//!
//! # Delivery
//!
//! Records are pulled with [`crate::Client::poll_record`] (one at a time, no allocation) — not
//! through [`crate::Output::Event`], which carries the consumer's notifications as
//! [`crate::Event::Consumer`]. Fetched blobs wait undecoded in a queue bounded by
//! [`ConsumerConfig::max_buffered_bytes`]; each record is decoded when it is polled, and its
//! key, value and headers are slices of the fetched response (never copied). When drivers
//! take records, and why taking them matters for fetching: the contract on [`crate::Client`].
//!
//! [`crate::Client::poll_blob`] is the other way to take them: a whole fetched blob
//! ([`FetchedBlob`]) whose records decode as the caller iterates it, with no
//! [`ConsumerRecord`] per record; taking it delivers the whole blob (its position moves past
//! it). For small records it saves the per-record bookkeeping, and the adapters' `poll_blobs`
//! decodes outside their lock. The two can be mixed: a blob partly taken as records yields
//! the rest.
//!
//! # At the edges of the log
//!
//! * **High watermark.** The server serves blobs up to its log end, past the high watermark
//!   (PROTOCOL.md §3.4). The consumer delivers only blobs below the high watermark of the same
//!   answer, as Kafka does, so nothing a failover could truncate is delivered; lag is measured
//!   from it. On a single broker the high watermark is the log end.
//! * **Past the log end.** The server answers a Fetch past the log end with nothing and no
//!   error. An empty answer whose high watermark is below the position is checked with
//!   ListOffsets LATEST; a position past the log end (a topic deleted and re-created) raises
//!   [`ConsumerEvent::PositionOutOfRange`] and applies [`OffsetReset`] (`None` stops the
//!   partition until a seek). A position within the log end only waits for the high watermark.
//! * **Below the log start** (retention): [`ConsumerEvent::LogStartMoved`], then the policy.
//! * **Answer sizes.** An entry returns at least one whole blob, and nothing caps an answer, so
//!   a Fetch never asks more than the blob sizes seen allow, nor more blobs of a partition
//!   than the latest high watermark says are there: a partition whose blob size is unknown
//!   is asked with one entry, alone before any blob was fetched, else beside others of
//!   unknown size as if each blob were four times the largest fetched. If the broker's answer is still larger than
//!   [`crate::ClientConfig::max_response_frame`], the partitions of that request are asked
//!   alone next; a single blob that alone is too large raises
//!   [`ConsumerEvent::FetchTooLarge`] and stops its partition until a seek, instead of asking
//!   again.
//! * **Entry order.** A partition's entries are always ascending consecutive offsets: the
//!   server hands a partition's bytes to its entries in order of the entries that read
//!   something, so an empty entry before a non-empty one would take its bytes (DESIGN §3.15).

pub(crate) mod fetcher;
pub(crate) mod group;
pub(crate) mod positions;

mod assignor;
mod commands;
mod commit;
mod coordinator;
mod delivery;
mod drive;
mod instance;
mod lease;
mod member;
mod membership;
mod missing;
mod partition;
mod parts;
mod processed;
mod rebalance;
mod registry;
mod roster;
mod rounds;
mod schedule;
mod start;
mod view;

pub(crate) use commands::{Close, Revocations, Unowned};
pub use lease::RecordLease;
pub use registry::REGISTRY_TOPIC;

// The contract types the consumer shares with the rest of the crate live below it; its
// files name them through here.
use crate::consumer_config::{ConsumerConfig, OffsetReset};
use crate::consumer_event::{
    CommitId, CommitKind, ConsumerError, ConsumerEvent, LogStartAction, RevocationId,
};
use crate::consumer_record::ConsumerRecord;
use crate::fetched_blob::FetchedBlob;
use crate::net::OwnerTag;
use crate::offset_model::Position;
use crate::request::RequestOptions;
use crate::shared::Shared;
use crate::topic_partition::TopicPartition;
use group::Group;
use partition::{FetchLayout, ReadyBlob};
use parts::{PartId, Parts};
use schedule::BrokerQueue;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

/// What a seek moves a partition to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeekTo {
    /// An exact position (blob offset and in-blob index).
    Position(Position),
    /// The log start (ListOffsets EARLIEST).
    Beginning,
    /// The log end (ListOffsets LATEST).
    End,
    /// The committed position of the group (or the reset policy when there is none).
    Committed,
    /// The first blob the broker appended at or after this time (ms since the Unix epoch; the
    /// broker's own append time, its only time index), found with ListOffsets by time on the
    /// leader (Kafka's `offsetsForTimes` + `seek`); the log end when no blob is that recent.
    /// Resolved like [`SeekTo::Beginning`]: the position is `None` until the answer, failures
    /// are retried, and [`ConsumerEvent::PositionResolved`] says where it landed. `-1` and `-2`
    /// are the wire's LATEST and EARLIEST.
    Timestamp(i64),
}

/// The whole consumer state, owned by the [`crate::Client`]. Its steps add their methods in
/// their own files, each importing only the plain data below it (`partition.rs`,
/// `member.rs`, the crate's contract modules) and never another step's file the other way: assignment
/// and positions (`positions.rs`), the delivery queue (`delivery.rs`), fetching
/// (`fetcher.rs`), start positions (`start.rs`), commits (`commit.rs`), the group protocol
/// (`group.rs`) and the member registry (`membership.rs`).
#[derive(Debug)]
pub(crate) struct Consumer {
    pub(crate) config: ConsumerConfig,
    /// The assigned partitions, and those a pass looks at (`consumer/parts.rs`).
    pub(crate) parts: Parts,
    /// Per leader broker, the partitions that may fetch next (`consumer/schedule.rs`).
    pub(crate) fetch_queues: BTreeMap<i32, BrokerQueue>,
    /// Partitions waiting for the metadata to name their leader: woken when it changes.
    pub(crate) waiting_leader: Vec<PartId>,
    /// The metadata generation the waiting partitions were last looked at under.
    pub(crate) seen_metadata: u64,
    /// Partitions whose committed offset waits for the group coordinator to be known.
    pub(crate) waiting_coordinator: Vec<PartId>,
    /// Partitions holding answers that overtook an earlier one (some may hold none by now).
    pub(crate) held_parts: BTreeSet<PartId>,
    pub(crate) ready: VecDeque<ReadyBlob>,
    pub(crate) buffered: usize,
    pub(crate) fetch_wake: bool,
    pub(crate) fetches: HashMap<u64, FetchLayout>,
    /// Fetch requests in flight per broker.
    pub(crate) fetching: HashMap<i32, usize>,
    pub(crate) resets: HashMap<u64, Vec<(TopicPartition, u64, start::Ask)>>,
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
    /// The largest blob fetched lately over every partition (a maximum that decays by 1/64 a
    /// blob): the guess for partitions whose blob size is unknown, and the least size a
    /// request expects of any partition's next blob (`consumer/schedule.rs`), since one
    /// partition's first blobs say little about its later ones.
    pub(crate) largest_blob: usize,
    /// What the application marked processed (`consumer/processed.rs`).
    pub(crate) processed: processed::Processed,
    /// When `close_consumer` was called.
    pub(crate) close_started: Option<Instant>,
    /// The trace context of the latest poll ([`crate::DriverExt::set_fetch_trace`]) and the
    /// request options carrying it, which Fetch requests are sent with.
    pub(crate) fetch_trace: Option<crate::trace::TraceIds>,
    pub(crate) fetch_options: RequestOptions,
    /// Topics asked for that no broker knows (`consumer/missing.rs`).
    pub(crate) missing: missing::MissingTopics,
}

impl Consumer {
    /// A consumer with no assignment.
    pub(crate) fn new(
        config: ConsumerConfig,
        bootstrap: Option<crate::BrokerAddress>,
        max_frame: usize,
    ) -> Self {
        let group = Group::new(&config, bootstrap);
        Consumer {
            missing: Default::default(),
            fetch_trace: None,
            fetch_options: RequestOptions::default(),
            config,
            parts: Parts::default(),
            fetch_queues: BTreeMap::new(),
            waiting_leader: Vec::new(),
            seen_metadata: 0,
            waiting_coordinator: Vec::new(),
            held_parts: BTreeSet::new(),
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
            largest_blob: 0,
            processed: Default::default(),
            close_started: None,
        }
    }

    /// Whether the consumer has anything to do.
    pub(crate) fn active(&self) -> bool {
        !self.closed && (!self.parts.is_empty() || self.group.active())
    }
}

/// Queues a consumer notification for the driver's drain (as [`crate::Event::Consumer`]).
/// The consumer's steps take the client's non-feature state as one explicit borrow,
/// `sh: &mut Shared` (`crate::shared`), and never the client itself.
pub(crate) fn emit(sh: &mut Shared, e: ConsumerEvent) {
    sh.events.push_back(crate::event::Event::Consumer(e));
}

/// What a consumer request is for; carried as its [`Op::tag`] in
/// [`crate::net::Origin::Consumer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A Fetch.
    Fetch,
    /// ListOffsets for a reset.
    ListOffsets,
    /// OffsetFetch for start positions.
    OffsetFetch,
    /// OffsetCommit of a commit.
    Commit(u64),
    /// FindCoordinator.
    FindCoordinator,
    /// JoinGroup.
    Join,
    /// SyncGroup.
    Sync,
    /// Heartbeat.
    Heartbeat,
    /// OffsetFetch of the group's member registry.
    RegistryRead,
    /// OffsetCommit of this member's registry slot (and of slots it frees).
    RegistryWrite,
}

impl Op {
    /// This op as the router's opaque note ([`OwnerTag`]): one kind per variant, and the
    /// commit's id for [`Op::Commit`]. [`Op::from_tag`] reads it back.
    pub(crate) fn tag(self) -> OwnerTag {
        let (kind, id) = match self {
            Op::Fetch => (0, 0),
            Op::ListOffsets => (1, 0),
            Op::OffsetFetch => (2, 0),
            Op::Commit(id) => (3, id),
            Op::FindCoordinator => (4, 0),
            Op::Join => (5, 0),
            Op::Sync => (6, 0),
            Op::Heartbeat => (7, 0),
            Op::RegistryRead => (8, 0),
            Op::RegistryWrite => (9, 0),
        };
        OwnerTag { kind, id }
    }

    /// The op a tag made by [`Op::tag`] stands for; `None` for a kind no op makes.
    pub(crate) fn from_tag(tag: OwnerTag) -> Option<Op> {
        Some(match tag.kind {
            0 => Op::Fetch,
            1 => Op::ListOffsets,
            2 => Op::OffsetFetch,
            3 => Op::Commit(tag.id),
            4 => Op::FindCoordinator,
            5 => Op::Join,
            6 => Op::Sync,
            7 => Op::Heartbeat,
            8 => Op::RegistryRead,
            9 => Op::RegistryWrite,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Op;
    use crate::net::OwnerTag;

    #[test]
    fn every_op_comes_back_from_its_tag_and_no_two_ops_share_one() {
        let ops = [
            Op::Fetch,
            Op::ListOffsets,
            Op::OffsetFetch,
            Op::Commit(0),
            Op::Commit(u64::MAX),
            Op::FindCoordinator,
            Op::Join,
            Op::Sync,
            Op::Heartbeat,
            Op::RegistryRead,
            Op::RegistryWrite,
        ];
        for op in ops {
            assert_eq!(Op::from_tag(op.tag()), Some(op), "{op:?}");
        }
        let tags: std::collections::BTreeSet<(u8, u64)> =
            ops.iter().map(|op| (op.tag().kind, op.tag().id)).collect();
        assert_eq!(tags.len(), ops.len());
        assert_eq!(Op::from_tag(OwnerTag { kind: 10, id: 0 }), None);
        assert_eq!(
            Op::from_tag(OwnerTag {
                kind: u8::MAX,
                id: 7
            }),
            None
        );
    }
}
