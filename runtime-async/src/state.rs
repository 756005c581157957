//! The runtime-neutral plumbing between the core and the handles, shared by every adapter:
//! the core behind one lock, answers routed to the callers that wait for them, the lane of
//! records waiting for buffer space (with the flushes and closes that must stay behind them),
//! the bounded event log, and the start and end of a client.
//!
//! A handle runs its command under the lock on its own task or thread — a record is copied into
//! its batch, and consumed records are decoded, by the caller — then drains the core's outputs
//! ([`State::settle`]) and wakes the driver only when it must re-plan (a connect to open, bytes
//! the socket did not take, a deadline earlier than the one it sleeps on). Callers wait through
//! [`Waker`]s: futures directly, the blocking adapter by parking its thread.

use crate::batch::{Batches, Fed, Segment};
use crate::seq_map::SeqMap;
use crate::{Error, Options, Record, Runtime};
use bytes::{Bytes, BytesMut};
use futures_channel::oneshot;
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};
use stellflow_sansio::DriverExt;
use stellflow_sansio::{
    AdminError, AdminOutcome, Client, ClientConfig, CloseMode, CommitId, ConnId, ConnectRequest,
    ConsumerEvent, DeliveryError, DisconnectReason, Event, FetchedBlob, FlushId, Output, Position,
    ProduceError, ProduceId, ProducedBatch, RecordMetadata, RequestId, RevocationId,
    TopicPartition, TraceIds,
};

/// The sending side of a one-shot answer (the one one-shot channel of the adapters).
pub(crate) type Reply<T> = oneshot::Sender<T>;
/// Hands an admin command's answer to its caller, typed (see `admin::run`).
pub(crate) type AdminReply = Box<dyn FnOnce(Result<AdminOutcome, AdminError>) + Send>;
/// A command parked behind records in the producer's lane.
type Job = Box<dyn FnOnce(&mut State, Instant) + Send>;
/// Positions, as commits take and report them.
pub type Committed = Vec<(TopicPartition, Position)>;

/// Records that may wait in the lane for buffer space (beyond it, `enqueue` waits).
const LANE: usize = 1024;

/// A map keyed by the core's sequential ids, with one multiplication as the hash (SipHash
/// would cost more than the rest of a record's bookkeeping). Not for keys an attacker chooses.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes
            .iter()
            .for_each(|b| self.write_u64(self.0.rotate_left(8) ^ u64::from(*b)));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// What `Consumer::events` returns: the consumer events since the last call, oldest first,
/// and how many older ones were dropped because nobody asked (at most [`Events::CAP`] are
/// kept; an overflow is reported here, never silent).
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Events {
    /// The kept events, oldest first.
    pub events: Vec<ConsumerEvent>,
    /// Events dropped (the oldest first) since the last call because [`Events::CAP`] were kept.
    pub dropped: u64,
}

impl Events {
    /// How many events are kept between two calls.
    pub const CAP: usize = 1024;
}

impl IntoIterator for Events {
    type Item = ConsumerEvent;
    type IntoIter = std::vec::IntoIter<ConsumerEvent>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.into_iter()
    }
}

/// A rebalance as a subscription made with `Consumer::subscribe_with_listener` sees it, in
/// order (see `Consumer::rebalance`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rebalance {
    /// These partitions are about to go to another member. They are still this member's:
    /// commit them and flush the application's own state for them, then answer with
    /// `Consumer::revocation_done(id)`. Unanswered, the handover goes on after
    /// `consumer.revocation_timeout`.
    Revoking {
        /// Answer it with `Consumer::revocation_done`.
        id: RevocationId,
        /// The partitions being given up.
        partitions: Vec<TopicPartition>,
    },
    /// Given up: committed (auto-commit on) and released.
    Revoked(Vec<TopicPartition>),
    /// Given to this member.
    Assigned(Vec<TopicPartition>),
    /// Lost without a commit: this member's membership lapsed (a pause, a lost coordinator);
    /// another member may own them already. What the application keeps for them is stale.
    Lost(Vec<TopicPartition>),
}

/// What waits in the producer's lane while the core's buffer is full: records, the commands
/// that must stay behind them (flush, close), and the place of a batch whose records wait on
/// its caller's task (`Producer::enqueue_all`: they enter the core when it reaches the front).
enum Parked {
    Record(Pending),
    Job(Job),
    Batch(u64),
}

