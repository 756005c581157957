//! The iterators over a [`BatchOutcome`]: by reference, by value, and over its failed records.

use super::outcome::{BatchOutcome, PackedOutcome, Places, Source, read, source};
use crate::{Error, RecordMetadata, Result};

/// The places an outcome iterator has not reached from either end, with a span hint for each.
#[derive(Debug, Clone)]
pub(super) struct Cursor {
    front: usize,
    back: usize,
    front_hint: usize,
    back_hint: usize,
}

impl Cursor {
    pub(super) fn new(len: usize, spans: usize) -> Cursor {
        Cursor {
            front: 0,
            back: len,
            front_hint: 0,
            back_hint: spans.saturating_sub(1),
        }
    }

    fn next(&mut self, places: Places<'_>) -> Option<PackedOutcome> {
        (self.front < self.back).then(|| {
            self.front += 1;
            places.slot(self.front - 1, &mut self.front_hint)
        })
    }

    fn next_back(&mut self, places: Places<'_>) -> Option<PackedOutcome> {
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
    pub(super) sources: &'a [Source],
    pub(super) places: Places<'a>,
    pub(super) cursor: Cursor,
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
    pub(super) outcome: BatchOutcome,
    pub(super) cursor: Cursor,
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
    pub(super) sources: &'a [Source],
    pub(super) places: Places<'a>,
    /// The next place to look at.
    pub(super) next: usize,
    pub(super) len: usize,
    /// The span the last look-up found.
    pub(super) hint: usize,
    /// Failed records not reached yet (the walk stops after the last one).
    pub(super) left: usize,
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
