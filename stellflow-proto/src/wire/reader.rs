//! Reading and writing primitives: the bounds-checked [`Reader`] cursor, and the nullable
//! string and bytes writers.

use super::{DecodeError, NBytes, NString, StrBytes};
use bytes::{BufMut, Bytes, BytesMut};

/// A cursor over [`Bytes`] that decodes primitives from the front.
///
/// Every read checks the remaining length first and returns [`DecodeError`] instead of panicking.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
    start_len: usize,
}

impl Reader {
    /// A reader over `buf`.
    pub fn new(buf: Bytes) -> Self {
        let start_len = buf.len();
        Reader { buf, start_len }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Offset of the next byte from the start of the input.
    pub fn position(&self) -> usize {
        self.start_len - self.buf.len()
    }

    /// The unread bytes, without consuming them.
    pub fn peek_rest(&self) -> &Bytes {
        &self.buf
    }

    /// Consumes the reader, returning the unread bytes.
    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    fn need(&self, what: &'static str, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated {
                what,
                needed: n,
                remaining: self.buf.len(),
                offset: self.position(),
            })
        } else {
            Ok(())
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        self.need(what, N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[..N]);
        bytes::Buf::advance(&mut self.buf, N);
        Ok(out)
    }

    /// Reads an `int8`.
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array("int8")?))
    }

    /// Reads an `int16`.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array("int16")?))
    }

    /// Reads an `int32`.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array("int32")?))
    }

    /// Reads an `int64`.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array("int64")?))
    }

    /// Reads an unsigned 32-bit value (only the frame length is read this way).
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array("uint32")?))
    }

    /// Reads a `bool` the way most server codecs do: any non-zero byte is true.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.i8()? != 0)
    }

    /// Reads a `bool` the way the server's Metadata codec does: only `0x01` is true.
    pub fn bool_eq_one(&mut self) -> Result<bool, DecodeError> {
        Ok(self.i8()? == 1)
    }

    /// Takes the next `n` bytes as a zero-copy slice.
    pub fn take(&mut self, what: &'static str, n: usize) -> Result<Bytes, DecodeError> {
        self.need(what, n)?;
        Ok(self.buf.split_to(n))
    }

    /// Reads a nullable string; any negative length is null.
    pub fn nstring(&mut self) -> Result<NString, DecodeError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take("string", len as usize)?;
        Ok(Some(StrBytes::from_utf8_lossy(bytes)))
    }

    /// Reads nullable bytes; any negative length is null.
    pub fn nbytes(&mut self) -> Result<NBytes, DecodeError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(self.take("bytes", len as usize)?))
    }

    /// Reads an array count. A negative count is an empty array (as the server reads it); a
    /// count whose elements cannot fit in the remaining bytes is an error, so callers may
    /// reserve `count` elements safely.
    pub fn array_len(&mut self, min_element_size: usize) -> Result<usize, DecodeError> {
        let offset = self.position();
        let count = self.i32()?;
        if count <= 0 {
            return Ok(0);
        }
        let needed = (count as usize).saturating_mul(min_element_size);
        if needed > self.buf.len() {
            return Err(DecodeError::CountTooLarge {
                count,
                min_element_size,
                remaining: self.buf.len(),
                offset,
            });
        }
        Ok(count as usize)
    }
}

/// Writes an `int16` length-prefixed string, or −1 for `None`.
///
/// Strings longer than `i16::MAX` bytes cannot be represented; they are truncated to that
/// length at a character boundary. Validate lengths before encoding where that matters.
pub fn put_nstring(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => buf.put_i16(-1),
        Some(s) => {
            let mut end = s.len().min(i16::MAX as usize);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            buf.put_i16(end as i16);
            buf.put_slice(&s.as_bytes()[..end]);
        }
    }
}

/// Writes `int32` length-prefixed bytes, or −1 for `None`.
pub fn put_nbytes(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => buf.put_i32(-1),
        Some(b) => {
            buf.put_i32(b.len() as i32);
            buf.put_slice(b);
        }
    }
}
