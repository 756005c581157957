//! Starting an admin command: validate it, then send its first request (or wait for
//! metadata).

use super::{Admin, AdminOp, Single};
use crate::admin_call::{AdminRequest, PartitionOverride};
use crate::error::{AdminError, RequestError};
use crate::metadata::ViewPartition;
use crate::net::Origin;
use crate::request::{RequestId, RequestOptions, Target};
use crate::shared::Shared;
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

impl Admin {
    /// Starts a command: validates it, then sends its first request (or waits for
    /// metadata). The caller runs the client's pass after a command that started.
    // Long by design: one flat arm per admin command building its request (a table).
    pub(crate) fn start(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        request: AdminRequest,
        opts: &RequestOptions,
    ) -> Result<RequestId, AdminError> {
        sh.last_now = now;
        validate(&request)?;
        if sh.closed {
            return Err(AdminError::Request(RequestError::Closed));
        }
        let traced = sh.traced_options(opts);
        let opts = traced.as_ref().unwrap_or(opts);
        let id = sh.net.alloc_seq();
        let op = match request {
            AdminRequest::ApiVersions { target } => {
                let body = RequestBody::ApiVersions(ApiVersionsRequest {
                    client_software_name: Some("stellflow-rs".into()),
                    client_software_version: Some(env!("CARGO_PKG_VERSION").into()),
                    supported_features: Vec::new(),
                });
                Self::send(sh, now, id, target, body, opts);
                AdminOp::Single(Single::ApiVersions)
            }
            AdminRequest::DescribeCluster { target } => {
                let (n, v) = status_body();
                let body = RequestBody::DescribeCluster(DescribeClusterRequest {
                    client_software_name: n,
                    client_software_version: v,
                    supported_features: Vec::new(),
                });
                Self::send(sh, now, id, target, body, opts);
                AdminOp::Single(Single::DescribeCluster)
            }
            AdminRequest::HealthCheck { target } => {
                let (n, v) = status_body();
                let body = RequestBody::HealthCheck(HealthCheckRequest {
                    client_software_name: n,
                    client_software_version: v,
                    supported_features: Vec::new(),
                });
                Self::send(sh, now, id, target, body, opts);
                AdminOp::Single(Single::HealthCheck)
            }
            AdminRequest::DescribeTopics { topics } => {
                sh.refresher.wait_next(id);
                AdminOp::DescribeTopics(topics)
            }
            AdminRequest::CreateTopic {
                topic,
                partitions,
                target,
            } => {
                let body = RequestBody::CreateTopic(CreateTopicRequest::new(&topic, partitions));
                Self::send(sh, now, id, target, body, opts);
                AdminOp::Single(Single::CreateTopic)
            }
            AdminRequest::DeleteTopic { topic, target } => {
                let body = RequestBody::DeleteTopic(DeleteTopicRequest::new(&topic));
                Self::send(sh, now, id, target, body, opts);
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
                Self::send(sh, now, id, target, body, opts);
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
                Self::send(sh, now, id, target, body, opts);
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
                if sh.refresher.completed_rounds() == 0 {
                    // Nothing to route with yet: wait for the first round.
                    if let AdminOp::ListOffsets {
                        waited_for_metadata,
                        ..
                    } = &mut op
                    {
                        *waited_for_metadata = true;
                    }
                    sh.refresher.wait_next(id);
                    self.ops.insert(id, op);
                    return Ok(RequestId(id));
                }
                Self::route_list_offsets(sh, now, id, &mut op, opts);
                op
            }
            AdminRequest::CommittedOffsets { group, partitions } => {
                let body = RequestBody::FindCoordinator(FindCoordinatorRequest {
                    key: Some(group.as_str().into()),
                    key_type: 0,
                });
                Self::send(sh, now, id, Target::Any, body, opts);
                AdminOp::Committed {
                    group,
                    partitions,
                    fetching: false,
                    opts: opts.clone(),
                }
            }
            AdminRequest::ReassertLeadership { broker_id } => {
                let seq = sh.net.submit(
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
        self.finish_if_done(sh, id);
        Ok(RequestId(id))
    }

    pub(super) fn send(
        sh: &mut Shared,
        now: Instant,
        id: u64,
        target: Target,
        body: RequestBody,
        o: &RequestOptions,
    ) {
        sh.net.submit(now, target, body, None, Origin::Admin(id), o);
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
