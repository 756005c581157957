//! One simulated broker: its state and the request dispatcher (PROTOCOL.md §2.3, §3).
//!
//! The broker is a pure state machine. [`Broker::handle`] takes a decoded request header and
//! the raw body, applies the server's per-key version rules, decodes the body (a malformed body
//! means "close the connection"), runs the handler and returns a [`Reply`]. Handlers live in
//! one module per API family; the Produce handler can suspend on `acks = -1`
//! ([`produce::ProduceJob`]).

mod admin;
mod coord;
mod fetch;
pub mod produce;

use crate::config::BrokerConfig;
use crate::group::GroupCoordinator;
use crate::log::PartitionLog;
use crate::metadata::{ClusterView, MetadataCache, PartitionMeta, TopicName};
use crate::offsets::OffsetStore;
use crate::producer_ids::ProducerIdAllocator;
use crate::producer_state::ProducerStateManager;
use crate::rng::SimRng;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use std::time::Instant;
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::{RequestBody, ResponseBody};
use stellflow_proto::{ApiKey, ErrorCode};

/// The cluster id every answer carries (hard-coded in the server).
pub const CLUSTER_ID: &str = "stellflow-dev-cluster";

/// Everything a handler needs from the outside world.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The current instant.
    pub now: Instant,
    /// Broker wall-clock time, ms since the Unix epoch.
    pub now_ms: i64,
    /// The seeded random source.
    pub rng: &'a mut SimRng,
    /// A cluster-wide Metadata view replacing this broker's own, if configured.
    pub view: Option<&'a ClusterView>,
    /// How long an idempotent append that needs no followers leaves its sequence unrecorded
    /// ([`crate::Knobs::record_lag`]).
    pub record_lag: Duration,
}

/// What to do with a request.
#[derive(Debug)]
pub enum Reply {
    /// Send a response: header error code plus body.
    Body(ErrorCode, ResponseBody),
    /// Send a 12-byte header-only response with this error code.
    HeaderOnly(ErrorCode),
    /// The body was malformed: close the connection without a response.
    Close,
    /// A Produce waiting for the high watermark; resume it with [`Broker::resume_produce`].
    Pending(Box<produce::ProduceJob>),
}

/// A handler failure the server turns into a header-only `1 UNKNOWN_SERVER_ERROR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerException;

/// State of one broker. Logs and committed offsets survive [`Broker::restarted`]; everything
/// else is in memory and lost.
#[derive(Debug, Clone)]
pub struct Broker {
    config: BrokerConfig,
    metadata: MetadataCache,
    logs: HashMap<(TopicName, i32), PartitionLog>,
    producers: ProducerStateManager,
    pids: ProducerIdAllocator,
    groups: GroupCoordinator,
    offsets: OffsetStore,
    /// Other brokers this broker knows (announced by the controller): id → (host, port).
    known_brokers: BTreeMap<i32, (String, i32)>,
}

impl Broker {
    /// A fresh broker with no data.
    pub fn new(config: BrokerConfig) -> Self {
        Broker {
            config,
            metadata: MetadataCache::new(),
            logs: HashMap::new(),
            producers: ProducerStateManager::new(),
            pids: ProducerIdAllocator::new(),
            groups: GroupCoordinator::new(),
            offsets: OffsetStore::new(),
            known_brokers: BTreeMap::new(),
        }
    }

    /// The broker that comes back after a crash and restart on the same data
    /// (PROTOCOL.md §8 item 20): logs (with their leader epochs) and committed offsets survive,
    /// null commit metadata becomes `""`, every recovered partition is registered with leader 0,
    /// replicas `[0]` and ISR `[0]`; groups, producer state, the producer-id counter and the
    /// broker list are gone. A partition stored under a null topic name comes back as `"null"`.
    pub fn restarted(&self) -> Broker {
        let mut b = Broker::new(self.config.clone());
        b.offsets = self.offsets.after_restart();
        for ((topic, partition), log) in &self.logs {
            let topic = Some(topic.clone().unwrap_or_else(|| "null".to_owned()));
            let mut log = log.clone();
            log.reset_follower_progress();
            b.metadata.set(
                topic.clone(),
                *partition,
                PartitionMeta {
                    leader: 0,
                    leader_epoch: log.leader_epoch(),
                    replicas: vec![0],
                    isr: vec![0],
                },
            );
            b.logs.insert((topic, *partition), log);
        }
        b
    }

    /// The group coordinator's state (read-only).
    pub fn groups(&self) -> &GroupCoordinator {
        &self.groups
    }

    /// The committed-offset store (read-only): what OffsetFetch would answer, without a
    /// request (the DST harness checks committed positions against what clients delivered).
    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    /// This broker's id.
    pub fn id(&self) -> i32 {
        self.config.broker_id
    }

    /// This broker's configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Changes the advertised address (the TCP server advertises its bound address).
    pub fn set_advertised(&mut self, host: String, port: i32) {
        self.config.host = host;
        self.config.port = port;
    }

    /// The metadata cache.
    pub fn metadata(&self) -> &MetadataCache {
        &self.metadata
    }

    /// The log of a partition, if this broker stores one.
    pub fn log(&self, topic: &str, partition: i32) -> Option<&PartitionLog> {
        self.logs.get(&(Some(topic.to_owned()), partition))
    }

