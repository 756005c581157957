//! The server-native SRFB envelope (PROTOCOL.md §4.2): a 37-byte header, then a payload that is
//! CRC-32 (IEEE) checked and optionally gzip-compressed. Encoding, and validation exactly as the
//! server does it. Our payload is one v1 batch (DESIGN.md §3.2); the server never looks inside.

use super::BatchError;
use super::cursor::Cursor;
use super::v1::{V1BatchHeader, write::patch};
use bytes::{BufMut, Bytes, BytesMut};
use std::io::{Read, Write};

/// The magic at offset 0, `0x53524642` (ASCII `SRFB`).
pub const SRFB_MAGIC: i32 = 0x5352_4642;
/// Size of the SRFB header.
pub const SRFB_HEADER_LEN: usize = 37;
/// The only version the server accepts.
pub const SRFB_VERSION: i16 = 1;

/// The gzip level used unless one is given: 1 (fastest). Producer throughput matters more
/// than the last percent of ratio; level 6 (the JDK default) can be ten times slower on
/// repetitive payloads.
pub const DEFAULT_GZIP_LEVEL: u32 = 1;

/// Largest ratio deflate can reach (about 1032:1), used to bound the inflate buffer reserved
/// from an untrusted `uncompressedLength`.
const MAX_DEFLATE_RATIO: usize = 1032;

/// The payload compression of an SRFB envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Code 0: the payload is stored as is.
    #[default]
    None,
    /// Code 1: the payload is a gzip stream (the CRC covers the compressed bytes).
    Gzip,
}

impl Compression {
    /// The wire code.
    pub fn code(self) -> i8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
        }
    }

    /// The compression for a wire code, `None` for codes the server rejects.
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            _ => None,
        }
    }
}

/// Whether a blob is in the SRFB format: at least 4 bytes starting with the magic. This is the
/// server's only test; anything else is stored as opaque bytes.
pub fn is_srfb(blob: &[u8]) -> bool {
    blob.get(..4) == Some(&SRFB_MAGIC.to_be_bytes()[..])
}

/// The SRFB header fields after the magic, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrfbHeader {
    /// `version` (1).
    pub version: i16,
    /// `compression` code (see [`Compression`]).
    pub compression: i8,
    /// `producerId`; `≥ 0` together with `base_sequence ≥ 0` makes the batch idempotent.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
    /// `recordCount` (must be > 0).
    pub record_count: i32,
    /// `uncompressedLength`: the payload length after inflating.
    pub uncompressed_length: i32,
    /// `payloadLength`: bytes after the header.
    pub payload_length: i32,
    /// `crc`: CRC-32 (IEEE) over the payload bytes as sent.
    pub crc: u32,
}

impl SrfbHeader {
    /// Reads the header of `blob`, checking only the magic and that 37 bytes are present.
    pub fn parse(blob: &[u8]) -> Result<Self, BatchError> {
        if !is_srfb(blob) {
            return Err(BatchError::NotSrfb);
        }
        let mut c = Cursor::at(blob, 4);
        let h = (|| {
            Some(SrfbHeader {
                version: c.i16()?,
                compression: c.i8()?,
                producer_id: c.i64()?,
                producer_epoch: c.i16()?,
                base_sequence: c.i32()?,
                record_count: c.i32()?,
                uncompressed_length: c.i32()?,
                payload_length: c.i32()?,
                crc: c.i32()? as u32,
            })
        })();
        h.ok_or(BatchError::SrfbHeaderIncomplete { len: blob.len() })
    }

    /// The 37 header bytes, magic included.
    pub fn to_bytes(&self) -> [u8; SRFB_HEADER_LEN] {
        let mut out = [0u8; SRFB_HEADER_LEN];
        let mut w = &mut out[..];
        w.put_i32(SRFB_MAGIC);
        w.put_i16(self.version);
        w.put_i8(self.compression);
        w.put_i64(self.producer_id);
        w.put_i16(self.producer_epoch);
        w.put_i32(self.base_sequence);
        w.put_i32(self.record_count);
        w.put_i32(self.uncompressed_length);
        w.put_i32(self.payload_length);
        w.put_u32(self.crc);
        out
    }

    /// The compression, if the code is known.
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_code(self.compression)
    }

    /// Whether the server applies its idempotence rules (`producerId ≥ 0` and
    /// `baseSequence ≥ 0`).
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0 && self.base_sequence >= 0
    }
}

/// The producer fields of an SRFB header (lengths and CRC are computed when encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrfbParams {
    /// `producerId` (−1 = none).
    pub producer_id: i64,
    /// `producerEpoch` (−1 = none).
    pub producer_epoch: i16,
    /// `baseSequence` (−1 = none).
    pub base_sequence: i32,
    /// `recordCount`; must be > 0.
    pub record_count: i32,
}

impl Default for SrfbParams {
    /// Not idempotent, one record.
    fn default() -> Self {
        SrfbParams {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: 1,
        }
    }
}

