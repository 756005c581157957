//! Request bodies (PROTOCOL.md §3): the typed v0 messages of `stellflow_proto::messages`,
//! encoded to bytes. Only deliberately odd bodies (raw counts, raw bool bytes) are patched or
//! built from primitives.

use bytes::{BufMut, Bytes, BytesMut};
use stellflow_proto::messages as m;
use stellflow_proto::wire::{NString, StrBytes, Wire};

fn ns(v: Option<&str>) -> NString {
    v.map(StrBytes::from)
}

/// ApiVersions request (§3.1); also the DescribeCluster/HealthCheck request layout (§3.15).
pub fn api_versions_req(name: Option<&str>, version: Option<&str>, features: &[&str]) -> Bytes {
    m::ApiVersionsRequest {
        client_software_name: ns(name),
        client_software_version: ns(version),
        supported_features: features.iter().map(|f| ns(Some(f))).collect(),
    }
    .to_bytes()
}

/// The minimal ApiVersions-shaped body `ff ff ff ff 00 00 00 00` (§3.15), as a typed
/// DescribeCluster request (HealthCheck has the same layout).
pub fn minimal_api_versions_req() -> Bytes {
    m::DescribeClusterRequest::default().to_bytes()
}

/// Metadata request (§3.2) for the named topics (empty = all topics).
pub fn metadata_req(topics: &[&str]) -> Bytes {
    m::MetadataRequest {
        topics: topics
            .iter()
            .map(|t| m::MetadataRequestTopic { topic: ns(Some(t)) })
            .collect(),
        ..Default::default()
    }
    .to_bytes()
}

/// Metadata request with a raw (possibly negative) topic count and no topics.
pub fn metadata_req_count(count: i32, allow_auto_create: u8) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(count);
    b.put_u8(0);
    b.put_u8(0);
    b.put_u8(allow_auto_create);
    b.freeze()
}

/// One partition entry of a Produce request: `records` `None` is null.
pub type ProducePart<'a> = (i32, Option<&'a [u8]>);