/// A record on its way into the core.
pub(crate) struct Pending {
    pub record: Record,
    /// The trace context of the call that sent it (its span's, `opentelemetry` feature).
    pub trace: Option<TraceIds>,
    pub deadline: Instant,
    pub reply: Reply<Result<RecordMetadata, Error>>,
}

/// A socket's writing side as the shared state sees it (the runtime's type erased).
pub(crate) trait Transmit: Send + Sync {
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize>;
    fn hand_over(&self, buf: &mut BytesMut) -> Option<std::io::Result<()>>;
    fn hand_over_shared(&self, bytes: &mut Bytes) -> Option<std::io::Result<()>>;
    fn set_abort_on_close(&self) -> std::io::Result<()>;
}

pub(crate) struct Conn {
    pub sock: Arc<dyn Transmit>,
    /// Bytes the socket did not take yet, in order (only under backpressure).
    pub pending: VecDeque<Bytes>,
}

/// A close that callers wait for: done, the records it failed, and the waiting callers.
#[derive(Default)]
pub(crate) struct Closing {
    pub done: Option<u64>,
    pub waiters: Vec<Reply<Result<(), Error>>>,
}

impl Closing {
    /// Answers now when done, or later.
    pub fn wait(&mut self, tx: Reply<Result<(), Error>>) {
        match self.done {
            Some(failed) => drop(tx.send(outcome(failed))),
            None => self.waiters.push(tx),
        }
    }

    fn finish(&mut self, failed: u64) {
        self.done = Some(failed);
        self.waiters
            .drain(..)
            .for_each(|tx| drop(tx.send(outcome(failed))));
    }
}

fn outcome(failed: u64) -> Result<(), Error> {
    match failed {
        0 => Ok(()),
        n => Err(Error::Undelivered(n)),
    }
}

/// Everything behind the lock.
pub(crate) struct State {
    pub client: Client,
    pub options: Arc<Options>,
    pub admin: IdMap<RequestId, AdminReply>,
    /// Single sends' callers by produce id: ids rise and mostly complete in order (see
    /// [`SeqMap`]). A batch's records are in `batches`.
    pub deliveries: SeqMap<Reply<Result<RecordMetadata, Error>>>,
    /// The outcomes of `enqueue_all` calls, collected until each batch is complete.
    pub batches: Batches,
    pub flushes: IdMap<FlushId, Reply<()>>,
    pub commits: IdMap<CommitId, Reply<Result<Committed, Error>>>,
    pub producer_closed: Closing,
    pub consumer_closed: Closing,
    /// [`crate::Client::close`] callers, answered when the driver ends.
    pub ended: Vec<Reply<()>>,
    /// [`crate::Client::close`] was called: close gracefully and end the driver.
    pub stop: bool,
    events: VecDeque<ConsumerEvent>,
    dropped_events: u64,
    /// A subscription with a listener: rebalances are kept for `Consumer::rebalance`.
    pub listening: bool,
    /// Rebalances not taken yet by `Consumer::rebalance`.
    pub rebalances: VecDeque<Rebalance>,
    /// The last failed connection attempt, cleared by the next successful one.
    pub connect_error: Option<String>,
    /// The lane: records that found the buffer full and what must stay behind them.
    parked: VecDeque<Parked>,
    parked_records: usize,
    /// Tasks waiting for records, lane room or shutdown; woken after every driver pass.
    waiters: Vec<Waker>,
    /// The batch send at the lane's front, waiting for buffer space: woken after a driver
    /// pass only once the producer holds at most `room_mark` bytes (or at shutdown), so a
    /// producer that runs ahead of its broker is woken per eighth of `buffer_memory` freed,
    /// not per answer or per pass.
    room_waiters: Vec<Waker>,
    room_mark: usize,
    pub conns: BTreeMap<ConnId, Conn>,
    out: BytesMut,
    /// Connects the driver must start.
    pub connects: Vec<ConnectRequest>,
    /// Something changed that the driver must see (connects, closes, unwritten bytes).
    pub replan: bool,
    /// The deadline the driver sleeps on.
    pub sleeping_until: Option<Instant>,
    /// The core's deadline: the `Timeout` the last drain ended with (before the first
    /// drain, the instant the client was made, so that the driver's first pass fires its
    /// timers).
    pub core_deadline: Option<Instant>,
    /// The driver has stopped: every command fails with [`Error::Shutdown`].
    pub closed: bool,
}

