//! The producer and consumer workloads, on the real `Client::produce` and consumer APIs.
//!
//! Producer: records with explicit partitions and per-partition sequence numbers at random
//! times. Checked: exactly one `Produced` per accepted record within the delivery bound;
//! acknowledged positions grow with the sequence per partition; every acknowledged record is
//! in the leader's log at its `(offset, index)`; with idempotence no record is in the log
//! twice; linger, both ways: a batch's first record never hits the wire earlier than `linger`
//! after it was produced (unless a flush was asked for), and never later than
//! [`LINGER_SLACK`] after the batch is due and its partition could be sent (see
//! [`ProducerLoad`] for the precise rule).
//!
//! Consumer: one consumer (group subscription or manual assignment with commits), restarted
//! gracefully at random times. Checked: records of a partition come in strictly increasing
//! position within one incarnation; a record is delivered twice only when a restart happened
//! between its delivery and a successful commit covering it; in the end every acknowledged
//! record (producer and raw) is delivered; with a healthy network an idle group member never
//! rejoins.

use super::check::OutcomeBook;
use super::wire::Outstanding;
use super::workload::{Ledger, TOPIC};
use super::world::{ClientId, LinkView, World};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;
use stellflow_proto::messages::ProduceRequest;
use stellflow_proto::record::blob_records;
use stellflow_proto::{ApiKey, Reader, Wire};
use stellflow_sansio::{
    Acks, ClientConfig, ConsumerEvent, Event, OffsetReset, ProduceId, ProducerRecord,
    TopicPartition,
};
use stellflow_sim::rng::SimRng;

/// A record position: blob offset and index in the blob.
pub type Pos = (i64, u32);

/// Workload bits that enable the consumer (either bit; mask them to run without one).
pub const CONSUMER_BITS: u32 = 0b1100;
/// Workload bit that turns on producer idempotence (mask it to run without).
pub const IDEMPOTENCE_BIT: u32 = 0x10;

/// Which producer/consumer workloads a scenario runs, from its workload bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineShape {
    /// Run a producer client.
    pub producer: bool,
    /// Run a consumer client.
    pub consumer: bool,
    /// Producer idempotence.
    pub idempotent: bool,
    /// `acks = -1` (else 1).
    pub acks_all: bool,
    /// Consumer subscribes through the group (else manual assignment).
    pub subscribe: bool,
    /// Consumer auto-commit (else explicit commits).
    pub auto_commit: bool,
}

impl PipelineShape {
    /// The shape encoded in a scenario's workload bits.
    pub fn from_bits(wl: u32) -> Self {
        PipelineShape {
            producer: wl & 0b11 != 0,
            consumer: wl & 0b1100 != 0,
            idempotent: wl & 0x10 != 0,
            acks_all: wl & 0x20 != 0,
            subscribe: wl & 0x40 != 0,
            auto_commit: wl & 0x80 != 0,
        }
    }
}

/// How late past its due time a sendable batch may hit the wire: the producer must send it
/// in the step in which it becomes due, so any positive gap is a missed wake-up.
pub const LINGER_SLACK: Duration = Duration::from_millis(1);

