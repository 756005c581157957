//! The group invariants, checked from outside the clients: what each member delivered (and
//! when), the assignment each reports, and the committed positions the coordinator's offset
//! store holds (read from the simulated broker, not from any client).
//!
//! A member's *tenure* on a partition is its run of deliveries of that partition: it opens
//! at the first record the member delivers from the partition and ends when the member
//! reports the partition revoked or assigned again (or stops). Per delivery of record `r` of
//! partition `p` by member `m`:
//!
//! * `group-in-order`: within one tenure, positions strictly increase (so a record comes
//!   twice only across tenures);
//! * `group-redelivery`: a record delivered before (by anyone) may come again only in a new
//!   tenure, and only at or after the position the offset store held when that tenure
//!   opened — the old owner's last commit: a handover redelivers at most what was delivered
//!   after it;
//! * `group-one-deliverer`: no other member delivered `p` since `m`'s tenure opened, unless
//!   the two saw different memberships: `m`'s view now and the other's when it delivered
//!   (the last `ConsumerEvent::GroupMembers` each reported) differ, or, for a member that
//!   reported none, one of the two may hold a stale view (it was paused or cut off from the coordinator, until a
//!   session and two heartbeat intervals after that ended: see [`GroupWatch::stale`]).
//!
//! Per step, per partition, with `C` the committed position in the store:
//!
//! * `group-no-loss`: every record before `C` was delivered by some member (`C` never moves
//!   past a record nobody delivered);
//! * `group-commit-monotonic`: `C` never moves backwards. This is stricter than the plain
//!   no-loss invariant (a commit that goes back is no loss when the records after it are
//!   delivered again, which `group-no-loss` and `group-delivers-all` check); it stands for
//!   the redelivery bound instead. The members here commit only positions they reached, in
//!   order, and a partition's next owner starts at the last commit, so `C` goes back only
//!   when a member commits a partition it no longer owns — a zombie commit (the server
//!   checks no membership on OffsetCommit) — and the owner after it would then redeliver
//!   more than the records delivered after the old owner's last commit.
//!
//! Once membership has been stable for the convergence bound ([`GroupWatch::bound`]: the
//! session timeout plus [`CONVERGENCE_HEARTBEATS`] heartbeat intervals after the last join,
//! close, crash, pause, isolation or network fault, its start or its end):
//!
//! * `group-converged`: every partition is in the assignment of exactly one running member.
//!
//! At the end (healed and settled), `group-delivers-all`: every record in the log below the
//! high watermark was delivered by some member (the run also checks every acknowledged
//! produce among them).

use crate::pipeline::Pos;
use crate::workload::TOPIC;
use crate::world::{ClientId, World};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use stellflow_proto::record::blob_records;

/// Heartbeat intervals the convergence bound allows beyond the session timeout: one for the
/// last refresh a departed member made before it went, one for the others to read the
/// registration that changed, one for the handover (release, commit, start).
pub const CONVERGENCE_HEARTBEATS: u32 = 3;

/// The metadata prefix under which the core commits a position inside a blob (the record
/// index); the harness reads the store on its own, so it states the documented form here.
const INDEX_PREFIX: &str = "stellflow-index:";

/// The group's coordinator: FindCoordinator goes to the bootstrap broker, which names itself.
pub const COORDINATOR: i32 = 1;

#[derive(Debug, Clone, Copy)]
struct Tenure {
    opened: Duration,
    committed_at_open: Option<Pos>,
    last: Pos,
}

#[derive(Debug, Default)]
struct PartWatch {
    leader: i32,
    delivered: BTreeSet<Pos>,
    frontier: Pos,
    /// Records per blob, by offset (decoded once).
    blob_len: BTreeMap<i64, u32>,
    tenures: BTreeMap<usize, Tenure>,
    /// Per member: when it last delivered this partition, and the view it had then.
    last_delivery: BTreeMap<usize, (Duration, Option<u64>)>,
    committed: Option<Pos>,
}

