//! Batch sends: the outcome of `Producer::enqueue_all` ([`BatchDelivery`], answering a
//! [`BatchOutcome`]) and the table that collects a batch's per-record outcomes while its
//! records are on their way.
//!
//! A batch costs a constant number of allocations whatever its length: a small table of
//! sources (one per core batch that delivered records of the call, and one per run of records
//! refused at once), a few spans, one one-shot channel, and its entry in the table. Its
//! records take no slot of their own in the table: records fed to the core in one go get
//! consecutive produce ids and consecutive places in the outcome, so one [`Run`] (first id,
//! first index, length) stands for all of them, and an outcome finds its place by
//! arithmetic. The core reports a whole batch of the partition at once
//! (`Event::ProducedBatch`), whose ids mostly fall in one run after the other, so finding the
//! run is one comparison per record, and the batch becomes one source. A stretch of its
//! records with consecutive ids and one timestamp is written as one [`Span`] (place, length,
//! source, first index in the blob, timestamp) however long; only stretches shorter than
//! [`SPAN_MIN`] (keyed records spread over partitions) are written record by record, into a
//! vector of 16-byte slots made when the first one comes. The [`RecordMetadata`] of a record
//! is built only when the caller asks for it.

use crate::state::{IdMap, Reply};
use crate::{Error, RecordMetadata, Result};
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use stellflow_sansio::{DeliveryError, ProduceId};

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

/// The source number of a slot without an outcome: it reads [`Error::Shutdown`].
const NO_OUTCOME: u32 = u32::MAX;

/// What a record without an outcome reads (the client stopped first).
static SHUT_DOWN: Source = Source::Failed(Error::Shutdown);

/// Where the outcomes of some records of a call came from: a core batch that wrote them (or
/// failed them all with one error), or a refusal of records at once.
#[derive(Debug, Clone)]
enum Source {
    /// Written: the blob's topic, partition and offset (`None` with `acks = 0`).
    Written {
        topic: Arc<str>,
        partition: i32,
        offset: Option<i64>,
    },
    /// Every record of this source failed with this error.
    Failed(Error),
}

impl Source {
    /// Whether both wrote to the same topic (the same `Arc`), partition and offset.
    fn same_place(&self, other: &Source) -> bool {
        match (self, other) {
            (
                Source::Written {
                    topic,
                    partition,
                    offset,
                },
                Source::Written {
                    topic: t,
                    partition: p,
                    offset: o,
                },
            ) => Arc::ptr_eq(topic, t) && (partition, offset) == (p, o),
            _ => false,
        }
    }

    /// The source of a record reported on its own.
    fn written(m: RecordMetadata) -> Source {
        Source::Written {
            topic: m.topic,
            partition: m.partition,
            offset: m.offset,
        }
    }
}

/// One record's outcome, compactly: its source, its index in its blob and its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// An index into [`BatchOutcome::sources`], or [`NO_OUTCOME`].
    source: u32,
    /// The record's index within its blob (when written).
    index: u32,
    /// The record's timestamp as written.
    timestamp: i64,
}

impl Slot {
    /// The slot of a record still on its way.
    const PENDING: Slot = Slot {
        source: NO_OUTCOME,
        index: 0,
        timestamp: 0,
    };
}

/// Records `at..at + len` of a call that share one outcome but for their index in the blob:
/// record `at + k` reads `first` with index `first.index + k`. A stretch of records of one core
/// batch (consecutive in the call and in the blob, one timestamp) is one span, however long.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// The first record's place in the call.
    at: usize,
    /// How many records it holds.
    len: usize,
    /// The first record's outcome.
    first: Slot,
}

impl Span {
    /// The place after its last record.
    fn end(&self) -> usize {
        self.at + self.len
    }

    /// Whether it holds the record at place `i`.
    fn holds(&self, i: usize) -> bool {
        i >= self.at && i < self.end()
    }

    /// The outcome of the record at place `i` (which it holds).
    fn slot(&self, i: usize) -> Slot {
        let k = u32::try_from(i - self.at).unwrap_or(u32::MAX);
        Slot {
            index: self.first.index.saturating_add(k),
            ..self.first
        }
    }
}

/// Stretches shorter than this are written record by record (a span costs two slots).
const SPAN_MIN: usize = 4;

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

/// The outcome of every record of one `Producer::enqueue_all` (or `send_all`), in the order
/// the records were given: what [`BatchDelivery`] completes with. Each record's outcome is its
/// [`RecordMetadata`] (partition, offset and index) or the error that stopped it, built when
/// asked for ([`BatchOutcome::get`], [`BatchOutcome::iter`]). The outcome itself keeps one
/// entry per core batch that delivered some of the records and one span per stretch of records
/// written together (a stretch of one core batch, however long, is one span), so a batch
/// send to one partition keeps a few dozen bytes whatever its length; records written
/// apart (keyed records spread over partitions) take 16 bytes each. The summaries
/// ([`BatchOutcome::failed`], [`BatchOutcome::first_error`], [`BatchOutcome::errors`]) cost no
/// allocation. [`BatchOutcome::into_vec`] gives the outcomes as a vector.
///
/// ```no_run
/// # use stellflow_async::{Producer, Record, Runtime};
/// # async fn f<R: Runtime>(producer: Producer<R>, records: Vec<Record>) -> stellflow_async::Result<()> {
/// let outcome = producer.send_all(&records).await?;
/// if let Some((i, e)) = outcome.first_error() {
///     eprintln!("{} of {} records failed; record {i}: {e}", outcome.failed(), outcome.len());
/// }
/// for (i, result) in outcome.iter().enumerate() {
///     if let Ok(written) = result {
///         println!("record {i} at {}#{}", written.partition, written.index);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct BatchOutcome {
    /// What the spans and slots point at: a core batch's result, or a refusal.
    sources: Vec<Source>,
    /// Stretches of records written together, in place order once the outcome is answered.
    spans: Vec<Span>,
    /// The records written one by one: one slot per record of the call (empty until the
    /// first such record). A record in no span and no slot has no outcome (`Shutdown`).
    slots: Vec<Slot>,
    /// How many records the call was given.
    len: usize,
    /// Records whose outcome is an error (refused, not delivered, or without an outcome).
    failed: usize,
}