/// Produce request (§3.3).
pub fn produce_req(
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[(&str, Vec<ProducePart<'_>>)],
) -> Bytes {
    m::ProduceRequest {
        transactional_id: ns(transactional_id),
        acks,
        timeout_ms,
        topic_data: topics
            .iter()
            .map(|(t, parts)| m::ProduceTopicData {
                topic: ns(Some(t)),
                partitions: parts
                    .iter()
                    .map(|(p, rec)| m::ProducePartitionData {
                        partition: *p,
                        records: rec.map(Bytes::copy_from_slice),
                    })
                    .collect(),
            })
            .collect(),
    }
    .to_bytes()
}

/// A Produce request with a single blob.
pub fn produce_one(topic: &str, partition: i32, acks: i16, blob: &[u8]) -> Bytes {
    produce_req(
        None,
        acks,
        30_000,
        &[(topic, vec![(partition, Some(blob))])],
    )
}

/// One partition entry of a Fetch request.
#[derive(Debug, Clone, Copy)]
pub struct FetchPart {
    pub partition: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

/// Fetch request knobs (§3.4).
#[derive(Debug, Clone, Copy)]
pub struct FetchOpts {
    /// −1 for clients; ≥ 0 plays a follower (§4.7).
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
}

impl Default for FetchOpts {
    fn default() -> Self {
        FetchOpts {
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 64 << 20,
            isolation_level: 0,
            session_id: 0,
        }
    }
}

/// Fetch request (§3.4).
pub fn fetch_req(opts: FetchOpts, topics: &[(&str, Vec<FetchPart>)]) -> Bytes {
    m::FetchRequest {
        replica_id: opts.replica_id,
        max_wait_ms: opts.max_wait_ms,
        min_bytes: opts.min_bytes,
        max_bytes: opts.max_bytes,
        isolation_level: opts.isolation_level,
        session_id: opts.session_id,
        topic_partitions: topics
            .iter()
            .map(|(t, parts)| m::FetchTopic {
                topic: ns(Some(t)),
                partitions: parts
                    .iter()
                    .map(|p| m::FetchPartition {
                        partition: p.partition,
                        current_leader_epoch: -1,
                        fetch_offset: p.fetch_offset,
                        log_start_offset: -1,
                        partition_max_bytes: p.partition_max_bytes,
                    })
                    .collect(),
            })
            .collect(),
    }
    .to_bytes()
}

/// A Fetch of one partition entry.
pub fn fetch_one(topic: &str, partition: i32, fetch_offset: i64, max_bytes: i32) -> Bytes {
    fetch_req(
        FetchOpts::default(),
        &[(
            topic,
            vec![FetchPart {
                partition,
                fetch_offset,
                partition_max_bytes: max_bytes,
            }],
        )],
    )
}

/// One partition entry of a ListOffsets request.
#[derive(Debug, Clone, Copy)]
pub struct LoPart {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub timestamp: i64,
    pub max_num_offsets: i32,
}

/// ListOffsets request (§3.5).
pub fn list_offsets_req(topics: &[(&str, Vec<LoPart>)]) -> Bytes {
    m::ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: topics
            .iter()
            .map(|(t, parts)| m::ListOffsetsTopic {
                topic: ns(Some(t)),
                partitions: parts
                    .iter()
                    .map(|p| m::ListOffsetsPartition {
                        partition: p.partition,
                        current_leader_epoch: p.current_leader_epoch,
                        timestamp: p.timestamp,
                        max_num_offsets: p.max_num_offsets,
                    })
                    .collect(),
            })
            .collect(),
    }
    .to_bytes()
}

/// ListOffsets of one partition, no epoch check.
pub fn list_offsets_one(topic: &str, partition: i32, timestamp: i64, max_num: i32) -> Bytes {
    list_offsets_req(&[(
        topic,
        vec![LoPart {
            partition,
            current_leader_epoch: -1,
            timestamp,
            max_num_offsets: max_num,
        }],
    )])
}

/// One partition of an OffsetCommit request: `(partition, offset, metadata)`.
pub type CommitPart<'a> = (i32, i64, Option<&'a str>);

/// OffsetCommit request (§3.6).
pub fn offset_commit_req(group: &str, topics: &[(&str, Vec<CommitPart<'_>>)]) -> Bytes {
    m::OffsetCommitRequest {
        group_id: ns(Some(group)),
        topics: topics
            .iter()
            .map(|(t, parts)| m::OffsetCommitTopic {
                topic: ns(Some(t)),
                partitions: parts
                    .iter()
                    .map(|(p, o, md)| m::OffsetCommitPartition {
                        partition: *p,
                        offset: *o,
                        metadata: ns(*md),
                    })
                    .collect(),
            })
            .collect(),
    }
    .to_bytes()
}

/// OffsetFetch request (§3.7).
pub fn offset_fetch_req(group: &str, topics: &[(&str, Vec<i32>)]) -> Bytes {
    m::OffsetFetchRequest {
        group_id: ns(Some(group)),
        topics: topics
            .iter()
            .map(|(t, parts)| m::OffsetFetchTopic {
                topic: ns(Some(t)),
                partitions: parts
                    .iter()
                    .map(|p| m::OffsetFetchPartition { partition: *p })
                    .collect(),
            })
            .collect(),
    }
    .to_bytes()
}

/// FindCoordinator request (§3.8).
pub fn find_coordinator_req(key: Option<&str>, key_type: i8) -> Bytes {
    m::FindCoordinatorRequest {
        key: ns(key),
        key_type,
    }
    .to_bytes()
}

/// JoinGroup request (§3.9).
pub fn join_group_req(group: &str, member: Option<&str>, session_timeout_ms: i32) -> Bytes {
    m::JoinGroupRequest {
        group_id: ns(Some(group)),
        member_id: ns(member),
        session_timeout_ms,
    }
    .to_bytes()
}

/// SyncGroup request (§3.10).
pub fn sync_group_req(group: &str, generation: i32, member: Option<&str>) -> Bytes {
    m::SyncGroupRequest {
        group_id: ns(Some(group)),
        generation_id: generation,
        member_id: ns(member),
    }
    .to_bytes()
}

/// Heartbeat request (§3.11).
pub fn heartbeat_req(group: &str, generation: i32, member: Option<&str>) -> Bytes {
    m::HeartbeatRequest {
        group_id: ns(Some(group)),
        generation_id: generation,
        member_id: ns(member),
    }
    .to_bytes()
}

/// InitProducerId request (§3.12).
pub fn init_producer_id_req(transactional_id: Option<&str>) -> Bytes {
    m::InitProducerIdRequest {
        transactional_id: ns(transactional_id),
    }
    .to_bytes()
}

/// BeginTransaction request (§3.13).
pub fn begin_txn_req(transactional_id: Option<&str>, producer_id: i64, epoch: i16) -> Bytes {
    m::BeginTransactionRequest {
        transactional_id: ns(transactional_id),
        producer_id,
        producer_epoch: epoch,
    }
    .to_bytes()
}

/// EndTransaction request (§3.13); `commit` is the raw bool byte (any non-zero is commit).
pub fn end_txn_req(
    transactional_id: Option<&str>,
    producer_id: i64,
    epoch: i16,
    commit: u8,
) -> Bytes {
    let typed = m::EndTransactionRequest {
        transactional_id: ns(transactional_id),
        producer_id,
        producer_epoch: epoch,
        commit: commit != 0,
    }
    .to_bytes();
    let mut b = BytesMut::from(&typed[..]);
    let last = b.len() - 1;
    b[last] = commit; // the bool is the last byte; keep the raw value (0x02, 0xff…)
    b.freeze()
}

/// The shared CreateTopic/DeleteTopic/AlterPartition request layout (§3.14).
pub fn topic_admin_req(
    topic: &str,
    partition_count: i32,
    partition: i32,
    leader_id: i32,
    leader_epoch: i32,
    replicas: &[i32],
    isr: &[i32],
) -> Bytes {
    m::AlterPartitionRequest {
        topic: ns(Some(topic)),
        partition_count,
        partition,
        leader_id,
        leader_epoch,
        replica_nodes: replicas.to_vec(),
        isr_nodes: isr.to_vec(),
    }
    .to_bytes()
}

/// CreateTopic request as the Go SDK sends it.
pub fn create_topic_req(topic: &str, partitions: i32) -> Bytes {
    m::CreateTopicRequest::new(topic, partitions).to_bytes()
}

/// DeleteTopic request.
pub fn delete_topic_req(topic: &str) -> Bytes {
    m::DeleteTopicRequest::new(topic).to_bytes()
}

/// DecommissionBroker request (§3.16).
pub fn decommission_req(broker_id: i32) -> Bytes {
    m::DecommissionBrokerRequest { broker_id }.to_bytes()
}
