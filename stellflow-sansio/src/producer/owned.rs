//! [`Record`]: a record to produce that owns its data, for callers that hand records to
//! another thread or task (the record type of the runtime adapters).

use crate::producer::ProducerRecord;
use bytes::{Bytes, BytesMut};

/// What a record's key, value or header value can be built from: [`Bytes`], `Vec<u8>`,
/// `String`, `Box<[u8]>`, [`BytesMut`] (taken without copying), and `'static` data —
/// `&'static str`, `&'static [u8]` and byte-string literals such as `b"x"` (borrowed, not
/// copied).
pub trait IntoRecordBytes {
    /// The bytes.
    fn into_record_bytes(self) -> Bytes;
}

macro_rules! into_record_bytes {
    ($($t:ty),*) => {$(
        impl IntoRecordBytes for $t {
            fn into_record_bytes(self) -> Bytes {
                Bytes::from(self)
            }
        }
    )*};
}

into_record_bytes!(
    Bytes,
    Vec<u8>,
    String,
    Box<[u8]>,
    &'static [u8],
    &'static str
);

impl IntoRecordBytes for BytesMut {
    fn into_record_bytes(self) -> Bytes {
        self.freeze()
    }
}

impl<const N: usize> IntoRecordBytes for &'static [u8; N] {
    fn into_record_bytes(self) -> Bytes {
        Bytes::from_static(self)
    }
}

/// A record to produce that owns its data: topic, optional partition, key, value, headers and
/// timestamp. Keys and values are [`Bytes`], so building one from `Bytes` does not copy;
/// sending it copies it once, into its partition's batch.
///
/// ```
/// # use stellflow_sansio::Record;
/// let r = Record::new("orders", "payload").with_key("customer-7");
/// assert_eq!(r.partition, None);
/// assert_eq!(r.key.as_deref(), Some(&b"customer-7"[..]));
///
/// // Byte-string literals, vectors, strings and `Bytes` all work, and a key may be optional
/// // (a consumed record's `key`, passed on):
/// let key: Option<String> = None;
/// let r = Record::new("orders", b"\x00\x01").with_optional_key(key);
/// assert_eq!((r.key, r.value.as_deref()), (None, Some(&[0u8, 1][..])));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// The topic.
    pub topic: String,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key (`None`: no key).
    pub key: Option<Bytes>,
    /// The value (`None`: a tombstone).
    pub value: Option<Bytes>,
    /// Headers: UTF-8 keys, optional values.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the Unix epoch; `None` takes the current time.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a value and nothing else.
    pub fn new(topic: impl Into<String>, value: impl IntoRecordBytes) -> Self {
        Record {
            topic: topic.into(),
            value: Some(value.into_record_bytes()),
            ..Record::default()
        }
    }

    /// An owned copy of a borrowed record.
    pub fn from_borrowed(r: &ProducerRecord<'_>) -> Self {
        let bytes = |b: Option<&[u8]>| b.map(Bytes::copy_from_slice);
        Record {
            topic: r.topic.to_owned(),
            partition: r.partition,
            key: bytes(r.key),
            value: bytes(r.value),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), bytes(*v)))
                .collect(),
            timestamp: r.timestamp,
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl IntoRecordBytes) -> Self {
        self.key = Some(key.into_record_bytes());
        self
    }

    /// Sets the key, or no key for `None` (e.g. a consumed record's `key`, passed on).
    pub fn with_optional_key(mut self, key: Option<impl IntoRecordBytes>) -> Self {
        self.key = key.map(IntoRecordBytes::into_record_bytes);
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl IntoRecordBytes) -> Self {
        self.headers
            .push((key.into(), Some(value.into_record_bytes())));
        self
    }

    /// Sets the timestamp (ms since the Unix epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Calls `f` with the record in its borrowed form ([`ProducerRecord`], what the sans-IO
    /// core's `produce` takes; a driver's concern, not an application's). Nothing is copied
    /// (a record without headers allocates nothing).
    #[inline]
    pub fn with_borrowed<T>(&self, f: impl FnOnce(&ProducerRecord<'_>) -> T) -> T {
        let headers: Vec<(&str, Option<&[u8]>)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        f(&ProducerRecord {
            topic: &self.topic,
            partition: self.partition,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &headers,
            timestamp: self.timestamp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_round_trip_keeps_every_field() {
        let r = Record::new("t", "v")
            .with_key("k")
            .with_partition(3)
            .with_header("h", "x")
            .with_timestamp(42);
        let back = r.with_borrowed(Record::from_borrowed);
        assert_eq!(back, r);
        assert_eq!(Record::new("t", b"v"), Record::new("t", "v"));
        assert_eq!(
            Record::new("t", "v").with_optional_key(Some(b"k")),
            Record::new("t", "v").with_key(Bytes::from_static(b"k"))
        );
        r.with_borrowed(|b| {
            assert_eq!(b.headers, &[("h", Some(&b"x"[..]))]);
            assert_eq!(b.timestamp, Some(42));
        });
    }
}
