//! Finishing admin commands: decode each answer into its typed result, take the next step of
//! multi-request commands (committed offsets, re-asserting leadership), and emit the outcome.

use super::{Admin, AdminOp, Single};
use crate::address::BrokerAddress;
use crate::admin_call::Outcome;
use crate::admin_results::{
    ApiSupport, BrokerApiVersions, ClusterStatus, CommittedOffset, DecommissionResult, OffsetInfo,
    OffsetSpec, PartitionOutcome, ReassertedPartition, TopicAdminResult,
};
use crate::error::{AdminError, RequestError};
use crate::metadata::{LeaderlessReason, ViewPartition};
use crate::net::{Completion, Net, Origin, Reply};
use crate::refresh::Urgency;
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use std::collections::BTreeMap;
use std::time::Instant;
use stellflow_proto::messages::{
    AlterPartitionRequest, ApiVersionsResponse, ClusterStatusResponse, DecommissionBrokerResponse,
    FindCoordinatorResponse, ListOffsetsPartitionResponse, ListOffsetsResponse, MetadataResponse,
    OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic, RequestBody,
    TopicAdminResponse,
};
use stellflow_proto::{ApiKey, ErrorCode, Reader, Wire};

/// What an admin command does after one of its answers is taken in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Finished (its outcome emitted, or its error): it is not put back.
    Ended,
    /// Still waiting for answers: put back, and finished once its last answer is in.
    Waiting,
}

impl Admin {
    /// Takes one answer to admin command `id` in.
    pub(crate) fn on_completion(&mut self, sh: &mut Shared, now: Instant, id: u64, c: Completion) {
        // 1. Find the command: an answer to one already finished is dropped.
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        // 2. Take the answer in, by the command's kind. A one-request command emits its
        //    outcome; a multi-request one records the answer and may send its next requests.
        let next = match &mut op {
            AdminOp::Committed {
                group,
                partitions,
                fetching,
                opts,
            } => {
                if *fetching {
                    Self::committed_offsets_answer(sh, id, c, partitions)
                } else {
                    let next =
                        Self::committed_coordinator_answer(sh, now, id, c, group, partitions, opts);
                    *fetching = next == Next::Waiting;
                    next
                }
            }
            AdminOp::Single(kind) => Self::single_answer(sh, id, c, kind),
            AdminOp::ListOffsets {
                specs,
                results,
                outstanding,
                ..
            } => {
                Self::list_offsets_answer(sh, c, specs, results, outstanding);
                Next::Waiting
            }
            AdminOp::Reassert {
                broker_id,
                asking,
                results,
                outstanding,
                address,
            } if *asking == Some(c.seq) => {
                *asking = None;
                match Self::reassert_view_answer(sh, now, id, c) {
                    None => Next::Ended,
                    Some(addr) => {
                        *address = Some(addr.clone());
                        Self::reassert_send_moves(
                            sh,
                            now,
                            id,
                            *broker_id,
                            &addr,
                            results,
                            outstanding,
                        );
                        Next::Waiting
                    }
                }
            }
            AdminOp::Reassert {
                broker_id,
                results,
                outstanding,
                address,
                ..
            } => {
                let address = address.as_ref();
                Self::reassert_move_answer(sh, c, *broker_id, results, outstanding, address);
                Next::Waiting
            }
            AdminOp::DescribeTopics(_) => Next::Waiting,
        };
        // 3. A command still waiting goes back, and emits its outcome if that was its last
        //    answer.
        if next == Next::Waiting {
            self.ops.insert(id, op);
            self.finish_if_done(sh, id);
        }
    }

    /// The coordinator found for a committed-offsets query: sends it the OffsetFetch.
    fn committed_coordinator_answer(
        sh: &mut Shared,
        now: Instant,
        id: u64,
        c: Completion,
        group: &str,
        partitions: &[(String, i32)],
        opts: &RequestOptions,
    ) -> Next {
        let coordinator = c
            .result
            .map_err(AdminError::Request)
            .and_then(|reply| body_of(&sh.net, c.api_key, &reply))
            .and_then(|body| {
                FindCoordinatorResponse::decode(&mut Reader::new(body))
                    .map_err(|error| decode_error(ApiKey::FIND_COORDINATOR, error))
            })
            .and_then(|r| coordinator_address(c.api_key, r));
        match coordinator {
            Ok(address) => {
                let body = RequestBody::OffsetFetch(offset_fetch_body(group, partitions));
                Self::send(sh, now, id, Target::Address(address), body, opts);
                Next::Waiting
            }
            Err(e) => {
                Self::emit(sh, id, Err(e));
                Next::Ended
            }
        }
    }

