//! The metadata cache: each broker's own view, and the cluster view merged from all of them.
//!
//! A real Stellflow broker reports only what it holds (PROTOCOL.md §3.2), so the client keeps
//! one [`BrokerView`] per broker address it asked and merges them (DESIGN §3.10):
//!
//! * brokers: the union of every view's broker list;
//! * partitions: the report with the highest leader epoch wins; on equal epochs the broker that
//!   another report names as leader is the authority on whether it leads (a broker restarted on
//!   its data reports leader 0 although its followers still name it); then a report whose leader
//!   is a known broker wins;
//! * the `__empty__` placeholder and topics answered with an error are skipped;
//! * a leader missing from the merged broker list makes the partition leaderless, with a
//!   [`LeaderlessReason`] that says why.

use crate::address::BrokerAddress;
use std::collections::BTreeMap;
use std::fmt;
use stellflow_proto::messages::MetadataResponse;

/// The name of the placeholder topic a broker with no topics reports.
pub(crate) const EMPTY_PLACEHOLDER: &str = "__empty__";

/// A broker as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Broker id.
    pub id: i32,
    /// Advertised endpoint.
    pub address: BrokerAddress,
    /// Rack (always null on today's server).
    pub rack: Option<String>,
}

/// Why a partition has no usable leader.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderlessReason {
    /// The broker holding the partition reports leader 0, which is no broker: it restarted on
    /// its data and lost leadership (PROTOCOL.md §8 item 20). Produce and Fetch answer 9 until
    /// leadership is re-asserted: `reassert_leadership` (an admin call) for that broker.
    RecoveredAfterRestart {
        /// The broker that holds the partition and reports leader 0, when known.
        broker: Option<i32>,
    },
    /// The reported leader is not in any broker list (moved to a broker the client has not
    /// heard of, or named by an AlterPartition). A metadata refresh may resolve it.
    LeaderNotInBrokers {
        /// The reported leader id.
        leader: i32,
    },
    /// The broker reported no leader (a negative id).
    NoLeader,
}

impl fmt::Display for LeaderlessReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaderlessReason::RecoveredAfterRestart { broker: Some(b) } => write!(
                f,
                "broker {b} restarted on its data and reports leader 0; re-assert its leadership: `stellflow topics reassert-leaders --broker {b}` (the admin call reassert_leadership, an AlterPartition with its own id and epoch per partition)"
            ),
            LeaderlessReason::RecoveredAfterRestart { broker: None } => f.write_str(
                "a broker restarted on its data and reports leader 0; re-assert its leadership: `stellflow topics reassert-leaders` (the admin call reassert_leadership, an AlterPartition with its own id and epoch per partition)",
            ),
            LeaderlessReason::LeaderNotInBrokers { leader } => {
                write!(f, "leader {leader} is not a known broker")
            }
            LeaderlessReason::NoLeader => f.write_str("no leader reported"),
        }
    }
}

/// One partition in the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition id.
    pub partition: i32,
    /// The leader as reported (may be no broker: see [`PartitionInfo::leaderless`]).
    pub leader_id: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Replica ids.
    pub replicas: Vec<i32>,
    /// In-sync replica ids.
    pub isr: Vec<i32>,
    /// `Some` when the leader is not a usable broker, with the reason.
    pub leaderless: Option<LeaderlessReason>,
    /// The broker whose report was chosen, when known.
    pub reported_by: Option<i32>,
}

impl PartitionInfo {
    /// The leader broker id, or why there is none.
    pub fn leader(&self) -> Result<i32, &LeaderlessReason> {
        match &self.leaderless {
            None => Ok(self.leader_id),
            Some(r) => Err(r),
        }
    }
}

/// One topic in the merged view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicInfo {
    /// Partitions by id.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The merged cluster view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterMetadata {
    /// Cluster id (hard-coded by today's server).
    pub cluster_id: Option<String>,
    /// Brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

impl ClusterMetadata {
    /// A partition, if known.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        self.topics.get(topic)?.partitions.get(&partition)
    }

    /// Every leaderless partition with its reason.
    pub fn leaderless(&self) -> impl Iterator<Item = (&str, &PartitionInfo)> {
        self.topics.iter().flat_map(|(t, ti)| {
            ti.partitions
                .values()
                .filter(|p| p.leaderless.is_some())
                .map(move |p| (t.as_str(), p))
        })
    }
}

/// A partition as one broker reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ViewPartition {
    /// Partition id.
    pub partition: i32,
    /// Reported leader.
    pub leader_id: i32,
    /// Reported epoch.
    pub leader_epoch: i32,
    /// Replicas.
    pub replicas: Vec<i32>,
    /// ISR.
    pub isr: Vec<i32>,
}

