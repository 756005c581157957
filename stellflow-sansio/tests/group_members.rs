//! Several group members on one simulated broker, in virtual time: they converge on disjoint
//! partitions, hand a partition over only after its old owner committed and released it,
//! take over from a member that died within the session timeout and a few heartbeat
//! intervals, drop what a member paused past its session held without committing it, release
//! at once on close, and run the rebalance listener before the revocation.

use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, OffsetFetchPartition,
    OffsetFetchRequest, OffsetFetchTopic, ProducePartitionData, ProduceRequest, ProduceResponse,
    ProduceTopicData, Request,
};
use stellflow_proto::record::{BatchBuilder, BatchParams, Envelope};
use stellflow_proto::wire::Wire;
use stellflow_sansio::{
    Client, ClientConfig, CommitKind, ConnId, ConsumerEvent, DisconnectReason, Event, OffsetReset,
    Output, Position, REGISTRY_TOPIC, TopicPartition,
};
use stellflow_sim::{ClusterConfig, SimCluster};

const SESSION: Duration = Duration::from_secs(6);
const HEARTBEAT: Duration = Duration::from_secs(1);

/// One member: a client, its connections, what it did and when.
struct Member {
    client: Client,
    to_sim: HashMap<ConnId, stellflow_sim::ConnId>,
    alive: bool,
    paused: bool,
    /// Bytes the broker sent while the member was paused.
    inbox: Vec<(ConnId, Bytes)>,
    /// (sequence, instant, event) — the sequence orders events across members.
    events: Vec<(u64, Instant, ConsumerEvent)>,
    /// (sequence, instant, partition, offset) of every delivered record.
    records: Vec<(u64, Instant, TopicPartition, i64)>,
    /// The `Timeout` the member's last drain ended with.
    deadline: Option<Instant>,
}

struct Fleet {
    sim: SimCluster,
    now: Instant,
    members: Vec<Member>,
    to_client: HashMap<stellflow_sim::ConnId, (usize, ConnId)>,
    seq: u64,
    seed: u64,
}

fn config() -> ClientConfig {
    let mut c = ClientConfig::new("broker-1:9092").unwrap();
    c.request_timeout = Duration::from_secs(5);
    c.consumer.group_id = Some("g".into());
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.session_timeout = SESSION;
    c.consumer.heartbeat_interval = HEARTBEAT;
    c.consumer.auto_commit_interval = Duration::from_secs(2);
    c
}

impl Fleet {
    fn new(partitions: i32) -> Fleet {
        let now = Instant::now();
        let mut sim = SimCluster::new(ClusterConfig::with_brokers(1), now, 7);
        sim.create_topic("t", partitions, 1).unwrap();
        Fleet {
            sim,
            now,
            members: Vec::new(),
            to_client: HashMap::new(),
            seq: 0,
            seed: 100,
        }
    }

    /// Starts a member subscribed to `t` (with a listener when `listening`); its index.
    fn join(&mut self, listening: bool, tweak: impl FnOnce(&mut ClientConfig)) -> usize {
        let mut cfg = config();
        tweak(&mut cfg);
        self.seed += 1;
        let mut client = Client::new(cfg, self.now, self.seed).unwrap();
        if listening {
            client.subscribe_with_listener(self.now, &["t"]).unwrap();
        } else {
            client.subscribe(self.now, &["t"]).unwrap();
        }
        self.members.push(Member {
            client,
            to_sim: HashMap::new(),
            alive: true,
            paused: false,
            inbox: Vec::new(),
            events: Vec::new(),
            records: Vec::new(),
            deadline: None,
        });
        self.step();
        self.members.len() - 1
    }

