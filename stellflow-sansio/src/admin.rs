//! Admin commands with typed results: ApiVersions, DescribeCluster, HealthCheck, topics
//! (describe, create, delete), AlterPartition, ListOffsets, DecommissionBroker, and re-asserting
//! leadership after a broker restart.
//!
//! Each command gets a [`RequestId`] and exactly one [`Event::Admin`] with its
//! [`AdminResponse`] or an [`AdminError`]. Per-partition outcomes are data in the response.
//! Topic names are validated client-side before anything is sent (DESIGN §3.11).

use crate::client::Client;
use crate::config::BrokerAddress;
use crate::consumer::Position;
use crate::error::{AdminError, RequestError};
use crate::event::Event;
use crate::metadata::{LeaderlessReason, PartitionInfo, ViewPartition};
use crate::net::{Completion, Net, Origin, Reply};
use crate::request::{RequestId, RequestOptions, Target};
use crate::topic::validate_topic_name;
use std::collections::BTreeMap;
use std::time::Instant;
use stellflow_proto::messages::{
    AlterPartitionRequest, ApiVersionsRequest, ApiVersionsResponse, ClusterStatusResponse,
    CreateTopicRequest, DecommissionBrokerRequest, DecommissionBrokerResponse, DeleteTopicRequest,
    DescribeClusterRequest, FindCoordinatorRequest, FindCoordinatorResponse, HealthCheckRequest,
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
    MetadataRequest, MetadataResponse, OffsetFetchPartition, OffsetFetchRequest,
    OffsetFetchResponse, OffsetFetchTopic, RequestBody, TopicAdminResponse,
};
use stellflow_proto::{ApiKey, ErrorCode, Reader, Wire};

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
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// An admin command, for [`Client::admin`]. The convenience methods on [`Client`] build these.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminRequest {
    /// The API versions one broker supports, and what this client negotiated.
    ApiVersions {
        /// The broker to ask.
        target: Target,
    },
    /// DescribeCluster on one broker (its local view: counts, cluster id).
    DescribeCluster {
        /// The broker to ask.
        target: Target,
    },
    /// HealthCheck on one broker (always OK on today's server).
    HealthCheck {
        /// The broker to ask.
        target: Target,
    },
    /// Topics from a fresh metadata round over every known broker; empty = all topics.
    DescribeTopics {
        /// Topic names.
        topics: Vec<String>,
    },
    /// CreateTopic on one broker (the server creates it on that broker only).
    CreateTopic {
        /// Name (validated client-side).
        topic: String,
        /// Partition count, at least 1.
        partitions: i32,
        /// The broker to create it on.
        target: Target,
    },
    /// DeleteTopic on one broker.
    DeleteTopic {
        /// Name (validated client-side).
        topic: String,
        /// The broker to delete it on.
        target: Target,
    },
    /// AlterPartition: a controller-style override of one partition's leader, epoch, replicas
    /// and ISR on one broker (PROTOCOL.md §3.14). Use with care.
    AlterPartition {
        /// Topic (validated client-side).
        topic: String,
        /// Partition.
        partition: i32,
        /// New leader id.
        leader_id: i32,
        /// Leader epoch, not lower than the log's current epoch.
        leader_epoch: i32,
        /// Replica ids.
        replicas: Vec<i32>,
        /// ISR ids.
        isr: Vec<i32>,
        /// The broker to apply it on.
        target: Target,
    },
    /// ListOffsets, routed to each partition's leader and batched per broker.
    ListOffsets {
        /// `(topic, partition, spec)` triples.
        partitions: Vec<(String, i32, OffsetSpec)>,
    },
    /// DecommissionBroker (a stub on today's server).
    DecommissionBroker {
        /// The broker id to decommission.
        broker_id: i32,
        /// The broker to ask.
        target: Target,
    },
    /// The committed positions of a consumer group for the given `(topic, partition)`s:
    /// FindCoordinator (on any broker), then OffsetFetch on the coordinator's host:port, as
    /// the consumer does. Mid-blob commits decode to their record index (DESIGN §3.7).
    CommittedOffsets {
        /// The group id.
        group: String,
        /// `(topic, partition)` pairs, answered in this order.
        partitions: Vec<(String, i32)>,
    },
    /// After a broker restarted on its data, every partition it recovered reports leader 0 and
    /// refuses Produce/Fetch with 9 (PROTOCOL.md §8 item 20). This asks that broker for its
    /// view, then sends one AlterPartition per leaderless partition it holds, naming itself as
    /// leader with the partition's current epoch and `replicas = isr = [broker]`.
    ReassertLeadership {
        /// The restarted broker's id.
        broker_id: i32,
    },
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

/// The typed result of an admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminResponse {
    /// For [`AdminRequest::ApiVersions`].
    ApiVersions(BrokerApiVersions),
    /// For [`AdminRequest::DescribeCluster`].
    Cluster(ClusterStatus),
    /// For [`AdminRequest::HealthCheck`].
    Health(ClusterStatus),
    /// For [`AdminRequest::DescribeTopics`]: the topics found, and requested names no broker
    /// knows.
    Topics {
        /// Topics found.
        topics: Vec<TopicDescription>,
        /// Requested names unknown to every broker asked.
        missing: Vec<String>,
    },
    /// For [`AdminRequest::CreateTopic`].
    TopicCreated(TopicAdminResult),
    /// For [`AdminRequest::DeleteTopic`].
    TopicDeleted(TopicAdminResult),
    /// For [`AdminRequest::AlterPartition`].
    PartitionAltered(TopicAdminResult),
    /// For [`AdminRequest::ListOffsets`], in request order.
    Offsets(Vec<ListedOffset>),
    /// For [`AdminRequest::DecommissionBroker`].
    Decommissioned(DecommissionResult),
    /// For [`AdminRequest::ReassertLeadership`]: one entry per leaderless partition found on
    /// the broker (empty when it had none).
    LeadershipReasserted(Vec<ReassertedPartition>),
    /// For [`AdminRequest::CommittedOffsets`], in request order.
    CommittedOffsets(Vec<CommittedOffset>),
}