/// The producer workload.
///
/// # Linger upper bound (`linger-upper-bound`)
///
/// Checked after every step, per partition `p`. Let `R` be the oldest record of `p` that has
/// no outcome yet and was never on the wire (so it opens its batch), produced at `t_R`. Its
/// batch opens at `o_R = max(t_R, k)`, `k` being the first instant the client's metadata
/// named the topic's partitions (a record produced before waits unbatched, as in the Java
/// client, and its linger starts when it is placed). It is *due* at `min(o_R + linger, f)`,
/// `f` being the first flush asked for after `t_R`. The
/// partition is *sendable* while everything the producer legitimately waits for is there, as
/// seen from outside the client:
///
/// 1. no record of `p` that was on the wire is still without its outcome (a batch in flight
///    or waiting for its retry backoff blocks the partition: one Produce in flight per
///    partition, retries keep their order);
/// 2. no Produce carrying `p` is on any of the producer's connections unanswered and younger
///    than `request timeout + ack timeout + 1 s` (after that the client has certainly given up
///    on it; a Produce with `acks = -1` may wait longer than the plain request timeout), twice
///    that with idempotence (a timed-out idempotent Produce waits for its late answer);
/// 3. the client's metadata names a leader `L` for `p`;
/// 4. the producer has at least one connection to `L`, and each of them is negotiated
///    (ApiVersions answered) and has fewer than `max_in_flight_per_connection` requests
///    unanswered and younger than that bound;
/// 5. with idempotence, a Produce of this producer was on the wire before (the producer id is
///    known; it is never forgotten, only fenced, and fencing fails every waiting record).
///
/// 6. `R`'s batch cannot be waiting for a retry: the producer hands a due batch whose leader is
///    known to its network layer at once, where it waits for the connection or an in-flight
///    slot and times out after the request timeout (at the soonest), then waits for its retry
///    backoff — none of which shows on the wire. So once the request timeout has passed since
///    the later of `R`'s due time and the instant since which metadata has named a leader
///    without a break, `R` is exempt (until it is sent or has its outcome).
///
/// If `R` is still not on the wire at a step more than [`LINGER_SLACK`] after both its due
/// time and the instant since which the partition has been sendable without a break, the
/// producer sat on a ready batch: violation. Everything else (reconnect and metadata backoff,
/// retry backoff, in-flight limits, a producer id on its way) makes the partition not
/// sendable, so the bound never fires for them.
#[derive(Debug)]
pub struct ProducerLoad {
    client: ClientId,
    linger: Duration,
    /// The client's request timeout: no request of the producer times out sooner.
    request_timeout: Duration,
    /// No request of the producer is still awaited by the client after this long (a Produce
    /// with `acks = -1` may get longer than the request timeout, up to the ack timeout plus
    /// a margin; this bound covers both).
    request_timeout_max: Duration,
    max_in_flight: usize,
    /// Every record value seen on the wire.
    sent: BTreeSet<String>,
    /// A Produce of this producer was on the wire.
    produce_seen: bool,
    /// Per partition: since when it has been sendable without a break.
    sendable_since: BTreeMap<i32, Duration>,
    /// Per partition: the oldest unsent record and the first sample at which it was due while
    /// metadata named a leader (the producer may have handed it to the network layer then).
    attempt_from: BTreeMap<i32, (String, Duration)>,
    /// Per partition: since when the client's metadata has named a leader without a break.
    leader_known_since: BTreeMap<i32, Duration>,
    /// When the client's metadata first named the partitions of the topic (records produced
    /// before wait unbatched until then, and their linger starts then).
    topic_known_at: Option<Duration>,
    /// Batches held to the upper bound: their first record was seen unsent on a sendable
    /// partition at least once (counted once per batch).
    bound_checks: u64,
    /// Per partition: the first record of the last batch counted in `bound_checks`.
    bound_counted: BTreeMap<i32, String>,
    idempotent: bool,
    bound: Duration,
    schedule: VecDeque<(Duration, i32)>,
    seq: BTreeMap<i32, u64>,
    book: OutcomeBook<ProduceId>,
    info: BTreeMap<ProduceId, (i32, u64, String)>,
    produced_at: BTreeMap<String, Duration>,
    on_wire: BTreeSet<String>,
    flushes: Vec<Duration>,
    acked: BTreeMap<i32, BTreeMap<u64, Pos>>,
    /// Records known to be in the log: `(partition, position) → value`.
    pub written: BTreeMap<(i32, Pos), String>,
    goals: BTreeSet<i32>,
    goal_ids: BTreeMap<ProduceId, i32>,
    retry_at: Option<Duration>,
    partitions: i32,
}

