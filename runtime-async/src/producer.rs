//! The [`Producer`] handle and its [`Delivery`].

use crate::batch::{BatchDelivery, BatchOutcome, Fed};
use crate::state::{LaneRecord, Link, ReplySender, State};
use crate::{Client, ClientConfig, Error, Options, RecordMetadata, Result, Runtime};
use futures_channel::oneshot;
use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use stellflow_sansio::TraceIds;
use tracing::Instrument;

/// The `send` span of one record (`trace` level: one per record): its topic, and its
/// partition when the record names one.
fn send_span(record: &Record) -> tracing::Span {
    tracing::trace_span!("send", topic = %record.topic, partition = record.partition)
}

/// The record every send takes (`send`, `enqueue`, `try_enqueue`, `send_all`, `enqueue_all`).
/// It is owned because a record may wait for buffer space after the call returns.
pub use stellflow_sansio::Record;

/// The outcome of one `Producer::enqueue`: `.await` it (async) or [`Delivery::wait`]
/// (blocking) for the record's [`RecordMetadata`]. Dropping it does not cancel the send; the
/// outcome is then discarded.
#[derive(Debug)]
#[must_use = "dropping a Delivery discards the record's outcome (the record is still sent)"]
pub struct Delivery {
    rx: oneshot::Receiver<Result<RecordMetadata>>,
}

impl Delivery {
    /// Blocks the calling thread until the outcome is known (for blocking code; in async code
    /// `.await` the delivery instead).
    pub fn wait(self) -> Result<RecordMetadata> {
        futures_lite::future::block_on(self)
    }

    /// The outcome if it is known already (without waiting); `None` while the record is on
    /// its way. After it returned the outcome once, it returns [`Error::Shutdown`].
    pub fn try_wait(&mut self) -> Option<Result<RecordMetadata>> {
        match self.rx.try_recv() {
            Ok(r) => r,
            Err(_) => Some(Err(Error::Shutdown)),
        }
    }
}

impl Future for Delivery {
    type Output = Result<RecordMetadata>;

    /// Cancel safety: dropping the delivery only discards the outcome.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(Error::Shutdown)))
    }
}

/// Gives up a batch's place in the lane when `enqueue_all` is dropped before it fed every
/// record.
struct Abandon<'a> {
    link: &'a Link,
    key: u64,
    armed: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.armed {
            let key = self.key;
            let _ = self.link.with(|st, now| st.abandon_batch(now, key));
        }
    }
}

/// Sends records. Cheap to clone; every clone feeds the same client, in call order. `R` is
/// the runtime that drives the client; the adapter crates name it for you
/// (`stellflow_tokio::Producer`, `stellflow_smol::Producer`).
///
/// Examples are on those aliases.
#[derive(Debug, Clone)]
pub struct Producer<R: Runtime> {
    pub(crate) client: Client<R>,
}

impl<R: Runtime> Producer<R> {
    /// Starts a client of its own with default [`Options`] (see `Client::connect`).
    pub async fn connect(config: ClientConfig) -> Result<Producer<R>> {
        Ok(Client::connect(config).await?.producer())
    }

    /// Like [`Producer::connect`](#method.connect), with adapter options.
    pub async fn connect_with(config: ClientConfig, options: Options) -> Result<Producer<R>> {
        Ok(Client::connect_with(config, options).await?.producer())
    }

    /// The client this handle runs on (for the other handles, metadata and counters).
    pub fn client(&self) -> &Client<R> {
        &self.client
    }

    /// Sends a record and waits for its outcome (see [`Producer::enqueue`](#method.enqueue) for the
    /// wait for buffer space).
    ///
    /// Cancel safety: once the record is queued, dropping the future does not cancel the
    /// send; its outcome is then discarded.
    pub async fn send(&self, record: Record) -> Result<RecordMetadata> {
        self.enqueue(record).await?.await
    }

    /// Queues a record without waiting for its delivery; records keep their call order. The
    /// record is copied into its batch on the calling task.
    ///
    /// Backpressure: a record that finds the core's buffer (`producer.buffer_memory`) full
    /// waits in a lane up to [`ProducerConfig::max_block`](crate::ProducerConfig::max_block) and
    /// then fails its [`Delivery`] with [`Error::BufferFull`]; behind it at most 1024 records wait
    /// in the lane, and `enqueue` itself waits (again up to `max_block`) while the lane is full.
    /// Memory stays bounded by `buffer_memory` plus those 1024 records.
    ///
    /// Cancel safety: dropping the future before it completes leaves the record unqueued.
    pub async fn enqueue(&self, record: Record) -> Result<Delivery> {
        // The caller's context, read before the `send` span is entered.
        let trace = crate::trace::current();
        let span = send_span(&record);
        self.enqueue_traced(record, trace).instrument(span).await
    }

