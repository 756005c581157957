//! The producer's public types: records, their outcomes, configuration and errors.

use crate::error::{InvalidTopicName, RequestError};
use crate::partitioner::{KeyedPartitioner, KeylessPartitioner};
use std::sync::Arc;
use std::time::Duration;
use stellflow_proto::ErrorCode;
use stellflow_proto::record::Compression;

/// Identifies one accepted record (one `produce` call of the core that returned `Ok`) in the
/// acknowledgement that reports its outcome (exactly one per record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProduceId(pub u64);

/// Identifies one [`crate::Client::flush`] in the [`crate::Event::Flushed`] that ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlushId(pub u64);

/// A record header: a UTF-8 key and an optional value.
pub type RecordHeader<'a> = (&'a str, Option<&'a [u8]>);

/// A record to produce. It borrows its data: `produce` copies it into a batch at once, so the
/// caller keeps ownership (and can retry with the same record after
/// [`ProduceError::BufferFull`]).
///
/// ```
/// # use stellflow_sansio::ProducerRecord;
/// let r = ProducerRecord::new("orders", b"payload").with_key(b"customer-7");
/// assert_eq!(r.partition, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerRecord<'a> {
    /// The topic (validated client-side, DESIGN §3.11).
    pub topic: &'a str,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key; an empty key counts as no key for partitioning (it is still written).
    pub key: Option<&'a [u8]>,
    /// The value; `None` is a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Record headers.
    pub headers: &'a [RecordHeader<'a>],
    /// Milliseconds since the Unix epoch; `None` takes the client's wall clock (the adapters
    /// set it from the system clock; a driver of the core with `set_wall_clock`), or −1 if
    /// none was given.
    pub timestamp: Option<i64>,
}

