//! Drives the Stellflow sans-IO client (`stellflow-sansio`) on tokio.
//!
//! A [`Client`] is one core, one driver task and its sockets; it hands out [`Producer`],
//! [`Consumer`] and [`Admin`] handles (each also has its own `connect`), cheap to clone and
//! `Send + Sync`, with the same methods as `stellflow-smol` and `stellflow-blocking` (only
//! `async` differs). The handles run their commands on the calling task (records are copied
//! into batches and decoded there); the driver task, spawned on the current tokio runtime,
//! reads the `TcpStream`s (TCP_NODELAY), opens connections and fires the core's timers.
//! The handles, the driver and the plumbing between them are runtime-neutral and live in
//! `stellflow-async`; this crate is its [`Runtime`] for tokio ([`Tokio`]: `tokio::spawn`,
//! `tokio::net::TcpStream`, `tokio::time`) and names the handles.
//!
//! # Ending without losing records
//!
//! Call [`Client::close`](Client#method.close) (or [`Producer::close`](Producer#method.close))
//! before returning from `main`: it flushes, commits and waits for the driver. A driver whose
//! handles are all dropped still delivers and commits in the background, but only while the runtime
//! runs: when the runtime shuts down first, the records still buffered are lost — their deliveries
//! fail with [`Error::Shutdown`] and an error is logged through `tracing` with their number.
//!
//! # What the handles do
//!
//! Method lists are on each handle's page; in short:
//!
//! * **Connect**: `Client::connect(config)` (or `connect_with(config, options)`), where
//!   `config` is a [`ClientConfig`] — set its fields, or Kafka-style keys with
//!   [`ClientConfig::set`] / [`ClientConfig::from_kafka_properties`]. Connections open on
//!   demand.
//! * **Produce**: `Producer::send(record)` waits for the acknowledgement ([`RecordMetadata`]:
//!   blob offset and index in it); `enqueue` returns a [`Delivery`] once the record is
//!   buffered; `flush`, `close`. [`Record::new`] takes the topic and a value (`&str`,
//!   `b"bytes"`, `Vec<u8>`, `Bytes`, ...), `with_key`, `with_optional_key`, `with_partition`.
//! * **Consume**: as a member of a group, `Consumer::subscribe(&["t"])` with
//!   `consumer.group_id` set: the members share the topics' partitions, and those of a member
//!   that leaves or dies are taken over by the others ([groups]); or, without a group,
//!   `assign(&[TopicPartition::new("t", 0)])` reads exactly the partitions given. Then
//!   `poll(timeout)`, `recv()`, `poll_blobs(timeout)`, or the consumer as a [`Stream`] of
//!   records ([`StreamExt::next`], re-exported here). The fastest way to read small records is
//!   `poll_blobs` with [`FetchedBlob::next_view`]: each record a borrowed [`RecordView`]
//!   (key, value and headers as slices of the blob), no allocation or reference count per
//!   record; taking a blob delivers all of it, so commits count as for `poll`.
//!   `seek`, `position`, `committed`, `lag`, `pause`/`resume`, `events()`.
//! * **Commit**: auto-commit by default (`consumer.enable_auto_commit`, every
//!   `auto_commit_interval`, before a revocation and on close); `commit_sync`,
//!   `commit_async`, `commit_positions`. For at-least-once processing set
//!   `consumer.commit_marked_only` and call `Consumer::mark_processed(&record)` once the
//!   record's outputs are acknowledged: commits then take only marked positions (the
//!   `transform_tokio` example is the whole service; `transform_batched_tokio` the same a
//!   batch at a time, with `send_all`, bounded resends and Ctrl-C).
//! * **Close**: `Client::close()` flushes, commits and waits for the driver.
//! * **Errors**: every call returns [`Error`]; `is_retriable()` says whether trying again can
//!   help, and a failed record's [`DeliveryError`] says whether it may be in the log anyway
//!   (`outcome_unknown()`).
//! * **Features**: `metrics` emits the client's metrics through the `metrics` facade (the
//!   official SDKs' names, `stellflow.client.requests`, ...; every name with its kind and
//!   labels is listed in [docs/observability.md][metrics]); `opentelemetry` puts the current
//!   span's trace context on requests and reads records' `traceparent` (the `otel` module);
//!   `serde` loads a [`ClientConfig`] from a map of Kafka-style keys. Logs go through
//!   `tracing` (every span and event, with its level, is in the same document).
//!
//! # Further reading
//!
//! The [user guide][guide] (semantics, groups, delivery guarantees, the Kafka key table,
//! faults), [observability][observability] (trace propagation, hooks, spans, events, metrics)
//! and the [performance notes][performance], including how a debug build of your application
//! gets release speed from this crate (`[profile.dev.package.…]` lines).
//!
//! [guide]: https://github.com/stellhub/stellflow-rs/blob/main/docs/guide.md
//! [groups]: https://github.com/stellhub/stellflow-rs/blob/main/docs/groups.md
//! [observability]: https://github.com/stellhub/stellflow-rs/blob/main/docs/observability.md
//! [metrics]: https://github.com/stellhub/stellflow-rs/blob/main/docs/observability.md#metrics
//! [performance]: https://github.com/stellhub/stellflow-rs/blob/main/docs/performance.md
//!
//! # Quickstart
//!
//! Beside `stellflow-tokio`, the program needs `tokio = { version = "1", features = ["macros",
//! "rt-multi-thread"] }`. To try it without a cluster, run the simulated broker of the
//! command-line tool (`cargo install stellflow-cli`, then `stellflow broker --port 9092`) and
//! connect to `127.0.0.1:9092`.
//!
//! ```
//! use stellflow_tokio::{Client, ClientConfig, OffsetReset, Record, Target};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     # let server = stellflow_sim::serve("127.0.0.1:0")?;
//!     # let bootstrap = server.local_addr().to_string();
//!     let mut config = ClientConfig::new(&bootstrap)?; // e.g. "127.0.0.1:9092"
//!     config.consumer.group_id = Some("greeters".into()); // its members share the partitions
//!     config.consumer.auto_offset_reset = OffsetReset::Earliest;
//!     let client = Client::connect(config).await?;
//!     client.admin().create_topic("greetings", 1, Target::Any).await?;
//!
//!     let meta = client.producer().send(Record::new("greetings", "hello")).await?;
//!     println!("written at {:?}#{}", meta.offset, meta.index);
//!
//!     let consumer = client.consumer();
//!     consumer.subscribe(&["greetings"])?; // or assign(&[TopicPartition::new("greetings", 0)])
//!     let record = consumer.recv().await?;
//!     assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
//!     client.close().await?; // flushes, commits, and waits for the driver
//!     Ok(())
//! }
//! ```
#![forbid(unsafe_code)]

