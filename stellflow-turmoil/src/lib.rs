//! Deterministic simulation testing of applications built on `stellflow-tokio`: your
//! service's own tokio code runs unchanged on the hosts of a [turmoil] world, against a
//! simulated Stellflow cluster.
//!
//! * **The cluster**: [`SimulatedCluster`] puts N brokers of `stellflow-sim`'s broker model —
//!   the one its conformance suite checks against the real server — on turmoil hosts named
//!   after the brokers' advertised addresses (`broker-1:9092`, ...). Faults of the cluster:
//!   [`SimulatedCluster::crash_broker`] and [`SimulatedCluster::restart_broker`] (a restart
//!   keeps what the real server keeps: logs and committed offsets, not groups or
//!   leadership), [`SimulatedCluster::move_leader`], and the model's knobs through
//!   [`SimulatedCluster::with_model`] (injected errors, slow answers). Faults of the network
//!   between any host and any broker are turmoil's own (`Sim::partition`, `Sim::hold`,
//!   `Sim::set_link_latency`, ...).
//! * **The application**: built with this crate as a dev-dependency, `stellflow-tokio` has
//!   its `turmoil` feature on, and a client that runs on a turmoil host connects over the
//!   simulated network. The only difference from production is how the client is built:
//!   [`SimulatedCluster::connect`] instead of `Client::connect`, so that its seed (and with it
//!   its default `client_id`, its backoff jitter and its partitioner) is drawn from the world.
//! * **Determinism**: everything the client reads from its surroundings comes through the
//!   adapter's `Runtime` — its clock (the host's virtual tokio clock), the wall clock that
//!   stamps records (the world's epoch) and its seed. [`builder`] sets a world up so that a
//!   seed decides it all (turmoil's generator, the epoch, the generator the driver's
//!   `futures_lite::future::race` draws from); [`SimulatedCluster::trace_hash`] is a hash of
//!   every byte the brokers received and sent and of what the applications reported
//!   ([`SimulatedCluster::observe`]): the same seed gives the same hash.
//!
//! ```
//! use std::time::Duration;
//! use stellflow_tokio::{ClientConfig, Record};
//! use stellflow_turmoil::SimulatedCluster;
//!
//! let seed = 7;
//! let mut sim = stellflow_turmoil::builder(seed).build();
//! let cluster = SimulatedCluster::new(3, seed);
//! cluster.create_topic("greetings", 3, 3).unwrap();
//! cluster.install(&mut sim);
//! let bootstrap = cluster.bootstrap();
//! let app = cluster.clone();
//! sim.client("app", async move {
//!     let client = app.connect(ClientConfig::new(&bootstrap)?).await?;
//!     let meta = client.producer().send(Record::new("greetings", "hello")).await?;
//!     app.observe(format!("written at {:?}", meta.offset).as_bytes());
//!     client.close().await?;
//!     Ok(())
//! });
//! sim.run().unwrap();
//! println!("trace hash {:016x}", cluster.trace_hash());
//! ```
//!
//! smol and blocking applications cannot run here: turmoil simulates tokio's network and
//! clock only. Their code is tested against `stellflow_sim::serve` (real sockets, real time).
#![forbid(unsafe_code)]

mod broker;
mod state;
mod trace;

/// The turmoil this crate builds its worlds with (use it to name `turmoil::Sim` and its
/// network faults without a version of your own to keep in step).
pub use turmoil;

use state::{ClusterState, kind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, UNIX_EPOCH};
use stellflow_sim::{ClusterConfig, SimCluster, SimError};
use stellflow_tokio::{Client, ClientConfig, Error, Options};

/// The world's wall clock at its start: 2023-11-14, like the broker model's default.
const EPOCH_SECS: u64 = 1_700_000_000;

/// A turmoil builder for a world decided by `seed`: turmoil's generator seeded, its epoch
/// (the clients' wall clock) fixed, and the thread's fastrand generator (which the client's
/// driver draws from to choose among ready futures) seeded. Build the `Sim` right after, on
/// the thread that runs it. Ticks are 1 ms of virtual time; a world may run an hour of it.
pub fn builder(seed: u64) -> turmoil::Builder {
    fastrand::seed(seed);
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
        .simulation_duration(Duration::from_secs(3600));
    builder
}