impl SrfbParams {
    /// The producer fields and record count of a v1 batch, for wrapping it.
    pub fn from_v1(h: &V1BatchHeader) -> Self {
        SrfbParams {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            record_count: h.record_count,
        }
    }
}

/// Appends an SRFB blob holding `content` to `out`, compressing it with `compression`.
/// On error `out` is left as it was.
///
/// ```
/// # use stellflow_proto::record::srfb::{self, Compression, SrfbBatch, SrfbParams};
/// let mut out = bytes::BytesMut::new();
/// srfb::encode(&SrfbParams::default(), Compression::Gzip, b"hello", &mut out).unwrap();
/// let batch = SrfbBatch::validate(out.freeze()).unwrap();
/// assert_eq!(&batch.content()[..], b"hello");
/// ```
pub fn encode(
    params: &SrfbParams,
    compression: Compression,
    content: &[u8],
    out: &mut BytesMut,
) -> Result<(), BatchError> {
    encode_with_level(params, compression, DEFAULT_GZIP_LEVEL, content, out)
}

/// [`encode`] with an explicit gzip level (0–9; ignored without gzip).
pub fn encode_with_level(
    params: &SrfbParams,
    compression: Compression,
    gzip_level: u32,
    content: &[u8],
    out: &mut BytesMut,
) -> Result<(), BatchError> {
    let start = out.len();
    out.put_slice(&[0u8; SRFB_HEADER_LEN]);
    match compression {
        Compression::None => out.put_slice(content),
        Compression::Gzip => {
            if let Err(e) = gzip_into(content, gzip_level, out) {
                out.truncate(start);
                return Err(e);
            }
        }
    }
    let result = seal(out, start, params, compression, content.len());
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Appends an SRFB blob wrapping the v1 batch `batch` (producer fields and record count are
/// taken from the batch header; the batch is not otherwise checked).
pub fn wrap_v1(
    batch: &[u8],
    compression: Compression,
    out: &mut BytesMut,
) -> Result<(), BatchError> {
    let header = V1BatchHeader::parse(batch)?;
    encode(&SrfbParams::from_v1(&header), compression, batch, out)
}

/// Compresses `content` with gzip at `level` (clamped to 0–9) onto the end of `out`.
pub(crate) fn gzip_into(content: &[u8], level: u32, out: &mut BytesMut) -> Result<(), BatchError> {
    let level = flate2::Compression::new(level.min(9));
    let mut enc = flate2::write::GzEncoder::new(out.writer(), level);
    enc.write_all(content)
        .and_then(|()| enc.finish().map(drop))
        .map_err(|e| BatchError::Gzip {
            detail: e.to_string(),
        })
}

/// Fills in the header at `start` for the payload that follows it in `buf`.
pub(crate) fn seal(
    buf: &mut BytesMut,
    start: usize,
    params: &SrfbParams,
    compression: Compression,
    uncompressed_len: usize,
) -> Result<(), BatchError> {
    if params.record_count <= 0 {
        return Err(BatchError::EmptySrfb);
    }
    let payload_start = start + SRFB_HEADER_LEN;
    let payload: &[u8] = buf.get(payload_start..).unwrap_or_default();
    let too_large = |what, len| BatchError::TooLarge {
        what,
        len,
        max: i32::MAX as usize,
    };
    let payload_length =
        i32::try_from(payload.len()).map_err(|_| too_large("SRFB payload", payload.len()))?;
    let uncompressed_length = i32::try_from(uncompressed_len)
        .map_err(|_| too_large("SRFB uncompressed payload", uncompressed_len))?;
    let header = SrfbHeader {
        version: SRFB_VERSION,
        compression: compression.code(),
        producer_id: params.producer_id,
        producer_epoch: params.producer_epoch,
        base_sequence: params.base_sequence,
        record_count: params.record_count,
        uncompressed_length,
        payload_length,
        crc: crate::record::checksum::crc32(payload),
    };
    patch(buf, start, header.to_bytes());
    Ok(())
}

/// A validated SRFB blob: header, payload as sent, and the uncompressed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrfbBatch {
    header: SrfbHeader,
    payload: Bytes,
    content: Bytes,
}

impl SrfbBatch {
    /// Validates `blob` exactly as the server does (every rejection of PROTOCOL.md §4.2, in the
    /// server's order): magic, 37-byte header, version 1, compression 0 or 1, `recordCount > 0`,
    /// non-negative lengths, `37 + payloadLength` equal to the blob length, the CRC-32 over the
    /// payload, and the uncompressed length — for gzip by inflating, never beyond
    /// `uncompressedLength + 1` bytes.
    ///
    /// For an uncompressed payload the content shares the blob's memory.
    pub fn validate(blob: Bytes) -> Result<Self, BatchError> {
        let header = SrfbHeader::parse(&blob)?;
        if header.version != SRFB_VERSION {
            return Err(BatchError::SrfbVersion {
                version: header.version,
            });
        }
        let compression = header.compression().ok_or(BatchError::UnknownCompression {
            code: header.compression,
        })?;
        if header.record_count <= 0 || header.uncompressed_length < 0 || header.payload_length < 0 {
            return Err(BatchError::SrfbMetadata {
                record_count: header.record_count,
                uncompressed_length: header.uncompressed_length,
                payload_length: header.payload_length,
            });
        }
        if SRFB_HEADER_LEN + header.payload_length as usize != blob.len() {
            return Err(BatchError::SrfbPayloadLength {
                declared: header.payload_length,
                actual: blob.len(),
            });
        }
        let payload = blob.slice(SRFB_HEADER_LEN..);
        let actual = crate::record::checksum::crc32(&payload);
        if actual != header.crc {
            return Err(BatchError::SrfbCrc {
                expected: header.crc,
                actual,
            });
        }
        let content = match compression {
            Compression::None => {
                if header.uncompressed_length != header.payload_length {
                    return Err(BatchError::UncompressedLength {
                        declared: header.uncompressed_length,
                        actual: payload.len(),
                        more: false,
                    });
                }
                payload.clone()
            }
            Compression::Gzip => inflate_bounded(&payload, header.uncompressed_length)?,
        };
        Ok(SrfbBatch {
            header,
            payload,
            content,
        })
    }

    /// The header.
    pub fn header(&self) -> &SrfbHeader {
        &self.header
    }

    /// The payload as sent (compressed for gzip).
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The uncompressed content (for us: one v1 batch).
    pub fn content(&self) -> &Bytes {
        &self.content
    }

    /// Encoded size of the blob.
    pub fn encoded_len(&self) -> usize {
        SRFB_HEADER_LEN + self.payload.len()
    }
}

/// Inflates a gzip payload that must produce exactly `uncompressed_length` bytes. Inflation
/// stops one byte past that length, and the output buffer is never reserved beyond what the
/// payload could produce.
pub fn inflate_bounded(payload: &[u8], uncompressed_length: i32) -> Result<Bytes, BatchError> {
    let declared = usize::try_from(uncompressed_length).map_err(|_| BatchError::SrfbMetadata {
        record_count: 1,
        uncompressed_length,
        payload_length: payload.len().min(i32::MAX as usize) as i32,
    })?;
    let reserve = declared.min(
        payload
            .len()
            .saturating_mul(MAX_DEFLATE_RATIO)
            .saturating_add(64),
    );
    let mut out = Vec::with_capacity(reserve);
    let limit = declared as u64 + 1;
    flate2::read::MultiGzDecoder::new(payload)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| BatchError::Gzip {
            detail: e.to_string(),
        })?;
    if out.len() != declared {
        return Err(BatchError::UncompressedLength {
            declared: uncompressed_length,
            actual: out.len(),
            more: out.len() > declared,
        });
    }
    Ok(Bytes::from(out))
}

