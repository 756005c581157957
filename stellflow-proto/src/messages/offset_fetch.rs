//! OffsetFetch (key 6): read committed offsets of a group (PROTOCOL.md §3.7).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// OffsetFetch request.
    pub struct OffsetFetchRequest {
        /// Group id.
        pub group_id: NString,
        /// Partitions per topic (an empty list gives an empty answer).
        pub topics: Vec<OffsetFetchTopic>,
    }
}

crate::wire_struct! {
    /// Partitions of one topic.
    pub struct OffsetFetchTopic {
        /// Topic name.
        pub topic: NString,
        /// Partitions.
        pub partitions: Vec<OffsetFetchPartition>,
    }
}

crate::wire_struct! {
    /// One partition.
    pub struct OffsetFetchPartition {
        /// Partition id.
        pub partition: i32,
    }
}

crate::wire_struct! {
    /// OffsetFetch response, in request order.
    pub struct OffsetFetchResponse {
        /// Results per topic.
        pub topics: Vec<OffsetFetchTopicResponse>,
    }
}

crate::wire_struct! {
    /// Results for one topic.
    pub struct OffsetFetchTopicResponse {
        /// Topic name.
        pub topic: NString,
        /// Results per partition.
        pub partitions: Vec<OffsetFetchPartitionResponse>,
    }
}

crate::wire_struct! {
    /// The committed position of one partition.
    pub struct OffsetFetchPartitionResponse {
        /// Partition id.
        pub partition: i32,
        /// Committed offset, or -1 if none.
        pub offset: i64,
        /// Committed metadata (`""` if none).
        pub metadata: NString,
        /// Always 0 on today's server.
        pub error_code: ErrorCode,
    }
}
