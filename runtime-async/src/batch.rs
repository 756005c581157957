//! Batch sends: the outcome of `Producer::enqueue_all` ([`BatchDelivery`]) and the table that
//! collects a batch's per-record outcomes while its records are on their way.
//!
//! A batch costs a constant number of allocations whatever its length: one vector of
//! outcomes (sized from the iterator's hint, so one allocation when the hint is exact), one
//! one-shot channel, and its entry in the table. Its records take no slot of their own:
//! records fed to the core in one go get consecutive produce ids and consecutive places in
//! the outcome vector, so one [`Run`] (first id, first index, length) stands for all of them,
//! and an outcome finds its place by arithmetic. The core reports a whole batch of the
//! partition at once (`Event::ProducedBatch`), whose ids mostly fall in one run after the
//! other, so finding the run is one comparison per record.

use crate::state::{IdMap, Reply};
use crate::{Error, RecordMetadata, Result};
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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

/// Records of one batch fed to the core in one go: ids `first_id..first_id + len` are the
/// batch's outcomes `first_index..first_index + len`.
#[derive(Debug, Clone, Copy)]
struct Run {
    first_id: u64,
    first_index: usize,
    len: usize,
    /// Records of the run whose outcome is not in yet.
    left: usize,
    key: u64,
}

impl Run {
    fn holds(&self, id: u64) -> bool {
        id >= self.first_id && id - self.first_id < self.len as u64
    }
}

/// The runs of every batch on its way, in id order (ids rise, so runs are pushed in order).
/// A run leaves once it and every run before it is complete: a record that takes long (a
/// leaderless partition) keeps the runs after it, at most one per fed chunk of records,
/// until its delivery timeout.
#[derive(Default)]
struct Runs {
    runs: std::collections::VecDeque<Run>,
    /// The position of the run the last lookup found (the next one is mostly there).
    hint: usize,
    /// Records of all runs still waiting.
    waiting: usize,
}

impl Runs {
    fn push(&mut self, key: u64, id: u64, index: usize) {
        self.waiting += 1;
        if let Some(r) = self.runs.back_mut()
            && r.key == key
            && r.first_id + r.len as u64 == id
            && r.first_index + r.len == index
        {
            r.len += 1;
            r.left += 1;
            return;
        }
        self.runs.push_back(Run {
            first_id: id,
            first_index: index,
            len: 1,
            left: 1,
            key,
        });
    }

    /// The batch and place of record `id`, which leaves the table; `None` when no run holds it.
    fn take(&mut self, id: u64) -> Option<(u64, usize)> {
        let at = match self.runs.get(self.hint) {
            Some(r) if r.holds(id) => self.hint,
            _ => {
                let at = self
                    .runs
                    .partition_point(|r| r.first_id <= id)
                    .checked_sub(1)?;
                if !self.runs.get(at)?.holds(id) {
                    return None;
                }
                at
            }
        };
        let r = self.runs.get_mut(at)?;
        if r.left == 0 {
            return None; // taken before: an id has one outcome
        }
        r.left -= 1;
        self.waiting -= 1;
        let found = (r.key, r.first_index + (id - r.first_id) as usize);
        self.hint = at;
        while self.runs.front().is_some_and(|r| r.left == 0) {
            self.runs.pop_front();
            self.hint = self.hint.saturating_sub(1);
        }
        Some(found)
    }
}

/// The batches on their way, by key.
#[derive(Default)]
pub(crate) struct Batches {
    open: IdMap<u64, Collecting>,
    next: u64,
    runs: Runs,
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

    /// How many records batch `key` holds so far (the index of its next one).
    pub fn fed(&self, key: u64) -> usize {
        self.open.get(&key).map_or(0, |b| b.results.len())
    }

    /// Record `id`, the next of batch `key` (its index is [`Batches::fed`] plus the records
    /// noted since), is on its way. [`Batches::push_waiting`] then adds their places.
    pub fn note_waiting(&mut self, key: u64, id: u64, index: usize) {
        self.runs.push(key, id, index);
    }

