//! The producer hot-path builder: appends records straight into a `BytesMut` as a v1 batch,
//! optionally inside an SRFB envelope, and seals it in place.

use super::BatchError;
use super::srfb::{self, Compression, SRFB_HEADER_LEN, SrfbParams};
use super::v1::HeaderRef;
use super::v1::layout;
use super::v1::write::{HeadFields, put_head, put_record, seal_batch};
use bytes::{BufMut, Bytes, BytesMut};

/// The batch-level fields a producer chooses when it opens a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchParams {
    /// `baseTimestamp`: record timestamps are written as deltas to it (use the first record's
    /// time).
    pub base_timestamp: i64,
    /// `producerId` (−1 = not idempotent).
    pub producer_id: i64,
    /// `producerEpoch` (−1 = not idempotent).
    pub producer_epoch: i16,
    /// `baseSequence` (−1 = not idempotent).
    pub base_sequence: i32,
    /// `partitionLeaderEpoch` (the Java SDK writes −1).
    pub partition_leader_epoch: i32,
    /// Batch `attributes` (0; the compression bits must stay 0 for readers).
    pub attributes: i16,
}

impl Default for BatchParams {
    /// Not idempotent, timestamp 0, leader epoch −1, attributes 0.
    fn default() -> Self {
        BatchParams {
            base_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            partition_leader_epoch: -1,
            attributes: 0,
        }
    }
}

/// How the finished v1 batch is packaged as a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Envelope {
    /// The bare v1 batch: readable by the Java and Go SDKs, never validated by the server.
    #[default]
    V1,
    /// The v1 batch as the payload of an SRFB envelope: CRC-checked by the server, and the only
    /// format it de-duplicates (DESIGN.md §3.2).
    Srfb(Compression),
}

/// Builds one blob record by record, writing bytes directly with no per-record allocation.
///
/// ```
/// # use stellflow_proto::record::{BatchBuilder, BatchParams, Envelope, blob_records};
/// let params = BatchParams { base_timestamp: 1_000, ..BatchParams::default() };
/// let mut b = BatchBuilder::with_capacity(params, Envelope::V1, 1 << 20);
/// b.append(1_000, Some(b"k1"), Some(b"v1")).unwrap();
/// b.append_with_headers(1_005, None, Some(b"v2"), [("trace", Some(b"abc"))]).unwrap();
/// assert_eq!(b.record_count(), 2);
/// let blob = b.finish().unwrap();
/// let values: Vec<_> = blob_records(blob).map(|r| r.unwrap().record.value).collect();
/// assert_eq!(values[1].as_deref(), Some(&b"v2"[..]));
/// ```
#[derive(Debug)]
pub struct BatchBuilder {
    buf: BytesMut,
    start: usize,
    batch_start: usize,
    envelope: Envelope,
    params: BatchParams,
    count: i32,
    max_timestamp: Option<i64>,
    gzip_level: u32,
}

impl BatchBuilder {
    /// A v1 batch in a fresh buffer.
    pub fn new(params: BatchParams) -> Self {
        Self::in_buffer(BytesMut::new(), params, Envelope::V1)
    }

    /// A blob in a fresh buffer of `capacity` bytes (reserve the batch size up front so
    /// appends never reallocate).
    pub fn with_capacity(params: BatchParams, envelope: Envelope, capacity: usize) -> Self {
        Self::in_buffer(BytesMut::with_capacity(capacity), params, envelope)
    }

    /// A blob appended to `buf` after the bytes already in it.
    pub fn in_buffer(mut buf: BytesMut, params: BatchParams, envelope: Envelope) -> Self {
        let start = buf.len();
        if let Envelope::Srfb(_) = envelope {
            buf.put_slice(&[0u8; SRFB_HEADER_LEN]);
        }
        let batch_start = buf.len();
        put_head(
            &mut buf,
            &HeadFields {
                base_offset_delta: 0,
                partition_leader_epoch: params.partition_leader_epoch,
                magic: layout::MAGIC_V1,
                attributes: params.attributes,
                base_timestamp: params.base_timestamp,
                producer_id: params.producer_id,
                producer_epoch: params.producer_epoch,
                base_sequence: params.base_sequence,
            },
        );
        BatchBuilder {
            buf,
            start,
            batch_start,
            envelope,
            params,
            count: 0,
            max_timestamp: None,
            gzip_level: srfb::DEFAULT_GZIP_LEVEL,
        }
    }

