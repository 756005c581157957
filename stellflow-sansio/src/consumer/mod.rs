//! The consumer: assignment and groups on timers, positions, fetching without server
//! long-poll, exact resumable commits (DESIGN §3.1, §3.6, §3.7).
//!
//! * [`offset_model`] — the one module that knows how offsets and blobs relate.
//! * `partition` — one partition's state (start, position, fetch bookkeeping, its blobs).
//! * [`positions`] — assignment, seeks, resets, pauses; `delivery` — the delivery queue (lazy,
//!   zero-copy decoding); `fetched` — a blob handed over whole ([`FetchedBlob`]).
//! * [`fetcher`] — one Fetch per leader broker, one entry per blob, empty-fetch backoff.
//! * [`group`] — coordinator, JoinGroup/SyncGroup/Heartbeat, rebalances, commits.
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
//!   a Fetch never asks more than the blob sizes seen allow: a partition whose blob size is
//!   unknown is asked alone with one entry. If the broker's answer is still larger than
//!   [`crate::ClientConfig::max_response_frame`], the partitions of that request are asked
//!   alone next; a single blob that alone is too large raises
//!   [`ConsumerEvent::FetchTooLarge`] and stops its partition until a seek, instead of asking
//!   again.
//! * **Entry order.** A partition's entries are always ascending consecutive offsets: the
//!   server hands a partition's bytes to its entries in order of the entries that read
//!   something, so an empty entry before a non-empty one would take its bytes (DESIGN §3.15).

pub mod config;
pub mod fetcher;
pub mod group;
pub mod offset_model;
pub mod positions;

mod api;
mod assignor;
mod commit;
mod delivery;
mod fetched;
mod lease;
mod member;
mod membership;
mod partition;
mod processed;
mod registry;
mod start;
mod view;

pub use config::{ConsumerConfig, OffsetReset};
pub use fetched::{BlobRecordsFrom, FetchedBlob};
pub use lease::RecordLease;
pub use offset_model::Position;
pub use registry::REGISTRY_TOPIC;

use crate::error::RequestError;
use crate::request::RequestOptions;
use bytes::Bytes;
use fetcher::FetchLayout;
use group::Group;
use partition::{PartState, ReadyBlob};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_proto::ErrorCode;
use stellflow_proto::record::{BatchError, BlobFormat, Headers};

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic (shared, cheap to clone).
    pub topic: Arc<str>,
    /// The partition id.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic partition. The topic may be a `&str`, a `String`, or the `Arc<str>` a record
    /// carries (shared, not copied):
    ///
    /// ```
    /// use std::sync::Arc;
    /// # use stellflow_sansio::TopicPartition;
    /// let name: Arc<str> = Arc::from("orders");
    /// let a = TopicPartition::new("orders", 0);
    /// let b = TopicPartition::new(String::from("orders"), 0);
    /// let c = TopicPartition::new(&name, 0); // shares `name`'s allocation
    /// assert!(a == b && b == c && Arc::ptr_eq(&c.topic, &name));
    /// ```
    pub fn new(topic: impl IntoTopic, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into_topic(),
            partition,
        }
    }
}

/// A topic name [`TopicPartition::new`] takes: `&str`, `String` and `&String` are copied
/// into a new `Arc<str>`, an `Arc<str>` (or a reference to one, such as
/// [`ConsumerRecord::topic`]) is shared.
pub trait IntoTopic {
    /// The name as a shared string.
    fn into_topic(self) -> Arc<str>;
}

impl IntoTopic for &str {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for &String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self.as_str())
    }
}

impl IntoTopic for Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self
    }
}