/// An [`AdminResponse`] of another kind than the typed accessor expected (the core answers
/// each [`AdminRequest`] with its own variant, so this is a bug: please report it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("got {got} where {expected} was expected (please report this bug)")]
pub struct UnexpectedResponse {
    /// The variant the accessor wanted.
    pub expected: &'static str,
    /// The variant the core gave.
    pub got: &'static str,
}

/// Defines one typed accessor per response variant.
macro_rules! typed {
    ($($(#[$doc:meta])* $name:ident: $variant:ident($ty:ty);)*) => {
        impl AdminResponse {
            /// The variant's name, as [`UnexpectedResponse`] reports it.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(AdminResponse::$variant(..) => stringify!($variant),)*
                    AdminResponse::Topics { .. } => "Topics",
                }
            }
            $(
                $(#[$doc])*
                pub fn $name(self) -> Result<$ty, UnexpectedResponse> {
                    match self {
                        AdminResponse::$variant(v) => Ok(v),
                        other => Err(other.unexpected(stringify!($variant))),
                    }
                }
            )*
        }
    };
}

typed! {
    /// The result of [`AdminRequest::ApiVersions`].
    into_api_versions: ApiVersions(BrokerApiVersions);
    /// The result of [`AdminRequest::DescribeCluster`].
    into_cluster: Cluster(ClusterStatus);
    /// The result of [`AdminRequest::HealthCheck`].
    into_health: Health(ClusterStatus);
    /// The result of [`AdminRequest::CreateTopic`].
    into_topic_created: TopicCreated(TopicAdminResult);
    /// The result of [`AdminRequest::DeleteTopic`].
    into_topic_deleted: TopicDeleted(TopicAdminResult);
    /// The result of [`AdminRequest::AlterPartition`].
    into_partition_altered: PartitionAltered(TopicAdminResult);
    /// The result of [`AdminRequest::ListOffsets`], in request order.
    into_offsets: Offsets(Vec<ListedOffset>);
    /// The result of [`AdminRequest::DecommissionBroker`].
    into_decommissioned: Decommissioned(DecommissionResult);
    /// The result of [`AdminRequest::ReassertLeadership`].
    into_leadership_reasserted: LeadershipReasserted(Vec<ReassertedPartition>);
    /// The result of [`AdminRequest::CommittedOffsets`], in request order.
    into_committed_offsets: CommittedOffsets(Vec<CommittedOffset>);
}

impl AdminResponse {
    /// The result of [`AdminRequest::DescribeTopics`]: the topics found, and the requested
    /// names no broker knows.
    pub fn into_topics(self) -> Result<(Vec<TopicDescription>, Vec<String>), UnexpectedResponse> {
        match self {
            AdminResponse::Topics { topics, missing } => Ok((topics, missing)),
            other => Err(other.unexpected("Topics")),
        }
    }

    fn unexpected(&self, expected: &'static str) -> UnexpectedResponse {
        UnexpectedResponse {
            expected,
            got: self.kind(),
        }
    }
}

/// An [`AdminRequest`] paired with the accessor of its typed result: what an adapter's admin
/// shortcut sends ([`AdminCall::request`]) and how it unwraps the answer ([`AdminCall::take`]).
/// The constructors take borrowed arguments, as the adapters' shortcuts do.
#[derive(Debug, Clone)]
pub struct AdminCall<T> {
    /// The command to run (with [`Client::admin`]).
    pub request: AdminRequest,
    /// Takes the typed result out of the command's [`AdminResponse`].
    pub take: fn(AdminResponse) -> Result<T, UnexpectedResponse>,
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|t| (*t).to_owned()).collect()
}

impl AdminCall<BrokerApiVersions> {
    /// The API versions one broker supports and the ones this client chose.
    pub fn api_versions(target: Target) -> Self {
        let request = AdminRequest::ApiVersions { target };
        AdminCall {
            request,
            take: AdminResponse::into_api_versions,
        }
    }
}

impl AdminCall<ClusterStatus> {
    /// DescribeCluster on one broker (its local view).
    pub fn describe_cluster(target: Target) -> Self {
        let request = AdminRequest::DescribeCluster { target };
        AdminCall {
            request,
            take: AdminResponse::into_cluster,
        }
    }

    /// HealthCheck on one broker.
    pub fn health_check(target: Target) -> Self {
        let request = AdminRequest::HealthCheck { target };
        AdminCall {
            request,
            take: AdminResponse::into_health,
        }
    }
}

impl AdminCall<(Vec<TopicDescription>, Vec<String>)> {
    /// Topics from a fresh metadata round (empty = all), and the requested names no broker
    /// knows.
    pub fn describe_topics(topics: &[&str]) -> Self {
        let request = AdminRequest::DescribeTopics {
            topics: owned(topics),
        };
        AdminCall {
            request,
            take: AdminResponse::into_topics,
        }
    }
}

impl AdminCall<TopicAdminResult> {
    /// CreateTopic on one broker.
    pub fn create_topic(topic: &str, partitions: i32, target: Target) -> Self {
        let topic = topic.to_owned();
        let request = AdminRequest::CreateTopic {
            topic,
            partitions,
            target,
        };
        AdminCall {
            request,
            take: AdminResponse::into_topic_created,
        }
    }

    /// DeleteTopic on one broker.
    pub fn delete_topic(topic: &str, target: Target) -> Self {
        let request = AdminRequest::DeleteTopic {
            topic: topic.to_owned(),
            target,
        };
        AdminCall {
            request,
            take: AdminResponse::into_topic_deleted,
        }
    }

    /// AlterPartition, built as [`AdminRequest::AlterPartition`] (other requests fail with
    /// an [`UnexpectedResponse`] when their answer is taken).
    pub fn alter_partition(request: AdminRequest) -> Self {
        AdminCall {
            request,
            take: AdminResponse::into_partition_altered,
        }
    }
}