impl ProducerLoad {
    /// Adds the producer client to `world` and plans `count` records over `span`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        world: &mut World,
        base: &ClientConfig,
        shape: PipelineShape,
        seed: u64,
        count: u32,
        span: Duration,
        partitions: i32,
    ) -> Option<Self> {
        let mut rng = SimRng::new(seed);
        let mut config = base.clone();
        config.header.client_id = Some(format!("dst-producer-{seed:x}"));
        let p = &mut config.producer;
        p.acks = if shape.acks_all {
            Acks::All
        } else {
            Acks::Leader
        };
        p.idempotence = shape.idempotent;
        p.linger = Duration::from_millis(rng.below(25));
        p.ack_timeout = config.request_timeout / 2;
        p.delivery_timeout = Duration::from_secs(8);
        p.retry_backoff = Duration::from_millis(50);
        p.retry_backoff_max = Duration::from_millis(500);
        let linger = p.linger;
        let ack_timeout = p.ack_timeout;
        let bound = p.delivery_timeout + config.request_timeout * 2 + Duration::from_secs(1);
        let client = match world.add_client(config) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("producer config: {e}"));
                return None;
            }
        };
        world.tap_requests(client, ApiKey::PRODUCE);
        let span_ms = span.as_millis().max(1) as u64;
        let mut schedule: Vec<(Duration, i32)> = (0..count)
            .map(|_| {
                (
                    Duration::from_millis(rng.below(span_ms)),
                    rng.below(partitions.max(1) as u64) as i32,
                )
            })
            .collect();
        schedule.sort();
        Some(ProducerLoad {
            client,
            linger,
            request_timeout: base.request_timeout,
            // An idempotent Produce waits past its timeout for its late answer (up to
            // `LATE_ANSWER_TIMEOUTS` timeouts) before its connection is given up.
            request_timeout_max: (base.request_timeout + ack_timeout + Duration::from_secs(1))
                * if shape.idempotent {
                    crate::check::LATE_ANSWER_TIMEOUTS
                } else {
                    1
                },
            max_in_flight: base.max_in_flight_per_connection.max(1),
            sent: BTreeSet::new(),
            produce_seen: false,
            sendable_since: BTreeMap::new(),
            attempt_from: BTreeMap::new(),
            leader_known_since: BTreeMap::new(),
            topic_known_at: None,
            bound_checks: 0,
            bound_counted: BTreeMap::new(),
            idempotent: shape.idempotent,
            bound,
            schedule: schedule.into(),
            seq: BTreeMap::new(),
            book: OutcomeBook::default(),
            info: BTreeMap::new(),
            produced_at: BTreeMap::new(),
            on_wire: BTreeSet::new(),
            flushes: Vec::new(),
            acked: BTreeMap::new(),
            written: BTreeMap::new(),
            goals: BTreeSet::new(),
            goal_ids: BTreeMap::new(),
            retry_at: None,
            partitions,
        })
    }

    /// The producer's client.
    pub fn client_id(&self) -> ClientId {
        self.client
    }

    /// When the next record is due.
    pub fn next_at(&self) -> Option<Duration> {
        let a = self.schedule.front().map(|(t, _)| *t);
        match (a, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Outcomes received.
    pub fn completed(&self) -> usize {
        self.book.completed()
    }

    /// How many batches were held to the linger upper bound: their first record was unsent on
    /// a sendable partition at some step, so a late send would have been reported.
    pub fn linger_bound_checks(&self) -> u64 {
        self.bound_checks
    }

    /// Whether every record has its outcome and every liveness goal is met.
    pub fn done(&self) -> bool {
        self.book.pending() == 0 && self.goals.is_empty()
    }

    /// What is still open.
    pub fn open_work(&self) -> String {
        format!(
            "producer: {} record(s) without outcome, goals on partitions {:?}",
            self.book.pending(),
            self.goals
        )
    }

    /// Liveness: one fresh record per partition must be delivered.
    pub fn start_goals(&mut self, world: &mut World) {
        self.schedule.clear();
        self.goals = (0..self.partitions).collect();
        self.retry_at = Some(world.elapsed());
    }

    fn produce(&mut self, world: &mut World, partition: i32) -> Option<ProduceId> {
        let seq = self.seq.entry(partition).or_default();
        *seq += 1;
        let seq = *seq;
        let value = format!("P{partition}-{seq}");
        let now = world.now();
        let at = world.elapsed();
        let record = ProducerRecord::new(TOPIC, value.as_bytes()).with_partition(partition);
        match world.client(self.client).produce(now, &record) {
            Ok(id) => {
                self.book.issued(id, at, self.bound, value.clone());
                self.info.insert(id, (partition, seq, value.clone()));
                self.produced_at.insert(value, at);
                Some(id)
            }
            Err(_) => None, // refused at once: no event follows
        }
    }

    /// Produces every record due now.
    pub fn issue_due(&mut self, world: &mut World) {
        let now = world.elapsed();
        if self.retry_at.is_some_and(|r| r <= now) {
            self.retry_at = None;
            let open: Vec<i32> = self
                .goals
                .iter()
                .filter(|p| !self.goal_ids.values().any(|g| g == *p))
                .copied()
                .collect();
            for p in open {
                match self.produce(world, p) {
                    Some(id) => {
                        self.goal_ids.insert(id, p);
                    }
                    None => self.retry_at = Some(now + Duration::from_millis(100)),
                }
            }
        }
        while self.schedule.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, p)) = self.schedule.pop_front() {
                self.produce(world, p);
            }
        }
    }

    /// Asks for a flush (exempts batches from the linger check from now on).
    pub fn flush(&mut self, world: &mut World) {
        self.flushes.push(world.elapsed());
        let now = world.now();
        world.client(self.client).flush(now);
    }

    /// Consumes the producer client's events and wire taps, and checks them.
    pub fn on_events(&mut self, world: &mut World) {
        for (at, body) in world.take_tapped(self.client) {
            self.check_linger(world, at, body);
        }
        while let Some(e) = world.poll_event(self.client) {
            let Event::Produced { id, result } = e else {
                continue;
            };
            let at = world.elapsed();
            if let Err(detail) = self.book.outcome(id, at) {
                world.report("one-outcome", format!("producer: {detail}"));
                continue;
            }
            let Some((partition, seq, value)) = self.info.remove(&id) else {
                continue;
            };
            let goal = self.goal_ids.remove(&id);
            match result {
                Ok(meta) => {
                    if meta.partition != partition {
                        world.report(
                            "produce-partition",
                            format!(
                                "{value} asked for partition {partition}, went to {}",
                                meta.partition
                            ),
                        );
                    }
                    if let Some(offset) = meta.offset {
                        self.acked_at(world, partition, seq, (offset, meta.index), &value);
                    }
                    if let Some(p) = goal {
                        self.goals.remove(&p);
                    }
                }
                Err(e) => {
                    if let Some(offset) = e.written_offset() {
                        // Written but not replicated in time: it is in the log all the same.
                        let index = match &e {
                            stellflow_sansio::DeliveryError::NotReplicated { index, .. } => *index,
                            _ => 0,
                        };
                        self.written.insert((partition, (offset, index)), value);
                    }
                    if goal.is_some() {
                        self.retry_at = Some(at + Duration::from_millis(100));
                    }
                }
            }
        }
        if let Some(detail) = self.book.overdue(world.elapsed()) {
            world.report("outcome-in-time", format!("producer: {detail}"));
        }
        self.check_linger_bound(world);
    }

    /// The linger upper bound (see [`ProducerLoad`]).
    fn check_linger_bound(&mut self, world: &mut World) {
        let now = world.elapsed();
        if self.topic_known_at.is_none()
            && world
                .client(self.client)
                .metadata()
                .topics
                .get(TOPIC)
                .is_some_and(|t| !t.partitions.is_empty())
        {
            self.topic_known_at = Some(now);
        }
        let Some(known_at) = self.topic_known_at else {
            return; // every record waits for metadata
        };
        // Per partition: the oldest unsent record without outcome, and whether a record that
        // was on the wire still waits for its outcome.
        let mut oldest: BTreeMap<i32, (u64, &str)> = BTreeMap::new();
        let mut busy: BTreeSet<i32> = BTreeSet::new();
        for (partition, seq, value) in self.info.values() {
            if self.sent.contains(value) {
                busy.insert(*partition);
            } else if oldest.get(partition).is_none_or(|(s, _)| seq < s) {
                oldest.insert(*partition, (*seq, value.as_str()));
            }
        }
        for p in 0..self.partitions {
            let named = world
                .client(self.client)
                .metadata()
                .partition(TOPIC, p)
                .is_some_and(|m| m.leader().is_ok());
            if named {
                self.leader_known_since.entry(p).or_insert(now);
            } else {
                self.leader_known_since.remove(&p);
            }
        }
        let mut due: Vec<(i32, Duration, String)> = Vec::new();
        for p in 0..self.partitions {
            let Some((_, value)) = oldest.get(&p) else {
                self.sendable_since.remove(&p);
                self.attempt_from.remove(&p);
                continue;
            };
            let Some(produced) = self.produced_at.get(*value).copied() else {
                continue;
            };
            // A record produced before the topic's partitions were known opens its batch when
            // they become known.
            let opened = produced.max(known_at);
            let flushed = self.flushes.iter().copied().find(|f| *f > produced);
            let due_at = flushed.map_or(opened + self.linger, |f| f.min(opened + self.linger));
            due.push((p, due_at, (*value).to_owned()));
        }
        if due.is_empty() {
            return;
        }
        let links = world.links(self.client);
        let live = |o: &&Outstanding| o.sent_at + self.request_timeout_max > now;
        let mut in_flight: BTreeSet<i32> = BTreeSet::new();
        for l in &links {
            for o in l.outstanding.iter().filter(live) {
                let Some(body) = o.body.clone() else { continue };
                if let Ok(req) = ProduceRequest::decode(&mut Reader::new(body)) {
                    in_flight.extend(
                        req.topic_data
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.partition)),
                    );
                }
            }
        }
        for (p, due_at, value) in due {
            let leader = world
                .client(self.client)
                .metadata()
                .partition(TOPIC, p)
                .and_then(|m| m.leader().ok());
            if self.attempt_from.get(&p).is_some_and(|(v, _)| *v != value) {
                self.attempt_from.remove(&p);
            }
            if now >= due_at && leader.is_some() && !self.attempt_from.contains_key(&p) {
                // The producer may have handed the batch to its network layer as soon as it
                // was due with a leader named, which can be before this sample (the world does
                // not step at every instant).
                let named_since = self.leader_known_since.get(&p).copied().unwrap_or(now);
                self.attempt_from
                    .insert(p, (value.clone(), due_at.max(named_since).min(now)));
            }
            // Handed to the network layer at that sample at the latest, the request may have
            // timed out waiting for a connection or an in-flight slot since: then the batch
            // waits for its retry backoff, which the wire does not show.
            let maybe_retrying = self
                .attempt_from
                .get(&p)
                .is_some_and(|(_, at)| now >= *at + self.request_timeout);
            let sendable = !maybe_retrying
                && !busy.contains(&p)
                && !in_flight.contains(&p)
                && (!self.idempotent || self.produce_seen)
                && leader.is_some_and(|l| {
                    let to: Vec<&LinkView> = links.iter().filter(|k| k.broker == l).collect();
                    !to.is_empty()
                        && to.iter().all(|k| {
                            k.negotiated
                                && k.outstanding.iter().filter(live).count() < self.max_in_flight
                        })
                });
            if !sendable {
                self.sendable_since.remove(&p);
                continue;
            }
            let since = *self.sendable_since.entry(p).or_insert(now);
            let deadline = due_at.max(since) + LINGER_SLACK;
            if self.bound_counted.get(&p) != Some(&value) {
                self.bound_counted.insert(p, value.clone());
                self.bound_checks += 1;
            }
            if now > deadline {
                world.report(
                    "linger-upper-bound",
                    format!(
                        "t0-{p}: batch starting with {value} due at {due_at:?} (linger {:?}), partition sendable to leader {leader:?} since {since:?}, still not sent at {now:?}",
                        self.linger
                    ),
                );
            }
        }
    }

    fn acked_at(&mut self, world: &mut World, partition: i32, seq: u64, pos: Pos, value: &str) {
        let acks = self.acked.entry(partition).or_default();
        let before = acks.range(..seq).next_back().map(|(s, p)| (*s, *p));
        let after = acks.range(seq + 1..).next().map(|(s, p)| (*s, *p));
        if let Some((s, p)) = before
            && p >= pos
        {
            world.report(
                "acked-in-order",
                format!("t0-{partition}: record {seq} acked at {pos:?}, record {s} at {p:?}"),
            );
        }
        if let Some((s, p)) = after
            && p <= pos
        {
            world.report(
                "acked-in-order",
                format!("t0-{partition}: record {seq} acked at {pos:?}, record {s} at {p:?}"),
            );
        }
        acks.insert(seq, pos);
        if let Some(old) = self.written.insert((partition, pos), value.to_owned())
            && old != value
        {
            world.report(
                "acked-positions-unique",
                format!("t0-{partition}@{pos:?} acknowledged for {old} and {value}"),
            );
        }
    }

    fn check_linger(&mut self, world: &mut World, at: Duration, body: Bytes) {
        let Ok(req) = ProduceRequest::decode(&mut Reader::new(body)) else {
            world.report(
                "well-formed-requests",
                "producer sent an undecodable Produce".into(),
            );
            return;
        };
        for t in req.topic_data {
            for p in t.partitions {
                let Some(blob) = p.records else { continue };
                self.produce_seen = true;
                for r in blob_records(blob.clone()).flatten() {
                    if let Some(v) = r.record.value {
                        self.sent.insert(String::from_utf8_lossy(&v).into_owned());
                    }
                }
                let Some(Ok(first)) = blob_records(blob).next() else {
                    continue;
                };
                let Some(v) = first.record.value else {
                    continue;
                };
                let value = String::from_utf8_lossy(&v).into_owned();
                if !self.on_wire.insert(value.clone()) {
                    continue; // a retry
                }
                let Some(produced) = self.produced_at.get(&value).copied() else {
                    continue;
                };
                let flushed = self.flushes.iter().any(|f| *f >= produced && *f <= at);
                if !flushed && at < produced + self.linger {
                    world.report(
                        "linger-honoured",
                        format!(
                            "batch starting with {value} produced at {produced:?} sent at {at:?}, linger {:?}",
                            self.linger
                        ),
                    );
                }
            }
        }
    }

    /// End checks against the logs: acknowledged records in place; no duplicates with
    /// idempotence — unless `state_lost` (a broker restarted or a leader moved: the server
    /// keeps its de-duplication state in memory per broker and forgets it, PROTOCOL.md §8, so
    /// a retry after that is written again by design).
    pub fn check_logs(&self, world: &mut World, state_lost: bool) {
        let mut problems = Vec::new();
        for p in 0..self.partitions {
            let Some(entries) = leader_entries(world, p) else {
                problems.push(("acked-in-log", format!("t0-{p} has no leader at the end")));
                continue;
            };
            let mut seen: BTreeMap<String, u32> = BTreeMap::new();
            let mut at: BTreeMap<Pos, String> = BTreeMap::new();
            for (offset, blob) in entries {
                for (i, r) in blob_records(blob).enumerate() {
                    let Ok(r) = r else { break };
                    let v = r
                        .record
                        .value
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_default();
                    if v.starts_with('P') {
                        *seen.entry(v.clone()).or_default() += 1;
                    }
                    at.insert((offset, i as u32), v);
                }
            }
            for ((part, pos), value) in self
                .written
                .range((p, (i64::MIN, 0))..=(p, (i64::MAX, u32::MAX)))
            {
                if at.get(pos) != Some(value) {
                    problems.push((
                        "acked-in-log",
                        format!(
                            "t0-{part}@{pos:?}: {value} acknowledged, log has {:?}",
                            at.get(pos)
                        ),
                    ));
                }
            }
            if self.idempotent
                && !state_lost
                && let Some((v, n)) = seen.iter().find(|(_, n)| **n > 1)
            {
                problems.push((
                    "idempotent-no-duplicates",
                    format!("t0-{p}: {v} is in the log {n} times with idempotence on"),
                ));
            }
        }
        for (inv, p) in problems.into_iter().take(3) {
            world.report(inv, p);
        }
    }
}

