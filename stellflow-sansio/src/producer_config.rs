//! The producer's settings ([`ProducerConfig`], in [`crate::ClientConfig::producer`]) and the
//! choices they name (acknowledgements, blob format).

use crate::partitioner::{KeyedPartitioner, KeylessPartitioner};
use std::time::Duration;
use stellflow_proto::record::Compression;

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
    /// [`ProducerConfig::ack_timeout`] — otherwise [`DeliveryError::NotReplicated`](crate::DeliveryError::NotReplicated).
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
    /// How long a batch waits for more records before it is sent. Default 5 ms. A batch
    /// stops waiting once the buffer refused a record (`buffer_memory` reached), as Kafka's
    /// do while a sender waits for memory.
    pub linger: Duration,
    /// Bytes of records held (waiting, in flight, or being retried); beyond it `produce`
    /// returns [`ProduceError::BufferFull`](crate::ProduceError::BufferFull) at once. Default
    /// 32 MiB (Kafka's `buffer.memory`: 32 batches of the default size ahead of the broker;
    /// more only adds page faults, no throughput).
    pub buffer_memory: usize,
    /// How long an adapter's `send` / `enqueue` (and a batch send, for the whole call) wait
    /// for buffer space while the producer holds `buffer_memory` bytes, before failing with a
    /// buffer-full error (Kafka's `max.block.ms`). Default 60 s. (The client's protocol core
    /// never waits, it refuses at once: this bound is how long the runtime adapters wait.)
    pub max_block: Duration,
    /// Largest Produce request (sum of its blobs). A record that cannot fit is refused with
    /// [`ProduceError::RecordTooLarge`](crate::ProduceError::RecordTooLarge). Default 16 MiB (the server's frame limit is 64 MiB).
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
    /// [`DeliveryError::Timeout`](crate::DeliveryError::Timeout) (a request already in flight is waited for first). Default
    /// 120 s.
    pub delivery_timeout: Duration,
    /// How long a record to a topic no broker knows waits, counted from the first metadata
    /// round in which every broker confirmed it unknown; then it fails with
    /// [`DeliveryError::UnknownTopic`](crate::DeliveryError::UnknownTopic) (instead of after the delivery timeout). Default 5 s.
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
            buffer_memory: 32 * 1024 * 1024,
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
        if self.max_request_size > crate::request::MAX_REQUEST_FRAME - 1024 {
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
