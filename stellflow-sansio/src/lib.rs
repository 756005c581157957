//! The sans-IO Stellflow client: a pure state machine that takes bytes and time in and gives
//! bytes, connect requests, timer deadlines and events out.
//!
//! Where it sits: it depends on `stellflow-proto` only; the runtime adapters
//! (`stellflow-tokio`, `stellflow-smol`, `stellflow-blocking`, all built on `stellflow-async`)
//! and the simulation harness (`stellflow-dst`) drive it; its tests run against the simulated
//! broker (`stellflow-sim`, which depends on proto only). The repository's `ARCHITECTURE.md`
//! draws the whole workspace.
//!
//! The core never reads the clock, never asks the OS for randomness, never spawns a thread and
//! never touches a socket (DESIGN §2). Time comes in as `now` on every input; randomness (backoff
//! jitter, the default client id) comes from the seed given to [`Client::new`]. Runtime crates
//! (tokio, smol, blocking) and tests drive it.
//!
//! # The contract
//!
//! Written once, on [`Client`] ("The driver contract"): inputs (`handle_*`), commands, one
//! driver door ([`Client::poll_output`] → [`Output`], drained until [`Output::Timeout`]) and
//! the application's record door ([`Client::poll_record`] and its siblings).
//!
//! Records can also be taken in three steps, so that the decoding (the costliest part of
//! consuming small records) runs without `&mut Client`, e.g. outside a lock that guards it:
//! [`DriverExt::lease_records`] lends records out, [`RecordLease::decode`] decodes them, and
//! [`DriverExt::redeem_lease`] delivers them, or returns `None` when something took or moved
//! them meanwhile (then lease again). Whole blobs ([`Client::poll_blob`]) are the other way.
//!
//! # What the core does
//!
//! * **Connections** (`conn`, `net`): one per broker address, opened on demand, reconnected
//!   with exponential backoff and seeded jitter (`backoff`, `rng`). Every connection first
//!   negotiates versions with ApiVersions (`negotiate`); other requests wait in the broker's
//!   queue until then.
//! * **In flight** (`inflight`, `timers`): responses are matched by correlation id (never
//!   FIFO: the server reorders), at most `max_in_flight_per_connection` per connection, a
//!   deadline per request; a late answer is counted and dropped; a disconnect fails what was in
//!   flight with a retriable error; an oversize frame closes the connection with an
//!   [`Event::ConnectionError`].
//! * **Metadata** (`metadata`, `refresh`): every broker's own view, merged (DESIGN §3.10),
//!   refreshed on leader errors and disconnects with backoff, at most one round at a time, and at
//!   least every `metadata_max_age`.
//! * **Admin** (`admin`) and **raw requests**, with typed results and client-side topic-name
//!   validation (`topic`).
//! * **Producer** (`producer`): [`Client::produce`] copies a record into its partition's batch
//!   and returns at once; each accepted record gets exactly one [`Event::Produced`] (blob offset
//!   plus index in the blob, DESIGN §3.1). Java/Go-compatible partitioners, linger and
//!   `batch_size` batching bounded by `buffer_memory`, one request per leader, retries that
//!   never reorder a partition, acks 0/1/-1, idempotence over the native format;
//!   [`Client::flush`] and [`Client::close_producer`].
//! * **Logging** (`observe`): `tracing` lines with the reasons only the core knows
//!   (reconnects, leader moves, leaderless partitions, retries, timeouts, resets), silent
//!   until the host installs a subscriber; `info` is quiet on a healthy client, `warn` means
//!   look.
//! * **Counters** (`metrics`) for the DESIGN §6 metrics, readable without a metrics
//!   dependency, and emitted through the `metrics` facade with the `metrics` feature.
//! * **Typed admin calls** ([`AdminCall`]): a command whose result type is known from the
//!   call to the answer ([`AdminId`], [`AdminOutcome::take`]), behind the adapters' admin
//!   handles.
//!
//! # A complete minimal driver
//!
//! This one moves bytes between the client and the in-process simulated broker
//! ([`stellflow-sim`](https://docs.rs/stellflow-sim)); a socket driver (`examples/driver.rs` in
//! the repository) has the same shape with `TcpStream`s in place of the sim. It runs as a
//! doctest (the simulated broker depends on `stellflow-proto` only, so it is an ordinary
//! dev-dependency of this crate).
//!
#![doc = concat!("```rust\n", include_str!("../doc/driver.rs"), "```")]
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