    fn produce(&mut self, partition: i32, values: usize) {
        let mut b = BatchBuilder::with_capacity(BatchParams::default(), Envelope::V1, 1024);
        for i in 0..values {
            b.append(1, Some(format!("k{i}").as_bytes()), Some(b"v"))
                .unwrap();
        }
        let req = ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![ProduceTopicData {
                topic: Some("t".into()),
                partitions: vec![ProducePartitionData {
                    partition,
                    records: Some(b.finish().unwrap()),
                }],
            }],
        };
        let conn = self.sim.connect(1, self.now).unwrap();
        let h = RequestHeader::new(ProduceRequest::API_KEY, 1, Some("test"));
        let mut buf = BytesMut::new();
        encode_request(&mut buf, &h, &req);
        self.sim.handle_input(conn, self.now, &mut buf);
        let mut out = BytesMut::new();
        self.sim.take_replies(conn, &mut out);
        self.sim.disconnect(conn);
        let frame = FrameDecoder::new().decode(&mut out).unwrap().unwrap();
        let (_, body) = split_response(frame).unwrap();
        let r = ProduceResponse::from_bytes(body.unwrap()).unwrap();
        assert_eq!(r.responses[0].partitions[0].error_code.0, 0);
    }

    /// One request on a connection of its own, as another client would send it; the body of
    /// the answer.
    fn raw<R: Request>(&mut self, req: &R) -> R::Response {
        let conn = self.sim.connect(1, self.now).unwrap();
        let h = RequestHeader::new(R::API_KEY, 1, Some("test"));
        let mut buf = BytesMut::new();
        encode_request(&mut buf, &h, req);
        self.sim.handle_input(conn, self.now, &mut buf);
        let mut out = BytesMut::new();
        self.sim.take_replies(conn, &mut out);
        self.sim.disconnect(conn);
        let frame = FrameDecoder::new().decode(&mut out).unwrap().unwrap();
        let (_, body) = split_response(frame).unwrap();
        R::Response::from_bytes(body.unwrap()).unwrap()
    }

    /// The registry slots of group `g` that are not empty: (slot, counter, metadata).
    fn registry(&mut self) -> Vec<(i32, i64, String)> {
        let r = self.raw(&OffsetFetchRequest {
            group_id: Some("g".into()),
            topics: vec![OffsetFetchTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions: (0..64)
                    .map(|partition| OffsetFetchPartition { partition })
                    .collect(),
            }],
        });
        r.topics[0]
            .partitions
            .iter()
            .map(|p| {
                let md = p.metadata.as_deref().unwrap_or("").to_owned();
                (p.partition, p.offset, md)
            })
            .filter(|(_, off, md)| *off != -1 || !md.is_empty())
            .collect()
    }

    /// Writes one registry slot of group `g` as another member would.
    fn write_slot(&mut self, slot: i32, counter: i64, metadata: &str) {
        self.raw(&OffsetCommitRequest {
            group_id: Some("g".into()),
            topics: vec![OffsetCommitTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions: vec![OffsetCommitPartition {
                    partition: slot,
                    offset: counter,
                    metadata: Some(metadata.into()),
                }],
            }],
        });
    }

    fn running(&self, i: usize) -> bool {
        self.members[i].alive && !self.members[i].paused
    }

    fn step(&mut self) {
        let now = self.now;
        for _ in 0..100_000 {
            let mut progress = false;
            for i in 0..self.members.len() {
                if !self.running(i) {
                    continue;
                }
                let m = &mut self.members[i];
                let mut buf = BytesMut::new();
                m.deadline = loop {
                    buf.clear();
                    let output = m.client.poll_output(now, &mut buf);
                    progress |= !matches!(output, Output::Timeout(_));
                    match output {
                        Output::Connect(cr) => {
                            match self.sim.connect_addr(&cr.address.to_string(), now) {
                                Ok(sc) => {
                                    m.to_sim.insert(cr.conn, sc);
                                    self.to_client.insert(sc, (i, cr.conn));
                                    m.client.handle_connected(cr.conn, now);
                                }
                                Err(e) => m.client.handle_disconnected(
                                    cr.conn,
                                    now,
                                    DisconnectReason::ConnectFailed(
                                        stellflow_sansio::IoFailure::new(
                                            std::io::ErrorKind::ConnectionRefused,
                                            e.to_string(),
                                        ),
                                    ),
                                ),
                            }
                        }
                        Output::Close(c) => {
                            if let Some(sc) = m.to_sim.remove(&c.conn) {
                                self.to_client.remove(&sc);
                                self.sim.disconnect(sc);
                            }
                        }
                        Output::Transmit(c) => {
                            if let Some(sc) = m.to_sim.get(&c) {
                                self.sim.handle_input(*sc, now, &mut buf);
                            }
                        }
                        Output::TransmitBytes(c, bytes) => {
                            if let Some(sc) = m.to_sim.get(&c) {
                                self.sim
                                    .handle_input(*sc, now, &mut BytesMut::from(&bytes[..]));
                            }
                        }
                        Output::Event(Event::Consumer(c)) => {
                            self.seq += 1;
                            m.events.push((self.seq, now, c));
                        }
                        Output::Event(_) => {}
                        Output::Timeout(t) => break t,
                    }
                };
                while let Some(r) = m.client.poll_record() {
                    progress = true;
                    self.seq += 1;
                    let tp = TopicPartition::new(&r.topic, r.partition);
                    m.records.push((self.seq, now, tp, r.offset));
                }
            }
            while let Some((sc, bytes)) = self.sim.poll_transmit() {
                progress = true;
                if let Some((i, c)) = self.to_client.get(&sc).copied() {
                    let m = &mut self.members[i];
                    if m.paused {
                        m.inbox.push((c, bytes));
                    } else if m.alive {
                        let mut b = BytesMut::from(&bytes[..]);
                        m.client.handle_input(c, now, &mut b);
                    }
                }
            }
            while let Some(sc) = self.sim.poll_closed() {
                progress = true;
                self.sim.disconnect(sc);
                if let Some((i, c)) = self.to_client.remove(&sc) {
                    let m = &mut self.members[i];
                    m.to_sim.remove(&c);
                    if m.alive && !m.paused {
                        m.client
                            .handle_disconnected(c, now, DisconnectReason::PeerClosed);
                    }
                }
            }
            if !progress {
                return;
            }
        }
        panic!("fleet did not settle");
    }

    fn tick(&mut self, max: Duration) {
        // A command since the last drain may have moved a member's deadline.
        self.step();
        let limit = self.now + max;
        let mut next = self.sim.poll_timeout();
        for i in 0..self.members.len() {
            if self.running(i) {
                let t = self.members[i].deadline;
                next = match (next, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        self.now = next.unwrap_or(limit).clamp(self.now, limit);
        // Never spin at one instant: a deadline at `now` was handled by the pass before.
        if next.is_some_and(|t| t <= self.now) && self.now < limit {
            self.now += Duration::from_millis(1).min(limit - self.now);
        }
        self.sim.handle_timeout(self.now);
        for i in 0..self.members.len() {
            if self.running(i) {
                self.members[i].client.handle_timeout(self.now);
            }
        }
        self.step();
    }

    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick(end - self.now);
        }
    }

    fn run_until(&mut self, max: Duration, mut pred: impl FnMut(&Fleet) -> bool) -> bool {
        let end = self.now + max;
        loop {
            self.step();
            if pred(self) {
                return true;
            }
            if self.now >= end {
                return false;
            }
            self.tick(end - self.now);
        }
    }

    fn kill(&mut self, i: usize) {
        self.members[i].alive = false;
        for (_, sc) in self.members[i].to_sim.drain() {
            self.to_client.remove(&sc);
            self.sim.disconnect(sc);
        }
    }

    fn pause(&mut self, i: usize) {
        self.members[i].paused = true;
    }

    /// Resumes a paused member: it sees the time first, then what the broker sent meanwhile.
    fn resume(&mut self, i: usize) {
        let now = self.now;
        let m = &mut self.members[i];
        m.paused = false;
        m.client.handle_timeout(now);
        for (c, bytes) in std::mem::take(&mut m.inbox) {
            let mut b = BytesMut::from(&bytes[..]);
            m.client.handle_input(c, now, &mut b);
        }
        self.step();
    }

    fn assignment(&self, i: usize) -> BTreeSet<TopicPartition> {
        self.members[i].client.assignment().into_iter().collect()
    }

    /// Every running member's assignment is disjoint from the others' and together they
    /// cover `n` partitions with `per` each.
    fn settled(&self, n: i32, per: &[usize]) -> bool {
        let mut all = BTreeSet::new();
        let mut sizes = Vec::new();
        for i in 0..self.members.len() {
            if !self.running(i) {
                continue;
            }
            let a = self.assignment(i);
            sizes.push(a.len());
            for tp in a {
                if !all.insert(tp) {
                    return false;
                }
            }
        }
        sizes.sort_unstable();
        let mut want = per.to_vec();
        want.sort_unstable();
        all.len() == n as usize && sizes == want
    }

    /// Delivered records per (partition, offset), across members.
    fn deliveries(&self) -> BTreeMap<(TopicPartition, i64), Vec<usize>> {
        let mut out: BTreeMap<(TopicPartition, i64), Vec<usize>> = BTreeMap::new();
        for (i, m) in self.members.iter().enumerate() {
            for (_, _, tp, off) in &m.records {
                out.entry((tp.clone(), *off)).or_default().push(i);
            }
        }
        out
    }

    /// Two running members never hold the same partition at once.
    fn assert_disjoint(&self) {
        let mut seen: BTreeMap<TopicPartition, usize> = BTreeMap::new();
        for i in 0..self.members.len() {
            if !self.running(i) {
                continue;
            }
            for tp in self.assignment(i) {
                if let Some(j) = seen.insert(tp.clone(), i) {
                    panic!("{tp} held by members {j} and {i} at once");
                }
            }
        }
    }

    /// Runs for `d`, checking after every step that no two running members hold a partition.
    fn advance_disjoint(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick(end - self.now);
            self.assert_disjoint();
        }
    }

    /// The offset the group's offset store holds for `tp` (−1 when nothing is committed), as
    /// another client would read it.
    fn stored_offset(&mut self, tp: &TopicPartition) -> i64 {
        let r = self.raw(&OffsetFetchRequest {
            group_id: Some("g".into()),
            topics: vec![OffsetFetchTopic {
                topic: Some((&*tp.topic).into()),
                partitions: vec![OffsetFetchPartition {
                    partition: tp.partition,
                }],
            }],
        });
        r.topics[0].partitions[0].offset
    }

    fn first_event(&self, i: usize, f: impl Fn(&ConsumerEvent) -> bool) -> Option<(u64, Instant)> {
        self.members[i]
            .events
            .iter()
            .find(|(_, _, e)| f(e))
            .map(|(s, t, _)| (*s, *t))
    }
}