/// What one broker answered to Metadata, in plain types.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BrokerView {
    /// Cluster id.
    pub cluster_id: Option<String>,
    /// The id of the answering broker, when it could be identified.
    pub reporter: Option<i32>,
    /// Its broker list.
    pub brokers: Vec<BrokerInfo>,
    /// Its topics (placeholder and error entries already removed).
    pub topics: BTreeMap<String, Vec<ViewPartition>>,
    /// Topics it answered with an error code (for a named request, usually 10: it holds none).
    pub missing: Vec<String>,
}

impl BrokerView {
    /// Converts a Metadata response received from `address`. Brokers with an unusable host or
    /// port are dropped. The reporter is the listed broker whose address is `address`, or the
    /// only listed broker.
    pub(crate) fn from_response(address: &BrokerAddress, resp: &MetadataResponse) -> Self {
        let brokers: Vec<BrokerInfo> = resp
            .brokers
            .iter()
            .filter_map(|b| {
                let host = b.host.as_deref()?;
                let port = u16::try_from(b.port).ok().filter(|p| *p != 0)?;
                if host.is_empty() {
                    return None;
                }
                Some(BrokerInfo {
                    id: b.broker_id,
                    address: BrokerAddress::new(host, port),
                    rack: b.rack.as_deref().map(str::to_owned),
                })
            })
            .collect();
        let reporter = brokers
            .iter()
            .find(|b| &b.address == address)
            .map(|b| b.id)
            .or(match brokers.as_slice() {
                [only] => Some(only.id),
                _ => None,
            });
        let mut topics = BTreeMap::new();
        let mut missing = Vec::new();
        for t in &resp.topics {
            let Some(name) = t.topic.as_deref() else {
                continue;
            };
            if name == EMPTY_PLACEHOLDER && t.is_internal {
                continue;
            }
            if t.error_code.is_err() {
                missing.push(name.to_owned());
                continue;
            }
            let parts = t
                .partitions
                .iter()
                .map(|p| ViewPartition {
                    partition: p.partition,
                    leader_id: p.leader_id,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.clone(),
                    isr: p.isr_nodes.clone(),
                })
                .collect();
            topics.insert(name.to_owned(), parts);
        }
        BrokerView {
            cluster_id: resp.cluster_id.as_deref().map(str::to_owned),
            reporter,
            brokers,
            topics,
            missing,
        }
    }

    /// Whether this view holds `(topic, partition)`.
    pub(crate) fn holds(&self, topic: &str, partition: i32) -> bool {
        self.topics
            .get(topic)
            .is_some_and(|ps| ps.iter().any(|p| p.partition == partition))
    }
}

/// Every broker's latest view, and their merge.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetadataCache {
    views: BTreeMap<BrokerAddress, BrokerView>,
    merged: ClusterMetadata,
    generation: u64,
}

impl MetadataCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The merged view.
    pub(crate) fn cluster(&self) -> &ClusterMetadata {
        &self.merged
    }

    /// Bumped every time the merged view is recomputed.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The latest view reported by `address`.
    pub(crate) fn view(&self, address: &BrokerAddress) -> Option<&BrokerView> {
        self.views.get(address)
    }

    /// Replaces the view of `address` and recomputes the merge.
    pub(crate) fn apply(&mut self, address: BrokerAddress, view: BrokerView) {
        self.views.insert(address, view);
        self.remerge();
    }

    /// Updates one partition after an authoritative change (a successful AlterPartition) in
    /// the view of `address`, without waiting for the next refresh.
    pub(crate) fn patch_partition(
        &mut self,
        address: &BrokerAddress,
        topic: &str,
        part: ViewPartition,
    ) {
        if let Some(v) = self.views.get_mut(address) {
            let ps = v.topics.entry(topic.to_owned()).or_default();
            match ps.iter_mut().find(|p| p.partition == part.partition) {
                Some(p) => *p = part,
                None => ps.push(part),
            }
            self.remerge();
        }
    }

    /// Addresses of brokers whose views hold `(topic, partition)`.
    pub(crate) fn holders(
        &self,
        topic: &str,
        partition: i32,
    ) -> impl Iterator<Item = &BrokerAddress> {
        self.views
            .iter()
            .filter(move |(_, v)| v.holds(topic, partition))
            .map(|(a, _)| a)
    }

    fn remerge(&mut self) {
        self.generation += 1;
        let mut merged = ClusterMetadata::default();
        for v in self.views.values() {
            if merged.cluster_id.is_none() {
                merged.cluster_id.clone_from(&v.cluster_id);
            }
            for b in &v.brokers {
                let self_entry = v.reporter == Some(b.id);
                match merged.brokers.get(&b.id) {
                    Some(_) if !self_entry => {}
                    _ => {
                        merged.brokers.insert(b.id, b.clone());
                    }
                }
            }
        }
        // (reporter, partition) candidates, chosen per partition.
        let mut chosen: BTreeMap<(&str, i32), (Option<i32>, &ViewPartition)> = BTreeMap::new();
        for v in self.views.values() {
            for (topic, parts) in &v.topics {
                for p in parts {
                    let key = (topic.as_str(), p.partition);
                    let replace = match chosen.get(&key) {
                        None => true,
                        Some((cur_rep, cur)) => {
                            prefer_new(&merged, (*cur_rep, cur), (v.reporter, p))
                        }
                    };
                    if replace {
                        chosen.insert(key, (v.reporter, p));
                    }
                }
            }
        }
        for ((topic, _), (reporter, p)) in chosen {
            let leaderless = if merged.brokers.contains_key(&p.leader_id) {
                None
            } else if p.leader_id < 0 {
                Some(LeaderlessReason::NoLeader)
            } else if p.leader_id == 0 {
                Some(LeaderlessReason::RecoveredAfterRestart { broker: reporter })
            } else {
                Some(LeaderlessReason::LeaderNotInBrokers {
                    leader: p.leader_id,
                })
            };
            merged
                .topics
                .entry(topic.to_owned())
                .or_default()
                .partitions
                .insert(
                    p.partition,
                    PartitionInfo {
                        partition: p.partition,
                        leader_id: p.leader_id,
                        leader_epoch: p.leader_epoch,
                        replicas: p.replicas.clone(),
                        isr: p.isr.clone(),
                        leaderless,
                        reported_by: reporter,
                    },
                );
        }
        self.merged = merged;
    }
}