/// A simulated Stellflow cluster whose brokers are hosts of a turmoil world. Cheap to clone:
/// the clones share one cluster (give one to each host that needs it).
#[derive(Clone, Debug)]
pub struct SimulatedCluster {
    state: Arc<Mutex<ClusterState>>,
    /// Each broker's id, host name and port.
    brokers: Arc<[(i32, String, u16)]>,
}

impl SimulatedCluster {
    /// `brokers` brokers with ids `1..=brokers`, advertised as `broker-<id>:9092`, with the
    /// server's defaults; every random choice of the model drawn from `seed`.
    pub fn new(brokers: usize, seed: u64) -> Self {
        Self::with_config(ClusterConfig::with_brokers(brokers), seed)
    }

    /// A cluster of the brokers in `config`; each becomes a host named after its advertised
    /// host, listening on its advertised port.
    pub fn with_config(config: ClusterConfig, seed: u64) -> Self {
        let brokers = (config.brokers.iter())
            .map(|b| {
                (
                    b.broker_id,
                    b.host.clone(),
                    u16::try_from(b.port).unwrap_or(9092),
                )
            })
            .collect();
        let start = Instant::now();
        let model = SimCluster::new(config, start, seed);
        SimulatedCluster {
            state: Arc::new(Mutex::new(ClusterState::new(model, start, seed))),
            brokers,
        }
    }

    /// Runs `f` on the shared state.
    fn with_state<T>(&self, f: impl FnOnce(&mut ClusterState) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Adds every broker to `sim` as a host serving the cluster.
    pub fn install(&self, sim: &mut turmoil::Sim<'_>) {
        for (id, host, port) in self.brokers.iter().cloned() {
            let cluster = self.clone();
            sim.host(host.as_str(), move || {
                broker::serve(cluster.clone(), id, port)
            });
        }
    }

    /// The bootstrap list of every broker (`broker-1:9092,broker-2:9092,...`), the first
    /// one first: a group's coordinator is the first bootstrap broker.
    pub fn bootstrap(&self) -> String {
        let addresses: Vec<String> = (self.brokers.iter())
            .map(|(_, host, port)| format!("{host}:{port}"))
            .collect();
        addresses.join(",")
    }

    /// The brokers' ids, ascending.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.with_state(|st| st.model.broker_ids())
    }

    /// The host name of broker `id` (for turmoil's network faults: `sim.partition("app",
    /// name)`).
    pub fn host_name(&self, id: i32) -> Option<&str> {
        (self.brokers.iter())
            .find(|(b, _, _)| *b == id)
            .map(|(_, host, _)| host.as_str())
    }

    /// Adapter options for a client of this world: its seed drawn from the world, in the
    /// order clients start (the same on every run of the seed).
    pub fn client_options(&self) -> Options {
        let mut options = Options::default();
        options.seed = Some(self.with_state(|st| st.seeds.next_u64()));
        options
    }

    /// Starts a `stellflow_tokio::Client` of this world (call it on a turmoil host): what a
    /// service's `main` does with `Client::connect`, with the seed drawn from the world.
    pub async fn connect(&self, config: ClientConfig) -> Result<Client, Error> {
        Client::connect_with(config, self.client_options()).await
    }

