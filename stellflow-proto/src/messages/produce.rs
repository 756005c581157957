//! Produce (key 2): append one record blob per partition entry (PROTOCOL.md §3.3).

use crate::error_code::ErrorCode;
use crate::wire::{NBytes, NString, SharedPiece, Wire};
use bytes::{BufMut, BytesMut};

crate::wire_struct! {
    /// Produce request.
    pub struct ProduceRequest {
        /// Transactional id; if non-blank it is the idempotent producer key.
        pub transactional_id: NString,
        /// 0, 1 or -1 (0 still gets a response).
        pub acks: i16,
        /// Replication wait for `acks = -1`, in milliseconds.
        pub timeout_ms: i32,
        /// Data per topic.
        pub topic_data: Vec<ProduceTopicData>,
    }
}

crate::wire_struct! {
    /// Produce data for one topic.
    pub struct ProduceTopicData {
        /// Topic name.
        pub topic: NString,
        /// Data per partition.
        pub partitions: Vec<ProducePartitionData>,
    }
}

crate::wire_struct! {
    /// One record blob for one partition; the blob gets exactly one offset.
    pub struct ProducePartitionData {
        /// Partition id.
        pub partition: i32,
        /// The blob (v1 batch, SRFB envelope, or opaque bytes); null/empty is rejected with 14.
        pub records: NBytes,
    }
}

crate::wire_struct! {
    /// Produce response, in request order.
    pub struct ProduceResponse {
        /// One entry per requested topic entry.
        pub responses: Vec<ProduceTopicResponse>,
    }
}

crate::wire_struct! {
    /// Produce results for one topic.
    pub struct ProduceTopicResponse {
        /// Topic name (echo).
        pub topic: NString,
        /// One entry per requested partition entry.
        pub partitions: Vec<ProducePartitionResponse>,
    }
}

crate::wire_struct! {
    /// The result for one produced blob.
    pub struct ProducePartitionResponse {
        /// Partition id (echo).
        pub partition: i32,
        /// Per-partition error.
        pub error_code: ErrorCode,
        /// Offset of the blob, -1 on most failures (real offset with error 7).
        pub base_offset: i64,
        /// Leader epoch of the partition's log.
        pub current_leader_epoch: i32,
        /// Always -1.
        pub log_append_time_ms: i64,
        /// Current log start offset.
        pub log_start_offset: i64,
    }
}

impl ProduceRequest {
    /// Appends the request as [`Wire::encode`] does, except that a record blob of
    /// `min_shared` bytes or more is not copied: only its length is written, and the blob is
    /// pushed to `shared` with its place in `buf` (see [`SharedPiece`]).
    pub fn encode_sharing(
        &self,
        buf: &mut BytesMut,
        min_shared: usize,
        shared: &mut Vec<SharedPiece>,
    ) {
        self.transactional_id.encode(buf);
        self.acks.encode(buf);
        self.timeout_ms.encode(buf);
        buf.put_i32(self.topic_data.len() as i32);
        for topic in &self.topic_data {
            topic.topic.encode(buf);
            buf.put_i32(topic.partitions.len() as i32);
            for p in &topic.partitions {
                p.partition.encode(buf);
                match &p.records {
                    Some(blob) if blob.len() >= min_shared => {
                        buf.put_i32(blob.len() as i32);
                        shared.push(SharedPiece {
                            at: buf.len(),
                            bytes: blob.clone(),
                        });
                    }
                    records => records.encode(buf),
                }
            }
        }
    }
}
