//! Response parsers (PROTOCOL.md §3): typed decoding, plus the strictness a conformance check
//! needs — the body must be consumed exactly (no bytes left over after the v0 layout) and the few
//! values the typed layer normalises (bool bytes) are checked on the raw bytes where a case needs
//! them.

use bytes::Bytes;
use stellflow_proto::messages as m;
use stellflow_proto::wire::{NString, Wire};

use super::super::client::Resp;

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
