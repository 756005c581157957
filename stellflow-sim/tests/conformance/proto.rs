//! Request bodies and response parsers for the v0 layouts of PROTOCOL.md §3, written out field by
//! field from the document (on top of the `stellflow_proto::wire` primitives) so that the suite
//! checks the broker against the specification and not against a codec that might share its
//! bugs. Parsers are strict: every response must be consumed exactly, with no bytes left over.

use bytes::{BufMut, Bytes, BytesMut};
use stellflow_proto::wire::{Reader, put_nbytes, put_nstring};

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
// Request bodies
// ---------------------------------------------------------------------------------------------

fn s(buf: &mut BytesMut, v: Option<&str>) {
    put_nstring(buf, v);
}

/// ApiVersions request (§3.1); also the DescribeCluster/HealthCheck request layout (§3.15).
pub fn api_versions_req(name: Option<&str>, version: Option<&str>, features: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, name);
    s(&mut b, version);
    b.put_i32(features.len() as i32);
    for f in features {
        s(&mut b, Some(f));
    }
    b.freeze()
}

/// The minimal ApiVersions-shaped body `ff ff ff ff 00 00 00 00` (§3.15).
pub fn minimal_api_versions_req() -> Bytes {
    api_versions_req(None, None, &[])
}

/// Metadata request (§3.2) for the named topics (empty = all topics).
pub fn metadata_req(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(topics.len() as i32);
    for t in topics {
        s(&mut b, Some(t));
    }
    b.put_u8(0);
    b.put_u8(0);
    b.put_u8(0);
    b.freeze()
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
    let mut b = BytesMut::new();
    s(&mut b, transactional_id);
    b.put_i16(acks);
    b.put_i32(timeout_ms);
    b.put_i32(topics.len() as i32);
    for (t, parts) in topics {
        s(&mut b, Some(t));
        b.put_i32(parts.len() as i32);
        for (p, rec) in parts {
            b.put_i32(*p);
            put_nbytes(&mut b, *rec);
        }
    }
    b.freeze()
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
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
}

impl Default for FetchOpts {
    fn default() -> Self {
        FetchOpts {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 64 << 20,
            isolation_level: 0,
            session_id: 0,
        }
    }
}

/// Fetch request (§3.4), always with `replicaId -1`.
pub fn fetch_req(opts: FetchOpts, topics: &[(&str, Vec<FetchPart>)]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(opts.max_wait_ms);
    b.put_i32(opts.min_bytes);
    b.put_i32(opts.max_bytes);
    b.put_i8(opts.isolation_level);
    b.put_i32(opts.session_id);
    b.put_i32(topics.len() as i32);
    for (t, parts) in topics {
        s(&mut b, Some(t));
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(p.partition);
            b.put_i32(-1); // currentLeaderEpoch
            b.put_i64(p.fetch_offset);
            b.put_i64(-1); // logStartOffset
            b.put_i32(p.partition_max_bytes);
        }
    }
    b.freeze()
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
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i8(0);
    b.put_i32(topics.len() as i32);
    for (t, parts) in topics {
        s(&mut b, Some(t));
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(p.partition);
            b.put_i32(p.current_leader_epoch);
            b.put_i64(p.timestamp);
            b.put_i32(p.max_num_offsets);
        }
    }
    b.freeze()
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
    let mut b = BytesMut::new();
    s(&mut b, Some(group));
    b.put_i32(topics.len() as i32);
    for (t, parts) in topics {
        s(&mut b, Some(t));
        b.put_i32(parts.len() as i32);
        for (p, o, m) in parts {
            b.put_i32(*p);
            b.put_i64(*o);
            s(&mut b, *m);
        }
    }
    b.freeze()
}

/// OffsetFetch request (§3.7).
pub fn offset_fetch_req(group: &str, topics: &[(&str, Vec<i32>)]) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, Some(group));
    b.put_i32(topics.len() as i32);
    for (t, parts) in topics {
        s(&mut b, Some(t));
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(*p);
        }
    }
    b.freeze()
}

/// FindCoordinator request (§3.8).
pub fn find_coordinator_req(key: Option<&str>, key_type: i8) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, key);
    b.put_i8(key_type);
    b.freeze()
}