fn fill(f: &mut Fleet, partitions: i32, blobs: usize) -> usize {
    for p in 0..partitions {
        for _ in 0..blobs {
            f.produce(p, 3);
        }
    }
    partitions as usize * blobs
}

/// Four partitions of 5 blobs each; member `a` (auto-commit off, with a rebalance listener
/// when `listening`) delivers all of them alone, then member `b` joins. `(fleet, a, b)`.
fn second_member_joins_one_that_commits_itself(listening: bool) -> (Fleet, usize, usize) {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(listening, |c| c.consumer.enable_auto_commit = false);
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    let b = f.join(false, |_| {});
    (f, a, b)
}

/// Two members settle on two of four partitions each, then 5 blobs per partition are
/// produced and delivered for a second. `(fleet, a, b)`.
fn two_members_share_four_partitions_and_deliver() -> (Fleet, usize, usize) {
    let mut f = Fleet::new(4);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(1));
    (f, a, b)
}

#[test]
fn three_members_converge_on_disjoint_partitions_and_deliver_each_blob_once() {
    let mut f = Fleet::new(6);
    let blobs = fill(&mut f, 6, 20);
    for _ in 0..3 {
        f.join(false, |_| {});
    }
    let ok = f.run_until(Duration::from_secs(30), |f| {
        f.settled(6, &[2, 2, 2]) && f.deliveries().len() == blobs
    });
    assert!(
        ok,
        "no convergence: {:?}",
        (0..3).map(|i| f.assignment(i)).collect::<Vec<_>>()
    );
    f.advance_disjoint(Duration::from_secs(20));
    // Every blob (3 records each) once: no blob delivered by two members, none twice.
    let d = f.deliveries();
    assert_eq!(d.len(), blobs);
    for ((tp, off), who) in &d {
        assert_eq!(who.len(), 3, "{tp}@{off} delivered by {who:?}");
        assert!(who.iter().all(|w| *w == who[0]), "{tp}@{off} by {who:?}");
    }
    // Every member saw the same three members.
    for i in 0..3 {
        let last = f.members[i]
            .events
            .iter()
            .rev()
            .find_map(|(_, _, e)| match e {
                ConsumerEvent::GroupMembers(m) => Some(m.clone()),
                _ => None,
            })
            .expect("a membership event");
        assert_eq!(last.len(), 3, "member {i} sees {last:?}");
    }
}