impl IntoTopic for &Arc<str> {
    fn into_topic(self) -> Arc<str> {
        Arc::clone(self)
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One consumed record. `key`, `value` and `headers` are slices of the fetched bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset of the blob that holds the record (one offset per produced blob).
    pub offset: i64,
    /// The record's index in its blob, counted across all batches of the blob.
    pub index: u32,
    /// The record timestamp (producer time, milliseconds since the epoch).
    pub timestamp: i64,
    /// The key, `None` when null.
    pub key: Option<Bytes>,
    /// The value, `None` when null.
    pub value: Option<Bytes>,
    /// The headers, split lazily.
    pub headers: Headers,
    /// The format of the blob it came from.
    pub format: BlobFormat,
    /// Whether the record is the last of its blob. The decoder knows this for every record
    /// without decoding the next one (from the batch's record count, its length and the
    /// batches after it); it is `false` for the record before a corrupt remainder of the blob
    /// (that remainder is reported as [`ConsumerEvent::CorruptBlob`] and skipped).
    pub last_in_blob: bool,
}

impl ConsumerRecord {
    /// The record's topic and partition (the topic shared, not copied).
    ///
    /// ```
    /// # use stellflow_sansio::{ConsumerRecord, TopicPartition};
    /// fn where_from(record: &ConsumerRecord) -> TopicPartition {
    ///     record.topic_partition() // e.g. for the consumer's `position`, `seek` or `pause`
    /// }
    /// ```
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition {
            topic: Arc::clone(&self.topic),
            partition: self.partition,
        }
    }

    /// The position right after this record: mark it processed (`mark_processed`) or commit
    /// it (`commit_positions`) once the record is processed.
    ///
    /// After the last record of a blob ([`ConsumerRecord::last_in_blob`]) this is the start
    /// of the next blob, `(offset + 1, 0)` — the same position the consumer itself reports
    /// (and auto-commits) once the blob is finished. Otherwise it is `(offset, index + 1)`;
    /// when the end of the blob cannot be known (a corrupt remainder) that form resumes at
    /// the same place, as the skipped remainder has no records to deliver.
    pub fn next_position(&self) -> Position {
        if self.last_in_blob {
            Position::blob(offset_model::next_after(self.offset))
        } else {
            Position::new(self.offset, self.index.saturating_add(1))
        }
    }
}

/// Identifies a commit; its outcome is [`ConsumerEvent::CommitCompleted`] with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId(pub u64);

/// Identifies one revocation ([`ConsumerEvent::PartitionsRevoking`]); a subscription made with
/// `subscribe_with_listener` answers it with `revocation_done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RevocationId(pub u64);

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

/// What the consumer did when a partition's position fell below the log start
/// ([`ConsumerEvent::LogStartMoved`]) or past the log end
/// ([`ConsumerEvent::PositionOutOfRange`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogStartAction {
    /// Continued at the log start (policy `Earliest`).
    MovedToLogStart,
    /// Asked for the log end.
    MovedToEnd,
    /// Stopped the partition until a seek ([`OffsetReset::None`]).
    Stopped,
}

/// Why a commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitKind {
    /// A commit that is waited for (`commit` in the core, `commit_sync` in the adapters, and
    /// `commit_positions`): retried until the request timeout.
    Sync,
    /// `commit_async` (not retried).
    Async,
    /// The auto-commit timer.
    Auto,
    /// Before partitions were revoked.
    Revocation,
    /// The consumer closing.
    Close,
}

