//! The table of batch sends on their way ([`Batches`]): the runs of ids each feeding queued,
//! and each batch's outcomes collected as its records are answered.

use super::outcome::{BatchOutcome, NO_OUTCOME, PackedOutcome, Source};
use crate::state::{IdMap, ReplySender};
use crate::{Error, RecordMetadata};
use std::sync::Arc;
use stellflow_sansio::{DeliveryError, ProduceId, TraceIds};

/// What `State::feed` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// Every record of the batch is in the core (or failed at once).
    Done,
    /// The limit of records per call was reached: call again (after releasing the lock).
    More,
    /// The batch waits for the lane in front of it.
    Wait,
    /// The batch waits for buffer space (`State::wait_for_room`).
    WaitForRoom,
}

/// A core batch's outcome as [`Batches::complete_batch`] takes it (`ProducedBatch`'s parts).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment<'a> {
    pub topic: &'a Arc<str>,
    pub partition: i32,
    /// The blob's offset, or why none of its records was delivered.
    pub result: std::result::Result<Option<i64>, &'a DeliveryError>,
}

impl Segment<'_> {
    /// The source its records' outcomes are read from (the one clone of the topic's `Arc`).
    fn source(&self) -> Source {
        match self.result {
            Ok(offset) => Source::Written {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
            },
            Err(e) => Source::Failed(Error::from(e.clone())),
        }
    }
}

/// One batch's outcomes while its records are on their way.
pub(super) struct Collecting {
    /// The outcomes so far, in call order; a record still on its way has none yet.
    pub(super) outcome: BatchOutcome,
    /// Records whose outcome is not in yet.
    waiting: usize,
    /// Every record was fed: the batch is answered once `waiting` reaches 0.
    sealed: bool,
    /// `None` once the caller went away: outcomes are then discarded.
    reply: Option<ReplySender<BatchOutcome>>,
    /// The trace context of the call that sent the batch: every record of it goes to the
    /// core with it.
    trace: Option<TraceIds>,
}

impl Collecting {
    /// Whether the batch is complete (sealed, nothing on its way).
    fn complete(&self) -> bool {
        self.sealed && self.waiting == 0
    }

    /// Adds a source for records about to be written; its number and whether it fails them.
    /// An abandoned batch keeps nothing.
    fn add(&mut self, source: impl FnOnce() -> Source) -> (u32, bool) {
        let n = match self.reply {
            Some(_) => self.outcome.add(source()),
            None => NO_OUTCOME,
        };
        (n, self.outcome.fails(n))
    }

    /// Records `at..at + n` of the batch have their outcome ([`BatchOutcome::write`]).
    fn write(&mut self, at: usize, n: usize, first: PackedOutcome, failed: bool) {
        self.waiting = self.waiting.saturating_sub(n);
        self.outcome.write(at, n, first, failed);
    }
}

/// Records of one batch fed to the core in one go: ids `first_id..first_id + len` are the
/// batch's outcomes `first_index..first_index + len`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
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
pub(super) struct Runs {
    pub(super) runs: std::collections::VecDeque<Run>,
    /// The position of the run the last lookup found (the next one is mostly there).
    hint: usize,
    /// Records of all runs still waiting.
    waiting: usize,
}

impl Runs {
    /// Notes `len` records of batch `key`: ids `id..id + len` at places `index..index + len`.
    fn push(&mut self, key: u64, id: u64, index: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.waiting += len;
        if let Some(r) = self.runs.back_mut()
            && r.key == key
            && r.first_id + r.len as u64 == id
            && r.first_index + r.len == index
        {
            r.len += len;
            r.left += len;
            return;
        }
        self.runs.push_back(Run {
            first_id: id,
            first_index: index,
            len,
            left: len,
            key,
        });
    }

    /// The batch and place of record `id`, which leaves the table; `None` when no run holds it.
    fn take(&mut self, id: u64) -> Option<(u64, usize)> {
        let at = self.find(id)?;
        self.take_at(at, id)
    }

    /// The position of the run that holds `id` (the last one found first).
    fn find(&self, id: u64) -> Option<usize> {
        match self.runs.get(self.hint) {
            Some(r) if r.holds(id) => Some(self.hint),
            _ => {
                let at = self
                    .runs
                    .partition_point(|r| r.first_id <= id)
                    .checked_sub(1)?;
                self.runs.get(at)?.holds(id).then_some(at)
            }
        }
    }

    /// Takes record `id` out of the run at `at` (which holds it): its batch and place.
    fn take_at(&mut self, at: usize, id: u64) -> Option<(u64, usize)> {
        let (key, index, _) = self.first_of(at, id)?;
        self.take_n(at, 1);
        Some((key, index))
    }

