//! Primitive wire types and the [`Wire`] trait.
//!
//! Every multi-byte integer is big-endian and fixed width. Strings are `int16` length + UTF-8
//! bytes, bytes are `int32` length + raw bytes, arrays are `int32` count + elements. Any negative
//! length means null and any negative count means an empty array, as the server reads them
//! (PROTOCOL.md §1.4).
//!
//! Decoding goes through a [`Reader`] over [`Bytes`]: payloads come out as zero-copy slices of the
//! input, and a declared length or count is checked against the bytes actually present before
//! anything is allocated for it.

use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;
use std::ops::Deref;

mod describe;
mod reader;

pub use describe::{Describe, FieldValue};
pub use reader::{Reader, put_nbytes, put_nstring};

/// A nullable string as it travels on the wire: `None` is length −1.
pub type NString = Option<StrBytes>;

/// Nullable bytes as they travel on the wire: `None` is length −1.
pub type NBytes = Option<Bytes>;

/// Bytes of an encoding left out of its buffer so that they are not copied (a large record
/// blob the caller keeps anyway): `bytes` belong right after the buffer's first `at` bytes.
///
/// [`crate::frame::encode_request_sharing`] writes these; whoever sends the frame writes the
/// buffer up to the first piece's `at`, that piece's bytes, the buffer up to the next
/// piece's `at`, and so on, then the rest of the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPiece {
    /// Where in the buffer the bytes go.
    pub at: usize,
    /// The bytes.
    pub bytes: Bytes,
}

/// Why bytes could not be decoded. Each variant names the position and the field kind so a
/// corrupt frame can be diagnosed from the error alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a field was complete.
    #[error(
        "truncated input: {what} needs {needed} bytes at offset {offset}, only {remaining} left"
    )]
    Truncated {
        /// The kind of field being read.
        what: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
        /// Offset of the field from the start of the decoded input.
        offset: usize,
    },
    /// An array count cannot fit in the bytes that remain (each element needs at least
    /// `min_element_size` bytes).
    #[error(
        "array count {count} at offset {offset} needs at least {min_element_size} bytes per element, only {remaining} bytes left"
    )]
    CountTooLarge {
        /// The declared element count.
        count: i32,
        /// The smallest encoding of one element.
        min_element_size: usize,
        /// Bytes that were left.
        remaining: usize,
        /// Offset of the count from the start of the decoded input.
        offset: usize,
    },
    /// The bytes were complete but a value is not allowed (a magic number, a length that
    /// disagrees with its content, a checksum…).
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// What was being decoded.
        what: &'static str,
        /// What is wrong with it.
        detail: String,
    },
}

impl DecodeError {
    /// Builds an [`DecodeError::Invalid`].
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        DecodeError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

/// An immutable UTF-8 string backed by [`Bytes`], so decoded strings share the frame's memory.
///
/// Decoding follows the server: malformed UTF-8 is not an error but is replaced by U+FFFD (in
/// that rare case the string is copied).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StrBytes(Bytes);

impl StrBytes {
    /// A string from a `'static` str, without copying.
    pub const fn from_static(s: &'static str) -> Self {
        StrBytes(Bytes::from_static(s.as_bytes()))
    }

    /// Wraps bytes as a string, replacing malformed UTF-8 sequences with U+FFFD.
    pub fn from_utf8_lossy(bytes: Bytes) -> Self {
        match std::str::from_utf8(&bytes) {
            Ok(_) => StrBytes(bytes),
            Err(_) => StrBytes(Bytes::from(
                String::from_utf8_lossy(&bytes).into_owned().into_bytes(),
            )),
        }
    }

