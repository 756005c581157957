//! The [`World`]: one seeded, single-threaded simulation of sim brokers, sans-IO clients and
//! the faulty network between them, on a virtual clock.

use super::check::Violation;
use super::net::{NetConfig, Pipe};
use super::plan::FaultAction;
use super::trace::TraceHash;
use super::wire::{LinkObserver, Outstanding};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{Client, ClientConfig, ConnId, ConsumerRecord, DisconnectReason, Event};
use stellflow_sim::cluster::{ConnId as SimConnId, SimCluster};
use stellflow_sim::config::ClusterConfig;
use stellflow_sim::knobs::{DelayRule, Fault, FaultRule};
use stellflow_sim::rng::SimRng;

/// Appends one readable line to an optional log (formatted only when the log is kept).
macro_rules! note {
    ($log:expr, $at:expr, $($arg:tt)*) => {
        let at: Duration = $at;
        if let Some(log) = $log.as_mut() {
            log.push(format!("{:>11.6} {}", at.as_secs_f64(), format_args!($($arg)*)));
        }
    };
}

/// One of a client's connections as the world sees it ([`World::links`]).
#[derive(Debug, Clone)]
pub struct LinkView {
    /// The client's connection id.
    pub conn: ConnId,
    /// The broker at the other end.
    pub broker: i32,
    /// Whether the ApiVersions answer reached the client.
    pub negotiated: bool,
    /// Whether the broker side is gone (half-open or black hole); the client cannot know.
    pub dead: bool,
    /// Requests written on it and not answered, oldest first (bodies for the tapped API).
    pub outstanding: Vec<Outstanding>,
}

/// Identifies a client added with [`World::add_client`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub usize);

/// Counters of what happened in a world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorldStats {
    /// Request frames the clients put on the wire.
    pub requests: u64,
    /// Connections established.
    pub connects: u64,
    /// Connection attempts that failed (broker down, partitioned, unknown).
    pub connect_failures: u64,
    /// Connections reset by the network.
    pub resets: u64,
    /// Connections made half-open.
    pub half_opens: u64,
    /// Connections the brokers closed.
    pub broker_closes: u64,
    /// Client `handle_timeout` calls (timer wake-ups).
    pub wakeups: u64,
    /// Time steps taken.
    pub steps: u64,
}

#[derive(Debug)]
struct Slot {
    client: Client,
    events: VecDeque<Event>,
    records: VecDeque<ConsumerRecord>,
    tap: Option<ApiKey>,
    tapped: Vec<(Duration, Bytes)>,
    max_in_flight: usize,
    requests: u64,
    wakeups: u64,
}

#[derive(Debug)]
struct Link {
    sim: Option<SimConnId>,
    broker: i32,
    up: Pipe,
    down: Pipe,
    half_open: bool,
    /// Silent black hole: no RST ever comes back (only with [`FaultAction::BlackHole`]).
    black_hole: bool,
    /// An RST is on its way back (a write hit a half-open connection).
    rst: bool,
    obs: LinkObserver,
}

#[derive(Debug)]
struct PendingConnect {
    at: Instant,
    client: usize,
    conn: ConnId,
    address: String,
}

/// What ends a timed fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undo {
    Heal(i32),
    Restart(i32),
    Resume(i32),
    ReorderOff,
    DelaysOff,
}

/// A simulated world: `N` sim brokers ([`SimCluster`]), any number of sans-IO clients, a
/// faulty network, a virtual clock and invariant checks after every step.
///
/// Everything is driven from one thread; the only randomness is the seed, the only time is
/// the virtual clock (one `Instant` captured at construction is the epoch), so the same seed
/// and the same commands always give the same [`World::trace_hash`].
///
/// Drive it with [`World::step`], [`World::run_for`] or [`World::run_until`]; give clients
/// commands through [`World::client`] (passing [`World::now`]) and read their outcomes with
/// [`World::poll_event`]. Inject faults with [`World::apply`], end them with [`World::heal`].
/// Checked continuously: ApiVersions first on every connection, negotiated versions, the
/// in-flight limit, unique correlation ids, `poll_timeout` never in the past after
/// `handle_timeout`, and that virtual time keeps moving (no livelock).
#[derive(Debug)]
pub struct World {
    epoch: Instant,
    now: Instant,
    rng: SimRng,
    net: NetConfig,
    cluster: SimCluster,
    clients: Vec<Slot>,
    links: BTreeMap<(usize, u64), Link>,
    by_sim: BTreeMap<SimConnId, (usize, u64)>,
    connects: Vec<PendingConnect>,
    partitioned: BTreeSet<i32>,
    paused: BTreeSet<i32>,
    crashed: BTreeSet<i32>,
    /// When a crashed broker last restarted (virtual time since the start).
    last_broker_restart: Option<Duration>,
    undo: Vec<(Instant, Undo)>,
    trace: TraceHash,
    stats: WorldStats,
    violations: Vec<Violation>,
    stuck_steps: u32,
    buf: BytesMut,
    /// Readable trace lines, when asked for with [`World::keep_log`].
    log: Option<Vec<String>>,
}