impl State {
    /// Hands a record to the core, or parks it in the lane behind the others; gives it back
    /// when the lane is full.
    pub fn enqueue(&mut self, now: Instant, p: Pending) -> Option<Pending> {
        if self.parked.is_empty() {
            match self.produce(now, &p) {
                Ok(id) => drop(self.deliveries.insert(id.0, p.reply)),
                Err(ProduceError::BufferFull { .. }) => return self.park(p),
                Err(e) => drop(p.reply.send(Err(e.into()))),
            }
            return None;
        }
        self.park(p)
    }

    /// Hands one record to the core, with the trace context of the call that sent it.
    fn produce(
        &mut self,
        now: Instant,
        p: &Pending,
    ) -> Result<stellflow_sansio::ProduceId, ProduceError> {
        let client = &mut self.client;
        match &p.trace {
            None => p.record.with_borrowed(|rec| client.produce(now, rec)),
            Some(t) => {
                client.set_trace(Some(t.clone()));
                let r = p.record.with_borrowed(|rec| client.produce(now, rec));
                client.set_trace(None);
                r
            }
        }
    }

    /// Runs `f` with the core's trace context set to `trace` (the calling span's), cleared
    /// after.
    pub fn traced<T>(&mut self, trace: Option<TraceIds>, f: impl FnOnce(&mut State) -> T) -> T {
        if trace.is_none() {
            return f(self);
        }
        self.client.set_trace(trace);
        let r = f(self);
        self.client.set_trace(None);
        r
    }

    fn park(&mut self, p: Pending) -> Option<Pending> {
        if self.parked_records >= LANE {
            return Some(p);
        }
        self.parked_records += 1;
        self.parked.push_back(Parked::Record(p));
        self.replan = true; // the driver wakes at its deadline
        None
    }

    /// Runs `job` now, or behind the records waiting in the lane.
    pub fn in_lane(
        &mut self,
        now: Instant,
        job: impl FnOnce(&mut State, Instant) + Send + 'static,
    ) {
        match self.parked.is_empty() {
            true => job(self, now),
            false => self.parked.push_back(Parked::Job(Box::new(job))),
        }
    }

    /// Offers the lane to the core again, in order; fails the records whose time is up. Stops
    /// at a batch's place: its caller feeds it (woken after the driver's pass).
    pub fn retry_parked(&mut self, now: Instant) {
        while let Some(front) = self.parked.pop_front() {
            let p = match front {
                Parked::Job(job) => {
                    job(self, now);
                    continue;
                }
                Parked::Batch(key) => {
                    self.parked.push_front(Parked::Batch(key));
                    return;
                }
                Parked::Record(p) => p,
            };
            let outcome = match self.produce(now, &p) {
                Err(ProduceError::BufferFull { .. }) if now < p.deadline => {
                    self.parked.push_front(Parked::Record(p));
                    return;
                }
                Err(ProduceError::BufferFull { .. }) => {
                    Err(Error::BufferFull(self.options.max_block))
                }
                Err(e) => Err(e.into()),
                Ok(id) => Ok(id),
            };
            self.parked_records -= 1;
            match outcome {
                Ok(id) => drop(self.deliveries.insert(id.0, p.reply)),
                Err(e) => drop(p.reply.send(Err(e))),
            }
        }
    }

