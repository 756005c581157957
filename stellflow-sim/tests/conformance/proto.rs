//! Request bodies and response parsers for the v0 layouts of PROTOCOL.md §3, on top of the typed
//! messages of `stellflow-proto` (record data and deliberately malformed input are built from
//! the wire primitives). Parsers are strict: every response body must be consumed exactly, with
//! no bytes left over, and they return plain structs the cases compare as a whole.

use bytes::{BufMut, Bytes, BytesMut};
use stellflow_proto::messages as m;
use stellflow_proto::wire::{NString, StrBytes, Wire};

use super::client::Resp;

pub const API_VERSIONS: i16 = 0;
pub const METADATA: i16 = 1;
pub const PRODUCE: i16 = 2;
pub const FETCH: i16 = 3;
pub const LIST_OFFSETS: i16 = 4;
pub const OFFSET_COMMIT: i16 = 5;
pub const OFFSET_FETCH: i16 = 6;
pub const FIND_COORDINATOR: i16 = 7;
pub const HEARTBEAT: i16 = 8;
pub const JOIN_GROUP: i16 = 9;
pub const SYNC_GROUP: i16 = 10;
pub const INIT_PRODUCER_ID: i16 = 11;
pub const BEGIN_TRANSACTION: i16 = 12;
pub const END_TRANSACTION: i16 = 13;
pub const CREATE_TOPIC: i16 = 50;
pub const DELETE_TOPIC: i16 = 51;
pub const ALTER_PARTITION: i16 = 52;
pub const DESCRIBE_CLUSTER: i16 = 53;
pub const HEALTH_CHECK: i16 = 54;
pub const DECOMMISSION_BROKER: i16 = 55;

// ---------------------------------------------------------------------------------------------
// Request bodies: the typed v0 messages of `stellflow_proto::messages`, encoded to bytes. Only
// deliberately odd bodies (raw counts, raw bool bytes) are patched or built from primitives.
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Response parsing: typed decoding, plus the strictness a conformance check needs — the body
// must be consumed exactly (no bytes left over after the v0 layout) and the few values the
// typed layer normalises (bool bytes) are checked on the raw bytes where a case needs them.
// ---------------------------------------------------------------------------------------------

/// Decodes a whole response body as `T`, failing on decode errors and leftover bytes.
pub fn strict<T: Wire>(resp: &Resp, what: &str) -> Result<T, String> {
    let mut r = resp.reader();
    let v = T::decode(&mut r).map_err(|e| format!("{what} response: cannot decode: {e}"))?;
    if r.remaining() != 0 {
        return Err(format!(
            "{what} response: {} bytes left over after the v0 layout",
            r.remaining()
        ));
    }
    Ok(v)
}

