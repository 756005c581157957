//! The 57-byte v1 batch header: its fields, and reading it from bytes.

use super::layout;
use crate::record::BatchError;
use crate::record::cursor::Cursor;

/// The fixed header of a v1 batch, every field as on the wire (PROTOCOL.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct V1BatchHeader {
    /// `baseOffsetDelta`; producers write 0 and the broker never rewrites it.
    pub base_offset_delta: i32,
    /// `batchLength`: bytes after this field (total − 8).
    pub batch_length: i32,
    /// `partitionLeaderEpoch` (Java writes −1).
    pub partition_leader_epoch: i32,
    /// `magic` (1).
    pub magic: i8,
    /// `crc32c`: CRC-32C over bytes 17..end.
    pub crc32c: u32,
    /// `attributes` (see [`layout`] for the bits).
    pub attributes: i16,
    /// `lastOffsetDelta` (`recordCount − 1`, 0 for an empty batch).
    pub last_offset_delta: i32,
    /// `baseTimestamp` in ms since the epoch; record timestamps are deltas to it.
    pub base_timestamp: i64,
    /// `maxTimestamp`: the largest record timestamp.
    pub max_timestamp: i64,
    /// `producerId`, −1 when not idempotent.
    pub producer_id: i64,
    /// `producerEpoch`, −1 when not idempotent.
    pub producer_epoch: i16,
    /// `baseSequence`, −1 when not idempotent.
    pub base_sequence: i32,
    /// `recordCount`.
    pub record_count: i32,
}

impl V1BatchHeader {
    /// Reads the header from the first 57 bytes of `bytes` (nothing is validated here).
    pub fn parse(bytes: &[u8]) -> Result<Self, BatchError> {
        let mut c = Cursor::new(bytes);
        let h = (|| {
            Some(V1BatchHeader {
                base_offset_delta: c.i32()?,
                batch_length: c.i32()?,
                partition_leader_epoch: c.i32()?,
                magic: c.i8()?,
                crc32c: c.i32()? as u32,
                attributes: c.i16()?,
                last_offset_delta: c.i32()?,
                base_timestamp: c.i64()?,
                max_timestamp: c.i64()?,
                producer_id: c.i64()?,
                producer_epoch: c.i16()?,
                base_sequence: c.i32()?,
                record_count: c.i32()?,
            })
        })();
        h.ok_or_else(|| {
            BatchError::truncated("v1 batch header", layout::HEADER_LEN, bytes.len(), 0)
        })
    }

    /// The compression codec bits (0 = none; this crate reads only 0).
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & layout::COMPRESSION_MASK) as u8
    }

    /// Whether the timestamp-type bit says log-append time.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & layout::TIMESTAMP_TYPE_BIT != 0
    }

    /// Whether the control bit is set (no SDK acts on it today).
    pub fn is_control(&self) -> bool {
        self.attributes & layout::CONTROL_BIT != 0
    }

    /// Whether the transactional bit is set (no SDK acts on it today).
    pub fn is_transactional(&self) -> bool {
        self.attributes & layout::TRANSACTIONAL_BIT != 0
    }

    /// Whether the producer fields mark an idempotent batch (`producerId ≥ 0` and
    /// `baseSequence ≥ 0`).
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0 && self.base_sequence >= 0
    }

    /// Total encoded size of the batch, from `batchLength` (`None` if negative).
    pub fn total_len(&self) -> Option<usize> {
        usize::try_from(self.batch_length)
            .ok()?
            .checked_add(layout::LENGTH_PREFIX)
    }
}
