//! Drives the Stellflow sans-IO client ([`stellflow_sansio`]) on tokio.
//!
//! One driver task owns one [`stellflow_sansio::Client`] and its `TcpStream`s (TCP_NODELAY).
//! It follows the core's drain rule: after every input or command it drains `poll_connect`,
//! `poll_close`, `poll_transmit` and `poll_event` until a whole pass yields nothing, then
//! sleeps until the earliest of socket readiness, a new command, a finished connect, or
//! `poll_timeout()`. The handles — [`Producer`], [`Consumer`], [`Admin`] —
//! are cheap to clone, `Send + Sync`, and talk to the driver over channels. When the last handle
//! of a driver is dropped, the driver closes the producer (delivering what is buffered, up to
//! [`Options::close_timeout`]) and the consumer (auto-commit), closes its sockets and ends.
//!
//! The adapter holds no protocol logic: every decision about Stellflow semantics is the core's.
//! The driver loop, the handles and their channels are runtime-neutral and live in
//! `stellflow-async`; this crate is its [`Runtime`](stellflow_async::Runtime) for tokio
//! ([`Tokio`]: `tokio::spawn`, `tokio::net::TcpStream`, `tokio::time`) and names the handles.
//! Encoded requests go from the core straight into one reused write buffer and to the socket;
//! reads land in one reused read buffer that the core takes without copying.
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

/// The tokio [`Runtime`](stellflow_async::Runtime): drivers and connects are `tokio::spawn`ed
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
