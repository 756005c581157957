//! Faults on the world: applying a [`FaultAction`] (resets, half-open and black-holed
//! connections, partitions, crashes, leader moves, injected errors and delays, impostors, the
//! whole cluster going away), undoing it when it expires, and healing everything.

use super::*;

impl World {
    /// Applies a fault now. Timed faults end by themselves (or at [`World::heal`]).
    pub fn apply(&mut self, action: FaultAction) {
        let m = self.micros();
        self.trace.record(b'F', m, format!("{action:?}").as_bytes());
        note!(self.log, self.elapsed(), "FAULT {action:?}");
        if self.gone.is_some() {
            // Gone for good: nothing comes back, and nothing more can break.
            return;
        }
        let now = self.now;
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        match action {
            FaultAction::Reset { link } => {
                if let Some(key) = self.pick_link(link) {
                    self.reset_link(key);
                }
            }
            FaultAction::HalfOpen { link } => {
                if let Some(key) = self.pick_link(link) {
                    self.half_open(key, false);
                }
            }
            FaultAction::BlackHole { link } => {
                if let Some(key) = self.pick_link(link) {
                    self.half_open(key, true);
                }
            }
            FaultAction::Partition { broker, for_ms } => {
                if self.cluster.broker(broker).is_some() && self.partitioned.insert(broker) {
                    self.undo.push((now + ms(for_ms), Undo::Heal(broker)));
                }
            }
            FaultAction::Crash { broker, for_ms } => {
                if !self.crashed.contains(&broker) && self.cluster.crash(broker, now).is_ok() {
                    self.crashed.insert(broker);
                    self.undo.push((now + ms(for_ms), Undo::Restart(broker)));
                }
            }
            FaultAction::MoveLeader { partition, to } => self.move_leader("t0", partition, to),
            FaultAction::Errors {
                api,
                count,
                code,
                per_partition,
            } => {
                let fault = if per_partition {
                    Fault::PartitionError(ErrorCode(code))
                } else {
                    Fault::HeaderOnly(ErrorCode(code))
                };
                self.cluster.inject_fault(rule(api, count, fault));
            }
            FaultAction::DropResponses { api, count } => {
                self.cluster
                    .inject_fault(rule(api, count, Fault::DropResponse));
            }
            FaultAction::CloseConnections { api, count } => {
                self.cluster
                    .inject_fault(rule(api, count, Fault::CloseConnection));
            }
            FaultAction::Reorder {
                responses_pct,
                execution_pct,
                for_ms,
            } => {
                self.cluster.set_reordering(
                    f64::from(responses_pct.min(100)) / 100.0,
                    f64::from(execution_pct.min(100)) / 100.0,
                );
                self.undo.push((now + ms(for_ms), Undo::ReorderOff));
            }
            FaultAction::Delay {
                api,
                delay_ms,
                for_ms,
            } => {
                self.cluster.add_delay(DelayRule {
                    broker: None,
                    api_key: (api >= 0).then_some(ApiKey(api)),
                    delay: ms(delay_ms),
                });
                self.undo.push((now + ms(for_ms), Undo::DelaysOff));
            }
            FaultAction::PauseReplication { broker, for_ms } => {
                if self.cluster.pause_replication(broker, true).is_ok() {
                    self.paused.insert(broker);
                    self.undo.push((now + ms(for_ms), Undo::Resume(broker)));
                }
            }
            FaultAction::ClusterGone { silent } => self.cluster_gone(silent),
            FaultAction::Impostor {
                broker,
                garbage,
                for_ms,
            } => {
                if !self.crashed.contains(&broker) && self.cluster.crash(broker, now).is_ok() {
                    self.crashed.insert(broker);
                    self.impostors.insert(broker, garbage);
                    self.undo.push((now + ms(for_ms), Undo::Unmask(broker)));
                }
            }
        }
        self.settle();
    }

    /// Every broker goes away for the rest of the run: the timed faults end first (crashed
    /// brokers restart, impostors leave, so that the last state of the logs and leadership is
    /// consistent), then every broker is crashed (connections refused) or, when `silent`, cut
    /// off from every client (connects time out, bytes on open connections are held forever).
    fn cluster_gone(&mut self, silent: bool) {
        self.heal();
        let now = self.now;
        for id in self.cluster.broker_ids() {
            if silent {
                self.partitioned.insert(id);
            } else if self.cluster.crash(id, now).is_ok() {
                self.crashed.insert(id);
            }
        }
        self.gone = Some(self.elapsed());
    }

    /// Ends every fault now: heals partitions, restarts crashed brokers (re-asserting their
    /// leadership), resumes replication, removes fault rules, delays and reordering.
    /// Half-open connections stay dead: the clients must notice them by themselves.
    pub fn heal(&mut self) {
        let pending: Vec<Undo> = self.undo.drain(..).map(|(_, u)| u).collect();
        for u in pending {
            self.run_undo(u);
        }
        self.cluster.clear_faults();
        self.cluster.clear_delays();
        self.cluster.set_reordering(0.0, 0.0);
        let m = self.micros();
        self.trace.record(b'H', m, b"heal");
        note!(self.log, self.elapsed(), "HEAL");
        self.settle();
    }