    /// Creates a topic (a controller call: before the world runs, or any time) of
    /// `partitions` partitions, partition `p` led by the `p`-th broker and replicated on the
    /// next `replication_factor - 1`.
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: usize,
    ) -> Result<(), SimError> {
        self.with_state(|st| {
            st.model
                .create_topic(topic, partitions, replication_factor)?;
            st.route();
            Ok(())
        })
    }

    /// Crashes broker `id`: the model stops it (its connections close, waiting requests
    /// die) and turmoil stops its host, so clients see their connections end and new ones
    /// go unanswered until [`SimulatedCluster::restart_broker`].
    pub fn crash_broker(&self, sim: &mut turmoil::Sim<'_>, id: i32) -> Result<(), SimError> {
        let host = self.host_of(id)?;
        self.with_state(|st| {
            let now = st.advance_to(sim.elapsed());
            st.trace.record(kind::FAULT, id as u64, b"crash");
            st.model.crash(id, now)?;
            st.route();
            Ok::<_, SimError>(())
        })?;
        sim.crash(host.as_str());
        Ok(())
    }

    /// Restarts broker `id` on its data, like the real server: logs and committed offsets
    /// survive; groups, producer state and leadership do not. Then, as an operator would,
    /// re-asserts the leadership of every live broker (a partition whose longest replica is
    /// still down stays leaderless until it is back), and starts the host's software again.
    pub fn restart_broker(&self, sim: &mut turmoil::Sim<'_>, id: i32) -> Result<(), SimError> {
        let host = self.host_of(id)?;
        self.with_state(|st| {
            let now = st.advance_to(sim.elapsed());
            st.trace.record(kind::FAULT, id as u64, b"restart");
            st.model.restart(id, now)?;
            st.model.reassert_leadership(id)?;
            for other in st.model.broker_ids() {
                if other != id && st.model.is_alive(other) {
                    st.model.reassert_leadership(other)?;
                }
            }
            st.route();
            Ok::<_, SimError>(())
        })?;
        sim.bounce(host.as_str());
        Ok(())
    }

    /// Whether broker `id` is up.
    pub fn is_alive(&self, id: i32) -> bool {
        self.with_state(|st| st.model.is_alive(id))
    }

    /// Moves the leadership of `topic`-`partition` to broker `to` like a controller would:
    /// only to a live replica whose log is as long as the live leader's (an in-sync one).
    /// Returns whether it moved.
    pub fn move_leader(&self, topic: &str, partition: i32, to: i32) -> bool {
        self.with_state(|st| {
            let m = &st.model;
            let key = Some(topic.to_owned());
            let Some(leader) = (m.broker(to))
                .and_then(|b| b.metadata().get(&key, partition))
                .map(|meta| meta.leader)
            else {
                return false;
            };
            let end = |id: i32| {
                m.broker(id)
                    .and_then(|b| b.log(topic, partition))
                    .map(|l| l.log_end())
            };
            let in_sync = end(to).is_some() && end(to) == end(leader);
            if leader == to || leader == 0 || !m.is_alive(to) || !m.is_alive(leader) || !in_sync {
                return false;
            }
            let moved = st.model.move_leader(topic, partition, to).is_ok();
            if moved {
                let at = u64::from(to.unsigned_abs()) << 32 | u64::from(partition.unsigned_abs());
                st.trace.record(kind::FAULT, at, topic.as_bytes());
                st.route();
            }
            moved
        })
    }

    /// Runs `f` on the cluster model: its knobs (`inject_fault`, `fail_next`: injected
    /// errors; `add_delay`: slow answers; `set_reordering`), its controller calls and its
    /// state (logs, committed offsets) for a test's checks. Answers it makes are sent.
    pub fn with_model<T>(&self, f: impl FnOnce(&mut SimCluster) -> T) -> T {
        self.with_state(|st| {
            let r = f(&mut st.model);
            st.route();
            r
        })
    }

    /// Adds what an application observed to the trace (see [`SimulatedCluster::trace_hash`]).
    pub fn observe(&self, what: &[u8]) {
        let at = turmoil::sim_elapsed().map_or(0, |d| d.as_micros() as u64);
        self.with_state(|st| st.trace.record(kind::APP, at, what));
    }

    /// A hash of everything the brokers observed (each connection opened or refused, every
    /// byte received and sent, in order), the faults applied through this type and the
    /// applications' observations: the same for every run of one seed.
    pub fn trace_hash(&self) -> u64 {
        self.with_state(|st| st.trace.value())
    }

    /// How many events went into [`SimulatedCluster::trace_hash`].
    pub fn trace_events(&self) -> u64 {
        self.with_state(|st| st.trace.events())
    }

    fn host_of(&self, id: i32) -> Result<String, SimError> {
        self.host_name(id)
            .map(str::to_owned)
            .ok_or(SimError::UnknownBroker(id))
    }
}
