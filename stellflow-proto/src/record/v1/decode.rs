//! The zero-copy v1 decoder: validate a batch, then walk its records lazily.

use super::header::V1BatchHeader;
use super::headers::{Headers, skip_headers};
use super::layout;
use crate::record::BatchError;
use crate::record::cursor::Cursor;
use bytes::{Buf, Bytes};

/// A validated v1 batch: its header, and its bytes for lazy record access.
///
/// Parsing checks `batchLength` against the bytes present, the magic, the CRC-32C over bytes
/// 17..end, the compression bits (only uncompressed batches are readable) and that
/// `recordCount` can fit; records are checked one by one as [`V1Batch::records`] yields them.
///
/// ```
/// # use stellflow_proto::record::{BatchBuilder, BatchParams, V1Batch};
/// let mut b = BatchBuilder::new(BatchParams::default());
/// b.append(1_700_000_000_000, Some(b"k"), Some(b"v")).unwrap();
/// let batch = V1Batch::parse(b.finish().unwrap()).unwrap();
/// for record in batch.records() {
///     let record = record.unwrap();
///     assert_eq!(record.value.as_deref(), Some(&b"v"[..]));
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Batch {
    header: V1BatchHeader,
    bytes: Bytes,
}

impl V1Batch {
    /// Parses `bytes` as exactly one v1 batch (`8 + batchLength` must equal its length).
    pub fn parse(bytes: Bytes) -> Result<Self, BatchError> {
        let header = validate(&bytes, true)?;
        Ok(V1Batch { header, bytes })
    }

    /// Parses the first v1 batch of `bytes` (which may hold more after it); the batch's
    /// [`encoded_len`](Self::encoded_len) says where the next one starts.
    pub fn parse_prefix(bytes: &Bytes) -> Result<Self, BatchError> {
        let header = validate(bytes, false)?;
        let total = header.total_len().unwrap_or(0).min(bytes.len());
        Ok(V1Batch {
            header,
            bytes: bytes.slice(..total),
        })
    }

    /// The batch header.
    pub fn header(&self) -> &V1BatchHeader {
        &self.header
    }

    /// The batch's bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Encoded size of the batch (`8 + batchLength`).
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// Number of records the header declares.
    pub fn record_count(&self) -> u32 {
        self.header.record_count.max(0) as u32
    }

    /// Iterates the records lazily; each is checked as it is reached.
    pub fn records(&self) -> V1Records {
        V1Records {
            bytes: self.bytes.clone(),
            pos: layout::HEADER_LEN,
            index: 0,
            count: self.record_count(),
            base_timestamp: self.header.base_timestamp,
            done: false,
        }
    }
}

/// Checks a batch at the start of `bytes`; `exact` requires it to span all of `bytes`.
fn validate(bytes: &[u8], exact: bool) -> Result<V1BatchHeader, BatchError> {
    let mut c = Cursor::new(bytes);
    let batch_length = match (c.i32(), c.i32()) {
        (Some(_), Some(l)) => l,
        _ => {
            return Err(BatchError::truncated(
                "v1 batch length prefix",
                layout::LENGTH_PREFIX,
                bytes.len(),
                0,
            ));
        }
    };
    let total = usize::try_from(batch_length)
        .ok()
        .and_then(|l| l.checked_add(layout::LENGTH_PREFIX));
    let total = match total {
        Some(t) if t == bytes.len() || (!exact && t < bytes.len()) => t,
        _ => {
            return Err(BatchError::V1LengthMismatch {
                declared: batch_length,
                actual: bytes.len(),
            });
        }
    };
    if total < layout::HEADER_LEN {
        return Err(BatchError::truncated(
            "v1 batch header",
            layout::HEADER_LEN,
            total,
            0,
        ));
    }
    let header = V1BatchHeader::parse(bytes)?;
    if header.magic != layout::MAGIC_V1 {
        return Err(BatchError::V1Magic {
            magic: header.magic,
        });
    }
    let covered = bytes.get(layout::ATTRIBUTES..total).unwrap_or_default();
    let actual = crate::record::checksum::crc32c(covered);
    if actual != header.crc32c {
        return Err(BatchError::V1Crc {
            expected: header.crc32c,
            actual,
        });
    }
    let codec = header.compression_codec();
    if codec != 0 {
        return Err(BatchError::V1Compression {
            attributes: header.attributes,
            codec,
        });
    }
    let available = total - layout::HEADER_LEN;
    let count = header.record_count;
    if count < 0 || (count as usize).saturating_mul(layout::MIN_RECORD_SIZE) > available {
        return Err(BatchError::V1RecordCount {
            count,
            min_record_size: layout::MIN_RECORD_SIZE,
            available,
        });
    }
    Ok(header)
}

