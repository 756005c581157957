//! Describing wire values as trees of named fields ([`Describe`], [`FieldValue`]), and the
//! [`wire_struct!`](crate::wire_struct) macro that gives a plain struct both its layout and its
//! description.

use super::{NBytes, NString};
use bytes::Bytes;

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

/// Declares a struct whose wire layout is its fields in order, and implements [`Wire`](super::Wire) for it.
///
/// Every field type must implement [`Wire`](super::Wire) and [`Describe`]; the struct gets both, plus
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
mod macro_tests {
    use super::*;
    use crate::wire::Wire;

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