    /// The coordinator's committed offsets: the query's outcome.
    fn committed_offsets_answer(
        sh: &mut Shared,
        id: u64,
        c: Completion,
        partitions: &mut Vec<(String, i32)>,
    ) -> Next {
        let result = c
            .result
            .map_err(AdminError::Request)
            .and_then(|reply| body_of(&sh.net, c.api_key, &reply))
            .and_then(|body| {
                OffsetFetchResponse::decode(&mut Reader::new(body))
                    .map_err(|error| decode_error(ApiKey::OFFSET_FETCH, error))
            })
            .map(|r| committed_offsets(std::mem::take(partitions), r));
        Self::emit(sh, id, result.map(Outcome::Committed));
        Next::Ended
    }

    /// The answer to a one-request command: its outcome, and what it changes in the
    /// metadata (a partition moved; a topic created or deleted).
    fn single_answer(sh: &mut Shared, id: u64, c: Completion, kind: &Single) -> Next {
        let result = c.result.map_err(AdminError::Request).and_then(|reply| {
            let body = body_of(&sh.net, c.api_key, &reply)?;
            Self::single_result(sh, kind, &reply, body)
        });
        if let (Ok(Outcome::TopicAdmin(r)), Single::AlterPartition(t, p)) = (&result, kind)
            && r.is_ok()
        {
            let a = r.address.clone();
            sh.metadata.patch_partition(&a, t, p.clone());
        }
        // A topic created or deleted changes what the metadata must route: refresh now
        // so that the next produce, fetch or admin call sees it.
        if result.is_ok() && matches!(kind, Single::CreateTopic | Single::DeleteTopic) {
            sh.refresher.request(Urgency::Now);
        }
        Self::emit(sh, id, result);
        Next::Ended
    }

