//! OffsetCommit (key 5): store committed offsets for a group (PROTOCOL.md §3.6).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// OffsetCommit request (no membership needed).
    pub struct OffsetCommitRequest {
        /// Group id.
        pub group_id: NString,
        /// Offsets per topic.
        pub topics: Vec<OffsetCommitTopic>,
    }
}

crate::wire_struct! {
    /// Offsets to commit for one topic.
    pub struct OffsetCommitTopic {
        /// Topic name.
        pub topic: NString,
        /// Offsets per partition.
        pub partitions: Vec<OffsetCommitPartition>,
    }
}

crate::wire_struct! {
    /// One committed position.
    pub struct OffsetCommitPartition {
        /// Partition id.
        pub partition: i32,
        /// Offset, stored verbatim.
        pub offset: i64,
        /// Metadata, stored verbatim.
        pub metadata: NString,
    }
}

crate::wire_struct! {
    /// OffsetCommit response, in request order.
    pub struct OffsetCommitResponse {
        /// Results per topic.
        pub topics: Vec<OffsetCommitTopicResponse>,
    }
}

crate::wire_struct! {
    /// Results for one topic.
    pub struct OffsetCommitTopicResponse {
        /// Topic name.
        pub topic: NString,
        /// Results per partition.
        pub partitions: Vec<OffsetCommitPartitionResponse>,
    }
}

crate::wire_struct! {
    /// The result for one partition.
    pub struct OffsetCommitPartitionResponse {
        /// Partition id.
        pub partition: i32,
        /// Always 0 on today's server.
        pub error_code: ErrorCode,
    }
}
