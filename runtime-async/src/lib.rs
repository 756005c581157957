//! The runtime-neutral half of the Stellflow async adapters: `stellflow-tokio` and
//! `stellflow-smol` are this crate plus one small [`Runtime`] implementation each.
//!
//! Here live the handles ([`Producer`], [`Consumer`], [`Admin`]), [`Record`], [`Delivery`],
//! [`Options`], [`Error`], and the driver. One [`stellflow_sansio::Client`] per driver sits
//! behind a mutex shared with the handles: a handle runs its command on the calling task (a
//! record is copied into its batch, consumed records are decoded there), then follows the
//! core's drain rule — it drains `poll_connect`, `poll_close`, `poll_transmit` and `poll_event`
//! until a whole pass yields nothing, writing what the sockets take — and wakes the driver only
//! when it must re-plan. The driver task owns the reading side of the sockets, the connects and
//! the timers: it waits (one race of futures) for the earliest of socket readiness, a wake-up,
//! a finished connect, or `poll_timeout()`, and drains the same way after every input. When
//! the last handle of a driver is dropped, the driver closes the producer (delivering what is
//! buffered, up to [`Options::close_timeout`]) and the consumer (auto-commit), closes its
//! sockets and ends.
//!
//! What differs per runtime — where the driver runs, how a TCP connection is opened, how a
//! socket is read, written and waited on, and how to sleep — is the [`Runtime`] trait. The
//! handles are generic over it; each runtime crate names them with a type alias
//! (`pub type Producer = stellflow_async::Producer<Tokio>`), so users never see the parameter.
//!
//! Like the adapters, this crate holds no protocol logic: every decision about Stellflow
//! semantics is the core's. It is an implementation detail of the two adapters
//! (`publish = false`); depend on `stellflow-tokio` or `stellflow-smol` instead.
#![forbid(unsafe_code)]

mod admin;
mod consumer;
mod driver;
pub mod perf;
mod producer;
mod runtime;

pub use admin::Admin;
pub use consumer::Consumer;
pub use prelude::*;
pub use producer::{Delivery, Producer, Record};
pub use runtime::Runtime;

/// What each adapter crate re-exports (`pub use stellflow_async::prelude::*`) next to its own
/// names for the handles: the runtime-neutral types and the core's public types.
pub mod prelude {
    pub use crate::{Delivery, Error, Options, Record, Result, Runtime};
    /// The `bytes` crate of record keys and values.
    pub use bytes;
    pub use stellflow_sansio::stellflow_proto::ErrorCode;
    /// Compression of the native (SRFB) batch format, for [`BatchFormat::Native`].
    pub use stellflow_sansio::stellflow_proto::record::Compression;
    pub use stellflow_sansio::{
        Acks, AdminError, AdminRequest, AdminResponse, BatchFormat, BrokerApiVersions,
        ClientConfig, ClusterMetadata, ClusterStatus, CommitKind, CommittedOffset, ConfigError,
        ConsumerError, ConsumerEvent, ConsumerRecord, Counters, DeliveryError, ListedOffset,
        OffsetReset, OffsetSpec, Position, ProduceError, ProducerConfig, ReassertedPartition,
        RecordMetadata, RequestError, RequestOptions, SeekTo, Target, TopicAdminResult,
        TopicDescription, TopicPartition,
    };
}

use std::time::Duration;

/// Adapter settings (everything about Stellflow itself is in [`ClientConfig`]).
///
/// ```
/// use std::time::Duration;
/// let mut options = stellflow_async::Options::default();
/// options.max_block = Duration::from_secs(5);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How long [`Producer::send`] / [`Producer::enqueue`] wait for buffer space when the
    /// producer holds `buffer_memory` bytes. Default 60 s.
    pub max_block: Duration,
    /// Limit on one TCP connect (the core reconnects with backoff after a failure). Default 10 s.
    pub connect_timeout: Duration,
    /// How long a driver whose handles are all gone keeps delivering buffered records and
    /// committing before it closes its sockets. Default 30 s.
    pub close_timeout: Duration,
    /// Seed of the core's random choices; `None` derives one from the clock.
    pub seed: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_block: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            close_timeout: Duration::from_secs(30),
            seed: None,
        }
    }
}

/// Everything that can go wrong, each variant saying what the caller can do (the core's
/// [`stellflow_sansio::AdapterError`], shared with the blocking adapter).
pub use stellflow_sansio::AdapterError as Error;

/// A result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn seed(options: &Options) -> u64 {
    options.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.map(|d| d.as_nanos() as u64).unwrap_or(0x5eed) ^ u64::from(std::process::id())
    })
}
