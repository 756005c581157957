//! The [`World`]: one seeded, single-threaded simulation of sim brokers, sans-IO clients and
//! the faulty network between them, on a virtual clock.
//!
//! One file per job: this one holds the world's state, its construction and what reads it;
//! `faults.rs` applies, undoes and heals faults; `members.rs` holds the faults of one client
//! (crash, pause, isolation from a broker); `drive.rs` steps virtual time, drains clients and
//! brokers and moves bytes through the network.

use super::check::Violation;
use super::net::{NetConfig, Pipe};
use super::plan::{FaultAction, Garbage};
use super::trace::TraceHash;
use super::wire::{LinkObserver, Outstanding};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{
    Client, ClientConfig, ConnId, ConsumerRecord, DisconnectReason, Event, IoFailure,
};
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

mod drive;
mod faults;
mod impostor;
mod members;

pub use impostor::NOT_STELLFLOW_BOUND;
use impostor::{ImpostorConn, ImpostorLink};

/// One of a client's connections as the world sees it ([`World::links`]).
#[derive(Debug, Clone)]
pub struct LinkView {
    /// The client's connection id.
    pub conn: ConnId,
    /// The broker at the other end.
    pub broker: i32,
    /// Whether the ApiVersions answer reached the client.
    pub negotiated: bool,
    /// Whether the broker side is gone (half-open, black hole, or given up by the client's
    /// host while the client is paused); the client cannot know yet.
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
    /// Connections a client's host gave up because written bytes stayed unacknowledged
    /// past the connection's user timeout (`ConnectRequest::unacked_timeout`).
    pub user_timeouts: u64,
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
    /// How the world takes this client's records (chosen from the client's seed).
    delivery: Delivery,
    /// Leases taken so far (with [`Delivery::Leases`]).
    leases: u64,
    tap: Option<ApiKey>,
    tapped: Vec<(Duration, Bytes)>,
    max_in_flight: usize,
    requests: u64,
    wakeups: u64,
    /// Whether the world drives this client (see [`World::pause_client`],
    /// [`World::crash_client`]).
    run: Run,
    /// Brokers this client is cut off from ([`World::isolate_client`]).
    isolated: BTreeSet<i32>,
    /// The shortest reconnect delay at the cap its configuration allows
    /// (`reconnect_backoff_max` less the jitter): how far apart reconnects to a peer that is
    /// not a Stellflow broker must be.
    reconnect_cap_min: Duration,
    /// The `Output::Timeout` the client's last drain ended with.
    deadline: Option<Instant>,
}

/// Whether a client runs: a paused one is not driven at all (no timers, no input, no output,
/// as under SIGSTOP) until it resumes; a crashed one never again, and its sockets are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Running,
    Paused,
    Crashed,
}

/// How the world takes a client's records as it drains: one by one, or through leases
/// (`DriverExt::lease_records`, decoded, then `DriverExt::redeem_lease`) of `max` records, every
/// `stale_every`-th of them made stale on purpose by taking a record before redeeming it (the
/// exactness checks then catch a stale lease that delivers).
#[derive(Debug, Clone, Copy)]
enum Delivery {
    Records,
    Leases { max: usize, stale_every: u64 },
}

impl Delivery {
    fn from_seed(seed: u64) -> Self {
        match seed % 4 {
            0 => Delivery::Records,
            _ => Delivery::Leases {
                max: [1, 7, 64, 500][(seed >> 2) as usize % 4],
                stale_every: [0, 2, 5, 0][(seed >> 4) as usize % 4],
            },
        }
    }
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
    /// The peer is an impostor speaking garbage ([`FaultAction::Impostor`]), not a broker.
    impostor: Option<ImpostorLink>,
    /// The client host's `TCP_USER_TIMEOUT` for this connection, as the core asked
    /// (`ConnectRequest::unacked_timeout`).
    unacked_timeout: Option<Duration>,
    /// Since when bytes written into a black hole wait for an acknowledgement that never
    /// comes (the pipe holds nothing for them).
    unacked_since: Option<Instant>,
    /// The client's host gave the connection up (its user timeout passed): the broker side
    /// is gone, and the client learns it (`ETIMEDOUT`) as soon as it runs.
    timed_out: bool,
}