/// The merge rule for two reports of one partition (see the module docs).
fn prefer_new(
    merged: &ClusterMetadata,
    (cur_rep, cur): (Option<i32>, &ViewPartition),
    (new_rep, new): (Option<i32>, &ViewPartition),
) -> bool {
    if new.leader_epoch != cur.leader_epoch {
        return new.leader_epoch > cur.leader_epoch;
    }
    if new_rep.is_some() && Some(cur.leader_id) == new_rep && cur_rep != new_rep {
        return true;
    }
    if cur_rep.is_some() && Some(new.leader_id) == cur_rep {
        return false;
    }
    !merged.brokers.contains_key(&cur.leader_id) && merged.brokers.contains_key(&new.leader_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stellflow_proto::ErrorCode;
    use stellflow_proto::messages::{MetadataBroker, MetadataPartition, MetadataTopic};

    fn addr(id: i32) -> BrokerAddress {
        BrokerAddress::new(format!("b{id}"), 9092)
    }

    fn broker(id: i32) -> MetadataBroker {
        MetadataBroker {
            broker_id: id,
            host: Some(format!("b{id}").into()),
            port: 9092,
            rack: None,
        }
    }

    fn part(p: i32, leader: i32, epoch: i32, replicas: &[i32]) -> MetadataPartition {
        MetadataPartition {
            error_code: ErrorCode::NONE,
            partition: p,
            leader_id: leader,
            leader_epoch: epoch,
            replica_nodes: replicas.to_vec(),
            isr_nodes: replicas.to_vec(),
            offline_replica_nodes: vec![],
        }
    }

    fn topic(name: &str, parts: Vec<MetadataPartition>) -> MetadataTopic {
        MetadataTopic {
            error_code: ErrorCode::NONE,
            topic: Some(name.into()),
            is_internal: false,
            partitions: parts,
            topic_authorized_operations: 0,
        }
    }

    fn resp(brokers: &[i32], topics: Vec<MetadataTopic>) -> MetadataResponse {
        MetadataResponse {
            cluster_id: Some("c".into()),
            controller_id: 0,
            brokers: brokers.iter().map(|b| broker(*b)).collect(),
            topics,
            cluster_authorized_operations: 0,
        }
    }

    fn apply(c: &mut MetadataCache, from: i32, r: MetadataResponse) {
        let a = addr(from);
        let v = BrokerView::from_response(&a, &r);
        c.apply(a, v);
    }

    #[test]
    fn merges_broker_local_views() {
        let mut c = MetadataCache::new();
        apply(
            &mut c,
            1,
            resp(&[1], vec![topic("t", vec![part(0, 1, 0, &[1])])]),
        );
        apply(
            &mut c,
            2,
            resp(&[2], vec![topic("t", vec![part(1, 2, 0, &[2])])]),
        );
        apply(
            &mut c,
            3,
            resp(&[3, 1], vec![topic("u", vec![part(0, 3, 4, &[3, 1])])]),
        );
        let m = c.cluster();
        assert_eq!(m.brokers.len(), 3);
        assert_eq!(m.cluster_id.as_deref(), Some("c"));
        assert_eq!(m.partition("t", 0).unwrap().leader(), Ok(1));
        assert_eq!(m.partition("t", 1).unwrap().leader(), Ok(2));
        assert_eq!(m.partition("u", 0).unwrap().leader_epoch, 4);
        assert_eq!(c.view(&addr(3)).unwrap().reporter, Some(3));
        assert_eq!(c.holders("t", 1).collect::<Vec<_>>(), vec![&addr(2)]);
    }

    #[test]
    fn skips_the_placeholder_and_error_topics() {
        let mut c = MetadataCache::new();
        let mut empty = topic(EMPTY_PLACEHOLDER, vec![part(0, 0, 0, &[0])]);
        empty.is_internal = true;
        let mut unknown = topic("gone", vec![]);
        unknown.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
        apply(&mut c, 1, resp(&[1], vec![empty, unknown]));
        assert!(c.cluster().topics.is_empty());
        assert_eq!(c.view(&addr(1)).unwrap().missing, vec!["gone".to_owned()]);
    }

    #[test]
    fn higher_epoch_wins_a_leader_move() {
        let mut c = MetadataCache::new();
        apply(
            &mut c,
            1,
            resp(&[1, 2], vec![topic("t", vec![part(0, 1, 3, &[1, 2])])]),
        );
        apply(
            &mut c,
            2,
            resp(&[1, 2], vec![topic("t", vec![part(0, 2, 4, &[1, 2])])]),
        );
        assert_eq!(c.cluster().partition("t", 0).unwrap().leader(), Ok(2));
        // Order of arrival does not matter.
        let mut d = MetadataCache::new();
        apply(
            &mut d,
            2,
            resp(&[1, 2], vec![topic("t", vec![part(0, 2, 4, &[1, 2])])]),
        );
        apply(
            &mut d,
            1,
            resp(&[1, 2], vec![topic("t", vec![part(0, 1, 3, &[1, 2])])]),
        );
        assert_eq!(d.cluster().partition("t", 0).unwrap().leader(), Ok(2));
    }

    #[test]
    fn restarted_broker_is_the_authority_and_the_partition_is_leaderless() {
        let mut c = MetadataCache::new();
        // Follower 2 still names 1 as leader; 1 restarted and reports leader 0 at the same epoch.
        apply(
            &mut c,
            2,
            resp(&[1, 2], vec![topic("t", vec![part(0, 1, 5, &[1, 2])])]),
        );
        apply(
            &mut c,
            1,
            resp(&[1], vec![topic("t", vec![part(0, 0, 5, &[0])])]),
        );
        let p = c.cluster().partition("t", 0).unwrap();
        assert_eq!(
            p.leader(),
            Err(&LeaderlessReason::RecoveredAfterRestart { broker: Some(1) })
        );
        assert!(
            p.leaderless
                .as_ref()
                .unwrap()
                .to_string()
                .contains("re-assert")
        );
        assert_eq!(c.cluster().leaderless().count(), 1);
    }

    #[test]
    fn unknown_leader_is_leaderless() {
        let mut c = MetadataCache::new();
        apply(
            &mut c,
            1,
            resp(
                &[1],
                vec![topic("t", vec![part(0, 9, 1, &[9]), part(1, -1, 0, &[])])],
            ),
        );
        let m = c.cluster();
        assert_eq!(
            m.partition("t", 0).unwrap().leader(),
            Err(&LeaderlessReason::LeaderNotInBrokers { leader: 9 })
        );
        assert_eq!(
            m.partition("t", 1).unwrap().leader(),
            Err(&LeaderlessReason::NoLeader)
        );
    }

    #[test]
    fn a_new_answer_replaces_the_old_view() {
        let mut c = MetadataCache::new();
        apply(
            &mut c,
            1,
            resp(&[1], vec![topic("t", vec![part(0, 1, 0, &[1])])]),
        );
        apply(&mut c, 1, resp(&[1], vec![]));
        assert!(c.cluster().topics.is_empty());
        let g = c.generation();
        c.patch_partition(
            &addr(1),
            "t",
            ViewPartition {
                partition: 0,
                leader_id: 1,
                leader_epoch: 2,
                replicas: vec![1],
                isr: vec![1],
            },
        );
        assert_eq!(c.generation(), g + 1);
        assert_eq!(c.cluster().partition("t", 0).unwrap().leader_epoch, 2);
    }

    #[test]
    fn unusable_broker_entries_are_dropped() {
        let mut r = resp(&[1], vec![]);
        r.brokers.push(MetadataBroker {
            broker_id: 5,
            host: None,
            port: 1,
            rack: None,
        });
        r.brokers.push(MetadataBroker {
            broker_id: 6,
            host: Some("h".into()),
            port: -1,
            rack: None,
        });
        let v = BrokerView::from_response(&addr(1), &r);
        assert_eq!(v.brokers.len(), 1);
    }
}
