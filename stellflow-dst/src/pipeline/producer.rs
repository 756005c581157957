//! The producer workload ([`ProducerLoad`]): records produced at random times with explicit
//! partitions and per-partition sequence numbers, their outcomes, and the log checks at the end.

use super::*;

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
    pub(super) client: ClientId,
    pub(super) linger: Duration,
    /// The client's request timeout: no request of the producer times out sooner.
    pub(super) request_timeout: Duration,
    /// No request of the producer is still awaited by the client after this long (a Produce
    /// with `acks = -1` may get longer than the request timeout, up to the ack timeout plus
    /// a margin; this bound covers both).
    pub(super) request_timeout_max: Duration,
    pub(super) max_in_flight: usize,
    /// Every record value seen on the wire.
    pub(super) sent: BTreeSet<String>,
    /// A Produce of this producer was on the wire.
    pub(super) produce_seen: bool,
    /// Per partition: since when it has been sendable without a break.
    pub(super) sendable_since: BTreeMap<i32, Duration>,
    /// Per partition: the oldest unsent record and the first sample at which it was due while
    /// metadata named a leader (the producer may have handed it to the network layer then).
    pub(super) attempt_from: BTreeMap<i32, (String, Duration)>,
    /// Per partition: since when the client's metadata has named a leader without a break.
    pub(super) leader_known_since: BTreeMap<i32, Duration>,
    /// When the client's metadata first named the partitions of the topic (records produced
    /// before wait unbatched until then, and their linger starts then).
    pub(super) topic_known_at: Option<Duration>,
    /// Batches held to the upper bound: their first record was seen unsent on a sendable
    /// partition at least once (counted once per batch).
    pub(super) bound_checks: u64,
    /// Per partition: the first record of the last batch counted in `bound_checks`.
    pub(super) bound_counted: BTreeMap<i32, String>,
    pub(super) idempotent: bool,
    pub(super) bound: Duration,
    pub(super) schedule: VecDeque<(Duration, i32)>,
    pub(super) seq: BTreeMap<i32, u64>,
    pub(super) book: OutcomeBook<ProduceId>,
    pub(super) info: BTreeMap<ProduceId, (i32, u64, String)>,
    pub(super) produced_at: BTreeMap<String, Duration>,
    pub(super) on_wire: BTreeSet<String>,
    pub(super) flushes: Vec<Duration>,
    pub(super) acked: BTreeMap<i32, BTreeMap<u64, Pos>>,
    /// Records known to be in the log: `(partition, position) → value`.
    pub written: BTreeMap<(i32, Pos), String>,
    pub(super) goals: BTreeSet<i32>,
    pub(super) goal_ids: BTreeMap<ProduceId, i32>,
    pub(super) retry_at: Option<Duration>,
    pub(super) partitions: i32,
    /// The client's `retry_backoff_max` (for the resume bound).
    pub(super) retry_backoff_max: Duration,
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
        let retry_backoff_max = p.retry_backoff_max;
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
            retry_backoff_max,
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

    /// The longest the client waits for the answer to one of the producer's requests (the
    /// request timeout, or for an `acks = -1` Produce the ack timeout plus a second).
    pub fn request_timeout_max(&self) -> Duration {
        self.request_timeout_max
    }

    /// Records without an outcome yet.
    pub fn pending(&self) -> usize {
        self.book.pending()
    }

    /// Outcomes received.
    pub fn completed(&self) -> usize {
        self.book.completed()
    }

    /// The client's `retry_backoff_max`.
    pub fn retry_backoff_max(&self) -> Duration {
        self.retry_backoff_max
    }

    /// Whether the producer is idempotent.
    pub fn idempotent(&self) -> bool {
        self.idempotent
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

/// The entries `(offset, blob)` of the current leader's log of `t0-partition` (the last
/// leader's, once the cluster is gone for good: its logs stay).
pub fn leader_entries(world: &World, partition: i32) -> Option<Vec<(i64, Bytes)>> {
    let cluster = world.cluster();
    let key = Some(TOPIC.to_owned());
    let gone = world.gone_at().is_some();
    let leader = cluster.broker_ids().into_iter().find(|id| {
        (cluster.is_alive(*id) || gone)
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