impl Link {
    /// When the client's host gives this connection up: its user timeout after the oldest
    /// bytes still unacknowledged were written (in the pipe, or lost in a black hole); `None`
    /// without a timeout, with nothing unacknowledged, or once given up.
    fn gives_up_at(&self) -> Option<Instant> {
        if self.timed_out {
            return None;
        }
        let since = [self.up.oldest_written(), self.unacked_since]
            .into_iter()
            .flatten()
            .min();
        Some(since? + self.unacked_timeout?)
    }
}

/// A connection the client closed gracefully with bytes still on their way to the broker:
/// they keep arriving (a closed socket's host still delivers what it had sent), then the
/// broker sees the close. Answers to it are dropped. An abortive close (`CloseMode::Abort`)
/// never becomes one: its bytes are discarded at once.
#[derive(Debug)]
struct ClosingLink {
    client: usize,
    broker: i32,
    sim: SimConnId,
    up: Pipe,
    /// The user timeout still applies to a closed socket's last bytes.
    unacked_timeout: Option<Duration>,
}

#[derive(Debug)]
struct PendingConnect {
    at: Instant,
    client: usize,
    conn: ConnId,
    address: String,
    unacked_timeout: Option<Duration>,
}

/// What ends a timed fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undo {
    Heal(i32),
    Restart(i32),
    Resume(i32),
    ReorderOff,
    DelaysOff,
    /// A paused client runs again.
    ResumeClient(usize),
    /// A client reaches this broker again.
    Reconnect(usize, i32),
    /// The impostor on this broker's address leaves and the broker restarts.
    Unmask(i32),
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
/// in-flight limit, unique correlation ids, the drain's `Timeout` never in the past after
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
    /// Gracefully closed connections still delivering their last bytes ([`ClosingLink`]).
    closing: Vec<ClosingLink>,
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
    /// When every broker went away for good ([`FaultAction::ClusterGone`]).
    gone: Option<Duration>,
    /// Brokers whose address an impostor holds now, and what it answers.
    impostors: BTreeMap<i32, Garbage>,
    /// Every connection made to an impostor, for the not-a-Stellflow-broker checks.
    impostor_conns: BTreeMap<(usize, u64), ImpostorConn>,
    /// Connections whose `ConnectionError::NotStellflow` event a workload took.
    not_stellflow_taken: BTreeSet<(usize, u64)>,
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
            closing: Vec::new(),
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
            gone: None,
            impostors: BTreeMap::new(),
            impostor_conns: BTreeMap::new(),
            not_stellflow_taken: BTreeSet::new(),
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
        let reconnect_cap_min = config
            .reconnect_backoff_max
            .mul_f64((1.0 - config.backoff_jitter).clamp(0.0, 1.0));
        let seed = self.rng.next_u64();
        let client = Client::new(config, self.now, seed)?;
        self.clients.push(Slot {
            client,
            events: VecDeque::new(),
            records: VecDeque::new(),
            delivery: Delivery::from_seed(seed.rotate_left(17)),
            leases: 0,
            tap: None,
            tapped: Vec::new(),
            max_in_flight,
            requests: 0,
            wakeups: 0,
            run: Run::Running,
            isolated: BTreeSet::new(),
            reconnect_cap_min,
            deadline: None,
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
        let e = self.clients.get_mut(id.0)?.events.pop_front()?;
        if let Some(conn) = impostor::not_stellflow_conn(&e) {
            self.not_stellflow_taken.insert((id.0, conn));
        }
        Some(e)
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
                    dead: l.half_open || l.timed_out,
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

    /// When every broker went away for good ([`FaultAction::ClusterGone`]), if they did.
    pub fn gone_at(&self) -> Option<Duration> {
        self.gone
    }

    /// Whether any fault (partition, crash, paused replication, timed knob) is still active.
    pub fn faults_active(&self) -> bool {
        !self.undo.is_empty() || !self.partitioned.is_empty() || !self.crashed.is_empty()
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}