#[test]
fn a_handover_commits_and_releases_before_the_new_owner_starts() {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 10);
    let a = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    assert_eq!(f.assignment(a).len(), 4);
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.settled(4, &[2, 2])));
    f.advance_disjoint(Duration::from_secs(5));
    let moved = f.assignment(b);
    // A revoked, committed, released; only then did B start them.
    let (revoked_at, _) = f
        .first_event(a, |e| matches!(e, ConsumerEvent::PartitionsRevoked(p) if p.iter().all(|tp| moved.contains(tp))))
        .expect("a revoked the moved partitions");
    let (committed_at, _) = f
        .first_event(a, |e| {
            matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Revocation, result: Ok(p), .. }
                if p.iter().any(|(tp, _)| moved.contains(tp)))
        })
        .expect("a committed them first");
    let (assigned_at, _) = f
        .first_event(b, |e| matches!(e, ConsumerEvent::PartitionsAssigned(p) if p.iter().any(|tp| moved.contains(tp))))
        .expect("b was assigned them");
    assert!(committed_at < revoked_at && revoked_at < assigned_at);
    // B starts where A stopped: nothing delivered twice, nothing lost.
    for tp in &moved {
        assert_eq!(f.members[b].client.committed(tp), Some(Position::blob(10)));
    }
    let d = f.deliveries();
    assert_eq!(d.len(), blobs);
    assert!(
        d.values()
            .all(|w| w.len() == 3 && w.iter().all(|x| *x == a))
    );
}