    /// Mutable access to a partition log (test knobs).
    pub fn log_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionLog> {
        self.logs.get_mut(&(Some(topic.to_owned()), partition))
    }

    pub(crate) fn log_by_key(&self, key: &(TopicName, i32)) -> Option<&PartitionLog> {
        self.logs.get(key)
    }

    pub(crate) fn log_by_key_mut(&mut self, key: &(TopicName, i32)) -> Option<&mut PartitionLog> {
        self.logs.get_mut(key)
    }

    /// Every `(topic, partition)` this broker has a log for.
    pub fn log_keys(&self) -> Vec<(TopicName, i32)> {
        self.logs.keys().cloned().collect()
    }

    /// Controller push: sets a partition's metadata, creates its log if this broker is a
    /// replica or leader, and learns the leader's address.
    pub fn apply_assignment(
        &mut self,
        topic: &str,
        partition: i32,
        meta: PartitionMeta,
        leader_address: Option<(String, i32)>,
    ) {
        let key = (Some(topic.to_owned()), partition);
        let me = self.id();
        if meta.leader == me || meta.replicas.contains(&me) {
            let cfg = self.config.log.clone();
            let log = self
                .logs
                .entry(key.clone())
                .or_insert_with(|| PartitionLog::new(cfg));
            if meta.leader_epoch > log.leader_epoch() {
                log.set_leader_epoch(meta.leader_epoch);
            }
        }
        if meta.leader != me
            && let Some(addr) = leader_address
        {
            self.known_brokers.insert(meta.leader, addr);
        }
        self.metadata.set(key.0, partition, meta);
    }

    /// The brokers this broker lists in Metadata: itself plus announced leaders, ascending.
    pub fn broker_list(&self) -> Vec<(i32, String, i32)> {
        let mut m = self.known_brokers.clone();
        m.insert(self.id(), (self.config.host.clone(), self.config.port));
        m.into_iter().map(|(id, (h, p))| (id, h, p)).collect()
    }

    /// The high watermark of a partition this broker leads (log end if it has no metadata).
    pub fn high_watermark(&self, key: &(TopicName, i32)) -> Option<i64> {
        let log = self.logs.get(key)?;
        Some(match self.metadata.get(&key.0, key.1) {
            Some(m) => log.high_watermark(self.id(), &m.isr),
            None => log.log_end(),
        })
    }

    fn ensure_log(&mut self, key: &(TopicName, i32)) -> &mut PartitionLog {
        let cfg = self.config.log.clone();
        self.logs
            .entry(key.clone())
            .or_insert_with(|| PartitionLog::new(cfg))
    }

    /// Handles one request. `body` is the raw body; `header` the decoded request header.
    pub fn handle(&mut self, ctx: &mut Ctx<'_>, header: &RequestHeader, body: Bytes) -> Reply {
        let key = header.api_key;
        if !key.is_known() {
            return Reply::HeaderOnly(ErrorCode::FEATURE_NOT_ENABLED);
        }
        if header.api_version != 0 {
            return match key {
                ApiKey::API_VERSIONS
                | ApiKey::METADATA
                | ApiKey::PRODUCE
                | ApiKey::FETCH
                | ApiKey::LIST_OFFSETS => Reply::HeaderOnly(ErrorCode::UNSUPPORTED_VERSION),
                ApiKey::FIND_COORDINATOR => self.find_coordinator(),
                ApiKey::DESCRIBE_CLUSTER | ApiKey::HEALTH_CHECK => self.cluster_status(ctx),
                _ => Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR),
            };
        }
        let Ok(body) = RequestBody::decode(key, 0, body) else {
            return Reply::Close;
        };
        let client_id = header.client_id.as_deref();
        match body {
            RequestBody::ApiVersions(_) => admin::api_versions(),
            RequestBody::Metadata(r) => self.metadata_response(ctx, &r),
            RequestBody::Produce(r) => {
                let job = produce::ProduceJob::new(header.correlation_id, client_id, r);
                self.run_produce(ctx, Box::new(job))
            }
            RequestBody::Fetch(r) => self.fetch(&r),
            RequestBody::ListOffsets(r) => self.list_offsets(ctx, &r),
            RequestBody::OffsetCommit(r) => self.offset_commit(&r),
            RequestBody::OffsetFetch(r) => self.offset_fetch(&r),
            RequestBody::FindCoordinator(_) => self.find_coordinator(),
            RequestBody::Heartbeat(r) => self.heartbeat(ctx, &r),
            RequestBody::JoinGroup(r) => self.join_group(ctx, &r),
            RequestBody::SyncGroup(r) => self.sync_group(ctx, &r),
            RequestBody::InitProducerId(r) => self.init_producer_id(client_id, &r),
            RequestBody::BeginTransaction(r) => self.begin_transaction(&r),
            RequestBody::EndTransaction(r) => self.end_transaction(&r),
            RequestBody::CreateTopic(r) => self.create_topic(&r),
            RequestBody::DeleteTopic(r) => self.delete_topic(&r),
            RequestBody::AlterPartition(r) => self.alter_partition(&r),
            RequestBody::DescribeCluster(_) | RequestBody::HealthCheck(_) => {
                self.cluster_status(ctx)
            }
            RequestBody::DecommissionBroker(r) => admin::decommission(r.broker_id),
            _ => Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
}

fn ok(body: ResponseBody) -> Reply {
    Reply::Body(ErrorCode::NONE, body)
}