    /// Feeds up to `limit` records of batch `key` to the core, in order: `held` first (a
    /// record that found the buffer full before), then `records`; counts the records it took
    /// (queued or refused) in `fed`. A batch waits behind the
    /// lane: when the lane holds something else first, it takes a place at the lane's back
    /// and waits; when the core's buffer is full, it keeps the record in `held`, takes the
    /// lane's front and waits (`Fed::WaitForRoom`: wake the caller once there is room).
    pub fn feed<I>(
        &mut self,
        now: Instant,
        key: u64,
        held: &mut Option<I::Item>,
        records: &mut I,
        limit: usize,
        fed: &mut usize,
    ) -> Fed
    where
        I: Iterator,
        I::Item: Borrow<Record>,
    {
        if !self.parked.is_empty() {
            self.retry_parked(now);
        }
        let at_front = match self.parked.front() {
            None => true,
            Some(Parked::Batch(k)) => *k == key,
            Some(_) => false,
        };
        if !at_front {
            if !self
                .parked
                .iter()
                .any(|p| matches!(p, Parked::Batch(k) if *k == key))
            {
                self.parked.push_back(Parked::Batch(key));
            }
            return Fed::Wait;
        }
        let mut noting = self.batches.noting(key);
        let mut step = Fed::More;
        for _ in 0..limit {
            let Some(record) = held.take().or_else(|| records.next()) else {
                step = Fed::Done;
                break;
            };
            *fed += 1;
            let result = record
                .borrow()
                .with_borrowed(|rec| self.client.produce(now, rec));
            match result {
                Ok(id) => noting.queued(&mut self.batches, id.0),
                Err(ProduceError::BufferFull { needed, limit, .. }) => {
                    *held = Some(record);
                    *fed -= 1;
                    if self.parked.is_empty() {
                        self.parked.push_back(Parked::Batch(key));
                        self.replan = true; // the driver re-plans and wakes us after its pass
                    }
                    self.room_mark = limit.saturating_sub(needed.max(limit / 8));
                    step = Fed::WaitForRoom;
                    break;
                }
                Err(e) => noting.refused(&mut self.batches, e.into()),
            }
        }
        noting.done(&mut self.batches);
        if step == Fed::Done {
            self.leave_lane(now, key);
            self.batches.seal(key);
        }
        step
    }

    /// Ends batch `key`'s wait for buffer space at `max_block` (the call's bound): `held` and
    /// the rest of `records` fail with [`Error::BufferFull`], and the lane moves on. Returns
    /// how many records failed so.
    pub fn expire_batch<I>(
        &mut self,
        now: Instant,
        key: u64,
        max_block: Duration,
        held: Option<I::Item>,
        records: I,
    ) -> usize
    where
        I: Iterator,
    {
        let failed = held.into_iter().chain(records).count();
        self.batches
            .push_refused(key, Error::BufferFull(max_block), failed);
        self.leave_lane(now, key);
        self.batches.seal(key);
        failed
    }

    /// A batch's caller went away before feeding every record: the records fed are still
    /// sent (their outcomes discarded), the others are not, and the lane moves on.
    pub fn abandon_batch(&mut self, now: Instant, key: u64) {
        self.leave_lane(now, key);
        self.batches.abandon(key);
    }

    /// Takes batch `key`'s place out of the lane and lets the lane behind it move on.
    fn leave_lane(&mut self, now: Instant, key: u64) {
        let before = self.parked.len();
        self.parked
            .retain(|p| !matches!(p, Parked::Batch(k) if *k == key));
        if self.parked.len() != before {
            self.retry_parked(now);
        }
    }

    /// Whether nothing waits in the lane.
    pub fn lane_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// Takes every blob the core has ready, each handed over whole.
    pub fn take_blobs(&mut self) -> Vec<FetchedBlob> {
        std::iter::from_fn(|| self.client.poll_blob()).collect()
    }

    /// Takes the kept consumer events and the count of dropped ones.
    pub fn take_events(&mut self) -> Events {
        let dropped = std::mem::take(&mut self.dropped_events);
        Events {
            events: self.events.drain(..).collect(),
            dropped,
        }
    }