// Everything runtime-neutral: `Record`, `Delivery`, `Options`, `Error`, the core's types.
pub use stellflow_async::prelude::*;

use crate::bytes::BytesMut;
use std::future::Future;
use std::io::{self, ErrorKind};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

#[cfg(feature = "turmoil")]
mod simulated;
mod stream;
#[cfg(feature = "turmoil")]
pub use simulated::Socket;
use stream::SocketIo;

/// One set of connections handing out the handles; its driver runs on the current tokio
/// runtime (`stellflow_async::Client`, the runtime-neutral handle).
#[doc = stellflow_async::handle_methods!(Client)]
pub type Client = stellflow_async::Client<Tokio>;
/// Sends records; its driver runs on the current tokio runtime (`stellflow_async::Producer`, the
/// runtime-neutral handle).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use stellflow_tokio::{ClientConfig, Producer, Record};
/// let producer = Producer::connect(ClientConfig::new("127.0.0.1:9092")?).await?;
/// let meta = producer.send(Record::new("orders", "one")).await?;   // waits for the ack
/// let pending = producer.enqueue(Record::new("orders", "two")).await?; // waits for buffer only
/// producer.flush().await?;
/// let meta2 = pending.await?;
/// producer.close().await?;
/// # let _ = (meta, meta2); Ok(()) }
/// ```
#[doc = stellflow_async::handle_methods!(Producer)]
pub type Producer = stellflow_async::Producer<Tokio>;
/// Reads records; its driver runs on the current tokio runtime (`stellflow_async::Consumer`, the
/// runtime-neutral handle).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use std::time::Duration;
/// use stellflow_tokio::{ClientConfig, Consumer, StreamExt, TopicPartition};
/// let consumer = Consumer::connect(ClientConfig::new("127.0.0.1:9092")?).await?;
/// consumer.assign(&[TopicPartition::new("orders", 0)])?;
/// for record in consumer.poll(Duration::from_secs(1)).await? {
///     println!("{}-{} {}#{}", record.topic, record.partition, record.offset, record.index);
/// }
/// let mut stream = consumer.clone();
/// while let Some(record) = stream.next().await {
///     let record = record?;
///     # let _ = record; break;
/// }
/// consumer.commit_sync().await?;
/// consumer.close().await?;
/// # Ok(()) }
/// ```
#[doc = stellflow_async::handle_methods!(Consumer)]
pub type Consumer = stellflow_async::Consumer<Tokio>;
/// Administration; its driver runs on the current tokio runtime (`stellflow_async::Admin`, the
/// runtime-neutral handle).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use stellflow_tokio::{Admin, ClientConfig, Target};
/// let admin = Admin::connect(ClientConfig::new("127.0.0.1:9092")?).await?;
/// admin.create_topic("orders", 6, Target::Any).await?;
/// let (topics, missing) = admin.describe_topics(&["orders"]).await?;
/// assert_eq!(topics[0].partitions.len(), 6);
/// # let _ = missing; Ok(()) }
/// ```
#[doc = stellflow_async::handle_methods!(Admin)]
pub type Admin = stellflow_async::Admin<Tokio>;

