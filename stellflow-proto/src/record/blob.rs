//! The blob splitter: one Fetch entry's bytes (one offset) into batches and records, whatever
//! the format — SRFB, or one or more v1 batches back to back.

use super::BatchError;
use super::srfb::{SrfbBatch, SrfbHeader, is_srfb};
use super::v1::{RawRecord, Record, V1Batch, V1BatchHeader, V1Batches, V1Records};
use bytes::Bytes;

/// The format of a stored blob, sniffed from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlobFormat {
    /// One or more v1 batches (anything not starting with the SRFB magic).
    V1,
    /// An SRFB envelope (starts with `SRFB`).
    Srfb,
}

/// Sniffs a blob's format the way the server does: SRFB if it starts with the magic.
pub fn sniff(blob: &[u8]) -> BlobFormat {
    if is_srfb(blob) {
        BlobFormat::Srfb
    } else {
        BlobFormat::V1
    }
}

/// How many records a blob says it holds, from its headers alone: the SRFB header's count, or
/// the sum of each v1 batch header's `recordCount` (batches walked by their lengths). Nothing
/// is decoded and no CRC is checked, so this is what the producer wrote; decoding the blob
/// ([`blob_records`]) may still find it corrupt. An `Err` names a header that cannot be read
/// or a batch length that runs past the blob.
///
/// ```
/// # use stellflow_proto::record::{BatchBuilder, BatchParams, declared_record_count};
/// let mut b = BatchBuilder::new(BatchParams::default());
/// b.append(0, None, Some(b"a")).unwrap();
/// b.append(0, None, Some(b"b")).unwrap();
/// assert_eq!(declared_record_count(&b.finish().unwrap()).unwrap(), 2);
/// ```
pub fn declared_record_count(blob: &[u8]) -> Result<u64, BatchError> {
    if sniff(blob) == BlobFormat::Srfb {
        return Ok(u64::try_from(SrfbHeader::parse(blob)?.record_count).unwrap_or(0));
    }
    let (mut rest, mut count) = (blob, 0u64);
    while !rest.is_empty() {
        let header = V1BatchHeader::parse(rest)?;
        let len = header.total_len().filter(|&l| l > 0);
        let Some(len) = len.filter(|&l| l <= rest.len()) else {
            return Err(BatchError::truncated(
                "v1 batch",
                len.unwrap_or(0),
                rest.len(),
                blob.len() - rest.len(),
            ));
        };
        count += u64::try_from(header.record_count).unwrap_or(0);
        rest = &rest[len..];
    }
    Ok(count)
}

/// One batch found in a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlobBatch {
    /// A v1 batch stored directly.
    V1(V1Batch),
    /// A validated SRFB envelope (its content holds our v1 batch).
    Srfb(SrfbBatch),
}

/// Splits a blob into its batches; see [`split_blob`].
#[derive(Debug, Clone)]
pub struct BlobBatches {
    srfb: Option<Bytes>,
    v1: V1Batches,
}

/// Splits one blob into batches: a single validated SRFB envelope, or each v1 batch in turn.
/// An empty blob holds none. Stops after the first error.
pub fn split_blob(blob: Bytes) -> BlobBatches {
    if is_srfb(&blob) {
        BlobBatches {
            srfb: Some(blob),
            v1: V1Batches::new(Bytes::new()),
        }
    } else {
        BlobBatches {
            srfb: None,
            v1: V1Batches::new(blob),
        }
    }
}

impl Iterator for BlobBatches {
    type Item = Result<BlobBatch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(blob) = self.srfb.take() {
            return Some(SrfbBatch::validate(blob).map(BlobBatch::Srfb));
        }
        self.v1.next().map(|r| r.map(BlobBatch::V1))
    }
}

impl std::iter::FusedIterator for BlobBatches {}

/// A record and its position in the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRecord {
    /// Position in the blob, counted across all its batches: with the blob's offset this is
    /// the record's identity (DESIGN.md §3.1).
    pub index_in_blob: u32,
    /// Which v1 batch of the blob (or of the SRFB content) holds it.
    pub batch_index: u32,
    /// The blob's format.
    pub format: BlobFormat,
    /// The record.
    pub record: Record,
}

/// Iterates every record of a blob; see [`blob_records`].
#[derive(Debug, Clone)]
pub struct BlobRecords {
    format: BlobFormat,
    pending_srfb: Option<Bytes>,
    srfb_header: Option<SrfbHeader>,
    batches: V1Batches,
    current: Option<(V1BatchHeader, V1Records)>,
    /// The batch after `current`, checked early to tell whether a record is the blob's last.
    ahead: Option<Result<V1Batch, BatchError>>,
    batch_index: u32,
    next_index: u32,
    /// The index of the record `next_raw` returned last (the views read it from here).
    last_index: u32,
    done: bool,
    /// The walk stopped at an error.
    failed: bool,
}