/// Bound on drain passes at one instant before the world reports a livelock.
const MAX_PASSES: usize = 100_000;
/// Bound on consecutive steps that do not advance the clock.
const MAX_STUCK_STEPS: u32 = 10_000;

impl World {
    /// A world with the brokers of `cluster`, the network `net`, and all randomness from
    /// `seed`. Add topics through [`World::cluster_mut`] and clients with
    /// [`World::add_client`].
    pub fn new(seed: u64, cluster: ClusterConfig, net: NetConfig) -> World {
        let epoch = Instant::now();
        let mut rng = SimRng::new(seed);
        let cluster = SimCluster::new(cluster, epoch, rng.next_u64());
        World {
            epoch,
            now: epoch,
            rng,
            net,
            cluster,
            clients: Vec::new(),
            links: BTreeMap::new(),
            by_sim: BTreeMap::new(),
            connects: Vec::new(),
            partitioned: BTreeSet::new(),
            paused: BTreeSet::new(),
            crashed: BTreeSet::new(),
            last_broker_restart: None,
            undo: Vec::new(),
            trace: TraceHash::default(),
            stats: WorldStats::default(),
            violations: Vec::new(),
            stuck_steps: 0,
            buf: BytesMut::with_capacity(64 * 1024),
            log: None,
        }
    }

    /// Adds a sans-IO client built from `config` (its seed comes from the world's).
    ///
    /// # Errors
    /// The client's configuration error.
    pub fn add_client(
        &mut self,
        config: ClientConfig,
    ) -> Result<ClientId, stellflow_sansio::ConfigError> {
        let max_in_flight = config.max_in_flight_per_connection;
        let client = Client::new(config, self.now, self.rng.next_u64())?;
        self.clients.push(Slot {
            client,
            events: VecDeque::new(),
            records: VecDeque::new(),
            tap: None,
            tapped: Vec::new(),
            max_in_flight,
            requests: 0,
            wakeups: 0,
        });
        let id = ClientId(self.clients.len() - 1);
        self.settle();
        Ok(id)
    }

    /// The client `id`, to give it commands (pass [`World::now`] as `now`). Outputs are
    /// drained at the next [`World::settle`] or step.
    ///
    /// # Panics
    /// If `id` does not come from this world.
    pub fn client(&mut self, id: ClientId) -> &mut Client {
        &mut self.clients[id.0].client
    }

    /// Number of clients.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// The next event client `id` reported (events are buffered as the world drains).
    pub fn poll_event(&mut self, id: ClientId) -> Option<Event> {
        self.clients.get_mut(id.0)?.events.pop_front()
    }

    /// The next consumer record client `id` delivered (the world drains
    /// [`Client::poll_record`] as part of the drain rule and buffers the records).
    pub fn poll_record(&mut self, id: ClientId) -> Option<ConsumerRecord> {
        self.clients.get_mut(id.0)?.records.pop_front()
    }

    /// Keeps the bodies of every request of `api` that client `id` writes from now on (on
    /// connections opened from now on), with the virtual time it hit the wire; read them with
    /// [`World::take_tapped`].
    pub fn tap_requests(&mut self, id: ClientId, api: ApiKey) {
        if let Some(s) = self.clients.get_mut(id.0) {
            s.tap = Some(api);
        }
    }

