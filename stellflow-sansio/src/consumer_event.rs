//! What the consumer tells the application: its notifications ([`ConsumerEvent`]) with the
//! ids they carry ([`CommitId`], [`RevocationId`], [`CommitKind`], [`LogStartAction`]), and
//! its errors ([`ConsumerError`]).

use crate::error::RequestError;
use crate::offset_model::Position;
use crate::topic_partition::TopicPartition;
use std::time::Duration;
use stellflow_proto::ErrorCode;
use stellflow_proto::record::BatchError;

/// Identifies a commit; its outcome is [`ConsumerEvent::CommitCompleted`] with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId(pub u64);

/// Identifies one revocation ([`ConsumerEvent::PartitionsRevoking`]); a subscription made with
/// `subscribe_with_listener` answers it with `revocation_done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RevocationId(pub u64);

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
    /// Stopped the partition until a seek ([`OffsetReset::None`](crate::OffsetReset::None)).
    Stopped,
}

impl LogStartAction {
    /// What a consumer does under `policy` when its position left the log.
    pub(crate) fn under(policy: crate::consumer_config::OffsetReset) -> Self {
        use crate::consumer_config::OffsetReset;
        match policy {
            OffsetReset::Earliest => LogStartAction::MovedToLogStart,
            OffsetReset::Latest => LogStartAction::MovedToEnd,
            _ => LogStartAction::Stopped,
        }
    }
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
    /// A group member is about to give these partitions up (another member is to own them). Their
    /// fetching stopped and their undelivered records were dropped; they are still this member's,
    /// so the application can commit them and flush its own state for them now. With
    /// `subscribe_with_listener` the handover waits for `revocation_done` with this `id` (at most
    /// [`ConsumerConfig::revocation_timeout`](crate::ConsumerConfig::revocation_timeout)); with
    /// `subscribe` it goes on at once. Then the positions are committed (auto-commit on), the
    /// partitions are released, and [`ConsumerEvent::PartitionsRevoked`] follows.
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
    /// No committed offset and [`OffsetReset::None`](crate::OffsetReset::None): the partition waits
    /// for a seek.
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
    /// The position is past the log end: the partition was deleted and re-created, or its log was
    /// truncated. The server answers such a Fetch with nothing and no error (PROTOCOL.md §3.4), so
    /// the consumer detects it itself (a high watermark below the position, confirmed by
    /// ListOffsets) and applies [`OffsetReset`](crate::OffsetReset): `Earliest` starts at the log
    /// start, `Latest` at the log end, `None` stops the partition until a `seek`.
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
    /// Every broker answered metadata without `topic`, which a `subscribe` or `assign`
    /// asked for (a typo, or a topic not created yet). The consumer waits for it: a topic
    /// created later is picked up by itself. If it is still unknown `error_after` from now
    /// (`consumer.missing_topic_wait`, confirmed by a fresh metadata answer), the next poll
    /// returns [`ConsumerError::UnknownTopic`].
    TopicUnknown {
        /// The topic.
        topic: String,
        /// How long until the poll error ([`ConsumerConfig::missing_topic_wait`](crate::ConsumerConfig::missing_topic_wait)).
        error_after: std::time::Duration,
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
    /// A topic a `subscribe` or `assign` asked for is unknown to every broker, and still was
    /// `consumer.missing_topic_wait` after the first metadata answer without it (once per
    /// topic and command; [`ConsumerEvent::TopicUnknown`] came first). Create the topic (or
    /// fix its name): retriable, the consumer picks the topic up by itself once it exists.
    #[error(
        "topic {topic} is unknown to every broker ({:.1}s after the first metadata answer without it, consumer.missing_topic_wait); create it (`stellflow topics create {topic}`) or fix the name: the consumer picks it up once it exists",
        waited.as_secs_f64()
    )]
    UnknownTopic {
        /// The topic.
        topic: String,
        /// How long every broker had been answering without it.
        waited: Duration,
    },
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
            C::Unreachable(_) | C::UnknownTopic { .. } => true,
            _ => false,
        }
    }
}