impl BatchOutcome {
    /// `len` records that all read [`Error::Shutdown`] (the client stopped before answering).
    fn shut_down(len: usize) -> BatchOutcome {
        BatchOutcome {
            len,
            failed: len,
            ..BatchOutcome::default()
        }
    }

    /// How many records the outcome holds (as many as the call was given).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the call was given no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record `i`'s outcome (its position in the call): where it was written, or why not;
    /// `None` past the end.
    pub fn get(&self, i: usize) -> Option<Result<RecordMetadata>> {
        (i < self.len).then(|| read(&self.sources, self.places().slot(i, &mut 0)))
    }

    /// Every record's outcome, in call order, each built as it is reached.
    pub fn iter(&self) -> BatchOutcomeIter<'_> {
        BatchOutcomeIter {
            sources: &self.sources,
            places: self.places(),
            cursor: Cursor::new(self.len, self.spans.len()),
        }
    }

    /// How many records were delivered (their outcome is `Ok`).
    pub fn delivered(&self) -> usize {
        self.len.saturating_sub(self.failed)
    }

    /// How many records failed (refused at once, not delivered, or without an outcome because
    /// the client stopped).
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// Whether every record was delivered.
    pub fn all_delivered(&self) -> bool {
        self.failed == 0
    }

    /// The first record (in call order) that failed: its position and its error.
    pub fn first_error(&self) -> Option<(usize, &Error)> {
        self.errors().next()
    }

    /// Every record that failed, in call order: its position and its error (records that
    /// failed together share one error).
    pub fn errors(&self) -> BatchErrors<'_> {
        BatchErrors {
            sources: &self.sources,
            places: self.places(),
            next: 0,
            len: self.len,
            hint: 0,
            left: self.failed,
        }
    }

    /// The outcomes as a vector, in call order (one [`RecordMetadata`] or error per record).
    pub fn into_vec(self) -> Vec<Result<RecordMetadata>> {
        self.into_iter().collect()
    }

    /// Where each record's outcome is kept.
    fn places(&self) -> Places<'_> {
        Places {
            spans: &self.spans,
            slots: &self.slots,
        }
    }

    /// Adds `source` to the table; its number ([`NO_OUTCOME`] past `u32::MAX - 1` sources,
    /// which no memory holds: such records read `Shutdown`). A write to the same place as the
    /// last source's (the same core batch reached again, or blobs without offsets with
    /// `acks = 0`) shares it.
    fn add(&mut self, source: Source) -> u32 {
        let n = self.sources.len();
        if self
            .sources
            .last()
            .is_some_and(|last| last.same_place(&source))
        {
            return u32::try_from(n - 1).unwrap_or(NO_OUTCOME);
        }
        match u32::try_from(n) {
            Ok(n) if n != NO_OUTCOME => {
                self.sources.push(source);
                n
            }
            _ => NO_OUTCOME,
        }
    }

    /// Whether records of source `n` read as an error.
    fn fails(&self, n: u32) -> bool {
        !matches!(source(&self.sources, n), Source::Written { .. })
    }

    /// Adds `n` records still on their way (their outcomes are written when they come).
    fn push_pending(&mut self, n: usize) {
        self.len += n;
    }

    /// Adds `n` records that failed at once with `error` (one source and one span for all).
    fn push_failed(&mut self, error: Error, n: usize) {
        if n == 0 {
            return;
        }
        let source = self.add(Source::Failed(error));
        let at = self.len;
        self.len += n;
        let first = Slot {
            source,
            ..Slot::PENDING
        };
        self.push_span(at, n, first, true);
        self.failed += n;
    }

    /// Writes the outcomes of the `n` records from place `at` on (places still pending):
    /// record `at + k` reads `first` with index `first.index + k`.
    fn write(&mut self, at: usize, n: usize, first: Slot, failed: bool) {
        let n = n.min(self.len.saturating_sub(at));
        if n >= SPAN_MIN {
            self.push_span(at, n, first, failed);
        } else if n > 0 {
            if self.slots.len() < self.len {
                self.slots.resize(self.len, Slot::PENDING);
            }
            let span = Span { at, len: n, first };
            for (k, s) in self.slots[at..at + n].iter_mut().enumerate() {
                *s = span.slot(at + k);
            }
        }
        self.failed += if failed { n } else { 0 };
    }

    /// Adds a span, or lengthens the last one when this one continues it.
    fn push_span(&mut self, at: usize, len: usize, first: Slot, failed: bool) {
        if let Some(last) = self.spans.last_mut()
            && last.end() == at
            && last.first.source == first.source
            && last.first.timestamp == first.timestamp
            && (failed || u64::from(last.first.index) + last.len as u64 == u64::from(first.index))
        {
            last.len += len;
            return;
        }
        self.spans.push(Span { at, len, first });
    }

    /// Puts the spans in place order (they come in the order core batches answered).
    fn finish(&mut self) {
        if !self.spans.is_sorted_by_key(|s| s.at) {
            self.spans.sort_unstable_by_key(|s| s.at);
        }
    }
}