/// The tokio [`Runtime`]: the driver is spawned on the current runtime (so `connect` must be
/// called inside one) and opens its connections as futures of its own task.
#[derive(Debug, Clone, Copy)]
pub struct Tokio;

impl stellflow_async::Runtime for Tokio {
    #[cfg(not(feature = "turmoil"))]
    type Socket = TcpStream;
    #[cfg(feature = "turmoil")]
    type Socket = simulated::Socket;

    fn spawn(_: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| io::Error::other(format!("connect outside a tokio runtime: {e}")))?;
        runtime.spawn(task);
        Ok(())
    }

    async fn connect(address: BrokerAddress, limit: Duration) -> io::Result<Self::Socket> {
        #[cfg(feature = "turmoil")]
        if simulated::in_simulation() {
            return simulated::Socket::connect_simulated(address, limit).await;
        }
        let connect = async {
            let addrs: Vec<_> = tokio::net::lookup_host((address.host.as_str(), address.port))
                .await
                .map_err(|e| stellflow_async::unresolved(&address, e))?
                .collect();
            TcpStream::connect(&addrs[..]).await
        };
        let stream = match tokio::time::timeout(limit, connect).await {
            Ok(r) => r?,
            Err(_) => return Err(io::Error::new(ErrorKind::TimedOut, "connect timed out")),
        };
        let _ = stream.set_nodelay(true);
        #[cfg(feature = "turmoil")]
        let stream = simulated::Socket::tcp(stream);
        Ok(stream)
    }

    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(deadline.into())
    }

    /// tokio's clock: the OS's, or the virtual one of a runtime whose time is paused
    /// (`tokio::time::pause`, a turmoil host), so the client's timers run on the same clock as
    /// the application's.
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// With the `turmoil` feature, inside a simulation: the simulation's wall clock.
    fn since_epoch() -> Duration {
        #[cfg(feature = "turmoil")]
        if let Some(since) = turmoil::since_epoch() {
            return since;
        }
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    /// With the `turmoil` feature, inside a simulation: drawn from the simulation's clock
    /// (virtual time since the epoch), so a replayed world draws it again; two clients
    /// started on one host in the same virtual instant share it, so give each its own
    /// [`Options::seed`] there (`stellflow-turmoil` does).
    fn seed() -> u64 {
        #[cfg(feature = "turmoil")]
        if let Some(since) = turmoil::since_epoch() {
            return simulated::seed(since);
        }
        stellflow_async::os_seed()
    }

    fn try_read(socket: &Self::Socket, buf: &mut [u8]) -> io::Result<usize> {
        SocketIo::try_read(socket, buf)
    }

    fn try_read_buf(socket: &Self::Socket, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        SocketIo::try_read_buf(socket, buf, limit)
    }

    fn try_write(socket: &Self::Socket, buf: &[u8]) -> io::Result<usize> {
        SocketIo::try_write(socket, buf)
    }

    fn set_abort_on_close(socket: &Self::Socket) -> io::Result<()> {
        match SocketIo::as_tcp(socket) {
            Some(socket) => socket.set_zero_linger(),
            // A simulated stream dropped with bytes unread is reset; none is queued unsent.
            None => Ok(()),
        }
    }

    fn set_unacked_timeout(socket: &Self::Socket, timeout: Duration) -> io::Result<()> {
        match SocketIo::as_tcp(socket) {
            Some(socket) => user_timeout(socket, timeout),
            // The simulated network holds no retransmissions of its own to bound.
            None => Ok(()),
        }
    }

    fn poll_readable(socket: &Self::Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        SocketIo::poll_readable(socket, cx)
    }

    fn poll_writable(socket: &Self::Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        SocketIo::poll_writable(socket, cx)
    }
}

/// `TCP_USER_TIMEOUT` where the system has it ([`stellflow_async::Runtime::set_unacked_timeout`]).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
fn user_timeout(socket: &TcpStream, timeout: Duration) -> io::Result<()> {
    socket2::SockRef::from(socket).set_tcp_user_timeout(Some(timeout))
}

/// No `TCP_USER_TIMEOUT` here: the host keeps retransmitting for as long as it does.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
fn user_timeout(_: &TcpStream, _: Duration) -> io::Result<()> {
    Err(io::Error::new(
        ErrorKind::Unsupported,
        "TCP_USER_TIMEOUT is not available on this system",
    ))
}
