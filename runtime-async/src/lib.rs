//! The runtime-neutral body of the Stellflow adapters: `stellflow-tokio`, `stellflow-smol`
//! and `stellflow-blocking` are this crate plus one small [`Runtime`] each (the blocking one
//! also wraps the handles in methods that block).
//!
//! Here live the handles ([`Client`], [`Producer`], [`Consumer`], [`Admin`]), [`Record`],
//! [`Delivery`], [`Options`], [`Error`], the plumbing between the core and the handles
//! (answers routed to waiting callers, the lane of records waiting for buffer space, flush and
//! close behind it, the event log, shutdown: module `state`), and the driver (module
//! `driver`): one task per client that owns its connections (opens, reads, writes and closes
//! them) and fires timers. The core sits behind one mutex shared by the driver and the
//! handles; a handle runs its command on the calling task or thread (records are copied into
//! batches and decoded there) and leaves the socket work the core asks for to the driver.
//!
//! What differs per runtime — where the driver runs, how a TCP connection is opened, how a
//! socket is read, written and waited on, and how to sleep — is the [`Runtime`] trait. The
//! handles are generic over it; each runtime crate names them with a type alias
//! (`pub type Producer = stellflow_async::Producer<Tokio>`), so users never see the parameter.
//!
//! Like the adapters, this crate holds no protocol logic: every decision about Stellflow
//! semantics is the core's. Depend on an adapter crate instead of this one.
//!
//! # The same semantics on every runtime
//!
//! * `commit_sync` / `commit_positions` are the core's commits, retried within the request
//!   timeout; `commit_async` is sent once and its outcome goes to `events()`.
//! * `events()` returns every consumer event nobody waits for (rebalances, positions, fetch
//!   errors, group warnings, outcomes of `commit_async` and auto-commit), at most
//!   [`Events::CAP`] between two calls, with the number dropped beyond that.
//! * `poll` returns at most `consumer.max_poll_records` ([`ConsumerConfig::max_poll_records`]); after `Consumer::close` it fails
//!   with `ConsumerError::Closed` (and the async stream ends).
//! * `SeekTo` is the core's: every target, [`SeekTo::Timestamp`] included, is resolved by the
//!   core's seek state machine; the adapters re-export it.
//! * Ending: see [`Client`]. Seeds come from the runtime ([`Runtime::seed`], the OS on every
//!   adapter outside a simulation) unless [`Options::seed`] is set.
#![forbid(unsafe_code)]

mod admin;
mod batch;
mod client;
mod consumer;
mod driver;
mod error;
#[cfg(test)]
mod fake;
mod method_lists;
#[cfg(feature = "opentelemetry")]
pub mod otel;
mod producer;
mod read_buffers;
mod runtime;
mod seq_map;
mod state;
mod trace;

pub use admin::Admin;
pub use batch::{BatchDelivery, BatchErrors, BatchOutcome, BatchOutcomeIntoIter, BatchOutcomeIter};
pub use client::Client;
pub use consumer::Consumer;
pub use error::{Error, Result};
pub use prelude::*;
pub use producer::{Delivery, Producer, Record};

pub use runtime::{Runtime, os_seed, unresolved};
pub use state::{Committed, Events, Rebalance};

