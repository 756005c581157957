//! Deterministic simulation testing (DST): seeded, single-threaded worlds of simulated brokers
//! ([`SimCluster`](stellflow_sim::SimCluster)) and sans-IO clients ([`stellflow_sansio::Client`])
//! joined by a faulty network, on a virtual clock, with invariants checked after every step.
//!
//! Where it sits: this crate is the harness, apart from the broker model it drives. It depends
//! on `stellflow-sim` (the simulated brokers), `stellflow-sansio` (the clients under test) and
//! `stellflow-proto` (to read the bytes on the simulated wire); nothing in the workspace depends
//! on it but its own tests and the fuzz target, so the CLI and the adapters never build it. Add
//! it as a dev-dependency to run your own code that drives a `stellflow_sansio::Client` under
//! seeded faults; the repository's `ARCHITECTURE.md` draws the whole workspace.
//!
//! * [`World`] — the public building block: brokers, clients, the network and the clock. Add
//!   your own clients, give them commands, inject [`FaultAction`]s, step virtual time; the
//!   world checks wire-level invariants as it goes and keeps a [`World::trace_hash`].
//! * [`FaultPlan`] — a scenario plus timed faults, derived from a seed
//!   ([`FaultPlan::from_seed`]) or from fuzzer bytes ([`FaultPlan::from_bytes`]), printable and
//!   replayable ([`FaultPlan::to_code`], [`FaultPlan::parse`]).
//! * [`run_plan`] / [`run_seed`] — the built-in scenario: a safety phase (workload plus
//!   faults), a healed liveness phase (every pending command and a fresh produce per partition
//!   must finish within a bound), an idle phase (the system must go quiet), then log checks.
//! * [`shrink()`] — delta debugging of a failing plan down to a small one.
//! * [`group`] — group worlds: 2–5 members of one consumer group joining, closing, crashing,
//!   pausing past their session and cut off from the coordinator, with the group invariants
//!   (convergence, no loss, redelivery only across a handover, one deliverer per partition)
//!   checked from outside the clients ([`group::run_group_plan`], [`group::GroupPlan`]).
//!
//! # The network
//!
//! Every connection has one ordered pipe per direction. Writes are split at random
//! boundaries, each segment arrives after latency plus jitter but never before the one ahead
//! of it, and everything due at one instant is coalesced into one read, so clients and brokers
//! see arbitrary splits of a correct TCP stream. Faults: reset (mid-frame when bytes are in
//! flight), half-open (the broker side vanishes; the next write draws an RST), black hole (no
//! FIN, no RST, ever: only the client's timeouts notice), partitions (bytes are held, connects
//! fail) and heals; broker crash and restart (with leadership re-asserted), leader moves within
//! the ISR, injected errors (header-level and per partition), dropped responses, connections
//! closed by the broker, response delays, response and execution reordering across correlation
//! ids, paused replication; an impostor on a broker's address that answers garbage (an HTTP
//! page, a wrong correlation id, an undecodable ApiVersions body), and the whole cluster gone
//! for good (crashed, or cut off so that nothing answers) — these two drawn apart, in a few
//! plans. See [`FaultKind`]. Faults of one client, as its process suffers
//! them: a crash ([`World::crash_client`]: dropped without `close`, its sockets gone), a pause
//! ([`World::pause_client`]: not driven at all, as under SIGSTOP) and isolation from one broker
//! ([`World::isolate_client`]).
//!
//! # Invariants
//!
//! Checked by the world on every step: nothing but ApiVersions on a connection before its
//! answer arrived; later requests within the advertised version ranges; at most
//! `max_in_flight_per_connection` requests in flight; correlation ids unique in flight;
//! clients write only to connected sockets; the drain's `Timeout` never before `now` right after
//! `handle_timeout(now)`; virtual time keeps advancing and every instant drains (no livelock).
//! Checked by the built-in workload: every command gets exactly one outcome, within its
//! deadline; acknowledged offsets grow per partition; one offset never acknowledges two blobs;
//! fetched blobs equal acknowledged ones; every acknowledged blob is in the leader's log at the
//! end, with idempotence no record twice (unless the server lost its de-duplication state);
//! linger both ways: no batch leaves before `linger` (without a flush), and a due batch whose
//! partition could be sent leaves within [`pipeline::LINGER_SLACK`] (the precise rule is on
//! [`pipeline::ProducerLoad`]); consumers deliver records in order per partition, twice only
//! across a restart without a covering commit, and every acknowledged record in the end; a
//! healthy network keeps a group member's session (no rejoin while idle, once one and a half
//! session timeouts passed since the last broker or consumer restart: a restarted
//! coordinator has lost its groups, which live in memory only; and one rejoin allowed per
//! eviction of a member the live one does not know, which fences it on this server); the
//! healed system finishes all work within a bound, and after the heal a producer or consumer
//! with pending work makes progress within its backoff caps plus a few round trips (the resume
//! bound, [`resume`]); idle clients make almost no requests and timer wake-ups. A peer that
//! answers garbage is reported as not a Stellflow broker, naming its address, within a
//! millisecond of the answer, and reconnected to at most once per reconnect cap. A cluster
//! gone for good is reported within `unreachable_timeout` plus a stated slack (a consumer's
//! poll gets the unreachable error, once; every client asking something shows `Unreachable`
//! and stays there), every pending command fails in time, and the last leader's logs hold
//! what was acknowledged, once ([`outage`]).
//!
//! # Replay
//!
//! A run is a pure function of its plan: the same seed gives the same trace hash. The
//! `simulation` test target prints each failing seed's plan and shrunk plan;
//! `STELLFLOW_SIM_SEED=<seed>` replays one seed, `STELLFLOW_SIM_PLAN='<code>'` one plan, and
//! `STELLFLOW_SIM_SEEDS=<n>` runs a longer soak from `STELLFLOW_SIM_SEED_START` (any u64,
//! default 0); without them the test runs its fixed set plus a window of fresh seeds derived
//! from the commit (printed, so a failure replays). With `STELLFLOW_SIM_TRACE=1` a replay
//! also prints the run's readable trace ([`run_plan_logged`]).
//!
//! # Running your own code under the simulation
//!
//! ```
//! use std::time::Duration;
//! use stellflow_sansio::{ClientConfig, Event, Target};
//! use stellflow_sim::ClusterConfig;
//! use stellflow_dst::{FaultAction, NetConfig, World};
//!
//! let mut world = World::new(7, ClusterConfig::with_brokers(2), NetConfig::default());
//! world.cluster_mut().create_topic("orders", 2, 2).unwrap();
//! let mut config = ClientConfig::new("broker-1:9092").unwrap();
//! config.request_timeout = Duration::from_secs(2);
//! let me = world.add_client(config).unwrap();
//!
//! // Break things, then ask for the cluster description.
//! world.apply(FaultAction::Partition { broker: 1, for_ms: 1_500 });
//! let now = world.now();
//! let asked = world.client(me).describe_cluster(now, Target::Any).unwrap();
//! let mut answer = None;
//! world.run_until(Duration::from_secs(30), |w| {
//!     while let Some(e) = w.poll_event(me) {
//!         if let Event::Admin { id, result } = e {
//!             if id == asked.id() {
//!                 answer = Some(result);
//!             }
//!         }
//!     }
//!     answer.is_some()
//! });
//! // The first try may fail while the partition lasts; either way it got exactly one outcome.
//! assert!(answer.is_some());
//! assert!(world.violations().is_empty(), "{:?}", world.violations());
//!
//! // Same seed, same commands: same trace hash.
//! let hash = world.trace_hash();
//! # let _ = hash;
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod check;
pub mod fetch_check;
pub mod group;
pub mod net;
pub mod outage;
pub mod pipeline;
pub mod plan;
pub mod resume;
pub mod run;
pub mod shrink;
pub mod trace;
pub mod wire;
pub mod workload;
pub mod world;

pub use check::Violation;
pub use net::NetConfig;
pub use plan::{FaultAction, FaultKind, FaultPlan, Garbage, PlannedFault, Scenario};
pub use run::{RunReport, run_plan, run_plan_logged, run_seed};
pub use shrink::shrink;
pub use trace::TraceHash;
pub use wire::Outstanding;
pub use world::{ClientId, LinkView, World, WorldStats};
