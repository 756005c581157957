//! The offset model: the one place that decides what offset to fetch and commit and how blobs
//! are numbered (DESIGN §3.1, §3.6).
//!
//! Today's server gives one offset per produced blob, answers a multi-blob Fetch with a silent
//! gap at segment boundaries (PROTOCOL.md §3.4), and clamps offsets below the log start without
//! an error. So:
//!
//! * a record's identity is `(blob offset, index in blob)` — a [`Position`] names the next
//!   record to deliver;
//! * every blob is asked for with its own Fetch entry (`partitionMaxBytes = 1`), so the blob of
//!   an entry is at exactly `max(fetchOffset, logStartOffset)`;
//! * the next fetch offset is the last delivered blob + 1, never a count;
//! * a commit stores the next blob offset, plus the in-blob index in the commit metadata when
//!   the blob is partly consumed.
//!
//! A server with per-record offsets or contiguous multi-blob answers changes this module only.

/// Prefix of the commit metadata that carries the in-blob index of a mid-blob commit.
pub(crate) const INDEX_METADATA_PREFIX: &str = "stellflow-index:";

/// The next record to deliver in a partition: record `index` of the blob at `offset`.
///
/// `index = 0` is the start of the blob; a fully consumed blob at `o` is `Position::new(o + 1, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// The blob's offset.
    pub offset: i64,
    /// The record index within the blob, counted across all its batches.
    pub index: u32,
}

impl Position {
    /// A position from its parts.
    pub const fn new(offset: i64, index: u32) -> Self {
        Position { offset, index }
    }

    /// The start of the blob at `offset`.
    pub const fn blob(offset: i64) -> Self {
        Position { offset, index: 0 }
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.offset, self.index)
    }
}

/// Fetch entries for one partition: `(fetchOffset, partitionMaxBytes)` at `next`, `next + 1`, …
///
/// Always ascending and consecutive: the server hands a partition's records to its entries in
/// order of the entries that read something (PROTOCOL.md §3.4), so only trailing entries may be
/// empty without shifting the others.
pub(crate) fn fetch_entries(next: i64, count: usize) -> impl Iterator<Item = (i64, i32)> {
    (0..count as i64).map(move |i| (next.saturating_add(i), 1))
}

/// How many entries (blobs) to ask for one partition: enough to fill `budget` with blobs of
/// the largest recent size, at least 1, at most `cap`. Without any size seen, 1: a first
/// unknown blob may be as large as a frame.
pub(crate) fn entries_for(budget: usize, blob_size: Option<usize>, cap: usize) -> usize {
    match blob_size {
        None => 1,
        Some(size) => (budget / size.max(1)).clamp(1, cap.max(1)),
    }
}

/// The offset of the blob an entry returned: the server starts at
/// `max(fetchOffset, logStartOffset)` and returns one blob per entry of budget 1.
pub(crate) fn blob_offset(fetch_offset: i64, log_start: i64) -> i64 {
    fetch_offset.max(log_start)
}

/// The next blob to fetch after delivering (or receiving) the blob at `offset`.
pub(crate) fn next_after(offset: i64) -> i64 {
    offset.saturating_add(1)
}

/// What one Fetch entry means for a partition expecting the blob at `expected` next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryVerdict {
    /// The entry holds the expected blob, at this offset.
    Deliver(i64),
    /// The entry repeats a blob already taken (entries clamped to the same log start).
    Duplicate,
    /// Nothing there (log end reached): later entries of the partition are ignored.
    End,
    /// `expected` is below the log start: retention (or an operator) deleted it.
    BelowLogStart {
        /// The returned log start.
        log_start: i64,
    },
    /// A blob after a hole that the exact method should never produce (a concurrent append
    /// between entries): dropped and fetched again.
    Gap,
}

/// Classifies one entry (see [`EntryVerdict`]).
pub(crate) fn classify(
    expected: i64,
    fetch_offset: i64,
    log_start: i64,
    empty: bool,
) -> EntryVerdict {
    if expected < log_start {
        return EntryVerdict::BelowLogStart { log_start };
    }
    if empty {
        return EntryVerdict::End;
    }
    let offset = blob_offset(fetch_offset, log_start);
    match offset.cmp(&expected) {
        std::cmp::Ordering::Less => EntryVerdict::Duplicate,
        std::cmp::Ordering::Equal => EntryVerdict::Deliver(offset),
        std::cmp::Ordering::Greater => EntryVerdict::Gap,
    }
}

/// The OffsetCommit `offset` and `metadata` that make a consumer resume at `position`
/// (DESIGN §3.1): the blob offset, and the in-blob index in the metadata when the blob is
/// partly consumed. A fully consumed blob `o` is already `Position(o + 1, 0)`: plain `o + 1`.
pub(crate) fn commit_form(position: Position) -> (i64, String) {
    if position.index == 0 {
        (position.offset, String::new())
    } else {
        (
            position.offset,
            format!("{INDEX_METADATA_PREFIX}{}", position.index),
        )
    }
}

/// The position an OffsetFetch answer resumes at: `None` when nothing is committed (offset
/// −1). Metadata written by other clients (no index) resumes at the start of the blob.
pub(crate) fn resume_from(offset: i64, metadata: Option<&str>) -> Option<Position> {
    if offset < 0 {
        return None;
    }
    let index = metadata
        .and_then(|m| m.strip_prefix(INDEX_METADATA_PREFIX))
        .and_then(|i| i.parse::<u32>().ok())
        .unwrap_or(0);
    Some(Position::new(offset, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_round_trip() {
        for p in [
            Position::new(0, 0),
            Position::new(7, 3),
            Position::new(9, 0),
        ] {
            let (o, m) = commit_form(p);
            assert_eq!(resume_from(o, Some(&m)), Some(p));
        }
        assert_eq!(resume_from(-1, Some("")), None);
        assert_eq!(resume_from(4, Some("foreign")), Some(Position::blob(4)));
        assert_eq!(resume_from(4, None), Some(Position::blob(4)));
    }

    #[test]
    fn entries() {
        let e: Vec<_> = fetch_entries(5, 3).collect();
        assert_eq!(e, [(5, 1), (6, 1), (7, 1)]);
        assert_eq!(entries_for(1000, None, 10), 1);
        assert_eq!(entries_for(1000, Some(100), 5), 5);
        assert_eq!(entries_for(1000, Some(300), 50), 3);
        assert_eq!(entries_for(10, Some(300), 50), 1);
    }

    #[test]
    fn verdicts() {
        assert_eq!(classify(3, 3, 0, false), EntryVerdict::Deliver(3));
        assert_eq!(classify(3, 3, 0, true), EntryVerdict::End);
        assert_eq!(classify(4, 2, 3, false), EntryVerdict::Duplicate);
        assert_eq!(
            classify(1, 1, 5, false),
            EntryVerdict::BelowLogStart { log_start: 5 }
        );
        assert_eq!(classify(5, 1, 5, false), EntryVerdict::Deliver(5));
        assert_eq!(classify(5, 6, 0, false), EntryVerdict::Gap);
    }
}
