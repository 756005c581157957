//! Batch sends: the outcome of `Producer::enqueue_all` ([`BatchDelivery`]) and the table that
//! collects a batch's per-record outcomes while its records are on their way.
//!
//! A batch costs a constant number of allocations whatever its length: one vector of
//! outcomes (sized from the iterator's hint, so one allocation when the hint is exact), one
//! one-shot channel, and its entry in the table. Each record takes a slot in the adapters'
//! delivery table ([`Waiter::Batch`]: the batch's key and the record's index) instead of a
//! channel of its own.

use crate::state::{IdMap, Reply};
use crate::{Error, RecordMetadata, Result};
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Who waits for a produced record's outcome.
pub(crate) enum Waiter {
    /// A single `enqueue`: its own channel.
    One(Reply<Result<RecordMetadata>>),
    /// Record `index` of batch `key`.
    Batch { key: u64, index: usize },
}

/// What `State::feed` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// Every record of the batch is in the core (or failed at once).
    Done,
    /// The limit of records per call was reached: call again (after releasing the lock).
    More,
    /// The batch waits (for the lane in front of it, or for buffer space).
    Wait,
}

/// One batch's outcomes while its records are on their way.
struct Collecting {
    /// An outcome per record, in call order; a record still on its way holds a placeholder.
    results: Vec<Result<RecordMetadata>>,
    /// Records whose outcome is not in yet.
    waiting: usize,
    /// Every record was fed: the batch is answered once `waiting` reaches 0.
    sealed: bool,
    /// `None` once the caller went away: outcomes are then discarded.
    reply: Option<Reply<Vec<Result<RecordMetadata>>>>,
}

/// The batches on their way, by key.
#[derive(Default)]
pub(crate) struct Batches {
    open: IdMap<u64, Collecting>,
    next: u64,
}

impl Batches {
    /// Opens a batch of about `hint` records; its outcomes go to `reply`.
    pub fn open(&mut self, hint: usize, reply: Reply<Vec<Result<RecordMetadata>>>) -> u64 {
        let key = self.next;
        self.next += 1;
        let batch = Collecting {
            results: Vec::with_capacity(hint),
            waiting: 0,
            sealed: false,
            reply: Some(reply),
        };
        self.open.insert(key, batch);
        key
    }

    /// Adds a record that is on its way; returns its index.
    pub fn push_waiting(&mut self, key: u64) -> usize {
        let Some(b) = self.open.get_mut(&key) else {
            return usize::MAX;
        };
        b.results.push(Err(Error::Shutdown)); // replaced by its outcome
        b.waiting += 1;
        b.results.len() - 1
    }

    /// Adds a record whose outcome is known already (it was refused at once).
    pub fn push_done(&mut self, key: u64, result: Result<RecordMetadata>) {
        if let Some(b) = self.open.get_mut(&key) {
            b.results.push(result);
        }
    }

    /// Record `index` of batch `key` has its outcome.
    pub fn complete(&mut self, key: u64, index: usize, result: Result<RecordMetadata>) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        if let Some(slot) = b.results.get_mut(index) {
            *slot = result;
        }
        b.waiting -= 1;
        if b.sealed && b.waiting == 0 {
            self.answer(key);
        }
    }

    /// Every record of batch `key` was fed.
    pub fn seal(&mut self, key: u64) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        b.sealed = true;
        if b.waiting == 0 {
            self.answer(key);
        }
    }

    /// The caller of batch `key` went away: its outcomes are discarded as they come.
    pub fn abandon(&mut self, key: u64) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        b.reply = None;
        b.sealed = true;
        b.results = Vec::new();
        if b.waiting == 0 {
            self.open.remove(&key);
        }
    }

    /// The client stops: every sealed batch is answered with what is known (records still on
    /// their way fail with [`Error::Shutdown`]); the others are dropped (their callers'
    /// next step fails with `Shutdown`).
    pub fn shut_down(&mut self) {
        for (_, b) in self.open.drain() {
            if let (true, Some(reply)) = (b.sealed, b.reply) {
                let _ = reply.send(b.results);
            }
        }
    }

    fn answer(&mut self, key: u64) {
        if let Some(b) = self.open.remove(&key)
            && let Some(reply) = b.reply
        {
            let _ = reply.send(b.results);
        }
    }
}