/// One decoded record. `key`, `value` and the headers share the batch's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record attributes (unused, 0).
    pub attributes: i8,
    /// `timestampDelta` as on the wire.
    pub timestamp_delta: i64,
    /// The record time: the batch's `baseTimestamp` plus `timestamp_delta` (wrapping).
    pub timestamp: i64,
    /// `offsetDelta` as on the wire (the index the producer wrote; never used as an offset).
    pub offset_delta: i32,
    /// The key, `None` when null.
    pub key: Option<Bytes>,
    /// The value, `None` when null (a tombstone).
    pub value: Option<Bytes>,
    /// The headers, split lazily.
    pub headers: Headers,
}

/// Lazy iterator over the records of one [`V1Batch`].
///
/// Yields `Err` once for the first malformed record (or for bytes left after the last one)
/// and then stops.
#[derive(Debug, Clone)]
pub struct V1Records {
    bytes: Bytes,
    pos: usize,
    index: u32,
    count: u32,
    base_timestamp: i64,
    done: bool,
}

impl V1Records {
    /// Index (in the batch) of the record the next call yields.
    pub fn next_index(&self) -> u32 {
        self.index
    }

    /// Whether every declared record was read and the batch ends right after the last one:
    /// the iterator has nothing more to yield, not even a trailing-bytes error.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.index >= self.count && self.pos == self.bytes.len()
    }

    fn fail(&mut self, e: BatchError) -> Option<Result<Record, BatchError>> {
        self.done = true;
        Some(Err(e))
    }

    /// The next record as byte ranges of the batch (nothing shared, no reference count
    /// taken), checked as [`V1Records::next`] checks it; moves past it.
    #[inline]
    fn read_raw(&mut self) -> Result<RawRecord, BatchError> {
        let index = self.index;
        let bytes: &[u8] = &self.bytes;
        let mut c = Cursor::at(bytes, self.pos);
        let length = c
            .i32()
            .ok_or_else(|| BatchError::truncated("record length", 4, c.remaining(), self.pos))?;
        let start = c.pos();
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= bytes.len())
            .ok_or(BatchError::RecordLength {
                index,
                length,
                available: c.remaining(),
            })?;
        let mut r = Cursor::at(bytes.get(..end).unwrap_or_default(), start);
        let overrun = || BatchError::RecordLayout {
            index,
            detail: "fields overrun the record length",
        };
        let attributes = r.i8().ok_or_else(overrun)?;
        let timestamp_delta = r.i64().ok_or_else(overrun)?;
        let offset_delta = r.i32().ok_or_else(overrun)?;
        let key = r.nbytes().ok_or_else(overrun)?;
        let value = r.nbytes().ok_or_else(overrun)?;
        let header_count = r.i32().ok_or_else(overrun)?;
        let headers_start = r.pos();
        let n_headers = skip_headers(&mut r, header_count).ok_or_else(overrun)?;
        if r.pos() != end {
            return Err(BatchError::RecordLayout {
                index,
                detail: "bytes left over after the headers",
            });
        }
        self.pos = end;
        self.index += 1;
        Ok(RawRecord {
            attributes,
            timestamp_delta,
            timestamp: self.base_timestamp.wrapping_add(timestamp_delta),
            offset_delta,
            key,
            value,
            headers: headers_start..end,
            n_headers,
        })
    }

    #[inline]
    fn read(&mut self) -> Result<Record, BatchError> {
        let raw = self.read_raw()?;
        let batch = &self.bytes;
        Ok(Record {
            attributes: raw.attributes,
            timestamp_delta: raw.timestamp_delta,
            timestamp: raw.timestamp,
            offset_delta: raw.offset_delta,
            key: raw.key_in(batch),
            value: raw.value_in(batch),
            headers: raw.headers_in(batch),
        })
    }

    /// [`V1Records::next`] as byte ranges of [`V1Records::bytes`]: the borrowed-view path.
    #[inline]
    pub(crate) fn next_raw(&mut self) -> Option<Result<RawRecord, BatchError>> {
        if self.done {
            return None;
        }
        if self.index >= self.count {
            return self.end_of_batch();
        }
        match self.read_raw() {
            Ok(r) => Some(Ok(r)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Past the declared records: done, with the trailing-bytes error if bytes are left.
    #[inline(never)]
    fn end_of_batch<T>(&mut self) -> Option<Result<T, BatchError>> {
        self.done = true;
        let extra = self.bytes.len().saturating_sub(self.pos);
        if extra != 0 {
            return Some(Err(BatchError::V1TrailingBytes {
                extra,
                count: self.count as i32,
            }));
        }
        None
    }

    /// The batch's bytes, which [`RawRecord`]'s ranges index.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// [`V1Records::bytes`] as the shared buffer, for slicing owned parts out of it.
    #[inline]
    pub(crate) fn shared_bytes(&self) -> &Bytes {
        &self.bytes
    }
}

/// One record of a batch as byte ranges of the batch (see `V1Records::next_raw`).
#[derive(Debug, Clone)]
pub(crate) struct RawRecord {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub timestamp: i64,
    pub offset_delta: i32,
    pub key: Option<std::ops::Range<usize>>,
    pub value: Option<std::ops::Range<usize>>,
    /// The encoded headers (without their count), and how many.
    pub headers: std::ops::Range<usize>,
    pub n_headers: u32,
}

impl RawRecord {
    /// The key (`None` when null), sliced out of `batch`, the bytes the ranges index.
    #[inline(always)]
    pub(crate) fn key_in(&self, batch: &Bytes) -> Option<Bytes> {
        self.key.clone().map(|r| batch.slice(r))
    }

    /// The value (`None` when null), sliced out of `batch`.
    #[inline(always)]
    pub(crate) fn value_in(&self, batch: &Bytes) -> Option<Bytes> {
        self.value.clone().map(|r| batch.slice(r))
    }

    /// The headers, sliced out of `batch` (nothing shared when there are none).
    #[inline(always)]
    pub(crate) fn headers_in(&self, batch: &Bytes) -> Headers {
        if self.n_headers == 0 {
            Headers::default()
        } else {
            Headers::new(batch.slice(self.headers.clone()), self.n_headers)
        }
    }
}

impl Iterator for V1Records {
    type Item = Result<Record, BatchError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index >= self.count {
            return self.end_of_batch();
        }
        match self.read() {
            Ok(r) => Some(Ok(r)),
            Err(e) => self.fail(e),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            let left = (self.count - self.index) as usize;
            (0, Some(left + 1))
        }
    }
}

impl std::iter::FusedIterator for V1Records {}

/// Splits bytes holding v1 batches back to back (the Java SDK writes a large send to one
/// partition this way) into [`V1Batch`]es. Stops after the first error.
#[derive(Debug, Clone)]
pub struct V1Batches {
    rest: Bytes,
    failed: bool,
}

impl V1Batches {
    /// Splits `bytes`; empty bytes hold no batch.
    pub fn new(bytes: Bytes) -> Self {
        V1Batches {
            rest: bytes,
            failed: false,
        }
    }
}

impl Iterator for V1Batches {
    type Item = Result<V1Batch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        match V1Batch::parse_prefix(&self.rest) {
            Ok(batch) => {
                self.rest.advance(batch.encoded_len().min(self.rest.len()));
                Some(Ok(batch))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for V1Batches {}