    /// Wakes `cx` after the driver's next pass.
    pub fn wait(&mut self, cx: &Context<'_>) {
        if !self.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            self.waiters.push(cx.waker().clone());
        }
    }

    /// Registers the batch send at the lane's front to be woken once there is buffer space
    /// (see `room_waiters`).
    pub fn wait_for_room(&mut self, cx: &Context<'_>) {
        if !self.room_waiters.iter().any(|w| w.will_wake(cx.waker())) {
            self.room_waiters.push(cx.waker().clone());
        }
    }

    /// Wakes every waiting caller (after a driver pass), and the one waiting for buffer
    /// space once there is enough of it.
    pub fn wake_waiters(&mut self) {
        self.waiters.drain(..).for_each(Waker::wake);
        if !self.room_waiters.is_empty()
            && (self.stop || self.client.producer_buffered_bytes() <= self.room_mark)
        {
            self.room_waiters.drain(..).for_each(Waker::wake);
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Admin { id, result } => {
                if let Some(deliver) = self.admin.remove(&id) {
                    deliver(result);
                }
            }
            Event::Produced { id, result } => self.complete_record(id, result),
            Event::ProducedBatch(batch) => self.on_batch(&batch),
            Event::Flushed { id } => {
                if let Some(tx) = self.flushes.remove(&id) {
                    let _ = tx.send(());
                }
            }
            Event::ProducerClosed { failed } => self.producer_closed.finish(failed),
            Event::Connected { .. } => self.connect_error = None,
            Event::Disconnected {
                address,
                reason: DisconnectReason::ConnectFailed(e),
                ..
            } => self.connect_error = Some(format!("cannot connect to {address}: {e}")),
            Event::ConnectionError {
                address,
                error:
                    error @ (stellflow_sansio::ConnectionError::NotStellflow { .. }
                    | stellflow_sansio::ConnectionError::Negotiation(_)),
                ..
            } => self.connect_error = Some(format!("{address}: {error}")),
            Event::Consumer(ConsumerEvent::CommitCompleted { id, result, kind }) => {
                match self.commits.remove(&id) {
                    Some(tx) => drop(tx.send(result.map_err(Error::from))),
                    None => self.log(ConsumerEvent::CommitCompleted { id, result, kind }),
                }
            }
            Event::Consumer(ConsumerEvent::Closed) => {
                self.consumer_closed.finish(0);
                self.log(ConsumerEvent::Closed);
            }
            Event::Consumer(e) => {
                if self.listening {
                    let r = match &e {
                        ConsumerEvent::PartitionsRevoking { id, partitions } => {
                            Some(Rebalance::Revoking {
                                id: *id,
                                partitions: partitions.clone(),
                            })
                        }
                        ConsumerEvent::PartitionsRevoked(p) => Some(Rebalance::Revoked(p.clone())),
                        ConsumerEvent::PartitionsAssigned(p) => {
                            Some(Rebalance::Assigned(p.clone()))
                        }
                        ConsumerEvent::PartitionsLost(p) => Some(Rebalance::Lost(p.clone())),
                        _ => None,
                    };
                    self.rebalances.extend(r);
                }
                self.log(e)
            }
            _ => {}
        }
    }

    /// Hands every record of a batch the core reports at once its outcome: mostly records
    /// of `enqueue_all` batches (found by their run; the core batch becomes one entry of
    /// each call's outcome, no [`RecordMetadata`] is built), else single sends.
    fn on_batch(&mut self, batch: &ProducedBatch) {
        let segment = Segment {
            topic: batch.topic(),
            partition: batch.partition(),
            result: batch.result(),
        };
        let deliveries = &mut self.deliveries;
        let single = |id: ProduceId, i: usize| {
            if let Some(tx) = deliveries.remove(id.0)
                && let Some((_, result)) = batch.outcome(i)
            {
                drop(tx.send(result.map_err(Error::from)));
            }
        };
        self.batches
            .complete_batch(segment, batch.ids_with_timestamps(), single);
    }

    /// Hands one record its outcome: its place in an `enqueue_all` batch (found by its run),
    /// else its single send's slot.
    fn complete_record(&mut self, id: ProduceId, result: Result<RecordMetadata, DeliveryError>) {
        match self.batches.take_record(id.0) {
            Some((key, index)) => self.batches.complete(key, index, result),
            None => {
                if let Some(tx) = self.deliveries.remove(id.0) {
                    drop(tx.send(result.map_err(Error::from)));
                }
            }
        }
    }

    /// Keeps a consumer event for `Consumer::events`, dropping (and counting) the oldest one
    /// when [`Events::CAP`] are kept.
    fn log(&mut self, e: ConsumerEvent) {
        if self.events.len() == Events::CAP {
            self.events.pop_front();
            self.dropped_events += 1;
            if self.dropped_events == 1 {
                tracing::debug!("consumer events dropped: nobody reads Consumer::events");
            }
        }
        self.events.push_back(e);
    }

    /// The drain (the contract is on [`Client`]): every output of the core until its
    /// `Timeout`, kept as the core's deadline.
    pub fn drain(&mut self, now: Instant) {
        self.core_deadline = loop {
            self.out.clear();
            match self.client.poll_output(now, &mut self.out) {
                Output::Connect(req) => {
                    self.replan = true;
                    self.connects.push(req);
                }
                Output::Close(close) => {
                    self.replan = true;
                    if let Some(conn) = self.conns.remove(&close.conn)
                        && close.mode == CloseMode::Abort
                        && let Err(e) = conn.sock.set_abort_on_close()
                    {
                        tracing::warn!(conn = close.conn.0, "cannot reset the connection: {e}");
                    }
                }
                Output::Transmit(id) => self.transmit(id, now),
                Output::TransmitBytes(id, bytes) => self.transmit_shared(id, bytes, now),
                Output::Event(e) => self.on_event(e),
                Output::Timeout(t) => break t,
            }
        };
    }

    /// Drains after a handle's command; whether the driver must wake to re-plan.
    fn settle(&mut self, now: Instant) -> bool {
        self.drain(now);
        let deadline = self.deadline();
        let earlier = deadline.is_some_and(|t| self.sleeping_until.is_none_or(|s| t < s));
        let wake = std::mem::take(&mut self.replan) || earlier;
        if wake {
            // The driver re-plans when it wakes; until then, later commands need not wake it.
            self.sleeping_until = deadline.or(self.sleeping_until);
        }
        wake
    }

    /// When the driver must wake even if nothing happens.
    pub fn deadline(&mut self) -> Option<Instant> {
        // The first record's deadline before any batch's place: records behind a batch wait for
        // it (its caller keeps its own deadline), so theirs would only wake the driver for
        // nothing until it leaves.
        let parked = self
            .parked
            .iter()
            .take_while(|p| !matches!(p, Parked::Batch(_)))
            .find_map(|p| match p {
                Parked::Record(p) => Some(p.deadline),
                Parked::Job(_) | Parked::Batch(_) => None,
            });
        [self.core_deadline, parked].into_iter().flatten().min()
    }

    /// Writes the bytes the core appended for `id`, straight from the reused buffer.
    fn transmit(&mut self, id: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.pending.is_empty() {
            c.pending.push_back(self.out.split().freeze());
            return;
        }
        match write_some(&*c.sock, &mut self.out) {
            Ok(()) if self.out.is_empty() => {}
            Ok(()) => {
                c.pending.push_back(self.out.split().freeze());
                self.replan = true;
            }
            Err(e) => self.lost(id, now, DisconnectReason::io(&e)),
        }
    }

    /// Writes shared bytes the core handed over ([`Output::TransmitBytes`]) to `id`, after
    /// what is pending for it; what the socket does not take now waits, uncopied.
    fn transmit_shared(&mut self, id: ConnId, mut bytes: Bytes, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.pending.is_empty() {
            c.pending.push_back(bytes);
            return;
        }
        match write_shared(&*c.sock, &mut bytes) {
            Ok(()) if bytes.is_empty() => {}
            Ok(()) => {
                c.pending.push_back(bytes);
                self.replan = true;
            }
            Err(e) => self.lost(id, now, DisconnectReason::io(&e)),
        }
    }

    /// Writes bytes a socket did not take earlier.
    pub fn write_pending(&mut self, id: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        while let Some(front) = c.pending.front_mut() {
            if let Err(e) = write_shared(&*c.sock, front) {
                self.lost(id, now, DisconnectReason::io(&e));
                return;
            }
            if !front.is_empty() {
                return;
            }
            c.pending.pop_front();
        }
    }

    /// A connection failed or closed.
    pub fn lost(&mut self, id: ConnId, now: Instant, reason: DisconnectReason) {
        if self.conns.remove(&id).is_some() {
            self.replan = true;
            self.client.handle_disconnected(id, now, reason);
        }
    }

    /// Gracefully closes what is open; true once both producer and consumer are closed.
    pub fn closing(&mut self, now: Instant) -> bool {
        if self.producer_closed.done.is_none() {
            self.client.close_producer(now, self.options.close_timeout);
        }
        if self.consumer_closed.done.is_none() {
            self.client.close_consumer(now);
        }
        self.producer_closed.done.is_some() && self.consumer_closed.done.is_some()
    }

    /// Ends the client: answers [`crate::Client::close`], fails everything else still
    /// waiting with [`Error::Shutdown`] (dropping the reply senders), and reports records
    /// that were still on their way (the runtime dropped the driver before it could end).
    pub fn shut_down(&mut self) {
        if self.closed {
            return;
        }
        let lost = self.deliveries.len() + self.batches.waiting() + self.parked_records;
        if lost > 0 {
            tracing::error!(
                records = lost,
                "stellflow: the client stopped with {lost} records not delivered (its runtime \
                 shut down, or close_timeout passed); call close().await before leaving the runtime"
            );
        }
        self.closed = true;
        self.ended.drain(..).for_each(|tx| {
            let _ = tx.send(());
        });
        self.admin.clear();
        self.deliveries.clear();
        self.batches.shut_down();
        self.flushes.clear();
        self.commits.clear();
        self.producer_closed.waiters.clear();
        self.consumer_closed.waiters.clear();
        self.parked.clear();
        self.conns.clear();
        self.room_waiters.drain(..).for_each(Waker::wake);
        self.wake_waiters();
    }
}

