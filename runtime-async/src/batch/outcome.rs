//! What a batch send's outcome keeps ([`BatchOutcome`]): a table of sources, spans for
//! stretches written together and slots for records written apart, read back into each
//! record's [`RecordMetadata`] or error when asked for.

use super::iter::{BatchErrors, BatchOutcomeIntoIter, BatchOutcomeIter, Cursor};
use crate::{Error, RecordMetadata, Result};
use std::sync::Arc;

/// The source number of a slot without an outcome: it reads [`Error::Shutdown`].
pub(super) const NO_OUTCOME: u32 = u32::MAX;

/// What a record without an outcome reads (the client stopped first).
static SHUT_DOWN: Source = Source::Failed(Error::Shutdown);

/// Where the outcomes of some records of a call came from: a core batch that wrote them (or
/// failed them all with one error), or a refusal of records at once.
#[derive(Debug, Clone)]
pub(super) enum Source {
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
    pub(super) fn written(m: RecordMetadata) -> Source {
        Source::Written {
            topic: m.topic,
            partition: m.partition,
            offset: m.offset,
        }
    }
}

/// One record's outcome, compactly: its source, its index in its blob and its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PackedOutcome {
    /// An index into [`BatchOutcome::sources`], or [`NO_OUTCOME`].
    pub(super) source: u32,
    /// The record's index within its blob (when written).
    pub(super) index: u32,
    /// The record's timestamp as written.
    pub(super) timestamp: i64,
}

impl PackedOutcome {
    /// The slot of a record still on its way.
    const PENDING: PackedOutcome = PackedOutcome {
        source: NO_OUTCOME,
        index: 0,
        timestamp: 0,
    };
}

/// Records `at..at + len` of a call that share one outcome but for their index in the blob:
/// record `at + k` reads `first` with index `first.index + k`. A stretch of records of one core
/// batch (consecutive in the call and in the blob, one timestamp) is one span, however long.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// The first record's place in the call.
    at: usize,
    /// How many records it holds.
    len: usize,
    /// The first record's outcome.
    first: PackedOutcome,
}

impl Span {
    /// The place after its last record.
    pub(super) fn end(&self) -> usize {
        self.at + self.len
    }

    /// Whether it holds the record at place `i`.
    pub(super) fn holds(&self, i: usize) -> bool {
        i >= self.at && i < self.end()
    }

    /// The outcome of the record at place `i` (which it holds).
    pub(super) fn slot(&self, i: usize) -> PackedOutcome {
        let k = u32::try_from(i - self.at).unwrap_or(u32::MAX);
        PackedOutcome {
            index: self.first.index.saturating_add(k),
            ..self.first
        }
    }
}

/// Stretches shorter than this are written record by record (a span costs two slots).
const SPAN_MIN: usize = 4;

/// The outcome of every record of one `Producer::enqueue_all` (or `send_all`), in the order
/// the records were given: what [`BatchDelivery`](super::BatchDelivery) completes with. Each record's outcome is its
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
    pub(super) sources: Vec<Source>,
    /// Stretches of records written together, in place order once the outcome is answered.
    pub(super) spans: Vec<Span>,
    /// The records written one by one: one slot per record of the call (empty until the
    /// first such record). A record in no span and no slot has no outcome (`Shutdown`).
    pub(super) slots: Vec<PackedOutcome>,
    /// How many records the call was given.
    len: usize,
    /// Records whose outcome is an error (refused, not delivered, or without an outcome).
    pub(super) failed: usize,
}

impl BatchOutcome {
    /// `len` records that all read [`Error::Shutdown`] (the client stopped before answering).
    pub(super) fn shut_down(len: usize) -> BatchOutcome {
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
    pub(super) fn places(&self) -> Places<'_> {
        Places {
            spans: &self.spans,
            slots: &self.slots,
        }
    }

    /// Adds `source` to the table; its number ([`NO_OUTCOME`] past `u32::MAX - 1` sources,
    /// which no memory holds: such records read `Shutdown`). A write to the same place as the
    /// last source's (the same core batch reached again, or blobs without offsets with
    /// `acks = 0`) shares it.
    pub(super) fn add(&mut self, source: Source) -> u32 {
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
    pub(super) fn fails(&self, n: u32) -> bool {
        !matches!(source(&self.sources, n), Source::Written { .. })
    }

    /// Adds `n` records still on their way (their outcomes are written when they come).
    pub(super) fn push_pending(&mut self, n: usize) {
        self.len += n;
    }

    /// Adds `n` records that failed at once with `error` (one source and one span for all).
    pub(super) fn push_failed(&mut self, error: Error, n: usize) {
        if n == 0 {
            return;
        }
        let source = self.add(Source::Failed(error));
        let at = self.len;
        self.len += n;
        let first = PackedOutcome {
            source,
            ..PackedOutcome::PENDING
        };
        self.push_span(at, n, first, true);
        self.failed += n;
    }

    /// Writes the outcomes of the `n` records from place `at` on (places still pending):
    /// record `at + k` reads `first` with index `first.index + k`.
    pub(super) fn write(&mut self, at: usize, n: usize, first: PackedOutcome, failed: bool) {
        let n = n.min(self.len.saturating_sub(at));
        if n >= SPAN_MIN {
            self.push_span(at, n, first, failed);
        } else if n > 0 {
            if self.slots.len() < self.len {
                self.slots.resize(self.len, PackedOutcome::PENDING);
            }
            let span = Span { at, len: n, first };
            for (k, s) in self.slots[at..at + n].iter_mut().enumerate() {
                *s = span.slot(at + k);
            }
        }
        self.failed += if failed { n } else { 0 };
    }

    /// Adds a span, or lengthens the last one when this one continues it.
    fn push_span(&mut self, at: usize, len: usize, first: PackedOutcome, failed: bool) {
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
    pub(super) fn finish(&mut self) {
        if !self.spans.is_sorted_by_key(|s| s.at) {
            self.spans.sort_unstable_by_key(|s| s.at);
        }
    }
}

/// Where a [`BatchOutcome`] keeps its records' outcomes: spans in place order, and slots.
#[derive(Debug, Clone, Copy)]
pub(super) struct Places<'a> {
    pub(super) spans: &'a [Span],
    pub(super) slots: &'a [PackedOutcome],
}

impl Places<'_> {
    /// The outcome of the record at place `i`. `hint` is the span the last look-up found
    /// (a walk in place order mostly finds the next place there or in the span after it).
    pub(super) fn slot(&self, i: usize, hint: &mut usize) -> PackedOutcome {
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
        self.slots.get(i).copied().unwrap_or(PackedOutcome::PENDING)
    }
}

/// Source `n` of `sources`; a slot without an outcome reads [`SHUT_DOWN`].
pub(super) fn source(sources: &[Source], n: u32) -> &Source {
    usize::try_from(n)
        .ok()
        .and_then(|n| sources.get(n))
        .unwrap_or(&SHUT_DOWN)
}

/// A slot's outcome, built from its source.
pub(super) fn read(sources: &[Source], slot: PackedOutcome) -> Result<RecordMetadata> {
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