    /// Record `id` of the run at `at` (which holds it): its batch, its place, and how many of
    /// the ids right after it the run holds and still waits for (at most that many can be
    /// taken with it). `None` when the run waits for nothing more (an id has one outcome).
    fn first_of(&self, at: usize, id: u64) -> Option<(u64, usize, usize)> {
        let r = self.runs.get(at)?;
        if r.left == 0 {
            return None;
        }
        let offset = (id - r.first_id) as usize;
        let after = (r.len - offset - 1).min(r.left - 1);
        Some((r.key, r.first_index + offset, after))
    }

    /// The run holding record `id` and [`Runs::first_of`] it, when a run waits for it.
    fn locate(&self, id: u64) -> Option<(usize, (u64, usize, usize))> {
        let at = self.find(id)?;
        Some((at, self.first_of(at, id)?))
    }

    /// Takes `n` records (found with [`Runs::first_of`]) out of the run at `at`; runs at the
    /// front that wait for nothing more leave.
    fn take_n(&mut self, at: usize, n: usize) {
        let Some(r) = self.runs.get_mut(at) else {
            return;
        };
        r.left -= n;
        self.waiting -= n;
        self.hint = at;
        while self.runs.front().is_some_and(|r| r.left == 0) {
            self.runs.pop_front();
            self.hint = self.hint.saturating_sub(1);
        }
    }
}

/// The records one feeding of batch `key` queued or refused, noted as it goes: consecutive
/// ids as one run, places added in one go ([`Noting::done`]) before anything else touches
/// the batch.
pub(crate) struct Noting {
    key: u64,
    /// The index of the next record in the batch.
    index: usize,
    /// The run being noted: its first id and index, and its length.
    run: (u64, usize, usize),
    /// Records queued since places were last added.
    queued: usize,
}

impl Noting {
    /// The record with id `id` is queued (inlined into the feeding loop: a record that
    /// extends the run costs three additions).
    #[inline]
    pub fn queued(&mut self, batches: &mut Batches, id: u64) {
        let (first, _, len) = self.run;
        if len == 0 || id != first + len as u64 {
            self.start_run(batches, id);
        }
        self.run.2 += 1;
        self.index += 1;
        self.queued += 1;
    }

    /// Notes the run so far and starts one at `id`; once per run, so out of line.
    #[inline(never)]
    fn start_run(&mut self, batches: &mut Batches, id: u64) {
        self.flush_run(batches);
        self.run = (id, self.index, 0);
    }

    /// The next record was refused at once with `error`.
    pub fn refused(&mut self, batches: &mut Batches, error: Error) {
        self.done(batches);
        batches.push_refused(self.key, error, 1);
        self.index += 1;
    }

    /// Adds the places of the records queued so far.
    pub fn done(&mut self, batches: &mut Batches) {
        self.flush_run(batches);
        batches.push_waiting(self.key, std::mem::take(&mut self.queued));
    }

    fn flush_run(&mut self, batches: &mut Batches) {
        let (id, index, len) = std::mem::take(&mut self.run);
        batches.note_waiting(self.key, id, index, len);
    }
}

/// The batches on their way, by key.
#[derive(Default)]
pub(crate) struct Batches {
    pub(super) open: IdMap<u64, Collecting>,
    next: u64,
    pub(super) runs: Runs,
}

impl Batches {
    /// Opens a batch sent by a call whose trace context is `trace`; its outcomes go to
    /// `reply`.
    pub fn open(&mut self, reply: ReplySender<BatchOutcome>, trace: Option<TraceIds>) -> u64 {
        let key = self.next;
        self.next += 1;
        let batch = Collecting {
            outcome: BatchOutcome::default(),
            waiting: 0,
            sealed: false,
            reply: Some(reply),
            trace,
        };
        self.open.insert(key, batch);
        key
    }

    /// The trace context batch `key` was sent with.
    pub fn trace(&self, key: u64) -> Option<&TraceIds> {
        self.open.get(&key).and_then(|b| b.trace.as_ref())
    }

    /// Starts noting the records fed to batch `key` from its next index.
    pub fn noting(&self, key: u64) -> Noting {
        Noting {
            key,
            index: self.fed(key),
            run: (0, 0, 0),
            queued: 0,
        }
    }

    /// How many records batch `key` holds so far (the index of its next one).
    pub fn fed(&self, key: u64) -> usize {
        self.open.get(&key).map_or(0, |b| b.outcome.len())
    }

    /// Records `id..id + len`, the next `len` of batch `key` (the first one's index is
    /// [`Batches::fed`] plus the records noted since), are on their way.
    /// [`Batches::push_waiting`] then adds their places.
    pub fn note_waiting(&mut self, key: u64, id: u64, index: usize, len: usize) {
        self.runs.push(key, id, index, len);
    }

