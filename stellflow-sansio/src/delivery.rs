//! What a record's delivery comes to, as the producer's events and the hooks carry it: the
//! ids of records and flushes, where a record was written, a batch's outcomes, and why a
//! record was not delivered.

use crate::error::RequestError;
use std::sync::Arc;
use std::time::Duration;
use stellflow_proto::ErrorCode;

/// Identifies one accepted record (one `produce` call of the core that returned `Ok`) in the
/// acknowledgement that reports its outcome (exactly one per record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProduceId(pub u64);

/// Identifies one [`crate::Client::flush`] in the [`crate::Event::Flushed`] that ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlushId(pub u64);

/// Where a record was written (DESIGN §3.1): offsets are per blob, so a record's position is
/// the offset of its blob plus its index inside the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The blob's offset; `None` with `acks = 0` (nothing is waited for).
    pub offset: Option<i64>,
    /// The record's index within its blob.
    pub index: u32,
    /// The record's timestamp as written.
    pub timestamp: i64,
}

/// The outcome of every record of one batch at once, in [`crate::Event::ProducedBatch`]: what
/// the [`crate::Event::Produced`] of each of its records would have said, for a driver that
/// asked for it with [`crate::Client::set_batch_outcomes`]. The records are in the batch's
/// order, which is their produce order within the partition; a record's index in the blob
/// is its position here.
///
/// ```
/// # use stellflow_sansio::{Event, ProducedBatch};
/// fn on_batch(batch: &ProducedBatch) {
///     for (id, outcome) in batch.outcomes() {
///         // the same as `Event::Produced { id, result: outcome }` per record
///         # let _ = (id, outcome);
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedBatch {
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    /// The blob's offset (`None` with `acks = 0`), or why no record was written.
    pub(crate) result: Result<Option<i64>, DeliveryError>,
    /// Each record's produce id and timestamp, in blob order.
    pub(crate) records: Vec<(u64, i64)>,
}

impl ProducedBatch {
    /// The records' topic.
    pub fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    /// The records' partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// How many records the batch holds (at least one).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the batch holds no record (never, as the core reports it).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The blob's offset (`Ok(None)` with `acks = 0`), or why none of its records was
    /// delivered (every record's outcome is then this error).
    pub fn result(&self) -> Result<Option<i64>, &DeliveryError> {
        self.result.as_ref().copied()
    }

    /// The records' ids, in blob order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = ProduceId> + '_ {
        self.records.iter().map(|&(id, _)| ProduceId(id))
    }

    /// Each record's id and timestamp as written, in blob order: a record's index in the blob
    /// is its position here. With [`ProducedBatch::result`] this is the whole outcome, for a
    /// driver that records it per batch rather than building a [`RecordMetadata`] per record.
    pub fn ids_with_timestamps(&self) -> impl ExactSizeIterator<Item = (ProduceId, i64)> + '_ {
        self.records.iter().map(|&(id, ts)| (ProduceId(id), ts))
    }

    /// Record `i` (its index in the blob): its id and its outcome, as its
    /// [`crate::Event::Produced`] would carry them; `None` past the end.
    pub fn outcome(&self, i: usize) -> Option<(ProduceId, Result<RecordMetadata, DeliveryError>)> {
        let &(id, timestamp) = self.records.get(i)?;
        Some((ProduceId(id), self.result_of(i, timestamp)))
    }

    fn result_of(&self, i: usize, timestamp: i64) -> Result<RecordMetadata, DeliveryError> {
        match &self.result {
            Ok(offset) => Ok(RecordMetadata {
                topic: self.topic.clone(),
                partition: self.partition,
                offset: *offset,
                index: u32::try_from(i).unwrap_or(u32::MAX),
                timestamp,
            }),
            Err(e) => Err(e.clone()),
        }
    }

    /// Every record's id and outcome, in blob order: the [`crate::Event::Produced`] events
    /// this batch stands for.
    pub fn outcomes(
        &self,
    ) -> impl ExactSizeIterator<Item = (ProduceId, Result<RecordMetadata, DeliveryError>)> + '_
    {
        (self.records.iter().enumerate())
            .map(|(i, &(id, timestamp))| (ProduceId(id), self.result_of(i, timestamp)))
    }
}