fn os(v: NString) -> Option<String> {
    v.map(|s| s.as_str().to_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResp {
    pub apis: Vec<(i16, i16, i16)>,
    pub name: Option<String>,
    pub version: Option<String>,
    pub features: Vec<Option<String>>,
}

pub fn parse_api_versions(resp: &Resp) -> Result<ApiVersionsResp, String> {
    let v: m::ApiVersionsResponse = strict(resp, "ApiVersions")?;
    Ok(ApiVersionsResp {
        apis: v
            .api_versions
            .iter()
            .map(|a| (a.api_key.0, a.min_version, a.max_version))
            .collect(),
        name: os(v.broker_software_name),
        version: os(v.broker_software_version),
        features: v.supported_features.into_iter().map(os).collect(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMd {
    pub id: i32,
    pub host: Option<String>,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartMd {
    pub error: i16,
    pub partition: i32,
    pub leader: i32,
    pub epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMd {
    pub error: i16,
    pub name: Option<String>,
    /// The raw `isInternal` byte.
    pub internal: i8,
    pub partitions: Vec<PartMd>,
    pub auth_ops: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResp {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub brokers: Vec<BrokerMd>,
    pub topics: Vec<TopicMd>,
    pub cluster_auth_ops: i32,
}

impl MetadataResp {
    pub fn topic(&self, name: &str) -> Option<&TopicMd> {
        self.topics.iter().find(|t| t.name.as_deref() == Some(name))
    }
}

/// The raw `isInternal` bytes of a Metadata response, in topic order (the typed decoder reads
/// any non-zero byte as true; the server writes exactly 0 or 1).
fn metadata_internal_bytes(resp: &Resp, v: &m::MetadataResponse) -> Result<Vec<i8>, String> {
    let mut r = resp.reader();
    let err = |e: stellflow_proto::DecodeError| format!("Metadata response: {e}");
    r.nstring().map_err(err)?;
    r.i32().map_err(err)?;
    let n = r.array_len(m::MetadataBroker::MIN_SIZE).map_err(err)?;
    for _ in 0..n {
        m::MetadataBroker::decode(&mut r).map_err(err)?;
    }
    r.array_len(m::MetadataTopic::MIN_SIZE).map_err(err)?;
    let mut out = Vec::with_capacity(v.topics.len());
    for _ in 0..v.topics.len() {
        r.i16().map_err(err)?;
        r.nstring().map_err(err)?;
        out.push(r.i8().map_err(err)?);
        let n = r.array_len(m::MetadataPartition::MIN_SIZE).map_err(err)?;
        for _ in 0..n {
            m::MetadataPartition::decode(&mut r).map_err(err)?;
        }
        r.i32().map_err(err)?;
    }
    Ok(out)
}

pub fn parse_metadata(resp: &Resp) -> Result<MetadataResp, String> {
    let v: m::MetadataResponse = strict(resp, "Metadata")?;
    let internal = metadata_internal_bytes(resp, &v)?;
    Ok(MetadataResp {
        cluster_id: os(v.cluster_id),
        controller_id: v.controller_id,
        brokers: v
            .brokers
            .into_iter()
            .map(|b| BrokerMd {
                id: b.broker_id,
                host: os(b.host),
                port: b.port,
                rack: os(b.rack),
            })
            .collect(),
        topics: v
            .topics
            .into_iter()
            .zip(internal)
            .map(|(t, internal)| TopicMd {
                error: t.error_code.0,
                name: os(t.topic),
                internal,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| PartMd {
                        error: p.error_code.0,
                        partition: p.partition,
                        leader: p.leader_id,
                        epoch: p.leader_epoch,
                        replicas: p.replica_nodes,
                        isr: p.isr_nodes,
                        offline: p.offline_replica_nodes,
                    })
                    .collect(),
                auth_ops: t.topic_authorized_operations,
            })
            .collect(),
        cluster_auth_ops: v.cluster_authorized_operations,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartResp {
    pub partition: i32,
    pub error: i16,
    pub base_offset: i64,
    pub leader_epoch: i32,
    pub log_append_time: i64,
    pub log_start: i64,
}

pub type ProduceResp = Vec<(Option<String>, Vec<ProducePartResp>)>;

pub fn parse_produce(resp: &Resp) -> Result<ProduceResp, String> {
    let v: m::ProduceResponse = strict(resp, "Produce")?;
    Ok(v.responses
        .into_iter()
        .map(|t| {
            let parts = t
                .partitions
                .into_iter()
                .map(|p| ProducePartResp {
                    partition: p.partition,
                    error: p.error_code.0,
                    base_offset: p.base_offset,
                    leader_epoch: p.current_leader_epoch,
                    log_append_time: p.log_append_time_ms,
                    log_start: p.log_start_offset,
                })
                .collect();
            (os(t.topic), parts)
        })
        .collect())
}

/// The single partition answer of a one-blob Produce.
pub fn parse_produce_one(resp: &Resp) -> Result<ProducePartResp, String> {
    if resp.error_code != 0 || resp.body.is_empty() {
        return Err(format!(
            "Produce: header error {} with {} body bytes",
            resp.error_code,
            resp.body.len()
        ));
    }
    let v = parse_produce(resp)?;
    match v.as_slice() {
        [(_, parts)] if parts.len() == 1 => Ok(parts[0].clone()),
        _ => Err(format!(
            "Produce: expected one topic with one partition, got {v:?}"
        )),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartResp {
    pub partition: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub log_start: i64,
    pub last_stable: i64,
    pub aborted: Vec<(i64, i64)>,
    pub records: Option<Bytes>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResp {
    pub session_id: i32,
    pub topics: Vec<(Option<String>, Vec<FetchPartResp>)>,
}

pub fn parse_fetch(resp: &Resp) -> Result<FetchResp, String> {
    let v: m::FetchResponse = strict(resp, "Fetch")?;
    Ok(FetchResp {
        session_id: v.session_id,
        topics: v
            .responses
            .into_iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .into_iter()
                    .map(|p| FetchPartResp {
                        partition: p.partition,
                        error: p.error_code.0,
                        high_watermark: p.high_watermark,
                        log_start: p.log_start_offset,
                        last_stable: p.last_stable_offset,
                        aborted: p
                            .aborted_transactions
                            .iter()
                            .map(|a| (a.producer_id, a.first_offset))
                            .collect(),
                        records: p.records,
                    })
                    .collect();
                (os(t.topic), parts)
            })
            .collect(),
    })
}

/// The partition answers of a Fetch for one topic, flattened.
pub fn parse_fetch_parts(resp: &Resp) -> Result<Vec<FetchPartResp>, String> {
    if resp.error_code != 0 {
        return Err(format!("Fetch: header error {}", resp.error_code));
    }
    let f = parse_fetch(resp)?;
    Ok(f.topics.into_iter().flat_map(|(_, p)| p).collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoPartResp {
    pub partition: i32,
    pub error: i16,
    pub leader_epoch: i32,
    pub timestamp: i64,
    pub offset: i64,
    pub offsets: Vec<i64>,
}

pub type ListOffsetsResp = Vec<(Option<String>, Vec<LoPartResp>)>;

pub fn parse_list_offsets(resp: &Resp) -> Result<ListOffsetsResp, String> {
    let v: m::ListOffsetsResponse = strict(resp, "ListOffsets")?;
    Ok(v.topics
        .into_iter()
        .map(|t| {
            let parts = t
                .partitions
                .into_iter()
                .map(|p| LoPartResp {
                    partition: p.partition,
                    error: p.error_code.0,
                    leader_epoch: p.leader_epoch,
                    timestamp: p.timestamp,
                    offset: p.offset,
                    offsets: p.offsets,
                })
                .collect();
            (os(t.topic), parts)
        })
        .collect())
}

/// The flattened partition answers of a ListOffsets.
pub fn parse_list_offsets_parts(resp: &Resp) -> Result<Vec<LoPartResp>, String> {
    if resp.error_code != 0 {
        return Err(format!("ListOffsets: header error {}", resp.error_code));
    }
    Ok(parse_list_offsets(resp)?
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect())
}

pub type OffsetCommitResp = Vec<(Option<String>, Vec<(i32, i16)>)>;

pub fn parse_offset_commit(resp: &Resp) -> Result<OffsetCommitResp, String> {
    let v: m::OffsetCommitResponse = strict(resp, "OffsetCommit")?;
    Ok(v.topics
        .into_iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| (p.partition, p.error_code.0))
                .collect();
            (os(t.topic), parts)
        })
        .collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchPart {
    pub partition: i32,
    pub offset: i64,
    pub metadata: Option<String>,
    pub error: i16,
}

pub type OffsetFetchResp = Vec<(Option<String>, Vec<OffsetFetchPart>)>;

pub fn parse_offset_fetch(resp: &Resp) -> Result<OffsetFetchResp, String> {
    let v: m::OffsetFetchResponse = strict(resp, "OffsetFetch")?;
    Ok(v.topics
        .into_iter()
        .map(|t| {
            let parts = t
                .partitions
                .into_iter()
                .map(|p| OffsetFetchPart {
                    partition: p.partition,
                    offset: p.offset,
                    metadata: os(p.metadata),
                    error: p.error_code.0,
                })
                .collect();
            (os(t.topic), parts)
        })
        .collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorResp {
    pub error: i16,
    pub node_id: i32,
    pub host: Option<String>,
    pub port: i32,
}

pub fn parse_find_coordinator(resp: &Resp) -> Result<FindCoordinatorResp, String> {
    let v: m::FindCoordinatorResponse = strict(resp, "FindCoordinator")?;
    Ok(FindCoordinatorResp {
        error: v.error_code.0,
        node_id: v.node_id,
        host: os(v.host),
        port: v.port,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResp {
    pub error: i16,
    pub generation: i32,
    pub member_id: Option<String>,
    pub leader_id: Option<String>,
}

pub fn parse_join_group(resp: &Resp) -> Result<JoinGroupResp, String> {
    let v: m::JoinGroupResponse = strict(resp, "JoinGroup")?;
    Ok(JoinGroupResp {
        error: v.error_code.0,
        generation: v.generation_id,
        member_id: os(v.member_id),
        leader_id: os(v.leader_id),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResp {
    pub error: i16,
    pub assignments: Vec<(Option<String>, i32)>,
}

pub fn parse_sync_group(resp: &Resp) -> Result<SyncGroupResp, String> {
    let v: m::SyncGroupResponse = strict(resp, "SyncGroup")?;
    Ok(SyncGroupResp {
        error: v.error_code.0,
        assignments: v
            .assignments
            .into_iter()
            .map(|a| (os(a.topic), a.partition))
            .collect(),
    })
}

pub fn parse_heartbeat(resp: &Resp) -> Result<i16, String> {
    let v: m::HeartbeatResponse = strict(resp, "Heartbeat")?;
    Ok(v.error_code.0)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitPidResp {
    pub error: i16,
    pub producer_id: i64,
    pub epoch: i16,
}

pub fn parse_init_pid(resp: &Resp) -> Result<InitPidResp, String> {
    if resp.error_code != 0 {
        return Err(format!("InitProducerId: header error {}", resp.error_code));
    }
    let v: m::InitProducerIdResponse = strict(resp, "InitProducerId")?;
    Ok(InitPidResp {
        error: v.error_code.0,
        producer_id: v.producer_id,
        epoch: v.producer_epoch,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResp {
    pub error: i16,
    pub producer_id: i64,
    pub epoch: i16,
    pub state: Option<String>,
}

pub fn parse_txn(resp: &Resp) -> Result<TxnResp, String> {
    let v: m::TransactionResponse = strict(resp, "Begin/EndTransaction")?;
    Ok(TxnResp {
        error: v.error_code.0,
        producer_id: v.producer_id,
        epoch: v.producer_epoch,
        state: os(v.transaction_state),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicAdminResp {
    pub topic: Option<String>,
    /// `(partition, errorCode, leaderEpoch)`.
    pub results: Vec<(i32, i16, i32)>,
}

pub fn parse_topic_admin(resp: &Resp) -> Result<TopicAdminResp, String> {
    if resp.error_code != 0 {
        return Err(format!(
            "topic admin: header-level error {} ({} body bytes)",
            resp.error_code,
            resp.body.len()
        ));
    }
    let v: m::TopicAdminResponse = strict(resp, "topic admin")?;
    Ok(TopicAdminResp {
        topic: os(v.topic),
        results: v
            .partitions
            .iter()
            .map(|p| (p.partition, p.error_code.0, p.leader_epoch))
            .collect(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterResp {
    pub error: i16,
    pub cluster_id: Option<String>,
    pub brokers: i32,
    pub topics: i32,
    pub partitions: i32,
}

pub fn parse_cluster(resp: &Resp) -> Result<ClusterResp, String> {
    let v: m::ClusterStatusResponse = strict(resp, "DescribeCluster/HealthCheck")?;
    Ok(ClusterResp {
        error: v.error_code.0,
        cluster_id: os(v.cluster_id),
        brokers: v.broker_count,
        topics: v.topic_count,
        partitions: v.partition_count,
    })
}

/// DecommissionBroker response: `(errorCode, message)`.
pub fn parse_decommission(resp: &Resp) -> Result<(i16, Option<String>), String> {
    let v: m::DecommissionBrokerResponse = strict(resp, "DecommissionBroker")?;
    Ok((v.error_code.0, os(v.message)))
}

// ---------------------------------------------------------------------------------------------
// Record data (§4)
// ---------------------------------------------------------------------------------------------

/// CRC-32 (IEEE, zlib, `java.util.zip.CRC32`), by the `crc32fast` crate.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// CRC-32C (Castagnoli), by the `crc32c` crate.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Every SRFB header field, so malformed batches can be built (§4.2).
#[derive(Debug, Clone)]
pub struct Srfb {
    pub version: i16,
    pub compression: i8,
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
    pub uncompressed_length: i32,
    pub payload_length: i32,
    pub crc: u32,
    pub payload: Vec<u8>,
}

impl Srfb {
    /// A valid uncompressed batch.
    pub fn new(
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        record_count: i32,
        payload: &[u8],
    ) -> Srfb {
        Srfb {
            version: 1,
            compression: 0,
            producer_id,
            epoch,
            base_sequence,
            record_count,
            uncompressed_length: payload.len() as i32,
            payload_length: payload.len() as i32,
            crc: crc32(payload),
            payload: payload.to_vec(),
        }
    }

    /// A valid non-idempotent batch.
    pub fn plain(payload: &[u8]) -> Srfb {
        Srfb::new(-1, -1, -1, 1, payload)
    }

    /// A valid gzip batch over `uncompressed`.
    pub fn gzip(uncompressed: &[u8]) -> Srfb {
        let z = gzip_stored(uncompressed);
        Srfb {
            version: 1,
            compression: 1,
            producer_id: -1,
            epoch: -1,
            base_sequence: -1,
            record_count: 1,
            uncompressed_length: uncompressed.len() as i32,
            payload_length: z.len() as i32,
            crc: crc32(&z),
            payload: z,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_slice(b"SRFB");
        b.put_i16(self.version);
        b.put_i8(self.compression);
        b.put_i64(self.producer_id);
        b.put_i16(self.epoch);
        b.put_i32(self.base_sequence);
        b.put_i32(self.record_count);
        b.put_i32(self.uncompressed_length);
        b.put_i32(self.payload_length);
        b.put_u32(self.crc);
        b.put_slice(&self.payload);
        b.to_vec()
    }
}

/// A gzip member (RFC 1952) holding `data` in stored (uncompressed) deflate blocks.
pub fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        out.push(u8::from(last));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A v1 (SDK) record batch with one record, as in PROTOCOL.md §4.5 example D.
pub fn v1_batch(value: &[u8]) -> Vec<u8> {
    let mut rec = BytesMut::new();
    rec.put_i8(0);
    rec.put_i64(0);
    rec.put_i32(0);
    rec.put_i32(-1);
    rec.put_i32(value.len() as i32);
    rec.put_slice(value);
    rec.put_i32(0);
    let mut tail = BytesMut::new();
    tail.put_i16(0);
    tail.put_i32(0);
    tail.put_i64(1_700_000_000_000);
    tail.put_i64(1_700_000_000_000);
    tail.put_i64(-1);
    tail.put_i16(-1);
    tail.put_i32(-1);
    tail.put_i32(1);
    tail.put_i32(rec.len() as i32);
    tail.put_slice(&rec);
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_i32((4 + 1 + 4 + tail.len()) as i32);
    b.put_i32(-1);
    b.put_i8(1);
    b.put_u32(crc32c(&tail));
    b.put_slice(&tail);
    b.to_vec()
}