    /// Adds `n` records that are on their way (noted with [`Batches::note_waiting`]).
    pub fn push_waiting(&mut self, key: u64, n: usize) {
        if n == 0 {
            return;
        }
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        // Placeholders, each replaced by its outcome.
        let len = b.results.len() + n;
        b.results.resize_with(len, || Err(Error::Shutdown));
        b.waiting += n;
    }

    /// The batch and place of record `id` when a batch fed it (it leaves the table).
    pub fn take_record(&mut self, id: u64) -> Option<(u64, usize)> {
        self.runs.take(id)
    }

    /// Records of every batch still on their way.
    pub fn waiting(&self) -> usize {
        self.runs.waiting
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
        self.runs = Runs::default();
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
        b.note_waiting(key, 10, 0);
        b.push_waiting(key, 1);
        b.push_done(key, Err(Error::BufferFull(std::time::Duration::ZERO)));
        assert_eq!(b.fed(key), 2);
        b.note_waiting(key, 11, 2);
        b.push_waiting(key, 1);
        let (k, third) = b.take_record(11).unwrap();
        assert_eq!((k, third), (key, 2));
        b.complete(key, third, Ok(meta(1)));
        let (_, first) = b.take_record(10).unwrap();
        assert_eq!(first, 0);
        b.complete(key, first, Ok(meta(0)));
        assert_eq!(b.take_record(10), None, "one outcome per id");
        assert!(rx.try_recv().unwrap().is_none(), "not sealed yet");
        b.seal(key);
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap().index, 0);
        assert!(matches!(got[1], Err(Error::BufferFull(_))));
        assert_eq!(got[2].as_ref().unwrap().index, 1);
        assert!(b.open.is_empty());
        assert_eq!(b.waiting(), 0);
        assert!(b.runs.runs.is_empty(), "complete runs leave");
    }

    /// Consecutive ids of one batch share a run; a gap in ids (another caller's record) or in
    /// indexes (a refused record) or another batch starts a new one. Every id finds its
    /// batch and place, in any order, and only ids of a batch are found.
    #[test]
    fn runs_map_ids_to_places_in_any_order() {
        let mut b = Batches::default();
        let (tx1, _rx1) = oneshot::channel();
        let (tx2, _rx2) = oneshot::channel();
        let k1 = b.open(0, tx1);
        let k2 = b.open(0, tx2);
        let mut expect = Vec::new();
        for id in 1..=5 {
            b.note_waiting(k1, id, (id - 1) as usize);
            expect.push((id, k1, (id - 1) as usize));
        }
        // id 6 is a single send; 7..=8 go to batch 2; 9..=10 to batch 1 after a refused record.
        for id in 7..=8 {
            b.note_waiting(k2, id, (id - 7) as usize);
            expect.push((id, k2, (id - 7) as usize));
        }
        for id in 9..=10 {
            b.note_waiting(k1, id, id as usize - 3);
            expect.push((id, k1, id as usize - 3));
        }
        assert_eq!(b.runs.runs.len(), 3);
        assert_eq!(b.waiting(), 9);
        assert_eq!(b.take_record(6), None);
        assert_eq!(b.take_record(11), None);
        assert_eq!(b.take_record(0), None);
        // Completion order: interleaved partitions, backwards.
        expect.sort_by_key(|&(id, _, _)| (id % 3, std::cmp::Reverse(id)));
        for (id, key, index) in expect {
            assert_eq!(b.take_record(id), Some((key, index)), "id {id}");
        }
        assert_eq!(b.waiting(), 0);
        assert!(b.runs.runs.is_empty());
    }

    /// An abandoned batch drops out of the table once its last record is in.
    #[test]
    fn an_abandoned_batch_leaves_when_its_records_are_in() {
        let mut b = Batches::default();
        let (tx, rx) = oneshot::channel();
        let key = b.open(1, tx);
        b.note_waiting(key, 3, 0);
        b.push_waiting(key, 1);
        b.abandon(key);
        drop(rx);
        assert_eq!(b.open.len(), 1);
        let (k, i) = b.take_record(3).unwrap();
        b.complete(k, i, Ok(meta(0)));
        assert!(b.open.is_empty());
    }
}
