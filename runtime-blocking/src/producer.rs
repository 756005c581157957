//! [`Producer`]: blocking and enqueue-only sends, flush and close.

use crate::driver::{Deferred, Waiting};
use crate::{Admin, Client, Error, Pending, ProduceError, ProducerRecord, RecordMetadata, Result};
use std::time::Instant;

pub use stellflow_sansio::producer::OwnedRecord as Record;

/// The bytes a record holds, for the overflow queue's bound.
fn record_size(r: &ProducerRecord<'_>) -> usize {
    let h: usize = r
        .headers
        .iter()
        .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
        .sum();
    r.topic.len() + r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len) + h
}

mod sealed {
    /// Keeps [`super::AsRecord`] closed: its calls run under the client's lock.
    pub trait Sealed {}
    impl Sealed for crate::ProducerRecord<'_> {}
    impl Sealed for super::Record {}
    impl<R: Sealed + ?Sized> Sealed for &R {}
}

/// Anything [`Producer::send`] accepts: an owned [`Record`] or a borrowed [`ProducerRecord`]
/// (by value or by reference). Both are read in place, never copied before the batch.
/// (Sealed: it is called under the client's lock.)
pub trait AsRecord: sealed::Sealed {
    /// Calls `f` with the record as the core's borrowed form.
    fn with_record<T>(&self, f: impl FnMut(&ProducerRecord<'_>) -> T) -> T;
}

impl AsRecord for ProducerRecord<'_> {
    fn with_record<T>(&self, mut f: impl FnMut(&ProducerRecord<'_>) -> T) -> T {
        f(self)
    }
}

impl AsRecord for Record {
    fn with_record<T>(&self, f: impl FnMut(&ProducerRecord<'_>) -> T) -> T {
        self.with_borrowed(f)
    }
}

impl<R: AsRecord + ?Sized> AsRecord for &R {
    fn with_record<T>(&self, f: impl FnMut(&ProducerRecord<'_>) -> T) -> T {
        (**self).with_record(f)
    }
}

/// Sends records. Cheap to clone; `Send + Sync`: any number of threads may send at once.
///
/// A record is copied once, from the caller's slices into its partition's batch, on the
/// caller's thread.
///
/// ```no_run
/// # fn main() -> Result<(), stellflow_blocking::Error> {
/// use stellflow_blocking::{ClientConfig, Producer, ProducerRecord, Record};
/// let producer = Producer::connect(ClientConfig::new("127.0.0.1:9092")?)?;
/// let meta = producer.send(ProducerRecord::new("orders", b"one").with_key(b"k"))?;
/// println!("written at {}-{} offset {:?} index {}", meta.topic, meta.partition, meta.offset, meta.index);
/// let pending: Vec<_> = (0..100)
///     .map(|i| producer.enqueue(Record::new("orders", format!("record {i}"))))
///     .collect::<Result<_, _>>()?;
/// producer.flush()?;
/// for p in pending { p.wait()?; }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Producer {
    client: Client,
}

impl Producer {
    pub(crate) fn new(client: Client) -> Self {
        Producer { client }
    }

    /// Starts a client of its own for `config` (see [`Client::connect`]).
    pub fn connect(config: crate::ClientConfig) -> Result<Producer> {
        Ok(Client::connect(config)?.producer())
    }

    /// An admin handle on the same client.
    pub fn admin(&self) -> Admin {
        self.client.admin()
    }

    /// The client this handle runs on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `record` and blocks until it is acknowledged (or fails). Waits for buffer space
    /// up to [`crate::Options::max_block`].
    pub fn send(&self, record: impl AsRecord) -> Result<RecordMetadata> {
        self.enqueue(record)?.wait()
    }

    /// Queues `record` and returns its [`Pending`] outcome without waiting for the broker.
    ///
    /// When the producer's buffer (`buffer_memory`) is full, the record is parked (copied) in
    /// an overflow queue of the same size and returns at once too; it enters the buffer as
    /// deliveries free space, or fails with [`Error::BufferFull`] after
    /// [`crate::Options::max_block`]. Only when the overflow queue is full as well does this
    /// call block, up to `max_block`. Records keep their call order. Errors mean nothing was
    /// queued.
    pub fn enqueue(&self, record: impl AsRecord) -> Result<Pending<RecordMetadata>> {
        let max_block = self.client.options().max_block;
        let mut now = Instant::now();
        let deadline = now + max_block;
        let shared = self.client.shared();
        let (reply, pending) = crate::pending();
        let mut g = shared.lock();
        loop {
            if g.closed {
                return Err(Error::Shutdown);
            }
            // Records keep their order: none enters the buffer past parked ones.
            if g.waiting.is_empty() {
                match record.with_record(|r| g.client.produce(now, r)) {
                    Ok(id) => {
                        g.replies.produced.insert(id, reply);
                        break;
                    }
                    Err(ProduceError::BufferFull { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let size = record.with_record(record_size);
            if g.waiting.is_empty() || g.waiting_bytes + size <= g.waiting_limit {
                let record = record.with_record(Record::from_borrowed);
                g.waiting_bytes += size;
                let w = Waiting {
                    record,
                    size,
                    deadline,
                    reply,
                    then: Vec::new(),
                };
                g.waiting.push_back(w);
                break;
            }
            if now >= deadline {
                return Err(Error::BufferFull(max_block));
            }
            // Deliveries free space; the driver signals after every pass.
            g = shared
                .changed
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            now = Instant::now();
        }
        if g.settle(now) {
            let _ = shared.tx.send(crate::Msg::Wake);
        }
        Ok(pending)
    }

    /// Sends every buffered record at once and blocks until each record enqueued before this
    /// call (parked ones included) has its outcome.
    pub fn flush(&self) -> Result<()> {
        self.client
            .call(|i, now, tx| {
                i.after_parked(now, Deferred::Flush(tx));
                Ok(())
            })?
            .wait()
    }

    /// Closes the producer gracefully: sends what is buffered, waits up to
    /// [`crate::Options::close_timeout`] for the outcomes and fails the rest. Sending afterwards
    /// fails with [`ProduceError::Closed`]; other handles of the client keep working.
    pub fn close(&self) -> Result<()> {
        let timeout = self.client.options().close_timeout;
        let pending = self.client.call(|i, now, tx| {
            let close = Deferred::Close {
                deadline: now + timeout,
                reply: Some(tx),
            };
            i.after_parked(now, close);
            Ok(())
        })?;
        pending.wait().map(drop)
    }
}
