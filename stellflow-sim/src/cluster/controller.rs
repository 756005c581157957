//! Replication and the simulated controller: followers copying their leaders, the cluster-wide
//! metadata view, and the control calls a test makes (create topics, move leaders, set the ISR,
//! pause replication, crash and restart brokers, re-assert leadership, move the log start).
//!
//! Replication takes no simulated time: each follower copies its leader whenever the cluster
//! settles, and settling repeats until no waiting `acks = -1` Produce moves on. That stands in
//! for the server's replica fetchers, which poll their leaders continuously, so a request that
//! waits on several partitions in turn is answered in one go rather than at the next unrelated
//! event (the single-broker real server cannot show a multi-broker cluster; this follows its
//! replica-fetch loop).

use super::{ConnId, Node, SimCluster, SimError};
use crate::config::MetadataView;
use crate::log::Entry;
use crate::metadata::{ClusterView, MetadataCache, PartitionMeta, TopicName};
use std::time::Instant;

impl SimCluster {
    pub(super) fn replicate(&mut self) {
        type Plan = ((TopicName, i32), i32, i32, i64, i64, Vec<Entry>);
        let mut plans: Vec<Plan> = Vec::new();
        for (lid, leader) in &self.nodes {
            if !leader.alive {
                continue;
            }
            for (topic, partition, meta) in leader.broker.metadata().iter() {
                if meta.leader != *lid {
                    continue;
                }
                let key = (topic.clone(), partition);
                let Some(llog) = leader.broker.log_by_key(&key) else {
                    continue;
                };
                for r in &meta.replicas {
                    if r == lid {
                        continue;
                    }
                    let Some(f) = self.nodes.get(r) else { continue };
                    if !f.alive || f.replication_paused {
                        continue;
                    }
                    let follows = f
                        .broker
                        .metadata()
                        .get(topic, partition)
                        .is_some_and(|m| m.leader == *lid);
                    let Some(flog) = f.broker.log_by_key(&key).filter(|_| follows) else {
                        continue;
                    };
                    let from = flog.replica_fetch_offset(llog.log_start(), llog.log_end());
                    let entries: Vec<Entry> = llog.entries_from(from).cloned().collect();
                    plans.push((
                        key.clone(),
                        *lid,
                        *r,
                        llog.log_start(),
                        llog.log_end(),
                        entries,
                    ));
                }
            }
        }
        for (key, lid, rid, start, end, entries) in plans {
            let mut reached = None;
            if let Some(f) = self.nodes.get_mut(&rid)
                && let Some(flog) = f.broker.log_by_key_mut(&key)
            {
                reached = Some(flog.apply_replica_fetch(start, end, entries));
            }
            if let (Some(next), Some(l)) = (reached, self.nodes.get_mut(&lid))
                && let Some(llog) = l.broker.log_by_key_mut(&key)
            {
                llog.record_follower_progress(rid, next);
            }
        }
    }

    pub(super) fn cluster_view(&self) -> Option<ClusterView> {
        if self.config.metadata_view != MetadataView::ClusterWide {
            return None;
        }
        let mut cache = MetadataCache::new();
        let mut brokers = Vec::new();
        for (id, n) in &self.nodes {
            if !n.alive {
                continue;
            }
            let c = n.broker.config();
            brokers.push((*id, c.host.clone(), c.port));
            for (t, p, m) in n.broker.metadata().iter() {
                let own = m.leader == *id;
                if own || cache.get(t, p).is_none() {
                    cache.set(t.clone(), p, m.clone());
                }
            }
        }
        Some(ClusterView { cache, brokers })
    }

    fn push_assignment(&mut self, topic: &str, partition: i32, meta: &PartitionMeta) {
        let leader_addr = self.nodes.get(&meta.leader).map(|n| {
            let c = n.broker.config();
            (c.host.clone(), c.port)
        });
        let mut targets: Vec<i32> = meta.replicas.clone();
        if !targets.contains(&meta.leader) {
            targets.push(meta.leader);
        }
        for id in targets {
            if let Some(n) = self.nodes.get_mut(&id)
                && n.alive
            {
                n.broker
                    .apply_assignment(topic, partition, meta.clone(), leader_addr.clone());
            }
        }
    }

