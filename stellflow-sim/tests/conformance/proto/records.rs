//! Record data (PROTOCOL.md §4): SRFB batches with every header field settable, so malformed
//! batches can be built, the gzip and CRC helpers they need, and a v1 (SDK) record batch.

use bytes::{BufMut, BytesMut};

/// CRC-32 (IEEE, zlib, `java.util.zip.CRC32`), by the `crc32fast` crate.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// CRC-32C (Castagnoli), by the `crc32c` crate.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Every SRFB header field, so malformed batches can be built (§4.2).
#[derive(Debug, Clone)]
pub struct Srfb {
    pub version: i16,
    pub compression: i8,
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
    pub uncompressed_length: i32,
    pub payload_length: i32,
    pub crc: u32,
    pub payload: Vec<u8>,
}

impl Srfb {
    /// A valid uncompressed batch.
    pub fn new(
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        record_count: i32,
        payload: &[u8],
    ) -> Srfb {
        Srfb {
            version: 1,
            compression: 0,
            producer_id,
            epoch,
            base_sequence,
            record_count,
            uncompressed_length: payload.len() as i32,
            payload_length: payload.len() as i32,
            crc: crc32(payload),
            payload: payload.to_vec(),
        }
    }

    /// A valid non-idempotent batch.
    pub fn plain(payload: &[u8]) -> Srfb {
        Srfb::new(-1, -1, -1, 1, payload)
    }

    /// A valid gzip batch over `uncompressed`.
    pub fn gzip(uncompressed: &[u8]) -> Srfb {
        let z = gzip_stored(uncompressed);
        Srfb {
            version: 1,
            compression: 1,
            producer_id: -1,
            epoch: -1,
            base_sequence: -1,
            record_count: 1,
            uncompressed_length: uncompressed.len() as i32,
            payload_length: z.len() as i32,
            crc: crc32(&z),
            payload: z,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_slice(b"SRFB");
        b.put_i16(self.version);
        b.put_i8(self.compression);
        b.put_i64(self.producer_id);
        b.put_i16(self.epoch);
        b.put_i32(self.base_sequence);
        b.put_i32(self.record_count);
        b.put_i32(self.uncompressed_length);
        b.put_i32(self.payload_length);
        b.put_u32(self.crc);
        b.put_slice(&self.payload);
        b.to_vec()
    }
}

/// A gzip member (RFC 1952) holding `data` in stored (uncompressed) deflate blocks.
pub fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        out.push(u8::from(last));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A v1 (SDK) record batch with one record, as in PROTOCOL.md §4.5 example D.
pub fn v1_batch(value: &[u8]) -> Vec<u8> {
    let mut rec = BytesMut::new();
    rec.put_i8(0);
    rec.put_i64(0);
    rec.put_i32(0);
    rec.put_i32(-1);
    rec.put_i32(value.len() as i32);
    rec.put_slice(value);
    rec.put_i32(0);
    let mut tail = BytesMut::new();
    tail.put_i16(0);
    tail.put_i32(0);
    tail.put_i64(1_700_000_000_000);
    tail.put_i64(1_700_000_000_000);
    tail.put_i64(-1);
    tail.put_i16(-1);
    tail.put_i32(-1);
    tail.put_i32(1);
    tail.put_i32(rec.len() as i32);
    tail.put_slice(&rec);
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_i32((4 + 1 + 4 + tail.len()) as i32);
    b.put_i32(-1);
    b.put_i8(1);
    b.put_u32(crc32c(&tail));
    b.put_slice(&tail);
    b.to_vec()
}