/// Iterates every record of one blob, through SRFB envelopes (inflating gzip) and across v1
/// batches written back to back, numbering them `index_in_blob` 0, 1, 2, …
///
/// Yields `Err` once, for the first problem, and then stops; records before it were valid.
///
/// ```
/// # use stellflow_proto::record::{BatchBuilder, BatchParams, Envelope, Compression, blob_records};
/// let mut b = BatchBuilder::with_capacity(BatchParams::default(), Envelope::Srfb(Compression::Gzip), 256);
/// b.append(0, None, Some(b"a")).unwrap();
/// b.append(0, None, Some(b"b")).unwrap();
/// let indexes: Vec<u32> = blob_records(b.finish().unwrap()).map(|r| r.unwrap().index_in_blob).collect();
/// assert_eq!(indexes, [0, 1]);
/// ```
pub fn blob_records(blob: Bytes) -> BlobRecords {
    let format = sniff(&blob);
    let (pending_srfb, batches) = match format {
        BlobFormat::Srfb => (Some(blob), V1Batches::new(Bytes::new())),
        BlobFormat::V1 => (None, V1Batches::new(blob)),
    };
    BlobRecords {
        format,
        pending_srfb,
        srfb_header: None,
        batches,
        current: None,
        ahead: None,
        batch_index: 0,
        next_index: 0,
        last_index: 0,
        done: false,
        failed: false,
    }
}

impl BlobRecords {
    /// The blob's format.
    pub fn format(&self) -> BlobFormat {
        self.format
    }

    /// The header of the v1 batch the last record came from.
    pub fn current_batch(&self) -> Option<&V1BatchHeader> {
        self.current.as_ref().map(|(h, _)| h)
    }

    /// The SRFB header, once the envelope has been validated (SRFB blobs only).
    pub fn srfb_header(&self) -> Option<&SrfbHeader> {
        self.srfb_header.as_ref()
    }

    /// How many records were yielded so far (the next record's `index_in_blob`).
    pub fn next_index(&self) -> u32 {
        self.next_index
    }

    /// Whether the record yielded last was the blob's last: its batch ended cleanly after it
    /// and no batch with records follows. Known without decoding another record (the next
    /// batch, if any, is checked now, once); `false` when what follows is malformed — the
    /// next call yields that error — and before the first record.
    ///
    /// ```
    /// # use stellflow_proto::record::{BatchBuilder, BatchParams, blob_records};
    /// let mut b = BatchBuilder::new(BatchParams::default());
    /// b.append(0, None, Some(b"a")).unwrap();
    /// b.append(0, None, Some(b"b")).unwrap();
    /// let mut records = blob_records(b.finish().unwrap());
    /// records.next();
    /// assert!(!records.at_end());
    /// records.next();
    /// assert!(records.at_end());
    /// ```
    #[inline]
    pub fn at_end(&mut self) -> bool {
        let complete = matches!(&self.current, Some((_, r)) if r.is_complete());
        complete && !self.failed && self.ahead.is_none() && !self.more_follows()
    }