/// What the watch counted over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Records delivered, repeats included.
    pub deliveries: u64,
    /// Deliveries of a record some member had delivered before (across a handover).
    pub redeliveries: u64,
    /// Tenures opened (a member starting to deliver a partition).
    pub tenures: u64,
    /// Deliveries that overlapped another member's tenure while the two saw different
    /// memberships (exempt from `group-one-deliverer`).
    pub stale_overlaps: u64,
    /// Stable windows in which convergence was checked.
    pub stable_checks: u64,
    /// The longest time from a membership change to the first sample with exactly one
    /// owner per partition, in milliseconds.
    pub max_convergence_ms: u64,
}

/// The group invariants of one world (see the module docs).
#[derive(Debug)]
pub struct GroupWatch {
    group: String,
    session: Duration,
    heartbeat: Duration,
    parts: Vec<PartWatch>,
    last_change: Duration,
    converged_since_change: bool,
    stale_until: BTreeMap<usize, Duration>,
    /// Each member's last reported membership view (`ConsumerEvent::GroupMembers`).
    views: BTreeMap<usize, u64>,
    /// Every distinct view reported, numbered.
    view_ids: BTreeMap<Vec<String>, u64>,
    counts: GroupCounts,
}

fn position(offset: i64, metadata: Option<&str>) -> Option<Pos> {
    if offset < 0 {
        return None;
    }
    let index = metadata
        .and_then(|m| m.strip_prefix(INDEX_PREFIX))
        .and_then(|i| i.parse::<u32>().ok())
        .unwrap_or(0);
    Some((offset, index))
}

impl GroupWatch {
    /// Watches `group` over the `partitions` of the topic in `world` (their leaders must be
    /// known), for members with `session` timeout and `heartbeat` interval.
    pub fn new(
        world: &World,
        group: &str,
        partitions: i32,
        session: Duration,
        heartbeat: Duration,
    ) -> Self {
        let key = Some(TOPIC.to_owned());
        let cluster = world.cluster();
        let parts = (0..partitions)
            .map(|p| {
                let leader = cluster
                    .broker_ids()
                    .into_iter()
                    .find(|id| {
                        cluster
                            .broker(*id)
                            .and_then(|b| b.metadata().get(&key, p))
                            .is_some_and(|m| m.leader == *id)
                    })
                    .unwrap_or(COORDINATOR);
                PartWatch {
                    leader,
                    ..PartWatch::default()
                }
            })
            .collect();
        GroupWatch {
            group: group.to_owned(),
            session,
            heartbeat,
            parts,
            last_change: Duration::ZERO,
            converged_since_change: false,
            stale_until: BTreeMap::new(),
            views: BTreeMap::new(),
            view_ids: BTreeMap::new(),
            counts: GroupCounts::default(),
        }
    }

    /// The convergence bound: the session timeout plus [`CONVERGENCE_HEARTBEATS`]
    /// heartbeat intervals.
    pub fn bound(&self) -> Duration {
        self.session + self.heartbeat * CONVERGENCE_HEARTBEATS
    }

    /// What was counted so far.
    pub fn counts(&self) -> GroupCounts {
        self.counts
    }

    /// Membership changed at `at` (a join, close, crash, fault start or end).
    pub fn change(&mut self, at: Duration) {
        self.last_change = self.last_change.max(at);
        self.converged_since_change = false;
    }

    /// The world healed at `at`: every fault ended then (timed ones planned to end later
    /// included), so the membership counts as changed at `at` and not after.
    pub fn healed(&mut self, at: Duration) {
        self.last_change = at;
        self.converged_since_change = false;
    }

    /// When the membership last changed.
    pub fn last_change(&self) -> Duration {
        self.last_change
    }

    /// Member `m` may hold a stale view of the membership from now until `until` plus a
    /// session and two heartbeat intervals (it was paused, or cut off from the coordinator,
    /// until `until`): the others may have taken its partitions meanwhile.
    pub fn stale(&mut self, m: usize, until: Duration) {
        let end = until + self.session + self.heartbeat * 2;
        let e = self.stale_until.entry(m).or_insert(end);
        *e = (*e).max(end);
    }

