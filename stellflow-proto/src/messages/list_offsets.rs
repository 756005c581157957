//! ListOffsets (key 4): offsets by time, earliest or latest (PROTOCOL.md §3.5).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// ListOffsets request.
    pub struct ListOffsetsRequest {
        /// Ignored (send -1).
        pub replica_id: i32,
        /// Ignored (send 0).
        pub isolation_level: i8,
        /// Queries per topic.
        pub topics: Vec<ListOffsetsTopic>,
    }
}

crate::wire_struct! {
    /// Queries for one topic.
    pub struct ListOffsetsTopic {
        /// Topic name.
        pub topic: NString,
        /// Queries per partition.
        pub partitions: Vec<ListOffsetsPartition>,
    }
}

crate::wire_struct! {
    /// One offset query.
    pub struct ListOffsetsPartition {
        /// Partition id.
        pub partition: i32,
        /// -1 = don't check; >= 0 must equal the leader epoch.
        pub current_leader_epoch: i32,
        /// -1 latest, -2 earliest, >= 0 broker append time.
        pub timestamp: i64,
        /// Must be >= 1.
        pub max_num_offsets: i32,
    }
}

crate::wire_struct! {
    /// ListOffsets response, in request order.
    pub struct ListOffsetsResponse {
        /// Results per topic.
        pub topics: Vec<ListOffsetsTopicResponse>,
    }
}

crate::wire_struct! {
    /// Results for one topic.
    pub struct ListOffsetsTopicResponse {
        /// Topic name.
        pub topic: NString,
        /// Results per partition.
        pub partitions: Vec<ListOffsetsPartitionResponse>,
    }
}

crate::wire_struct! {
    /// The answer for one partition.
    pub struct ListOffsetsPartitionResponse {
        /// Partition id.
        pub partition: i32,
        /// Per-partition error.
        pub error_code: ErrorCode,
        /// Partition leader epoch.
        pub leader_epoch: i32,
        /// Timestamp of the answer.
        pub timestamp: i64,
        /// The offset.
        pub offset: i64,
        /// Up to `max_num_offsets` offsets starting at the answer.
        pub offsets: Vec<i64>,
    }
}
