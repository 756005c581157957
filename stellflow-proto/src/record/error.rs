//! The one error type of the record layer: what is wrong with a batch, a blob or a record.

/// Why a batch, an SRFB envelope or a blob could not be read or written.
///
/// Every variant names the field at fault and the numbers involved, so a corrupt blob can be
/// diagnosed from the error alone. Decoding errors mean the bytes are corrupt or not in a format
/// this crate reads (skip or report the blob; retrying the same bytes gives the same error).
/// Encoding errors mean a value cannot be represented on the wire (make it smaller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The input ended before a field was complete.
    #[error("truncated {what}: needs {needed} bytes at offset {offset}, only {available} present")]
    Truncated {
        /// The field or structure being read.
        what: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes that were present.
        available: usize,
        /// Offset of the field from the start of the batch (or blob).
        offset: usize,
    },
    /// A v1 batch's `batchLength` disagrees with the bytes present.
    #[error("v1 batch length mismatch: batchLength {declared} declares {} bytes, {actual} present", i64::from(*.declared) + 8)]
    V1LengthMismatch {
        /// The `batchLength` field (bytes after itself).
        declared: i32,
        /// Total bytes present for the batch.
        actual: usize,
    },
    /// A v1 batch's CRC-32C does not match its bytes.
    #[error("v1 batch CRC-32C mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    V1Crc {
        /// The CRC-32C stored in the batch header.
        expected: u32,
        /// The CRC-32C computed over bytes 17..end.
        actual: u32,
    },
    /// A v1 batch carries a magic byte other than 1.
    #[error("unsupported v1 batch magic {magic} (only 1 is defined)")]
    V1Magic {
        /// The magic byte found at offset 12.
        magic: i8,
    },
    /// A v1 batch declares compressed records (attributes bits 0–2); no SDK writes them and
    /// this crate does not read them.
    #[error(
        "v1 batch attributes {attributes:#06x} declare compression codec {codec}, which is not supported"
    )]
    V1Compression {
        /// The batch attributes.
        attributes: i16,
        /// The codec bits (1 gzip, 2 snappy, 3 lz4, 4 zstd, …).
        codec: u8,
    },
    /// A v1 batch's `recordCount` is negative or cannot fit in the bytes present.
    #[error(
        "v1 record count {count} is invalid: records need at least {min_record_size} bytes each, {available} bytes present"
    )]
    V1RecordCount {
        /// The declared count.
        count: i32,
        /// Smallest encoding of one record.
        min_record_size: usize,
        /// Bytes present for the records.
        available: usize,
    },
    /// A record's own length prefix is negative or runs past the end of the batch.
    #[error("record {index}: length {length} is invalid, {available} bytes remain in the batch")]
    RecordLength {
        /// Index of the record in its batch.
        index: u32,
        /// The record's length prefix.
        length: i32,
        /// Bytes that remained.
        available: usize,
    },
    /// A record's fields do not fill its declared length exactly.
    #[error("record {index}: {detail}")]
    RecordLayout {
        /// Index of the record in its batch.
        index: u32,
        /// What is wrong (field overruns, bytes left over, …).
        detail: &'static str,
    },
    /// Bytes are left in a v1 batch after its last record.
    #[error("v1 batch has {extra} bytes left after its {count} records")]
    V1TrailingBytes {
        /// Bytes left over.
        extra: usize,
        /// The declared record count.
        count: i32,
    },
    /// The bytes do not start with the SRFB magic (the server treats them as opaque).
    #[error("not an SRFB blob: it does not start with the magic 0x53524642")]
    NotSrfb,
    /// A blob starts with the SRFB magic but is shorter than the 37-byte header.
    #[error("SRFB header is incomplete: {len} bytes, 37 needed")]
    SrfbHeaderIncomplete {
        /// Bytes present.
        len: usize,
    },
    /// An SRFB header carries a version other than 1.
    #[error("unsupported SRFB version {version} (only 1 is defined)")]
    SrfbVersion {
        /// The version found.
        version: i16,
    },
    /// An SRFB header carries a compression code other than 0 (none) and 1 (gzip).
    #[error("unknown SRFB compression code {code} (0 = none, 1 = gzip)")]
    UnknownCompression {
        /// The code found.
        code: i8,
    },
    /// An SRFB header has a non-positive record count or a negative length.
    #[error(
        "invalid SRFB length metadata: recordCount {record_count} (must be > 0), uncompressedLength {uncompressed_length} and payloadLength {payload_length} (must be >= 0)"
    )]
    SrfbMetadata {
        /// The record count.
        record_count: i32,
        /// The uncompressed length.
        uncompressed_length: i32,
        /// The payload length.
        payload_length: i32,
    },
    /// `37 + payloadLength` differs from the blob length (truncated, or trailing bytes).
    #[error("SRFB payload length mismatch: payloadLength {declared} needs a {} byte blob, {actual} bytes present", i64::from(*.declared) + 37)]
    SrfbPayloadLength {
        /// The payload length field.
        declared: i32,
        /// Bytes present in the blob.
        actual: usize,
    },
    /// An SRFB payload's CRC-32 does not match.
    #[error("SRFB CRC-32 mismatch: header says {expected:#010x}, payload gives {actual:#010x}")]
    SrfbCrc {
        /// The CRC-32 stored in the header.
        expected: u32,
        /// The CRC-32 computed over the payload bytes.
        actual: u32,
    },
    /// A gzip payload could not be inflated.
    #[error("SRFB gzip payload cannot be inflated: {detail}")]
    Gzip {
        /// The inflater's message.
        detail: String,
    },
    /// The (inflated) payload length differs from `uncompressedLength`.
    #[error(
        "SRFB uncompressed length mismatch: uncompressedLength {declared}, payload inflates to {actual}{}",
        if *.more { " or more bytes" } else { " bytes" }
    )]
    UncompressedLength {
        /// The uncompressed length field.
        declared: i32,
        /// Bytes the payload produced (inflation stops one byte past `declared`).
        actual: usize,
        /// Whether inflation was stopped early because it exceeded `declared`.
        more: bool,
    },
    /// The content of an SRFB envelope is not a v1 batch (records cannot be read from it).
    #[error("SRFB payload is not a v1 record batch: {source}")]
    SrfbContent {
        /// What is wrong with the payload as a v1 batch.
        source: Box<BatchError>,
    },
    /// A value is too large for its wire length field (encoding).
    #[error("{what} is too large to encode: {len} bytes, at most {max}")]
    TooLarge {
        /// The value being encoded.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The most the wire format can carry.
        max: usize,
    },
    /// An SRFB envelope needs at least one record (the server rejects `recordCount` 0).
    #[error("an SRFB batch needs at least one record")]
    EmptySrfb,
}

impl BatchError {
    /// A [`BatchError::Truncated`].
    pub(crate) fn truncated(
        what: &'static str,
        needed: usize,
        available: usize,
        offset: usize,
    ) -> Self {
        BatchError::Truncated {
            what,
            needed,
            available,
            offset,
        }
    }
}
