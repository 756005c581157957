//! Drives the Stellflow sans-IO client ([`stellflow_sansio`]) on blocking `std::net`.
//!
//! [`Producer`], [`Consumer`] and [`Admin`] are cheap-to-clone, `Send + Sync` handles on one
//! [`Client`]: one driver thread that owns the core [`stellflow_sansio::Client`] and its sockets
//! (TCP_NODELAY, read and write timeouts). The handles block the calling thread, never the
//! driver. Nothing here knows the protocol: every decision is the core's.
//!
//! # Design
//!
//! `std::net` has no readiness multiplexing, so each connection gets a **reader** thread (it
//! connects, then reads into one reused buffer and hands each filled chunk to the driver
//! without copying) and a **writer** thread (it writes the bytes the core encoded, handed over
//! without copying). The core sits behind one mutex:
//!
//! * the **driver thread** sleeps on its channel until a socket event, a wake-up from a handle,
//!   or the core's `poll_timeout()`; then it applies the inputs, fires timers, and drains every
//!   output (the core's drain rule), and signals waiting callers;
//! * **handles** run their commands under the same lock on the caller's thread — a record is
//!   copied once, from the caller's slices into its batch — drain the outputs themselves, and
//!   wake the driver only when the core's next deadline moved earlier than the driver's sleep;
//! * outcomes (acks, admin results, flushes, commits) are one-shot [`Pending`] slots filled when
//!   the matching event is drained;
//! * a record that finds the producer's buffer full waits in a bounded overflow queue (see
//!   [`Producer::enqueue`]), so memory stays bounded and callers are not serialised on it;
//! * dropping the last handle of a [`Client`] closes the producer (delivering what is
//!   buffered, up to [`Options::close_timeout`]) and the consumer (auto-commit), then every
//!   socket, and joins the driver; connection threads end with their sockets.
//!
//! # Quickstart
//!
//! ```
//! use std::time::Duration;
//! use stellflow_blocking::{Client, ClientConfig, OffsetReset, ProducerRecord, Target, TopicPartition};
//!
//! # fn main() -> Result<(), stellflow_blocking::Error> {
//! # let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
//! # let bootstrap = server.local_addr().to_string();
//! let mut config = ClientConfig::new(&bootstrap)?;
//! config.consumer.auto_offset_reset = OffsetReset::Earliest;
//! let client = Client::connect(config)?;
//!
//! client.admin().create_topic("greetings", 1, Target::Any)?;
//! let producer = client.producer();
//! let meta = producer.send(ProducerRecord::new("greetings", b"hello"))?;
//! assert_eq!(meta.partition, 0);
//!
//! let consumer = client.consumer();
//! consumer.assign(&[TopicPartition::new("greetings", 0)])?;
//! let mut got = Vec::new();
//! while got.is_empty() {
//!     got = consumer.poll(Duration::from_secs(5))?;
//! }
//! assert_eq!(got[0].value.as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod admin;
mod consumer;
mod driver;
mod oneshot;
mod producer;

pub use admin::Admin;
pub use consumer::Consumer;
pub use oneshot::Pending;
pub(crate) use oneshot::pending;
pub use producer::{AsRecord, Producer, Record};
pub use stellflow_sansio::{
    Acks, AdminError, AdminRequest, AdminResponse, BatchFormat, BrokerApiVersions, ClientConfig,
    ClusterMetadata, ClusterStatus, CommitKind, CommittedOffset, ConfigError, ConsumerError,
    ConsumerEvent, ConsumerRecord, DeliveryError, ListedOffset, OffsetReset, OffsetSpec, Position,
    ProduceError, ProducerConfig, ProducerRecord, ReassertedPartition, RecordMetadata,
    RequestError, RequestOptions, SeekTo, Target, TopicAdminResult, TopicDescription,
    TopicPartition,
};

/// The `bytes` crate of record keys and values.
pub use bytes;
/// A broker error code, as admin results carry it.
pub use stellflow_sansio::stellflow_proto::ErrorCode;
/// Compression of the native (SRFB) batch format, for [`BatchFormat::Native`].
pub use stellflow_sansio::stellflow_proto::record::Compression;