/// What each adapter crate re-exports (`pub use stellflow_async::prelude::*`) next to its own
/// names for the handles: the runtime-neutral types and every core type a public signature
/// of the handles uses, so a program needs only its adapter crate.
pub mod prelude {
    /// OpenTelemetry glue (the `opentelemetry` feature).
    #[cfg(feature = "opentelemetry")]
    pub use crate::otel;
    pub use crate::{
        BatchDelivery, BatchErrors, BatchOutcome, BatchOutcomeIntoIter, BatchOutcomeIter,
        Committed, Delivery, Error, Events, Options, Rebalance, Record, Result, Runtime,
    };
    /// The `bytes` crate of record keys and values.
    pub use bytes;
    /// The consumer is a [`Stream`] of records: [`StreamExt::next`] takes the next one
    /// (futures-lite's traits; any `futures::StreamExt` works as well, it is the same
    /// `Stream` trait).
    pub use futures_lite::stream::{Stream, StreamExt};
    /// Compression of the native (SRFB) batch format, for [`BatchFormat::Native`].
    pub use stellflow_sansio::Compression;
    /// Why a broker's answer could not be decoded ([`ConnectionError::Malformed`]).
    pub use stellflow_sansio::DecodeError;
    /// A header key: UTF-8 bytes shared with the fetched response (derefs to `str`).
    pub use stellflow_sansio::StrBytes;
    /// Hooks and trace context (see the crate docs of the core for each).
    pub use stellflow_sansio::{
        Acknowledgement, CommitOutcome, ConsumerHook, HeaderSink, Hooks, ProduceId, ProducerHook,
        ProducerRecord, RecordHeader, SentRecord, TRACEPARENT, TRACESTATE, TraceIds,
        TracePropagation,
    };
    pub use stellflow_sansio::{
        Acks, AdminCall, AdminError, AdminOutput, ApiSupport, BatchFormat, BlobRecordsFrom,
        BrokerAddress, BrokerApiVersions, BrokerHealth, BrokerInfo, ClientConfig, ClusterHealth,
        ClusterMetadata, ClusterStatus, ClusterUnreachable, CommitId, CommitKind, CommittedOffset,
        ConfigError, ConnectionError, ConsumerConfig, ConsumerError, ConsumerEvent, ConsumerRecord,
        Counters, DecommissionResult, DeliveryError, FetchedBlob, HeaderFields, HealthState,
        IntoRecordBytes, IntoTopic, InvalidTopicName, LeaderlessReason, ListedOffset,
        LogStartAction, OffsetInfo, OffsetReset, OffsetSpec, PartitionInfo, PartitionOutcome,
        PartitionOverride, Position, ProduceError, ProducerConfig, ReassertedPartition,
        RecordMetadata, RequestError, RequestOptions, RevocationId, SeekTo, Target,
        TopicAdminResult, TopicDescription, TopicInfo, TopicPartition, TraceContext,
    };
    pub use stellflow_sansio::{
        ApiCounters, DurationHistogram, KeyedPartitioner, KeylessPartitioner, Partitioner,
    };
    pub use stellflow_sansio::{ApiKey, ErrorClass, ErrorCode};
    /// What iterating a [`FetchedBlob`] yields: each record with its index in the blob, or
    /// the error that ends a corrupt blob.
    pub use stellflow_sansio::{BatchError, BlobRecord};
    pub use stellflow_sansio::{BlobFormat, Header, Headers};
    /// What [`FetchedBlob::next_view`] yields: a record borrowed from the blob (key, value and
    /// headers as slices of it), read without a reference count per record.
    pub use stellflow_sansio::{HeaderViews, HeadersView, RecordView};
    /// What a [`ConsumerRecord`] carries beside its key and value: [`Headers`] (split lazily
    /// into [`Header`]s) and the [`BlobFormat`] of the blob it came from.
    pub use stellflow_sansio::{HeadersIter, RawHeadersIter};
    /// A [`Header`]'s key and value: an optional [`StrBytes`] and optional [`bytes::Bytes`].
    pub use stellflow_sansio::{NBytes, NString};
}

use std::time::Duration;

/// Adapter settings (everything about Stellflow itself is in [`ClientConfig`]).
///
/// Kafka's `max.block.ms` and `max.poll.records` are [`ClientConfig`] settings
/// (`producer.max_block`, `consumer.max_poll_records`, and Kafka-style keys), not options.
///
/// ```
/// # use stellflow_async::Options;
/// use std::time::Duration;
/// let mut options = Options::default();
/// options.close_timeout = Duration::from_secs(5);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// `producer.max_block` of the client's configuration (copied at connect).
    pub(crate) max_block: Duration,
    /// Limit on one TCP connect (the core reconnects with backoff after a failure). Default 10 s.
    pub connect_timeout: Duration,
    /// How long a close keeps delivering buffered records and committing before it closes
    /// the sockets (`Client::close`, `Producer::close`, and a driver whose handles are all
    /// gone). Default 30 s.
    pub close_timeout: Duration,
    /// `consumer.max_poll_records` of the client's configuration (copied at connect).
    pub(crate) max_poll_records: usize,
    /// Seed of the core's random choices (and of the default `client_id`); `None` asks the
    /// runtime ([`Runtime::seed`]: the OS's randomness, or a simulated world's clock).
    pub seed: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_block: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            close_timeout: Duration::from_secs(30),
            max_poll_records: 500,
            seed: None,
        }
    }
}