    /// Member `m` reported the membership it sees (`ConsumerEvent::GroupMembers`).
    pub fn view(&mut self, m: usize, members: Vec<String>) {
        let next = self.view_ids.len() as u64;
        let id = *self.view_ids.entry(members).or_insert(next);
        self.views.insert(m, id);
    }

    /// Whether member `a` now and member `b` when it delivered with view `b_view` may have
    /// seen different memberships: when both reported a view, whether the views differ;
    /// else whether either may hold a stale one ([`GroupWatch::stale`]).
    fn views_differ(&self, a: usize, b: usize, b_view: Option<u64>, at: Duration) -> bool {
        match (self.views.get(&a), b_view) {
            (Some(x), Some(y)) => *x != y,
            _ => self.is_stale(a, at) || self.is_stale(b, at),
        }
    }

    fn is_stale(&self, m: usize, at: Duration) -> bool {
        self.stale_until.get(&m).is_some_and(|u| at <= *u)
    }

    /// Member `m` reported partitions revoked or assigned: its tenures on them end.
    pub fn reassigned(&mut self, m: usize, partitions: impl IntoIterator<Item = i32>) {
        for p in partitions {
            if let Some(w) = usize::try_from(p).ok().and_then(|p| self.parts.get_mut(p)) {
                w.tenures.remove(&m);
            }
        }
    }

    /// Member `m` stopped (closed or crashed): its tenures end.
    pub fn stopped(&mut self, m: usize) {
        for w in &mut self.parts {
            w.tenures.remove(&m);
        }
    }

    fn committed(&self, world: &World, p: i32) -> Option<Pos> {
        let broker = world.cluster().broker(COORDINATOR)?;
        let c = broker.offsets().fetch(Some(&self.group), Some(TOPIC), p);
        position(c.offset, c.metadata.as_deref())
    }

    /// Member `m` delivered record `pos` of partition `p` at `at`.
    pub fn delivered(&mut self, world: &mut World, m: usize, p: i32, pos: Pos) {
        let at = world.elapsed();
        let committed = self.committed(world, p);
        let Some(w) = usize::try_from(p).ok().and_then(|i| self.parts.get_mut(i)) else {
            world.report(
                "group-in-order",
                format!("member {m}: record of unknown t0-{p}"),
            );
            return;
        };
        self.counts.deliveries += 1;
        let tenure = match w.tenures.get(&m) {
            Some(t) => {
                if t.last >= pos {
                    world.report(
                        "group-in-order",
                        format!(
                            "member {m}: t0-{p} {pos:?} delivered after {:?} in the tenure opened at {:?}",
                            t.last, t.opened
                        ),
                    );
                }
                *t
            }
            None => {
                self.counts.tenures += 1;
                Tenure {
                    opened: at,
                    committed_at_open: committed,
                    last: pos,
                }
            }
        };
        if w.delivered.contains(&pos) {
            self.counts.redeliveries += 1;
            if tenure.committed_at_open.is_some_and(|c| pos < c) {
                world.report(
                    "group-redelivery",
                    format!(
                        "member {m}: t0-{p} {pos:?} delivered again below the committed position {:?} its tenure (opened at {:?}) started from",
                        tenure.committed_at_open, tenure.opened
                    ),
                );
            }
        }
        let others: Vec<(usize, Duration, Option<u64>)> = w
            .last_delivery
            .iter()
            .filter(|(o, (t, _))| **o != m && *t >= tenure.opened)
            .map(|(o, (t, v))| (*o, *t, *v))
            .collect();
        w.delivered.insert(pos);
        w.tenures.insert(
            m,
            Tenure {
                last: pos,
                ..tenure
            },
        );
        let view = self.views.get(&m).copied();
        w.last_delivery.insert(m, (at, view));
        for (o, t, o_view) in others {
            if self.views_differ(m, o, o_view, at) {
                self.counts.stale_overlaps += 1;
            } else {
                world.report(
                    "group-one-deliverer",
                    format!(
                        "t0-{p}: member {m} delivers {pos:?} in its tenure opened at {:?}, and member {o} delivered t0-{p} at {t:?} (both live, with the same view of the membership: {:?})",
                        tenure.opened,
                        self.view_ids.iter().find(|(_, id)| Some(**id) == view).map(|(v, _)| v)
                    ),
                );
                break;
            }
        }
    }

