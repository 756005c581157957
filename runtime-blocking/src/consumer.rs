//! [`Consumer`]: assignment or group subscription, polling, commits and positions.

use crate::driver::Committed;
use crate::{
    Client, ConsumerError, ConsumerEvent, ConsumerRecord, Error, Pending, Position, Result, SeekTo,
    TopicPartition,
};
use std::time::{Duration, Instant};
use stellflow_sansio::CommitId;

/// Reads records. Cheap to clone; `Send + Sync` (clones share one consumer: each record is
/// delivered to exactly one `poll`).
///
/// Records stay in the core's bounded buffer until `poll` takes them, so a slow caller slows
/// fetching down instead of growing memory.
///
/// ```no_run
/// # fn main() -> Result<(), stellflow_blocking::Error> {
/// use std::time::Duration;
/// use stellflow_blocking::{ClientConfig, Consumer, OffsetReset, TopicPartition};
/// let mut config = ClientConfig::new("127.0.0.1:9092")?;
/// config.consumer.group_id = Some("billing".into());
/// config.consumer.auto_offset_reset = OffsetReset::Earliest;
/// let consumer = Consumer::connect(config)?;
/// consumer.assign(&[TopicPartition::new("orders", 0)])?;
/// for record in consumer.poll(Duration::from_secs(1))? {
///     println!("{}-{} @{}.{}", record.topic, record.partition, record.offset, record.index);
/// }
/// consumer.commit_sync()?;
/// consumer.close()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Consumer {
    client: Client,
}

impl Consumer {
    pub(crate) fn new(client: Client) -> Self {
        Consumer { client }
    }

    /// Starts a client of its own for `config` (see [`Client::connect`]).
    pub fn connect(config: crate::ClientConfig) -> Result<Consumer> {
        Ok(Client::connect(config)?.consumer())
    }

    /// An admin handle on the same client.
    pub fn admin(&self) -> crate::Admin {
        self.client.admin()
    }

    /// The client this handle runs on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn run<T>(
        &self,
        f: impl FnOnce(&mut stellflow_sansio::Client, Instant) -> Result<T, ConsumerError>,
    ) -> Result<T> {
        self.client.shared().command(|i, now| {
            if i.closed {
                return Err(Error::Shutdown);
            }
            f(&mut i.client, now).map_err(Error::from)
        })
    }

    /// Consumes exactly `partitions` (a `Vec` or a slice; replaces any subscription).
    pub fn assign(&self, partitions: impl AsRef<[TopicPartition]>) -> Result<()> {
        self.run(|c, now| c.assign(now, partitions.as_ref()))
    }

    /// Joins `ClientConfig::consumer.group_id` and consumes the partitions of `topics`.
    pub fn subscribe<S: AsRef<str>>(&self, topics: impl IntoIterator<Item = S>) -> Result<()> {
        let topics: Vec<S> = topics.into_iter().collect();
        let names: Vec<&str> = topics.iter().map(AsRef::as_ref).collect();
        self.run(|c, now| c.subscribe(now, &names))
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.client.shared().lock().client.assignment()
    }

    /// Waits up to `timeout` for records and returns those buffered (at most
    /// [`crate::Options::max_poll_records`]); empty when none came in time.
    pub fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.poll_max(timeout, self.client.options().max_poll_records)
    }

    /// Like [`Consumer::poll`], returning at most `max` records.
    pub fn poll_max(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>> {
        let deadline = Instant::now() + timeout;
        let shared = self.client.shared();
        let max = max.max(1);
        let mut g = shared.lock();
        loop {
            if g.closed {
                return Err(Error::Shutdown);
            }
            let out: Vec<_> = std::iter::from_fn(|| g.client.poll_record())
                .take(max)
                .collect();
            let now = Instant::now();
            if !out.is_empty() {
                // Taking records freed buffer space: fetching may resume at once.
                if g.settle(now) {
                    let _ = shared.tx.send(crate::Msg::Wake);
                }
                return Ok(out);
            }
            if now >= deadline {
                return Ok(out);
            }
            g = shared
                .changed
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Commits the positions of every assigned partition (mid-blob included) and blocks until
    /// the coordinator confirms; returns what was committed.
    pub fn commit_sync(&self) -> Result<Committed> {
        self.commit_async()?.wait()
    }

    /// Commits explicit positions (e.g. [`ConsumerRecord::next_position`] of the last record
    /// processed) and blocks until confirmed.
    pub fn commit_positions(&self, positions: Committed) -> Result<Committed> {
        self.commit(|c, now| c.commit_positions(now, positions))?
            .wait()
    }

    /// Starts a commit of every assigned partition's position without waiting (not retried,
    /// like Kafka's `commitAsync`); the [`Pending`] may be ignored.
    pub fn commit_async(&self) -> Result<Pending<Committed>> {
        self.commit(|c, now| c.commit_async(now))
    }

    fn commit(
        &self,
        f: impl FnOnce(&mut stellflow_sansio::Client, Instant) -> Result<CommitId, ConsumerError>,
    ) -> Result<Pending<Committed>> {
        self.client.call(|i, now, tx| {
            let id = f(&mut i.client, now)?;
            i.replies.commits.insert(id, tx);
            Ok(())
        })
    }

    /// Moves `tp` (buffered records of it are dropped).
    pub fn seek(&self, tp: &TopicPartition, to: SeekTo) -> Result<()> {
        self.run(|c, now| c.seek(now, tp, to))
    }

    /// The next record `poll` delivers from `tp`; `None` while unresolved or unassigned.
    pub fn position(&self, tp: &TopicPartition) -> Option<Position> {
        self.client.shared().lock().client.position(tp)
    }

    /// The last committed position of `tp` this consumer knows.
    pub fn committed(&self, tp: &TopicPartition) -> Option<Position> {
        self.client.shared().lock().client.committed(tp)
    }

    /// High watermark − position of `tp`, from the latest fetch.
    pub fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.client.shared().lock().client.lag(tp)
    }

    /// Stops fetching and delivering `tp` (buffered records are kept).
    pub fn pause(&self, tp: &TopicPartition) -> Result<()> {
        self.run(|c, _| c.pause(tp))
    }

    /// Resumes a paused partition.
    pub fn resume(&self, tp: &TopicPartition) -> Result<()> {
        self.run(|c, _| c.resume(tp))
    }

    /// Takes the consumer notifications seen so far (rebalances, positions, commits, fetch
    /// errors; the latest 1024 are kept).
    pub fn events(&self) -> Vec<ConsumerEvent> {
        self.client.shared().lock().events.take()
    }

    /// Stops consuming; with auto-commit on, commits the positions first. Blocks until done.
    pub fn close(&self) -> Result<()> {
        let pending = self.client.call(|i, now, tx| {
            if i.consumer_done {
                tx.send(Ok(()));
            } else {
                i.replies.consumer_closed.push(tx);
                i.client.close_consumer(now);
            }
            Ok(())
        })?;
        pending.wait()
    }
}
