//! Low-level v1 writers shared by the hot-path builder and the explicit encoder: one record,
//! header size arithmetic, and patching fields in place.

use super::layout;
use crate::record::BatchError;
use bytes::{BufMut, BytesMut};

/// A record header to encode: a nullable key (a string on the wire) and a nullable value.
///
/// Implemented for `(K, Option<V>)` with any `K, V: AsRef<[u8]>` (e.g. `("trace", Some(b"x"))`,
/// `(String, Option<Vec<u8>>)`), for decoded [`Header`](super::Header)s (so records can be
/// copied between batches) and for references to either. Client crates may implement it for
/// their own header type.
pub trait HeaderRef {
    /// The key's UTF-8 bytes, `None` for a null key.
    fn key(&self) -> Option<&[u8]>;
    /// The value, `None` for a null value.
    fn value(&self) -> Option<&[u8]>;
}

impl<K: AsRef<[u8]>, V: AsRef<[u8]>> HeaderRef for (K, Option<V>) {
    fn key(&self) -> Option<&[u8]> {
        Some(self.0.as_ref())
    }
    fn value(&self) -> Option<&[u8]> {
        self.1.as_ref().map(AsRef::as_ref)
    }
}

impl<T: HeaderRef + ?Sized> HeaderRef for &T {
    fn key(&self) -> Option<&[u8]> {
        (**self).key()
    }
    fn value(&self) -> Option<&[u8]> {
        (**self).value()
    }
}

/// The exact encoded size of one v1 record, its length prefix included.
///
/// The producer accumulator uses it to decide whether a record still fits in a batch
/// (`builder.encoded_size() + record_size(..) <= batch_size`).
pub fn record_size<I, H>(key: Option<&[u8]>, value: Option<&[u8]>, headers: I) -> usize
where
    I: IntoIterator<Item = H>,
    H: HeaderRef,
{
    let mut size =
        layout::MIN_RECORD_SIZE + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    for h in headers {
        size += layout::MIN_HEADER_SIZE
            + h.key().map_or(0, <[u8]>::len)
            + h.value().map_or(0, <[u8]>::len);
    }
    size
}

/// Overwrites 4 bytes at `at` with `v` (big-endian). Positions come from the writer itself, so
/// the range is always inside the buffer; an out-of-range position is ignored.
#[inline]
pub(crate) fn patch_i32(buf: &mut [u8], at: usize, v: i32) {
    patch(buf, at, v.to_be_bytes());
}

/// Overwrites `N` bytes at `at`, like [`patch_i32`].
#[inline]
pub(crate) fn patch<const N: usize>(buf: &mut [u8], at: usize, bytes: [u8; N]) {
    if let Some(dst) = at.checked_add(N).and_then(|end| buf.get_mut(at..end)) {
        dst.copy_from_slice(&bytes);
    }
}

/// Checks that a byte field fits an `int32` length.
#[inline]
pub(crate) fn check_len(what: &'static str, b: Option<&[u8]>) -> Result<(), BatchError> {
    match b {
        Some(b) if b.len() > i32::MAX as usize => Err(BatchError::TooLarge {
            what,
            len: b.len(),
            max: i32::MAX as usize,
        }),
        _ => Ok(()),
    }
}

