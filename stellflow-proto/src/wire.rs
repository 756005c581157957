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

/// A nullable string as it travels on the wire: `None` is length −1.
pub type NString = Option<StrBytes>;

/// Nullable bytes as they travel on the wire: `None` is length −1.
pub type NBytes = Option<Bytes>;

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

/// A wire value described as a tree of named fields, for diagnostics, JSON output (the CLI) and
/// golden-vector tests. Integers keep their wire width.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldValue {
    /// A fixed-width integer (`bits` is 8, 16, 32 or 64).
    Int {
        /// The value, sign-extended.
        value: i64,
        /// The wire width in bits.
        bits: u8,
    },
    /// A boolean.
    Bool(bool),
    /// A nullable string.
    Str(Option<String>),
    /// Nullable bytes.
    Bytes(Option<Bytes>),
    /// An array.
    List(Vec<FieldValue>),
    /// A structure: field names (snake_case, as in the Rust type) in wire order.
    Struct(Vec<(&'static str, FieldValue)>),
}

/// Describes a value as a [`FieldValue`] tree. Implemented by every message type.
pub trait Describe {
    /// The field tree of `self`.
    fn describe(&self) -> FieldValue;
}

macro_rules! int_describe {
    ($($t:ty => $bits:expr),*) => {$(
        impl Describe for $t {
            fn describe(&self) -> FieldValue {
                FieldValue::Int { value: i64::from(*self), bits: $bits }
            }
        }
    )*};
}
int_describe!(i8 => 8, i16 => 16, i32 => 32, i64 => 64);

impl Describe for bool {
    fn describe(&self) -> FieldValue {
        FieldValue::Bool(*self)
    }
}

impl Describe for NString {
    fn describe(&self) -> FieldValue {
        FieldValue::Str(self.as_ref().map(|s| s.as_str().to_owned()))
    }
}

impl Describe for NBytes {
    fn describe(&self) -> FieldValue {
        FieldValue::Bytes(self.clone())
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe(&self) -> FieldValue {
        FieldValue::List(self.iter().map(Describe::describe).collect())
    }
}

/// Declares a struct whose wire layout is its fields in order, and implements [`Wire`] for it.
///
/// Every field type must implement [`Wire`] and [`Describe`]; the struct gets both, plus
/// `Debug, Clone, PartialEq, Eq, Default`. Used for all message bodies whose layout is a plain
/// sequence of fields.
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl $crate::wire::Describe for $name {
            fn describe(&self) -> $crate::wire::FieldValue {
                $crate::wire::FieldValue::Struct(vec![
                    $( (stringify!($field), $crate::wire::Describe::describe(&self.$field)), )*
                ])
            }
        }

        impl $crate::wire::Wire for $name {
            const MIN_SIZE: usize = 0 $(+ <$ty as $crate::wire::Wire>::MIN_SIZE)*;

            fn encode(&self, buf: &mut ::bytes::BytesMut) {
                $( $crate::wire::Wire::encode(&self.$field, buf); )*
                let _ = buf;
            }

            fn decode(r: &mut $crate::wire::Reader) -> Result<Self, $crate::wire::DecodeError> {
                let _ = &r;
                Ok(Self {
                    $( $field: <$ty as $crate::wire::Wire>::decode(r)?, )*
                })
            }
        }
    };
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

#[cfg(test)]
mod macro_tests {
    use super::*;

    crate::wire_struct! {
        /// A test struct.
        pub struct Pair {
            /// A name.
            pub name: NString,
            /// Numbers.
            pub values: Vec<i64>,
        }
    }

    #[test]
    fn wire_struct_round_trips_and_describes() {
        let p = Pair {
            name: Some("x".into()),
            values: vec![1, -1],
        };
        let bytes = p.to_bytes();
        assert_eq!(bytes.len(), 2 + 1 + 4 + 16);
        assert_eq!(Pair::from_bytes(bytes).unwrap(), p);
        assert_eq!(Pair::MIN_SIZE, 6);
        match p.describe() {
            FieldValue::Struct(fields) => assert_eq!(fields[0].0, "name"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