/// The entries `(offset, blob)` of the current leader's log of `t0-partition`.
pub fn leader_entries(world: &World, partition: i32) -> Option<Vec<(i64, Bytes)>> {
    let cluster = world.cluster();
    let key = Some(TOPIC.to_owned());
    let leader = cluster.broker_ids().into_iter().find(|id| {
        cluster.is_alive(*id)
            && cluster
                .broker(*id)
                .and_then(|b| b.metadata().get(&key, partition))
                .is_some_and(|m| m.leader == *id)
    })?;
    let log = cluster.broker(leader)?.log(TOPIC, partition)?;
    Some(
        log.entries_from(log.log_start())
            .map(|e| (e.offset, e.blob.clone()))
            .collect(),
    )
}

/// The consumer workload.
#[derive(Debug)]
pub struct ConsumerLoad {
    client: ClientId,
    config: ClientConfig,
    shape: PipelineShape,
    partitions: i32,
    restarts: VecDeque<Duration>,
    closing: Option<Duration>,
    next_commit: Duration,
    last: BTreeMap<i32, Pos>,
    max: BTreeMap<i32, Pos>,
    delivered: BTreeMap<(i32, Pos), String>,
    floor: BTreeMap<i32, Pos>,
    windows: BTreeMap<i32, Vec<(Pos, Pos)>>,
    rejoins: u64,
    last_rejoin: String,
    last_restart: Option<Duration>,
    /// The last `GroupJoined`: when it was seen and the member id it gave.
    last_join: Option<(Duration, String)>,
    incarnations: u32,
}