impl AdminCall<Vec<ListedOffset>> {
    /// ListOffsets for `(topic, partition, spec)` triples, routed to the leaders.
    pub fn list_offsets(partitions: &[(&str, i32, OffsetSpec)]) -> Self {
        let partitions = partitions.iter().map(|(t, p, s)| ((*t).to_owned(), *p, *s));
        let request = AdminRequest::ListOffsets {
            partitions: partitions.collect(),
        };
        AdminCall {
            request,
            take: AdminResponse::into_offsets,
        }
    }
}

impl AdminCall<Vec<CommittedOffset>> {
    /// The positions `group` committed for `(topic, partition)` pairs.
    pub fn committed_offsets(group: &str, partitions: &[(&str, i32)]) -> Self {
        let partitions = partitions
            .iter()
            .map(|(t, p)| ((*t).to_owned(), *p))
            .collect();
        let request = AdminRequest::CommittedOffsets {
            group: group.to_owned(),
            partitions,
        };
        AdminCall {
            request,
            take: AdminResponse::into_committed_offsets,
        }
    }
}

impl AdminCall<DecommissionResult> {
    /// DecommissionBroker.
    pub fn decommission_broker(broker_id: i32, target: Target) -> Self {
        let request = AdminRequest::DecommissionBroker { broker_id, target };
        AdminCall {
            request,
            take: AdminResponse::into_decommissioned,
        }
    }
}

impl AdminCall<Vec<ReassertedPartition>> {
    /// Re-asserts the leadership of a restarted broker's leaderless partitions.
    pub fn reassert_leadership(broker_id: i32) -> Self {
        let request = AdminRequest::ReassertLeadership { broker_id };
        AdminCall {
            request,
            take: AdminResponse::into_leadership_reasserted,
        }
    }
}

/// One partition's committed position for [`AdminRequest::CommittedOffsets`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed position (`None`: nothing committed), or the partition's error.
    pub result: Result<Option<Position>, AdminError>,
}

/// The state of one running admin command.
#[derive(Debug)]
pub(crate) enum AdminOp {
    Single(Single),
    Committed {
        group: String,
        partitions: Vec<(String, i32)>,
        /// OffsetFetch sent (else FindCoordinator is in flight).
        fetching: bool,
        opts: RequestOptions,
    },
    DescribeTopics(Vec<String>),
    ListOffsets {
        specs: Vec<(String, i32, OffsetSpec)>,
        results: Vec<Option<Result<OffsetInfo, AdminError>>>,
        /// Request seq → (index in `results`, topic position, partition position) it carries.
        outstanding: BTreeMap<u64, Vec<(usize, usize, usize)>>,
        waited_for_metadata: bool,
    },
    Reassert {
        broker_id: i32,
        /// Metadata request seq while asking the broker for its view.
        asking: Option<u64>,
        results: Vec<ReassertedPartition>,
        outstanding: BTreeMap<u64, usize>,
        address: Option<BrokerAddress>,
    },
}

#[derive(Debug)]
pub(crate) enum Single {
    ApiVersions,
    DescribeCluster,
    HealthCheck,
    CreateTopic,
    DeleteTopic,
    AlterPartition(String, ViewPartition),
    Decommission,
}

fn status_body() -> (stellflow_proto::NString, stellflow_proto::NString) {
    (None, None)
}