#[test]
fn a_dead_members_partitions_are_taken_over_within_the_session_and_two_heartbeats() {
    let mut f = Fleet::new(6);
    for _ in 0..3 {
        f.join(false, |_| {});
    }
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(6, &[2, 2, 2])));
    fill(&mut f, 6, 5);
    f.advance(Duration::from_secs(3));
    let dead = f.assignment(2);
    let killed_at = f.now;
    f.kill(2);
    let ok = f.run_until(Duration::from_secs(30), |f| f.settled(6, &[3, 3]));
    assert!(ok, "no takeover");
    let took = f.now - killed_at;
    assert!(took <= SESSION + 2 * HEARTBEAT, "takeover after {took:?}");
    assert!(took >= SESSION - 2 * HEARTBEAT, "too early: {took:?}");
    // Records produced after the takeover reach the new owners; none lost.
    fill(&mut f, 6, 2);
    f.advance_disjoint(Duration::from_secs(10));
    let d = f.deliveries();
    assert_eq!(d.len(), 6 * 7, "every blob delivered");
    for ((tp, _), who) in &d {
        if !dead.contains(tp) {
            assert_eq!(
                who.len(),
                3,
                "{tp}: no duplicates outside the moved partitions"
            );
        }
    }
}

#[test]
fn a_member_paused_past_its_session_loses_its_partitions_and_commits_nothing_for_them() {
    let (mut f, a, b) = two_members_share_four_partitions_and_deliver();
    let b_parts = f.assignment(b);
    let old_id = f.members[b]
        .client
        .group_member()
        .map(|(m, _)| m.to_owned());
    f.pause(b);
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(5));
    let events_before = f.members[b].events.len();
    f.resume(b);
    // On its own clock, b knows its lease lapsed: it lost the partitions, committed nothing.
    let after: Vec<ConsumerEvent> = f.members[b].events[events_before..]
        .iter()
        .map(|(_, _, e)| e.clone())
        .collect();
    assert!(
        matches!(after.first(), Some(ConsumerEvent::PartitionsLost(p)) if p.iter().cloned().collect::<BTreeSet<_>>() == b_parts),
        "{after:?}"
    );
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    f.advance_disjoint(Duration::from_secs(5));
    for (_, _, e) in &f.members[b].events[events_before..] {
        if let ConsumerEvent::CommitCompleted { result: Ok(p), .. } = e {
            for (tp, pos) in p {
                assert!(
                    !b_parts.contains(tp) || f.assignment(b).contains(tp),
                    "b committed {tp} at {pos:?} after losing it"
                );
            }
        }
    }
    // It came back as a new member.
    let new_id = f.members[b]
        .client
        .group_member()
        .map(|(m, _)| m.to_owned());
    assert_ne!(old_id, new_id);
    assert_eq!(f.deliveries().len(), 4 * 10, "nothing lost");
}