/// Why a record was not delivered: the error of its acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// `acks = -1` and the leader answered 7: the blob **was written** at `offset` but not
    /// replicated in time. It is not retried (that would write it twice); decide yourself.
    #[error(
        "written at offset {offset} (record {index}) but not replicated in time (acks=-1, error 7); not retried"
    )]
    NotReplicated {
        /// The blob's real offset.
        offset: i64,
        /// The record's index within the blob.
        index: u32,
    },
    /// The broker refused the blob with a code that retrying cannot fix.
    #[error("broker refused the batch with {code}")]
    Broker {
        /// The per-partition (or request-level) error code.
        code: ErrorCode,
    },
    /// The request failed in a way retrying cannot fix.
    #[error(transparent)]
    Request(RequestError),
    /// Retriable failures went on for `retries` attempts; the last one is attached.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: Box<DeliveryError>,
    },
    /// No outcome within the delivery timeout (leader unknown, broker unreachable, or
    /// retries kept failing).
    #[error("not delivered within {after:?}{}", last.as_ref().map(|e| format!(": last error: {e}")).unwrap_or_default())]
    Timeout {
        /// The configured delivery timeout.
        after: Duration,
        /// The last failure, if any attempt was made.
        last: Option<Box<DeliveryError>>,
    },
    /// Every broker confirmed the topic unknown for `producer.metadata_max_wait` (the wait
    /// for the metadata to name it, not the delivery timeout); create it (Metadata never
    /// creates topics), or let the producer create it (`producer.create_missing_topics`).
    #[error(
        "topic {topic} is unknown to every broker (still unknown after producer.metadata_max_wait, the wait for the metadata to name it); create it first (`stellflow topics create {topic}`), or set producer.create_missing_topics"
    )]
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// The partition has no usable leader, for the reason the metadata gives (e.g. its broker
    /// restarted on its data: re-assert leadership). Reported as the last cause of a
    /// [`DeliveryError::Timeout`] of records that waited for a leader.
    #[error("{topic}-{partition} has no leader: {reason}")]
    Leaderless {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// Why, from the metadata.
        reason: crate::metadata::LeaderlessReason,
    },
    /// The broker fenced this producer (error 19 at the current epoch): another instance
    /// uses the same producer id. Use a distinct `client_id`.
    #[error("producer fenced by the broker (error 19); use a distinct client_id")]
    Fenced,
    /// Idempotence: the broker has bound this producer id to another producer key (error 18,
    /// CONCURRENT_TRANSACTIONS — e.g. another client got the same id from another broker, or
    /// from this one after a restart; PROTOCOL.md §3.3.2, §3.12). Fatal for this producer:
    /// retrying cannot succeed, every record without an outcome fails with it and `produce`
    /// returns [`ProduceError::Fenced`](crate::ProduceError::Fenced). Use a new client with a distinct `client_id`.
    #[error(
        "the broker bound this producer id to another producer (error 18, CONCURRENT_TRANSACTIONS); fatal for this producer: use a new client with a distinct client_id"
    )]
    ProducerIdConflict,
    /// The batch could not be re-encoded (a bug; please report it).
    #[error("could not re-encode the batch: {0}")]
    Encode(String),
    /// The producer (or the client) was closed before the record had an outcome.
    #[error("the producer was closed before the record was delivered")]
    Closed,
    /// **The outcome is unknown: the record may have been written.** A request carrying it
    /// reached the network and was never answered (it timed out, or its connection died,
    /// or the broker answered a request-level error 1 that may follow a partial write), and
    /// then the record failed for the reason in `last` (delivery timeout, close, a refusal
    /// of a later attempt, …). The log may hold it once — or, without idempotence, more
    /// than once. Never read this as "not delivered": check the log (or accept a duplicate)
    /// before producing it again.
    #[error("outcome unknown, the record may have been written: {last}")]
    MaybeWritten {
        /// Why the client gave up on the record.
        last: Box<DeliveryError>,
    },
}

impl DeliveryError {
    /// The offset the record was written at despite the error ([`DeliveryError::NotReplicated`]).
    pub fn written_offset(&self) -> Option<i64> {
        match self {
            DeliveryError::NotReplicated { offset, .. } => Some(*offset),
            _ => None,
        }
    }
}

impl DeliveryError {
    /// Whether producing the record again may succeed **without writing it twice**: the one
    /// retry rule for deliveries (ARCHITECTURE decision 3; the adapters' `Error::is_retriable`
    /// asks this). False whenever [`Self::outcome_unknown`] is true (the record may already be
    /// in the log: check the log, or accept a duplicate, before producing it again), and when
    /// retrying cannot help as it is (fenced, a broker refusal that retrying does not fix, an
    /// unknown topic — create it first, a closed producer).
    pub fn is_retriable(&self) -> bool {
        use DeliveryError as D;
        if self.outcome_unknown() {
            return false;
        }
        match self {
            D::Broker { code } => code.is_retriable(),
            D::Request(e) => e.is_retriable(),
            D::RetriesExhausted { last, .. } => last.is_retriable(),
            D::Timeout { .. } | D::Leaderless { .. } => true,
            D::NotReplicated { .. }
            | D::MaybeWritten { .. }
            | D::UnknownTopic { .. }
            | D::Fenced
            | D::ProducerIdConflict
            | D::Encode(_)
            | D::Closed => false,
        }
    }

    /// Whether the record may be in the log although it failed, so that producing it again
    /// may store it twice — and not producing it again may lose it. The one "outcome
    /// unknown" predicate of a delivery. True for:
    ///
    /// * [`Self::MaybeWritten`]: a request carrying it reached the network and was never
    ///   answered (timed out, its connection died, a request-level error 1 that may follow
    ///   a partial write);
    /// * [`Self::NotReplicated`]: the leader appended it at [`Self::written_offset`] but
    ///   replication did not catch up within the request's timeout (`acks = -1`, error 7).
    ///   The server's log holds it, but above the high watermark: a failover before the
    ///   followers fetch it may truncate it, and a retry appends a second copy (the server
    ///   does not record the sequence of a batch answered 7, so even idempotence does not
    ///   de-duplicate it). Whether it stays is not known when the error is reported;
    /// * a request failure, a timeout or exhausted retries whose last cause is one of these
    ///   ([`Self::Request`], [`Self::Timeout`], [`Self::RetriesExhausted`]).
    pub fn outcome_unknown(&self) -> bool {
        use DeliveryError as D;
        match self {
            D::MaybeWritten { .. } | D::NotReplicated { .. } => true,
            D::Request(e) => e.outcome_unknown(),
            D::RetriesExhausted { last, .. } => last.outcome_unknown(),
            D::Timeout {
                last: Some(last), ..
            } => last.outcome_unknown(),
            D::Timeout { last: None, .. }
            | D::Broker { .. }
            | D::UnknownTopic { .. }
            | D::Leaderless { .. }
            | D::Fenced
            | D::ProducerIdConflict
            | D::Encode(_)
            | D::Closed => false,
        }
    }
}
