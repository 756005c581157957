//! The server's view of a produced blob: SRFB validation (PROTOCOL.md §4.2).
//!
//! A blob whose first four bytes are `SRFB` is parsed and validated exactly as the server does;
//! any other blob is opaque. Only a valid SRFB blob with `producerId ≥ 0` and
//! `baseSequence ≥ 0` takes part in idempotence (§3.3.2).

use flate2::read::GzDecoder;
use std::io::Read;

/// The SRFB magic, `"SRFB"`.
pub const SRFB_MAGIC: [u8; 4] = *b"SRFB";
/// Size of the SRFB header.
pub const SRFB_HEADER_LEN: usize = 37;

/// What the server learns from a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobView {
    /// Not an SRFB blob: stored verbatim, never checked.
    Opaque,
    /// A valid SRFB batch.
    Srfb(SrfbInfo),
}

/// The header fields of a valid SRFB batch that idempotence uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrfbInfo {
    /// Producer id (`≥ 0` with `base_sequence ≥ 0` means idempotent).
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// First sequence number.
    pub base_sequence: i32,
    /// Declared record count (never checked against the payload).
    pub record_count: i32,
    /// CRC-32 of the payload bytes.
    pub crc: u32,
}

impl SrfbInfo {
    /// Whether the server applies the idempotence rules to this batch.
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0 && self.base_sequence >= 0
    }
}

/// Why an SRFB blob is rejected (always answered with `14 INVALID_RECORD`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SrfbError {
    /// Shorter than the 37-byte header.
    #[error("SRFB blob shorter than its header")]
    TooShort,
    /// Version other than 1.
    #[error("unsupported SRFB version {0}")]
    Version(i16),
    /// Compression other than 0 or 1.
    #[error("unknown SRFB compression {0}")]
    Compression(i8),
    /// `recordCount ≤ 0`.
    #[error("SRFB record count {0} is not positive")]
    RecordCount(i32),
    /// A negative length, or `37 + payloadLength` different from the blob length.
    #[error("SRFB lengths do not match the blob")]
    Length,
    /// The payload CRC-32 does not match.
    #[error("SRFB CRC mismatch")]
    Crc,
    /// Gzip payload that does not decompress, or decompresses to another length.
    #[error("SRFB gzip payload invalid")]
    Gzip,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        a.copy_from_slice(s);
    }
    i16::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    i32::from_be_bytes(a)
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    i64::from_be_bytes(a)
}

/// Classifies and validates a blob the way the server's Produce path does.
pub fn inspect(blob: &[u8]) -> Result<BlobView, SrfbError> {
    if blob.len() < 4 || blob.get(..4) != Some(&SRFB_MAGIC[..]) {
        return Ok(BlobView::Opaque);
    }
    if blob.len() < SRFB_HEADER_LEN {
        return Err(SrfbError::TooShort);
    }
    let version = be_i16(blob, 4);
    if version != 1 {
        return Err(SrfbError::Version(version));
    }
    let compression = blob.get(6).map_or(0, |b| *b as i8);
    if compression != 0 && compression != 1 {
        return Err(SrfbError::Compression(compression));
    }
    let producer_id = be_i64(blob, 7);
    let producer_epoch = be_i16(blob, 15);
    let base_sequence = be_i32(blob, 17);
    let record_count = be_i32(blob, 21);
    let uncompressed_length = be_i32(blob, 25);
    let payload_length = be_i32(blob, 29);
    let crc = be_i32(blob, 33) as u32;
    if record_count <= 0 {
        return Err(SrfbError::RecordCount(record_count));
    }
    if uncompressed_length < 0 || payload_length < 0 {
        return Err(SrfbError::Length);
    }
    if SRFB_HEADER_LEN as u64 + payload_length as u64 != blob.len() as u64 {
        return Err(SrfbError::Length);
    }
    let payload = blob.get(SRFB_HEADER_LEN..).unwrap_or_default();
    if crc32fast::hash(payload) != crc {
        return Err(SrfbError::Crc);
    }
    let plain_len = if compression == 1 {
        // Count the decompressed bytes without keeping them, bounded by the declared length
        // plus one (enough to detect an overrun), so a gzip bomb costs time, not memory.
        let limit = uncompressed_length as u64 + 1;
        let mut reader = GzDecoder::new(payload).take(limit);
        let n = std::io::copy(&mut reader, &mut std::io::sink()).map_err(|_| SrfbError::Gzip)?;
        usize::try_from(n).unwrap_or(usize::MAX)
    } else {
        payload.len()
    };
    if plain_len as u64 != uncompressed_length as u64 {
        return Err(if compression == 1 {
            SrfbError::Gzip
        } else {
            SrfbError::Length
        });
    }
    Ok(BlobView::Srfb(SrfbInfo {
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
        crc,
    }))
}

/// Builds an uncompressed SRFB blob (for tests and examples).
pub fn build(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    record_count: i32,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(SRFB_HEADER_LEN + payload.len());
    b.extend_from_slice(&SRFB_MAGIC);
    b.extend_from_slice(&1i16.to_be_bytes());
    b.push(0);
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&base_sequence.to_be_bytes());
    b.extend_from_slice(&record_count.to_be_bytes());
    b.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    b.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    b.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
    b.extend_from_slice(payload);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    #[test]
    fn example_a_is_valid() {
        let blob = build(1, 0, 0, 1, b"hello");
        assert_eq!(blob.len(), 42);
        assert_eq!(&blob[33..37], &[0x36, 0x10, 0xa6, 0x86]);
        let BlobView::Srfb(info) = inspect(&blob).unwrap() else {
            panic!("not srfb")
        };
        assert!(info.is_idempotent());
        assert_eq!(info.record_count, 1);
    }

    #[test]
    fn opaque_and_rejections() {
        assert_eq!(inspect(b"abc"), Ok(BlobView::Opaque));
        assert_eq!(inspect(b"SRF"), Ok(BlobView::Opaque));
        assert_eq!(inspect(b"SRFB"), Err(SrfbError::TooShort));
        let mut zeros = b"SRFB".to_vec();
        zeros.extend_from_slice(&[0; 32]);
        assert!(inspect(&zeros).is_err());
        let good = build(1, 0, 0, 1, b"hello");
        let mut v = good.clone();
        v[5] = 2;
        assert_eq!(inspect(&v), Err(SrfbError::Version(2)));
        let mut v = good.clone();
        v[6] = 2;
        assert_eq!(inspect(&v), Err(SrfbError::Compression(2)));
        let mut v = good.clone();
        v[41] ^= 1;
        assert_eq!(inspect(&v), Err(SrfbError::Crc));
        let mut v = good.clone();
        v.push(0);
        assert_eq!(inspect(&v), Err(SrfbError::Length));
        let v = build(1, 0, 0, 0, b"hello");
        assert_eq!(inspect(&v), Err(SrfbError::RecordCount(0)));
        // recordCount is never checked against the payload.
        assert!(inspect(&build(1, 0, 0, 99, b"x")).is_ok());
    }

    #[test]
    fn gzip_is_validated() {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(b"hello world").unwrap();
        let gz = enc.finish().unwrap();
        let mut b = build(-1, -1, -1, 1, &gz);
        b[6] = 1;
        b[25..29].copy_from_slice(&11i32.to_be_bytes());
        assert!(matches!(inspect(&b), Ok(BlobView::Srfb(_))));
        b[25..29].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(inspect(&b), Err(SrfbError::Gzip));
        let mut plain = build(-1, -1, -1, 1, b"hello");
        plain[6] = 1;
        assert_eq!(inspect(&plain), Err(SrfbError::Gzip));
    }
}