    pub(super) fn run_undo(&mut self, u: Undo) {
        let now = self.now;
        match u {
            Undo::Heal(b) => {
                self.partitioned.remove(&b);
            }
            Undo::Restart(b) => {
                if self.crashed.remove(&b) && self.cluster.restart(b, now).is_ok() {
                    self.last_broker_restart = Some(self.elapsed());
                    // Every live broker, not only `b`: a replica that waited for a longer
                    // one (see `SimCluster::reassert_leadership`) follows it now.
                    let _ = self.cluster.reassert_leadership(b);
                    for id in self.cluster.broker_ids() {
                        if id != b && !self.crashed.contains(&id) {
                            let _ = self.cluster.reassert_leadership(id);
                        }
                    }
                }
            }
            Undo::Resume(b) => {
                if self.paused.remove(&b) {
                    let _ = self.cluster.pause_replication(b, false);
                }
            }
            Undo::ReorderOff => self.cluster.set_reordering(0.0, 0.0),
            Undo::DelaysOff => self.cluster.clear_delays(),
            Undo::ResumeClient(c) => self.resume_client_now(c),
            Undo::Reconnect(c, b) => self.reconnect_client_now(c, b),
            Undo::Unmask(b) => {
                self.unmask(b);
                self.run_undo(Undo::Restart(b));
            }
        }
    }

    /// Moves a partition's leadership like a controller would: only to a live, replicating
    /// replica whose log is as long as the leader's (an in-sync replica). Otherwise nothing.
    pub fn move_leader(&mut self, topic: &str, partition: i32, to: i32) {
        let key = Some(topic.to_owned());
        let Some(target) = self.cluster.broker(to) else {
            return;
        };
        let Some(meta) = target.metadata().get(&key, partition) else {
            return;
        };
        let leader = meta.leader;
        if leader == to
            || leader == 0
            || !self.cluster.is_alive(to)
            || !self.cluster.is_alive(leader)
            || self.paused.contains(&to)
            || self.crashed.contains(&to)
        {
            return;
        }
        let end = |id: i32| {
            self.cluster
                .broker(id)
                .and_then(|b| b.log(topic, partition))
                .map(|l| l.log_end())
        };
        if end(to).is_none() || end(to) != end(leader) {
            return;
        }
        let _ = self.cluster.move_leader(topic, partition, to);
    }

    fn pick_link(&self, selector: u32) -> Option<(usize, u64)> {
        let open: Vec<(usize, u64)> = self
            .links
            .iter()
            .filter(|(_, l)| !l.half_open)
            .map(|(k, _)| *k)
            .collect();
        let busy: Vec<(usize, u64)> = self
            .links
            .iter()
            .filter(|(_, l)| !l.half_open && l.up.pending() + l.down.pending() > 0)
            .map(|(k, _)| *k)
            .collect();
        let pool = if busy.is_empty() { open } else { busy };
        if pool.is_empty() {
            return None;
        }
        pool.get(selector as usize % pool.len()).copied()
    }

    /// Resets a connection: bytes in flight are lost, both ends learn it at once.
    pub(super) fn reset_link(&mut self, key: (usize, u64)) {
        let Some(link) = self.links.remove(&key) else {
            return;
        };
        self.stats.resets += 1;
        if let Some(sim) = link.sim {
            self.by_sim.remove(&sim);
            self.cluster.disconnect(sim);
        }
        let now = self.now;
        let m = self.micros();
        self.trace.record(b'R', m, &key.1.to_le_bytes());
        note!(
            self.log,
            self.elapsed(),
            "client {} conn {}: reset",
            key.0,
            key.1
        );
        if let Some(slot) = self.clients.get_mut(key.0) {
            slot.client.handle_disconnected(
                ConnId(key.1),
                now,
                DisconnectReason::Io(IoFailure::new(
                    std::io::ErrorKind::ConnectionReset,
                    "connection reset by peer",
                )),
            );
        }
    }

    /// The broker side of a connection vanishes without a FIN. The client learns it only when
    /// it writes (the broker host answers with an RST one round trip later) — or, for a
    /// `black_hole`, never.
    fn half_open(&mut self, key: (usize, u64), black_hole: bool) {
        let Some(link) = self.links.get_mut(&key) else {
            return;
        };
        self.stats.half_opens += 1;
        link.half_open = true;
        link.black_hole = black_hole;
        link.up.clear();
        link.down.clear();
        if let Some(sim) = link.sim.take() {
            self.by_sim.remove(&sim);
            self.cluster.disconnect(sim);
        }
        let m = self.micros();
        self.trace.record(b'O', m, &key.1.to_le_bytes());
        let how = if black_hole {
            "black hole"
        } else {
            "half-open"
        };
        note!(
            self.log,
            self.elapsed(),
            "client {} conn {}: {how}",
            key.0,
            key.1
        );
    }
}

fn rule(api: i16, count: u32, fault: Fault) -> FaultRule {
    FaultRule {
        broker: None,
        api_key: (api >= 0).then_some(ApiKey(api)),
        fault,
        probability: 1.0,
        remaining: Some(count.max(1)),
    }
}
