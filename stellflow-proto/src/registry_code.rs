//! The impls a registry code shares (an `i16` newtype with a `name()`: [`crate::ApiKey`],
//! [`crate::ErrorCode`]): printed as `Name(n)` or `Unknown…(n)`, two big-endian bytes on the
//! wire, an integer field when described.

/// Implements `Debug`, `Display`, `Wire` and `Describe` for `$ty`, a registry code; `$unknown`
/// names a value the registry does not hold.
macro_rules! impl_registry_code {
    ($ty:ident, $unknown:literal) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{n}({})", self.0),
                    None => write!(f, concat!($unknown, "({})"), self.0),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }

        impl crate::wire::Wire for $ty {
            const MIN_SIZE: usize = 2;
            fn encode(&self, buf: &mut bytes::BytesMut) {
                bytes::BufMut::put_i16(buf, self.0);
            }
            fn decode(r: &mut crate::wire::Reader) -> Result<Self, crate::wire::DecodeError> {
                Ok($ty(r.i16()?))
            }
        }

        impl crate::wire::Describe for $ty {
            fn describe(&self) -> crate::wire::FieldValue {
                crate::wire::FieldValue::Int {
                    value: i64::from(self.0),
                    bits: 16,
                }
            }
        }
    };
}

pub(crate) use impl_registry_code;