/// JoinGroup request (§3.9).
pub fn join_group_req(group: &str, member: Option<&str>, session_timeout_ms: i32) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, Some(group));
    s(&mut b, member);
    b.put_i32(session_timeout_ms);
    b.freeze()
}

/// SyncGroup and Heartbeat requests (§3.10, §3.11) share this layout.
pub fn group_member_req(group: &str, generation: i32, member: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, Some(group));
    b.put_i32(generation);
    s(&mut b, member);
    b.freeze()
}

/// InitProducerId request (§3.12).
pub fn init_producer_id_req(transactional_id: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, transactional_id);
    b.freeze()
}

/// BeginTransaction request (§3.13).
pub fn begin_txn_req(transactional_id: Option<&str>, producer_id: i64, epoch: i16) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, transactional_id);
    b.put_i64(producer_id);
    b.put_i16(epoch);
    b.freeze()
}

/// EndTransaction request (§3.13); `commit` is the raw bool byte.
pub fn end_txn_req(
    transactional_id: Option<&str>,
    producer_id: i64,
    epoch: i16,
    commit: u8,
) -> Bytes {
    let mut b = BytesMut::new();
    s(&mut b, transactional_id);
    b.put_i64(producer_id);
    b.put_i16(epoch);
    b.put_u8(commit);
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
    let mut b = BytesMut::new();
    s(&mut b, Some(topic));
    b.put_i32(partition_count);
    b.put_i32(partition);
    b.put_i32(leader_id);
    b.put_i32(leader_epoch);
    b.put_i32(replicas.len() as i32);
    for r in replicas {
        b.put_i32(*r);
    }
    b.put_i32(isr.len() as i32);
    for r in isr {
        b.put_i32(*r);
    }
    b.freeze()
}

/// CreateTopic request as the Go SDK sends it.
pub fn create_topic_req(topic: &str, partitions: i32) -> Bytes {
    topic_admin_req(topic, partitions, -1, -1, -1, &[], &[])
}

/// DeleteTopic request.
pub fn delete_topic_req(topic: &str) -> Bytes {
    topic_admin_req(topic, 0, -1, -1, -1, &[], &[])
}

/// DecommissionBroker request (§3.16).
pub fn decommission_req(broker_id: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(broker_id);
    b.freeze()
}

// ---------------------------------------------------------------------------------------------
// Response parsing
// ---------------------------------------------------------------------------------------------

/// A strict cursor: decode errors become strings naming the field.
pub struct P {
    r: Reader,
    what: &'static str,
}

impl P {
    pub fn new(resp: &Resp, what: &'static str) -> P {
        P {
            r: resp.reader(),
            what,
        }
    }

    fn e(&self, field: &str, e: stellflow_proto::DecodeError) -> String {
        format!("{} response: cannot decode {field}: {e}", self.what)
    }