    /// After the current batch ended cleanly: whether another batch (or an error) follows.
    /// Batches without records are skipped here (counted, as the main loop counts them), so
    /// that a record followed only by empty batches is still known as the last. Once per
    /// batch: kept out of line so that the per-record path of `next` stays small.
    #[inline(never)]
    fn more_follows(&mut self) -> bool {
        loop {
            match self.batches.next() {
                None => return false,
                Some(Ok(b)) if b.record_count() == 0 && b.records().is_complete() => {
                    self.batch_index = self.batch_index.saturating_add(1);
                }
                other => {
                    self.ahead = other;
                    return true;
                }
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn fail(&mut self, e: BatchError) -> Option<Result<BlobRecord, BatchError>> {
        self.fail_with(e)
    }

    /// Stops the walk at `e` (wrapped as an SRFB content error inside an envelope).
    #[cold]
    #[inline(never)]
    fn fail_with<T>(&mut self, e: BatchError) -> Option<Result<T, BatchError>> {
        self.done = true;
        self.failed = true;
        let e = match self.format {
            BlobFormat::Srfb
                if !matches!(e, BatchError::SrfbContent { .. }) && self.srfb_header.is_some() =>
            {
                BatchError::SrfbContent {
                    source: Box::new(e),
                }
            }
            _ => e,
        };
        Some(Err(e))
    }
}

impl BlobRecords {
    /// `record`, the next of the current batch, numbered in the blob.
    #[inline(always)]
    fn yielded(&mut self, record: Record) -> BlobRecord {
        let index_in_blob = self.next_index;
        self.next_index = self.next_index.saturating_add(1);
        BlobRecord {
            index_in_blob,
            batch_index: self.batch_index.saturating_sub(1),
            format: self.format,
            record,
        }
    }

    /// The next record when the current batch has none left (or before the first batch):
    /// validates the SRFB envelope, moves to the next batch (checking its CRC) and yields its
    /// first record. Once per batch, so kept out of line: the per-record path of
    /// [`BlobRecords::next`] stays small enough to inline into its callers.
    #[inline(never)]
    fn next_from_next_batch(&mut self) -> Option<Result<BlobRecord, BatchError>> {
        let record = self.next_batch_with(V1Records::next)?;
        Some(record.map(|record| self.yielded(record)))
    }

    /// The walk of `next_from_next_batch`, reading a record with `read` (owned or raw).
    #[inline(always)]
    fn next_batch_with<T>(
        &mut self,
        read: impl Fn(&mut V1Records) -> Option<Result<T, BatchError>>,
    ) -> Option<Result<T, BatchError>> {
        if self.done {
            return None;
        }
        if let Some(blob) = self.pending_srfb.take() {
            match SrfbBatch::validate(blob) {
                Ok(b) => {
                    self.srfb_header = Some(*b.header());
                    self.batches = V1Batches::new(b.content().clone());
                }
                Err(e) => return self.fail_with(e),
            }
        }
        loop {
            if let Some((_, records)) = &mut self.current {
                match read(records) {
                    Some(Ok(record)) => return Some(Ok(record)),
                    Some(Err(e)) => return self.fail_with(e),
                    None => {}
                }
            }
            let batch = match self.ahead.take() {
                Some(b) => Some(b),
                None => self.batches.next(),
            };
            match batch {
                Some(Ok(batch)) => {
                    self.current = Some((*batch.header(), batch.records()));
                    self.batch_index = self.batch_index.saturating_add(1);
                }
                Some(Err(e)) => return self.fail_with(e),
                None => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

impl BlobRecords {
    /// The next record as byte ranges of [`BlobRecords::current_bytes`]:
    /// [`BlobRecords::next`] without building a [`Record`] (no reference count taken), for
    /// the borrowed views of `record::view`; its index in the blob is
    /// [`BlobRecords::last_index`].
    ///
    /// The per-record case returns straight from the current batch's decode (as
    /// [`Iterator::next`] does), and the index is not paired with the record: an
    /// `Option<Result<(u32, RawRecord)>>` built from the decoder's result would be written
    /// field by field and read back whole, a store-forwarding stall on every record.
    #[inline]
    pub(crate) fn next_raw(&mut self) -> Option<Result<RawRecord, BatchError>> {
        if !self.done
            && let Some((_, records)) = &mut self.current
        {
            match records.next_raw() {
                Some(Ok(r)) => {
                    self.count_one();
                    return Some(Ok(r));
                }
                Some(Err(e)) => return self.fail_with(e),
                None => {}
            }
        }
        let r = self.next_raw_from_next_batch()?;
        if r.is_ok() {
            self.count_one();
        }
        Some(r)
    }

    /// One more record was yielded: the index moves on (and [`BlobRecords::last_index`]
    /// names the one yielded).
    #[inline(always)]
    fn count_one(&mut self) {
        self.last_index = self.next_index;
        self.next_index = self.next_index.saturating_add(1);
    }

    /// The index in the blob of the record [`BlobRecords::next_raw`] returned last.
    #[inline]
    pub(crate) fn last_index(&self) -> u32 {
        self.last_index
    }

    /// `next_from_next_batch` of the raw path; once per batch.
    #[inline(never)]
    fn next_raw_from_next_batch(&mut self) -> Option<Result<RawRecord, BatchError>> {
        self.next_batch_with(V1Records::next_raw)
    }

    /// The bytes of the batch the last record came from (empty before the first).
    #[inline]
    pub(crate) fn current_bytes(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, r)| r.bytes())
    }

    /// [`BlobRecords::current_bytes`] as the shared buffer (empty before the first record).
    #[inline]
    pub(crate) fn current_shared_bytes(&self) -> &Bytes {
        static EMPTY: Bytes = Bytes::new();
        self.current
            .as_ref()
            .map_or(&EMPTY, |(_, r)| r.shared_bytes())
    }

    /// The index (in the blob's v1 batches) of the batch the last record came from.
    #[inline]
    pub(crate) fn current_batch_index(&self) -> u32 {
        self.batch_index.saturating_sub(1)
    }
}

impl Iterator for BlobRecords {
    type Item = Result<BlobRecord, BatchError>;

    /// The next record: straight from the current batch when it has one (inlined, the
    /// per-record path), else through `next_from_next_batch`.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if !self.done
            && let Some((_, records)) = &mut self.current
        {
            match records.next() {
                Some(Ok(record)) => return Some(Ok(self.yielded(record))),
                Some(Err(e)) => return self.fail(e),
                None => {}
            }
        }
        self.next_from_next_batch()
    }
}

impl std::iter::FusedIterator for BlobRecords {}
