//! Running a [`FaultPlan`]: build the world, run the safety phase (workload plus faults), heal,
//! run the liveness phase (all pending work must finish within a bound), then the idle phase
//! (the system must go quiet), and check the logs at the end.

use super::check::Violation;
use super::net::NetConfig;
use super::plan::FaultPlan;
use super::workload::{Ledger, RawWorkload, TOPIC, check_ledger};
use super::world::{World, WorldStats};
use crate::config::ClusterConfig;
use std::time::Duration;
use stellflow_sansio::ClientConfig;

/// What one run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The trace hash (equal for equal plans).
    pub trace_hash: u64,
    /// Broken invariants, first first (empty = pass).
    pub violations: Vec<Violation>,
    /// World counters.
    pub stats: WorldStats,
    /// Commands that got their outcome.
    pub commands: usize,
    /// Virtual time the run took.
    pub elapsed: Duration,
}

impl RunReport {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// How long the healed system may take to finish everything pending, beyond request timeouts.
pub const LIVENESS_BOUND: Duration = Duration::from_secs(20);
/// How long the idle phase lasts.
pub const IDLE: Duration = Duration::from_secs(30);

/// The client configuration a plan's clients use.
pub fn client_config(plan: &FaultPlan) -> ClientConfig {
    let s = &plan.scenario;
    let bootstrap: Vec<String> = (1..=s.brokers)
        .map(|b| format!("broker-{b}:9092"))
        .collect();
    let mut c = ClientConfig::new(&bootstrap.join(",")).unwrap_or_else(|_| unreachable_config());
    c.request_timeout = Duration::from_millis(u64::from(s.request_timeout_ms));
    c.max_in_flight_per_connection = s.max_in_flight.max(1) as usize;
    c.reconnect_backoff = Duration::from_millis(50);
    c.reconnect_backoff_max = Duration::from_secs(1);
    c.metadata_refresh_backoff = Duration::from_millis(50);
    c.metadata_refresh_backoff_max = Duration::from_secs(1);
    c
}

fn unreachable_config() -> ClientConfig {
    // "broker-1:9092" always parses; this keeps library code free of `expect`.
    match ClientConfig::new("broker-1:9092") {
        Ok(c) => c,
        Err(e) => panic!("default bootstrap rejected: {e}"),
    }
}

/// Runs `plan` to the end and reports (stops early at the first violation).
pub fn run_plan(plan: &FaultPlan) -> RunReport {
    let s = plan.scenario;
    let net = NetConfig {
        latency: Duration::from_micros(u64::from(s.latency_us)),
        jitter: Duration::from_micros(u64::from(s.jitter_us)),
        split_chance: f64::from(s.split_pct.min(100)) / 100.0,
    };
    let brokers = s.brokers.max(1) as usize;
    let mut world = World::new(plan.seed, ClusterConfig::with_brokers(brokers), net);
    let partitions = s.partitions.max(1) as i32;
    let rf = (s.replication.max(1) as usize).min(brokers);
    if let Err(e) = world.cluster_mut().create_topic(TOPIC, partitions, rf) {
        world.report("setup", format!("create_topic: {e}"));
    }
    let config = client_config(plan);
    let mut loads = Vec::new();
    for i in 0..s.clients.max(1) {
        match world.add_client(config.clone()) {
            Ok(id) => loads.push(RawWorkload::new(
                id,
                plan.seed ^ (0x10ad_0000 + u64::from(i)),
                s.ops,
                Duration::from_millis(u64::from(s.safety_ms)),
                partitions,
                config.request_timeout,
            )),
            Err(e) => world.report("setup", format!("client config: {e}")),
        }
    }
    let mut ledger = Ledger::default();
    let mut faults = plan.faults.iter().peekable();
    let safety_end = Duration::from_millis(u64::from(s.safety_ms));

    // Safety phase: workload and faults.
    while world.elapsed() < safety_end && world.violations().is_empty() {
        let mut next = safety_end;
        if let Some(f) = faults.peek() {
            next = next.min(Duration::from_millis(u64::from(f.at_ms)));
        }
        for l in &loads {
            if let Some(t) = l.next_at() {
                next = next.min(t);
            }
        }
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
        while let Some(f) =
            faults.next_if(|f| u64::from(f.at_ms) <= world.elapsed().as_millis() as u64)
        {
            world.apply(f.action);
        }
        for l in &mut loads {
            l.on_events(&mut world, &mut ledger);
            l.issue_due(&mut world);
        }
    }

    // Liveness phase: heal, then everything must finish.
    world.heal();
    for l in &mut loads {
        l.start_goals(&mut world);
    }
    let bound = LIVENESS_BOUND + config.request_timeout * 3;
    let deadline = world.elapsed() + bound;
    while world.violations().is_empty() && !loads.iter().all(|l| l.done()) {
        if world.elapsed() >= deadline {
            let open: Vec<String> = loads
                .iter()
                .filter(|l| !l.done())
                .map(|l| l.open_work())
                .collect();
            world.report(
                "liveness",
                format!(
                    "healed system did not finish within {bound:?}: {}",
                    open.join("; ")
                ),
            );
            break;
        }
        let mut next = deadline;
        for l in &loads {
            if let Some(t) = l.next_at() {
                next = next.min(t);
            }
        }
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
        for l in &mut loads {
            l.on_events(&mut world, &mut ledger);
            l.issue_due(&mut world);
        }
    }

    // Idle phase: nothing to do, so (almost) nothing may happen.
    if world.violations().is_empty() {
        let before = world.stats();
        world.run_for(IDLE);
        for l in &mut loads {
            l.on_events(&mut world, &mut ledger);
        }
        let after = world.stats();
        let requests = after.requests - before.requests;
        let wakeups = after.wakeups - before.wakeups;
        let clients = u64::from(s.clients.max(1));
        // Allowed: a trailing error-triggered metadata round per client.
        if requests > clients * u64::from(s.brokers) * 4 {
            world.report(
                "quiet-when-idle",
                format!("{requests} requests in {IDLE:?} with nothing to do"),
            );
        }
        if wakeups > clients * 40 {
            world.report(
                "quiet-when-idle",
                format!("{wakeups} client timer wake-ups in {IDLE:?} with nothing to do"),
            );
        }
    }
    if world.violations().is_empty() {
        check_ledger(&mut world, &ledger);
    }
    RunReport {
        trace_hash: world.trace_hash(),
        violations: world.violations().to_vec(),
        stats: world.stats(),
        commands: loads.iter().map(|l| l.completed()).sum(),
        elapsed: world.elapsed(),
    }
}

/// Runs the plan of `seed`.
pub fn run_seed(seed: u64) -> RunReport {
    run_plan(&FaultPlan::from_seed(seed))
}