#[test]
fn close_releases_the_partitions_at_once() {
    let mut f = Fleet::new(4);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    let closed_at = f.now;
    let now = f.now;
    f.members[b].client.close_consumer(now);
    assert!(f.run_until(Duration::from_secs(5), |f| {
        f.members[b]
            .events
            .iter()
            .any(|(_, _, e)| matches!(e, ConsumerEvent::Closed))
    }));
    f.members[b].alive = false;
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    let took = f.now - closed_at;
    assert!(
        took < 2 * HEARTBEAT,
        "took {took:?}, not the session timeout"
    );
}

#[test]
fn the_listener_runs_before_the_revocation_and_bounds_an_application_that_never_answers() {
    // The application commits for itself (auto-commit off): what it commits in the listener
    // is what the next owner starts from.
    let (mut f, a, b) = second_member_joins_one_that_commits_itself(true);
    assert!(f.run_until(Duration::from_secs(10), |f| {
        f.first_event(a, |e| matches!(e, ConsumerEvent::PartitionsRevoking { .. }))
            .is_some()
    }));
    let (id, parts) = f.members[a]
        .events
        .iter()
        .find_map(|(_, _, e)| match e {
            ConsumerEvent::PartitionsRevoking { id, partitions } => Some((*id, partitions.clone())),
            _ => None,
        })
        .unwrap();
    // While the application has not answered, the partitions stay a's: b does not start them.
    f.advance_disjoint(Duration::from_secs(3));
    assert!(f.assignment(b).is_empty());
    assert!(parts.iter().all(|tp| f.assignment(a).contains(tp)));
    // The application commits its own positions for them, then lets the handover go on.
    let now = f.now;
    let mine: Vec<(TopicPartition, Position)> = parts
        .iter()
        .map(|tp| (tp.clone(), Position::new(4, 1)))
        .collect();
    f.members[a].client.commit_positions(now, mine).unwrap();
    f.step();
    f.advance(Duration::from_millis(50));
    let now = f.now;
    f.members[a].client.revocation_done(now, id);
    assert!(f.run_until(Duration::from_secs(10), |f| f.settled(4, &[2, 2])));
    for tp in &parts {
        assert_eq!(
            f.members[b].client.committed(tp),
            Some(Position::new(4, 1)),
            "{tp}"
        );
    }
    // Two more members: a must give one of its two up, never answers, and the bound lets
    // the handover go on.
    f.join(false, |_| {});
    f.join(false, |_| {});
    let started = f.now;
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[1, 1, 1, 1])));
    let took = f.now - started;
    let bound = config().consumer.revocation_timeout;
    assert!(took >= bound, "a's revocation was not waited for: {took:?}");
    assert!(took <= bound + 3 * HEARTBEAT, "{took:?}");
}

/// DST finding F2: two members that write the same registry slot one after the other each
/// read their own write back and never see each other. A member must read before it writes:
/// when another member's registration sits in its slot it drops its partitions without
/// committing them (a member that never saw it may have taken them) and registers elsewhere,
/// and it never writes over the other's registration.
#[test]
fn a_member_whose_slot_another_overwrote_drops_its_partitions_and_registers_elsewhere() {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    assert_eq!(f.assignment(a).len(), 4);
    let slots = f.registry();
    assert_eq!(slots.len(), 1, "{slots:?}");
    let (slot, _, _) = slots[0].clone();
    // Another member (one that picked the same free slot) overwrites it.
    let intruder = "sfm1 intruder t . .";
    f.write_slot(slot, 1, intruder);
    f.advance(HEARTBEAT * 2);
    let lost = f.first_event(
        a,
        |e| matches!(e, ConsumerEvent::PartitionsLost(p) if p.len() == 4),
    );
    assert!(
        lost.is_some(),
        "no PartitionsLost: {:?}",
        f.members[a].events
    );
    let slots = f.registry();
    let there = slots.iter().find(|(s, _, _)| *s == slot).cloned();
    assert_eq!(
        there,
        Some((slot, 1, intruder.to_owned())),
        "the member wrote over the other's registration: {slots:?}"
    );
    assert!(
        slots
            .iter()
            .any(|(s, _, md)| *s != slot && md.starts_with("sfm1 stellflow-member")),
        "the member did not register elsewhere: {slots:?}"
    );
    // Nothing was committed for the lost partitions between the loss and their restart.
    let (lost_seq, _) = lost.unwrap();
    let assigned_again = f.members[a]
        .events
        .iter()
        .find(|(seq, _, e)| *seq > lost_seq && matches!(e, ConsumerEvent::PartitionsAssigned(_)))
        .map(|(seq, _, _)| *seq)
        .unwrap_or(u64::MAX);
    let between = f.members[a].events.iter().filter(|(seq, _, e)| {
        *seq > lost_seq
            && *seq < assigned_again
            && matches!(e, ConsumerEvent::CommitCompleted { result: Ok(l), .. } if !l.is_empty())
    });
    assert_eq!(between.count(), 0, "committed after the loss");
    // The intruder counts as a live member of `t` until its session runs out (it never
    // refreshes): the member takes its share again at once, the rest when the intruder is
    // gone.
    assert!(f.run_until(Duration::from_secs(3), |f| f.assignment(a).len() == 2));
    assert!(f.run_until(SESSION + HEARTBEAT * 3, |f| f.assignment(a).len() == 4));
}