    async fn enqueue_traced(&self, record: Record, trace: Option<TraceIds>) -> Result<Delivery> {
        let max_block = self.client.link.options.max_block;
        let (reply, rx) = oneshot::channel();
        // The deadline is taken from the clock reading `with` makes anyway: one clock read
        // per record, not two.
        let mut first = Some((record, reply, trace));
        let mut pending = None;
        let queue = futures_lite::future::poll_fn(|cx| {
            let queued = self.client.link.with(|st, now| {
                let p = match first.take() {
                    Some((record, reply, trace)) => LaneRecord {
                        record,
                        trace,
                        deadline: now + max_block,
                        reply,
                    },
                    None => pending.take()?,
                };
                let back = st.enqueue(now, p);
                if back.is_some() {
                    st.wait(cx);
                }
                back
            });
            match queued {
                Ok(Some(back)) => {
                    pending = Some(back);
                    Poll::Pending
                }
                Ok(None) => Poll::Ready(Ok(())),
                Err(e) => Poll::Ready(Err(e)),
            }
        });
        // Polled only once the record had to wait: its deadline is then read off the clock
        // (a few microseconds after the one in its `LaneRecord`).
        let expire = async {
            R::sleep_until(R::now() + max_block).await;
            Err(Error::BufferFull(max_block))
        };
        futures_lite::future::or(queue, expire).await?;
        Ok(Delivery { rx })
    }

    /// Sends every record of `records` and waits for their outcomes (see
    /// [`Producer::enqueue_all`](#method.enqueue_all)): one outcome per record, in the order given
    /// (a [`BatchOutcome`]).
    ///
    /// Cancel safety: as [`Producer::enqueue_all`](#method.enqueue_all) while records are queued;
    /// once every record is queued, dropping the future only discards the outcomes.
    pub async fn send_all<I>(&self, records: I) -> Result<BatchOutcome>
    where
        I: IntoIterator,
        I::Item: Borrow<Record>,
    {
        Ok(self.enqueue_all(records).await?.await)
    }

    /// Queues every record of `records` (owned [`Record`]s or references to them) in order,
    /// without waiting for their delivery, and returns one [`BatchDelivery`] for all of them:
    /// Kafka's `send(List<ProducerRecord>)`. Each record goes to its partition's batch as with
    /// [`Producer::enqueue`](#method.enqueue), so records keep their order per partition, behind
    /// every record queued before the call; the call costs a few allocations, not one per record,
    /// and reads the clock once per few hundred records.
    ///
    /// Backpressure applies to the whole call: when the core's buffer
    /// (`producer.buffer_memory`) is full, the call waits for room (the records not yet
    /// queued stay with the caller, so memory stays bounded by `buffer_memory`) for up to
    /// [`ProducerConfig::max_block`](crate::ProducerConfig::max_block) from the call's start, then
    /// stops: every record not queued by then has [`Error::BufferFull`] as its outcome. While it
    /// waits, records sent after it by other tasks wait behind it in the lane.
    ///
    /// Cancel safety: dropping the future before it completes sends the records queued so far
    /// (their outcomes are discarded) and not the others.
    pub async fn enqueue_all<I>(&self, records: I) -> Result<BatchDelivery>
    where
        I: IntoIterator,
        I::Item: Borrow<Record>,
    {
        self.enqueue_all_within(records, self.client.link.options.max_block)
            .await
    }

