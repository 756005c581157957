//! The [`Consumer`] handle: assignment or subscription, polling (also as a [`Stream`]),
//! commits, positions and seeks (by time too).

use crate::admin::run as admin;
use crate::state::{Committed, State};
use crate::{Client, ClientConfig, Error, Events, Options, Rebalance, Result, Runtime};
use futures_lite::{Stream, future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_sansio::DriverExt;
use stellflow_sansio::TraceIds;
use stellflow_sansio::{
    AdminCall, ConsumerError, ConsumerRecord, FetchedBlob, ListedOffset, OffsetSpec, Position,
    RevocationId, SeekTo, TopicPartition,
};
use tracing::Instrument;

/// Reads records: as a member of a group ([`Consumer::subscribe`](#method.subscribe) with
/// `config.consumer.group_id`: the members share the topics' partitions and take over those of
/// a member that leaves or dies), or from the partitions given
/// ([`Consumer::assign`](#method.assign), no group). Cheap to clone; all clones share one
/// consumer and its positions (each record goes to one caller).
/// Also a [`Stream`] of records, which ends when the consumer is closed. `R` is the runtime
/// that drives the client; the adapter crates name it for you (`stellflow_tokio::Consumer`, …).
///
/// Records stay in the core's bounded buffer until they are taken, so a slow caller slows
/// fetching down instead of growing memory. Fetch sizes: `consumer.fetch_max_bytes` is
/// Kafka's `fetch.max.bytes`; Kafka's `max.partition.fetch.bytes` has no byte equivalent,
/// because each Fetch entry reads one whole blob: a partition's share of a request is
/// `consumer.max_entries_per_partition` blobs (the user guide, `docs/guide.md`, maps the Kafka
/// settings).
///
/// Examples with an adapter's names are on its aliases (`stellflow_tokio::Consumer`, ...).
#[derive(Debug, Clone)]
pub struct Consumer<R: Runtime> {
    pub(crate) client: Client<R>,
}

impl<R: Runtime> Consumer<R> {
    /// Starts a client of its own with default [`Options`] (see `Client::connect`).
    pub async fn connect(config: ClientConfig) -> Result<Consumer<R>> {
        Ok(Client::connect(config).await?.consumer())
    }

    /// Like [`Consumer::connect`](#method.connect), with adapter options.
    pub async fn connect_with(config: ClientConfig, options: Options) -> Result<Consumer<R>> {
        Ok(Client::connect_with(config, options).await?.consumer())
    }

    /// The client this handle runs on (for the other handles, metadata and counters).
    pub fn client(&self) -> &Client<R> {
        &self.client
    }

    fn run<T>(
        &self,
        f: impl FnOnce(&mut stellflow_sansio::Client, Instant) -> Result<T, ConsumerError>,
    ) -> Result<T> {
        Ok(self.client.link.with(|st, now| f(&mut st.client, now))??)
    }

    /// Consumes exactly `partitions` (replaces any subscription). Does not wait: positions
    /// are resolved in the background.
    pub fn assign(&self, partitions: &[TopicPartition]) -> Result<()> {
        let _span = tracing::debug_span!("assign", partitions = ?partitions).entered();
        self.run(|c, now| c.assign(now, partitions))
    }

    /// Joins `config.consumer.group_id` and consumes the topics' partitions. Does not wait.
    pub fn subscribe(&self, topics: &[&str]) -> Result<()> {
        let _span = tracing::debug_span!("subscribe", topics = ?topics).entered();
        self.run(|c, now| c.subscribe(now, topics))
    }

    /// Like [`Consumer::subscribe`](#method.subscribe), with a rebalance listener (Kafka's
    /// `subscribe(topics, listener)`, rdkafka's rebalance callbacks): every rebalance of this
    /// member is kept for [`Consumer::rebalance`](#method.rebalance), and a revocation waits — at
    /// most `config.consumer.revocation_timeout` — until
    /// [`Consumer::revocation_done`](#method.revocation_done) lets it go on. In between, the
    /// partitions are still this member's: commit them
    /// ([`Consumer::commit_positions`](#method.commit_positions)) and flush what the application
    /// keeps for them. Run the listener beside the poll loop (a task or a thread); records of a
    /// partition being revoked stop coming once [`Rebalance::Revoking`] is out. Does not wait.
    pub fn subscribe_with_listener(&self, topics: &[&str]) -> Result<()> {
        self.client.link.with(|st, now| {
            st.listening = true;
            st.client.subscribe_with_listener(now, topics)
        })??;
        Ok(())
    }

    /// Waits up to `timeout` for the next rebalance of a subscription made with
    /// [`Consumer::subscribe_with_listener`](#method.subscribe_with_listener); `None` when none
    /// came in time. [`ConsumerError::Closed`] after [`Consumer::close`](#method.close).
    /// Cancel-safe.
    pub async fn rebalance(&self, timeout: Duration) -> Result<Option<Rebalance>> {
        let deadline = R::now() + timeout;
        let take = future::poll_fn(|cx| {
            let r = self
                .client
                .link
                .with(|st, _| match st.rebalances.pop_front() {
                    Some(r) => Some(Ok(Some(r))),
                    None if st.consumer_closed.done.is_some() => {
                        Some(Err(ConsumerError::Closed.into()))
                    }
                    None => {
                        st.wait(cx);
                        None
                    }
                });
            match r {
                Ok(Some(out)) => Poll::Ready(out),
                Ok(None) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            }
        });
        let expire = async {
            R::sleep_until(deadline).await;
            Ok(None)
        };
        future::or(take, expire).await
    }

    /// Lets the revocation `id` ([`Rebalance::Revoking`]) go on: the positions are committed
    /// (auto-commit on) and the partitions go to their new owner. An unknown or past id is
    /// ignored.
    pub fn revocation_done(&self, id: RevocationId) -> Result<()> {
        self.client
            .link
            .with(|st, now| st.client.revocation_done(now, id))?;
        Ok(())
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.client.link.get(|st| st.client.assignment())
    }

    /// Takes what `grab` finds ready (a lease of records, or blobs), or registers `cx`;
    /// `None` when there is nothing.
    /// `trace` is the context of the poll's caller: the fetches sent from now on carry it.
    fn take<T>(
        &self,
        cx: &Context<'_>,
        trace: &Option<TraceIds>,
        grab: impl FnOnce(&mut State) -> Option<T>,
    ) -> Option<Result<T>> {
        let r = self.client.link.with(|st, _| {
            if cfg!(feature = "opentelemetry") {
                st.client.set_fetch_trace(trace.clone());
            }
            match grab(st) {
                Some(out) => Some(Ok(out)),
                None if st.consumer_closed.done.is_some() => {
                    Some(Err(ConsumerError::Closed.into()))
                }
                // Fenced (every time), the cluster unreachable or a topic unknown (once each):
                // said instead of waiting forever; the core decides which.
                None if let Some(e) = st.client.take_poll_error() => Some(Err(e.into())),
                None => {
                    st.wait(cx);
                    None
                }
            }
        });
        r.unwrap_or_else(|e| Some(Err(e)))
    }

    /// Takes up to `max` records, or registers `cx`; `None` when there are none. The records
    /// are decoded outside the client's lock (the core lends them, `RecordLease`): the lock
    /// is held to lend them and to deliver them, so the driver is not kept from the sockets
    /// meanwhile.
    fn take_records(
        &self,
        cx: &Context<'_>,
        max: usize,
        trace: &Option<TraceIds>,
    ) -> Option<Result<Vec<ConsumerRecord>>> {
        loop {
            let mut lease = match self.take(cx, trace, |st| st.client.lease_records(max))? {
                Ok(lease) => lease,
                Err(e) => return Some(Err(e)),
            };
            lease.decode();
            match self.client.link.with(|st, _| st.client.redeem_lease(lease)) {
                Ok(Some(records)) if !records.is_empty() => return Some(Ok(records)),
                // Stale (another caller took these records), or only finished blobs
                // without records: either way the queue moved on; lease again.
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Waits up to `timeout` for `grab` to find something; an empty vector when nothing came
    /// in time.
    async fn take_within<T>(
        &self,
        timeout: Duration,
        mut grab: impl FnMut(&Context<'_>) -> Option<Result<Vec<T>>>,
    ) -> Result<Vec<T>> {
        let deadline = R::now() + timeout;
        let take = future::poll_fn(|cx| grab(cx).map_or(Poll::Pending, Poll::Ready));
        let expire = async {
            R::sleep_until(deadline).await;
            Ok(Vec::new())
        };
        future::or(take, expire).await
    }

    /// Waits up to `timeout` for records and returns the ones available (at most
    /// [`ConsumerConfig::max_poll_records`](crate::ConsumerConfig::max_poll_records)); an empty
    /// vector when none came in time. [`ConsumerError::Closed`] after
    /// [`Consumer::close`](#method.close).
    ///
    /// Cancel safety: cancel-safe; no record is taken unless the call returns it.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.poll_max(timeout, self.client.link.options.max_poll_records)
            .await
    }

    /// Like [`Consumer::poll`](#method.poll), returning at most `max` records. The records are
    /// decoded (and their batches checked) on the calling task. Cancel-safe.
    pub async fn poll_max(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>> {
        let trace = crate::trace::current();
        let span = tracing::debug_span!("poll", max, records = tracing::field::Empty);
        let take = |cx: &Context<'_>| self.take_records(cx, max.max(1), &trace);
        let got = self
            .take_within(timeout, take)
            .instrument(span.clone())
            .await;
        if let Ok(records) = &got {
            span.record("records", records.len());
        }
        got
    }

    /// Waits up to `timeout` for fetched blobs and returns every one ready, each handed over
    /// whole ([`FetchedBlob`]): iterating a blob decodes its records on the calling task,
    /// outside the client's lock, with no per-record [`ConsumerRecord`]; reading it with
    /// [`FetchedBlob::next_view`] (each record a borrowed [`RecordView`](crate::RecordView),
    /// no allocation or reference count per record) is the fastest way to read small
    /// records. Taking a blob delivers all of it (the position moves past it, and commits,
    /// auto-commit included, count it as `poll` counts the same records); a
    /// blob's corrupt remainder is an `Err` in its iteration instead of a
    /// [`ConsumerEvent::CorruptBlob`](crate::ConsumerEvent::CorruptBlob). An empty vector when none
    /// came in time; [`ConsumerError::Closed`] after [`Consumer::close`](#method.close).
    /// Cancel-safe.
    pub async fn poll_blobs(&self, timeout: Duration) -> Result<Vec<FetchedBlob>> {
        let trace = crate::trace::current();
        let span = tracing::debug_span!("poll_blobs", blobs = tracing::field::Empty);
        let blobs = |st: &mut State| Some(st.take_blobs()).filter(|b| !b.is_empty());
        let take = |cx: &Context<'_>| self.take(cx, &trace, blobs);
        let got = self
            .take_within(timeout, take)
            .instrument(span.clone())
            .await;
        if let Ok(blobs) = &got {
            span.record("blobs", blobs.len());
        }
        got
    }

    /// Waits (without a time limit) for the next record. [`ConsumerError::Closed`] after
    /// [`Consumer::close`](#method.close). Cancel-safe: no record is taken unless the call returns
    /// it.
    pub async fn recv(&self) -> Result<ConsumerRecord> {
        let trace = crate::trace::current();
        future::poll_fn(|cx| match self.take_records(cx, 1, &trace) {
            Some(Ok(mut v)) => Poll::Ready(v.pop().ok_or(Error::Shutdown)),
            Some(Err(e)) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        })
        .instrument(tracing::debug_span!("recv"))
        .await
    }

    /// Commits the positions of every assigned partition (the first record not yet taken,
    /// mid-blob included; with `consumer.commit_marked_only` the positions marked by
    /// [`Consumer::mark_processed`](#method.mark_processed)) and waits for the outcome; retriable
    /// failures are retried by the core within its request timeout. Cancel safety: dropping the
    /// future does not stop the commit; its outcome then shows in
    /// [`Consumer::events`](#method.events).
    pub async fn commit_sync(&self) -> Result<Committed> {
        let span = tracing::debug_span!("commit", kind = "sync");
        let trace = crate::trace::current();
        self.commit(trace, |c, now| c.commit(now))
            .instrument(span)
            .await
    }

    /// Commits explicit positions (e.g. [`ConsumerRecord::next_position`] of the last
    /// processed record) like [`Consumer::commit_sync`](#method.commit_sync).
    pub async fn commit_positions(&self, positions: Committed) -> Result<Committed> {
        let span = tracing::debug_span!("commit", kind = "positions", partitions = positions.len());
        let trace = crate::trace::current();
        self.commit(trace, |c, now| c.commit_positions(now, positions))
            .instrument(span)
            .await
    }

    /// Runs commit command `f` with `trace`, the caller's context (read before the `commit`
    /// span was entered), and waits for its outcome.
    async fn commit(
        &self,
        trace: Option<TraceIds>,
        f: impl FnOnce(
            &mut stellflow_sansio::Client,
            Instant,
        ) -> Result<stellflow_sansio::CommitId, ConsumerError>,
    ) -> Result<Committed> {
        let commit = |st: &mut crate::state::State, now, tx: crate::state::ReplySender<_>| match st
            .client
            .with_trace(trace.as_ref(), |c| f(c, now))
        {
            Ok(id) => drop(st.commits.insert(id, tx)),
            Err(e) => drop(tx.send(Err(e.into()))),
        };
        self.client.link.call(commit).await?
    }

    /// Marks `record`, and every earlier record of its partition, as processed (rdkafka's
    /// `store_offset`). With `config.consumer.commit_marked_only` set (Kafka:
    /// `enable.auto.offset.store=false`), every commit — auto-commit, the commit before a
    /// revocation, the one on close, [`Consumer::commit_sync`](#method.commit_sync) — takes only
    /// marked positions, so a record delivered but not marked is read again after a crash: mark an
    /// input once its outputs are acknowledged and the consumer stays at-least-once with no
    /// bookkeeping of your own. Marks are exact mid-blob and only move forward (mark in delivery
    /// order per partition); a seek or a revocation forgets the partition's mark. Does no I/O.
    ///
    /// Errors: [`ConsumerError::MarkingOff`] without `commit_marked_only` (the mark would be
    /// ignored), [`ConsumerError::NotAssigned`] once the partition was revoked.
    pub fn mark_processed(&self, record: &ConsumerRecord) -> Result<()> {
        self.run(|c, _| c.mark_processed(record))
    }

    /// Like [`Consumer::mark_processed`](#method.mark_processed) with an explicit position:
    /// everything of `tp` before `position` is processed (e.g. [`FetchedBlob::next_position`] after
    /// a blob).
    pub fn mark_position(&self, tp: &TopicPartition, position: Position) -> Result<()> {
        self.run(|c, _| c.mark_position(tp, position))
    }

    /// The position marked processed for `tp` (see
    /// [`Consumer::mark_processed`](#method.mark_processed)), if any.
    pub fn marked(&self, tp: &TopicPartition) -> Option<Position> {
        self.client.link.get(|st| st.client.marked(tp))
    }

    /// Starts a commit of every position without waiting for it and without retries (Kafka's
    /// `commitAsync`); its outcome shows up in [`Consumer::events`](#method.events).
    pub fn commit_async(&self) -> Result<()> {
        let trace = crate::trace::current();
        let _span = tracing::debug_span!("commit", kind = "async").entered();
        let commit =
            |st: &mut State, now| (st.client).with_trace(trace.as_ref(), |c| c.commit_async(now));
        Ok(self.client.link.with(commit)?.map(drop)?)
    }

    /// Moves `tp` (its buffered records are dropped). The core resolves
    /// [`SeekTo::Beginning`], [`SeekTo::End`], [`SeekTo::Committed`] and [`SeekTo::Timestamp`]
    /// (ListOffsets by time on the leader) in the background, like a reset: the call does not wait
    /// for the broker, [`Consumer::position`](#method.position) is `None` until the answer, and
    /// `poll` delivers from the position found.
    pub async fn seek(&self, tp: &TopicPartition, to: SeekTo) -> Result<()> {
        // The caller's context, read before the client's span: the ListOffsets (or
        // OffsetFetch) that resolves the target carries it.
        let trace = crate::trace::current();
        let _span = tracing::debug_span!("seek", topic = %tp.topic, partition = tp.partition,
            to = ?to)
        .entered();
        let seek =
            |st: &mut State, now| (st.client).with_trace(trace.as_ref(), |c| c.seek(now, tp, to));
        Ok(self.client.link.with(seek)??)
    }

    /// For each `(partition, time in ms since the epoch)`, the first blob the broker appended
    /// at or after that time (ListOffsets by time; `no_match` and the log end when there is
    /// none), in request order (Kafka's `offsetsForTimes`).
    pub async fn offsets_for_times(
        &self,
        times: &[(TopicPartition, i64)],
    ) -> Result<Vec<ListedOffset>> {
        let specs: Vec<_> = (times.iter())
            .map(|(tp, ms)| (&tp.topic[..], tp.partition, OffsetSpec::Timestamp(*ms)))
            .collect();
        admin(
            &self.client.link,
            AdminCall::list_offsets(&specs),
            Default::default(),
        )
        .await
    }

    /// The next position `poll` returns from `tp` (`None` while it is being resolved or when
    /// `tp` is not assigned).
    pub fn position(&self, tp: &TopicPartition) -> Option<Position> {
        self.client.link.get(|st| st.client.position(tp))
    }

    /// The last committed position of `tp` this consumer knows.
    pub fn committed(&self, tp: &TopicPartition) -> Option<Position> {
        self.client.link.get(|st| st.client.committed(tp))
    }

    /// High watermark minus position of `tp`, from the latest fetch.
    pub fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.client.link.get(|st| st.client.lag(tp))
    }

    /// Stops fetching and delivering `tp` (buffered records are kept).
    pub fn pause(&self, tp: &TopicPartition) -> Result<()> {
        self.run(|c, _| c.pause(tp))
    }

    /// Resumes a paused partition.
    pub fn resume(&self, tp: &TopicPartition) -> Result<()> {
        self.run(|c, _| c.resume(tp))
    }

    /// Takes the consumer events seen since the last call: rebalances, resolved positions,
    /// fetch errors, group warnings, and the outcomes of commits nobody waits for
    /// (`commit_async`, auto-commit). At most [`Events::CAP`] are kept; the returned value's
    /// [`dropped`](Events::dropped) field counts the older ones dropped.
    pub fn events(&self) -> Events {
        self.client.link.state.lock().take_events()
    }

    /// Stops consuming (committing positions first when auto-commit is on) and waits for it;
    /// `poll` then fails with [`ConsumerError::Closed`] and the stream ends. Cancel safety:
    /// dropping the future does not stop the close.
    pub async fn close(&self) -> Result<()> {
        let close = |st: &mut crate::state::State, now, tx| {
            st.client.close_consumer(now);
            st.consumer_closed.wait(tx);
        };
        self.client.link.call(close).await?
    }
}

impl<R: Runtime> Stream for Consumer<R> {
    type Item = Result<ConsumerRecord>;

    /// The next record; the stream ends once the consumer is closed (or the client stopped).
    /// Cancel-safe: no record is taken unless it is returned.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.take_records(cx, 1, &crate::trace::current()) {
            Some(Ok(mut v)) => Poll::Ready(v.pop().map(Ok)),
            Some(Err(Error::Shutdown | Error::Consumer(ConsumerError::Closed))) => {
                Poll::Ready(None)
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => Poll::Pending,
        }
    }
}
