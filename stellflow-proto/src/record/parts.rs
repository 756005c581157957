//! Records built by the caller from their parts: a blob's next record handed to a closure as
//! ranges of its batch, so that an owned record of the caller's own type is made in one step,
//! without a [`Record`](super::Record) built and moved in between.

use super::blob::{BlobFormat, BlobRecords};
use super::error::BatchError;
use super::v1::{Headers, RawRecord};
use bytes::Bytes;

/// One record of a blob, lent to the closure of [`BlobRecords::next_with`]: what it needs to
/// build an owned record. The key, value and headers are taken as [`Bytes`] sharing the
/// batch's memory (one reference count each, as [`Iterator::next`] takes them), and only
/// those asked for.
#[derive(Debug)]
pub struct RecordParts<'a> {
    batch: &'a Bytes,
    raw: RawRecord,
    index_in_blob: u32,
    batch_index: u32,
    format: BlobFormat,
    last_in_blob: bool,
}

impl RecordParts<'_> {
    /// Position in the blob, counted across all its batches (as
    /// [`super::BlobRecord::index_in_blob`]).
    #[inline(always)]
    pub fn index_in_blob(&self) -> u32 {
        self.index_in_blob
    }

    /// Which v1 batch of the blob (or of the SRFB content) holds it.
    #[inline(always)]
    pub fn batch_index(&self) -> u32 {
        self.batch_index
    }

    /// The blob's format.
    #[inline(always)]
    pub fn format(&self) -> BlobFormat {
        self.format
    }

    /// Whether it is the blob's last record ([`BlobRecords::at_end`] after it).
    #[inline(always)]
    pub fn is_last_in_blob(&self) -> bool {
        self.last_in_blob
    }

    /// The record time: the batch's `baseTimestamp` plus the record's delta.
    #[inline(always)]
    pub fn timestamp(&self) -> i64 {
        self.raw.timestamp
    }

    /// The key (`None` when null), sharing the batch's memory.
    #[inline(always)]
    pub fn key(&self) -> Option<Bytes> {
        self.raw.key_in(self.batch)
    }

    /// The value (`None` when null, a tombstone), sharing the batch's memory.
    #[inline(always)]
    pub fn value(&self) -> Option<Bytes> {
        self.raw.value_in(self.batch)
    }

    /// The key's and the value's lengths added (a null counts 0), without taking either.
    #[inline(always)]
    pub fn key_and_value_len(&self) -> usize {
        let len = |r: &Option<std::ops::Range<usize>>| r.as_ref().map_or(0, |r| r.len());
        len(&self.raw.key) + len(&self.raw.value)
    }

    /// The headers, split lazily (nothing shared when there are none).
    #[inline(always)]
    pub fn headers(&self) -> Headers {
        self.raw.headers_in(self.batch)
    }
}

impl BlobRecords {
    /// The next record handed to `build` as its [`RecordParts`], and what `build` made of
    /// it: the same records, checks and errors as [`Iterator::next`] (the `Err` once, then
    /// `None`), for callers that keep records as a type of their own. `build` can put its
    /// record straight where it goes (a `Vec::push` inside it), so the record is not built
    /// and then moved (each move of a freshly built record is a store-forwarding stall).
    ///
    /// ```
    /// # use stellflow_proto::record::{BatchBuilder, BatchParams, blob_records};
    /// let mut b = BatchBuilder::new(BatchParams::default());
    /// b.append(7, Some(b"k"), Some(b"a")).unwrap();
    /// b.append(8, None, Some(b"b")).unwrap();
    /// let mut records = blob_records(b.finish().unwrap());
    /// let mut values = Vec::new();
    /// while let Some(r) = records.next_with(|p| values.push((p.index_in_blob(), p.value()))) {
    ///     r.unwrap();
    /// }
    /// assert_eq!(values[1], (1, Some(bytes::Bytes::from_static(b"b"))));
    /// ```
    #[inline(always)]
    pub fn next_with<T>(
        &mut self,
        build: impl FnOnce(RecordParts<'_>) -> T,
    ) -> Option<Result<T, BatchError>> {
        let raw = match self.next_raw()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let last_in_blob = self.at_end();
        Some(Ok(build(RecordParts {
            last_in_blob,
            index_in_blob: self.last_index(),
            batch_index: self.current_batch_index(),
            format: self.format(),
            batch: self.current_shared_bytes(),
            raw,
        })))
    }
}