    pub fn i8(&mut self, f: &str) -> Result<i8, String> {
        self.r.i8().map_err(|e| self.e(f, e))
    }
    pub fn i16(&mut self, f: &str) -> Result<i16, String> {
        self.r.i16().map_err(|e| self.e(f, e))
    }
    pub fn i32(&mut self, f: &str) -> Result<i32, String> {
        self.r.i32().map_err(|e| self.e(f, e))
    }
    pub fn i64(&mut self, f: &str) -> Result<i64, String> {
        self.r.i64().map_err(|e| self.e(f, e))
    }
    pub fn s(&mut self, f: &str) -> Result<Option<String>, String> {
        self.r
            .nstring()
            .map(|o| o.map(|s| s.as_str().to_owned()))
            .map_err(|e| self.e(f, e))
    }
    pub fn bytes(&mut self, f: &str) -> Result<Option<Bytes>, String> {
        self.r.nbytes().map_err(|e| self.e(f, e))
    }
    /// An array count as the server writes it: never negative.
    pub fn count(&mut self, f: &str) -> Result<usize, String> {
        let n = self.i32(f)?;
        if n < 0 {
            return Err(format!(
                "{} response: negative count {n} for {f}",
                self.what
            ));
        }
        if n as usize > self.r.remaining() {
            return Err(format!(
                "{} response: count {n} for {f} exceeds the {} bytes left",
                self.what,
                self.r.remaining()
            ));
        }
        Ok(n as usize)
    }
    pub fn arr<T>(
        &mut self,
        f: &str,
        mut item: impl FnMut(&mut P) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let n = self.count(f)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(item(self)?);
        }
        Ok(v)
    }
    /// The response must be fully consumed.
    pub fn end(self) -> Result<(), String> {
        if self.r.remaining() != 0 {
            return Err(format!(
                "{} response: {} bytes left over after the v0 layout",
                self.what,
                self.r.remaining()
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResp {
    pub apis: Vec<(i16, i16, i16)>,
    pub name: Option<String>,
    pub version: Option<String>,
    pub features: Vec<Option<String>>,
}

pub fn parse_api_versions(resp: &Resp) -> Result<ApiVersionsResp, String> {
    let mut p = P::new(resp, "ApiVersions");
    let apis = p.arr("apiVersions", |p| {
        Ok((p.i16("apiKey")?, p.i16("minVersion")?, p.i16("maxVersion")?))
    })?;
    let name = p.s("brokerSoftwareName")?;
    let version = p.s("brokerSoftwareVersion")?;
    let features = p.arr("supportedFeatures", |p| p.s("feature"))?;
    p.end()?;
    Ok(ApiVersionsResp {
        apis,
        name,
        version,
        features,
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

fn i32s(p: &mut P, f: &str) -> Result<Vec<i32>, String> {
    p.arr(f, |p| p.i32(f))
}

pub fn parse_metadata(resp: &Resp) -> Result<MetadataResp, String> {
    let mut p = P::new(resp, "Metadata");
    let cluster_id = p.s("clusterId")?;
    let controller_id = p.i32("controllerId")?;
    let brokers = p.arr("brokers", |p| {
        Ok(BrokerMd {
            id: p.i32("brokerId")?,
            host: p.s("host")?,
            port: p.i32("port")?,
            rack: p.s("rack")?,
        })
    })?;
    let topics = p.arr("topics", |p| {
        Ok(TopicMd {
            error: p.i16("errorCode")?,
            name: p.s("topic")?,
            internal: p.i8("isInternal")?,
            partitions: p.arr("partitions", |p| {
                Ok(PartMd {
                    error: p.i16("errorCode")?,
                    partition: p.i32("partition")?,
                    leader: p.i32("leaderId")?,
                    epoch: p.i32("leaderEpoch")?,
                    replicas: i32s(p, "replicaNodes")?,
                    isr: i32s(p, "isrNodes")?,
                    offline: i32s(p, "offlineReplicaNodes")?,
                })
            })?,
            auth_ops: p.i32("topicAuthorizedOperations")?,
        })
    })?;
    let cluster_auth_ops = p.i32("clusterAuthorizedOperations")?;
    p.end()?;
    Ok(MetadataResp {
        cluster_id,
        controller_id,
        brokers,
        topics,
        cluster_auth_ops,
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
    let mut p = P::new(resp, "Produce");
    let v = p.arr("responses", |p| {
        Ok((
            p.s("topic")?,
            p.arr("partitions", |p| {
                Ok(ProducePartResp {
                    partition: p.i32("partition")?,
                    error: p.i16("errorCode")?,
                    base_offset: p.i64("baseOffset")?,
                    leader_epoch: p.i32("currentLeaderEpoch")?,
                    log_append_time: p.i64("logAppendTimeMs")?,
                    log_start: p.i64("logStartOffset")?,
                })
            })?,
        ))
    })?;
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "Fetch");
    let session_id = p.i32("sessionId")?;
    let topics = p.arr("responses", |p| {
        Ok((
            p.s("topic")?,
            p.arr("partitions", |p| {
                Ok(FetchPartResp {
                    partition: p.i32("partition")?,
                    error: p.i16("errorCode")?,
                    high_watermark: p.i64("highWatermark")?,
                    log_start: p.i64("logStartOffset")?,
                    last_stable: p.i64("lastStableOffset")?,
                    aborted: p.arr("abortedTransactions", |p| {
                        Ok((p.i64("producerId")?, p.i64("firstOffset")?))
                    })?,
                    records: p.bytes("records")?,
                })
            })?,
        ))
    })?;
    p.end()?;
    Ok(FetchResp { session_id, topics })
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
    let mut p = P::new(resp, "ListOffsets");
    let v = p.arr("topics", |p| {
        Ok((
            p.s("topic")?,
            p.arr("partitions", |p| {
                Ok(LoPartResp {
                    partition: p.i32("partition")?,
                    error: p.i16("errorCode")?,
                    leader_epoch: p.i32("leaderEpoch")?,
                    timestamp: p.i64("timestamp")?,
                    offset: p.i64("offset")?,
                    offsets: p.arr("offsets", |p| p.i64("offset"))?,
                })
            })?,
        ))
    })?;
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "OffsetCommit");
    let v = p.arr("topics", |p| {
        Ok((
            p.s("topic")?,
            p.arr("partitions", |p| {
                Ok((p.i32("partition")?, p.i16("errorCode")?))
            })?,
        ))
    })?;
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "OffsetFetch");
    let v = p.arr("topics", |p| {
        Ok((
            p.s("topic")?,
            p.arr("partitions", |p| {
                Ok(OffsetFetchPart {
                    partition: p.i32("partition")?,
                    offset: p.i64("offset")?,
                    metadata: p.s("metadata")?,
                    error: p.i16("errorCode")?,
                })
            })?,
        ))
    })?;
    p.end()?;
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorResp {
    pub error: i16,
    pub node_id: i32,
    pub host: Option<String>,
    pub port: i32,
}

pub fn parse_find_coordinator(resp: &Resp) -> Result<FindCoordinatorResp, String> {
    let mut p = P::new(resp, "FindCoordinator");
    let v = FindCoordinatorResp {
        error: p.i16("errorCode")?,
        node_id: p.i32("nodeId")?,
        host: p.s("host")?,
        port: p.i32("port")?,
    };
    p.end()?;
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResp {
    pub error: i16,
    pub generation: i32,
    pub member_id: Option<String>,
    pub leader_id: Option<String>,
}

pub fn parse_join_group(resp: &Resp) -> Result<JoinGroupResp, String> {
    let mut p = P::new(resp, "JoinGroup");
    let v = JoinGroupResp {
        error: p.i16("errorCode")?,
        generation: p.i32("generationId")?,
        member_id: p.s("memberId")?,
        leader_id: p.s("leaderId")?,
    };
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "InitProducerId");
    let v = InitPidResp {
        error: p.i16("errorCode")?,
        producer_id: p.i64("producerId")?,
        epoch: p.i16("producerEpoch")?,
    };
    p.end()?;
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResp {
    pub error: i16,
    pub producer_id: i64,
    pub epoch: i16,
    pub state: Option<String>,
}

pub fn parse_txn(resp: &Resp) -> Result<TxnResp, String> {
    let mut p = P::new(resp, "Begin/EndTransaction");
    let v = TxnResp {
        error: p.i16("errorCode")?,
        producer_id: p.i64("producerId")?,
        epoch: p.i16("producerEpoch")?,
        state: p.s("transactionState")?,
    };
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "topic admin");
    let v = TopicAdminResp {
        topic: p.s("topic")?,
        results: p.arr("partitions", |p| {
            Ok((
                p.i32("partition")?,
                p.i16("errorCode")?,
                p.i32("leaderEpoch")?,
            ))
        })?,
    };
    p.end()?;
    Ok(v)
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
    let mut p = P::new(resp, "DescribeCluster/HealthCheck");
    let v = ClusterResp {
        error: p.i16("errorCode")?,
        cluster_id: p.s("clusterId")?,
        brokers: p.i32("brokerCount")?,
        topics: p.i32("topicCount")?,
        partitions: p.i32("partitionCount")?,
    };
    p.end()?;
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// Record data (§4)
// ---------------------------------------------------------------------------------------------

/// CRC-32 (IEEE, zlib, `java.util.zip.CRC32`), bitwise.
pub fn crc32(data: &[u8]) -> u32 {
    crc_reflected(data, 0xEDB8_8320)
}

/// CRC-32C (Castagnoli), bitwise.
pub fn crc32c(data: &[u8]) -> u32 {
    crc_reflected(data, 0x82F6_3B78)
}

fn crc_reflected(data: &[u8], poly: u32) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
        }
    }
    !crc
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