    /// The string slice.
    pub fn as_str(&self) -> &str {
        // The constructors only admit valid UTF-8; the fallback can never be reached.
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// The underlying bytes (UTF-8).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }
}

impl Deref for StrBytes {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for StrBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for StrBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for StrBytes {
    fn from(s: &str) -> Self {
        StrBytes(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<String> for StrBytes {
    fn from(s: String) -> Self {
        StrBytes(Bytes::from(s.into_bytes()))
    }
}

impl From<&String> for StrBytes {
    fn from(s: &String) -> Self {
        StrBytes::from(s.as_str())
    }
}

impl PartialEq<str> for StrBytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for StrBytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A value with a fixed wire layout: it can be appended to a buffer and read back.
pub trait Wire: Sized {
    /// The fewest bytes one encoded value can take (used to bound array counts).
    const MIN_SIZE: usize;

    /// Appends the encoding of `self` to `buf`.
    fn encode(&self, buf: &mut BytesMut);

    /// Decodes one value from the front of `r`.
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;

    /// Encodes `self` into a fresh buffer (convenience for tests and cold paths).
    fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::new();
        self.encode(&mut buf);
        buf.freeze()
    }

    /// Decodes a value from `bytes`, ignoring trailing bytes (forward compatibility).
    fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        Self::decode(&mut Reader::new(bytes))
    }
}

macro_rules! int_wire {
    ($($t:ty => $put:ident, $get:ident;)*) => {$(
        impl Wire for $t {
            const MIN_SIZE: usize = std::mem::size_of::<$t>();
            fn encode(&self, buf: &mut BytesMut) {
                buf.$put(*self);
            }
            fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
                r.$get()
            }
        }
    )*};
}

int_wire! {
    i8 => put_i8, i8;
    i16 => put_i16, i16;
    i32 => put_i32, i32;
    i64 => put_i64, i64;
}

/// `bool` is one byte; decoding treats any non-zero byte as true (the server's common rule).
impl Wire for bool {
    const MIN_SIZE: usize = 1;
    fn encode(&self, buf: &mut BytesMut) {
        buf.put_u8(u8::from(*self));
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.bool()
    }
}

impl Wire for NString {
    const MIN_SIZE: usize = 2;
    fn encode(&self, buf: &mut BytesMut) {
        put_nstring(buf, self.as_deref());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.nstring()
    }
}

impl Wire for NBytes {
    const MIN_SIZE: usize = 4;
    fn encode(&self, buf: &mut BytesMut) {
        put_nbytes(buf, self.as_deref());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.nbytes()
    }
}

impl<T: Wire> Wire for Vec<T> {
    const MIN_SIZE: usize = 4;
    fn encode(&self, buf: &mut BytesMut) {
        buf.put_i32(self.len() as i32);
        for item in self {
            item.encode(buf);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let n = r.array_len(T::MIN_SIZE.max(1))?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(T::decode(r)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_lengths_are_null_and_negative_counts_empty() {
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xfe, 0xff, 0xff, 0xff, 0xf9]));
        assert_eq!(r.nstring().unwrap(), None);
        assert_eq!(r.nbytes().unwrap(), None);
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xfb]));
        assert_eq!(Vec::<i32>::decode(&mut r).unwrap(), Vec::<i32>::new());
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]));
        let err = Vec::<i64>::decode(&mut r).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::CountTooLarge {
                count: i32::MAX,
                ..
            }
        ));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let mut r = Reader::new(Bytes::from_static(&[0, 3, b'a', 0xff, 0x80]));
        assert_eq!(r.nstring().unwrap().unwrap().as_str(), "a\u{fffd}\u{fffd}");
    }

    #[test]
    fn truncation_names_the_offset() {
        let mut r = Reader::new(Bytes::from_static(&[0, 5, b'a']));
        let err = r.nstring().unwrap_err();
        assert_eq!(
            err,
            DecodeError::Truncated {
                what: "string",
                needed: 5,
                remaining: 1,
                offset: 2
            }
        );
    }

    #[test]
    fn strings_round_trip() {
        let mut buf = BytesMut::new();
        put_nstring(&mut buf, Some("héllo"));
        put_nstring(&mut buf, None);
        let mut r = Reader::new(buf.freeze());
        assert_eq!(r.nstring().unwrap().unwrap(), "héllo");
        assert_eq!(r.nstring().unwrap(), None);
        assert_eq!(r.remaining(), 0);
    }
}
