//! The [`Producer`] handle and its [`Delivery`].

pub use stellflow_sansio::producer::OwnedRecord as Record;

use crate::driver::{Link, Pending, Reply, State};
use crate::{Admin, ClientConfig, Error, Options, RecordMetadata, Runtime};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// The outcome of one [`Producer::enqueue`]: await it for the record's [`RecordMetadata`].
/// Dropping it does not cancel the send; the outcome is then discarded.
#[derive(Debug)]
pub struct Delivery {
    rx: futures_channel::oneshot::Receiver<Result<RecordMetadata, Error>>,
}

impl Future for Delivery {
    type Output = Result<RecordMetadata, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(Error::Shutdown)))
    }
}

/// Sends records. Cheap to clone; every clone feeds the same client, in call order. `R` is the
/// runtime that drives the client; the adapter crates name it for you
/// (`stellflow_tokio::Producer`, `stellflow_smol::Producer`).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use stellflow_tokio::{ClientConfig, Producer, Record};
/// let producer = Producer::connect(ClientConfig::new("127.0.0.1:9092")?).await?;
/// let meta = producer.send(Record::new("orders", "one")).await?;   // waits for the ack
/// let pending = producer.enqueue(Record::new("orders", "two")).await?; // waits for buffer only
/// producer.flush().await?;
/// let meta2 = pending.await?;
/// # let _ = (meta, meta2); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Producer<R: Runtime> {
    link: Link,
    runtime: PhantomData<R>,
}

impl<R: Runtime> Producer<R> {
    /// Starts a client on the runtime `R` with default [`Options`]. Connections open on
    /// demand: this does not wait for the broker.
    pub async fn connect(config: ClientConfig) -> Result<Producer<R>, Error> {
        Self::connect_with(config, Options::default()).await
    }

    /// Like [`Producer::connect`], with adapter options.
    pub async fn connect_with(
        config: ClientConfig,
        options: Options,
    ) -> Result<Producer<R>, Error> {
        Ok(Producer {
            link: Link::start::<R>(config, options)?,
            runtime: PhantomData,
        })
    }

    /// An admin handle on the same client.
    pub fn admin(&self) -> Admin<R> {
        Admin::from_link(self.link.clone())
    }

    /// Sends a record and waits for its outcome (see [`Producer::enqueue`] for the wait for
    /// buffer space).
    pub async fn send(&self, record: Record) -> Result<RecordMetadata, Error> {
        self.enqueue(record).await?.await
    }

    /// Queues a record without waiting for its delivery; records keep their call order. The
    /// record is copied into its batch on the calling task.
    ///
    /// Backpressure: a record that finds the core's buffer (`producer.buffer_memory`) full
    /// waits in a lane up to [`Options::max_block`] and then fails its [`Delivery`] with
    /// [`Error::BufferFull`]; behind it at most 1024 records wait in the lane, and `enqueue`
    /// itself waits (again up to `max_block`) while the lane is full. Memory stays bounded by
    /// `buffer_memory` plus those 1024 records.
    pub async fn enqueue(&self, record: Record) -> Result<Delivery, Error> {
        let max_block = self.link.options.max_block;
        let deadline = Instant::now() + max_block;
        let (reply, rx) = futures_channel::oneshot::channel();
        let mut pending = Some(Pending {
            record,
            deadline,
            reply,
        });
        let queue = futures_lite::future::poll_fn(|cx| {
            let queued = self.link.with(|st, now| {
                let p = pending.take()?;
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
        let expire = async {
            R::sleep_until(deadline).await;
            Err(Error::BufferFull(max_block))
        };
        futures_lite::future::or(queue, expire).await?;
        Ok(Delivery { rx })
    }

    /// Sends every buffered record now and waits until every record enqueued before this call
    /// has its outcome.
    pub async fn flush(&self) -> Result<(), Error> {
        let flush = |st: &mut State, now, tx| drop(st.flushes.insert(st.client.flush(now), tx));
        self.link.call_in_lane(flush).await
    }

    /// Closes the producer: delivers what is buffered (up to [`Options::close_timeout`]), then
    /// refuses new records. Other handles of the client keep working.
    pub async fn close(&self) -> Result<(), Error> {
        let close = |st: &mut State, now, tx: Reply<()>| {
            st.client.close_producer(now, st.options.close_timeout);
            match st.producer_closed.0 {
                true => {
                    let _ = crate::driver::answer(&tx, ());
                }
                false => st.producer_closed.1.push(tx),
            }
        };
        self.link.call_in_lane(close).await
    }
}