    /// Moves each partition's frontier (the first record in its log nobody delivered) on.
    fn advance_frontiers(&mut self, world: &World) {
        for (p, w) in self.parts.iter_mut().enumerate() {
            let Some(log) = world
                .cluster()
                .broker(w.leader)
                .and_then(|b| b.log(TOPIC, p as i32))
            else {
                continue;
            };
            if w.frontier.0 < log.log_start() {
                w.frontier = (log.log_start(), 0);
            }
            while w.delivered.contains(&w.frontier) {
                let (offset, index) = w.frontier;
                let len = match w.blob_len.get(&offset) {
                    Some(n) => *n,
                    None => match log.entry(offset) {
                        Some(e) => {
                            let n = blob_records(e.blob.clone()).count() as u32;
                            w.blob_len.insert(offset, n);
                            n
                        }
                        None => break,
                    },
                };
                w.frontier = if index + 1 < len {
                    (offset, index + 1)
                } else {
                    (offset + 1, 0)
                };
            }
        }
    }

    /// The per-step checks: committed positions against what was delivered.
    pub fn check_commits(&mut self, world: &mut World) {
        self.advance_frontiers(world);
        for p in 0..self.parts.len() {
            let c = self.committed(world, p as i32);
            let w = &mut self.parts[p];
            if let (Some(c), Some(prev)) = (c, w.committed)
                && c < prev
            {
                world.report(
                    "group-commit-monotonic",
                    format!("t0-{p}: the committed position moved back from {prev:?} to {c:?}"),
                );
            }
            if let Some(c) = c
                && c > w.frontier
            {
                world.report(
                    "group-no-loss",
                    format!(
                        "t0-{p}: committed position {c:?} is past {:?}, which no member delivered",
                        w.frontier
                    ),
                );
            }
            if c.is_some() {
                w.committed = c;
            }
        }
    }

    /// Whether membership has been stable for the convergence bound at `at`.
    pub fn settled(&self, at: Duration) -> bool {
        at >= self.last_change + self.bound()
    }

    /// The convergence check at a sample: `owners[p]` are the running members whose
    /// assignment holds partition `p`. Reports `group-converged` when the membership has
    /// been stable for the bound and some partition has no owner or several.
    pub fn check_owners(&mut self, world: &mut World, owners: &[Vec<usize>]) {
        let at = world.elapsed();
        let one_each = owners.iter().all(|o| o.len() == 1);
        if one_each && !self.converged_since_change && at >= self.last_change {
            self.converged_since_change = true;
            let took = at.saturating_sub(self.last_change).as_millis() as u64;
            self.counts.max_convergence_ms = self.counts.max_convergence_ms.max(took);
        }
        if !self.settled(at) {
            return;
        }
        self.counts.stable_checks += 1;
        if !one_each {
            let bad: Vec<String> = owners
                .iter()
                .enumerate()
                .filter(|(_, o)| o.len() != 1)
                .map(|(p, o)| format!("t0-{p} owned by {o:?}"))
                .collect();
            world.report(
                "group-converged",
                format!(
                    "membership stable since {:?} (bound {:?}), yet {}",
                    self.last_change,
                    self.bound(),
                    bad.join(", ")
                ),
            );
        }
    }