// The unit tests that drive a whole client share the integration tests' in-process world,
// which names this crate by its name.
#[cfg(test)]
extern crate self as stellflow_sansio;

mod address;
mod admin;
mod admin_call;
mod admin_results;
mod backoff;
mod client;
mod config;
mod config_error;
mod consumer;
mod consumer_config;
mod consumer_event;
mod consumer_record;
mod delivery;
mod error;
mod event;
mod fetched_blob;
mod health;
mod hooks;
mod inflight;
mod kafka_key_hints;
mod kafka_keys;
mod metadata;
mod metrics;
mod negotiate;
mod net;
mod observe;
mod offset_model;
mod output;
mod partitioner;
mod producer;
mod producer_config;
mod producer_record;
mod properties;
mod refresh;
mod request;
mod shared;
// The one seeded generator lives in stellflow-proto, shared with the simulated broker.
use stellflow_proto::rng;
mod timers;
mod topic;
mod topic_partition;
mod trace;

pub use address::{BrokerAddress, parse_bootstrap};
pub use admin::{
    AdminCall, AdminId, AdminOutcome, AdminOutput, ApiSupport, BrokerApiVersions, ClusterStatus,
    CommittedOffset, DecommissionResult, ListedOffset, OffsetInfo, OffsetSpec, PartitionOutcome,
    PartitionOverride, ReassertedPartition, TopicAdminResult, TopicDescription,
};
pub use client::{Client, DriverExt};
pub use config::{ClientConfig, HeaderFields};
pub use config_error::ConfigError;
pub use consumer::{REGISTRY_TOPIC, RecordLease, SeekTo};
pub use consumer_config::{ConsumerConfig, OffsetReset};
pub use consumer_event::{
    CommitId, CommitKind, ConsumerError, ConsumerEvent, LogStartAction, RevocationId,
};
pub use consumer_record::ConsumerRecord;
pub use error::{AdminError, ConnectionError, InvalidTopicName, RequestError};
pub use event::{DisconnectReason, Event, IoFailure};
pub use fetched_blob::{BlobRecordsFrom, FetchedBlob};
pub use health::{BrokerHealth, ClusterHealth, ClusterUnreachable, HealthState};
pub use hooks::{
    Acknowledgement, CommitOutcome, ConsumerHook, HeaderSink, Hooks, ProducerHook, SentRecord,
    TracePropagation,
};
pub use metadata::{BrokerInfo, ClusterMetadata, LeaderlessReason, PartitionInfo, TopicInfo};
pub use metrics::{ApiCounters, Counters, DurationHistogram};
pub use net::ConnectRequest;
pub use offset_model::Position;
pub use output::{CloseMode, CloseRequest, Output};
pub use producer::{
    Acks, BatchFormat, DeliveryError, FlushId, IntoRecordBytes, KeyedPartitioner,
    KeylessPartitioner, Partitioner, ProduceError, ProduceId, ProducedBatch, ProducerConfig,
    ProducerRecord, Record, RecordHeader, RecordMetadata, fnv1a32, java_hash,
};
pub use properties::{parse_properties, read_properties_file};
pub use request::{ConnId, RawResponse, RequestId, RequestOptions, Target, TraceContext};
// The codec types the core's API names (error codes, API keys, fetched records and their
// headers, the native batch compression), and those needed to use them, so a user of the core
// needs no second dependency; the rest of `stellflow-proto` stays out of this crate's API.
pub use stellflow_proto::record::v1::{HeadersIter, RawHeadersIter};
pub use stellflow_proto::record::{
    BatchError, BlobFormat, BlobRecord, Compression, Header, HeaderViews, Headers, HeadersView,
    RecordView,
};
pub use stellflow_proto::{
    ApiKey, DecodeError, ErrorClass, ErrorCode, NBytes, NString, ResponseHeader, StrBytes,
};
pub use topic::validate_topic_name;
pub use topic_partition::{IntoTopic, TopicPartition};
pub use trace::{TRACEPARENT, TRACESTATE, TraceIds};
