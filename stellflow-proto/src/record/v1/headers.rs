//! A lazy, zero-copy view of one record's headers.

use super::layout;
use super::write::HeaderRef;
use crate::record::cursor::Cursor;
use crate::wire::{NBytes, NString, StrBytes};
use bytes::Bytes;

/// The headers of a decoded record, not yet split into keys and values.
///
/// The record decoder has already checked that `len()` headers fill these bytes exactly, so
/// iterating cannot fail. Holding a `Headers` costs nothing for a record without headers, and
/// one reference count otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    bytes: Bytes,
    count: u32,
}

/// One record header, sharing the batch's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Header {
    /// The key (a nullable string on the wire; malformed UTF-8 is replaced by U+FFFD).
    pub key: NString,
    /// The value.
    pub value: NBytes,
}

impl Header {
    /// A header from a key and an optional value (copies both).
    pub fn new(key: &str, value: Option<&[u8]>) -> Self {
        Header {
            key: Some(StrBytes::from(key)),
            value: value.map(Bytes::copy_from_slice),
        }
    }
}

impl HeaderRef for Header {
    fn key(&self) -> Option<&[u8]> {
        self.key.as_ref().map(|k| &k.as_bytes()[..])
    }
    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

impl Headers {
    /// Wraps `count` headers already validated to fill `bytes` exactly.
    pub(crate) fn new(bytes: Bytes, count: u32) -> Self {
        Headers { bytes, count }
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded headers (without their count).
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Iterates the headers as [`Header`]s sharing the batch's memory.
    pub fn iter(&self) -> HeadersIter<'_> {
        HeadersIter {
            raw: self.iter_raw(),
        }
    }

    /// Iterates the headers as borrowed `(key, value)` byte slices, without touching reference
    /// counts.
    pub fn iter_raw(&self) -> RawHeadersIter<'_> {
        RawHeadersIter {
            bytes: &self.bytes,
            cur: Cursor::new(&self.bytes),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = Header;
    type IntoIter = HeadersIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The byte range of a nullable field (`None` = null).
type Field = Option<std::ops::Range<usize>>;

/// Iterator over borrowed header keys and values: `(Option<&[u8]>, Option<&[u8]>)`.
#[derive(Debug, Clone)]
pub struct RawHeadersIter<'a> {
    bytes: &'a Bytes,
    cur: Cursor<'a>,
    left: u32,
}

impl<'a> RawHeadersIter<'a> {
    fn next_ranges(&mut self) -> Option<(Field, Field)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = self.cur.nstring();
        let value = self.cur.nbytes();
        match (key, value) {
            (Some(k), Some(v)) => Some((k, v)),
            _ => {
                // Cannot happen for validated headers; stop rather than panic.
                self.left = 0;
                None
            }
        }
    }
}

impl<'a> Iterator for RawHeadersIter<'a> {
    type Item = (Option<&'a [u8]>, Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes: &'a [u8] = self.bytes;
        let (k, v) = self.next_ranges()?;
        Some((k.and_then(|r| bytes.get(r)), v.and_then(|r| bytes.get(r))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// Iterator over [`Header`]s; see [`Headers::iter`].
#[derive(Debug, Clone)]
pub struct HeadersIter<'a> {
    raw: RawHeadersIter<'a>,
}

impl Iterator for HeadersIter<'_> {
    type Item = Header;

    fn next(&mut self) -> Option<Header> {
        let bytes = self.raw.bytes;
        let (k, v) = self.raw.next_ranges()?;
        let slice = |r: std::ops::Range<usize>| (r.end <= bytes.len()).then(|| bytes.slice(r));
        Some(Header {
            key: k.and_then(slice).map(StrBytes::from_utf8_lossy),
            value: v.and_then(slice),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.raw.size_hint()
    }
}

/// Walks `count` headers from `c` (a negative count is none), returning how many there were,
/// or `None` if they overrun the bytes. Used by the record decoder.
#[inline]
pub(crate) fn skip_headers(c: &mut Cursor<'_>, count: i32) -> Option<u32> {
    if count <= 0 {
        return Some(0);
    }
    if (count as usize).saturating_mul(layout::MIN_HEADER_SIZE) > c.remaining() {
        return None;
    }
    for _ in 0..count {
        c.nstring()?;
        c.nbytes()?;
    }
    Some(count as u32)
}