    /// The first partition with a record below its high watermark that no member delivered:
    /// the partition, that record, and the high watermark.
    fn first_undelivered(&mut self, world: &World) -> Option<(usize, Pos, i64)> {
        self.advance_frontiers(world);
        self.parts.iter().enumerate().find_map(|(p, w)| {
            let hw = world
                .cluster()
                .broker(w.leader)
                .and_then(|b| b.high_watermark(&(Some(TOPIC.to_owned()), p as i32)))
                .unwrap_or(0);
            (w.frontier.0 < hw).then_some((p, w.frontier, hw))
        })
    }

    /// The end check: every record below the high watermark was delivered by some member.
    pub fn check_all_delivered(&mut self, world: &mut World) {
        if let Some((p, record, hw)) = self.first_undelivered(world) {
            world.report(
                "group-delivers-all",
                format!(
                    "t0-{p}: record {record:?} (below the high watermark {hw}) was never delivered"
                ),
            );
        }
    }

    /// Whether every record below each partition's high watermark was delivered.
    pub fn all_delivered(&mut self, world: &World) -> bool {
        self.first_undelivered(world).is_none()
    }

    /// Whether `m` holds a stale view at `at` (see [`GroupWatch::stale`]).
    pub fn stale_at(&self, m: usize, at: Duration) -> bool {
        self.is_stale(m, at)
    }