impl Client {
    /// Runs an admin command. Validation errors (bad topic names, bad arguments) are returned
    /// at once; everything else arrives as [`Event::Admin`] with the returned id.
    pub fn admin(
        &mut self,
        now: Instant,
        request: AdminRequest,
        opts: &RequestOptions,
    ) -> Result<RequestId, AdminError> {
        self.last_now = now;
        validate(&request)?;
        if self.closed {
            return Err(AdminError::Request(RequestError::Closed));
        }
        let id = self.net.alloc_seq();
        let op = match request {
            AdminRequest::ApiVersions { target } => {
                let body = RequestBody::ApiVersions(ApiVersionsRequest {
                    client_software_name: Some("stellflow-rs".into()),
                    client_software_version: Some(env!("CARGO_PKG_VERSION").into()),
                    supported_features: Vec::new(),
                });
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::ApiVersions)
            }
            AdminRequest::DescribeCluster { target } => {
                let (n, v) = status_body();
                let body = RequestBody::DescribeCluster(DescribeClusterRequest {
                    client_software_name: n,
                    client_software_version: v,
                    supported_features: Vec::new(),
                });
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::DescribeCluster)
            }
            AdminRequest::HealthCheck { target } => {
                let (n, v) = status_body();
                let body = RequestBody::HealthCheck(HealthCheckRequest {
                    client_software_name: n,
                    client_software_version: v,
                    supported_features: Vec::new(),
                });
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::HealthCheck)
            }
            AdminRequest::DescribeTopics { topics } => {
                self.refresher.wait_next(id);
                AdminOp::DescribeTopics(topics)
            }
            AdminRequest::CreateTopic {
                topic,
                partitions,
                target,
            } => {
                let body = RequestBody::CreateTopic(CreateTopicRequest::new(&topic, partitions));
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::CreateTopic)
            }
            AdminRequest::DeleteTopic { topic, target } => {
                let body = RequestBody::DeleteTopic(DeleteTopicRequest::new(&topic));
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::DeleteTopic)
            }
            AdminRequest::AlterPartition {
                topic,
                partition,
                leader_id,
                leader_epoch,
                replicas,
                isr,
                target,
            } => {
                let body = RequestBody::AlterPartition(AlterPartitionRequest {
                    topic: Some(topic.as_str().into()),
                    partition_count: -1,
                    partition,
                    leader_id,
                    leader_epoch,
                    replica_nodes: replicas.clone(),
                    isr_nodes: isr.clone(),
                });
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::AlterPartition(
                    topic,
                    ViewPartition {
                        partition,
                        leader_id,
                        leader_epoch,
                        replicas,
                        isr,
                    },
                ))
            }
            AdminRequest::DecommissionBroker { broker_id, target } => {
                let body = RequestBody::DecommissionBroker(DecommissionBrokerRequest { broker_id });
                self.send(now, id, target, body, opts);
                AdminOp::Single(Single::Decommission)
            }
            AdminRequest::ListOffsets { partitions } => {
                let n = partitions.len();
                let mut op = AdminOp::ListOffsets {
                    specs: partitions,
                    results: vec![None; n],
                    outstanding: BTreeMap::new(),
                    waited_for_metadata: false,
                };
                if self.refresher.completed_rounds() == 0 {
                    // Nothing to route with yet: wait for the first round.
                    if let AdminOp::ListOffsets {
                        waited_for_metadata,
                        ..
                    } = &mut op
                    {
                        *waited_for_metadata = true;
                    }
                    self.refresher.wait_next(id);
                    self.ops.insert(id, op);
                    self.process(now);
                    return Ok(RequestId(id));
                }
                self.route_list_offsets(now, id, &mut op, opts);
                op
            }
            AdminRequest::CommittedOffsets { group, partitions } => {
                let body = RequestBody::FindCoordinator(FindCoordinatorRequest {
                    key: Some(group.as_str().into()),
                    key_type: 0,
                });
                self.send(now, id, Target::Any, body, opts);
                AdminOp::Committed {
                    group,
                    partitions,
                    fetching: false,
                    opts: opts.clone(),
                }
            }
            AdminRequest::ReassertLeadership { broker_id } => {
                let seq = self.net.submit(
                    now,
                    Target::Broker(broker_id),
                    RequestBody::Metadata(MetadataRequest::default()),
                    None,
                    Origin::Admin(id),
                    opts,
                );
                AdminOp::Reassert {
                    broker_id,
                    asking: Some(seq),
                    results: Vec::new(),
                    outstanding: BTreeMap::new(),
                    address: None,
                }
            }
        };
        self.ops.insert(id, op);
        self.finish_if_done(id);
        self.process(now);
        Ok(RequestId(id))
    }

    /// The API versions of one broker ([`AdminRequest::ApiVersions`]).
    pub fn api_versions(&mut self, now: Instant, target: Target) -> Result<RequestId, AdminError> {
        self.admin(
            now,
            AdminRequest::ApiVersions { target },
            &RequestOptions::default(),
        )
    }

    /// DescribeCluster on one broker ([`AdminRequest::DescribeCluster`]).
    pub fn describe_cluster(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<RequestId, AdminError> {
        self.admin(
            now,
            AdminRequest::DescribeCluster { target },
            &RequestOptions::default(),
        )
    }

    /// HealthCheck on one broker ([`AdminRequest::HealthCheck`]).
    pub fn health_check(&mut self, now: Instant, target: Target) -> Result<RequestId, AdminError> {
        self.admin(
            now,
            AdminRequest::HealthCheck { target },
            &RequestOptions::default(),
        )
    }

    /// Topics from a fresh metadata round ([`AdminRequest::DescribeTopics`]); empty = all.
    pub fn describe_topics(
        &mut self,
        now: Instant,
        topics: &[&str],
    ) -> Result<RequestId, AdminError> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        self.admin(
            now,
            AdminRequest::DescribeTopics { topics },
            &RequestOptions::default(),
        )
    }

    /// CreateTopic on one broker ([`AdminRequest::CreateTopic`]).
    pub fn create_topic(
        &mut self,
        now: Instant,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<RequestId, AdminError> {
        let topic = topic.to_owned();
        let req = AdminRequest::CreateTopic {
            topic,
            partitions,
            target,
        };
        self.admin(now, req, &RequestOptions::default())
    }

    /// DeleteTopic on one broker ([`AdminRequest::DeleteTopic`]).
    pub fn delete_topic(
        &mut self,
        now: Instant,
        topic: &str,
        target: Target,
    ) -> Result<RequestId, AdminError> {
        let req = AdminRequest::DeleteTopic {
            topic: topic.to_owned(),
            target,
        };
        self.admin(now, req, &RequestOptions::default())
    }

    /// ListOffsets routed to leaders ([`AdminRequest::ListOffsets`]).
    pub fn list_offsets(
        &mut self,
        now: Instant,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<RequestId, AdminError> {
        let partitions = partitions
            .iter()
            .map(|(t, p, s)| ((*t).to_owned(), *p, *s))
            .collect();
        self.admin(
            now,
            AdminRequest::ListOffsets { partitions },
            &RequestOptions::default(),
        )
    }

    /// DecommissionBroker ([`AdminRequest::DecommissionBroker`]).
    pub fn decommission_broker(
        &mut self,
        now: Instant,
        broker_id: i32,
        target: Target,
    ) -> Result<RequestId, AdminError> {
        let req = AdminRequest::DecommissionBroker { broker_id, target };
        self.admin(now, req, &RequestOptions::default())
    }

    /// Re-asserts leadership of a restarted broker's leaderless partitions
    /// ([`AdminRequest::ReassertLeadership`]).
    pub fn reassert_leadership(
        &mut self,
        now: Instant,
        broker_id: i32,
    ) -> Result<RequestId, AdminError> {
        self.admin(
            now,
            AdminRequest::ReassertLeadership { broker_id },
            &RequestOptions::default(),
        )
    }

    fn send(
        &mut self,
        now: Instant,
        id: u64,
        target: Target,
        body: RequestBody,
        o: &RequestOptions,
    ) {
        self.net
            .submit(now, target, body, None, Origin::Admin(id), o);
    }

    fn route_list_offsets(&mut self, now: Instant, id: u64, op: &mut AdminOp, o: &RequestOptions) {
        let AdminOp::ListOffsets {
            specs,
            results,
            outstanding,
            waited_for_metadata,
        } = op
        else {
            return;
        };
        // Group by target broker: leader if known, else any broker holding the partition
        // (ListOffsets is not leader-checked on the server). A partition the metadata does not
        // route (a topic created a moment ago, or moved) waits for one metadata round that
        // starts now, as a produce does; only a fresh round's "unknown" is final.
        let routed: Vec<usize> = outstanding.values().flatten().map(|(i, _, _)| *i).collect();
        let mut groups: BTreeMap<Target, Vec<usize>> = BTreeMap::new();
        let mut wait = false;
        for (i, (topic, partition, _)) in specs.iter().enumerate() {
            if results.get(i).is_none_or(Option::is_some) || routed.contains(&i) {
                continue;
            }
            let cluster = self.metadata.cluster();
            let unroutable = match cluster.partition(topic, *partition) {
                Some(p) => match p.leader() {
                    Ok(leader) => {
                        groups.entry(Target::Broker(leader)).or_default().push(i);
                        continue;
                    }
                    Err(reason) => match self.metadata.holders(topic, *partition).next() {
                        Some(a) => {
                            groups
                                .entry(Target::Address(a.clone()))
                                .or_default()
                                .push(i);
                            continue;
                        }
                        None => leaderless(topic, *partition, reason.clone()),
                    },
                },
                None => AdminError::UnknownPartition {
                    topic: topic.clone(),
                    partition: *partition,
                },
            };
            if *waited_for_metadata {
                if let Some(r) = results.get_mut(i) {
                    *r = Some(Err(unroutable));
                }
            } else {
                wait = true;
            }
        }
        if wait {
            *waited_for_metadata = true;
            self.refresher.wait_next(id);
        }
        for (target, idx) in groups {
            let mut topics: Vec<ListOffsetsTopic> = Vec::new();
            let mut positions = Vec::with_capacity(idx.len());
            for &i in &idx {
                let Some((topic, partition, spec)) = specs.get(i) else {
                    continue;
                };
                let entry = ListOffsetsPartition {
                    partition: *partition,
                    current_leader_epoch: -1,
                    timestamp: spec.wire(),
                    max_num_offsets: 1,
                };
                // The broker answers in request order: remember where each entry goes.
                match topics
                    .iter_mut()
                    .position(|t| t.topic.as_deref() == Some(topic.as_str()))
                {
                    Some(tp) => {
                        if let Some(t) = topics.get_mut(tp) {
                            positions.push((i, tp, t.partitions.len()));
                            t.partitions.push(entry);
                        }
                    }
                    None => {
                        positions.push((i, topics.len(), 0));
                        topics.push(ListOffsetsTopic {
                            topic: Some(topic.as_str().into()),
                            partitions: vec![entry],
                        });
                    }
                }
            }
            let body = RequestBody::ListOffsets(ListOffsetsRequest {
                replica_id: -1,
                isolation_level: 0,
                topics,
            });
            let seq = self
                .net
                .submit(now, target, body, None, Origin::Admin(id), o);
            outstanding.insert(seq, positions);
        }
    }

    /// A metadata round that `op` waited for has ended.
    pub(crate) fn on_metadata_round(&mut self, now: Instant, id: u64) {
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        match &mut op {
            AdminOp::DescribeTopics(names) => {
                let cluster = self.metadata.cluster();
                let describe = |name: &String| {
                    cluster.topics.get(name).map(|t| TopicDescription {
                        name: name.clone(),
                        partitions: t.partitions.values().cloned().collect(),
                    })
                };
                let (topics, missing) = if names.is_empty() {
                    (
                        cluster.topics.keys().filter_map(describe).collect(),
                        Vec::new(),
                    )
                } else {
                    let topics = names.iter().filter_map(describe).collect();
                    let missing = names
                        .iter()
                        .filter(|n| !cluster.topics.contains_key(*n))
                        .cloned()
                        .collect();
                    (topics, missing)
                };
                self.emit(id, Ok(AdminResponse::Topics { topics, missing }));
                return;
            }
            AdminOp::ListOffsets { .. } => {
                self.route_list_offsets(now, id, &mut op, &RequestOptions::default());
            }
            _ => {}
        }
        self.ops.insert(id, op);
        self.finish_if_done(id);
    }

    pub(crate) fn on_admin_completion(&mut self, now: Instant, id: u64, c: Completion) {
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        match &mut op {
            AdminOp::Committed {
                group,
                partitions,
                fetching,
                opts,
            } => {
                let result = c
                    .result
                    .map_err(AdminError::Request)
                    .and_then(|reply| body_of(&self.net, c.api_key, &reply));
                let body = match result {
                    Ok(b) => b,
                    Err(e) => return self.emit(id, Err(e)),
                };
                if !*fetching {
                    let coordinator = FindCoordinatorResponse::decode(&mut Reader::new(body))
                        .map_err(|error| decode_error(ApiKey::FIND_COORDINATOR, error))
                        .and_then(|r| coordinator_address(c.api_key, r));
                    match coordinator {
                        Ok(address) => {
                            let body =
                                RequestBody::OffsetFetch(offset_fetch_body(group, partitions));
                            let o = opts.clone();
                            self.send(now, id, Target::Address(address), body, &o);
                            *fetching = true;
                            self.ops.insert(id, op);
                        }
                        Err(e) => self.emit(id, Err(e)),
                    }
                    return;
                }
                let result = OffsetFetchResponse::decode(&mut Reader::new(body))
                    .map_err(|error| decode_error(ApiKey::OFFSET_FETCH, error))
                    .map(|r| committed_offsets(std::mem::take(partitions), r));
                return self.emit(id, result.map(AdminResponse::CommittedOffsets));
            }
            AdminOp::Single(kind) => {
                let result = c.result.map_err(AdminError::Request).and_then(|reply| {
                    let body = body_of(&self.net, c.api_key, &reply)?;
                    self.single_result(kind, &reply, body)
                });
                if let (Ok(AdminResponse::PartitionAltered(r)), Single::AlterPartition(t, p)) =
                    (&result, &*kind)
                    && r.is_ok()
                {
                    let a = r.address.clone();
                    self.metadata.patch_partition(&a, t, p.clone());
                }
                // A topic created or deleted changes what the metadata must route: refresh now
                // so that the next produce, fetch or admin call sees it.
                if matches!(
                    result,
                    Ok(AdminResponse::TopicCreated(_) | AdminResponse::TopicDeleted(_))
                ) {
                    self.refresher.request(true);
                }
                self.emit(id, result);
                return;
            }
            AdminOp::ListOffsets {
                specs,
                results,
                outstanding,
                ..
            } => {
                let idx = outstanding.remove(&c.seq).unwrap_or_default();
                let answered_by = c
                    .result
                    .as_ref()
                    .ok()
                    .and_then(|r| self.net.address(r.slot).cloned())
                    .unwrap_or_else(|| BrokerAddress::new("", 0));
                match c.result.map_err(AdminError::Request).and_then(|reply| {
                    let b = body_of(&self.net, c.api_key, &reply)?;
                    ListOffsetsResponse::decode(&mut Reader::new(b)).map_err(|error| {
                        AdminError::Request(RequestError::Decode {
                            api_key: c.api_key,
                            error,
                        })
                    })
                }) {
                    Err(e) => {
                        for (i, _, _) in idx {
                            if let Some(r) = results.get_mut(i) {
                                *r = Some(Err(e.clone()));
                            }
                        }
                    }
                    Ok(resp) => {
                        let mut refresh = false;
                        for (i, tp, pp) in idx {
                            let Some((topic, partition, spec)) = specs.get(i) else {
                                continue;
                            };
                            let same =
                                |p: &&stellflow_proto::messages::ListOffsetsPartitionResponse| {
                                    p.partition == *partition
                                };
                            let found = resp
                                .topics
                                .get(tp)
                                .filter(|t| t.topic.as_deref() == Some(topic.as_str()))
                                .and_then(|t| t.partitions.get(pp))
                                .filter(same)
                                .or_else(|| {
                                    resp.topics
                                        .iter()
                                        .filter(|t| t.topic.as_deref() == Some(topic.as_str()))
                                        .flat_map(|t| t.partitions.iter())
                                        .find(same)
                                });
                            let r = match found {
                                None => Err(AdminError::UnknownPartition {
                                    topic: topic.clone(),
                                    partition: *partition,
                                }),
                                Some(p) if p.error_code.is_ok() => Ok(OffsetInfo {
                                    offset: p.offset,
                                    timestamp: p.timestamp,
                                    leader_epoch: p.leader_epoch,
                                    no_match: false,
                                }),
                                Some(p)
                                    if p.error_code == ErrorCode::OFFSET_OUT_OF_RANGE
                                        && matches!(spec, OffsetSpec::Timestamp(_)) =>
                                {
                                    Ok(OffsetInfo {
                                        offset: p.offset,
                                        timestamp: p.timestamp,
                                        leader_epoch: p.leader_epoch,
                                        no_match: true,
                                    })
                                }
                                Some(p) => {
                                    refresh |= p.error_code.class()
                                        == stellflow_proto::ErrorClass::RefreshMetadataAndRetry;
                                    Err(AdminError::Request(RequestError::Broker {
                                        api_key: ApiKey::LIST_OFFSETS,
                                        code: p.error_code,
                                        address: answered_by.clone(),
                                    }))
                                }
                            };
                            if let Some(slot) = results.get_mut(i) {
                                *slot = Some(r);
                            }
                        }
                        if refresh {
                            self.refresher.request(false);
                        }
                    }
                }
            }
            AdminOp::Reassert {
                broker_id,
                asking,
                results,
                outstanding,
                address,
            } => {
                if *asking == Some(c.seq) {
                    *asking = None;
                    match c.result {
                        Err(e) => {
                            self.emit(id, Err(AdminError::Request(e)));
                            return;
                        }
                        Ok(reply) => {
                            let parsed = body_of(&self.net, c.api_key, &reply).and_then(|b| {
                                MetadataResponse::decode(&mut Reader::new(b)).map_err(|error| {
                                    AdminError::Request(RequestError::Decode {
                                        api_key: c.api_key,
                                        error,
                                    })
                                })
                            });
                            let resp = match parsed {
                                Ok(r) => r,
                                Err(e) => {
                                    self.emit(id, Err(e));
                                    return;
                                }
                            };
                            let Some(addr) = self.net.address(reply.slot).cloned() else {
                                self.emit(id, Err(AdminError::InvalidArgument("unknown broker")));
                                return;
                            };
                            self.apply_metadata(now, addr.clone(), &resp, c.seq);
                            *address = Some(addr.clone());
                            let todo: Vec<(String, ViewPartition)> = self
                                .metadata
                                .view(&addr)
                                .map(|v| {
                                    v.topics
                                        .iter()
                                        .flat_map(|(t, ps)| ps.iter().map(move |p| (t, p)))
                                        .filter(|(_, p)| {
                                            p.leader_id != *broker_id
                                                && !v.brokers.iter().any(|b| b.id == p.leader_id)
                                        })
                                        .map(|(t, p)| (t.clone(), p.clone()))
                                        .collect()
                                })
                                .unwrap_or_default();
                            for (topic, p) in todo {
                                let body = RequestBody::AlterPartition(AlterPartitionRequest {
                                    topic: Some(topic.as_str().into()),
                                    partition_count: -1,
                                    partition: p.partition,
                                    leader_id: *broker_id,
                                    leader_epoch: p.leader_epoch,
                                    replica_nodes: vec![*broker_id],
                                    isr_nodes: vec![*broker_id],
                                });
                                let seq = self.net.submit(
                                    now,
                                    Target::Address(addr.clone()),
                                    body,
                                    None,
                                    Origin::Admin(id),
                                    &RequestOptions::default(),
                                );
                                outstanding.insert(seq, results.len());
                                results.push(ReassertedPartition {
                                    topic,
                                    partition: p.partition,
                                    leader_epoch: p.leader_epoch,
                                    result: Err(AdminError::Request(RequestError::Closed)),
                                });
                            }
                        }
                    }
                } else if let Some(i) = outstanding.remove(&c.seq) {
                    let r = c.result.map_err(AdminError::Request).and_then(|reply| {
                        let b = body_of(&self.net, c.api_key, &reply)?;
                        let resp =
                            TopicAdminResponse::decode(&mut Reader::new(b)).map_err(|error| {
                                AdminError::Request(RequestError::Decode {
                                    api_key: c.api_key,
                                    error,
                                })
                            })?;
                        match resp.partitions.iter().find(|p| p.error_code.is_err()) {
                            Some(p) => Err(AdminError::Request(RequestError::Broker {
                                api_key: c.api_key,
                                code: p.error_code,
                                address: address
                                    .clone()
                                    .unwrap_or_else(|| BrokerAddress::new("", 0)),
                            })),
                            None => Ok(()),
                        }
                    });
                    if let Some(entry) = results.get_mut(i) {
                        if r.is_ok()
                            && let Some(a) = address.as_ref()
                        {
                            self.metadata.patch_partition(
                                a,
                                &entry.topic,
                                ViewPartition {
                                    partition: entry.partition,
                                    leader_id: *broker_id,
                                    leader_epoch: entry.leader_epoch,
                                    replicas: vec![*broker_id],
                                    isr: vec![*broker_id],
                                },
                            );
                        }
                        entry.result = r;
                    }
                }
            }
            AdminOp::DescribeTopics(_) => {}
        }
        self.ops.insert(id, op);
        self.finish_if_done(id);
    }

    fn single_result(
        &self,
        kind: &Single,
        reply: &Reply,
        body: bytes::Bytes,
    ) -> Result<AdminResponse, AdminError> {
        let address = self
            .net
            .address(reply.slot)
            .cloned()
            .unwrap_or_else(|| BrokerAddress::new("", 0));
        let broker_id = reply.broker_id;
        let api_key = match kind {
            Single::ApiVersions => ApiKey::API_VERSIONS,
            Single::DescribeCluster => ApiKey::DESCRIBE_CLUSTER,
            Single::HealthCheck => ApiKey::HEALTH_CHECK,
            Single::CreateTopic => ApiKey::CREATE_TOPIC,
            Single::DeleteTopic => ApiKey::DELETE_TOPIC,
            Single::AlterPartition(..) => ApiKey::ALTER_PARTITION,
            Single::Decommission => ApiKey::DECOMMISSION_BROKER,
        };
        let dec = |error| AdminError::Request(RequestError::Decode { api_key, error });
        let mut r = Reader::new(body);
        Ok(match kind {
            Single::ApiVersions => {
                let v = ApiVersionsResponse::decode(&mut r).map_err(dec)?;
                let chosen = crate::negotiate::Versions::negotiate(&v);
                AdminResponse::ApiVersions(BrokerApiVersions {
                    address,
                    broker_id,
                    apis: v
                        .api_versions
                        .iter()
                        .map(|a| ApiSupport {
                            api_key: a.api_key,
                            min_version: a.min_version,
                            max_version: a.max_version,
                            chosen: chosen.get(a.api_key),
                        })
                        .collect(),
                    software_name: v.broker_software_name.as_deref().map(str::to_owned),
                    software_version: v.broker_software_version.as_deref().map(str::to_owned),
                    features: v
                        .supported_features
                        .iter()
                        .flatten()
                        .map(|s| s.as_str().to_owned())
                        .collect(),
                })
            }
            Single::DescribeCluster | Single::HealthCheck => {
                let s = ClusterStatusResponse::decode(&mut r).map_err(dec)?;
                let status = ClusterStatus {
                    address,
                    broker_id,
                    error_code: s.error_code,
                    cluster_id: s.cluster_id.as_deref().map(str::to_owned),
                    broker_count: s.broker_count,
                    topic_count: s.topic_count,
                    partition_count: s.partition_count,
                };
                if matches!(kind, Single::HealthCheck) {
                    AdminResponse::Health(status)
                } else {
                    AdminResponse::Cluster(status)
                }
            }
            Single::CreateTopic | Single::DeleteTopic | Single::AlterPartition(..) => {
                let t = TopicAdminResponse::decode(&mut r).map_err(dec)?;
                let result = TopicAdminResult {
                    address,
                    broker_id,
                    topic: t.topic.as_deref().map(str::to_owned),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionOutcome {
                            partition: p.partition,
                            error_code: p.error_code,
                            leader_epoch: p.leader_epoch,
                        })
                        .collect(),
                };
                match kind {
                    Single::CreateTopic => AdminResponse::TopicCreated(result),
                    Single::DeleteTopic => AdminResponse::TopicDeleted(result),
                    _ => AdminResponse::PartitionAltered(result),
                }
            }
            Single::Decommission => {
                let d = DecommissionBrokerResponse::decode(&mut r).map_err(dec)?;
                AdminResponse::Decommissioned(DecommissionResult {
                    error_code: d.error_code,
                    message: d.message.as_deref().map(str::to_owned),
                })
            }
        })
    }

    fn finish_if_done(&mut self, id: u64) {
        let done = match self.ops.get(&id) {
            Some(AdminOp::ListOffsets {
                results,
                outstanding,
                waited_for_metadata,
                ..
            }) => {
                outstanding.is_empty()
                    && (results.iter().all(Option::is_some)
                        || !*waited_for_metadata && results.is_empty())
            }
            Some(AdminOp::Reassert {
                asking,
                outstanding,
                ..
            }) => asking.is_none() && outstanding.is_empty(),
            _ => false,
        };
        if !done {
            return;
        }
        match self.ops.remove(&id) {
            Some(AdminOp::ListOffsets { specs, results, .. }) => {
                let listed = specs
                    .into_iter()
                    .zip(results)
                    .map(|((topic, partition, _), r)| ListedOffset {
                        topic,
                        partition,
                        result: r.unwrap_or(Err(AdminError::Request(RequestError::Closed))),
                    })
                    .collect();
                self.emit(id, Ok(AdminResponse::Offsets(listed)));
            }
            Some(AdminOp::Reassert { results, .. }) => {
                if !results.is_empty() {
                    self.refresher.request(true);
                }
                self.emit(id, Ok(AdminResponse::LeadershipReasserted(results)));
            }
            _ => {}
        }
    }

    fn emit(&mut self, id: u64, result: Result<AdminResponse, AdminError>) {
        self.events.push_back(Event::Admin {
            id: RequestId(id),
            result,
        });
    }
}