/// A notification from the consumer (the adapters' `Consumer::events` and
/// `Consumer::rebalance`; the core's `Event::Consumer`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// A group member is about to give these partitions up (another member is to own them).
    /// Their fetching stopped and their undelivered records were dropped; they are still this
    /// member's, so the application can commit them and flush its own state for them now.
    /// With `subscribe_with_listener` the handover waits for `revocation_done` with this `id`
    /// (at most [`ConsumerConfig::revocation_timeout`]); with `subscribe` it goes on at
    /// once. Then the positions are committed (auto-commit on), the partitions are released,
    /// and [`ConsumerEvent::PartitionsRevoked`] follows.
    PartitionsRevoking {
        /// Answer it with `revocation_done`.
        id: RevocationId,
        /// The partitions being given up.
        partitions: Vec<TopicPartition>,
    },
    /// Partitions taken away (group rebalance or a new `assign`); their
    /// positions were committed first when auto-commit is on. Always before the matching
    /// [`ConsumerEvent::PartitionsAssigned`].
    PartitionsRevoked(Vec<TopicPartition>),
    /// Partitions this member lost without committing them: its membership lapsed on its own
    /// clock (no registry refresh acknowledged within the session timeout: the process was
    /// paused, or the coordinator was unreachable) or another member declared it gone. Other
    /// members may own them already, so nothing was committed for them; records delivered
    /// since their last commit will be delivered again to the new owner. The member rejoins
    /// as a new member.
    PartitionsLost(Vec<TopicPartition>),
    /// Partitions given to this consumer.
    PartitionsAssigned(Vec<TopicPartition>),
    /// A partition has a starting position (committed, reset or sought).
    PositionResolved {
        /// The partition.
        partition: TopicPartition,
        /// Where it starts.
        position: Position,
        /// Whether it came from a committed offset.
        committed: bool,
    },
    /// No committed offset and [`OffsetReset::None`]: the partition waits for a seek.
    NoPosition(TopicPartition),
    /// The position was below the log start (deleted data); the server clamps silently, so
    /// this is detected from the returned `logStartOffset`.
    LogStartMoved {
        /// The partition.
        partition: TopicPartition,
        /// The position that no longer exists.
        position: i64,
        /// The log start now.
        log_start: i64,
        /// What the reset policy did.
        action: LogStartAction,
    },
    /// The position is past the log end: the partition was deleted and re-created, or its
    /// log was truncated. The server answers such a Fetch with nothing and no error
    /// (PROTOCOL.md §3.4), so the consumer detects it itself (a high watermark below the
    /// position, confirmed by ListOffsets) and applies [`OffsetReset`]: `Earliest` starts at
    /// the log start, `Latest` at the log end, `None` stops the partition until a `seek`.
    PositionOutOfRange {
        /// The partition.
        partition: TopicPartition,
        /// The blob offset the consumer was at.
        position: i64,
        /// The log end (next offset to be written) when it was checked.
        log_end: i64,
        /// What the reset policy did.
        action: LogStartAction,
    },
    /// One blob is larger than the client accepts in a response
    /// ([`crate::ClientConfig::max_response_frame`]): the answer was refused, and the partition
    /// stops there instead of asking again. Seek past `offset` to skip the blob, or read it
    /// with a client whose limit is larger.
    FetchTooLarge {
        /// The partition.
        partition: TopicPartition,
        /// The offset of the blob.
        offset: i64,
        /// The answer's frame size (length prefix included).
        size: u64,
        /// The limit it exceeds.
        max: usize,
    },
    /// A blob could not be decoded: its remaining records are skipped and consumption goes on
    /// with the next blob. Seek back to retry it.
    CorruptBlob {
        /// The partition.
        partition: TopicPartition,
        /// The blob's offset.
        offset: i64,
        /// What is wrong with it.
        error: BatchError,
    },
    /// A partition-level fetch error that is not a leadership change (those refresh metadata
    /// silently).
    FetchError {
        /// The partition.
        partition: TopicPartition,
        /// The broker's code.
        code: ErrorCode,
    },
    /// A commit finished.
    CommitCompleted {
        /// The id the command returned (automatic commits get their own).
        id: CommitId,
        /// Why it was sent.
        kind: CommitKind,
        /// The committed positions, or why not.
        result: Result<Vec<(TopicPartition, Position)>, ConsumerError>,
    },
    /// Joined the group (after JoinGroup and SyncGroup).
    GroupJoined {
        /// The generation.
        generation: i32,
        /// This member's id.
        member_id: String,
        /// Whether the coordinator named this member leader.
        leader: bool,
        /// Whether the coordinator handed out the assignment (never today: then the members
        /// share the partitions through the group's member registry, `docs/groups.md`).
        server_assignment: bool,
    },
    /// The live members of the group as this member's last registry read saw them (sorted
    /// member ids, this member included once it is registered); raised when the set changes.
    GroupMembers(Vec<String>),
    /// The membership is lost or moved; the consumer rejoins after `retry_in` and keeps
    /// consuming its partitions meanwhile.
    GroupRejoining {
        /// Why.
        reason: String,
        /// The delay before the next JoinGroup.
        retry_in: Duration,
    },
    /// The group keeps rebalancing: only with a server that assigns partitions itself, whose
    /// members heartbeat and rejoin when fenced (19). The rejoin rate stays capped. Members of
    /// the registry (today's server) never heartbeat, so other members' joins fence nobody.
    GroupThrashing {
        /// Rejoins counted within the window.
        rejoins: usize,
        /// The window.
        window: Duration,
    },
    /// Closing the consumer finished (final commit done or failed); the client may be closed
    /// now.
    Closed,
}