    /// Controller call: creates a topic spread over the brokers. Partition `p` is led by the
    /// `p`-th broker (round robin over ids, ascending) and replicated on the next
    /// `replication_factor - 1` brokers; every replica learns the assignment, as when the real
    /// controller pushes it.
    pub fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        replication_factor: usize,
    ) -> Result<(), SimError> {
        let ids = self.broker_ids();
        if partitions <= 0 || replication_factor == 0 || replication_factor > ids.len() {
            return Err(SimError::Invalid(format!(
                "{partitions} partitions with replication factor {replication_factor} on {} brokers",
                ids.len()
            )));
        }
        for p in 0..partitions {
            let first = usize::try_from(p).unwrap_or(0) % ids.len();
            let replicas: Vec<i32> = (0..replication_factor)
                .filter_map(|i| ids.get((first + i) % ids.len()).copied())
                .collect();
            let leader = replicas.first().copied().unwrap_or(1);
            let meta = PartitionMeta {
                leader,
                leader_epoch: 0,
                replicas: replicas.clone(),
                isr: replicas,
            };
            self.push_assignment(topic, p, &meta);
        }
        self.settle();
        Ok(())
    }

    fn controller_meta(&self, topic: &str, partition: i32) -> Result<PartitionMeta, SimError> {
        self.controller_meta_excluding(topic, partition, None)
            .ok_or_else(|| SimError::UnknownPartition(topic.to_owned(), partition))
    }

    /// The assignment with the highest epoch among live brokers' caches, preferring entries
    /// that name a real leader (a restarted broker reports leader 0).
    fn controller_meta_excluding(
        &self,
        topic: &str,
        partition: i32,
        skip: Option<i32>,
    ) -> Option<PartitionMeta> {
        let t = Some(topic.to_owned());
        let mut best: Option<PartitionMeta> = None;
        for (id, n) in &self.nodes {
            if Some(*id) == skip || !n.alive {
                continue;
            }
            if let Some(m) = n.broker.metadata().get(&t, partition)
                && (best.as_ref().is_none_or(|b| {
                    (m.leader != 0, m.leader_epoch) > (b.leader != 0, b.leader_epoch)
                }))
            {
                best = Some(m.clone());
            }
        }
        best
    }

    /// Controller call: makes `new_leader` the leader (epoch + 1) and pushes the assignment to
    /// every replica. The new leader is added to the replicas and the ISR if missing.
    pub fn move_leader(
        &mut self,
        topic: &str,
        partition: i32,
        new_leader: i32,
    ) -> Result<(), SimError> {
        if !self.nodes.contains_key(&new_leader) {
            return Err(SimError::UnknownBroker(new_leader));
        }
        let mut meta = self.controller_meta(topic, partition)?;
        meta.leader = new_leader;
        meta.leader_epoch = meta.leader_epoch.saturating_add(1);
        if !meta.replicas.contains(&new_leader) {
            meta.replicas.push(new_leader);
        }
        if !meta.isr.contains(&new_leader) {
            meta.isr.push(new_leader);
        }
        let key = (Some(topic.to_owned()), partition);
        if let Some(n) = self.nodes.get_mut(&new_leader)
            && let Some(l) = n.broker.log_by_key_mut(&key)
        {
            l.reset_follower_progress();
        }
        self.push_assignment(topic, partition, &meta);
        self.settle();
        Ok(())
    }

    /// Controller call: sets the ISR of a partition (same leader and epoch) on every replica.
    pub fn set_isr(&mut self, topic: &str, partition: i32, isr: Vec<i32>) -> Result<(), SimError> {
        let mut meta = self.controller_meta(topic, partition)?;
        meta.isr = isr;
        self.push_assignment(topic, partition, &meta);
        self.settle();
        Ok(())
    }

    /// Stops (or resumes) a broker's replica fetching: its partitions hold the leader's high
    /// watermark back while paused.
    pub fn pause_replication(&mut self, broker: i32, paused: bool) -> Result<(), SimError> {
        let n = self
            .nodes
            .get_mut(&broker)
            .ok_or(SimError::UnknownBroker(broker))?;
        n.replication_paused = paused;
        self.settle();
        Ok(())
    }

    /// Crashes a broker: its connections close, waiting requests die, it refuses connects.
    pub fn crash(&mut self, broker: i32, now: Instant) -> Result<(), SimError> {
        self.advance(now);
        let n = self
            .nodes
            .get_mut(&broker)
            .ok_or(SimError::UnknownBroker(broker))?;
        n.alive = false;
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.broker == broker)
            .map(|(id, _)| *id)
            .collect();
        for c in conns {
            self.close(c);
        }
        self.pending.retain(|p| p.broker != broker);
        self.settle();
        Ok(())
    }

    /// Restarts a crashed (or running) broker on its data, like the real server (PROTOCOL.md
    /// §8 item 20): logs and committed offsets survive; groups, producer state, the
    /// producer-id counter and leadership do not — every recovered partition reports leader 0
    /// and answers Produce/Fetch with `9` until leadership is re-asserted
    /// ([`reassert_leadership`](Self::reassert_leadership) or an AlterPartition).
    pub fn restart(&mut self, broker: i32, now: Instant) -> Result<(), SimError> {
        self.crash(broker, now)?;
        let n = self
            .nodes
            .get_mut(&broker)
            .ok_or(SimError::UnknownBroker(broker))?;
        n.broker = n.broker.restarted();
        n.alive = true;
        self.settle();
        Ok(())
    }

    /// Re-asserts leadership after a restart. For every partition of `broker` that reports
    /// leader 0: if another live broker still holds a real assignment for it (a multi-broker
    /// cluster), the controller pushes that assignment again; otherwise the documented
    /// single-broker workaround is applied (an AlterPartition with leader = this broker, the
    /// current epoch, replicas = ISR = \[broker\]) — but only when no other replica, running
    /// or crashed, holds a longer log of the partition. The server elects nothing itself and
    /// accepts any AlterPartition, so this is the operator's rule, the clean election a Kafka
    /// controller makes: a stale replica made leader would hand out offsets the old leader
    /// already acknowledged (dst seeds 758, 3228). Such a partition stays leaderless until
    /// the longer replica is back (then re-assert every live broker again).
    pub fn reassert_leadership(&mut self, broker: i32) -> Result<(), SimError> {
        let n = self
            .nodes
            .get(&broker)
            .ok_or(SimError::UnknownBroker(broker))?;
        let stale: Vec<(String, i32, PartitionMeta)> = n
            .broker
            .metadata()
            .iter()
            .filter(|(_, _, m)| m.leader == 0)
            .map(|(t, p, m)| (t.clone().unwrap_or_else(|| "null".to_owned()), p, m.clone()))
            .collect();
        for (t, p, m) in stale {
            match self
                .controller_meta_excluding(&t, p, Some(broker))
                .filter(|c| c.leader != 0)
            {
                Some(assignment) => self.push_assignment(&t, p, &assignment),
                None => {
                    let key = (Some(t.clone()), p);
                    let end = |n: &Node| n.broker.log_by_key(&key).map_or(-1, |l| l.log_end());
                    let own = self.nodes.get(&broker).map_or(-1, end);
                    let longest = self.nodes.values().map(end).max().unwrap_or(-1);
                    if own < longest {
                        continue; // a longer replica exists: wait for it
                    }
                    let meta = PartitionMeta {
                        leader: broker,
                        leader_epoch: m.leader_epoch,
                        replicas: vec![broker],
                        isr: vec![broker],
                    };
                    if let Some(n) = self.nodes.get_mut(&broker) {
                        n.broker.apply_assignment(&t, p, meta, None);
                    }
                }
            }
        }
        self.settle();
        Ok(())
    }

    /// Moves the log start of a partition forward to `offset` on every broker holding it (as
    /// retention would, but to any offset).
    pub fn advance_log_start(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), SimError> {
        let mut found = false;
        for n in self.nodes.values_mut() {
            if let Some(l) = n.broker.log_mut(topic, partition) {
                l.advance_log_start(offset);
                found = true;
            }
        }
        if !found {
            return Err(SimError::UnknownPartition(topic.to_owned(), partition));
        }
        self.settle();
        Ok(())
    }
}