/// The outcome of one `Producer::enqueue_all`: `.await` it (async) or [`BatchDelivery::wait`]
/// (blocking) for every record's outcome, in the order the records were given — the
/// record's [`RecordMetadata`] (partition, offset and index) or the error that stopped it.
/// It completes once every record has its outcome. Dropping it does not cancel the send; the
/// outcomes are then discarded.
#[derive(Debug)]
#[must_use = "dropping a BatchDelivery discards the records' outcomes (they are still sent)"]
pub struct BatchDelivery {
    pub(crate) rx: oneshot::Receiver<Vec<Result<RecordMetadata>>>,
    pub(crate) len: usize,
}

impl BatchDelivery {
    /// How many records the batch holds (the length of its outcome).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no record (its outcome is then ready at once).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks the calling thread until every record's outcome is known (for blocking code;
    /// in async code `.await` the delivery instead).
    pub fn wait(self) -> Vec<Result<RecordMetadata>> {
        futures_lite::future::block_on(self)
    }

    /// The outcomes if they are all known already (without waiting); `None` while some
    /// record is on its way. After it returned them once, every record reads
    /// [`Error::Shutdown`].
    pub fn try_wait(&mut self) -> Option<Vec<Result<RecordMetadata>>> {
        match self.rx.try_recv() {
            Ok(r) => r,
            Err(_) => Some(self.lost()),
        }
    }

    /// The outcome when the client stopped before answering.
    fn lost(&self) -> Vec<Result<RecordMetadata>> {
        (0..self.len).map(|_| Err(Error::Shutdown)).collect()
    }
}

impl Future for BatchDelivery {
    type Output = Vec<Result<RecordMetadata>>;

    /// Cancel safety: dropping the delivery only discards the outcomes.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(results)) => Poll::Ready(results),
            Poll::Ready(Err(_)) => Poll::Ready(self.lost()),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Batches;
    use crate::Error;
    use futures_channel::oneshot;

    fn meta(index: u32) -> crate::RecordMetadata {
        crate::RecordMetadata {
            topic: "t".into(),
            partition: 0,
            offset: Some(7),
            index,
            timestamp: 0,
        }
    }

    /// Outcomes land at their record's index whatever order they come in, and the batch is
    /// answered only once it is sealed and nothing is on its way.
    #[test]
    fn answers_in_call_order_once_sealed_and_complete() {
        let mut b = Batches::default();
        let (tx, mut rx) = oneshot::channel();
        let key = b.open(3, tx);
        let first = b.push_waiting(key);
        b.push_done(key, Err(Error::BufferFull(std::time::Duration::ZERO)));
        let third = b.push_waiting(key);
        b.complete(key, third, Ok(meta(1)));
        b.complete(key, first, Ok(meta(0)));
        assert!(rx.try_recv().unwrap().is_none(), "not sealed yet");
        b.seal(key);
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap().index, 0);
        assert!(matches!(got[1], Err(Error::BufferFull(_))));
        assert_eq!(got[2].as_ref().unwrap().index, 1);
        assert!(b.open.is_empty());
    }

    /// An abandoned batch drops out of the table once its last record is in.
    #[test]
    fn an_abandoned_batch_leaves_when_its_records_are_in() {
        let mut b = Batches::default();
        let (tx, rx) = oneshot::channel();
        let key = b.open(1, tx);
        let i = b.push_waiting(key);
        b.abandon(key);
        drop(rx);
        assert_eq!(b.open.len(), 1);
        b.complete(key, i, Ok(meta(0)));
        assert!(b.open.is_empty());
    }
}