/// Consumer errors, each saying what the caller can do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The partition is not assigned to this consumer: assign or subscribe first.
    #[error("{0} is not assigned to this consumer; assign it or subscribe to its topic first")]
    NotAssigned(TopicPartition),
    /// Commits and subscriptions need `ClientConfig::consumer.group_id`.
    #[error("no group id configured; set ClientConfig::consumer.group_id to commit or subscribe")]
    NoGroup,
    /// A topic name the server would misuse.
    #[error(transparent)]
    InvalidTopic(#[from] crate::error::InvalidTopicName),
    /// The request failed; retriable ones may be retried.
    #[error("consumer request failed: {0}")]
    Request(#[from] RequestError),
    /// The broker answered with an error code.
    #[error("the broker answered {code:?} for {what}")]
    Broker {
        /// What was asked.
        what: &'static str,
        /// The code.
        code: ErrorCode,
    },
    /// The answer could not be decoded (a broker bug or a version mismatch).
    #[error("undecodable {0} answer")]
    Decode(&'static str),
    /// No broker answered for `ClientConfig::unreachable_timeout` (once per outage; the
    /// error names every broker and its last failure). Retriable: consumption goes on by
    /// itself once a broker answers; alert, or restart the service, as you see fit.
    #[error(transparent)]
    Unreachable(crate::health::ClusterUnreachable),
    /// The consumer (or the client) is closed: create a new client.
    #[error("the consumer is closed")]
    Closed,
    /// A record was marked processed while commits take the delivered positions: the mark
    /// would be ignored. Set `ClientConfig::consumer.commit_marked_only` (Kafka:
    /// `enable.auto.offset.store=false`) to commit only what you mark.
    #[error(
        "mark_processed needs consumer.commit_marked_only = true (Kafka: enable.auto.offset.store=false); without it commits take every delivered record and a mark would be ignored"
    )]
    MarkingOff,
}

impl ConsumerError {
    /// Whether the same command (e.g. a commit) may succeed if repeated.
    pub fn is_retriable(&self) -> bool {
        use ConsumerError as C;
        match self {
            C::Request(e) => e.is_retriable(),
            C::Broker { code, .. } => code.is_retriable(),
            C::Unreachable(_) => true,
            _ => false,
        }
    }
}

/// The whole consumer state, owned by the [`crate::Client`]. Its steps add their methods in
/// their own files, each importing only the plain data below it (`partition.rs`,
/// `member.rs`, `offset_model.rs`) and never another step's file the other way: assignment
/// and positions (`positions.rs`), the delivery queue (`delivery.rs`), fetching
/// (`fetcher.rs`), start positions (`start.rs`), commits (`commit.rs`), the group protocol
/// (`group.rs`) and the member registry (`membership.rs`).
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
    /// What the application marked processed (`consumer/processed.rs`).
    pub(crate) processed: processed::Processed,
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
}

/// What consumer code may touch of the client while it runs.
pub(crate) struct Ctx<'a> {
    pub net: &'a mut crate::net::Net,
    pub metadata: &'a crate::metadata::MetadataCache,
    pub refresher: &'a mut crate::refresh::Refresher,
    pub events: &'a mut std::collections::VecDeque<crate::event::Event>,
    pub rng: &'a mut crate::rng::Rng,
}

impl Ctx<'_> {
    pub(crate) fn emit(&mut self, e: ConsumerEvent) {
        self.events.push_back(crate::event::Event::Consumer(e));
    }
}

/// What a consumer request is for; carried in [`crate::net::Origin::Consumer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
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