/// Where a [`BatchOutcome`] keeps its records' outcomes: spans in place order, and slots.
#[derive(Debug, Clone, Copy)]
struct Places<'a> {
    spans: &'a [Span],
    slots: &'a [Slot],
}

impl Places<'_> {
    /// The outcome of the record at place `i`. `hint` is the span the last look-up found
    /// (a walk in place order mostly finds the next place there or in the span after it).
    fn slot(&self, i: usize, hint: &mut usize) -> Slot {
        for h in [*hint, hint.wrapping_add(1)] {
            if let Some(s) = self.spans.get(h)
                && s.holds(i)
            {
                *hint = h;
                return s.slot(i);
            }
        }
        let k = self.spans.partition_point(|s| s.at <= i);
        if let Some(h) = k.checked_sub(1)
            && let Some(s) = self.spans.get(h)
            && s.holds(i)
        {
            *hint = h;
            return s.slot(i);
        }
        self.slots.get(i).copied().unwrap_or(Slot::PENDING)
    }
}

/// Source `n` of `sources`; a slot without an outcome reads [`SHUT_DOWN`].
fn source(sources: &[Source], n: u32) -> &Source {
    usize::try_from(n)
        .ok()
        .and_then(|n| sources.get(n))
        .unwrap_or(&SHUT_DOWN)
}

/// A slot's outcome, built from its source.
fn read(sources: &[Source], slot: Slot) -> Result<RecordMetadata> {
    match source(sources, slot.source) {
        Source::Written {
            topic,
            partition,
            offset,
        } => Ok(RecordMetadata {
            topic: topic.clone(),
            partition: *partition,
            offset: *offset,
            index: slot.index,
            timestamp: slot.timestamp,
        }),
        Source::Failed(e) => Err(e.clone()),
    }
}

impl std::fmt::Debug for BatchOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl IntoIterator for BatchOutcome {
    type Item = Result<RecordMetadata>;
    type IntoIter = BatchOutcomeIntoIter;

    fn into_iter(self) -> BatchOutcomeIntoIter {
        BatchOutcomeIntoIter {
            cursor: Cursor::new(self.len, self.spans.len()),
            outcome: self,
        }
    }
}

impl<'a> IntoIterator for &'a BatchOutcome {
    type Item = Result<RecordMetadata>;
    type IntoIter = BatchOutcomeIter<'a>;

    fn into_iter(self) -> BatchOutcomeIter<'a> {
        self.iter()
    }
}

/// The places an outcome iterator has not reached from either end, with a span hint for each.
#[derive(Debug, Clone)]
struct Cursor {
    front: usize,
    back: usize,
    front_hint: usize,
    back_hint: usize,
}

impl Cursor {
    fn new(len: usize, spans: usize) -> Cursor {
        Cursor {
            front: 0,
            back: len,
            front_hint: 0,
            back_hint: spans.saturating_sub(1),
        }
    }

    fn next(&mut self, places: Places<'_>) -> Option<Slot> {
        (self.front < self.back).then(|| {
            self.front += 1;
            places.slot(self.front - 1, &mut self.front_hint)
        })
    }

    fn next_back(&mut self, places: Places<'_>) -> Option<Slot> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            places.slot(self.back, &mut self.back_hint)
        })
    }

    fn skip(&mut self, n: usize) {
        self.front = self.front.saturating_add(n).min(self.back);
    }

    fn left(&self) -> usize {
        self.back - self.front
    }
}

/// The outcomes of a [`BatchOutcome`] by reference, in call order ([`BatchOutcome::iter`]).
#[derive(Debug, Clone)]
pub struct BatchOutcomeIter<'a> {
    sources: &'a [Source],
    places: Places<'a>,
    cursor: Cursor,
}

impl Iterator for BatchOutcomeIter<'_> {
    type Item = Result<RecordMetadata>;

    fn next(&mut self) -> Option<Self::Item> {
        let slot = self.cursor.next(self.places)?;
        Some(read(self.sources, slot))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.cursor.left(), Some(self.cursor.left()))
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        self.cursor.skip(n);
        self.next()
    }
}

impl DoubleEndedIterator for BatchOutcomeIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let slot = self.cursor.next_back(self.places)?;
        Some(read(self.sources, slot))
    }
}

impl ExactSizeIterator for BatchOutcomeIter<'_> {}
impl std::iter::FusedIterator for BatchOutcomeIter<'_> {}

/// The outcomes of a [`BatchOutcome`] taken by value, in call order (its `into_iter`).
#[derive(Debug)]
pub struct BatchOutcomeIntoIter {
    outcome: BatchOutcome,
    cursor: Cursor,
}

