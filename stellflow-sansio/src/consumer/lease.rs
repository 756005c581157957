//! Records lent out of the delivery queue: decoded without the client (an adapter decodes
//! them outside its lock), then delivered, or dropped when the queue moved meanwhile.

use super::{ConsumerRecord, TopicPartition};
use stellflow_proto::record::{BatchError, BlobRecords, RecordParts};

/// Up to `max` records of the blobs at the front of the delivery queue, lent out by
/// [`crate::DriverExt::lease_records`] so that they can be decoded without `&mut Client`.
///
/// The contract, in three steps:
/// 1. [`crate::DriverExt::lease_records`] lends the records out. Nothing moves: positions,
///    commits and buffer space are as before.
/// 2. [`RecordLease::decode`] decodes them and checks their batches. It needs only the lease,
///    so an adapter runs it outside the lock that guards the client.
/// 3. [`crate::DriverExt::redeem_lease`] delivers them: the positions move past them and their
///    buffer space is freed, as [`crate::Client::poll_records`] would have done. When
///    something took or moved those records in the meantime (another poll, a seek, a pause,
///    a rebalance), the lease is stale: nothing is delivered and the caller leases again.
///
/// A lease that is dropped instead of redeemed delivers nothing.
#[derive(Debug)]
pub struct RecordLease {
    blobs: Vec<LeasedBlob>,
    max: usize,
    records: Vec<ConsumerRecord>,
    decoded: bool,
}

/// One blob of a lease, with its own copy of the blob's decoding state.
#[derive(Debug)]
pub(crate) struct LeasedBlob {
    /// The queue's id of the blob (`ReadyBlob::id`).
    pub id: u64,
    /// How far the queue's copy had decoded when it was lent (`BlobRecords::next_index`).
    pub start: u32,
    pub tp: TopicPartition,
    pub offset: i64,
    /// Records below this index were delivered before.
    pub skip: u32,
    /// The lease's copy of the decoding state, moved on by [`RecordLease::decode`].
    pub records: BlobRecords,
    /// Records decoded from this blob, and their key and value bytes.
    pub taken: u64,
    pub bytes: usize,
    /// The blob was decoded to its end (or to a corrupt remainder, `error`).
    pub finished: bool,
    pub error: Option<BatchError>,
}

impl LeasedBlob {
    /// A lent copy of a queued blob's state.
    pub(crate) fn new(
        id: u64,
        tp: &TopicPartition,
        offset: i64,
        skip: u32,
        records: &BlobRecords,
    ) -> Self {
        LeasedBlob {
            id,
            start: records.next_index(),
            tp: tp.clone(),
            offset,
            skip,
            records: records.clone(),
            taken: 0,
            bytes: 0,
            finished: false,
            error: None,
        }
    }
}

impl RecordLease {
    pub(crate) fn new(blobs: Vec<LeasedBlob>, max: usize) -> Self {
        RecordLease {
            blobs,
            max,
            records: Vec::new(),
            decoded: false,
        }
    }

    /// Decodes the lent records (at most the `max` asked for), checking each batch; runs once,
    /// later calls do nothing. A corrupt remainder of a blob ends the decoding there; it is
    /// reported as [`super::ConsumerEvent::CorruptBlob`] when the lease is redeemed. Blobs
    /// the decoding did not reach are let go.
    pub fn decode(&mut self) {
        if std::mem::replace(&mut self.decoded, true) {
            return;
        }
        let out = &mut self.records;
        out.reserve(self.max.min(16 * 1024));
        let mut reached = 0;
        for b in &mut self.blobs {
            if out.len() >= self.max {
                break;
            }
            reached += 1;
            let (tp, offset, skip) = (&b.tp, b.offset, b.skip);
            while out.len() < self.max {
                // Each record is built in its slot of `out` (see `RecordParts`).
                let step = b.records.next_with(|p| {
                    let taken = p.index_in_blob() >= skip;
                    if taken {
                        b.bytes += p.key_and_value_len();
                        out.push(build_record(tp, offset, &p));
                    }
                    (taken, p.is_last_in_blob())
                });
                match step {
                    None => b.finished = true,
                    Some(Err(error)) => {
                        b.error = Some(error);
                        b.finished = true;
                    }
                    Some(Ok((taken, last))) => {
                        b.finished = last;
                        b.taken += u64::from(taken);
                    }
                }
                if b.finished {
                    break;
                }
            }
            if !b.finished {
                break;
            }
        }
        self.blobs.truncate(reached);
    }

    /// The blobs decoding reached, in queue order, and the records (for redeeming).
    pub(crate) fn into_parts(mut self) -> (Vec<LeasedBlob>, Vec<ConsumerRecord>) {
        self.decode();
        (self.blobs, self.records)
    }
}

/// The record `r` of the blob at `offset` of `tp`, built from its parts.
#[inline(always)]
pub(crate) fn build_record(
    tp: &TopicPartition,
    offset: i64,
    r: &RecordParts<'_>,
) -> ConsumerRecord {
    ConsumerRecord {
        topic: tp.topic.clone(),
        partition: tp.partition,
        offset,
        index: r.index_in_blob(),
        timestamp: r.timestamp(),
        key: r.key(),
        value: r.value(),
        headers: r.headers(),
        format: r.format(),
        last_in_blob: r.is_last_in_blob(),
    }
}