fn decode_error(api_key: ApiKey, error: stellflow_proto::DecodeError) -> AdminError {
    AdminError::Request(RequestError::Decode { api_key, error })
}

/// The coordinator's host:port from a FindCoordinator answer (never its node id: the server
/// may answer a node id that is not in the metadata, PROTOCOL.md §3.7).
fn coordinator_address(
    api_key: ApiKey,
    r: FindCoordinatorResponse,
) -> Result<BrokerAddress, AdminError> {
    let host = r.host.map(|h| h.to_string()).unwrap_or_default();
    match u16::try_from(r.port) {
        Ok(port) if r.error_code == ErrorCode::NONE && !host.is_empty() && port != 0 => {
            Ok(BrokerAddress::new(host, port))
        }
        _ => {
            let code = if r.error_code == ErrorCode::NONE {
                ErrorCode::COORDINATOR_NOT_AVAILABLE
            } else {
                r.error_code
            };
            Err(AdminError::Request(RequestError::Broker {
                api_key,
                code,
                address: BrokerAddress::new("", 0),
            }))
        }
    }
}

/// OffsetFetch for `partitions`, grouped by topic in order of first appearance.
fn offset_fetch_body(group: &str, partitions: &[(String, i32)]) -> OffsetFetchRequest {
    let mut topics: Vec<OffsetFetchTopic> = Vec::new();
    for (topic, partition) in partitions {
        let p = OffsetFetchPartition {
            partition: *partition,
        };
        match topics
            .iter_mut()
            .find(|t| t.topic.as_deref() == Some(topic.as_str()))
        {
            Some(t) => t.partitions.push(p),
            None => topics.push(OffsetFetchTopic {
                topic: Some(topic.as_str().into()),
                partitions: vec![p],
            }),
        }
    }
    OffsetFetchRequest {
        group_id: Some(group.into()),
        topics,
    }
}

