//! Fetch (key 3): read stored blobs from partitions (PROTOCOL.md §3.4).

use crate::error_code::ErrorCode;
use crate::wire::{NBytes, NString};

crate::wire_struct! {
    /// Fetch request.
    pub struct FetchRequest {
        /// Must be negative (-1) for clients; >= 0 is the follower path.
        pub replica_id: i32,
        /// Ignored by today's server (no long poll).
        pub max_wait_ms: i32,
        /// Ignored by today's server.
        pub min_bytes: i32,
        /// Ignored by today's server.
        pub max_bytes: i32,
        /// Ignored (0 = read_uncommitted).
        pub isolation_level: i8,
        /// Echoed back; send 0.
        pub session_id: i32,
        /// What to fetch, per topic.
        pub topic_partitions: Vec<FetchTopic>,
    }
}

crate::wire_struct! {
    /// Fetch positions for one topic.
    pub struct FetchTopic {
        /// Topic name.
        pub topic: NString,
        /// Positions per partition (a partition may repeat).
        pub partitions: Vec<FetchPartition>,
    }
}

crate::wire_struct! {
    /// Fetch position for one partition.
    pub struct FetchPartition {
        /// Partition id.
        pub partition: i32,
        /// Ignored (send -1 or the known epoch).
        pub current_leader_epoch: i32,
        /// First offset wanted.
        pub fetch_offset: i64,
        /// Ignored (send -1).
        pub log_start_offset: i64,
        /// Soft byte budget for this entry.
        pub partition_max_bytes: i32,
    }
}

crate::wire_struct! {
    /// Fetch response, in request order.
    pub struct FetchResponse {
        /// Echo of the request's session id.
        pub session_id: i32,
        /// One entry per requested topic entry.
        pub responses: Vec<FetchTopicResponse>,
    }
}

crate::wire_struct! {
    /// Fetch results for one topic.
    pub struct FetchTopicResponse {
        /// Topic name.
        pub topic: NString,
        /// One entry per requested partition entry.
        pub partitions: Vec<FetchPartitionResponse>,
    }
}

crate::wire_struct! {
    /// Fetch result for one partition entry.
    pub struct FetchPartitionResponse {
        /// Partition id.
        pub partition: i32,
        /// 0, 9 or 10.
        pub error_code: ErrorCode,
        /// High watermark.
        pub high_watermark: i64,
        /// Log start offset.
        pub log_start_offset: i64,
        /// Equal to the high watermark on today's server.
        pub last_stable_offset: i64,
        /// Always empty on today's server.
        pub aborted_transactions: Vec<AbortedTransaction>,
        /// Stored blobs concatenated, with no per-blob framing (a zero-copy slice).
        pub records: NBytes,
    }
}

crate::wire_struct! {
    /// An aborted transaction range (never sent by today's server).
    pub struct AbortedTransaction {
        /// Producer id.
        pub producer_id: i64,
        /// First offset of the transaction.
        pub first_offset: i64,
    }
}
