//! Borrowed record views: a blob's records read in place, as slices of the fetched bytes,
//! with no reference count taken and nothing built or moved per record.

use super::blob::BlobRecords;
use super::cursor::Cursor;
use super::error::BatchError;

/// One record of a blob, borrowed from the blob's bytes: what a fetched blob's `next_view`
/// yields (the blob's record iterator, `BlobRecords::next_view`). Holding it borrows the
/// iterator, so the next record is read once this one is let go; copy out (`to_vec`) what must
/// outlive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Position in the blob, counted across all its batches (as
    /// [`super::BlobRecord::index_in_blob`]).
    pub index_in_blob: u32,
    /// Which v1 batch of the blob (or of the SRFB content) holds it.
    pub batch_index: u32,
    /// The record time: the batch's `baseTimestamp` plus the record's delta.
    pub timestamp: i64,
    /// The key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` when null (a tombstone).
    pub value: Option<&'a [u8]>,
    /// The headers, not yet split.
    pub headers: HeadersView<'a>,
}

/// The headers of a [`RecordView`], borrowed and not yet split; the decoder has checked
/// that [`HeadersView::len`] headers fill them exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeadersView<'a> {
    bytes: &'a [u8],
    count: u32,
}

impl<'a> HeadersView<'a> {
    /// How many headers.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded headers (without their count).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The headers as borrowed `(key, value)` byte slices (`None` = null), in order.
    pub fn iter(&self) -> HeaderViews<'a> {
        HeaderViews {
            bytes: self.bytes,
            cur: Cursor::new(self.bytes),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for HeadersView<'a> {
    type Item = (Option<&'a [u8]>, Option<&'a [u8]>);
    type IntoIter = HeaderViews<'a>;
    fn into_iter(self) -> HeaderViews<'a> {
        self.iter()
    }
}

/// The headers of a [`HeadersView`] as borrowed `(key, value)` slices.
#[derive(Debug, Clone)]
pub struct HeaderViews<'a> {
    bytes: &'a [u8],
    cur: Cursor<'a>,
    left: u32,
}

impl<'a> Iterator for HeaderViews<'a> {
    type Item = (Option<&'a [u8]>, Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match (self.cur.nstring(), self.cur.nbytes()) {
            (Some(k), Some(v)) => {
                let bytes = self.bytes;
                Some((k.and_then(|r| bytes.get(r)), v.and_then(|r| bytes.get(r))))
            }
            _ => {
                // Cannot happen for validated headers; stop rather than panic.
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

impl BlobRecords {
    /// The next record as a borrowed [`RecordView`]: the same records, checks and errors as
    /// [`Iterator::next`] (the `Err` once, then `None`), but keys, values and headers are
    /// slices of the blob borrowed from this iterator, so no reference count is taken and no
    /// record is built per record. Not an [`Iterator`] (each view borrows the walk): loop
    /// with `while let`.
    ///
    /// ```
    /// # use stellflow_proto::record::{BatchBuilder, BatchParams, blob_records};
    /// let mut b = BatchBuilder::new(BatchParams::default());
    /// b.append(0, Some(b"k"), Some(b"a")).unwrap();
    /// b.append(0, None, Some(b"b")).unwrap();
    /// let mut records = blob_records(b.finish().unwrap());
    /// let mut values = Vec::new();
    /// while let Some(r) = records.next_view() {
    ///     values.push(r.unwrap().value.unwrap().to_vec());
    /// }
    /// assert_eq!(values, [b"a".to_vec(), b"b".to_vec()]);
    /// ```
    #[inline]
    pub fn next_view(&mut self) -> Option<Result<RecordView<'_>, BatchError>> {
        let raw = match self.next_raw()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let index_in_blob = self.last_index();
        let batch_index = self.current_batch_index();
        let bytes = self.current_bytes();
        let slice = |r: Option<std::ops::Range<usize>>| r.and_then(|r| bytes.get(r));
        Some(Ok(RecordView {
            index_in_blob,
            batch_index,
            timestamp: raw.timestamp,
            key: slice(raw.key),
            value: slice(raw.value),
            headers: HeadersView {
                bytes: bytes.get(raw.headers).unwrap_or_default(),
                count: raw.n_headers,
            },
        }))
    }
}