/// The answers matched to the request by topic and partition.
fn committed_offsets(
    partitions: Vec<(String, i32)>,
    r: OffsetFetchResponse,
) -> Vec<CommittedOffset> {
    let mut by_key: BTreeMap<(String, i32), (i64, Option<String>, ErrorCode)> = BTreeMap::new();
    for t in r.topics {
        let topic = t.topic.map(|s| s.to_string()).unwrap_or_default();
        for p in t.partitions {
            by_key.entry((topic.clone(), p.partition)).or_insert((
                p.offset,
                p.metadata.map(|m| m.to_string()),
                p.error_code,
            ));
        }
    }
    partitions
        .into_iter()
        .map(|(topic, partition)| {
            let result = match by_key.get(&(topic.clone(), partition)) {
                Some((offset, metadata, code)) if *code == ErrorCode::NONE => Ok(
                    crate::consumer::offset_model::resume_from(*offset, metadata.as_deref()),
                ),
                Some((_, _, code)) => Err(AdminError::Request(RequestError::Broker {
                    api_key: ApiKey::OFFSET_FETCH,
                    code: *code,
                    address: BrokerAddress::new("", 0),
                })),
                None => Err(AdminError::UnknownPartition {
                    topic: topic.clone(),
                    partition,
                }),
            };
            CommittedOffset {
                topic,
                partition,
                result,
            }
        })
        .collect()
}