/// How long a graceful restart waits for `ConsumerEvent::Closed`.
const RESTART_WAIT: Duration = Duration::from_secs(6);
/// Commit period of the explicit-commit consumer.
const COMMIT_EVERY: Duration = Duration::from_millis(700);

impl ConsumerLoad {
    /// Adds the consumer client to `world`; it restarts `restarts` times during `span`.
    pub fn new(
        world: &mut World,
        base: &ClientConfig,
        shape: PipelineShape,
        seed: u64,
        restarts: u32,
        span: Duration,
        partitions: i32,
    ) -> Option<Self> {
        let mut rng = SimRng::new(seed);
        let mut config = base.clone();
        config.header.client_id = Some(format!("dst-consumer-{seed:x}"));
        let c = &mut config.consumer;
        c.group_id = Some("dst".into());
        c.auto_offset_reset = OffsetReset::Earliest;
        c.enable_auto_commit = shape.auto_commit;
        c.auto_commit_interval = Duration::from_secs(1);
        c.session_timeout = Duration::from_secs(10);
        c.heartbeat_interval = Duration::from_secs(1);
        c.rebalance_timeout = Duration::from_secs(5);
        let span_ms = span.as_millis().max(1) as u64;
        let mut r: Vec<Duration> = (0..restarts)
            .map(|_| Duration::from_millis(rng.below(span_ms)))
            .collect();
        r.sort();
        let mut load = ConsumerLoad {
            client: ClientId(usize::MAX),
            config,
            shape,
            partitions,
            restarts: r.into(),
            closing: None,
            next_commit: COMMIT_EVERY,
            last: BTreeMap::new(),
            max: BTreeMap::new(),
            delivered: BTreeMap::new(),
            floor: BTreeMap::new(),
            windows: BTreeMap::new(),
            rejoins: 0,
            last_rejoin: String::new(),
            last_restart: None,
            last_join: None,
            incarnations: 0,
        };
        load.start(world).then_some(load)
    }