/// `assign` while registered frees the member's registry slot (after committing what it
/// gives up), so that the others take its partitions at once, not after its session.
#[test]
fn assign_while_registered_frees_the_slot_at_once() {
    let mut f = Fleet::new(4);
    f.sim.create_topic("u", 1, 1).unwrap();
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| {
        f.settled(4, &[2, 2]) && f.deliveries().len() == blobs
    }));
    let start = f.now;
    let now = f.now;
    f.members[a]
        .client
        .assign(now, &[TopicPartition::new("u", 0)])
        .unwrap();
    f.step();
    // Well within the session timeout (6 s): the slot's free marker releases them.
    let ok = f.run_until(HEARTBEAT * 3, |f| f.assignment(b).len() == 4);
    assert!(
        ok,
        "b holds {:?} {:?} after assign; registry {:?}",
        f.assignment(b),
        f.now - start,
        f.registry()
    );
    assert_eq!(f.assignment(a), [TopicPartition::new("u", 0)].into());
    let slots = f.registry();
    assert!(
        slots
            .iter()
            .any(|(_, _, md)| md.starts_with("sfm1-free") && md.ends_with("left")),
        "{slots:?}"
    );
    // No record delivered twice: a committed what it gave up before freeing the slot.
    for ((tp, off), who) in f.deliveries() {
        assert_eq!(who.len(), 3, "{tp}@{off} delivered by {who:?}");
    }
}

/// Was a bug (DST group seeds 1000223 and 1000784, `group-commit-monotonic`): a member closed
/// while it could not reach the coordinator kept its close commit queued past its lease, and
/// when it reached the coordinator again it wrote its stale positions over the commits of
/// the member that had taken its partitions over. A lapsed lease now ends a close too: the
/// close finishes without committing, and a commit the member made but had not written yet
/// is withdrawn.
#[test]
fn a_member_closed_and_paused_past_its_session_commits_nothing_on_its_return() {
    let (mut f, a, b) = two_members_share_four_partitions_and_deliver();
    let b_parts = f.assignment(b);
    assert_eq!(b_parts.len(), 2);
    // The application commits, then closes, and the process stops (SIGSTOP) before the
    // driver wrote anything: the commit waits in the client, the close commit behind it.
    let now = f.now;
    f.members[b].client.commit(now).unwrap();
    f.members[b].client.close_consumer(now);
    f.pause(b);
    // a takes b's partitions over once b's session is over, delivers and commits more.
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(5));
    let a_commits: Vec<(TopicPartition, i64)> = b_parts
        .iter()
        .map(|tp| (tp.clone(), f.stored_offset(tp)))
        .collect();
    for (tp, off) in &a_commits {
        assert_eq!(*off, 10, "a committed {tp} after delivering all of it");
    }
    let events_before = f.members[b].events.len();
    f.resume(b);
    f.advance(Duration::from_secs(2));
    for (tp, off) in &a_commits {
        assert_eq!(
            f.stored_offset(tp),
            *off,
            "{tp}: b wrote over a's commit on its return"
        );
    }
    let after: Vec<&ConsumerEvent> = f.members[b].events[events_before..]
        .iter()
        .map(|(_, _, e)| e)
        .collect();
    assert!(
        after
            .iter()
            .any(|e| matches!(e, ConsumerEvent::PartitionsLost(p)
            if p.iter().cloned().collect::<BTreeSet<_>>() == b_parts)),
        "{after:?}"
    );
    assert!(
        after.iter().any(|e| matches!(e, ConsumerEvent::Closed)),
        "the close finished: {after:?}"
    );
    assert!(
        !after.iter().any(
            |e| matches!(e, ConsumerEvent::CommitCompleted { result: Ok(p), .. }
            if p.iter().any(|(tp, _)| b_parts.contains(tp)))
        ),
        "b committed a partition it had lost: {after:?}"
    );
}