    /// One ListOffsets answer: the result of every partition it carries, matched by topic
    /// and partition; an answer asking for fresh metadata asks the refresher.
    fn list_offsets_answer(
        sh: &mut Shared,
        c: Completion,
        specs: &[(String, i32, OffsetSpec)],
        results: &mut [Option<Result<OffsetInfo, AdminError>>],
        outstanding: &mut BTreeMap<u64, Vec<(usize, usize, usize)>>,
    ) {
        let idx = outstanding.remove(&c.seq).unwrap_or_default();
        let answered_by = c
            .result
            .as_ref()
            .ok()
            .and_then(|r| sh.net.address(r.slot).cloned())
            .unwrap_or_else(|| BrokerAddress::new("", 0));
        let decoded = c.result.map_err(AdminError::Request).and_then(|reply| {
            let b = body_of(&sh.net, c.api_key, &reply)?;
            ListOffsetsResponse::decode(&mut Reader::new(b))
                .map_err(|error| decode_error(c.api_key, error))
        });
        let resp = match decoded {
            Ok(resp) => resp,
            Err(e) => {
                for (i, _, _) in idx {
                    if let Some(r) = results.get_mut(i) {
                        *r = Some(Err(e.clone()));
                    }
                }
                return;
            }
        };
        let mut refresh = false;
        for (i, tp, pp) in idx {
            let Some(spec) = specs.get(i) else {
                continue;
            };
            let r = listed_offset(&resp, (tp, pp), spec, &answered_by);
            refresh |= matches!(
                &r,
                Err(AdminError::Request(RequestError::Broker { code, .. }))
                    if code.class() == stellflow_proto::ErrorClass::RefreshMetadataAndRetry
            );
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(r);
            }
        }
        if refresh {
            sh.refresher.request(Urgency::AfterBackoff);
        }
    }

    /// The broker's view of the cluster for a re-assertion: applied to the metadata; its
    /// address, or `None` when the command failed (its error emitted).
    fn reassert_view_answer(
        sh: &mut Shared,
        now: Instant,
        id: u64,
        c: Completion,
    ) -> Option<BrokerAddress> {
        let reply = match c.result {
            Ok(reply) => reply,
            Err(e) => {
                Self::emit(sh, id, Err(AdminError::Request(e)));
                return None;
            }
        };
        let parsed = body_of(&sh.net, c.api_key, &reply).and_then(|b| {
            MetadataResponse::decode(&mut Reader::new(b))
                .map_err(|error| decode_error(c.api_key, error))
        });
        let resp = match parsed {
            Ok(r) => r,
            Err(e) => {
                Self::emit(sh, id, Err(e));
                return None;
            }
        };
        let Some(addr) = sh.net.address(reply.slot).cloned() else {
            Self::emit(sh, id, Err(AdminError::InvalidArgument("unknown broker")));
            return None;
        };
        sh.apply_metadata(now, addr.clone(), &resp, c.seq);
        Some(addr)
    }

    /// Sends one AlterPartition per partition whose leader in `addr`'s view is neither
    /// `broker_id` nor a live broker, naming `broker_id` its leader.
    fn reassert_send_moves(
        sh: &mut Shared,
        now: Instant,
        id: u64,
        broker_id: i32,
        addr: &BrokerAddress,
        results: &mut Vec<ReassertedPartition>,
        outstanding: &mut BTreeMap<u64, usize>,
    ) {
        let todo: Vec<(String, ViewPartition)> = sh
            .metadata
            .view(addr)
            .map(|v| {
                v.topics
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t, p)))
                    .filter(|(_, p)| {
                        p.leader_id != broker_id && !v.brokers.iter().any(|b| b.id == p.leader_id)
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
                leader_id: broker_id,
                leader_epoch: p.leader_epoch,
                replica_nodes: vec![broker_id],
                isr_nodes: vec![broker_id],
            });
            let seq = sh.net.submit(
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

    /// One AlterPartition answer of a re-assertion: its partition's result, and the
    /// metadata patched when the move took.
    fn reassert_move_answer(
        sh: &mut Shared,
        c: Completion,
        broker_id: i32,
        results: &mut [ReassertedPartition],
        outstanding: &mut BTreeMap<u64, usize>,
        address: Option<&BrokerAddress>,
    ) {
        let Some(i) = outstanding.remove(&c.seq) else {
            return;
        };
        let r = c.result.map_err(AdminError::Request).and_then(|reply| {
            let b = body_of(&sh.net, c.api_key, &reply)?;
            let resp = TopicAdminResponse::decode(&mut Reader::new(b))
                .map_err(|error| decode_error(c.api_key, error))?;
            match resp.partitions.iter().find(|p| p.error_code.is_err()) {
                Some(p) => Err(AdminError::Request(RequestError::Broker {
                    api_key: c.api_key,
                    code: p.error_code,
                    address: address
                        .cloned()
                        .unwrap_or_else(|| BrokerAddress::new("", 0)),
                })),
                None => Ok(()),
            }
        });
        if let Some(entry) = results.get_mut(i) {
            if r.is_ok()
                && let Some(a) = address
            {
                sh.metadata.patch_partition(
                    a,
                    &entry.topic,
                    ViewPartition {
                        partition: entry.partition,
                        leader_id: broker_id,
                        leader_epoch: entry.leader_epoch,
                        replicas: vec![broker_id],
                        isr: vec![broker_id],
                    },
                );
            }
            entry.result = r;
        }
    }

    // Long by design: one flat arm per one-request admin answer, each decoding into its
    // result type (a table; cutting it would scatter the table).
    fn single_result(
        sh: &mut Shared,
        kind: &Single,
        reply: &Reply,
        body: bytes::Bytes,
    ) -> Result<Outcome, AdminError> {
        let address = sh
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
                Outcome::ApiVersions(Box::new(BrokerApiVersions {
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
                }))
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
                Outcome::Status(status)
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
                Outcome::TopicAdmin(result)
            }
            Single::Decommission => {
                let d = DecommissionBrokerResponse::decode(&mut r).map_err(dec)?;
                Outcome::Decommissioned(DecommissionResult {
                    error_code: d.error_code,
                    message: d.message.as_deref().map(str::to_owned),
                })
            }
        })
    }
}

/// The result for partition `spec` in a ListOffsets answer: looked up at its position
/// `(topic, partition)` in the request first, else by name.
fn listed_offset(
    resp: &ListOffsetsResponse,
    (tp, pp): (usize, usize),
    (topic, partition, spec): &(String, i32, OffsetSpec),
    answered_by: &BrokerAddress,
) -> Result<OffsetInfo, AdminError> {
    let same = |p: &&ListOffsetsPartitionResponse| p.partition == *partition;
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
    match found {
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
        Some(p) => Err(AdminError::Request(RequestError::Broker {
            api_key: ApiKey::LIST_OFFSETS,
            code: p.error_code,
            address: answered_by.clone(),
        })),
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
                    crate::offset_model::resume_from(*offset, metadata.as_deref()),
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

pub(super) fn leaderless(topic: &str, partition: i32, reason: LeaderlessReason) -> AdminError {
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
