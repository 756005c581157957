//! The runtime-neutral plumbing between the core and the handles, shared by every adapter:
//! the core behind one lock, answers routed to the callers that wait for them, the lane of
//! records waiting for buffer space (with the flushes and closes that must stay behind them),
//! the bounded event log, and the start and end of a client.
//!
//! A handle runs its command under the lock on its own task or thread — a record is copied into
//! its batch, and consumed records are decoded, by the caller — then drains the core's outputs
//! ([`State::settle`]) and wakes the driver only when it has work: bytes to write or a connection
//! to close ([`SocketWork`], queued here for the driver, which alone owns the sockets), a connect
//! to open, a deadline earlier than the one it sleeps on. Callers wait through [`Waker`]s:
//! futures directly, the blocking adapter by parking its thread.

mod answers;
mod events;
mod id_map;
mod lane;
mod link;
#[cfg(test)]
mod tests;

pub use events::{Events, Rebalance};
pub(crate) use id_map::IdMap;
pub(crate) use lane::LaneRecord;
pub(crate) use link::{Link, StateLock};

use crate::batch::Batches;
use crate::seq_map::SeqMap;
use crate::{Error, Options};
use bytes::{Bytes, BytesMut};
use futures_channel::oneshot;
use lane::Parked;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Instant;
use stellflow_sansio::{
    AdminError, AdminOutcome, Client, CloseMode, CommitId, ConnId, ConnectRequest, ConsumerEvent,
    FetchedBlob, FlushId, Output, Position, RecordMetadata, RequestId, TopicPartition,
};

/// The sending side of a one-shot answer (the one one-shot channel of the adapters).
pub(crate) type ReplySender<T> = oneshot::Sender<T>;
/// Hands an admin command's answer to its caller, typed (see `admin::run`).
pub(crate) type AdminReply = Box<dyn FnOnce(Result<AdminOutcome, AdminError>) + Send>;
/// A command parked behind records in the producer's lane.
type Job = Box<dyn FnOnce(&mut State, Instant) + Send>;
/// Positions, as commits take and report them.
pub type Committed = Vec<(TopicPartition, Position)>;

/// What the core asked of one socket ([`Output::Transmit`], [`Output::TransmitBytes`],
/// [`Output::Close`]): the driver does it, in the order the core asked.
pub(crate) enum SocketWork {
    /// Write these bytes to the connection, after what it was given before.
    Write(ConnId, Bytes),
    /// Close the connection (a reset for [`CloseMode::Abort`]).
    Close(ConnId, CloseMode),
}

/// A close that callers wait for: done, the records it failed, and the waiting callers.
#[derive(Default)]
pub(crate) struct Closing {
    pub done: Option<u64>,
    pub waiters: Vec<ReplySender<Result<(), Error>>>,
}

impl Closing {
    /// Answers now when done, or later.
    pub fn wait(&mut self, tx: ReplySender<Result<(), Error>>) {
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
    pub deliveries: SeqMap<ReplySender<Result<RecordMetadata, Error>>>,
    /// The outcomes of `enqueue_all` calls, collected until each batch is complete.
    pub batches: Batches,
    pub flushes: IdMap<FlushId, ReplySender<()>>,
    pub commits: IdMap<CommitId, ReplySender<Result<Committed, Error>>>,
    pub producer_closed: Closing,
    pub consumer_closed: Closing,
    /// [`crate::Client::close`] callers, answered when the driver ends.
    pub ended: Vec<ReplySender<()>>,
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
    /// What the core asked of the sockets, in order, for the driver to do.
    pub socket_work: VecDeque<SocketWork>,
    /// The buffer the core appends a connection's bytes to ([`Output::Transmit`]).
    out: BytesMut,
    /// Connects the driver must start.
    pub connects: Vec<ConnectRequest>,
    /// Something changed that the driver must see (connects, socket work).
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
                    (self.socket_work).push_back(SocketWork::Close(close.conn, close.mode));
                }
                Output::Transmit(id) => {
                    self.replan = true;
                    let bytes = self.out.split().freeze();
                    self.socket_work.push_back(SocketWork::Write(id, bytes));
                }
                Output::TransmitBytes(id, bytes) => {
                    self.replan = true;
                    self.socket_work.push_back(SocketWork::Write(id, bytes));
                }
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
        self.socket_work.clear();
        self.room_waiters.drain(..).for_each(Waker::wake);
        self.wake_waiters();
    }
}
