//! The explicit v1 encoder: a batch with every header and record field settable, for tools,
//! tests and exact re-encoding. The producer hot path uses
//! [`BatchBuilder`](crate::record::BatchBuilder) instead.

use super::decode::V1Batch;
use super::headers::Header;
use super::layout;
use super::write::{HeadFields, put_head, put_record, seal_batch};
use crate::record::BatchError;
use bytes::{Bytes, BytesMut};

/// A v1 batch with every field explicit. Only `batchLength`, `crc32c` and `recordCount` are
/// computed when encoding; everything else — `lastOffsetDelta`, `maxTimestamp`, each record's
/// `offsetDelta` and `timestampDelta` — is written as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1BatchFields {
    /// `baseOffsetDelta`.
    pub base_offset_delta: i32,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// `magic` (1 for a readable batch).
    pub magic: i8,
    /// `attributes`.
    pub attributes: i16,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `baseTimestamp`.
    pub base_timestamp: i64,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
    /// The records.
    pub records: Vec<RecordFields>,
}

impl Default for V1BatchFields {
    /// An empty, non-idempotent batch as the SDKs write it: leader epoch −1, magic 1,
    /// producer fields −1.
    fn default() -> Self {
        V1BatchFields {
            base_offset_delta: 0,
            partition_leader_epoch: -1,
            magic: layout::MAGIC_V1,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records: Vec::new(),
        }
    }
}

/// One record with every field explicit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFields {
    /// `attributes`.
    pub attributes: i8,
    /// `timestampDelta`.
    pub timestamp_delta: i64,
    /// `offsetDelta`.
    pub offset_delta: i32,
    /// The key (`None` = null).
    pub key: Option<Bytes>,
    /// The value (`None` = null).
    pub value: Option<Bytes>,
    /// The headers.
    pub headers: Vec<Header>,
}

impl V1BatchFields {
    /// Appends the encoded batch to `out`. On error `out` is left as it was.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), BatchError> {
        let start = out.len();
        let result = self.encode_inner(out, start);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// Encodes into a fresh buffer.
    pub fn to_bytes(&self) -> Result<Bytes, BatchError> {
        let mut out = BytesMut::new();
        self.encode(&mut out)?;
        Ok(out.freeze())
    }

    fn encode_inner(&self, out: &mut BytesMut, start: usize) -> Result<(), BatchError> {
        let count = i32::try_from(self.records.len()).map_err(|_| BatchError::TooLarge {
            what: "v1 record count",
            len: self.records.len(),
            max: i32::MAX as usize,
        })?;
        put_head(
            out,
            &HeadFields {
                base_offset_delta: self.base_offset_delta,
                partition_leader_epoch: self.partition_leader_epoch,
                magic: self.magic,
                attributes: self.attributes,
                base_timestamp: self.base_timestamp,
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                base_sequence: self.base_sequence,
            },
        );
        for r in &self.records {
            put_record(
                out,
                r.attributes,
                r.timestamp_delta,
                r.offset_delta,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            )?;
        }
        seal_batch(
            out,
            start,
            self.last_offset_delta,
            self.max_timestamp,
            count,
        )
    }

    /// Copies a decoded batch into explicit fields (decodes every record).
    pub fn from_batch(batch: &V1Batch) -> Result<Self, BatchError> {
        let h = batch.header();
        let records = batch
            .records()
            .map(|r| {
                r.map(|r| RecordFields {
                    attributes: r.attributes,
                    timestamp_delta: r.timestamp_delta,
                    offset_delta: r.offset_delta,
                    key: r.key,
                    value: r.value,
                    headers: r.headers.iter().collect(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(V1BatchFields {
            base_offset_delta: h.base_offset_delta,
            partition_leader_epoch: h.partition_leader_epoch,
            magic: h.magic,
            attributes: h.attributes,
            last_offset_delta: h.last_offset_delta,
            base_timestamp: h.base_timestamp,
            max_timestamp: h.max_timestamp,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            records,
        })
    }
}
