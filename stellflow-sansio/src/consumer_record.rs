//! One consumed record ([`ConsumerRecord`]): its place in the log and slices of the fetched
//! bytes.

use crate::offset_model::{self, Position};
use crate::topic_partition::TopicPartition;
use bytes::Bytes;
use std::sync::Arc;
use stellflow_proto::record::{BlobFormat, Headers};

/// One consumed record. `key`, `value` and `headers` are slices of the fetched bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset of the blob that holds the record (one offset per produced blob).
    pub offset: i64,
    /// The record's index in its blob, counted across all batches of the blob.
    pub index: u32,
    /// The record timestamp (producer time, milliseconds since the epoch).
    pub timestamp: i64,
    /// The key, `None` when null.
    pub key: Option<Bytes>,
    /// The value, `None` when null.
    pub value: Option<Bytes>,
    /// The headers, split lazily.
    pub headers: Headers,
    /// The format of the blob it came from.
    pub format: BlobFormat,
    /// Whether the record is the last of its blob. The decoder knows this for every record without
    /// decoding the next one (from the batch's record count, its length and the batches after it);
    /// it is `false` for the record before a corrupt remainder of the blob (that remainder is
    /// reported as [`ConsumerEvent::CorruptBlob`](crate::ConsumerEvent::CorruptBlob) and skipped).
    pub last_in_blob: bool,
}

impl ConsumerRecord {
    /// The record's topic and partition (the topic shared, not copied).
    ///
    /// ```
    /// # use stellflow_sansio::{ConsumerRecord, TopicPartition};
    /// fn where_from(record: &ConsumerRecord) -> TopicPartition {
    ///     record.topic_partition() // e.g. for the consumer's `position`, `seek` or `pause`
    /// }
    /// ```
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition {
            topic: Arc::clone(&self.topic),
            partition: self.partition,
        }
    }

    /// The position right after this record: mark it processed (`mark_processed`) or commit
    /// it (`commit_positions`) once the record is processed.
    ///
    /// After the last record of a blob ([`ConsumerRecord::last_in_blob`]) this is the start
    /// of the next blob, `(offset + 1, 0)` — the same position the consumer itself reports
    /// (and auto-commits) once the blob is finished. Otherwise it is `(offset, index + 1)`;
    /// when the end of the blob cannot be known (a corrupt remainder) that form resumes at
    /// the same place, as the skipped remainder has no records to deliver.
    pub fn next_position(&self) -> Position {
        if self.last_in_blob {
            Position::blob(offset_model::next_after(self.offset))
        } else {
            Position::new(self.offset, self.index.saturating_add(1))
        }
    }
}
