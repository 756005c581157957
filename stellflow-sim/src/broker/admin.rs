//! ApiVersions, Metadata, topic admin (50–52), DescribeCluster/HealthCheck and
//! DecommissionBroker (PROTOCOL.md §3.1, §3.2, §3.14–§3.16).

use super::{Broker, CLUSTER_ID, Ctx, Reply, ok};
use crate::metadata::{EMPTY_PLACEHOLDER, MetadataCache, PartitionMeta, TopicName};
use stellflow_proto::messages::*;
use stellflow_proto::{ApiKey, ErrorCode, StrBytes};

/// The most partitions one CreateTopic may create in the sim (more ⇒ header-only `1`).
pub const MAX_CREATE_PARTITIONS: i32 = 100_000;

/// The broker software name ApiVersions reports.
pub const BROKER_SOFTWARE_NAME: &str = "stellflow-broker";
/// The broker software version ApiVersions reports.
pub const BROKER_SOFTWARE_VERSION: &str = "0.0.1-SNAPSHOT";

/// The server's ApiVersions answer: all 20 keys at `[0, 0]`, name, version, two features.
pub fn api_versions_body() -> ApiVersionsResponse {
    ApiVersionsResponse {
        api_versions: ApiKey::ALL
            .iter()
            .map(|k| ApiVersionRange {
                api_key: *k,
                min_version: 0,
                max_version: 0,
            })
            .collect(),
        broker_software_name: Some(StrBytes::from_static(BROKER_SOFTWARE_NAME)),
        broker_software_version: Some(StrBytes::from_static(BROKER_SOFTWARE_VERSION)),
        supported_features: vec![
            Some(StrBytes::from_static("fetch.long_poll")),
            Some(StrBytes::from_static("compression.none")),
        ],
    }
}

pub(super) fn api_versions() -> Reply {
    ok(ResponseBody::ApiVersions(api_versions_body()))
}

pub(super) fn decommission(broker_id: i32) -> Reply {
    ok(ResponseBody::DecommissionBroker(
        DecommissionBrokerResponse {
            error_code: ErrorCode::NONE,
            message: Some(format!("decommission plan accepted for brokerId={broker_id}").into()),
        },
    ))
}

fn name(t: &TopicName) -> Option<StrBytes> {
    t.as_deref().map(StrBytes::from)
}

fn partition_entry(p: i32, m: &PartitionMeta) -> MetadataPartition {
    MetadataPartition {
        error_code: ErrorCode::NONE,
        partition: p,
        leader_id: m.leader,
        leader_epoch: m.leader_epoch,
        replica_nodes: m.replicas.clone(),
        isr_nodes: m.isr.clone(),
        offline_replica_nodes: Vec::new(),
    }
}

fn topic_entry(cache: &MetadataCache, t: &TopicName) -> MetadataTopic {
    match cache.topic(t) {
        Some(parts) => MetadataTopic {
            error_code: ErrorCode::NONE,
            topic: name(t),
            is_internal: false,
            partitions: parts.iter().map(|(p, m)| partition_entry(*p, m)).collect(),
            topic_authorized_operations: 0,
        },
        None => MetadataTopic {
            error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            topic: name(t),
            is_internal: false,
            partitions: Vec::new(),
            topic_authorized_operations: 0,
        },
    }
}

/// Builds a Metadata answer from a cache and a broker list (`None` when the cache holds a null
/// topic name: the server then fails every Metadata request with a header-only `1`).
pub fn metadata_body(
    cache: &MetadataCache,
    brokers: &[(i32, String, i32)],
    request: &MetadataRequest,
) -> Option<MetadataResponse> {
    if cache.has_null_topic() {
        return None;
    }
    let topics = if request.topics.is_empty() {
        if cache.topic_count() == 0 {
            vec![MetadataTopic {
                error_code: ErrorCode::NONE,
                topic: Some(StrBytes::from_static(EMPTY_PLACEHOLDER)),
                is_internal: true,
                partitions: vec![partition_entry(0, &PartitionMeta::solo(0))],
                topic_authorized_operations: 0,
            }]
        } else {
            cache
                .topic_names()
                .iter()
                .map(|t| topic_entry(cache, t))
                .collect()
        }
    } else {
        request
            .topics
            .iter()
            .map(|t| topic_entry(cache, &t.topic.as_ref().map(|s| s.as_str().to_owned())))
            .collect()
    };
    Some(MetadataResponse {
        cluster_id: Some(StrBytes::from_static(CLUSTER_ID)),
        controller_id: 0,
        brokers: brokers
            .iter()
            .map(|(id, host, port)| MetadataBroker {
                broker_id: *id,
                host: Some(host.as_str().into()),
                port: *port,
                rack: None,
            })
            .collect(),
        topics,
        cluster_authorized_operations: 0,
    })
}