/// Writes as much of `buf` as the socket takes now.
fn write_some(sock: &dyn Transmit, buf: &mut BytesMut) -> std::io::Result<()> {
    match sock.hand_over(buf) {
        Some(r) => r,
        None => write_with(sock, buf),
    }
}

/// [`write_some`] for shared bytes.
fn write_shared(sock: &dyn Transmit, bytes: &mut Bytes) -> std::io::Result<()> {
    match sock.hand_over_shared(bytes) {
        Some(r) => r,
        None => write_with(sock, bytes),
    }
}

/// Writes `buf` with `try_write` until it is empty or the socket is full.
fn write_with(sock: &dyn Transmit, buf: &mut impl bytes::Buf) -> std::io::Result<()> {
    while buf.has_remaining() {
        match sock.try_write(buf.chunk()) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The lock every handle and the driver share.
pub(crate) struct Shared(Mutex<State>);

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if nobody holds it now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// The handles' side of a driver: cheap to clone; the driver ends when the last clone is gone
/// (or at [`crate::Client::close`]).
#[derive(Clone)]
pub(crate) struct Link {
    pub shared: Arc<Shared>,
    /// Wakes the driver (capacity one: one pending wake-up is enough).
    pub wake: async_channel::Sender<()>,
    pub options: Arc<Options>,
    /// The runtime's clock ([`Runtime::now`]).
    pub now: fn() -> Instant,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closed", &self.shared.lock().closed)
            .finish()
    }
}

impl Link {
    /// Creates the core and the state a driver and its handles share; the caller starts the
    /// driver with the returned receiver.
    pub fn new<R: Runtime>(
        config: ClientConfig,
        options: Options,
    ) -> Result<(Link, async_channel::Receiver<()>), Error> {
        let now = R::now();
        let seed = options.seed.unwrap_or_else(R::seed);
        let mut options = options;
        options.max_block = config.producer.max_block;
        options.max_poll_records = config.consumer.max_poll_records;
        let mut client = Client::new(config, now, seed)?;
        // Outcomes a batch at a time: `on_batch` finds a batch's callers run by run.
        client.set_batch_outcomes(true);
        let wall_ms = i64::try_from(R::since_epoch().as_millis()).unwrap_or(i64::MAX);
        client.set_wall_clock(now, wall_ms);
        let options = Arc::new(options);
        let (wake, wake_rx) = async_channel::bounded(1);
        let state = State {
            client,
            options: options.clone(),
            admin: IdMap::default(),
            deliveries: SeqMap::default(),
            batches: Batches::default(),
            flushes: IdMap::default(),
            commits: IdMap::default(),
            producer_closed: Closing::default(),
            consumer_closed: Closing::default(),
            ended: Vec::new(),
            stop: false,
            events: VecDeque::new(),
            dropped_events: 0,
            listening: false,
            rebalances: VecDeque::new(),
            connect_error: None,
            parked: VecDeque::new(),
            parked_records: 0,
            waiters: Vec::new(),
            room_waiters: Vec::new(),
            room_mark: 0,
            conns: BTreeMap::new(),
            out: BytesMut::new(),
            connects: Vec::new(),
            replan: false,
            sleeping_until: None,
            core_deadline: Some(now),
            closed: false,
        };
        let shared = Arc::new(Shared(Mutex::new(state)));
        Ok((
            Link {
                shared,
                wake,
                options,
                now: R::now,
            },
            wake_rx,
        ))
    }

    /// Runs `f` under the lock, drains, and wakes the driver when it must re-plan.
    pub fn with<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> Result<T, Error> {
        let mut st = self.shared.lock();
        if st.closed {
            return Err(Error::Shutdown);
        }
        let now = (self.now)();
        let r = f(&mut st, now);
        let wake = st.settle(now);
        drop(st);
        if wake {
            let _ = self.wake.try_send(());
        }
        Ok(r)
    }

    /// Reads the state under the lock (no command, nothing to drain); works after shutdown.
    pub fn get<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.shared.lock())
    }

    /// Runs `f` and waits for the answer it sends (now or later). Dropping the future does
    /// not undo the command; its answer is then discarded.
    pub async fn call<T>(&self, f: impl FnOnce(&mut State, Instant, Reply<T>)) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        self.with(|st, now| f(st, now, tx))?;
        rx.await.map_err(|_| Error::Shutdown)
    }

    /// Like [`Link::call`], behind every record sent before it.
    pub async fn call_in_lane<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, Reply<T>) + Send + 'static,
    ) -> Result<T, Error> {
        self.call(|st, now, tx| st.in_lane(now, move |st, now| f(st, now, tx)))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::WakeCount;

    /// A batch send that finds the buffer full waits for room, and the driver's passes wake it
    /// only once an eighth of `buffer_memory` (or the record's size, if larger) is free again:
    /// not while the buffer stays full, and at once when it empties (here: the records
    /// expire, as nothing answers) or at shutdown.
    #[test]
    fn a_batch_waiting_for_room_is_woken_once_there_is_room() {
        let mut config = ClientConfig::new("127.0.0.1:9").unwrap();
        config.producer.buffer_memory = 16 * 1024;
        config.producer.batch_size = 4 * 1024;
        config.producer.delivery_timeout = Duration::from_secs(1);
        let (link, _wake) = Link::new::<crate::fake::Fake>(config, Options::default()).unwrap();
        let mut st = link.shared.lock();
        let now = Instant::now();
        let (reply, _rx) = oneshot::channel();
        let key = st.batches.open(reply);
        let mut records = (0..64).map(|i| Record::new("room", vec![i as u8; 1000]));
        let (mut held, mut fed) = (None, 0);
        let step = st.feed(now, key, &mut held, &mut records, 512, &mut fed);
        assert_eq!(step, Fed::WaitForRoom);
        assert!(held.is_some() && fed < 64, "the buffer held {fed} of 64");
        let count = Arc::new(WakeCount::default());
        let waker = Waker::from(count.clone());
        st.wait_for_room(&Context::from_waker(&waker));
        st.wait_for_room(&Context::from_waker(&waker));
        assert_eq!(st.room_waiters.len(), 1, "one registration per waker");
        // Driver passes while the buffer stays full: no wake-up.
        for _ in 0..3 {
            st.drain(now);
            st.wake_waiters();
        }
        assert_eq!(count.get(), 0, "woken without room");
        // The records expire (nothing answers): the buffer empties, and the next pass wakes.
        let later = now + Duration::from_secs(120);
        st.client.handle_timeout(later);
        st.drain(later);
        assert!(st.client.producer_buffered_bytes() <= st.room_mark);
        st.wake_waiters();
        assert_eq!(count.get(), 1, "not woken with room");
        // Shutdown wakes a waiter whatever the buffer holds.
        st.wait_for_room(&Context::from_waker(&waker));
        st.room_mark = 0;
        st.shut_down();
        assert_eq!(count.get(), 2, "not woken at shutdown");
    }

    /// Two clients made at once get different seeds (and so different default client ids).
    #[test]
    fn seeds_come_from_the_os_and_differ() {
        let seeds: std::collections::HashSet<u64> =
            (0..64).map(|_| crate::runtime::os_seed()).collect();
        assert_eq!(seeds.len(), 64);
    }
}