    /// The tapped request bodies of client `id` since the last call.
    pub fn take_tapped(&mut self, id: ClientId) -> Vec<(Duration, Bytes)> {
        self.clients
            .get_mut(id.0)
            .map(|s| std::mem::take(&mut s.tapped))
            .unwrap_or_default()
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// When a crashed broker last restarted (virtual time since the start), if one did.
    pub fn last_broker_restart(&self) -> Option<Duration> {
        self.last_broker_restart
    }

    /// Every eviction pass of `group_id` on any broker since that broker last (re)started, as
    /// (virtual time since the start, evicted member ids), oldest first.
    pub fn group_evictions(&self, group_id: &str) -> Vec<(Duration, Vec<String>)> {
        let mut out: Vec<(Duration, Vec<String>)> = self
            .cluster
            .broker_ids()
            .into_iter()
            .filter_map(|id| self.cluster.broker(id))
            .flat_map(|b| b.groups().evictions())
            .filter(|e| e.group_id.as_deref() == Some(group_id))
            .map(|e| {
                (
                    e.at.saturating_duration_since(self.epoch),
                    e.members.clone(),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Virtual time since the start of the world.
    pub fn elapsed(&self) -> Duration {
        self.now - self.epoch
    }

    /// The simulated brokers (read-only: logs, metadata, knobs).
    pub fn cluster(&self) -> &SimCluster {
        &self.cluster
    }

    /// The simulated brokers, for controller calls (`create_topic`, ...) and knobs. Drain
    /// with [`World::settle`] afterwards.
    pub fn cluster_mut(&mut self) -> &mut SimCluster {
        &mut self.cluster
    }

    /// Request frames client `id` wrote and timer wake-ups it had so far.
    pub fn client_activity(&self, id: ClientId) -> (u64, u64) {
        self.clients
            .get(id.0)
            .map_or((0, 0), |s| (s.requests, s.wakeups))
    }

    /// From now on, keeps a readable trace (one line per fault, connect, disconnect, request
    /// and response frame, client event and violation, with its virtual time) for
    /// [`World::take_log`]. Off by default; it does not change the run or its trace hash.
    pub fn keep_log(&mut self) {
        if self.log.is_none() {
            self.log = Some(Vec::new());
        }
        for link in self.links.values_mut() {
            link.obs.record_frames = true;
        }
    }

    /// The readable trace lines kept since the last call (empty unless [`World::keep_log`]).
    pub fn take_log(&mut self) -> Vec<String> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Adds a line to the readable trace (if kept), e.g. a workload's own observations.
    pub fn note(&mut self, line: impl FnOnce() -> String) {
        let at = self.elapsed();
        note!(self.log, at, "{}", line());
    }

    /// Client `id`'s connections that are established (connect done, not closed by either
    /// side), with the requests written on each and not answered yet.
    pub fn links(&self, id: ClientId) -> Vec<LinkView> {
        self.links
            .range((id.0, 0)..=(id.0, u64::MAX))
            .map(|((_, conn), l)| {
                let mut outstanding: Vec<Outstanding> = l.obs.outstanding().cloned().collect();
                outstanding.sort_by_key(|o| o.sent_at);
                LinkView {
                    conn: ConnId(*conn),
                    broker: l.broker,
                    negotiated: l.obs.negotiated(),
                    dead: l.half_open,
                    outstanding,
                }
            })
            .collect()
    }

    /// What happened so far.
    pub fn stats(&self) -> WorldStats {
        self.stats
    }

    /// The digest of everything observable so far.
    pub fn trace_hash(&self) -> u64 {
        self.trace.value()
    }

    /// Every invariant violation found so far (the world keeps running after one).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Records a violation found by code outside the world (workload checks).
    pub fn report(&mut self, invariant: &'static str, detail: String) {
        let at = self.elapsed();
        note!(self.log, at, "VIOLATION {invariant}: {detail}");
        self.violations.push(Violation {
            at,
            invariant,
            detail,
        });
    }

    /// Brokers currently partitioned from the clients.
    pub fn partitioned(&self) -> &BTreeSet<i32> {
        &self.partitioned
    }

    /// Whether any fault (partition, crash, paused replication, timed knob) is still active.
    pub fn faults_active(&self) -> bool {
        !self.undo.is_empty() || !self.partitioned.is_empty() || !self.crashed.is_empty()
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    // ----- faults -------------------------------------------------------------------------

    /// Applies a fault now. Timed faults end by themselves (or at [`World::heal`]).
    pub fn apply(&mut self, action: FaultAction) {
        let m = self.micros();
        self.trace.record(b'F', m, format!("{action:?}").as_bytes());
        note!(self.log, self.elapsed(), "FAULT {action:?}");
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
        }
        self.settle();
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

    fn run_undo(&mut self, u: Undo) {
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
    fn reset_link(&mut self, key: (usize, u64)) {
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
                DisconnectReason::Io("connection reset by peer".to_owned()),
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

    // ----- driving ------------------------------------------------------------------------

    /// The earliest instant anything in the world has work.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        };
        for s in &mut self.clients {
            consider(s.client.poll_timeout());
        }
        consider(self.cluster.poll_timeout());
        for l in self.links.values() {
            if !self.partitioned.contains(&l.broker) {
                consider(l.up.next_at());
                consider(l.down.next_at());
            }
        }
        consider(self.connects.iter().map(|c| c.at).min());
        consider(self.undo.iter().map(|(t, _)| *t).min());
        best
    }

    /// One step: drains everything due now, then advances the clock to the next deadline (at
    /// most to `limit`), fires the timers due then, and drains again.
    pub fn step(&mut self, limit: Instant) {
        self.settle();
        let target = self
            .next_deadline()
            .map_or(limit, |d| d.min(limit))
            .max(self.now);
        if target == self.now {
            self.stuck_steps += 1;
            if self.stuck_steps == MAX_STUCK_STEPS {
                let due: Vec<usize> = self
                    .clients
                    .iter_mut()
                    .enumerate()
                    .filter_map(|(i, s)| {
                        s.client.poll_timeout().filter(|d| *d <= target).map(|_| i)
                    })
                    .collect();
                let cluster_due = self.cluster.poll_timeout().is_some_and(|d| d <= target);
                self.report(
                    "time-advances",
                    format!(
                        "{MAX_STUCK_STEPS} steps without the clock moving; clients whose poll_timeout stays due: {due:?}; cluster due: {cluster_due}"
                    ),
                );
            }
        } else {
            self.stuck_steps = 0;
        }
        self.now = target;
        self.stats.steps += 1;
        let now = self.now;
        self.cluster.handle_timeout(now);
        let due: Vec<Undo> = {
            let (due, keep): (Vec<_>, Vec<_>) = self.undo.drain(..).partition(|(t, _)| *t <= now);
            self.undo = keep;
            due.into_iter().map(|(_, u)| u).collect()
        };
        for u in due {
            self.run_undo(u);
        }
        let mut woken = Vec::new();
        for (i, slot) in self.clients.iter_mut().enumerate() {
            if slot.client.poll_timeout().is_some_and(|d| d <= now) {
                slot.client.handle_timeout(now);
                self.stats.wakeups += 1;
                slot.wakeups += 1;
                woken.push(i);
            }
        }
        self.settle();
        // After handle_timeout(now) and a full drain (records included) the next deadline is
        // never in the past. (It may be `now`: the consumer asks for an immediate call once
        // taken records freed buffer space; a driver spinning on that forever is caught by
        // the `time-advances` check.)
        for i in woken {
            if let Some(slot) = self.clients.get_mut(i)
                && let Some(d) = slot.client.poll_timeout()
                && d < now
            {
                let past = now - d;
                self.report(
                    "poll-timeout-not-in-past",
                    format!(
                        "client {i}: poll_timeout {past:?} before now after handle_timeout(now) and a full drain"
                    ),
                );
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end && self.stuck_steps < MAX_STUCK_STEPS {
            self.step(end);
        }
    }

    /// Runs until `pred` holds (checked after every step) or `max` of virtual time passed;
    /// returns whether `pred` held.
    pub fn run_until(&mut self, max: Duration, mut pred: impl FnMut(&mut World) -> bool) -> bool {
        let end = self.now + max;
        loop {
            self.settle();
            if pred(self) {
                return true;
            }
            if self.now >= end || self.stuck_steps >= MAX_STUCK_STEPS {
                return false;
            }
            self.step(end);
        }
    }

    /// Drains every output of every party at the current instant (the drain rule), delivering
    /// whatever the network has due, until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..MAX_PASSES {
            if !self.pass() {
                return;
            }
        }
        self.report(
            "quiescence",
            format!("{MAX_PASSES} drain passes at one instant"),
        );
    }

    fn pass(&mut self) -> bool {
        let mut progress = false;
        for i in 0..self.clients.len() {
            progress |= self.drain_client(i);
        }
        progress |= self.drain_cluster();
        progress |= self.deliver();
        progress |= self.finish_connects();
        progress
    }

    fn drain_client(&mut self, i: usize) -> bool {
        let now = self.now;
        let m = self.micros();
        let mut progress = false;
        let Some(slot) = self.clients.get_mut(i) else {
            return false;
        };
        while let Some(cr) = slot.client.poll_connect() {
            progress = true;
            let address = cr.address.to_string();
            self.trace.record(b'C', m, address.as_bytes());
            note!(
                self.log,
                now - self.epoch,
                "client {i} conn {}: connect to {address}",
                cr.conn.0
            );
            let at = now + self.net.latency;
            self.connects.push(PendingConnect {
                at,
                client: i,
                conn: cr.conn,
                address,
            });
        }
        while let Some(c) = slot.client.poll_close() {
            progress = true;
            self.trace.record(b'X', m, &c.0.to_le_bytes());
            note!(
                self.log,
                now - self.epoch,
                "client {i} conn {}: closed by the client",
                c.0
            );
            self.connects.retain(|p| !(p.client == i && p.conn == c));
            if let Some(link) = self.links.remove(&(i, c.0))
                && let Some(sim) = link.sim
            {
                self.by_sim.remove(&sim);
                self.cluster.disconnect(sim);
            }
        }
        loop {
            self.buf.clear();
            let Some(c) = slot.client.poll_transmit(now, &mut self.buf) else {
                break;
            };
            progress = true;
            self.trace.record(b'U', m, &self.buf);
            let timeouts = slot.client.counters().timeouts;
            let Some(link) = self.links.get_mut(&(i, c.0)) else {
                self.violations.push(Violation {
                    at: now - self.epoch,
                    invariant: "transmit-on-open-connection",
                    detail: format!(
                        "client {i} wrote {} bytes to {c:?}, which is not connected",
                        self.buf.len()
                    ),
                });
                continue;
            };
            let before = link.obs.requests;
            if let Err((invariant, detail)) =
                link.obs
                    .on_request_bytes(&self.buf, now - self.epoch, timeouts, slot.max_in_flight)
            {
                self.violations.push(Violation {
                    at: now - self.epoch,
                    invariant,
                    detail: format!("client {i} {c:?}: {detail}"),
                });
            }
            self.stats.requests += link.obs.requests - before;
            slot.requests += link.obs.requests - before;
            let at = now - self.epoch;
            slot.tapped
                .extend(link.obs.tapped.drain(..).map(|b| (at, b)));
            for f in link.obs.frames.drain(..) {
                note!(self.log, at, "client {i} conn {}: {f}", c.0);
            }
            if !link.half_open {
                link.up.push(&mut self.rng, &self.net, now, &self.buf);
            } else if !link.black_hole && !link.rst {
                link.rst = true;
                link.down
                    .push_fin(&mut self.rng, &self.net, now + self.net.latency);
            }
        }
        while let Some(e) = slot.client.poll_event() {
            progress = true;
            self.trace.record(b'E', m, format!("{i}{e:?}").as_bytes());
            note!(self.log, now - self.epoch, "client {i} event {e:?}");
            slot.events.push_back(e);
        }
        while let Some(r) = slot.client.poll_record() {
            progress = true;
            let pos = format!("{i}:{}:{}:{}", r.partition, r.offset, r.index);
            self.trace.record(b'r', m, pos.as_bytes());
            slot.records.push_back(r);
        }
        progress
    }

    fn drain_cluster(&mut self) -> bool {
        let now = self.now;
        let mut progress = false;
        while let Some((sc, bytes)) = self.cluster.poll_transmit() {
            progress = true;
            if let Some(key) = self.by_sim.get(&sc)
                && let Some(link) = self.links.get_mut(key)
            {
                link.down.push(&mut self.rng, &self.net, now, &bytes);
            }
        }
        let mut closed = Vec::new();
        while let Some(sc) = self.cluster.poll_closed() {
            closed.push(sc);
        }
        closed.sort();
        for sc in closed {
            progress = true;
            self.cluster.disconnect(sc);
            self.stats.broker_closes += 1;
            if let Some(key) = self.by_sim.remove(&sc)
                && let Some(link) = self.links.get_mut(&key)
            {
                link.sim = None;
                link.up.clear();
                link.down.push_fin(&mut self.rng, &self.net, now);
            }
        }
        progress
    }

    fn deliver(&mut self) -> bool {
        let now = self.now;
        let m = self.micros();
        let mut progress = false;
        let keys: Vec<(usize, u64)> = self.links.keys().copied().collect();
        for key in keys {
            let Some(link) = self.links.get_mut(&key) else {
                continue;
            };
            if self.partitioned.contains(&link.broker) {
                continue;
            }
            self.buf.clear();
            link.up.take_due(now, &mut self.buf);
            if !self.buf.is_empty() {
                progress = true;
                if let Some(sim) = link.sim {
                    self.cluster.handle_input(sim, now, &mut self.buf);
                }
            }
            self.buf.clear();
            let fin = link.down.take_due(now, &mut self.buf);
            if !self.buf.is_empty() {
                progress = true;
                self.trace.record(b'D', m, &self.buf);
                if let Err((invariant, detail)) = link.obs.on_response_bytes(&self.buf) {
                    self.violations.push(Violation {
                        at: now - self.epoch,
                        invariant,
                        detail,
                    });
                }
                for f in link.obs.frames.drain(..) {
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: {f}",
                        key.0,
                        key.1
                    );
                }
                if let Some(slot) = self.clients.get_mut(key.0) {
                    slot.client.handle_input(ConnId(key.1), now, &mut self.buf);
                }
            }
            if fin {
                progress = true;
                self.links.remove(&key);
                self.trace.record(b'P', m, &key.1.to_le_bytes());
                note!(
                    self.log,
                    now - self.epoch,
                    "client {} conn {}: closed by the peer",
                    key.0,
                    key.1
                );
                if let Some(slot) = self.clients.get_mut(key.0) {
                    slot.client.handle_disconnected(
                        ConnId(key.1),
                        now,
                        DisconnectReason::PeerClosed,
                    );
                }
            }
        }
        progress
    }

    fn finish_connects(&mut self) -> bool {
        let now = self.now;
        let m = self.micros();
        if !self.connects.iter().any(|c| c.at <= now) {
            return false;
        }
        let (due, keep): (Vec<_>, Vec<_>) = self.connects.drain(..).partition(|c| c.at <= now);
        self.connects = keep;
        for c in due {
            let broker = self.cluster.broker_for_addr(&c.address);
            let result = match broker {
                Some(b) if self.partitioned.contains(&b) => Err("connection timed out".to_owned()),
                Some(b) => self
                    .cluster
                    .connect(b, now)
                    .map(|sim| (b, sim))
                    .map_err(|e| e.to_string()),
                None => Err(format!("unknown host {}", c.address)),
            };
            let Some(slot) = self.clients.get_mut(c.client) else {
                continue;
            };
            match result {
                Ok((broker, sim)) => {
                    self.stats.connects += 1;
                    self.trace.record(b'c', m, &c.conn.0.to_le_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: connected to broker {broker}",
                        c.client,
                        c.conn.0
                    );
                    self.links.insert(
                        (c.client, c.conn.0),
                        Link {
                            sim: Some(sim),
                            broker,
                            up: Pipe::new(now),
                            down: Pipe::new(now),
                            half_open: false,
                            black_hole: false,
                            rst: false,
                            obs: LinkObserver::tapping(slot.tap).recording(self.log.is_some()),
                        },
                    );
                    self.by_sim.insert(sim, (c.client, c.conn.0));
                    slot.client.handle_connected(c.conn, now);
                }
                Err(e) => {
                    self.stats.connect_failures += 1;
                    self.trace.record(b'f', m, e.as_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: connect failed: {e}",
                        c.client,
                        c.conn.0
                    );
                    slot.client.handle_disconnected(
                        c.conn,
                        now,
                        DisconnectReason::ConnectFailed(e),
                    );
                }
            }
        }
        true
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