use driver::{Msg, Shared};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Everything that can go wrong, each variant saying what the caller can do (the core's
/// [`stellflow_sansio::AdapterError`], shared with the async adapters).
pub use stellflow_sansio::AdapterError as Error;

/// A result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adapter settings (the protocol settings live in [`ClientConfig`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How long a record waits for space in the producer's buffer before it fails with
    /// [`Error::BufferFull`] (see [`Producer::enqueue`]). Default 60 s (Kafka's `max.block.ms`).
    pub max_block: Duration,
    /// TCP connect timeout per address. Default 10 s.
    pub connect_timeout: Duration,
    /// Socket write timeout: a write blocked this long fails the connection. Default 30 s.
    pub write_timeout: Duration,
    /// Socket read timeout: only how often an idle reader checks for shutdown (an idle
    /// connection is not an error; request deadlines are the core's). Default 1 s.
    pub read_timeout: Duration,
    /// Most records one [`Consumer::poll`] returns. Default 500.
    pub max_poll_records: usize,
    /// How long dropping the last handle keeps delivering buffered records and committing
    /// positions before it closes the sockets (the drop blocks meanwhile). Default 30 s.
    pub close_timeout: Duration,
    /// Seed of the core's random choices; `None` draws one from the OS.
    pub seed: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_block: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(1),
            max_poll_records: 500,
            close_timeout: Duration::from_secs(30),
            seed: None,
        }
    }
}

/// Stops the driver when the last handle goes.
struct Owner {
    shared: Arc<Shared>,
    options: Options,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.shared.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A connection to a Stellflow cluster: one driver thread and its sockets. Clone it freely;
/// the driver stops when the last clone (and every handle made from it) is dropped.
#[derive(Clone)]
pub struct Client {
    owner: Arc<Owner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// Starts a driver for `config` with default [`Options`]. Returns at once: connections are
    /// opened on demand (commands wait for them within the core's request timeout).
    pub fn connect(config: ClientConfig) -> Result<Client> {
        Client::connect_with(config, Options::default())
    }

    /// Starts a driver for `config` with adapter `options`.
    pub fn connect_with(config: ClientConfig, options: Options) -> Result<Client> {
        let now = Instant::now();
        let seed = options.seed.unwrap_or_else(os_seed);
        let waiting_limit = config.producer.buffer_memory;
        let core = stellflow_sansio::adapter::start_client(config, now, SystemTime::now(), seed)?;
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::new(
            core,
            options.clone(),
            waiting_limit,
            tx.clone(),
        ));
        let driver = shared.clone();
        let thread = std::thread::Builder::new()
            .name("stellflow-driver".into())
            .spawn(move || driver::run_driver(driver, rx))
            .map_err(|e| Error::Spawn(e.to_string()))?;
        // Let the driver open the bootstrap connections now.
        let _ = tx.send(Msg::Wake);
        let owner = Owner {
            shared,
            options,
            thread: Some(thread),
        };
        Ok(Client {
            owner: Arc::new(owner),
        })
    }

    /// A producer handle on this client (all share the core's one producer).
    pub fn producer(&self) -> Producer {
        Producer::new(self.clone())
    }

    /// A consumer handle on this client (all share the core's one consumer).
    pub fn consumer(&self) -> Consumer {
        Consumer::new(self.clone())
    }

    /// An admin handle on this client.
    pub fn admin(&self) -> Admin {
        Admin::new(self.clone())
    }

    /// A snapshot of the merged cluster metadata (brokers, topics, leaders).
    pub fn metadata(&self) -> ClusterMetadata {
        self.shared().lock().client.metadata().clone()
    }

    /// Asks for a metadata refresh now (the outcome shows in [`Client::metadata`]).
    pub fn refresh_metadata(&self) {
        self.shared()
            .command(|i, now| i.client.refresh_metadata(now));
    }

    /// The request/connection counters of the core (DESIGN §6 metrics).
    pub fn counters(&self) -> stellflow_sansio::Counters {
        self.shared().lock().client.counters().clone()
    }

    /// The last failed connection attempt (`"cannot connect to host:port: why"`), if the most
    /// recent attempt failed: helps turn a timeout into a useful message.
    pub fn connect_error(&self) -> Option<String> {
        self.shared().lock().connect_error.clone()
    }

    /// Closes the core at once: pending sends and commands fail with a closed error and every
    /// socket is closed. (Use [`Producer::close`] / [`Consumer::close`] first for a graceful
    /// end; dropping the last handle does that, then stops the threads.)
    pub fn close(&self) {
        self.shared().command(|i, now| {
            i.core_closed = true;
            i.client.close(now);
        });
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    pub(crate) fn options(&self) -> &Options {
        &self.owner.options
    }

    /// Runs a command whose outcome arrives later through `reply`.
    pub(crate) fn call<T, I>(
        &self,
        f: impl FnOnce(&mut driver::Inner, Instant, driver::Reply<T>) -> Result<I>,
    ) -> Result<Pending<T>> {
        let (tx, p) = pending();
        self.shared().command(|i, now| {
            if i.closed {
                return Err(Error::Shutdown);
            }
            f(i, now, tx).map(|_| p)
        })
    }
}

/// A seed from the OS's randomness (std's hasher keys), so two clients never share one.
fn os_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(SystemTime::now())
}
