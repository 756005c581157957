//! Drives the Stellflow sans-IO client (`stellflow-sansio`) on blocking `std::net`.
//!
//! A [`Client`] is one core, one driver thread and its sockets; it hands out [`Producer`],
//! [`Consumer`] and [`Admin`] handles (each also has its own `connect`), cheap to clone and
//! `Send + Sync`, with the same methods, arguments and results as `stellflow-tokio` and
//! `stellflow-smol` — they block the calling thread instead of being `async`. The handles run
//! their commands on the calling thread (a record is copied once, into its batch; records are
//! decoded by the thread that polls them).
//!
//! # Design
//!
//! The handles, the driver loop and the plumbing between them (answers routed to waiting
//! callers, the lane of records waiting for buffer space, flush and close behind it, the event
//! log, shutdown) are the runtime-neutral ones of `stellflow-async`, shared with the async
//! adapters. This crate is their [`Runtime`] for threads: the driver runs on a thread of its own
//! that parks until a socket, a handle or a timer wakes it; `std::net` has no readiness
//! multiplexing, so each connection gets a reader thread (it connects, then reads) and a
//! writer thread. A handle's call runs the shared `async` method on the calling thread and
//! parks it until the answer (or its time limit) comes.
//!
//! # Ending
//!
//! [`Client::close`] flushes and closes the producer, closes the consumer (committing with
//! auto-commit) and waits for the driver to end. Dropping the last clone of a client and of
//! its handles does the same, blocking the dropping thread up to [`Options::close_timeout`].
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
//!   `poll(timeout)`, `recv()`, `poll_blobs(timeout)`. The fastest way to read small
//!   records is `poll_blobs` with [`FetchedBlob::next_view`]: each record a borrowed
//!   [`RecordView`] (key, value and headers as slices of the blob), no allocation or
//!   reference count per record; taking a blob delivers all of it, so commits count as for
//!   `poll`.
//!   `seek`, `position`, `committed`, `lag`, `pause`/`resume`, `events()`.
//! * **Commit**: auto-commit by default (`consumer.enable_auto_commit`, every
//!   `auto_commit_interval`, before a revocation and on close); `commit_sync`,
//!   `commit_async`, `commit_positions`. For at-least-once processing set
//!   `consumer.commit_marked_only` and call `Consumer::mark_processed(&record)` once the
//!   record's outputs are acknowledged: commits then take only marked positions (the
//!   `transform_blocking` example is the whole service).
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
//! The program needs `stellflow-blocking` alone. To try it without a cluster, run the
//! simulated broker of the command-line tool (`cargo install stellflow-cli`, then
//! `stellflow broker --port 9092`) and connect to `127.0.0.1:9092`.
//!
//! ```
//! use std::time::Duration;
//! use stellflow_blocking::{Client, ClientConfig, OffsetReset, Record, Target};
//!
//! # fn main() -> Result<(), stellflow_blocking::Error> {
//! # let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
//! # let bootstrap = server.local_addr().to_string();
//! let mut config = ClientConfig::new(&bootstrap)?;
//! config.consumer.group_id = Some("greeters".into()); // its members share the partitions
//! config.consumer.auto_offset_reset = OffsetReset::Earliest;
//! let client = Client::connect(config)?;
//!
//! client.admin().create_topic("greetings", 1, Target::Any)?;
//! let meta = client.producer().send(Record::new("greetings", "hello"))?;
//! assert_eq!(meta.partition, 0);
//!
//! let consumer = client.consumer();
//! consumer.subscribe(&["greetings"])?; // or assign(&[TopicPartition::new("greetings", 0)])
//! let record = consumer.recv()?;
//! assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
//! client.close()?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod handles;
mod net;
mod read_buffers;

pub use handles::{Admin, Client, Consumer, Producer};
pub use stellflow_async::prelude::*;

use bytes::{Bytes, BytesMut};
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The blocking runtime: the driver runs on a thread of its own, each connection has a
/// reader and a writer thread, and waiting parks the thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blocking;

impl Runtime for Blocking {
    type Socket = net::Socket;

    fn spawn(
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let thread = std::thread::Builder::new().name(name.into());
        thread.spawn(move || block_on(task)).map(drop)
    }

    fn connect(
        address: BrokerAddress,
        limit: Duration,
    ) -> impl Future<Output = io::Result<net::Socket>> + Send + 'static {
        net::connect(address, limit)
    }

    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send {
        std::future::poll_fn(move |_| {
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            WAKE_AT.set(Some(WAKE_AT.get().map_or(deadline, |t| t.min(deadline))));
            Poll::Pending
        })
    }

    fn try_read(socket: &net::Socket, buf: &mut [u8]) -> io::Result<usize> {
        socket.try_read(buf)
    }

    fn try_write(socket: &net::Socket, buf: &[u8]) -> io::Result<usize> {
        socket.try_write(buf)
    }

    fn set_abort_on_close(socket: &net::Socket) -> io::Result<()> {
        socket.set_abort_on_close()
    }

    fn set_unacked_timeout(socket: &net::Socket, timeout: Duration) -> io::Result<()> {
        socket.set_unacked_timeout(timeout)
    }

    fn poll_readable(socket: &net::Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        socket.poll_readable(cx)
    }

    fn poll_writable(_: &net::Socket, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(())) // the writer thread takes everything
    }

    fn take_read(socket: &net::Socket) -> Option<io::Result<BytesMut>> {
        Some(socket.take_read())
    }

    fn hand_over(socket: &net::Socket, bytes: &mut Bytes) -> Option<io::Result<()>> {
        Some(socket.hand_over(std::mem::take(bytes)))
    }
}

thread_local! {
    /// The earliest deadline a pending [`Blocking::sleep_until`] waits for on this thread.
    static WAKE_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Wakes this thread (one per thread, made once).
    static WAKER: Waker = Waker::from(Arc::new(Unpark(std::thread::current())));
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `f` on this thread, parking it until a waker or a [`Blocking::sleep_until`] deadline.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let waker = WAKER.with(Waker::clone);
    let mut cx = Context::from_waker(&waker);
    loop {
        WAKE_AT.set(None);
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        match WAKE_AT.get() {
            Some(t) => std::thread::park_timeout(t.saturating_duration_since(Instant::now())),
            None => std::thread::park(),
        }
    }
}
