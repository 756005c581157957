//! Why `produce` refused a record at once ([`ProduceError`]).

use crate::error::InvalidTopicName;

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
    /// or bound its producer id to another producer ([`DeliveryError::ProducerIdConflict`](crate::DeliveryError::ProducerIdConflict)).
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

impl ProduceError {
    /// Whether calling `produce` again may succeed: only when the buffer was full (wait for
    /// deliveries first).
    pub fn is_retriable(&self) -> bool {
        matches!(self, ProduceError::BufferFull { .. })
    }
}
