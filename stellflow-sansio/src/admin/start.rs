//! Starting an admin command: validate it, then send its first request (or wait for
//! metadata).

use super::{AdminOp, Single};
use crate::admin_call::{
    AdminCall, AdminId, AdminOutput, AdminRequest, Described, PartitionOverride,
};
use crate::admin_results::{
    BrokerApiVersions, ClusterStatus, CommittedOffset, DecommissionResult, ListedOffset,
    OffsetSpec, ReassertedPartition, TopicAdminResult,
};
use crate::client::Client;
use crate::error::{AdminError, RequestError};
use crate::metadata::ViewPartition;
use crate::net::Origin;
use crate::request::{RequestId, RequestOptions, Target};
use crate::topic::validate_topic_name;
use std::collections::BTreeMap;
use std::time::Instant;
use stellflow_proto::messages::{
    AlterPartitionRequest, ApiVersionsRequest, CreateTopicRequest, DecommissionBrokerRequest,
    DeleteTopicRequest, DescribeClusterRequest, FindCoordinatorRequest, HealthCheckRequest,
    MetadataRequest, RequestBody,
};

fn status_body() -> (stellflow_proto::NString, stellflow_proto::NString) {
    (None, None)
}

impl Client {
    /// Starts an admin command with per-request options (trace context, timeout). Validation
    /// errors (bad topic names, bad arguments) are returned at once; everything else arrives as
    /// one [`crate::Event::Admin`] whose outcome [`AdminOutcome::take`] turns into the `T`.
    ///
    /// [`AdminOutcome::take`]: crate::AdminOutcome::take
    pub fn admin<T: AdminOutput>(
        &mut self,
        now: Instant,
        call: AdminCall<T>,
        opts: &RequestOptions,
    ) -> Result<AdminId<T>, AdminError> {
        self.start_admin(now, call.request, opts).map(AdminId::new)
    }

    fn start_admin(
        &mut self,
        now: Instant,
        request: AdminRequest,
        opts: &RequestOptions,
    ) -> Result<RequestId, AdminError> {
        self.shared.last_now = now;
        validate(&request)?;
        if self.shared.closed {
            return Err(AdminError::Request(RequestError::Closed));
        }
        let traced = self.shared.traced_options(opts);
        let opts = traced.as_ref().unwrap_or(opts);
        let id = self.shared.net.alloc_seq();
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
                self.shared.refresher.wait_next(id);
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
            AdminRequest::AlterPartition { change, target } => {
                let PartitionOverride {
                    topic,
                    partition,
                    leader_id,
                    leader_epoch,
                    replicas,
                    isr,
                } = change;
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
                if self.shared.refresher.completed_rounds() == 0 {
                    // Nothing to route with yet: wait for the first round.
                    if let AdminOp::ListOffsets {
                        waited_for_metadata,
                        ..
                    } = &mut op
                    {
                        *waited_for_metadata = true;
                    }
                    self.shared.refresher.wait_next(id);
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
                let seq = self.shared.net.submit(
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

    /// Starts the ApiVersions call of one broker ([`AdminCall::api_versions`]).
    pub fn api_versions(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<BrokerApiVersions>, AdminError> {
        self.admin(
            now,
            AdminCall::api_versions(target),
            &RequestOptions::default(),
        )
    }

    /// Starts DescribeCluster on one broker ([`AdminCall::describe_cluster`]).
    pub fn describe_cluster(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<ClusterStatus>, AdminError> {
        self.admin(
            now,
            AdminCall::describe_cluster(target),
            &RequestOptions::default(),
        )
    }

    /// Starts HealthCheck on one broker ([`AdminCall::health_check`]).
    pub fn health_check(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<ClusterStatus>, AdminError> {
        self.admin(
            now,
            AdminCall::health_check(target),
            &RequestOptions::default(),
        )
    }

    /// Starts describing topics from a fresh metadata round ([`AdminCall::describe_topics`]);
    /// empty = all.
    pub fn describe_topics(
        &mut self,
        now: Instant,
        topics: &[&str],
    ) -> Result<AdminId<Described>, AdminError> {
        self.admin(
            now,
            AdminCall::describe_topics(topics),
            &RequestOptions::default(),
        )
    }

    /// Starts CreateTopic on one broker ([`AdminCall::create_topic`]).
    pub fn create_topic(
        &mut self,
        now: Instant,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<AdminId<TopicAdminResult>, AdminError> {
        let call = AdminCall::create_topic(topic, partitions, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts DeleteTopic on one broker ([`AdminCall::delete_topic`]).
    pub fn delete_topic(
        &mut self,
        now: Instant,
        topic: &str,
        target: Target,
    ) -> Result<AdminId<TopicAdminResult>, AdminError> {
        let call = AdminCall::delete_topic(topic, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts ListOffsets routed to the leaders ([`AdminCall::list_offsets`]).
    pub fn list_offsets(
        &mut self,
        now: Instant,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<AdminId<Vec<ListedOffset>>, AdminError> {
        let call = AdminCall::list_offsets(partitions);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts reading a group's committed positions ([`AdminCall::committed_offsets`]).
    pub fn committed_offsets(
        &mut self,
        now: Instant,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<AdminId<Vec<CommittedOffset>>, AdminError> {
        let call = AdminCall::committed_offsets(group, partitions);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts DecommissionBroker ([`AdminCall::decommission_broker`]).
    pub fn decommission_broker(
        &mut self,
        now: Instant,
        broker_id: i32,
        target: Target,
    ) -> Result<AdminId<DecommissionResult>, AdminError> {
        let call = AdminCall::decommission_broker(broker_id, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts re-asserting the leadership of a restarted broker's leaderless partitions
    /// ([`AdminCall::reassert_leadership`]).
    pub fn reassert_leadership(
        &mut self,
        now: Instant,
        broker_id: i32,
    ) -> Result<AdminId<Vec<ReassertedPartition>>, AdminError> {
        let call = AdminCall::reassert_leadership(broker_id);
        self.admin(now, call, &RequestOptions::default())
    }

    pub(super) fn send(
        &mut self,
        now: Instant,
        id: u64,
        target: Target,
        body: RequestBody,
        o: &RequestOptions,
    ) {
        self.shared
            .net
            .submit(now, target, body, None, Origin::Admin(id), o);
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
        AdminRequest::AlterPartition { change, .. } => {
            let PartitionOverride {
                topic,
                partition,
                leader_epoch,
                ..
            } = change;
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