    /// Sets the gzip level (0–9) used by [`Envelope::Srfb`]`(`[`Compression::Gzip`]`)`;
    /// the default is [`srfb::DEFAULT_GZIP_LEVEL`].
    pub fn with_gzip_level(mut self, level: u32) -> Self {
        self.gzip_level = level.min(9);
        self
    }

    /// Appends a record without headers.
    #[inline]
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), BatchError> {
        self.append_with_headers(
            timestamp,
            key,
            value,
            std::iter::empty::<(&[u8], Option<&[u8]>)>(),
        )
    }

    /// Appends a record. `timestamp` is absolute (ms); it is written as a delta to the base
    /// timestamp. Fails, leaving the builder unchanged, only if a field or the batch would
    /// exceed its wire length limit.
    #[inline]
    pub fn append_with_headers<I, H>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: I,
    ) -> Result<(), BatchError>
    where
        I: IntoIterator<Item = H>,
        H: HeaderRef,
    {
        if self.count == i32::MAX {
            return Err(BatchError::TooLarge {
                what: "v1 record count",
                len: i32::MAX as usize + 1,
                max: i32::MAX as usize,
            });
        }
        let before = self.buf.len();
        put_record(
            &mut self.buf,
            0,
            timestamp.wrapping_sub(self.params.base_timestamp),
            self.count,
            key,
            value,
            headers,
        )?;
        let batch_len = self.buf.len() - self.batch_start;
        if batch_len > i32::MAX as usize {
            self.buf.truncate(before);
            return Err(BatchError::TooLarge {
                what: "v1 batch",
                len: batch_len,
                max: i32::MAX as usize,
            });
        }
        self.count += 1;
        self.max_timestamp = Some(self.max_timestamp.map_or(timestamp, |m| m.max(timestamp)));
        Ok(())
    }

    /// Records appended so far.
    pub fn record_count(&self) -> u32 {
        self.count as u32
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the blob takes so far, envelope header included (before compression for gzip,
    /// so an upper bound there). Compare `encoded_size() + record_size(..)` with the batch
    /// size limit before appending.
    pub fn encoded_size(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The envelope chosen at construction.
    pub fn envelope(&self) -> Envelope {
        self.envelope
    }

    /// The batch parameters chosen at construction.
    pub fn params(&self) -> &BatchParams {
        &self.params
    }

    /// Seals the blob and returns just its bytes.
    pub fn finish(self) -> Result<Bytes, BatchError> {
        let start = self.start;
        let mut buf = self.finish_into()?;
        Ok(buf.split_off(start).freeze())
    }

    /// Seals the blob and returns the whole buffer: the bytes it held before, then the blob.
    /// An SRFB envelope needs at least one record.
    pub fn finish_into(mut self) -> Result<BytesMut, BatchError> {
        let max_timestamp = self.max_timestamp.unwrap_or(self.params.base_timestamp);
        seal_batch(
            &mut self.buf,
            self.batch_start,
            (self.count - 1).max(0),
            max_timestamp,
            self.count,
        )?;
        let compression = match self.envelope {
            Envelope::V1 => return Ok(self.buf),
            Envelope::Srfb(c) => c,
        };
        let params = SrfbParams {
            producer_id: self.params.producer_id,
            producer_epoch: self.params.producer_epoch,
            base_sequence: self.params.base_sequence,
            record_count: self.count,
        };
        if self.count == 0 {
            return Err(BatchError::EmptySrfb);
        }
        let batch_len = self.buf.len() - self.batch_start;
        if let Compression::Gzip = compression {
            let batch = self.buf.split_off(self.batch_start);
            srfb::gzip_into(&batch, self.gzip_level, &mut self.buf)?;
        }
        srfb::seal(&mut self.buf, self.start, &params, compression, batch_len)?;
        Ok(self.buf)
    }
}
