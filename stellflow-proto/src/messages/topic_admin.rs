//! CreateTopic (50), DeleteTopic (51) and AlterPartition (52) (PROTOCOL.md §3.14).
//!
//! The three requests share one seven-field layout (every field is on the wire even where the
//! API ignores it); each gets its own type so that it names its API key. All three answer with
//! [`TopicAdminResponse`].

use crate::error_code::ErrorCode;
use crate::wire::NString;

macro_rules! topic_admin_request {
    ($(#[$meta:meta])* $name:ident) => {
        crate::wire_struct! {
            $(#[$meta])*
            pub struct $name {
                /// Topic name.
                pub topic: NString,
                /// Number of partitions (CreateTopic only).
                pub partition_count: i32,
                /// Partition id (AlterPartition only).
                pub partition: i32,
                /// Leader broker id (AlterPartition only).
                pub leader_id: i32,
                /// Leader epoch (AlterPartition only).
                pub leader_epoch: i32,
                /// Replica broker ids (AlterPartition only).
                pub replica_nodes: Vec<i32>,
                /// In-sync replica broker ids (AlterPartition only).
                pub isr_nodes: Vec<i32>,
            }
        }
    };
}

topic_admin_request! {
    /// CreateTopic request: creates partitions `0..partition_count` on the receiving broker.
    CreateTopicRequest
}

topic_admin_request! {
    /// DeleteTopic request: deletes the topic's local data and metadata.
    DeleteTopicRequest
}

topic_admin_request! {
    /// AlterPartition request: overwrites one partition's leader, epoch, replicas and ISR.
    AlterPartitionRequest
}

impl CreateTopicRequest {
    /// A CreateTopic request with the unused fields set as the Go SDK sends them (-1, empty).
    pub fn new(topic: &str, partition_count: i32) -> Self {
        CreateTopicRequest {
            topic: Some(topic.into()),
            partition_count,
            partition: -1,
            leader_id: -1,
            leader_epoch: -1,
            replica_nodes: Vec::new(),
            isr_nodes: Vec::new(),
        }
    }
}

impl DeleteTopicRequest {
    /// A DeleteTopic request with the unused fields set to -1 / empty.
    pub fn new(topic: &str) -> Self {
        DeleteTopicRequest {
            topic: Some(topic.into()),
            partition_count: -1,
            partition: -1,
            leader_id: -1,
            leader_epoch: -1,
            replica_nodes: Vec::new(),
            isr_nodes: Vec::new(),
        }
    }
}

crate::wire_struct! {
    /// Response to CreateTopic, DeleteTopic and AlterPartition.
    pub struct TopicAdminResponse {
        /// Topic name (echo).
        pub topic: NString,
        /// One result per affected partition (`partition` -1 for topic-level results).
        pub partitions: Vec<TopicAdminPartitionResult>,
    }
}

crate::wire_struct! {
    /// The result for one partition.
    pub struct TopicAdminPartitionResult {
        /// Partition id, or -1.
        pub partition: i32,
        /// Error code.
        pub error_code: ErrorCode,
        /// Leader epoch.
        pub leader_epoch: i32,
    }
}