impl Iterator for BatchOutcomeIntoIter {
    type Item = Result<RecordMetadata>;

    fn next(&mut self) -> Option<Self::Item> {
        let slot = self.cursor.next(self.outcome.places())?;
        Some(read(&self.outcome.sources, slot))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.cursor.left(), Some(self.cursor.left()))
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        self.cursor.skip(n);
        self.next()
    }
}

impl DoubleEndedIterator for BatchOutcomeIntoIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        let slot = self.cursor.next_back(self.outcome.places())?;
        Some(read(&self.outcome.sources, slot))
    }
}

impl ExactSizeIterator for BatchOutcomeIntoIter {}
impl std::iter::FusedIterator for BatchOutcomeIntoIter {}

/// The records of a [`BatchOutcome`] that failed, in call order: each one's position and
/// error ([`BatchOutcome::errors`]).
#[derive(Debug, Clone)]
pub struct BatchErrors<'a> {
    sources: &'a [Source],
    places: Places<'a>,
    /// The next place to look at.
    next: usize,
    len: usize,
    /// The span the last look-up found.
    hint: usize,
    /// Failed records not reached yet (the walk stops after the last one).
    left: usize,
}

impl<'a> Iterator for BatchErrors<'a> {
    type Item = (usize, &'a Error);

    fn next(&mut self) -> Option<Self::Item> {
        while self.left > 0 && self.next < self.len {
            let i = self.next;
            let slot = self.places.slot(i, &mut self.hint);
            match source(self.sources, slot.source) {
                Source::Failed(e) => {
                    self.next += 1;
                    self.left -= 1;
                    return Some((i, e));
                }
                // A delivered span is passed over whole.
                Source::Written { .. } => {
                    self.next = match self.places.spans.get(self.hint) {
                        Some(s) if s.holds(i) => s.end(),
                        _ => i + 1,
                    };
                }
            }
        }
        self.left = 0;
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl std::iter::FusedIterator for BatchErrors<'_> {}

/// One batch's outcomes while its records are on their way.
struct Collecting {
    /// The outcomes so far, in call order; a record still on its way has none yet.
    outcome: BatchOutcome,
    /// Records whose outcome is not in yet.
    waiting: usize,
    /// Every record was fed: the batch is answered once `waiting` reaches 0.
    sealed: bool,
    /// `None` once the caller went away: outcomes are then discarded.
    reply: Option<Reply<BatchOutcome>>,
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
    fn write(&mut self, at: usize, n: usize, first: Slot, failed: bool) {
        self.waiting = self.waiting.saturating_sub(n);
        self.outcome.write(at, n, first, failed);
    }
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
    open: IdMap<u64, Collecting>,
    next: u64,
    runs: Runs,
}

impl Batches {
    /// Opens a batch; its outcomes go to `reply`.
    pub fn open(&mut self, reply: Reply<BatchOutcome>) -> u64 {
        let key = self.next;
        self.next += 1;
        let batch = Collecting {
            outcome: BatchOutcome::default(),
            waiting: 0,
            sealed: false,
            reply: Some(reply),
        };
        self.open.insert(key, batch);
        key
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
        let slot = Slot {
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
                let first = Slot {
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

/// The outcome of one `Producer::enqueue_all`: `.await` it (async) or [`BatchDelivery::wait`]
/// (blocking) for the [`BatchOutcome`] of every record, in the order the records were given —
/// the record's [`RecordMetadata`] (partition, offset and index) or the error that stopped it.
/// It completes once every record has its outcome. Dropping it does not cancel the send; the
/// outcomes are then discarded.
#[derive(Debug)]
#[must_use = "dropping a BatchDelivery discards the records' outcomes (they are still sent)"]
pub struct BatchDelivery {
    pub(crate) rx: oneshot::Receiver<BatchOutcome>,
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
    pub fn wait(self) -> BatchOutcome {
        futures_lite::future::block_on(self)
    }

    /// The outcomes if they are all known already (without waiting); `None` while some
    /// record is on its way. After it returned them once, every record reads
    /// [`Error::Shutdown`].
    pub fn try_wait(&mut self) -> Option<BatchOutcome> {
        match self.rx.try_recv() {
            Ok(r) => r,
            Err(_) => Some(self.lost()),
        }
    }

    /// The outcome when the client stopped before answering.
    fn lost(&self) -> BatchOutcome {
        BatchOutcome::shut_down(self.len)
    }
}

impl Future for BatchDelivery {
    type Output = BatchOutcome;

    /// Cancel safety: dropping the delivery only discards the outcomes.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(outcome)) => Poll::Ready(outcome),
            Poll::Ready(Err(_)) => Poll::Ready(self.lost()),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BatchDelivery, BatchOutcome, Batches, Segment};
    use crate::Error;
    use futures_channel::oneshot;
    use std::sync::Arc;
    use std::time::Duration;
    use stellflow_sansio::{DeliveryError, ProduceId};

    fn meta(index: u32) -> crate::RecordMetadata {
        crate::RecordMetadata {
            topic: "t".into(),
            partition: 0,
            offset: Some(7),
            index,
            timestamp: 0,
        }
    }

    /// Feeds `ids` to batch `key` as one run of records on their way, from its next index.
    fn feed(b: &mut Batches, key: u64, ids: std::ops::Range<u64>) {
        let first = b.fed(key);
        b.note_waiting(key, ids.start, first, ids.clone().count());
        b.push_waiting(key, ids.count());
    }

    /// Opens a batch, feeds it `ids` and seals it; its answer comes on the receiver.
    fn sealed(b: &mut Batches, ids: std::ops::Range<u64>) -> oneshot::Receiver<BatchOutcome> {
        let (tx, rx) = oneshot::channel();
        let key = b.open(tx);
        feed(b, key, ids);
        b.seal(key);
        rx
    }

    /// A core batch of `topic`-`partition` at `offset` (or failed) reporting `ids`, each with
    /// timestamp `1000 + id`; returns the ids nobody's batch held (single sends).
    fn report(
        b: &mut Batches,
        topic: &Arc<str>,
        partition: i32,
        result: Result<Option<i64>, &DeliveryError>,
        ids: &[u64],
    ) -> Vec<(u64, usize)> {
        let records: Vec<(u64, i64)> = ids.iter().map(|&id| (id, 1000 + id as i64)).collect();
        report_stamped(b, topic, partition, result, &records)
    }

    /// [`report`] with each record's id and timestamp given.
    fn report_stamped(
        b: &mut Batches,
        topic: &Arc<str>,
        partition: i32,
        result: Result<Option<i64>, &DeliveryError>,
        records: &[(u64, i64)],
    ) -> Vec<(u64, usize)> {
        let segment = Segment {
            topic,
            partition,
            result,
        };
        let records = records.iter().map(|&(id, ts)| (ProduceId(id), ts));
        let mut singles = Vec::new();
        b.complete_batch(segment, records, |id, i| singles.push((id.0, i)));
        singles
    }

    /// A delivered record's partition, offset, index in its blob and timestamp.
    type Written = (i32, Option<i64>, u32, i64);

    /// Every way of reading `o` (by place, forwards, backwards, skipping, by value) gives the
    /// same outcomes; returned as (partition, offset, index, timestamp), or `None` for an error.
    fn read_all(o: &BatchOutcome) -> Vec<Option<Written>> {
        let key = |r: Result<crate::RecordMetadata, Error>| {
            r.ok()
                .map(|m| (m.partition, m.offset, m.index, m.timestamp))
        };
        let forward: Vec<_> = o.iter().map(key).collect();
        let mut backward: Vec<_> = o.iter().rev().map(key).collect();
        backward.reverse();
        assert_eq!(forward, backward);
        let by_place: Vec<_> = (0..o.len()).map(|i| key(o.get(i).unwrap())).collect();
        assert_eq!(forward, by_place);
        assert_eq!(o.clone().into_iter().map(key).collect::<Vec<_>>(), forward);
        let mut it = o.iter();
        for (i, want) in forward.iter().enumerate().step_by(3) {
            let got = if i == 0 { it.next() } else { it.nth(2) };
            assert_eq!(got.map(key).as_ref(), Some(want), "nth to {i}");
        }
        let failed: Vec<usize> = o.errors().map(|(i, _)| i).collect();
        let none: Vec<usize> = (0..forward.len())
            .filter(|&i| forward[i].is_none())
            .collect();
        assert_eq!(failed, none);
        assert_eq!(o.failed(), none.len());
        forward
    }

    /// A stretch of one core batch (consecutive ids, one timestamp) is kept as one span
    /// however long, with no slot per record; spans that answer out of call order read in
    /// call order; a timestamp change or a short stretch splits them, short ones kept per
    /// record.
    #[test]
    fn stretches_of_a_core_batch_are_spans() {
        let mut b = Batches::default();
        let mut rx = sealed(&mut b, 0..1000);
        let t: Arc<str> = "t".into();
        let stamped = |ids: std::ops::Range<u64>, ts: i64| -> Vec<(u64, i64)> {
            ids.map(|id| (id, ts)).collect()
        };
        // Partition 1 answers first with the call's last 300; partition 0's 700 come in
        // two blobs, the second with two timestamps and a stretch of two.
        assert_eq!(
            report_stamped(&mut b, &t, 1, Ok(Some(20)), &stamped(700..1000, 9)),
            []
        );
        assert_eq!(
            report_stamped(&mut b, &t, 0, Ok(Some(10)), &stamped(0..500, 7)),
            []
        );
        let mut last = stamped(500..690, 7);
        last.extend(stamped(690..698, 8));
        last.extend(stamped(698..700, 9));
        assert_eq!(report_stamped(&mut b, &t, 0, Ok(Some(30)), &last), []);
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!(got.spans.len(), 4, "{:?}", got.spans);
        assert_eq!(
            got.slots.len(),
            1000,
            "the stretch of two is kept per record"
        );
        let want: Vec<_> = (0..1000u32)
            .map(|i| {
                Some(match i {
                    0..500 => (0, Some(10), i, 7),
                    500..690 => (0, Some(30), i - 500, 7),
                    690..698 => (0, Some(30), i - 500, 8),
                    698..700 => (0, Some(30), i - 500, 9),
                    _ => (1, Some(20), i - 700, 9),
                })
            })
            .collect();
        assert_eq!(read_all(&got), want);
        assert_eq!((got.delivered(), got.failed()), (1000, 0));
        assert!(b.open.is_empty() && b.runs.runs.is_empty());

        // One blob for one call: one span and no slots at all.
        let mut rx = sealed(&mut b, 1000..1512);
        report_stamped(&mut b, &t, 0, Ok(Some(40)), &stamped(1000..1512, 3));
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!((got.spans.len(), got.slots.len()), (1, 0));
        assert_eq!(read_all(&got)[511], Some((0, Some(40), 511, 3)));
    }

    /// Spans mixed with refusals, a failed core batch and records that never had an outcome
    /// (the client stopped): each record reads its own outcome, and the errors are exactly
    /// the records that failed, in call order.
    #[test]
    fn spans_refusals_failures_and_shutdown_read_in_call_order() {
        let mut b = Batches::default();
        let (tx, mut rx) = oneshot::channel();
        let key = b.open(tx);
        feed(&mut b, key, 0..10);
        b.push_refused(key, Error::BufferFull(Duration::ZERO), 3);
        feed(&mut b, key, 10..30);
        b.seal(key);
        let t: Arc<str> = "t".into();
        let e = DeliveryError::Timeout {
            after: Duration::from_secs(1),
            last: None,
        };
        let stamped =
            |ids: std::ops::Range<u64>| -> Vec<(u64, i64)> { ids.map(|id| (id, 5)).collect() };
        report_stamped(&mut b, &t, 0, Ok(Some(1)), &stamped(0..10));
        report_stamped(&mut b, &t, 1, Err(&e), &stamped(10..18));
        // 18..30 never answer.
        b.shut_down();
        let got = rx.try_recv().unwrap().expect("answered at shutdown");
        assert_eq!(got.len(), 33);
        let read = read_all(&got);
        assert!((0..10).all(|i| read[i] == Some((0, Some(1), i as u32, 5))));
        assert!(read[10..].iter().all(Option::is_none));
        assert_eq!((got.delivered(), got.failed()), (10, 23));
        let kinds: Vec<&str> = got
            .errors()
            .map(|(_, e)| match e {
                Error::BufferFull(_) => "full",
                Error::Delivery(_) => "delivery",
                Error::Shutdown => "shutdown",
                _ => "other",
            })
            .collect();
        let mut want = vec!["full"; 3];
        want.extend(["delivery"; 8]);
        want.extend(["shutdown"; 12]);
        assert_eq!(kinds, want);
        assert!(matches!(
            got.first_error(),
            Some((10, Error::BufferFull(_)))
        ));
    }

    /// Outcomes land at their record's index whatever order they come in, and the batch is
    /// answered only once it is sealed and nothing is on its way.
    #[test]
    fn answers_in_call_order_once_sealed_and_complete() {
        let mut b = Batches::default();
        let (tx, mut rx) = oneshot::channel();
        let key = b.open(tx);
        b.note_waiting(key, 10, 0, 1);
        b.push_waiting(key, 1);
        b.push_refused(key, Error::BufferFull(Duration::ZERO), 1);
        assert_eq!(b.fed(key), 2);
        b.note_waiting(key, 11, 2, 1);
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
        assert_eq!((got.len(), got.delivered(), got.failed()), (3, 2, 1));
        assert_eq!(got.get(0).unwrap().unwrap(), meta(0));
        assert!(matches!(got.get(1), Some(Err(Error::BufferFull(_)))));
        assert_eq!(got.get(2).unwrap().unwrap(), meta(1));
        assert!(got.get(3).is_none());
        assert!(matches!(got.first_error(), Some((1, Error::BufferFull(_)))));
        assert!(b.open.is_empty());
        assert_eq!(b.waiting(), 0);
        assert!(b.runs.runs.is_empty(), "complete runs leave");
    }

    /// One call's records spread over two partitions and several core batches, with a record
    /// refused at once in the middle and a single send's id among them: every record reads
    /// its own partition, offset, index in its blob and timestamp, in call order; a core
    /// batch is one entry of the outcome, not one per record; the single send goes back.
    #[test]
    fn core_batches_fill_the_outcome_in_call_order() {
        let mut b = Batches::default();
        let (tx, mut rx) = oneshot::channel();
        let key = b.open(tx);
        // Call order: ids 1..=4 (index 0..4), a refused record (index 4), ids 6..=8 (5..8);
        // id 5 is a single send of another caller.
        feed(&mut b, key, 1..5);
        b.push_refused(key, Error::Shutdown, 1);
        feed(&mut b, key, 6..9);
        b.seal(key);
        let t: Arc<str> = "t".into();
        // Partition 0 gets the even ids, partition 1 the odd ones (and the single send).
        assert!(report(&mut b, &t, 1, Ok(Some(50)), &[1, 3, 5]) == [(5, 2)]);
        assert_eq!(report(&mut b, &t, 0, Ok(Some(20)), &[2, 4]), []);
        assert!(rx.try_recv().unwrap().is_none(), "6..=8 on their way");
        assert_eq!(report(&mut b, &t, 0, Ok(Some(22)), &[6, 8]), []);
        assert_eq!(report(&mut b, &t, 1, Ok(None), &[7]), []);
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!(got.sources.len(), 5, "four core batches and one refusal");
        assert_eq!(std::mem::size_of::<super::Slot>(), 16, "16 bytes a record");
        let expect = [
            (1, Some(50), 0, 1),
            (0, Some(20), 0, 2),
            (1, Some(50), 1, 3),
            (0, Some(20), 1, 4),
            (-1, None, 0, 0),
            (0, Some(22), 0, 6),
            (1, None, 0, 7),
            (0, Some(22), 1, 8),
        ];
        assert_eq!(got.len(), expect.len());
        for (i, (o, &(partition, offset, index, id))) in got.iter().zip(&expect).enumerate() {
            if partition < 0 {
                assert!(matches!(o, Err(Error::Shutdown)), "record {i}: {o:?}");
                continue;
            }
            let m = o.unwrap_or_else(|e| panic!("record {i}: {e}"));
            assert_eq!(
                (m.partition, m.offset, m.index, m.timestamp),
                (partition, offset, index, 1000 + id),
                "record {i}"
            );
            assert_eq!(&*m.topic, "t");
        }
        assert_eq!((got.delivered(), got.failed()), (7, 1));
        let errors: Vec<usize> = got.errors().map(|(i, _)| i).collect();
        assert_eq!(errors, [4]);
        let by_value = got.clone().into_vec();
        assert_eq!(format!("{by_value:?}"), format!("{got:?}"));
        assert_eq!(got.into_iter().rev().count(), 8);
        assert!(b.open.is_empty() && b.runs.runs.is_empty());
    }

    /// Consecutive ids of one run are taken together: a span stops where the run ends (the
    /// next call's records, even with the next ids), where an id is skipped, and where the
    /// run waits for nothing more; each record still lands at its own place.
    #[test]
    fn spans_of_consecutive_ids_stop_at_run_ends_and_gaps() {
        let mut b = Batches::default();
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        let k1 = b.open(tx1);
        let k2 = b.open(tx2);
        feed(&mut b, k1, 0..6);
        feed(&mut b, k2, 6..9);
        b.seal(k1);
        b.seal(k2);
        let t: Arc<str> = "t".into();
        // Ids 4..=7 cross from call 1's run into call 2's; 1 and 3 went elsewhere.
        assert_eq!(report(&mut b, &t, 0, Ok(Some(10)), &[0, 2, 4, 5, 6, 7]), []);
        // Out of blob order, and an id nobody waits for in the middle.
        assert_eq!(report(&mut b, &t, 1, Ok(Some(20)), &[3, 1, 9, 8]), [(9, 2)]);
        let (one, two) = (
            rx1.try_recv().unwrap().expect("answered"),
            rx2.try_recv().unwrap().expect("answered"),
        );
        let got = |o: &BatchOutcome| -> Vec<(i32, u32, i64)> {
            o.iter()
                .map(|m| m.map(|m| (m.partition, m.index, m.timestamp)).unwrap())
                .collect()
        };
        assert_eq!(
            got(&one),
            [
                (0, 0, 1000),
                (1, 1, 1001),
                (0, 1, 1002),
                (1, 0, 1003),
                (0, 2, 1004),
                (0, 3, 1005)
            ]
        );
        assert_eq!(got(&two), [(0, 4, 1006), (0, 5, 1007), (1, 3, 1008)]);
        assert_eq!(b.waiting(), 0);
        assert!(b.open.is_empty() && b.runs.runs.is_empty());
        // A run that waits for nothing more takes no further record.
        let (tx3, _rx3) = oneshot::channel();
        let k3 = b.open(tx3);
        feed(&mut b, k3, 20..22);
        assert_eq!(report(&mut b, &t, 0, Ok(Some(30)), &[20, 21]), []);
        assert_eq!(
            report(&mut b, &t, 0, Ok(Some(32)), &[20, 21]),
            [(20, 0), (21, 1)]
        );
    }

    /// A core batch that failed gives each of its records (and only those) its error, read as
    /// today's `Error::Delivery`; the other records of the call keep theirs.
    #[test]
    fn a_failed_core_batch_fails_each_of_its_records() {
        let mut b = Batches::default();
        let mut rx = sealed(&mut b, 0..6);
        let t: Arc<str> = "t".into();
        let e = DeliveryError::Timeout {
            after: Duration::from_secs(1),
            last: None,
        };
        report(&mut b, &t, 0, Ok(Some(3)), &[0, 2, 4]);
        report(&mut b, &t, 1, Err(&e), &[1, 3, 5]);
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!((got.delivered(), got.failed()), (3, 3));
        for (i, o) in got.iter().enumerate() {
            match o {
                Ok(m) => assert!(i % 2 == 0 && m.index == i as u32 / 2),
                Err(Error::Delivery(d)) => assert!(i % 2 == 1 && d == e),
                Err(other) => panic!("record {i}: {other}"),
            }
        }
        let errors: Vec<(usize, String)> = got.errors().map(|(i, e)| (i, e.to_string())).collect();
        let text = Error::Delivery(e).to_string();
        assert_eq!(errors, [(1, text.clone()), (3, text.clone()), (5, text)]);
        assert_eq!(got.sources.len(), 2);
    }

    /// Records still on their way when the client stops read `Shutdown` (a sealed batch is
    /// answered with what is known); a batch not sealed yet is dropped.
    #[test]
    fn shutdown_answers_sealed_batches_with_what_is_known() {
        let mut b = Batches::default();
        let (tx, mut rx) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        let key = b.open(tx);
        let open = b.open(tx2);
        feed(&mut b, key, 0..3);
        feed(&mut b, open, 3..4);
        b.seal(key);
        report(&mut b, &"t".into(), 0, Ok(Some(1)), &[1]);
        b.shut_down();
        let got = rx.try_recv().unwrap().expect("answered");
        assert_eq!((got.len(), got.delivered(), got.failed()), (3, 1, 2));
        assert!(matches!(got.get(0), Some(Err(Error::Shutdown))));
        assert_eq!(got.get(1).unwrap().unwrap().offset, Some(1));
        assert!(matches!(got.first_error(), Some((0, Error::Shutdown))));
        assert_eq!(got.errors().map(|(i, _)| i).collect::<Vec<_>>(), [0, 2]);
        assert!(rx2.try_recv().is_err(), "an unsealed batch is dropped");
        assert_eq!(b.waiting(), 0);
    }

    /// `try_wait` gives the outcome once; after that every record reads `Shutdown`, and so
    /// does a delivery whose batch was dropped unanswered.
    #[test]
    fn try_wait_twice_reads_shutdown() {
        let mut b = Batches::default();
        let (tx, rx) = oneshot::channel();
        let key = b.open(tx);
        feed(&mut b, key, 0..2);
        b.seal(key);
        let mut d = BatchDelivery { rx, len: 2 };
        assert!(d.try_wait().is_none(), "on its way");
        report(&mut b, &"t".into(), 0, Ok(Some(9)), &[0, 1]);
        let first = d.try_wait().expect("answered");
        assert_eq!(first.delivered(), 2);
        let again = d.try_wait().expect("lost");
        assert_eq!((again.len(), again.failed()), (2, 2));
        assert!(again.iter().all(|o| matches!(o, Err(Error::Shutdown))));
        let (tx, rx) = oneshot::channel::<BatchOutcome>();
        drop(tx);
        let lost = BatchDelivery { rx, len: 3 }.wait();
        assert_eq!((lost.len(), lost.delivered()), (3, 0));
        let empty = BatchOutcome::default();
        assert!(empty.is_empty() && empty.first_error().is_none() && empty.get(0).is_none());
    }

    /// Consecutive ids of one batch share a run; a gap in ids (another caller's record) or in
    /// indexes (a refused record) or another batch starts a new one. Every id finds its
    /// batch and place, in any order, and only ids of a batch are found.
    #[test]
    fn runs_map_ids_to_places_in_any_order() {
        let mut b = Batches::default();
        let (tx1, _rx1) = oneshot::channel();
        let (tx2, _rx2) = oneshot::channel();
        let k1 = b.open(tx1);
        let k2 = b.open(tx2);
        let mut expect = Vec::new();
        for id in 1..=5 {
            b.note_waiting(k1, id, (id - 1) as usize, 1);
            expect.push((id, k1, (id - 1) as usize));
        }
        // id 6 is a single send; 7..=8 go to batch 2; 9..=10 to batch 1 after a refused record.
        for id in 7..=8 {
            b.note_waiting(k2, id, (id - 7) as usize, 1);
            expect.push((id, k2, (id - 7) as usize));
        }
        for id in 9..=10 {
            b.note_waiting(k1, id, id as usize - 3, 1);
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

    /// Two calls' records interleaved in one core batch: each call gets the core batch as an
    /// entry of its own, and its records only.
    #[test]
    fn one_core_batch_serves_two_calls() {
        let mut b = Batches::default();
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        let k1 = b.open(tx1);
        let k2 = b.open(tx2);
        feed(&mut b, k1, 0..2);
        feed(&mut b, k2, 2..4);
        feed(&mut b, k1, 4..6);
        b.seal(k1);
        b.seal(k2);
        report(&mut b, &"t".into(), 0, Ok(Some(0)), &[0, 1, 2, 3, 4, 5]);
        let (one, two) = (
            rx1.try_recv().unwrap().unwrap(),
            rx2.try_recv().unwrap().unwrap(),
        );
        let index = |o: &BatchOutcome| -> Vec<u32> { o.iter().map(|m| m.unwrap().index).collect() };
        assert_eq!(index(&one), [0, 1, 4, 5]);
        assert_eq!(index(&two), [2, 3]);
        // The call's two stretches of one core batch share its entry.
        assert_eq!((one.sources.len(), two.sources.len()), (1, 1));
    }

    /// An abandoned batch drops out of the table once its last record is in, keeping nothing.
    #[test]
    fn an_abandoned_batch_leaves_when_its_records_are_in() {
        let mut b = Batches::default();
        let (tx, rx) = oneshot::channel();
        let key = b.open(tx);
        feed(&mut b, key, 3..5);
        b.abandon(key);
        drop(rx);
        assert_eq!(b.open.len(), 1);
        let (k, i) = b.take_record(3).unwrap();
        b.complete(k, i, Ok(meta(0)));
        assert_eq!(b.open.len(), 1);
        assert!(b.open[&key].outcome.sources.is_empty(), "discarded");
        report(&mut b, &"t".into(), 0, Ok(Some(1)), &[4]);
        assert!(b.open.is_empty());
    }
}
