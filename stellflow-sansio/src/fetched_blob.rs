//! Whole-blob delivery: a fetched blob handed to the application, its records decoded as it
//! iterates them.
//!
//! [`crate::Client::poll_record`] builds one [`super::ConsumerRecord`] per record: a ~140-byte
//! value with its own handle on the topic name, written into the caller's vector and dropped
//! there. For small records that bookkeeping is a large share of the work
//! (`docs/performance.md` gives both paths' figures). [`crate::Client::poll_blob`] hands over
//! the blob instead, as rdkafka's borrowed messages and franz-go's `EachRecord` do: the topic,
//! partition and offset once, then each record straight from the decoder.

use super::offset_model::{self, Position};
use std::sync::Arc;
use stellflow_proto::record::{BatchError, BlobFormat, BlobRecord, BlobRecords};

/// One fetched blob (one offset of a partition), handed over whole by the client's
/// `poll_blob` (the adapters' `poll_blobs`). Iterating it decodes its records in order, checking each
/// batch (CRC-32C) before its first record; keys, values and headers are slices of the
/// fetched bytes, never copies.
///
/// Taking the blob delivers all of it: the partition's position moves to
/// [`FetchedBlob::next_position`] at once, as if every record had been polled, and that is
/// what a commit (auto-commit included) stores from then on. Records a previous poll already
/// delivered (a blob resumed mid-way, or partly taken with `poll_record`) are not yielded
/// again.
///
/// A corrupt remainder ends the iteration with one `Err` naming the problem (records before it
/// were valid); unlike `poll_record`, no [`super::ConsumerEvent::CorruptBlob`] is raised for
/// it, since the core no longer sees the blob. The error is the whole report: log it, and
/// the partition goes on with the next blob.
///
/// ```
/// # use stellflow_proto::record::{BatchBuilder, BatchParams};
/// # use stellflow_sansio::FetchedBlob;
/// # fn show(blob: FetchedBlob) {
/// for record in blob {
///     match record {
///         Ok(r) => println!("#{} {:?}", r.index_in_blob, r.record.value),
///         Err(e) => eprintln!("corrupt blob: {e}"),
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct FetchedBlob {
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    /// Records below this index were delivered before.
    pub(super) skip: u32,
    pub(super) records: BlobRecords,
    /// Records its batches declare, less those delivered before.
    undelivered: u64,
}

impl FetchedBlob {
    pub(crate) fn new(
        topic: Arc<str>,
        partition: i32,
        offset: i64,
        skip: u32,
        records: BlobRecords,
        undelivered: u64,
    ) -> Self {
        FetchedBlob {
            topic,
            partition,
            offset,
            skip,
            records,
            undelivered,
        }
    }

    /// The topic.
    pub fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    /// The partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The blob's offset: every record in it shares it (one offset per produced blob).
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// How many of its records iterating it yields (what its batches declare, less those
    /// delivered before); the batches are not checked for this.
    pub fn undelivered_records(&self) -> u64 {
        self.undelivered
    }

    /// The blob's format.
    pub fn format(&self) -> BlobFormat {
        self.records.format()
    }

    /// The position right after this blob (the start of the next one): mark it processed
    /// (`mark_position`) or commit it (`commit_positions`) once the blob's records are
    /// processed.
    pub fn next_position(&self) -> Position {
        Position::blob(offset_model::next_after(self.offset))
    }
}

impl IntoIterator for FetchedBlob {
    type Item = Result<BlobRecord, BatchError>;
    type IntoIter = BlobRecordsFrom;

    /// The blob's records not delivered before, decoded one by one.
    fn into_iter(self) -> BlobRecordsFrom {
        BlobRecordsFrom {
            skip: self.skip,
            records: self.records,
        }
    }
}

/// The records of a [`FetchedBlob`], from the first one not delivered before.
#[derive(Debug)]
pub struct BlobRecordsFrom {
    skip: u32,
    records: BlobRecords,
}

impl Iterator for BlobRecordsFrom {
    type Item = Result<BlobRecord, BatchError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.records.next()? {
                Ok(r) if r.index_in_blob < self.skip => continue,
                other => return Some(other),
            }
        }
    }
}

impl std::iter::FusedIterator for BlobRecordsFrom {}