fn leaderless(topic: &str, partition: i32, reason: LeaderlessReason) -> AdminError {
    AdminError::Leaderless {
        topic: topic.to_owned(),
        partition,
        reason,
    }
}

/// The body of a reply, or the request-level error when the broker sent the header alone.
fn body_of(net: &Net, api_key: ApiKey, reply: &Reply) -> Result<bytes::Bytes, AdminError> {
    match &reply.body {
        Some(b) => Ok(b.clone()),
        None => Err(AdminError::Request(RequestError::Broker {
            api_key,
            code: reply.header.error_code,
            address: net
                .address(reply.slot)
                .cloned()
                .unwrap_or_else(|| BrokerAddress::new("", 0)),
        })),
    }
}

fn validate(request: &AdminRequest) -> Result<(), AdminError> {
    match request {
        AdminRequest::CreateTopic {
            topic, partitions, ..
        } => {
            validate_topic_name(topic)?;
            if *partitions < 1 {
                return Err(AdminError::InvalidArgument("partitions must be at least 1"));
            }
        }
        AdminRequest::DeleteTopic { topic, .. } => validate_topic_name(topic)?,
        AdminRequest::AlterPartition {
            topic,
            partition,
            leader_epoch,
            ..
        } => {
            validate_topic_name(topic)?;
            if *partition < 0 {
                return Err(AdminError::InvalidArgument("partition must be >= 0"));
            }
            if *leader_epoch < 0 {
                return Err(AdminError::InvalidArgument("leader epoch must be >= 0"));
            }
        }
        AdminRequest::DescribeTopics { topics } => {
            for t in topics {
                validate_topic_name(t)?;
            }
        }
        AdminRequest::ListOffsets { partitions } => {
            for (t, p, _) in partitions {
                validate_topic_name(t)?;
                if *p < 0 {
                    return Err(AdminError::InvalidArgument("partition must be >= 0"));
                }
            }
        }
        _ => {}
    }
    Ok(())
}
