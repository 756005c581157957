//! The [`Consumer`] handle.

use crate::driver::{Committed, Link};
use crate::{Admin, ClientConfig, Error, Options, Runtime};
use futures_lite::future;
use std::marker::PhantomData;
use std::task::Poll;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    ConsumerError, ConsumerEvent, ConsumerRecord, Position, SeekTo, TopicPartition,
};

/// Reads records: manual assignment ([`Consumer::assign`], recommended on today's server) or
/// group subscription ([`Consumer::subscribe`], needs `config.consumer.group_id`). Cheap to
/// clone; all clones share one consumer and its positions. `R` is the runtime that drives the
/// client; the adapter crates name it for you (`stellflow_tokio::Consumer`, …).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use std::time::Duration;
/// use stellflow_tokio::{ClientConfig, Consumer};
/// let mut config = ClientConfig::new("127.0.0.1:9092")?;
/// config.consumer.group_id = Some("billing".into());
/// let consumer = Consumer::connect(config).await?;
/// consumer.subscribe(&["orders"]).await?;
/// for record in consumer.poll(Duration::from_secs(1)).await? {
///     println!("{}-{} {}#{}", record.topic, record.partition, record.offset, record.index);
/// }
/// consumer.commit_sync().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Consumer<R: Runtime> {
    link: Link,
    runtime: PhantomData<R>,
}

impl<R: Runtime> Consumer<R> {
    /// Starts a client on the runtime `R` with default [`Options`].
    pub async fn connect(config: ClientConfig) -> Result<Consumer<R>, Error> {
        Self::connect_with(config, Options::default()).await
    }

    /// Like [`Consumer::connect`], with adapter options.
    pub async fn connect_with(
        config: ClientConfig,
        options: Options,
    ) -> Result<Consumer<R>, Error> {
        Ok(Consumer {
            link: Link::start::<R>(config, options)?,
            runtime: PhantomData,
        })
    }

    /// An admin handle on the same client.
    pub fn admin(&self) -> Admin<R> {
        Admin::from_link(self.link.clone())
    }

    /// Consumes exactly `partitions` (replaces any subscription).
    pub async fn assign(&self, partitions: Vec<TopicPartition>) -> Result<(), Error> {
        let r = self
            .link
            .query(move |st, now| st.client.assign(now, &partitions));
        Ok(r.await??)
    }

    /// Joins `config.consumer.group_id` and consumes the topics' partitions.
    pub async fn subscribe(&self, topics: &[&str]) -> Result<(), Error> {
        let topics: Vec<String> = topics.iter().map(|t| (*t).to_owned()).collect();
        let r = self.link.query(move |st, now| {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            st.client.subscribe(now, &names)
        });
        Ok(r.await??)
    }

    /// Waits up to `timeout` for records and returns the ones available (at most 500; see
    /// [`Consumer::poll_max`]); an empty vector when none came in time.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>, Error> {
        self.poll_max(timeout, 500).await
    }

    /// Like [`Consumer::poll`], returning at most `max` records. The records are decoded (and
    /// their batches checked) on the calling task.
    pub async fn poll_max(
        &self,
        timeout: Duration,
        max: usize,
    ) -> Result<Vec<ConsumerRecord>, Error> {
        let deadline = Instant::now() + timeout;
        let max = max.max(1);
        let take = future::poll_fn(|cx| {
            let r = self.link.with(|st, _| {
                let out = st.take_records(max);
                match out.is_empty() {
                    true if st.consumer_closed.0 => Some(Err(ConsumerError::Closed.into())),
                    true => {
                        st.wait(cx);
                        None
                    }
                    false => Some(Ok(out)),
                }
            });
            match r {
                Ok(Some(r)) => Poll::Ready(r),
                Ok(None) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            }
        });
        let expire = async {
            R::sleep_until(deadline).await;
            Ok(Vec::new())
        };
        future::or(take, expire).await
    }

    /// Commits the positions of every assigned partition (the first record not yet returned
    /// by `poll`, mid-blob included) and waits for the outcome.
    pub async fn commit_sync(&self) -> Result<Committed, Error> {
        self.link
            .call(|st, now, tx| match st.client.commit(now) {
                Ok(id) => drop(st.commits.insert(id, tx)),
                Err(e) => drop(crate::driver::answer(&tx, Err(e.into()))),
            })
            .await?
    }

    /// Commits explicit positions (e.g. [`ConsumerRecord::next_position`]) and waits.
    pub async fn commit_positions(&self, positions: Committed) -> Result<Committed, Error> {
        self.link
            .call(
                |st, now, tx| match st.client.commit_positions(now, positions) {
                    Ok(id) => drop(st.commits.insert(id, tx)),
                    Err(e) => drop(crate::driver::answer(&tx, Err(e.into()))),
                },
            )
            .await?
    }

    /// Starts a commit of every position without waiting for it (no retries); its outcome
    /// shows up in [`Consumer::events`].
    pub async fn commit_async(&self) -> Result<(), Error> {
        let r = self.link.query(|st, now| st.client.commit_async(now));
        r.await??;
        Ok(())
    }

    /// Moves `tp` to a position, the log start or end, or the committed offset.
    pub async fn seek(&self, tp: TopicPartition, to: SeekTo) -> Result<(), Error> {
        Ok(self
            .link
            .query(move |st, now| st.client.seek(now, &tp, to))
            .await??)
    }

    /// The next position `poll` returns from `tp` (`None` while it is being resolved).
    pub async fn position(&self, tp: TopicPartition) -> Result<Option<Position>, Error> {
        self.link.query(move |st, _| st.client.position(&tp)).await
    }

    /// The last committed position of `tp` this consumer knows.
    pub async fn committed(&self, tp: TopicPartition) -> Result<Option<Position>, Error> {
        self.link.query(move |st, _| st.client.committed(&tp)).await
    }

    /// The partitions assigned now.
    pub async fn assignment(&self) -> Result<Vec<TopicPartition>, Error> {
        self.link.query(|st, _| st.client.assignment()).await
    }

    /// Stops fetching `tp` (buffered records are kept).
    pub async fn pause(&self, tp: TopicPartition) -> Result<(), Error> {
        Ok(self.link.query(move |st, _| st.client.pause(&tp)).await??)
    }

    /// Resumes a paused partition.
    pub async fn resume(&self, tp: TopicPartition) -> Result<(), Error> {
        Ok(self
            .link
            .query(move |st, _| st.client.resume(&tp))
            .await??)
    }

    /// Takes the consumer notifications seen since the last call (rebalances, resolved
    /// positions, fetch errors, commit outcomes of `commit_async` and auto-commit, group
    /// warnings); the oldest are dropped beyond 1024.
    pub async fn events(&self) -> Result<Vec<ConsumerEvent>, Error> {
        self.link.query(|st, _| st.events.take()).await
    }

    /// Stops consuming (committing positions first when auto-commit is on) and waits for it.
    pub async fn close(&self) -> Result<(), Error> {
        self.link
            .call(|st, now, tx| {
                st.client.close_consumer(now);
                match st.consumer_closed.0 {
                    true => {
                        let _ = crate::driver::answer(&tx, ());
                    }
                    false => st.consumer_closed.1.push(tx),
                }
            })
            .await
    }
}
