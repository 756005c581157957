//! A fleet of group members on one simulated broker in virtual time, for the group tests:
//! each member a sans-IO client with its own connections, paused or dead at will, with what
//! it delivered and what events it saw, and a raw producer and committed-offset reader.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, OffsetFetchPartition,
    OffsetFetchRequest, OffsetFetchTopic, ProducePartitionData, ProduceRequest, ProduceTopicData,
    Request,
};
use stellflow_proto::record::{BatchBuilder, BatchParams, Envelope};
use stellflow_proto::wire::Wire;
use stellflow_sansio::{
    Client, ClientConfig, ConnId, ConsumerEvent, DisconnectReason, Event, OffsetReset, Output,
    REGISTRY_TOPIC, TopicPartition,
};
use stellflow_sim::{ClusterConfig, SimCluster};

pub const SESSION: Duration = Duration::from_secs(6);
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// One member: a client, its connections, what it did and when.
pub struct Member {
    pub client: Client,
    pub to_sim: HashMap<ConnId, stellflow_sim::ConnId>,
    pub alive: bool,
    pub paused: bool,
    /// Bytes the broker sent while the member was paused.
    pub inbox: Vec<(ConnId, Bytes)>,
    /// (sequence, instant, event) — the sequence orders events across members.
    pub events: Vec<(u64, Instant, ConsumerEvent)>,
    /// (sequence, instant, partition, offset) of every delivered record.
    pub records: Vec<(u64, Instant, TopicPartition, i64)>,
    /// The `Timeout` the member's last drain ended with.
    pub deadline: Option<Instant>,
}

/// Members on one simulated cluster, and the virtual clock they share.
pub struct Fleet {
    pub sim: SimCluster,
    pub now: Instant,
    pub members: Vec<Member>,
    pub to_client: HashMap<stellflow_sim::ConnId, (usize, ConnId)>,
    pub seq: u64,
    pub seed: u64,
}

pub fn config() -> ClientConfig {
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
    pub fn new(partitions: i32) -> Fleet {
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
    pub fn join(&mut self, listening: bool, tweak: impl FnOnce(&mut ClientConfig)) -> usize {
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

    pub fn produce(&mut self, partition: i32, values: usize) {
        let mut b = BatchBuilder::with_capacity(BatchParams::default(), Envelope::V1, 1024);
        for i in 0..values {
            b.append(1, Some(format!("k{i}").as_bytes()), Some(b"v"))
                .unwrap();
        }
        let r = self.raw(&ProduceRequest {
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
        });
        assert_eq!(r.responses[0].partitions[0].error_code.0, 0);
    }

    /// One request on a connection of its own, as another client would send it; the body of
    /// the answer.
    pub fn raw<R: Request>(&mut self, req: &R) -> R::Response {
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
    pub fn registry(&mut self) -> Vec<(i32, i64, String)> {
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
    pub fn write_slot(&mut self, slot: i32, counter: i64, metadata: &str) {
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

    pub fn running(&self, i: usize) -> bool {
        self.members[i].alive && !self.members[i].paused
    }

    pub fn step(&mut self) {
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

    pub fn tick(&mut self, max: Duration) {
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

    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick(end - self.now);
        }
    }

    pub fn run_until(&mut self, max: Duration, mut pred: impl FnMut(&Fleet) -> bool) -> bool {
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

    pub fn kill(&mut self, i: usize) {
        self.members[i].alive = false;
        for (_, sc) in self.members[i].to_sim.drain() {
            self.to_client.remove(&sc);
            self.sim.disconnect(sc);
        }
    }

    pub fn pause(&mut self, i: usize) {
        self.members[i].paused = true;
    }

    /// Resumes a paused member: it sees the time first, then what the broker sent meanwhile.
    pub fn resume(&mut self, i: usize) {
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

    pub fn assignment(&self, i: usize) -> BTreeSet<TopicPartition> {
        self.members[i].client.assignment().into_iter().collect()
    }

    /// Every running member's assignment is disjoint from the others' and together they
    /// cover `n` partitions with `per` each.
    pub fn settled(&self, n: i32, per: &[usize]) -> bool {
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
    pub fn deliveries(&self) -> BTreeMap<(TopicPartition, i64), Vec<usize>> {
        let mut out: BTreeMap<(TopicPartition, i64), Vec<usize>> = BTreeMap::new();
        for (i, m) in self.members.iter().enumerate() {
            for (_, _, tp, off) in &m.records {
                out.entry((tp.clone(), *off)).or_default().push(i);
            }
        }
        out
    }

    /// Two running members never hold the same partition at once.
    pub fn assert_disjoint(&self) {
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
    pub fn advance_disjoint(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick(end - self.now);
            self.assert_disjoint();
        }
    }

    /// The offset the group's offset store holds for `tp` (−1 when nothing is committed), as
    /// another client would read it.
    pub fn stored_offset(&mut self, tp: &TopicPartition) -> i64 {
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

    pub fn first_event(
        &self,
        i: usize,
        f: impl Fn(&ConsumerEvent) -> bool,
    ) -> Option<(u64, Instant)> {
        self.members[i]
            .events
            .iter()
            .find(|(_, _, e)| f(e))
            .map(|(s, t, _)| (*s, *t))
    }
}

pub fn fill(f: &mut Fleet, partitions: i32, blobs: usize) -> usize {
    for p in 0..partitions {
        for _ in 0..blobs {
            f.produce(p, 3);
        }
    }
    partitions as usize * blobs
}

/// Four partitions of 5 blobs each; member `a` (auto-commit off, with a rebalance listener
/// when `listening`) delivers all of them alone, then member `b` joins. `(fleet, a, b)`.
pub fn second_member_joins_one_that_commits_itself(listening: bool) -> (Fleet, usize, usize) {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(listening, |c| c.consumer.enable_auto_commit = false);
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    let b = f.join(false, |_| {});
    (f, a, b)
}

/// Two members settle on two of four partitions each, then 5 blobs per partition are
/// produced and delivered for a second. `(fleet, a, b)`.
pub fn two_members_share_four_partitions_and_deliver() -> (Fleet, usize, usize) {
    let mut f = Fleet::new(4);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(1));
    (f, a, b)
}