impl<'a> ProducerRecord<'a> {
    /// A record with a value and nothing else.
    pub fn new(topic: &'a str, value: &'a [u8]) -> Self {
        ProducerRecord {
            topic,
            value: Some(value),
            ..ProducerRecord::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: &'a [u8]) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the headers.
    pub fn with_headers(mut self, headers: &'a [RecordHeader<'a>]) -> Self {
        self.headers = headers;
        self
    }

    /// Sets the timestamp (ms since the Unix epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

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

/// How many acknowledgements a Produce waits for (DESIGN §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Acks {
    /// `acks = 0`: records complete as soon as they are handed to the network, without an
    /// offset. The broker still answers; the answer is read and discarded. No retries.
    None,
    /// `acks = 1`: the leader appended the blob.
    Leader,
    /// `acks = -1`: the leader appended it and the ISR replicated it within
    /// [`ProducerConfig::ack_timeout`] — otherwise [`DeliveryError::NotReplicated`].
    #[default]
    All,
}

impl Acks {
    /// The wire value.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// The blob format written (DESIGN §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BatchFormat {
    /// The documented v1 batch: readable by the Java and Go SDKs, never validated or
    /// de-duplicated by the server.
    #[default]
    V1,
    /// The v1 batch inside the server's SRFB envelope, optionally gzip-compressed: validated
    /// by the server, and the only format it de-duplicates. Official SDKs cannot read it.
    Native(Compression),
}

/// Producer settings, in [`crate::ClientConfig::producer`].
///
/// ```
/// # use stellflow_sansio::{Acks, ProducerConfig};
/// use std::time::Duration;
/// let mut p = ProducerConfig::default();
/// p.acks = Acks::Leader;
/// p.linger = Duration::from_millis(20);
/// assert!(p.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// Acknowledgements to wait for. Default [`Acks::All`].
    pub acks: Acks,
    /// `timeoutMs` sent with `acks = -1`: how long the leader waits for replication. Default
    /// 10 s. A Produce with `acks = -1` is given `max(request timeout, ack_timeout + 1 s)` to
    /// answer before the client gives up on it and retries.
    pub ack_timeout: Duration,
    /// Largest batch (one blob) per partition, in bytes. A single larger record gets a batch of
    /// its own. Default 1 MiB (DESIGN §3.12: the server wants big blobs).
    pub batch_size: usize,
    /// How long a batch waits for more records before it is sent. Default 5 ms.
    pub linger: Duration,
    /// Bytes of records held (waiting, in flight, or being retried); beyond it `produce`
    /// returns [`ProduceError::BufferFull`] at once. Default 64 MiB.
    pub buffer_memory: usize,
    /// How long an adapter's `send` / `enqueue` (and a batch send, for the whole call) wait
    /// for buffer space while the producer holds `buffer_memory` bytes, before failing with a
    /// buffer-full error (Kafka's `max.block.ms`). Default 60 s. (The client's protocol core
    /// never waits, it refuses at once: this bound is how long the runtime adapters wait.)
    pub max_block: Duration,
    /// Largest Produce request (sum of its blobs). A record that cannot fit is refused with
    /// [`ProduceError::RecordTooLarge`]. Default 16 MiB (the server's frame limit is 64 MiB).
    pub max_request_size: usize,
    /// Produce requests in flight per partition. Default 1, which keeps records in order
    /// whatever the server does; more than 1 may reorder records on retries (and is refused
    /// with idempotence).
    pub max_in_flight_per_partition: usize,
    /// How many times a batch is retried after retriable errors. Default `u32::MAX` (bounded
    /// by [`ProducerConfig::delivery_timeout`]).
    pub retries: u32,
    /// First retry delay; doubles per attempt (`retry.backoff.ms`). Default 100 ms.
    pub retry_backoff: Duration,
    /// Largest retry delay, jitter included (`retry.backoff.max.ms`). A retry after a leader
    /// error does not wait for it once the metadata names a new leader (KIP-951).
    /// Default 1 s.
    pub retry_backoff_max: Duration,
    /// A record that has no outcome this long after `produce` fails with
    /// [`DeliveryError::Timeout`] (a request already in flight is waited for first). Default
    /// 120 s.
    pub delivery_timeout: Duration,
    /// How long a record to a topic no broker knows waits, counted from the first metadata
    /// round in which every broker confirmed it unknown; then it fails with
    /// [`DeliveryError::UnknownTopic`] (instead of after the delivery timeout). Default 5 s.
    pub metadata_max_wait: Duration,
    /// Creates a topic no broker knows with this many partitions, as the Go SDK does, when a
    /// record is sent to it (a CreateTopics on any broker once every broker confirmed it
    /// unknown; the records go out once the metadata names it). Default `None`: a missing
    /// topic is an error after `metadata_max_wait`.
    pub create_missing_topics: Option<i32>,
    /// The blob format. Default [`BatchFormat::V1`].
    pub format: BatchFormat,
    /// Idempotence: InitProducerId, sequence numbers, and de-duplicated retries. Forces the
    /// native (SRFB) format and one request in flight per partition. Give every producer
    /// instance its own `client_id` (the server keys producer ids by it). A retry never runs
    /// while the request it replaces may still be executing on the broker: a timed-out
    /// request waits for its late answer for up to two request timeouts before its connection
    /// is given up, and its records are re-sent only once the broker has answered on a newer
    /// connection. Default off: at-least-once, a timed-out request is retried and may be
    /// written twice.
    pub idempotence: bool,
    /// Gzip level (0–9) for [`BatchFormat::Native`] with gzip. Default 1.
    pub gzip_level: u32,
    /// Partitioner for keyed records. Default [`KeyedPartitioner::JavaHash`].
    pub keyed: KeyedPartitioner,
    /// Partitioner for keyless records. Default [`KeylessPartitioner::Sticky`].
    pub keyless: KeylessPartitioner,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            ack_timeout: Duration::from_secs(10),
            batch_size: 1024 * 1024,
            linger: Duration::from_millis(5),
            buffer_memory: 64 * 1024 * 1024,
            max_block: Duration::from_secs(60),
            max_request_size: 16 * 1024 * 1024,
            max_in_flight_per_partition: 1,
            retries: u32::MAX,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            delivery_timeout: Duration::from_secs(120),
            metadata_max_wait: Duration::from_secs(5),
            create_missing_topics: None,
            format: BatchFormat::V1,
            idempotence: false,
            gzip_level: 1,
            keyed: KeyedPartitioner::JavaHash,
            keyless: KeylessPartitioner::Sticky,
        }
    }
}