/// Appends one record to `buf`. On error nothing is left appended.
#[inline]
pub(crate) fn put_record<I, H>(
    buf: &mut BytesMut,
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: I,
) -> Result<(), BatchError>
where
    I: IntoIterator<Item = H>,
    H: HeaderRef,
{
    check_len("record key", key)?;
    check_len("record value", value)?;
    let klen = key.map_or(0, <[u8]>::len);
    let vlen = value.map_or(0, <[u8]>::len);
    let headers = headers.into_iter();
    let start = buf.len();
    // Without headers the record length is known up front: no patching.
    let known_len = if headers.size_hint().1 == Some(0) {
        let len = (layout::MIN_RECORD_SIZE - 4)
            .checked_add(klen)
            .and_then(|l| l.checked_add(vlen))
            .unwrap_or(usize::MAX);
        if len > i32::MAX as usize {
            return Err(BatchError::TooLarge {
                what: "record",
                len,
                max: i32::MAX as usize,
            });
        }
        Some(len as i32)
    } else {
        None
    };
    buf.reserve(layout::MIN_RECORD_SIZE + klen + vlen);

    // length, attributes, timestampDelta, offsetDelta, key length
    let mut head = [0u8; 21];
    head[0..4].copy_from_slice(&known_len.unwrap_or(0).to_be_bytes());
    head[4] = attributes as u8;
    head[5..13].copy_from_slice(&timestamp_delta.to_be_bytes());
    head[13..17].copy_from_slice(&offset_delta.to_be_bytes());
    head[17..21].copy_from_slice(&key.map_or(-1, |k| k.len() as i32).to_be_bytes());
    buf.put_slice(&head);
    if let Some(k) = key {
        buf.put_slice(k);
    }
    buf.put_i32(value.map_or(-1, |v| v.len() as i32));
    if let Some(v) = value {
        buf.put_slice(v);
    }
    if known_len.is_some() {
        buf.put_i32(0);
        return Ok(());
    }
    let count_at = buf.len();
    buf.put_i32(0);
    let mut count: i32 = 0;
    for h in headers {
        if let Err(e) = put_header(buf, &h) {
            buf.truncate(start);
            return Err(e);
        }
        count = match count.checked_add(1) {
            Some(c) => c,
            None => {
                buf.truncate(start);
                return Err(BatchError::TooLarge {
                    what: "record header count",
                    len: i32::MAX as usize + 1,
                    max: i32::MAX as usize,
                });
            }
        };
    }
    let len = buf.len() - start - 4;
    if len > i32::MAX as usize {
        buf.truncate(start);
        return Err(BatchError::TooLarge {
            what: "record",
            len,
            max: i32::MAX as usize,
        });
    }
    if count != 0 {
        patch_i32(buf, count_at, count);
    }
    patch_i32(buf, start, len as i32);
    Ok(())
}

fn put_header<H: HeaderRef>(buf: &mut BytesMut, h: &H) -> Result<(), BatchError> {
    match h.key() {
        None => buf.put_i16(-1),
        Some(k) => {
            if k.len() > i16::MAX as usize {
                return Err(BatchError::TooLarge {
                    what: "record header key",
                    len: k.len(),
                    max: i16::MAX as usize,
                });
            }
            buf.put_i16(k.len() as i16);
            buf.put_slice(k);
        }
    }
    let v = h.value();
    check_len("record header value", v)?;
    match v {
        None => buf.put_i32(-1),
        Some(v) => {
            buf.put_i32(v.len() as i32);
            buf.put_slice(v);
        }
    }
    Ok(())
}

/// Fills in the computed fields of a v1 batch written at `start` (everything after the header
/// must be the records): `batchLength`, `lastOffsetDelta`, `maxTimestamp`, `recordCount` and
/// finally the CRC-32C.
pub(crate) fn seal_batch(
    buf: &mut BytesMut,
    start: usize,
    last_offset_delta: i32,
    max_timestamp: i64,
    record_count: i32,
) -> Result<(), BatchError> {
    let total = buf.len() - start;
    let batch_length = total - layout::LENGTH_PREFIX;
    if batch_length > i32::MAX as usize {
        return Err(BatchError::TooLarge {
            what: "v1 batch",
            len: total,
            max: i32::MAX as usize + layout::LENGTH_PREFIX,
        });
    }
    let batch: &mut [u8] = buf.get_mut(start..).unwrap_or_default();
    patch_i32(batch, layout::BATCH_LENGTH, batch_length as i32);
    patch_i32(batch, layout::LAST_OFFSET_DELTA, last_offset_delta);
    patch(batch, layout::MAX_TIMESTAMP, max_timestamp.to_be_bytes());
    patch_i32(batch, layout::RECORD_COUNT, record_count);
    let crc = crate::record::checksum::crc32c(batch.get(layout::ATTRIBUTES..).unwrap_or_default());
    patch(batch, layout::CRC, crc.to_be_bytes());
    Ok(())
}

/// The fixed header fields a writer sets before the records; the computed ones are zero until
/// [`seal_batch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadFields {
    pub base_offset_delta: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub attributes: i16,
    pub base_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// Appends a 57-byte header with placeholders for the computed fields.
pub(crate) fn put_head(buf: &mut BytesMut, f: &HeadFields) {
    buf.put_i32(f.base_offset_delta);
    buf.put_i32(0); // batchLength
    buf.put_i32(f.partition_leader_epoch);
    buf.put_i8(f.magic);
    buf.put_u32(0); // crc32c
    buf.put_i16(f.attributes);
    buf.put_i32(0); // lastOffsetDelta
    buf.put_i64(f.base_timestamp);
    buf.put_i64(0); // maxTimestamp
    buf.put_i64(f.producer_id);
    buf.put_i16(f.producer_epoch);
    buf.put_i32(f.base_sequence);
    buf.put_i32(0); // recordCount
}
