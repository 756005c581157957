//! Metadata (key 1): brokers, topics, partitions and leaders as one broker sees them
//! (PROTOCOL.md §3.2).
//!
//! The request is the only place where the server reads a bool as `byte == 1` (any other byte is
//! false), so its [`Wire`] impl is written by hand.

use crate::error_code::ErrorCode;
use crate::wire::{DecodeError, Describe, FieldValue, NString, Reader, Wire};
use bytes::BytesMut;

/// Metadata request. An empty `topics` list asks for every topic the broker knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataRequest {
    /// Topics to describe; empty = all.
    pub topics: Vec<MetadataRequestTopic>,
    /// Ignored by the server.
    pub include_cluster_authorized_operations: bool,
    /// Ignored by the server.
    pub include_topic_authorized_operations: bool,
    /// Ignored by the server (Metadata never creates topics).
    pub allow_auto_topic_creation: bool,
}

impl Wire for MetadataRequest {
    const MIN_SIZE: usize = 4 + 3;

    fn encode(&self, buf: &mut BytesMut) {
        self.topics.encode(buf);
        self.include_cluster_authorized_operations.encode(buf);
        self.include_topic_authorized_operations.encode(buf);
        self.allow_auto_topic_creation.encode(buf);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(MetadataRequest {
            topics: Wire::decode(r)?,
            include_cluster_authorized_operations: r.bool_eq_one()?,
            include_topic_authorized_operations: r.bool_eq_one()?,
            allow_auto_topic_creation: r.bool_eq_one()?,
        })
    }
}

impl Describe for MetadataRequest {
    fn describe(&self) -> FieldValue {
        FieldValue::Struct(vec![
            ("topics", self.topics.describe()),
            (
                "include_cluster_authorized_operations",
                self.include_cluster_authorized_operations.describe(),
            ),
            (
                "include_topic_authorized_operations",
                self.include_topic_authorized_operations.describe(),
            ),
            (
                "allow_auto_topic_creation",
                self.allow_auto_topic_creation.describe(),
            ),
        ])
    }
}

crate::wire_struct! {
    /// One requested topic.
    pub struct MetadataRequestTopic {
        /// Topic name (exact match). Never send null.
        pub topic: NString,
    }
}

crate::wire_struct! {
    /// Metadata response: a broker-local view (merge the answers of all brokers).
    pub struct MetadataResponse {
        /// Cluster id (hard-coded on today's server).
        pub cluster_id: NString,
        /// Controller id (hard-coded 0; ignore).
        pub controller_id: i32,
        /// Brokers this broker knows, ascending by id.
        pub brokers: Vec<MetadataBroker>,
        /// Topics; the `__empty__` placeholder appears when the broker knows none.
        pub topics: Vec<MetadataTopic>,
        /// Always 0.
        pub cluster_authorized_operations: i32,
    }
}

crate::wire_struct! {
    /// One broker's address.
    pub struct MetadataBroker {
        /// Broker id.
        pub broker_id: i32,
        /// Advertised host.
        pub host: NString,
        /// Advertised port.
        pub port: i32,
        /// Rack (always null on today's server).
        pub rack: NString,
    }
}

crate::wire_struct! {
    /// One topic's metadata.
    pub struct MetadataTopic {
        /// 0, or 10 for an unknown requested topic.
        pub error_code: ErrorCode,
        /// Topic name.
        pub topic: NString,
        /// Whether the topic is internal (only the `__empty__` placeholder is).
        pub is_internal: bool,
        /// Partitions, ascending by id.
        pub partitions: Vec<MetadataPartition>,
        /// Always 0.
        pub topic_authorized_operations: i32,
    }
}

crate::wire_struct! {
    /// One partition's metadata.
    pub struct MetadataPartition {
        /// Always 0.
        pub error_code: ErrorCode,
        /// Partition id.
        pub partition: i32,
        /// Leader broker id; treat the partition as leaderless if it is not in `brokers`.
        pub leader_id: i32,
        /// Leader epoch.
        pub leader_epoch: i32,
        /// Replica broker ids.
        pub replica_nodes: Vec<i32>,
        /// In-sync replica broker ids.
        pub isr_nodes: Vec<i32>,
        /// Always empty.
        pub offline_replica_nodes: Vec<i32>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn request_bools_are_true_only_for_one() {
        let r = MetadataRequest::from_bytes(Bytes::from_static(&[0, 0, 0, 0, 2, 0xff, 1]));
        assert_eq!(
            r,
            Ok(MetadataRequest {
                topics: vec![],
                include_cluster_authorized_operations: false,
                include_topic_authorized_operations: false,
                allow_auto_topic_creation: true,
            })
        );
    }
}