/// What the server records about a blob (its `RecordBatchInfo`): the SRFB header fields for an
/// SRFB blob, or an opaque view for anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerView {
    /// Whether the blob is SRFB (the server parsed and validated it).
    pub stable_format: bool,
    /// `producerId` (−1 for opaque blobs).
    pub producer_id: i64,
    /// `producerEpoch` (−1 for opaque blobs).
    pub producer_epoch: i16,
    /// `baseSequence` (−1 for opaque blobs).
    pub base_sequence: i32,
    /// `recordCount` (0 for opaque blobs).
    pub record_count: i32,
    /// Compression code (0 for opaque blobs).
    pub compression: i8,
    /// Payload bytes (the whole blob for opaque blobs).
    pub payload_bytes: usize,
    /// Uncompressed bytes (the whole blob for opaque blobs).
    pub uncompressed_bytes: usize,
    /// The duplicate-detection fingerprint: the header CRC for SRFB, the CRC-32 of the whole
    /// blob otherwise.
    pub fingerprint: u32,
}

impl ServerView {
    /// Whether the server applies its idempotence rules to this blob.
    pub fn is_idempotent(&self) -> bool {
        self.stable_format && self.producer_id >= 0 && self.base_sequence >= 0
    }
}

/// The server's view of a produced blob; `Err` exactly when the server rejects it (error 14
/// `INVALID_RECORD`).
pub fn server_view(blob: &Bytes) -> Result<ServerView, BatchError> {
    if !is_srfb(blob) {
        return Ok(ServerView {
            stable_format: false,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: 0,
            compression: 0,
            payload_bytes: blob.len(),
            uncompressed_bytes: blob.len(),
            fingerprint: crate::record::checksum::crc32(blob),
        });
    }
    let batch = SrfbBatch::validate(blob.clone())?;
    let h = batch.header;
    Ok(ServerView {
        stable_format: true,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        record_count: h.record_count,
        compression: h.compression,
        payload_bytes: batch.payload.len(),
        uncompressed_bytes: batch.content.len(),
        fingerprint: h.crc,
    })
}