impl ProducerConfig {
    /// Checks values that cannot work.
    pub fn validate(&self) -> Result<(), crate::config_error::ConfigError> {
        let bad = |field, reason| Err(crate::config_error::ConfigError::Invalid { field, reason });
        if self.batch_size == 0 {
            return bad("producer.batch_size", "must be positive");
        }
        if self.max_request_size < 1024 {
            return bad("producer.max_request_size", "must be at least 1 KiB");
        }
        if self.max_request_size > crate::net::MAX_REQUEST_FRAME - 1024 {
            return bad(
                "producer.max_request_size",
                "must leave room for headers below the server's 64 MiB frame limit",
            );
        }
        if self.buffer_memory < self.batch_size.min(self.max_request_size) {
            return bad("producer.buffer_memory", "must hold at least one batch");
        }
        if self.metadata_max_wait.is_zero() {
            return bad("producer.metadata_max_wait", "must be positive");
        }
        if self.create_missing_topics.is_some_and(|n| n < 1) {
            return bad(
                "producer.create_missing_topics",
                "must be at least 1 partition",
            );
        }
        if self.max_in_flight_per_partition == 0 {
            return bad("producer.max_in_flight_per_partition", "must be at least 1");
        }
        if self.idempotence && self.max_in_flight_per_partition > 1 {
            return bad(
                "producer.max_in_flight_per_partition",
                "must be 1 with idempotence (the server checks sequences racily, PROTOCOL.md §3.3.2)",
            );
        }
        if self.idempotence && self.acks == Acks::None {
            return bad(
                "producer.acks",
                "idempotence needs acknowledgements (acks 1 or -1)",
            );
        }
        if i32::try_from(self.ack_timeout.as_millis()).is_err() {
            return bad(
                "producer.ack_timeout",
                "must fit in a 32-bit millisecond count",
            );
        }
        Ok(())
    }

    /// The blob format actually written: idempotence forces the native format.
    pub fn effective_format(&self) -> BatchFormat {
        match (self.idempotence, self.format) {
            (true, BatchFormat::V1) => BatchFormat::Native(Compression::None),
            (_, f) => f,
        }
    }
}

/// Why `produce` refused a record at once (nothing was queued; no event will follow).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// The producer holds `buffer_memory` bytes already. Poll events (deliveries free space)
    /// and try again, or wait up to your own maximum block time.
    #[error(
        "producer buffer full: {buffered} of {limit} bytes held, the record needs {needed}; wait for deliveries and retry"
    )]
    BufferFull {
        /// Bytes held now.
        buffered: usize,
        /// Bytes the record needs.
        needed: usize,
        /// The configured `buffer_memory`.
        limit: usize,
    },
    /// The record alone exceeds what one request (or the buffer) can carry: refused before
    /// anything was queued. Send less, or raise the setting named.
    #[error(
        "record of {size} bytes refused: {setting} is {configured} bytes{}, so a record can have at most {max}; raise {setting} or send less",
        overhead_note(*overhead)
    )]
    RecordTooLarge {
        /// The record's encoded size.
        size: usize,
        /// The largest record that fits.
        max: usize,
        /// The setting that sets the limit (`producer.max_request_size` or
        /// `producer.buffer_memory`).
        setting: &'static str,
        /// The setting's configured value.
        configured: usize,
        /// Bytes of the request frame and batch headers the limit keeps for themselves
        /// (the difference between `configured` and `max`).
        overhead: usize,
    },
    /// The topic name is refused client-side (fix the name).
    #[error(transparent)]
    InvalidTopic(#[from] InvalidTopicName),
    /// The explicit partition does not exist in the topic's metadata.
    #[error("{topic} has {count} partitions; partition {partition} does not exist")]
    InvalidPartition {
        /// Topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// Partitions the metadata knows.
        count: i32,
    },
    /// The producer is closing or closed; create a new client to produce again.
    #[error("the producer is closed")]
    Closed,
    /// The broker fenced this producer instance (a newer instance uses the same producer id),
    /// or bound its producer id to another producer ([`DeliveryError::ProducerIdConflict`]).
    /// It cannot produce any more: create a new client with a distinct `client_id`.
    #[error("the producer was fenced by the broker: use a new client with a distinct client_id")]
    Fenced,
}

fn overhead_note(overhead: usize) -> String {
    match overhead {
        0 => String::new(),
        n => format!(" less {n} bytes of request and batch headers"),
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
    /// The topic is unknown to every broker; create it (Metadata never creates topics).
    #[error(
        "topic {topic} is unknown to every broker within the delivery timeout; create it first"
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
    /// returns [`ProduceError::Fenced`]. Use a new client with a distinct `client_id`.
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

impl ProduceError {
    /// Whether calling `produce` again may succeed: only when the buffer was full (wait for
    /// deliveries first).
    pub fn is_retriable(&self) -> bool {
        matches!(self, ProduceError::BufferFull { .. })
    }
}
