//! Drives the Stellflow sans-IO client ([`stellflow_sansio`]) on tokio.
//!
//! One driver task owns the reading side of one [`stellflow_sansio::Client`]'s `TcpStream`s
//! (TCP_NODELAY), its connects and its timers; the client itself sits behind a mutex shared with
//! the handles — [`Producer`], [`Consumer`], [`Admin`], cheap to clone and `Send + Sync` — which
//! run their commands on the calling task (records are copied into batches and decoded there)
//! and write what the core has to send. Everyone follows the core's drain rule: after every
//! input or command, drain `poll_connect`, `poll_close`, `poll_transmit` and `poll_event` until
//! a whole pass yields nothing; the driver then sleeps until the earliest of socket readiness,
//! a wake-up from a handle, a finished connect, or `poll_timeout()`. When the last handle of a
//! driver is dropped, the driver closes the producer (delivering what is buffered, up to
//! [`Options::close_timeout`]) and the consumer (auto-commit), closes its sockets and ends.
//!
//! The adapter holds no protocol logic: every decision about Stellflow semantics is the core's.
//! The driver loop and the handles are runtime-neutral and live in
//! `stellflow-async`; this crate is its [`Runtime`] for tokio
//! ([`Tokio`]: `tokio::spawn`, `tokio::net::TcpStream`, `tokio::time`) and names the handles.
//! Encoded requests go from the core straight into one reused write buffer and to the socket;
//! reads land back to back in one read buffer per socket that the core slices without copying.
//!
//! # Quickstart
//!
//! ```
//! use stellflow_tokio::{Admin, ClientConfig, Consumer, OffsetReset, Producer, Record, Target,
//!     TopicPartition};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = stellflow_sim::serve("127.0.0.1:0")?;
//! # let bootstrap = server.local_addr().to_string();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! rt.block_on(async {
//!     let config = ClientConfig::new(&bootstrap)?; // e.g. "127.0.0.1:9092"
//!     let admin = Admin::connect(config.clone()).await?;
//!     admin.create_topic("greetings", 1, Target::Any).await?;
//!
//!     let producer = Producer::connect(config.clone()).await?;
//!     let meta = producer.send(Record::new("greetings", "hello")).await?;
//!     println!("written at {:?}#{}", meta.offset, meta.index);
//!
//!     let mut config = config;
//!     config.consumer.auto_offset_reset = OffsetReset::Earliest;
//!     let consumer = Consumer::connect(config).await?;
//!     consumer.assign(vec![TopicPartition::new("greetings", 0)]).await?;
//!     let records = consumer.poll(Duration::from_secs(5)).await?;
//!     assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

// Everything runtime-neutral: `Record`, `Delivery`, `Options`, `Error`, the core's types.
pub use stellflow_async::prelude::*;

use std::future::Future;
use std::io::{self, ErrorKind};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_sansio::BrokerAddress;
use tokio::net::TcpStream;

/// Sends records; its driver runs on the current tokio runtime (see [`stellflow_async::Producer`]).
pub type Producer = stellflow_async::Producer<Tokio>;
/// Reads records; its driver runs on the current tokio runtime (see [`stellflow_async::Consumer`]).
pub type Consumer = stellflow_async::Consumer<Tokio>;
/// Administration; its driver runs on the current tokio runtime (see [`stellflow_async::Admin`]).
pub type Admin = stellflow_async::Admin<Tokio>;

/// The tokio [`Runtime`]: drivers and connects are `tokio::spawn`ed
/// on the current runtime (so `connect` must be called inside one).
#[derive(Debug, Clone, Copy)]
pub struct Tokio;

impl stellflow_async::Runtime for Tokio {
    type Socket = TcpStream;

    fn spawn(_: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        tokio::spawn(task);
        Ok(())
    }

    async fn connect(address: BrokerAddress, limit: Duration) -> io::Result<TcpStream> {
        let connect = TcpStream::connect(address.to_string());
        let stream = match tokio::time::timeout(limit, connect).await {
            Ok(r) => r?,
            Err(_) => return Err(io::Error::new(ErrorKind::TimedOut, "connect timed out")),
        };
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(deadline.into())
    }

    fn try_read(socket: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        socket.try_read(buf)
    }

    fn try_write(socket: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        socket.try_write(buf)
    }

    fn poll_readable(socket: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_read_ready(cx)
    }

    fn poll_writable(socket: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_write_ready(cx)
    }
}