    /// Which member ids own what, for a report.
    pub fn owners_of(
        world: &mut World,
        members: &[(usize, ClientId)],
        partitions: i32,
    ) -> Vec<Vec<usize>> {
        let mut owners = vec![Vec::new(); partitions.max(0) as usize];
        for (m, id) in members {
            for tp in world.client(*id).assignment() {
                if &*tp.topic == TOPIC
                    && let Some(o) = usize::try_from(tp.partition)
                        .ok()
                        .and_then(|p| owners.get_mut(p))
                {
                    o.push(*m);
                }
            }
        }
        owners
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::NetConfig;
    use stellflow_sansio::{
        ClientConfig, ConsumerEvent, Event, Position, ProducerRecord, TopicPartition,
    };
    use stellflow_sim::ClusterConfig;

    const S: Duration = Duration::from_secs(1);

    /// A world with `t0` of two partitions, `records` single-record blobs in t0-0, and a
    /// client of group [`GROUP`] to commit with.
    fn world(records: usize) -> (World, ClientId) {
        let mut w = World::new(3, ClusterConfig::with_brokers(1), NetConfig::default());
        w.cluster_mut().create_topic(TOPIC, 2, 1).unwrap();
        let mut c = ClientConfig::new("broker-1:9092").unwrap();
        c.consumer.group_id = Some(GROUP.into());
        c.producer.linger = Duration::ZERO;
        let id = w.add_client(c).unwrap();
        for n in 0..records {
            let now = w.now();
            let v = format!("r{n}");
            let mut r = ProducerRecord::new(TOPIC, v.as_bytes());
            r.partition = Some(0);
            w.client(id).produce(now, &r).unwrap();
            let mut done = false;
            w.run_until(5 * S, |w| {
                while let Some(e) = w.poll_event(id) {
                    done |= matches!(e, Event::Produced { result: Ok(_), .. });
                }
                done
            });
            assert!(done, "record {n} produced");
        }
        (w, id)
    }

    const GROUP: &str = "g";

    fn commit(w: &mut World, id: ClientId, p: i32, pos: Pos) {
        let now = w.now();
        let tp = TopicPartition::new(TOPIC, p);
        w.client(id)
            .commit_positions(now, vec![(tp, Position::new(pos.0, pos.1))])
            .unwrap();
        let mut done = false;
        w.run_until(5 * S, |w| {
            while let Some(e) = w.poll_event(id) {
                done |= matches!(
                    e,
                    Event::Consumer(ConsumerEvent::CommitCompleted { result: Ok(_), .. })
                );
            }
            done
        });
        assert!(done, "commit of t0-{p} at {pos:?}");
    }

    fn watch(w: &World) -> GroupWatch {
        GroupWatch::new(w, GROUP, 2, 3 * S, S / 2)
    }

    fn invariants(w: &World) -> Vec<&'static str> {
        w.violations().iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn two_members_delivering_one_partition_at_once_is_reported_unless_one_is_stale() {
        let (mut w, _) = world(4);
        let mut g = watch(&w);
        g.delivered(&mut w, 0, 0, (0, 0));
        g.delivered(&mut w, 1, 0, (1, 0));
        assert_eq!(invariants(&w), ["group-one-deliverer"]);

        let (mut w, _) = world(4);
        let mut g = watch(&w);
        g.stale(1, w.elapsed());
        g.delivered(&mut w, 0, 0, (0, 0));
        g.delivered(&mut w, 1, 0, (1, 0));
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        assert_eq!(g.counts().stale_overlaps, 1);
    }

    #[test]
    fn a_repeat_within_one_tenure_is_reported() {
        let (mut w, _) = world(2);
        let mut g = watch(&w);
        g.delivered(&mut w, 0, 0, (0, 0));
        g.delivered(&mut w, 0, 0, (0, 0));
        assert_eq!(invariants(&w), ["group-in-order"]);
    }

    #[test]
    fn a_handover_may_redeliver_only_from_the_last_commit() {
        let (mut w, id) = world(3);
        let mut g = watch(&w);
        for o in 0..3 {
            g.delivered(&mut w, 0, 0, (o, 0));
        }
        commit(&mut w, id, 0, (1, 0));
        g.check_commits(&mut w);
        g.reassigned(0, [0]);
        w.run_for(S);
        // Member 1 takes over from the commit: (1, 0) and (2, 0) again is the handover's due.
        g.delivered(&mut w, 1, 0, (1, 0));
        g.delivered(&mut w, 1, 0, (2, 0));
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        assert_eq!(g.counts().redeliveries, 2);
        // Member 2 starts below the commit: (0, 0) was committed, so that is one too many.
        g.reassigned(1, [0]);
        w.run_for(S);
        g.delivered(&mut w, 2, 0, (0, 0));
        assert_eq!(invariants(&w), ["group-redelivery"]);
    }

    #[test]
    fn a_commit_past_an_undelivered_record_is_loss() {
        let (mut w, id) = world(3);
        let mut g = watch(&w);
        g.delivered(&mut w, 0, 0, (0, 0));
        g.delivered(&mut w, 0, 0, (2, 0));
        commit(&mut w, id, 0, (1, 0));
        g.check_commits(&mut w);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        commit(&mut w, id, 0, (3, 0));
        g.check_commits(&mut w);
        assert_eq!(invariants(&w), ["group-no-loss"]);
    }

    #[test]
    fn a_commit_moving_back_is_reported() {
        let (mut w, id) = world(3);
        let mut g = watch(&w);
        for o in 0..3 {
            g.delivered(&mut w, 0, 0, (o, 0));
        }
        commit(&mut w, id, 0, (2, 0));
        g.check_commits(&mut w);
        commit(&mut w, id, 0, (1, 0));
        g.check_commits(&mut w);
        assert_eq!(invariants(&w), ["group-commit-monotonic"]);
    }

    #[test]
    fn convergence_is_required_only_once_the_bound_passed() {
        let (mut w, _) = world(0);
        let mut g = watch(&w);
        g.change(w.elapsed());
        let shared = [vec![0, 1], vec![]];
        w.run_for(g.bound() - S / 10);
        g.check_owners(&mut w, &shared);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        w.run_for(S / 5);
        g.check_owners(&mut w, &[vec![0], vec![1]]);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        g.check_owners(&mut w, &shared);
        assert_eq!(invariants(&w), ["group-converged"]);
    }

    #[test]
    fn every_record_below_the_high_watermark_must_be_delivered() {
        let (mut w, _) = world(2);
        let mut g = watch(&w);
        g.delivered(&mut w, 0, 0, (0, 0));
        assert!(!g.all_delivered(&w));
        g.check_all_delivered(&mut w);
        assert_eq!(invariants(&w), ["group-delivers-all"]);
        g.delivered(&mut w, 0, 0, (1, 0));
        assert!(g.all_delivered(&w));
    }
}
