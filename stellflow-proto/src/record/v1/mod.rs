//! The documented v1 record batch (PROTOCOL.md §4.3): fixed-width, CRC-32C, the format the Java
//! and Go SDKs read and write.
//!
//! * [`V1BatchHeader`]: the 57-byte batch header;
//! * [`V1Batch`], [`V1Records`], [`Record`], [`Headers`]: the zero-copy decoder;
//! * [`V1BatchFields`], [`RecordFields`]: an encoder where every field is explicit;
//! * [`HeaderRef`] and [`record_size`]: what the hot-path builder
//!   ([`BatchBuilder`](crate::record::BatchBuilder)) needs from record headers.

mod decode;
mod fields;
mod header;
mod headers;
pub(crate) mod write;

pub(crate) use decode::RawRecord;
pub use decode::{Record, V1Batch, V1Batches, V1Records};
pub use fields::{RecordFields, V1BatchFields};
pub use header::V1BatchHeader;
pub use headers::{Header, Headers, HeadersIter, RawHeadersIter};
pub use write::{HeaderRef, record_size};

/// Byte offsets and sizes of the v1 layout.
pub mod layout {
    /// Offset of `baseOffsetDelta` (int32).
    pub const BASE_OFFSET_DELTA: usize = 0;
    /// Offset of `batchLength` (int32, bytes after itself).
    pub const BATCH_LENGTH: usize = 4;
    /// Offset of `partitionLeaderEpoch` (int32).
    pub const PARTITION_LEADER_EPOCH: usize = 8;
    /// Offset of `magic` (int8, 1).
    pub const MAGIC: usize = 12;
    /// Offset of `crc32c` (int32).
    pub const CRC: usize = 13;
    /// Offset of `attributes` (int16): the CRC-32C covers this byte to the end.
    pub const ATTRIBUTES: usize = 17;
    /// Offset of `lastOffsetDelta` (int32).
    pub const LAST_OFFSET_DELTA: usize = 19;
    /// Offset of `baseTimestamp` (int64).
    pub const BASE_TIMESTAMP: usize = 23;
    /// Offset of `maxTimestamp` (int64).
    pub const MAX_TIMESTAMP: usize = 31;
    /// Offset of `producerId` (int64).
    pub const PRODUCER_ID: usize = 39;
    /// Offset of `producerEpoch` (int16).
    pub const PRODUCER_EPOCH: usize = 47;
    /// Offset of `baseSequence` (int32).
    pub const BASE_SEQUENCE: usize = 49;
    /// Offset of `recordCount` (int32).
    pub const RECORD_COUNT: usize = 53;
    /// Size of the batch header; records start here.
    pub const HEADER_LEN: usize = 57;
    /// Bytes before `batchLength` counts (baseOffsetDelta and batchLength itself).
    pub const LENGTH_PREFIX: usize = 8;
    /// The only magic value defined.
    pub const MAGIC_V1: i8 = 1;
    /// Smallest record: length, attributes, timestampDelta, offsetDelta, key, value, header
    /// count.
    pub const MIN_RECORD_SIZE: usize = 4 + 1 + 8 + 4 + 4 + 4 + 4;
    /// Smallest header: key length and value length.
    pub const MIN_HEADER_SIZE: usize = 2 + 4;
    /// Attribute bits 0–2: compression codec.
    pub const COMPRESSION_MASK: i16 = 0x07;
    /// Attribute bit 3: timestamp type (1 = log-append time).
    pub const TIMESTAMP_TYPE_BIT: i16 = 0x08;
    /// Attribute bit 4: control batch.
    pub const CONTROL_BIT: i16 = 0x10;
    /// Attribute bit 5: transactional batch.
    pub const TRANSACTIONAL_BIT: i16 = 0x20;
}