/// A partition is released only once every commit of it made before the release finished: a
/// commit still queued or unanswered when the release went out could land after the new
/// owner started and overwrite its commits (a zombie commit; the server checks no
/// membership on OffsetCommit, and may execute two requests of one connection in either
/// order).
#[test]
fn a_release_waits_for_the_commits_of_the_partition_made_before_it() {
    let (mut f, a, b) = second_member_joins_one_that_commits_itself(false);
    // The application commits eagerly: two commits after every step (the second waits for
    // the first), until its partitions move.
    let mut issued: Vec<(u64, stellflow_sansio::CommitId)> = Vec::new();
    let deadline = f.now + Duration::from_secs(20);
    while f.now < deadline && !f.settled(4, &[2, 2]) {
        let now = f.now;
        for _ in 0..2 {
            let id = f.members[a].client.commit(now).unwrap();
            issued.push((f.seq, id));
        }
        f.tick(Duration::from_millis(100));
    }
    assert!(f.settled(4, &[2, 2]), "no handover");
    let moved = f.assignment(b);
    let events = &f.members[a].events;
    let (revoking, revoked) = {
        let at = |pred: &dyn Fn(&ConsumerEvent) -> bool| {
            events
                .iter()
                .find(|(_, _, e)| pred(e))
                .map(|(s, _, _)| *s)
                .expect("a revoked the moved partitions")
        };
        (
            at(&|e| {
                matches!(e, ConsumerEvent::PartitionsRevoking { partitions, .. }
                if partitions.iter().any(|tp| moved.contains(tp)))
            }),
            at(&|e| {
                matches!(e, ConsumerEvent::PartitionsRevoked(p)
                if p.iter().any(|tp| moved.contains(tp)))
            }),
        )
    };
    let completed: BTreeMap<stellflow_sansio::CommitId, u64> = events
        .iter()
        .filter_map(|(s, _, e)| match e {
            ConsumerEvent::CommitCompleted { id, .. } => Some((*id, *s)),
            _ => None,
        })
        .collect();
    let before: Vec<_> = issued.iter().filter(|(s, _)| *s < revoking).collect();
    assert!(!before.is_empty());
    for (_, id) in before {
        let done = completed.get(id).copied();
        assert!(
            done.is_some_and(|d| d < revoked),
            "commit {id:?} (made before the revocation) finished at {done:?}, after the release at {revoked}"
        );
    }
}

/// The first connect of a client, from its first drain.
fn first_connect(config: ClientConfig) -> stellflow_sansio::ConnectRequest {
    let now = Instant::now();
    let mut client = Client::new(config, now, 1).unwrap();
    let mut buf = BytesMut::new();
    loop {
        match client.poll_output(now, &mut buf) {
            Output::Connect(cr) => return cr,
            Output::Timeout(_) => panic!("no connect in the first drain"),
            _ => {}
        }
    }
}

/// Decision 19 (d): every connection of a client with a group bounds how long its host may
/// keep written bytes unacknowledged to the lease margin (`TCP_USER_TIMEOUT`), so a commit
/// of a member paused while cut off leaves the host within the margin or never; a client
/// without a group leaves the host's default.
#[test]
fn a_group_clients_connections_bound_unacknowledged_bytes_to_the_lease_margin() {
    // min(heartbeat 1 s, session 6 s / 4).
    assert_eq!(
        first_connect(config()).unacked_timeout,
        Some(Duration::from_secs(1))
    );
    let mut c = config();
    c.consumer.session_timeout = Duration::from_secs(3);
    assert_eq!(
        first_connect(c).unacked_timeout,
        Some(Duration::from_millis(750)),
        "min(heartbeat 1 s, session 3 s / 4)"
    );
    let mut c = config();
    c.consumer.group_id = None;
    assert_eq!(first_connect(c).unacked_timeout, None);
}
