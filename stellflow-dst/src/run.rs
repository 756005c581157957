//! Running a [`FaultPlan`]: build the world, run the safety phase (workload plus faults), heal,
//! run the liveness phase (all pending work must finish within a bound), then the idle phase
//! (the system must go quiet), and check the logs at the end. A plan whose cluster goes away
//! for good ([`FaultKind::ClusterGone`]) has an outage phase instead of the healed ones: the
//! clients must report it within a bound, once ([`super::outage`]), every command still
//! waiting must fail in time, and the logs must hold what was acknowledged.

use super::check::Violation;
use super::net::NetConfig;
use super::outage::OutageCheck;
use super::pipeline::{ConsumerLoad, PipelineShape, ProducerLoad};
use super::plan::{FaultAction, FaultKind, FaultPlan};
use super::resume::ResumeCheck;
use super::workload::{Ledger, RawWorkload, TOPIC, check_ledger};
use super::world::{World, WorldStats};
use std::time::Duration;
use stellflow_sansio::ClientConfig;
use stellflow_sim::config::ClusterConfig;

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
    /// How many of the producer's batches were held to the linger upper bound (0 without a
    /// producer).
    pub linger_bound_checks: u64,
    /// The resume bound after the heal ([`super::resume`]), per watched client: what, the
    /// longest wait for progress seen, and the bound.
    pub resume: Vec<(&'static str, Duration, Duration)>,
    /// With a cluster gone for good ([`super::outage`]), per watched client: what, when it
    /// reported the outage and by when it had to (since the cluster went away).
    pub outage: Vec<(&'static str, Option<Duration>, Option<Duration>)>,
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
/// How often the consumer workload polls its records and events during the idle window.
const IDLE_POLL: Duration = Duration::from_secs(1);

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
    c.metadata_refresh_backoff = Duration::from_millis(50);
    // The caps stay at the client's defaults (1 s each, Kafka's): the resume bound
    // ([`super::resume`]) holds the defaults to them.
    c
}

fn unreachable_config() -> ClientConfig {
    // "broker-1:9092" always parses; this keeps library code free of `expect`.
    match ClientConfig::new("broker-1:9092") {
        Ok(c) => c,
        Err(e) => panic!("default bootstrap rejected: {e}"),
    }
}

/// All workloads of one run.
struct Loads {
    raw: Vec<RawWorkload>,
    producer: Option<ProducerLoad>,
    consumer: Option<ConsumerLoad>,
    ledger: Ledger,
}

impl Loads {
    fn next_at(&self) -> Option<Duration> {
        let raw = self.raw.iter().filter_map(|l| l.next_at());
        let p = self.producer.as_ref().and_then(|p| p.next_at());
        let c = self.consumer.as_ref().and_then(|c| c.next_at());
        raw.chain(p).chain(c).min()
    }

    fn on_step(&mut self, world: &mut World) {
        for l in &mut self.raw {
            l.on_events(world, &mut self.ledger);
            l.issue_due(world);
        }
        if let Some(p) = &mut self.producer {
            p.on_events(world);
            p.issue_due(world);
        }
        if let Some(c) = &mut self.consumer {
            c.on_events(world);
            c.issue_due(world);
        }
    }

    fn done(&self) -> bool {
        self.raw.iter().all(|l| l.done())
            && self.producer.as_ref().is_none_or(|p| p.done())
            && self.consumer.as_ref().is_none_or(|c| {
                !c.restarting() && c.missing(self.producer.as_ref(), &self.ledger).is_empty()
            })
    }

    fn open_work(&self) -> String {
        let mut open: Vec<String> = self
            .raw
            .iter()
            .filter(|l| !l.done())
            .map(|l| l.open_work())
            .collect();
        if let Some(p) = self.producer.as_ref().filter(|p| !p.done()) {
            open.push(p.open_work());
        }
        if let Some(c) = &self.consumer {
            let missing = c.missing(self.producer.as_ref(), &self.ledger);
            if !missing.is_empty() || c.restarting() {
                open.push(format!(
                    "consumer: {} acknowledged record(s) not delivered, e.g. {:?}; restarting {}",
                    missing.len(),
                    &missing[..missing.len().min(4)],
                    c.restarting()
                ));
            }
        }
        open.join("; ")
    }

    fn completed(&self) -> usize {
        self.raw.iter().map(|l| l.completed()).sum::<usize>()
            + self.producer.as_ref().map_or(0, |p| p.completed())
    }
}

/// The simulated network of a plan's scenario: latency and jitter in microseconds, and the
/// percent of writes split.
pub(crate) fn net_config(latency_us: u32, jitter_us: u32, split_pct: u32) -> NetConfig {
    NetConfig {
        latency: Duration::from_micros(u64::from(latency_us)),
        jitter: Duration::from_micros(u64::from(jitter_us)),
        split_chance: f64::from(split_pct.min(100)) / 100.0,
    }
}

/// A world of `brokers` brokers for a plan's seed, keeping its readable trace when asked.
pub(crate) fn new_world(seed: u64, brokers: usize, net: NetConfig, keep_log: bool) -> World {
    let mut world = World::new(seed, ClusterConfig::with_brokers(brokers), net);
    if keep_log {
        world.keep_log();
    }
    world
}

/// Runs `plan` to the end and reports (stops early at the first violation).
pub fn run_plan(plan: &FaultPlan) -> RunReport {
    run(plan, false).0
}

/// Like [`run_plan`], and also returns the run's readable trace ([`World::keep_log`]): one
/// line per fault, connect, disconnect, request and response frame, client event and
/// violation. The run itself (and its trace hash) is the same as without the log.
pub fn run_plan_logged(plan: &FaultPlan) -> (RunReport, Vec<String>) {
    run(plan, true)
}

fn run(plan: &FaultPlan, keep_log: bool) -> (RunReport, Vec<String>) {
    let s = plan.scenario;
    let brokers = s.brokers.max(1) as usize;
    let net = net_config(s.latency_us, s.jitter_us, s.split_pct);
    let mut world = new_world(plan.seed, brokers, net, keep_log);
    let partitions = s.partitions.max(1) as i32;
    let rf = (s.replication.max(1) as usize).min(brokers);
    if let Err(e) = world.cluster_mut().create_topic(TOPIC, partitions, rf) {
        world.report("setup", format!("create_topic: {e}"));
    }
    let config = client_config(plan);
    let span = Duration::from_millis(u64::from(s.safety_ms));
    let shape = PipelineShape::from_bits(s.workload);
    let mut loads = Loads {
        raw: Vec::new(),
        producer: None,
        consumer: None,
        ledger: Ledger::default(),
    };
    for i in 0..s.clients.max(1) {
        match world.add_client(config.clone()) {
            Ok(id) => loads.raw.push(RawWorkload::new(
                id,
                plan.seed ^ (0x10ad_0000 + u64::from(i)),
                s.ops,
                span,
                partitions,
                config.request_timeout,
            )),
            Err(e) => world.report("setup", format!("client config: {e}")),
        }
    }
    if shape.producer {
        loads.producer = ProducerLoad::new(
            &mut world,
            &config,
            shape,
            plan.seed ^ 0x9d0c,
            s.ops * 3,
            span,
            partitions,
        );
    }
    if shape.consumer {
        loads.consumer = ConsumerLoad::new(
            &mut world,
            &config,
            shape,
            plan.seed ^ 0xc0de,
            (s.workload >> 8) % 3,
            span,
            partitions,
        );
    }
    let mut faults = plan.faults.iter().peekable();
    let mut outage: Option<OutageCheck> = None;

    // Safety phase: workload and faults.
    while world.elapsed() < span && world.violations().is_empty() {
        let mut next = span;
        if let Some(f) = faults.peek() {
            next = next.min(Duration::from_millis(u64::from(f.at_ms)));
        }
        if let Some(t) = loads.next_at() {
            next = next.min(t);
        }
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
        while let Some(f) =
            faults.next_if(|f| u64::from(f.at_ms) <= world.elapsed().as_millis() as u64)
        {
            world.apply(f.action);
            if let FaultAction::ClusterGone { silent } = f.action
                && outage.is_none()
                && world.gone_at().is_some()
            {
                if let Some(c) = &mut loads.consumer {
                    c.stop_restarts();
                }
                outage = Some(OutageCheck::new(
                    &mut world,
                    &config,
                    silent,
                    &loads.raw,
                    loads.producer.as_ref(),
                    loads.consumer.as_ref(),
                ));
            }
        }
        loads.on_step(&mut world);
        world.check_impostors();
        if let Some(o) = &mut outage {
            o.sample(
                &mut world,
                &loads.raw,
                loads.producer.as_ref(),
                loads.consumer.as_ref(),
            );
        }
    }

    if let Some(o) = outage {
        return finish_outage(plan, world, loads, o);
    }

    // Liveness phase: heal, then everything must finish.
    world.heal();
    for l in &mut loads.raw {
        l.start_goals(&mut world);
    }
    if let Some(p) = &mut loads.producer {
        p.start_goals(&mut world);
        p.flush(&mut world);
    }
    if let Some(c) = &mut loads.consumer {
        c.stop_restarts();
    }
    let bound = LIVENESS_BOUND + config.request_timeout * 3;
    let healed_at = world.elapsed();
    let deadline = healed_at + bound;
    let mut resume = ResumeCheck::new(
        &config,
        loads.producer.as_ref(),
        loads.consumer.as_ref(),
        &net,
        healed_at,
    );
    loop {
        loads.on_step(&mut world);
        resume.sample(
            &mut world,
            loads.producer.as_ref(),
            loads.consumer.as_ref(),
            &loads.ledger,
        );
        if !world.violations().is_empty() || loads.done() {
            break;
        }
        if world.elapsed() >= deadline {
            let open = loads.open_work();
            world.report(
                "liveness",
                format!("healed system did not finish within {bound:?}: {open}"),
            );
            break;
        }
        let next = loads.next_at().map_or(deadline, |t| t.min(deadline));
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
    }

    // Idle phase: nothing to do, so (almost) nothing may happen.
    if world.violations().is_empty() {
        idle_phase(&mut world, &mut loads, &plan.scenario, healed_at);
    }
    end_checks_and_report(plan, world, &loads, resume.summary(), Vec::new())
}

/// Whether the server may have forgotten its de-duplication state: on a restart or a leader
/// move, and it never records a batch it answered with 7 (acks=-1 replication timeout,
/// PROTOCOL.md §3.3.2): if that answer is lost, the retry is appended again by design. An
/// impostor's broker is down meanwhile and restarts.
fn state_lost(plan: &FaultPlan) -> bool {
    plan.kinds().any(|k| {
        matches!(
            k,
            FaultKind::Crash
                | FaultKind::MoveLeader
                | FaultKind::PauseReplication
                | FaultKind::Impostor
        )
    })
}

/// The outage phase of a plan whose cluster went away for good: no heal. Runs until every
/// report is due and observed ([`OutageCheck::end`]) and every command got its outcome (each
/// workload's outcome book holds it to its deadline), sampling the outage invariants after
/// every step; then checks the logs.
fn finish_outage(
    plan: &FaultPlan,
    mut world: World,
    mut loads: Loads,
    mut outage: OutageCheck,
) -> (RunReport, Vec<String>) {
    if let Some(p) = &mut loads.producer {
        p.flush(&mut world);
    }
    let end = outage.end();
    // The workloads' outcome bounds are far shorter than this; past it, a command still
    // waiting is an outcome that never came.
    let hard_end = end + LIVENESS_BOUND * 3;
    loop {
        loads.on_step(&mut world);
        outage.sample(
            &mut world,
            &loads.raw,
            loads.producer.as_ref(),
            loads.consumer.as_ref(),
        );
        if !world.violations().is_empty() {
            break;
        }
        let waiting = loads.raw.iter().map(|l| l.pending()).sum::<usize>()
            + loads.producer.as_ref().map_or(0, |p| p.pending());
        if world.elapsed() >= end && waiting == 0 {
            break;
        }
        if world.elapsed() >= hard_end {
            world.report(
                "outage-outcomes",
                format!(
                    "{waiting} command(s) still without an outcome {:?} after the cluster went away: {}",
                    world.elapsed() - world.gone_at().unwrap_or_default(),
                    loads.open_work()
                ),
            );
            break;
        }
        let next = loads.next_at().map_or(hard_end, |t| t.min(hard_end));
        let limit = world.now()
            + next
                .saturating_sub(world.elapsed())
                .max(Duration::from_millis(1));
        world.step(limit);
    }
    end_checks_and_report(plan, world, &loads, Vec::new(), outage.summary())
}

/// The end of every run: when nothing was violated on the way, the ledger, the producer's
/// logs and the consumer's values are checked; then the report and the readable log.
fn end_checks_and_report(
    plan: &FaultPlan,
    mut world: World,
    loads: &Loads,
    resume: Vec<(&'static str, Duration, Duration)>,
    outage: Vec<(&'static str, Option<Duration>, Option<Duration>)>,
) -> (RunReport, Vec<String>) {
    if world.violations().is_empty() {
        check_ledger(&mut world, &loads.ledger);
        if let Some(p) = &loads.producer {
            p.check_logs(&mut world, state_lost(plan));
        }
        if let Some(c) = &loads.consumer {
            c.check_values(&mut world, loads.producer.as_ref());
        }
    }
    let log = world.take_log();
    let report = RunReport {
        trace_hash: world.trace_hash(),
        violations: world.violations().to_vec(),
        stats: world.stats(),
        commands: loads.completed(),
        elapsed: world.elapsed(),
        linger_bound_checks: loads
            .producer
            .as_ref()
            .map_or(0, |p| p.linger_bound_checks()),
        resume,
        outage,
    };
    (report, log)
}

fn idle_phase(
    world: &mut World,
    loads: &mut Loads,
    s: &super::plan::Scenario,
    healed_at: Duration,
) {
    let brokers = u64::from(s.brokers.max(1));
    let idle_s = IDLE.as_secs();
    // Budgets: a trailing error-triggered metadata round for a client that does nothing; a
    // consumer also fetches every `fetch_backoff_max` (500 ms) per leader (no long-poll on
    // this server), heartbeats every second and commits.
    let mut budgets: Vec<(super::world::ClientId, u64, &str)> = loads
        .raw
        .iter()
        .map(|l| (l.client_id(), brokers * 4, "raw client"))
        .collect();
    if let Some(p) = &loads.producer {
        budgets.push((p.client_id(), brokers * 4, "producer"));
    }
    if let Some(c) = &loads.consumer {
        // Per partition, not per broker: the fetcher's empty-fetch backoff runs per partition
        // and the partitions of one broker drift apart (see the report in the test docs).
        let partitions = u64::from(s.partitions.max(1));
        budgets.push((
            c.client_id(),
            idle_s * (2 * partitions + 4) + 20,
            "consumer",
        ));
        // An earlier incarnation's member expires one session after a restart and fences the
        // live member once (the server's lazy eviction bumps the generation): let that pass.
        // A broker restart loses every group it coordinated (group state is in memory only,
        // PROTOCOL.md §8 item 17): the member learns it from its next heartbeat (error 1)
        // and must join again, so a restart late in the fault phase forces one rejoin after
        // the heal (dst seeds 1129, 1979, 2913, 2981): let that pass too.
        let restarts = [c.last_restart(), world.last_broker_restart()];
        let mut calm = restarts
            .into_iter()
            .flatten()
            .max()
            .map(|r| r + c.session_timeout() * 3 / 2);
        // A group request sent before the heal whose answer a fault destroyed (a dropped
        // response) ends only by its own timeout, after the heal, and its failure makes the
        // member rejoin (a third lost SyncGroup, dst soak seed 8937134432920033465): the
        // fault's doing, not the healthy network's. Start the window once every such request
        // has timed out.
        let group_timeout = c
            .config()
            .request_timeout
            .max(c.config().consumer.rebalance_timeout);
        calm = calm.max(Some(healed_at + group_timeout));
        if let Some(calm) = calm
            && world.elapsed() < calm
        {
            world.run_for(calm - world.elapsed());
            loads.on_step(world);
        }
    }
    let before: Vec<(u64, u64)> = budgets
        .iter()
        .map(|(id, _, _)| world.client_activity(*id))
        .collect();
    let rejoins = loads.consumer.as_ref().map_or(0, |c| c.rejoins());
    let joined = loads
        .consumer
        .as_ref()
        .and_then(|c| c.last_join())
        .map(|(t, m)| (t, m.to_owned()));
    // The consumer keeps polling through the window, as an application does, so a rejoin is
    // reported at the second it happened rather than at the end of the window.
    let end = world.elapsed() + IDLE;
    while world.elapsed() < end {
        world.run_for(IDLE_POLL.min(end - world.elapsed()));
        if let Some(c) = &mut loads.consumer {
            c.on_events(world);
        }
    }
    loads.on_step(world);
    for ((id, budget, what), (req0, wake0)) in budgets.iter().zip(before) {
        let (req1, wake1) = world.client_activity(*id);
        let (requests, wakeups) = (req1 - req0, wake1 - wake0);
        if requests > *budget || wakeups > budget * 3 + 10 {
            let c = world.client(*id).counters();
            let per_api: Vec<String> = stellflow_proto::ApiKey::ALL
                .iter()
                .map(|k| (k, c.api(*k).requests))
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| format!("{k:?}={n}"))
                .collect();
            world.report(
                "quiet-when-idle",
                format!(
                    "{what}: {requests} requests and {wakeups} timer wake-ups in {IDLE:?} with nothing to do (budget {budget} requests); whole-run requests per API: {}",
                    per_api.join(" ")
                ),
            );
        }
    }
    if let Some(c) = &loads.consumer
        && c.subscribed()
        && c.rejoins() > rejoins
    {
        // A member the live one does not know — an earlier incarnation's (there is no
        // LeaveGroup), or the one a JoinGroup whose answer was lost created — expires one
        // session after it last spoke, and the eviction bumps the generation and fences the
        // live member once (PROTOCOL.md §3.9–§3.11: expiry is lazy, eviction bumps the
        // generation). Each such eviction after the member's last join before the window
        // forces one rejoin that no client can avoid (dst soak seeds 6457169394887063741,
        // 2363443201538265807): let those pass, and only those — an eviction of the live
        // member itself is the lost session this invariant is about.
        let (since, member) = joined.unwrap_or_default();
        let forced = world
            .group_evictions(c.group_id())
            .iter()
            .filter(|(at, gone)| *at >= since && !gone.contains(&member))
            .count() as u64;
        let rejoined = c.rejoins() - rejoins;
        if rejoined > forced {
            world.report(
                "group-session-alive",
                format!(
                    "{rejoined} group rejoin(s) during {IDLE:?} of a healthy network ({forced} forced by the eviction of another member); last {}; last consumer restart at {:?}",
                    c.last_rejoin(),
                    c.last_restart()
                ),
            );
        }
    }
    if let Some(c) = &loads.consumer {
        let missing = c.missing(loads.producer.as_ref(), &loads.ledger);
        if !missing.is_empty() {
            world.report(
                "consumer-delivers-all",
                format!(
                    "{} acknowledged record(s) never delivered, e.g. {:?}",
                    missing.len(),
                    missing.first()
                ),
            );
        }
    }
}

/// Runs the plan of `seed`.
pub fn run_seed(seed: u64) -> RunReport {
    run_plan(&FaultPlan::from_seed(seed))
}
