//! A bounds-checked read cursor over a byte slice, used by the batch decoders.
//!
//! Every read returns `None` past the end instead of panicking; callers turn that into a
//! [`BatchError`](super::BatchError) naming the field.

use std::ops::Range;

/// Reads big-endian integers and byte ranges from the front of a slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// A cursor at `pos` in `buf`.
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    /// Offset of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let bytes: [u8; N] = self.buf.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(bytes)
    }

    /// Reads an `int8`.
    #[inline]
    pub(crate) fn i8(&mut self) -> Option<i8> {
        self.array::<1>().map(i8::from_be_bytes)
    }

    /// Reads an `int16`.
    #[inline]
    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.array::<2>().map(i16::from_be_bytes)
    }

    /// Reads an `int32`.
    #[inline]
    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.array::<4>().map(i32::from_be_bytes)
    }

    /// Reads an `int64`.
    #[inline]
    pub(crate) fn i64(&mut self) -> Option<i64> {
        self.array::<8>().map(i64::from_be_bytes)
    }

    /// Skips `n` bytes, returning their range.
    #[inline]
    pub(crate) fn skip(&mut self, n: usize) -> Option<Range<usize>> {
        let end = self.pos.checked_add(n)?;
        if end > self.buf.len() {
            return None;
        }
        let range = self.pos..end;
        self.pos = end;
        Some(range)
    }

    /// Reads an `int32`-length nullable byte field, returning its range (`None` inside for
    /// null, any negative length). The outer `None` means truncated.
    #[inline]
    pub(crate) fn nbytes(&mut self) -> Option<Option<Range<usize>>> {
        let len = self.i32()?;
        if len < 0 {
            return Some(None);
        }
        self.skip(len as usize).map(Some)
    }

    /// Reads an `int16`-length nullable string field as a byte range, like [`Self::nbytes`].
    #[inline]
    pub(crate) fn nstring(&mut self) -> Option<Option<Range<usize>>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        self.skip(len as usize).map(Some)
    }
}