    /// Adds `n` records that are on their way (noted with [`Batches::note_waiting`]).
    pub fn push_waiting(&mut self, key: u64, n: usize) {
        if n == 0 {
            return;
        }
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        b.outcome.push_pending(n);
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

    /// Adds `n` records whose outcome is known already: they were refused at once with
    /// `error` (one entry for all of them).
    pub fn push_refused(&mut self, key: u64, error: Error, n: usize) {
        if let Some(b) = self.open.get_mut(&key) {
            b.outcome.push_failed(error, n);
        }
    }

    /// Record `index` of batch `key` has its outcome (one record reported on its own).
    pub fn complete(
        &mut self,
        key: u64,
        index: usize,
        result: std::result::Result<RecordMetadata, DeliveryError>,
    ) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        let (index_in_blob, timestamp, source) = match result {
            Ok(m) => (m.index, m.timestamp, Source::written(m)),
            Err(e) => (0, 0, Source::Failed(Error::from(e))),
        };
        let (source, failed) = b.add(|| source);
        let slot = PackedOutcome {
            source,
            index: index_in_blob,
            timestamp,
        };
        b.write(index, 1, slot, failed);
        if b.complete() {
            answer(&mut self.open, key);
        }
    }

    /// A core batch reports its records' outcomes (`records`: each one's id and timestamp, in
    /// blob order): each run of them that one call fed becomes one source of that call's
    /// outcome, and each stretch of a run's records with one timestamp is written from it at
    /// once; the other records (single sends) go to `single` with their index in the blob.
    pub fn complete_batch(
        &mut self,
        segment: Segment<'_>,
        records: impl Iterator<Item = (ProduceId, i64)>,
        mut single: impl FnMut(ProduceId, usize),
    ) {
        let Batches { open, runs, .. } = self;
        let mut records = records.enumerate().peekable();
        while let Some((i, (id, timestamp))) = records.next() {
            let Some((mut run, (key, mut at, mut after))) = runs.locate(id.0) else {
                single(id, i);
                continue;
            };
            let Some(b) = open.get_mut(&key) else {
                // An abandoned batch that left: its record only leaves the table.
                runs.take_n(run, 1);
                continue;
            };
            let (source, failed) = b.add(|| segment.source());
            let (mut id, mut i, mut timestamp) = (id.0, i, timestamp);
            loop {
                // The records right after it with the next ids and its timestamp are the
                // run's next places: one stretch, taken and written together.
                let mut taken = 1;
                while taken <= after
                    && records
                        .next_if(|&(_, (next, t))| next.0 == id + taken as u64 && t == timestamp)
                        .is_some()
                {
                    taken += 1;
                }
                let first = PackedOutcome {
                    source,
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    timestamp,
                };
                b.write(at, taken, first, failed);
                runs.take_n(run, taken);
                // A later record of the same call (another of its runs, past a gap, or with
                // another timestamp) shares the source.
                let Some(&(j, (next, t))) = records.peek() else {
                    break;
                };
                match runs.locate(next.0) {
                    Some((r, (k, place, more))) if k == key => {
                        records.next();
                        (run, id, i, timestamp, at, after) = (r, next.0, j, t, place, more);
                    }
                    _ => break,
                }
            }
            if b.complete() {
                answer(open, key);
            }
        }
    }

    /// Every record of batch `key` was fed.
    pub fn seal(&mut self, key: u64) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        b.sealed = true;
        if b.waiting == 0 {
            answer(&mut self.open, key);
        }
    }

    /// The caller of batch `key` went away: its outcomes are discarded as they come.
    pub fn abandon(&mut self, key: u64) {
        let Some(b) = self.open.get_mut(&key) else {
            return;
        };
        b.reply = None;
        b.sealed = true;
        b.outcome = BatchOutcome::default();
        if b.waiting == 0 {
            self.open.remove(&key);
        }
    }

    /// The client stops: every sealed batch is answered with what is known (records still on
    /// their way fail with [`Error::Shutdown`]); the others are dropped (their callers'
    /// next step fails with `Shutdown`).
    pub fn shut_down(&mut self) {
        self.runs = Runs::default();
        for (_, mut b) in self.open.drain() {
            if let (true, Some(reply)) = (b.sealed, b.reply) {
                // Records without an outcome read `Shutdown`.
                b.outcome.failed += b.waiting;
                b.outcome.finish();
                let _ = reply.send(b.outcome);
            }
        }
    }
}

/// Answers batch `key` (complete) and drops it from `open`.
fn answer(open: &mut IdMap<u64, Collecting>, key: u64) {
    if let Some(mut b) = open.remove(&key)
        && let Some(reply) = b.reply
    {
        b.outcome.finish();
        let _ = reply.send(b.outcome);
    }
}