/// Builds the DescribeCluster/HealthCheck answer from a cache and a broker count.
pub fn cluster_status_body(
    cache: &MetadataCache,
    broker_count: usize,
) -> Option<ClusterStatusResponse> {
    if cache.has_null_topic() {
        return None;
    }
    Some(ClusterStatusResponse {
        error_code: ErrorCode::NONE,
        cluster_id: Some(StrBytes::from_static(CLUSTER_ID)),
        broker_count: i32::try_from(broker_count).unwrap_or(i32::MAX),
        topic_count: i32::try_from(cache.topic_count()).unwrap_or(i32::MAX),
        partition_count: i32::try_from(cache.partition_count()).unwrap_or(i32::MAX),
    })
}

fn admin_result(partition: i32, code: ErrorCode, epoch: i32) -> TopicAdminPartitionResult {
    TopicAdminPartitionResult {
        partition,
        error_code: code,
        leader_epoch: epoch,
    }
}

fn owned(t: &Option<StrBytes>) -> TopicName {
    t.as_ref().map(|s| s.as_str().to_owned())
}

impl Broker {
    pub(super) fn metadata_response(&self, ctx: &Ctx<'_>, r: &MetadataRequest) -> Reply {
        let body = match ctx.view {
            Some(v) => metadata_body(&v.cache, &v.brokers, r),
            None => metadata_body(&self.metadata, &self.broker_list(), r),
        };
        match body {
            Some(b) => ok(ResponseBody::Metadata(b)),
            None => Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }

    pub(super) fn cluster_status(&self, ctx: &Ctx<'_>) -> Reply {
        let body = match ctx.view {
            Some(v) => cluster_status_body(&v.cache, v.brokers.len()),
            None => cluster_status_body(&self.metadata, self.broker_list().len()),
        };
        match body {
            Some(b) => ok(ResponseBody::DescribeCluster(b)),
            None => Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }

    pub(super) fn create_topic(&mut self, r: &CreateTopicRequest) -> Reply {
        let topic = owned(&r.topic);
        if r.partition_count <= 0 {
            return ok(ResponseBody::CreateTopic(TopicAdminResponse {
                topic: r.topic.clone(),
                partitions: vec![admin_result(-1, ErrorCode::INVALID_REQUEST, 0)],
            }));
        }
        if r.partition_count > MAX_CREATE_PARTITIONS {
            // Deviation: the real server would try to create them all (and likely fail with a
            // handler exception); the sim refuses up front to keep its memory bounded.
            return Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR);
        }
        let me = self.id();
        let mut results = Vec::new();
        for p in 0..r.partition_count {
            let key = (topic.clone(), p);
            self.metadata.set(topic.clone(), p, PartitionMeta::solo(me));
            if self.ensure_log(&key).leader_epoch() > 0 {
                // The server resets the metadata, then fails on the log's higher epoch.
                return Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR);
            }
            results.push(admin_result(p, ErrorCode::NONE, 0));
        }
        ok(ResponseBody::CreateTopic(TopicAdminResponse {
            topic: r.topic.clone(),
            partitions: results,
        }))
    }

    pub(super) fn delete_topic(&mut self, r: &DeleteTopicRequest) -> Reply {
        let topic = owned(&r.topic);
        if topic.is_none() && self.metadata.has_null_topic() {
            return Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR);
        }
        let mut parts: Vec<i32> = self
            .logs
            .keys()
            .filter(|(t, _)| *t == topic)
            .map(|(_, p)| *p)
            .collect();
        parts.sort_unstable();
        let had_meta = self.metadata.remove_topic(&topic);
        for p in &parts {
            self.logs.remove(&(topic.clone(), *p));
        }
        let results = if parts.is_empty() {
            if had_meta {
                vec![admin_result(-1, ErrorCode::NONE, 0)]
            } else {
                vec![admin_result(-1, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, 0)]
            }
        } else {
            parts
                .iter()
                .map(|p| admin_result(*p, ErrorCode::NONE, 0))
                .collect()
        };
        ok(ResponseBody::DeleteTopic(TopicAdminResponse {
            topic: r.topic.clone(),
            partitions: results,
        }))
    }

    pub(super) fn alter_partition(&mut self, r: &AlterPartitionRequest) -> Reply {
        let topic = owned(&r.topic);
        let key = (topic.clone(), r.partition);
        let meta = PartitionMeta {
            leader: r.leader_id,
            leader_epoch: r.leader_epoch,
            replicas: r.replica_nodes.clone(),
            isr: r.isr_nodes.clone(),
        };
        // Overwritten before the epoch check: a rejected call is still partly applied.
        self.metadata.set(topic, r.partition, meta);
        let log = self.ensure_log(&key);
        if r.leader_epoch < log.leader_epoch() {
            return Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR);
        }
        log.set_leader_epoch(r.leader_epoch);
        ok(ResponseBody::AlterPartition(TopicAdminResponse {
            topic: r.topic.clone(),
            partitions: vec![admin_result(r.partition, ErrorCode::NONE, r.leader_epoch)],
        }))
    }
}
