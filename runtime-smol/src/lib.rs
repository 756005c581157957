//! Drives the Stellflow sans-IO client ([`stellflow_sansio`]) on `async-io`, executor-neutral.
//!
//! Each client's driver runs on a thread of its own under `async_io::block_on`, owning the
//! reading side of one [`stellflow_sansio::Client`]'s sockets (`Async<TcpStream>`, TCP_NODELAY),
//! its connects and its timers; the client itself sits behind a mutex shared with the handles —
//! [`Producer`], [`Consumer`], [`Admin`], cheap to clone and `Send + Sync` — which run their
//! commands on the calling task (records are copied into batches and decoded there) and write
//! what the core has to send, so they work under smol, the async-std executor, tokio, or any
//! other executor. Everyone follows the core's drain rule: after every input or command, drain
//! `poll_connect`, `poll_close`, `poll_transmit` and `poll_event` until a whole pass yields
//! nothing; the driver then waits (one race of futures) for the earliest of socket readiness, a
//! wake-up from a handle, a finished connect, or `poll_timeout()`. When the last handle of a
//! driver is dropped, the driver closes the producer (delivering what is buffered, up to
//! [`Options::close_timeout`]) and the consumer (auto-commit), closes its sockets and ends.
//!
//! The driver loop and the handles are runtime-neutral and live in
//! `stellflow-async`; this crate is its [`Runtime`] for `async-io`
//! ([`Smol`]: a thread per driver, `Async<TcpStream>`, `async_io::Timer`) and names the handles.
//!
//! The adapter holds no protocol logic: every decision about Stellflow semantics is the core's.
//! Encoded requests go from the core straight into one reused write buffer and to the socket;
//! reads land back to back in one read buffer per socket that the core slices without copying.
//!
//! # Quickstart
//!
//! ```
//! use stellflow_smol::{Admin, ClientConfig, Consumer, OffsetReset, Producer, Record, Target,
//!     TopicPartition};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = stellflow_sim::serve("127.0.0.1:0")?;
//! # let bootstrap = server.local_addr().to_string();
//! smol::block_on(async {
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

use async_io::{Async, Timer};
use std::future::Future;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_sansio::BrokerAddress;

/// Sends records; its driver runs on a thread of its own (see [`stellflow_async::Producer`]).
pub type Producer = stellflow_async::Producer<Smol>;
/// Reads records; its driver runs on a thread of its own (see [`stellflow_async::Consumer`]).
pub type Consumer = stellflow_async::Consumer<Smol>;
/// Administration; its driver runs on a thread of its own (see [`stellflow_async::Admin`]).
pub type Admin = stellflow_async::Admin<Smol>;

/// The `async-io` [`Runtime`]: each driver (and each connect, whose
/// name resolution blocks) runs on a thread of its own under `async_io::block_on`, so the
/// handles work under any executor.
#[derive(Debug, Clone, Copy)]
pub struct Smol;

impl stellflow_async::Runtime for Smol {
    type Socket = Async<TcpStream>;

    fn spawn(
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let name = format!("{}-smol", name);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || async_io::block_on(task))
            .map(drop)
    }

    async fn connect(address: BrokerAddress, limit: Duration) -> io::Result<Async<TcpStream>> {
        // Runs on a thread of its own (see `spawn`), so blocking here is fine.
        Async::new(connect(&address, limit)?)
    }

    async fn sleep_until(deadline: Instant) {
        Timer::at(deadline).await;
    }

    fn try_read(socket: &Async<TcpStream>, buf: &mut [u8]) -> io::Result<usize> {
        socket.get_ref().read(buf)
    }

    fn try_write(socket: &Async<TcpStream>, buf: &[u8]) -> io::Result<usize> {
        socket.get_ref().write(buf)
    }

    fn poll_readable(socket: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_readable(cx)
    }

    fn poll_writable(socket: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_writable(cx)
    }
}

/// Resolves and connects within `limit` (blocking: runs on its own thread).
fn connect(address: &BrokerAddress, limit: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(ErrorKind::NotFound, "the name resolved to no address");
    for addr in (address.host.as_str(), address.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}
