//! ListOffsets' routing to partition leaders, and the commands that wait for a metadata
//! round (DescribeTopics, an unroutable ListOffsets).

use super::complete::leaderless;
use super::{Admin, AdminOp};
use crate::admin_call::{AdminOutcome, Outcome};
use crate::admin_results::{ListedOffset, OffsetInfo, OffsetSpec, TopicDescription};
use crate::error::{AdminError, RequestError};
use crate::event::Event;
use crate::net::Origin;
use crate::refresh::Urgency;
use crate::request::{RequestId, RequestOptions, Target};
use crate::shared::Shared;
use std::collections::BTreeMap;
use std::time::Instant;
use stellflow_proto::messages::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic, RequestBody,
};

impl Admin {
    /// Sends a ListOffsets command's partitions that are neither answered nor in flight to
    /// the brokers that hold them, one request per broker; a partition the metadata does not
    /// route waits for one metadata round (once), then fails.
    pub(super) fn route_list_offsets(
        sh: &mut Shared,
        now: Instant,
        id: u64,
        op: &mut AdminOp,
        o: &RequestOptions,
    ) {
        let AdminOp::ListOffsets {
            specs,
            results,
            outstanding,
            waited_for_metadata,
        } = op
        else {
            return;
        };
        // 1. Group the partitions to ask by broker; those the metadata does not route fail
        //    when a round was already waited for.
        let (groups, wait) =
            Self::group_by_broker(sh, specs, results, outstanding, *waited_for_metadata);
        // 2. Otherwise they wait for one metadata round that starts now, as a produce does
        //    (a topic created a moment ago, or moved); only a fresh round's "unknown" is final.
        if wait {
            *waited_for_metadata = true;
            sh.refresher.wait_next(id);
        }
        // 3. One request per broker, remembering where each of its entries' answers goes.
        for (target, idx) in groups {
            let (body, positions) = list_offsets_request(specs, &idx);
            let seq = sh.net.submit(now, target, body, None, Origin::Admin(id), o);
            outstanding.insert(seq, positions);
        }
    }

    /// The partitions of `specs` to ask now, grouped by target broker: the leader if known,
    /// else any broker holding the partition (ListOffsets is not leader-checked on the
    /// server). Returns whether some partition is not routed and should wait for a metadata
    /// round; with `waited` (one was waited for already) it fails instead, in `results`.
    fn group_by_broker(
        sh: &Shared,
        specs: &[(String, i32, OffsetSpec)],
        results: &mut [Option<Result<OffsetInfo, AdminError>>],
        outstanding: &BTreeMap<u64, Vec<(usize, usize, usize)>>,
        waited: bool,
    ) -> (BTreeMap<Target, Vec<usize>>, bool) {
        let routed: Vec<usize> = outstanding.values().flatten().map(|(i, _, _)| *i).collect();
        let mut groups: BTreeMap<Target, Vec<usize>> = BTreeMap::new();
        let mut wait = false;
        for (i, (topic, partition, _)) in specs.iter().enumerate() {
            if results.get(i).is_none_or(Option::is_some) || routed.contains(&i) {
                continue;
            }
            let cluster = sh.metadata.cluster();
            let unroutable = match cluster.partition(topic, *partition) {
                Some(p) => match p.leader() {
                    Ok(leader) => {
                        groups.entry(Target::Broker(leader)).or_default().push(i);
                        continue;
                    }
                    Err(reason) => match sh.metadata.holders(topic, *partition).next() {
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
            if waited {
                if let Some(r) = results.get_mut(i) {
                    *r = Some(Err(unroutable));
                }
            } else {
                wait = true;
            }
        }
        (groups, wait)
    }

    /// A metadata round that `op` waited for has ended.
    pub(crate) fn on_metadata_round(&mut self, sh: &mut Shared, now: Instant, id: u64) {
        let Some(mut op) = self.ops.remove(&id) else {
            return;
        };
        match &mut op {
            AdminOp::DescribeTopics(names) => {
                let cluster = sh.metadata.cluster();
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
                Self::emit(sh, id, Ok(Outcome::Topics(topics, missing)));
                return;
            }
            AdminOp::ListOffsets { .. } => {
                Self::route_list_offsets(sh, now, id, &mut op, &RequestOptions::default());
            }
            _ => {}
        }
        self.ops.insert(id, op);
        self.finish_if_done(sh, id);
    }

    pub(super) fn finish_if_done(&mut self, sh: &mut Shared, id: u64) {
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
                Self::emit(sh, id, Ok(Outcome::Offsets(listed)));
            }
            Some(AdminOp::Reassert { results, .. }) => {
                if !results.is_empty() {
                    sh.refresher.request(Urgency::Now);
                }
                Self::emit(sh, id, Ok(Outcome::Reasserted(results)));
            }
            _ => {}
        }
    }

    pub(super) fn emit(sh: &mut Shared, id: u64, result: Result<Outcome, AdminError>) {
        let id = RequestId(id);
        sh.events.push_back(Event::Admin {
            id,
            result: result.map(|value| AdminOutcome::new(id, value)),
        });
    }
}

/// The ListOffsets request for the partitions `idx` of `specs` (one broker's share), and
/// where each entry goes: (index in `specs`, topic position, partition position), since the
/// broker answers in request order.
fn list_offsets_request(
    specs: &[(String, i32, OffsetSpec)],
    idx: &[usize],
) -> (RequestBody, Vec<(usize, usize, usize)>) {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    let mut positions = Vec::with_capacity(idx.len());
    for &i in idx {
        let Some((topic, partition, spec)) = specs.get(i) else {
            continue;
        };
        let entry = ListOffsetsPartition {
            partition: *partition,
            current_leader_epoch: -1,
            timestamp: spec.wire(),
            max_num_offsets: 1,
        };
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
    (body, positions)
}