    fn start(&mut self, world: &mut World) -> bool {
        let client = match world.add_client(self.config.clone()) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("consumer config: {e}"));
                return false;
            }
        };
        self.client = client;
        self.incarnations += 1;
        self.last.clear();
        self.last_join = None;
        let now = world.now();
        let r = if self.shape.subscribe {
            world.client(client).subscribe(now, &[TOPIC])
        } else {
            let tps: Vec<TopicPartition> = (0..self.partitions)
                .map(|p| TopicPartition::new(TOPIC, p))
                .collect();
            world.client(client).assign(now, &tps)
        };
        if let Err(e) = r {
            world.report("setup", format!("consumer start: {e}"));
            return false;
        }
        true
    }

    /// When the consumer has timed work (restart, commit).
    pub fn next_at(&self) -> Option<Duration> {
        if let Some(since) = self.closing {
            return Some(since + RESTART_WAIT);
        }
        let r = self.restarts.front().copied();
        let c = (!self.shape.auto_commit).then_some(self.next_commit);
        match (r, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The current incarnation's client.
    pub fn client_id(&self) -> ClientId {
        self.client
    }

    /// Group rejoins seen so far.
    pub fn rejoins(&self) -> u64 {
        self.rejoins
    }

    /// The last rejoin's reason.
    pub fn last_rejoin(&self) -> &str {
        &self.last_rejoin
    }

    /// The group id the consumer uses.
    pub fn group_id(&self) -> &str {
        self.config.consumer.group_id.as_deref().unwrap_or_default()
    }

    /// The last `GroupJoined` of the current incarnation: when it was seen and the member id.
    pub fn last_join(&self) -> Option<(Duration, &str)> {
        self.last_join.as_ref().map(|(t, m)| (*t, m.as_str()))
    }

    /// When the last restart finished.
    pub fn last_restart(&self) -> Option<Duration> {
        self.last_restart
    }

    /// The session timeout.
    pub fn session_timeout(&self) -> Duration {
        self.config.consumer.session_timeout
    }

    /// Whether the consumer uses a group subscription.
    pub fn subscribed(&self) -> bool {
        self.shape.subscribe
    }

    /// No more restarts (liveness phase).
    pub fn stop_restarts(&mut self) {
        self.restarts.clear();
    }

    /// Whether a graceful restart is under way.
    pub fn restarting(&self) -> bool {
        self.closing.is_some()
    }

    /// Runs timed work due now: commits and restarts.
    pub fn issue_due(&mut self, world: &mut World) {
        let at = world.elapsed();
        let now = world.now();
        if self.closing.is_none() && !self.shape.auto_commit && self.next_commit <= at {
            self.next_commit = at + COMMIT_EVERY;
            let _ = world.client(self.client).commit(now);
        }
        if self.closing.is_none() && self.restarts.front().is_some_and(|t| *t <= at) {
            self.restarts.pop_front();
            self.closing = Some(at);
            world.client(self.client).close_consumer(now);
        }
        if let Some(since) = self.closing
            && at >= since + RESTART_WAIT
        {
            self.finish_restart(world);
        }
    }

    fn finish_restart(&mut self, world: &mut World) {
        self.closing = None;
        self.last_restart = Some(world.elapsed());
        let now = world.now();
        world.client(self.client).close(now);
        while world.poll_record(self.client).is_some() {}
        for (p, max) in &self.max {
            let floor = self.floor.get(p).copied().unwrap_or((i64::MIN, 0));
            if floor <= *max {
                self.windows.entry(*p).or_default().push((floor, *max));
            }
        }
        self.start(world);
    }

    /// Consumes records and events, and checks them.
    pub fn on_events(&mut self, world: &mut World) {
        while let Some(r) = world.poll_record(self.client) {
            let p = r.partition;
            let pos = (r.offset, r.index);
            let value = r
                .value
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default();
            if let Some(last) = self.last.get(&p)
                && *last >= pos
            {
                world.report(
                    "consumer-in-order",
                    format!(
                        "t0-{p}: {pos:?} delivered after {last:?} (incarnation {})",
                        self.incarnations
                    ),
                );
            }
            self.last.insert(p, pos);
            let m = self.max.entry(p).or_insert(pos);
            *m = (*m).max(pos);
            if self.delivered.insert((p, pos), value).is_some() {
                let allowed = self
                    .windows
                    .get(&p)
                    .is_some_and(|w| w.iter().any(|(lo, hi)| *lo <= pos && pos <= *hi));
                if !allowed {
                    world.report(
                        "consumer-exactly-once",
                        format!(
                            "t0-{p}: {pos:?} delivered twice (committed {:?}, incarnation {})",
                            self.floor.get(&p),
                            self.incarnations
                        ),
                    );
                }
            }
        }
        while let Some(e) = world.poll_event(self.client) {
            let Event::Consumer(e) = e else { continue };
            match e {
                ConsumerEvent::CommitCompleted {
                    result: Ok(list), ..
                } => {
                    for (tp, pos) in list {
                        let f = self
                            .floor
                            .entry(tp.partition)
                            .or_insert((pos.offset, pos.index));
                        *f = (*f).max((pos.offset, pos.index));
                    }
                }
                ConsumerEvent::GroupJoined { member_id, .. } => {
                    self.last_join = Some((world.elapsed(), member_id));
                }
                ConsumerEvent::GroupRejoining { reason, retry_in } => {
                    self.rejoins += 1;
                    self.last_rejoin =
                        format!("at {:?}: {reason} (retry in {retry_in:?})", world.elapsed());
                }
                ConsumerEvent::Closed if self.closing.is_some() => self.finish_restart(world),
                _ => {}
            }
        }
    }

    /// Acknowledged records (producer and raw) not delivered yet.
    pub fn missing(&self, producer: Option<&ProducerLoad>, ledger: &Ledger) -> Vec<(i32, Pos)> {
        let mut want: Vec<(i32, Pos)> = Vec::new();
        if let Some(p) = producer {
            want.extend(p.written.keys().copied());
        }
        for ((p, offset), blob) in &ledger.acked {
            let n = blob_records(blob.clone()).count();
            want.extend((0..n).map(|i| (*p, (*offset, i as u32))));
        }
        want.retain(|k| !self.delivered.contains_key(k));
        want
    }

    /// End check: delivered values equal the acknowledged ones.
    pub fn check_values(&self, world: &mut World, producer: Option<&ProducerLoad>) {
        let Some(producer) = producer else { return };
        for (k, v) in &producer.written {
            if let Some(d) = self.delivered.get(k)
                && d != v
            {
                world.report(
                    "consumer-values",
                    format!("t0-{}@{:?}: delivered {d}, acknowledged {v}", k.0, k.1),
                );
                return;
            }
        }
    }
}
