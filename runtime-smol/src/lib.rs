//! Drives the Stellflow sans-IO client (`stellflow-sansio`) on smol, executor-neutral.
//!
//! A [`Client`] is one core, one driver task and its sockets; it hands out [`Producer`],
//! [`Consumer`] and [`Admin`] handles (each also has its own `connect`), cheap to clone and
//! `Send + Sync`, with the same methods as `stellflow-tokio` and `stellflow-blocking` (only
//! `async` differs). The handles run their commands on the calling task, so they work under
//! smol, the async-std executor, or any other executor. The driver task runs on smol's global
//! executor (`smol::spawn`: one shared thread by default, `SMOL_THREADS` for more — no thread
//! per client or per connection); it opens its connections as futures of its own
//! (`Async<TcpStream>`, names resolved on smol's blocking pool), reads the sockets and fires
//! the core's timers (`async-io`). The handles, the driver and the plumbing between them are
//! runtime-neutral and live in `stellflow-async`; this crate is its [`Runtime`] ([`Smol`]).
//!
//! Call [`Client::close`](Client#method.close) (or [`Producer::close`](Producer#method.close))
//! before the program ends: it flushes, commits and waits for the driver. Dropped handles leave the
//! driver to finish in the background (up to `Options::close_timeout`), which the process exiting
//! cuts short.
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
//!   `transform_smol` example is the whole service).
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
//! Beside `stellflow-smol`, the program needs an executor to run its futures, e.g.
//! `smol = "2"`. To try it without a cluster, run the simulated broker of the command-line
//! tool (`cargo install stellflow-cli`, then `stellflow broker --port 9092`) and connect to
//! `127.0.0.1:9092`.
//!
//! ```
//! use stellflow_smol::{Client, ClientConfig, OffsetReset, Record, Target};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = stellflow_sim::serve("127.0.0.1:0")?;
//! # let bootstrap = server.local_addr().to_string();
//! smol::block_on(async {
//!     let mut config = ClientConfig::new(&bootstrap)?; // e.g. "127.0.0.1:9092"
//!     config.consumer.group_id = Some("greeters".into()); // its members share the partitions
//!     config.consumer.auto_offset_reset = OffsetReset::Earliest;
//!     let client = Client::connect(config).await?;
//!     client.admin().create_topic("greetings", 1, Target::Any).await?;
//!     client.producer().send(Record::new("greetings", "hello")).await?;
//!
//!     let consumer = client.consumer();
//!     consumer.subscribe(&["greetings"])?; // or assign(&[TopicPartition::new("greetings", 0)])
//!     let record = consumer.recv().await?;
//!     assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
//!     client.close().await?;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

// Everything runtime-neutral: `Record`, `Delivery`, `Options`, `Error`, the core's types.
pub use stellflow_async::prelude::*;

use smol::{Async, Timer};
use std::future::Future;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// One set of connections handing out the handles (`stellflow_async::Client` on the smol runtime).
#[doc = stellflow_async::handle_methods!(Client)]
pub type Client = stellflow_async::Client<Smol>;
/// Sends records (`stellflow_async::Producer` on the smol runtime).
#[doc = stellflow_async::handle_methods!(Producer)]
pub type Producer = stellflow_async::Producer<Smol>;
/// Reads records (`stellflow_async::Consumer` on the smol runtime).
#[doc = stellflow_async::handle_methods!(Consumer)]
pub type Consumer = stellflow_async::Consumer<Smol>;
/// Administration (`stellflow_async::Admin` on the smol runtime).
#[doc = stellflow_async::handle_methods!(Admin)]
pub type Admin = stellflow_async::Admin<Smol>;

/// The smol [`Runtime`]: the driver runs on smol's global executor, sockets and timers are
/// `async-io`'s.
#[derive(Debug, Clone, Copy)]
pub struct Smol;

impl stellflow_async::Runtime for Smol {
    type Socket = Async<TcpStream>;

    fn spawn(_: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        smol::spawn(task).detach();
        Ok(())
    }

    async fn connect(address: BrokerAddress, limit: Duration) -> io::Result<Async<TcpStream>> {
        let connect = async {
            let mut last = io::Error::new(ErrorKind::NotFound, "the name resolved to no address");
            let addrs = smol::net::resolve((address.host.as_str(), address.port))
                .await
                .map_err(|e| stellflow_async::unresolved(&address, e))?;
            for addr in addrs {
                match Async::<TcpStream>::connect(addr).await {
                    Ok(s) => {
                        s.get_ref().set_nodelay(true)?;
                        return Ok(s);
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        };
        let expire = async {
            Timer::after(limit).await;
            Err(io::Error::new(ErrorKind::TimedOut, "connect timed out"))
        };
        smol::future::or(connect, expire).await
    }

    async fn sleep_until(deadline: Instant) {
        Timer::at(deadline).await;
    }

    fn try_read(socket: &Async<TcpStream>, buf: &mut [u8]) -> io::Result<usize> {
        socket.get_ref().read(buf)
    }

    const READS_INTO_VEC: bool = true;

    fn try_read_vec(
        socket: &Async<TcpStream>,
        vec: &mut Vec<u8>,
        limit: usize,
    ) -> io::Result<usize> {
        // `read_to_end` reads into the spare room without zeroing it and keeps what it read
        // when the socket then has nothing more (`WouldBlock`) or fails.
        let before = vec.len();
        let read = socket.get_ref().take(limit as u64).read_to_end(vec);
        match (read, vec.len() - before) {
            (Err(e), 0) => Err(e),
            // An error after data, or the end of the stream: the data first; the next call
            // sees the rest.
            (_, n) => Ok(n),
        }
    }

    fn try_write(socket: &Async<TcpStream>, buf: &[u8]) -> io::Result<usize> {
        socket.get_ref().write(buf)
    }

    fn set_abort_on_close(socket: &Async<TcpStream>) -> io::Result<()> {
        socket2::SockRef::from(socket.get_ref()).set_linger(Some(Duration::ZERO))
    }

    fn set_unacked_timeout(socket: &Async<TcpStream>, timeout: Duration) -> io::Result<()> {
        user_timeout(socket.get_ref(), timeout)
    }

    fn poll_readable(socket: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_readable(cx)
    }

    fn poll_writable(socket: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_writable(cx)
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

#[cfg(all(
    test,
    any(target_os = "linux", target_os = "android", target_os = "fuchsia")
))]
mod tests {
    use super::*;
    use stellflow_async::Runtime;

    /// The host really holds the bound the core asked for (read back with getsockopt).
    #[test]
    fn the_unacked_timeout_is_set_on_the_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let socket = smol::block_on(Async::<TcpStream>::connect(addr)).unwrap();
        let before = socket2::SockRef::from(socket.get_ref()).tcp_user_timeout();
        assert_eq!(before.unwrap(), None, "the host's default first");
        Smol::set_unacked_timeout(&socket, Duration::from_millis(750)).unwrap();
        let after = socket2::SockRef::from(socket.get_ref()).tcp_user_timeout();
        assert_eq!(after.unwrap(), Some(Duration::from_millis(750)));
    }
}