    /// [`Producer::enqueue_all`](#method.enqueue_all) with this call's own bound on the wait for
    /// buffer room in place of `producer.max_block` (rdkafka's `send(record, queue_timeout)`): code
    /// with a deadline of its own passes what is left of it, so a full buffer never holds the call
    /// past the deadline. The records not queued within `max_block` have [`Error::BufferFull`] as
    /// their outcome; `Duration::ZERO` queues only what fits now.
    pub async fn enqueue_all_within<I>(
        &self,
        records: I,
        max_block: Duration,
    ) -> Result<BatchDelivery>
    where
        I: IntoIterator,
        I::Item: Borrow<Record>,
    {
        /// Records fed to the core per hold of the lock: the driver gets it in between.
        const PER_LOCK: usize = 512;
        let link = &self.client.link;
        // The calling span's trace context goes with every record (as with `enqueue`).
        let trace = crate::trace::current();
        let mut records = records.into_iter();
        let (reply, rx) = oneshot::channel();
        let span = tracing::debug_span!("enqueue_all", records = tracing::field::Empty);
        let (key, start) = link.with(|st, now| (st.batches.open(reply, trace), now))?;
        let mut guard = Abandon {
            link,
            key,
            armed: true,
        };
        let mut held = None;
        let mut fed = 0usize;
        let feed = futures_lite::future::poll_fn(|cx| {
            loop {
                let step = link.with(|st, now| {
                    let step = st.feed(now, key, &mut held, &mut records, PER_LOCK, &mut fed);
                    match step {
                        Fed::Wait => st.wait(cx),
                        Fed::WaitForRoom => st.wait_for_room(cx),
                        Fed::Done | Fed::More => {}
                    }
                    step
                });
                match step {
                    Ok(Fed::More) => continue,
                    Ok(Fed::Done) => return Poll::Ready(Ok(true)),
                    Ok(Fed::Wait | Fed::WaitForRoom) => return Poll::Pending,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        });
        let expire = async {
            R::sleep_until(start + max_block).await;
            Ok(false)
        };
        let done = futures_lite::future::or(feed, expire)
            .instrument(span.clone())
            .await?;
        if !done {
            fed +=
                link.with(|st, now| st.expire_batch(now, key, max_block, held.take(), records))?;
        }
        guard.armed = false;
        span.record("records", fed);
        Ok(BatchDelivery { rx, len: fed })
    }

    /// Queues a record if that needs no wait — the core has buffer room, or the lane behind it has
    /// a free place (the record then waits there as with [`Producer::enqueue`](#method.enqueue)) —
    /// and gives it back (`Ok(Err(record))`) when the lane is full. Never waits, so it also serves
    /// code that must not block; `enqueue` is this plus the wait for a place in the lane.
    ///
    /// ```no_run
    /// # use stellflow_async::{Producer, Runtime};
    /// # async fn f<R: Runtime>(producer: Producer<R>) -> stellflow_async::Result<()> {
    /// # use stellflow_async::Record; // stellflow_tokio::Record etc.: the same type
    /// let delivery = match producer.try_enqueue(Record::new("orders", "one"))? {
    ///     Ok(delivery) => delivery,
    ///     Err(record) => producer.enqueue(record).await?, // the lane is full: wait for room
    /// };
    /// # let _ = delivery; Ok(()) }
    /// ```
    pub fn try_enqueue(&self, record: Record) -> Result<std::result::Result<Delivery, Record>> {
        let max_block = self.client.link.options.max_block;
        let trace = crate::trace::current();
        let _span = send_span(&record).entered();
        let (reply, rx) = oneshot::channel();
        let back = self.client.link.with(|st, now| {
            let deadline = now + max_block;
            st.enqueue(
                now,
                LaneRecord {
                    record,
                    trace,
                    deadline,
                    reply,
                },
            )
        })?;
        Ok(match back {
            None => Ok(Delivery { rx }),
            Some(p) => Err(p.record),
        })
    }

    /// Sends every buffered record now and waits until every record enqueued before this call
    /// (those waiting in the lane included) has its outcome.
    ///
    /// Cancel safety: dropping the future does not stop the flush.
    pub async fn flush(&self) -> Result<()> {
        let flush = |st: &mut State, now, tx| drop(st.flushes.insert(st.client.flush(now), tx));
        self.client.link.call_in_lane(flush).await
    }

    /// Closes the producer: delivers what is buffered (up to [`Options::close_timeout`]),
    /// then refuses new records; [`Error::Undelivered`] when some records failed. Other
    /// handles of the client keep working.
    ///
    /// Cancel safety: dropping the future does not stop the close.
    pub async fn close(&self) -> Result<()> {
        let close = |st: &mut State, now, tx: ReplySender<Result<()>>| {
            st.client.close_producer(now, st.options.close_timeout);
            st.producer_closed.wait(tx);
        };
        self.client.link.call_in_lane(close).await?
    }
}
