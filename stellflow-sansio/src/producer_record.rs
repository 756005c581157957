//! The record a producer is given ([`ProducerRecord`], borrowed) and its headers.

/// A record header: a UTF-8 key and an optional value.
pub type RecordHeader<'a> = (&'a str, Option<&'a [u8]>);

/// A record to produce. It borrows its data: `produce` copies it into a batch at once, so the
/// caller keeps ownership (and can retry with the same record after
/// [`ProduceError::BufferFull`](crate::ProduceError::BufferFull)).
///
/// ```
/// # use stellflow_sansio::ProducerRecord;
/// let r = ProducerRecord::new("orders", b"payload").with_key(b"customer-7");
/// assert_eq!(r.partition, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerRecord<'a> {
    /// The topic (validated client-side, DESIGN §3.11).
    pub topic: &'a str,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key; an empty key counts as no key for partitioning (it is still written).
    pub key: Option<&'a [u8]>,
    /// The value; `None` is a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Record headers.
    pub headers: &'a [RecordHeader<'a>],
    /// Milliseconds since the Unix epoch; `None` takes the client's wall clock (the adapters
    /// set it from the system clock; a driver of the core with `set_wall_clock`), or −1 if
    /// none was given.
    pub timestamp: Option<i64>,
}

impl<'a> ProducerRecord<'a> {
    /// A record with a value and nothing else.
    pub fn new(topic: &'a str, value: &'a [u8]) -> Self {
        ProducerRecord {
            topic,
            value: Some(value),
            ..ProducerRecord::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: &'a [u8]) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the headers.
    pub fn with_headers(mut self, headers: &'a [RecordHeader<'a>]) -> Self {
        self.headers = headers;
        self
    }

    /// Sets the timestamp (ms since the Unix epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}
