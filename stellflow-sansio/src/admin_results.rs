//! The result types of admin commands: what a caller reads back.

use crate::address::BrokerAddress;
use crate::error::AdminError;
use crate::metadata::PartitionInfo;
use crate::offset_model::Position;
use stellflow_proto::{ApiKey, ErrorCode};

/// Which offset ListOffsets should find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset (timestamp −2).
    Earliest,
    /// The log end offset: the next offset to be written (timestamp −1; not the high watermark
    /// on today's server).
    Latest,
    /// The first blob whose broker append time is at or after this many ms since the epoch.
    Timestamp(i64),
}

impl OffsetSpec {
    pub(crate) fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// One API as a broker advertises it, with the version this client chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSupport {
    /// The API.
    pub api_key: ApiKey,
    /// Broker's lowest version.
    pub min_version: i16,
    /// Broker's highest version.
    pub max_version: i16,
    /// The version this client uses, `None` when no common version exists.
    pub chosen: Option<i16>,
}

/// What one broker answered to ApiVersions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerApiVersions {
    /// The broker asked.
    pub address: BrokerAddress,
    /// Its id, if known.
    pub broker_id: Option<i32>,
    /// Every API it lists.
    pub apis: Vec<ApiSupport>,
    /// `brokerSoftwareName`.
    pub software_name: Option<String>,
    /// `brokerSoftwareVersion`.
    pub software_version: Option<String>,
    /// Advertised feature strings (not reliable on today's server).
    pub features: Vec<String>,
}

/// DescribeCluster / HealthCheck answer of one broker (its local view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The broker asked.
    pub address: BrokerAddress,
    /// Its id, if known.
    pub broker_id: Option<i32>,
    /// Body error code (always 0 today).
    pub error_code: ErrorCode,
    /// Cluster id (hard-coded by today's server).
    pub cluster_id: Option<String>,
    /// Brokers in that broker's metadata.
    pub broker_count: i32,
    /// Topics in its local metadata.
    pub topic_count: i32,
    /// Partitions in its local metadata.
    pub partition_count: i32,
}

/// A topic in the merged metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// Name.
    pub name: String,
    /// Partitions in id order, leaders resolved (see [`PartitionInfo::leaderless`]).
    pub partitions: Vec<PartitionInfo>,
}

/// Per-partition outcome of CreateTopic, DeleteTopic or AlterPartition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOutcome {
    /// Partition (−1 when the broker answers for the whole topic).
    pub partition: i32,
    /// Error code (0 = success).
    pub error_code: ErrorCode,
    /// Leader epoch.
    pub leader_epoch: i32,
}

/// Result of CreateTopic, DeleteTopic or AlterPartition on one broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicAdminResult {
    /// The broker that applied it.
    pub address: BrokerAddress,
    /// Its id, if known.
    pub broker_id: Option<i32>,
    /// Topic, as echoed.
    pub topic: Option<String>,
    /// Per-partition outcomes.
    pub partitions: Vec<PartitionOutcome>,
}

impl TopicAdminResult {
    /// Whether every partition succeeded.
    pub fn is_ok(&self) -> bool {
        self.partitions.iter().all(|p| p.error_code.is_ok())
    }
}

/// An offset found by ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetInfo {
    /// The offset. With `no_match`, the log end offset.
    pub offset: i64,
    /// Latest: the broker's time; earliest: 0; by time: the blob's append time.
    pub timestamp: i64,
    /// The partition's leader epoch as the broker knows it.
    pub leader_epoch: i32,
    /// By-timestamp only: no blob at or after that time (error 11 from the broker): `offset` is
    /// then the log end offset, the usual fallback.
    pub no_match: bool,
}

/// One partition's ListOffsets outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The offset or why there is none.
    pub result: Result<OffsetInfo, AdminError>,
}

/// DecommissionBroker answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecommissionResult {
    /// Error code (always 0 today).
    pub error_code: ErrorCode,
    /// The broker's message.
    pub message: Option<String>,
}

/// One partition whose leadership was re-asserted (or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassertedPartition {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The epoch sent.
    pub leader_epoch: i32,
    /// Success, or why not.
    pub result: Result<(), AdminError>,
}

/// One partition's committed position, as [`AdminCall::committed_offsets`] finds it.
///
/// [`AdminCall::committed_offsets`]: crate::AdminCall::committed_offsets
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed position (`None`: nothing committed), or the partition's error.
    pub result: Result<Option<Position>, AdminError>,
}
