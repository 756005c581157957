//! Running a group plan: the safety phase (the feed, the members, the plan's membership
//! changes and faults, every group invariant checked as it goes), the heal, the liveness
//! phase (every record delivered, the group converged), and shrinking a failing plan.

use super::feed::Feed;
use super::member::{Listener, Member, MemberState, member_config};
use super::plan::{GroupEvent, GroupPlan, MAX_MEMBERS};
use super::watch::{COORDINATOR, GroupCounts, GroupWatch};
use crate::check::Violation;
use crate::plan::FaultAction;
use crate::workload::TOPIC;
use crate::world::{ClientId, World, WorldStats};
use std::collections::BTreeSet;
use std::time::Duration;

/// How often the convergence check samples the members' assignments.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How long the healed world may take, beyond the convergence bound, to deliver everything.
pub const GROUP_LIVENESS: Duration = Duration::from_secs(20);

/// What a group run found.
#[derive(Debug, Clone)]
pub struct GroupReport {
    /// The trace hash (equal for equal plans).
    pub trace_hash: u64,
    /// Broken invariants, first first (empty = pass).
    pub violations: Vec<Violation>,
    /// World counters.
    pub stats: WorldStats,
    /// What the group watch counted.
    pub counts: GroupCounts,
    /// Members started over the run.
    pub members: usize,
    /// Records the feed got acknowledged.
    pub acked: usize,
    /// Virtual time the run took.
    pub elapsed: Duration,
}

impl GroupReport {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

struct GroupRun {
    brokers: u32,
    session: Duration,
    heartbeat: Duration,
    partitions: i32,
    commit_bits: u32,
    /// Members are static: each gets its own `group.instance.id`.
    static_members: bool,
    /// Restarts of crashed static members: when, and under which instance id.
    restarts: Vec<(Duration, String)>,
    members: Vec<Member>,
    feed: Option<Feed>,
    watch: GroupWatch,
    values: BTreeSet<String>,
    next_sample: Duration,
}

impl GroupRun {
    /// Starts a member: under `instance` (a restart or a twin), else under an id of its own
    /// when the members are static.
    fn start_member(&mut self, world: &mut World, instance: Option<String>) {
        let index = self.members.len();
        let instance =
            instance.or_else(|| self.static_members.then(|| format!("instance-{index}")));
        if let Some(id) = &instance {
            self.watch.instance(index, id);
        }
        let auto = self.commit_bits >> (index % 32) & 1 == 1;
        let listener = Listener::from_bits(self.commit_bits, index);
        let mut config = member_config(self.brokers, self.session, self.heartbeat, auto, index);
        config.consumer.group_instance_id = instance;
        if let Some(m) = Member::start(world, config, index, listener) {
            self.members.push(m);
        }
    }

    fn live(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|i| self.members[*i].live())
            .collect()
    }

    fn pick(&self, selector: u32) -> Option<usize> {
        let live = self.live();
        (!live.is_empty()).then(|| live[selector as usize % live.len()])
    }

    fn next_at(&self, world: &World) -> Option<Duration> {
        // A paused member's timers wait for it to run again.
        let m = self
            .members
            .iter()
            .filter(|m| world.client_running(m.client))
            .filter_map(|m| m.next_at());
        let f = self.feed.as_ref().and_then(|f| f.next_at());
        let r = self.restarts.iter().map(|(at, _)| *at);
        m.chain(f).chain(r).chain(Some(self.next_sample)).min()
    }

    fn apply(&mut self, world: &mut World, event: GroupEvent) {
        let at = world.elapsed();
        self.watch.change(at);
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        match event {
            GroupEvent::Join => {
                if self.live().len() < MAX_MEMBERS {
                    self.start_member(world, None);
                }
            }
            GroupEvent::Restart { member, after_ms } => {
                if self.live().len() > 1
                    && let Some(i) = self.pick(member)
                    && let Some(id) = self.members[i].instance.clone()
                {
                    let held = (world.client(self.members[i].client).assignment())
                        .iter()
                        .map(|tp| tp.partition)
                        .collect();
                    self.members[i].crash(world, &mut self.watch);
                    self.watch.restart_begins(&id, held);
                    let back = at + ms(after_ms);
                    self.restarts.push((back, id));
                    self.watch.change(back);
                }
            }
            GroupEvent::Twin { member } => {
                if self.live().len() < MAX_MEMBERS
                    && let Some(i) = self.pick(member)
                    && let Some(id) = self.members[i].instance.clone()
                {
                    self.start_member(world, Some(id));
                }
            }
            GroupEvent::Close { member } => {
                // The last live member stays: a group of none owns nothing.
                if self.live().len() > 1
                    && let Some(i) = self.pick(member)
                {
                    self.members[i].close(world);
                }
            }
            GroupEvent::Crash { member } => {
                if self.live().len() > 1
                    && let Some(i) = self.pick(member)
                {
                    self.members[i].crash(world, &mut self.watch);
                }
            }
            GroupEvent::Pause { member, for_ms } => {
                if let Some(i) = self.pick(member) {
                    let m = &self.members[i];
                    if world.client_running(m.client) {
                        world.pause_client(m.client, ms(for_ms));
                        self.watch.stale(m.index, at + ms(for_ms));
                        self.watch.change(at + ms(for_ms));
                    }
                }
            }
            GroupEvent::Isolate { member, for_ms } => {
                if let Some(i) = self.pick(member) {
                    let m = &self.members[i];
                    if !world.client_isolated(m.client, COORDINATOR) {
                        world.isolate_client(m.client, COORDINATOR, ms(for_ms));
                        self.watch.stale(m.index, at + ms(for_ms));
                        self.watch.change(at + ms(for_ms));
                    }
                }
            }
            GroupEvent::Reset { link } => world.apply(FaultAction::Reset { link }),
            GroupEvent::Delay { delay_ms, for_ms } => {
                world.apply(FaultAction::Delay {
                    api: -1,
                    delay_ms,
                    for_ms,
                });
                self.watch.change(at + ms(for_ms));
            }
        }
    }

    /// Everything after a step: restarts due, the feed, the members, the per-step and
    /// sampled checks.
    fn on_step(&mut self, world: &mut World) {
        let at = world.elapsed();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.restarts)
            .into_iter()
            .partition(|(t, _)| *t <= at);
        self.restarts = later;
        for (_, id) in due {
            self.watch.restarted(&id, self.members.len(), at);
            self.start_member(world, Some(id));
        }
        if let Some(f) = &mut self.feed {
            f.drive(world);
        }
        for m in &mut self.members {
            m.drive(world, &mut self.watch, &mut self.values);
        }
        self.watch.check_commits(world);
        if world.elapsed() >= self.next_sample {
            self.next_sample = world.elapsed() + SAMPLE_EVERY;
            self.sample(world);
        }
    }

    fn sample(&mut self, world: &mut World) {
        let running: Vec<(usize, ClientId)> = self
            .members
            .iter()
            .filter(|m| m.state != MemberState::Gone && world.client_running(m.client))
            .map(|m| (m.index, m.client))
            .collect();
        if running.is_empty() {
            return;
        }
        let owners = GroupWatch::owners_of(world, &running, self.partitions);
        self.watch.check_owners(world, &owners);
    }

    fn undelivered(&self) -> Vec<&String> {
        self.feed.as_ref().map_or(Vec::new(), |f| {
            f.acked
                .keys()
                .filter(|v| !self.values.contains(*v))
                .collect()
        })
    }
}

/// Runs a group plan to the end (stops early at the first violation).
pub fn run_group_plan(plan: &GroupPlan) -> GroupReport {
    run(plan, false).0
}

/// Like [`run_group_plan`], and also returns the run's readable trace.
pub fn run_group_plan_logged(plan: &GroupPlan) -> (GroupReport, Vec<String>) {
    run(plan, true)
}

fn run(plan: &GroupPlan, keep_log: bool) -> (GroupReport, Vec<String>) {
    let s = plan.scenario;
    let brokers = s.brokers.max(1) as usize;
    let net = crate::run::net_config(s.latency_us, s.jitter_us, s.split_pct);
    let mut world = crate::run::new_world(plan.seed, brokers, net, keep_log);
    let partitions = s.partitions.max(1) as i32;
    if let Err(e) = world.cluster_mut().create_topic(TOPIC, partitions, 1) {
        world.report("setup", format!("create_topic: {e}"));
    }
    world.settle();
    let session = Duration::from_millis(u64::from(s.session_ms.max(100)));
    let heartbeat = Duration::from_millis(u64::from(s.heartbeat_ms.max(10)));
    let span = Duration::from_millis(u64::from(s.safety_ms));
    let watch = GroupWatch::new(&world, super::member::GROUP, partitions, session, heartbeat);
    let mut run = GroupRun {
        brokers: s.brokers.max(1),
        session,
        heartbeat,
        partitions,
        commit_bits: s.commit_bits,
        static_members: s.static_members == 1,
        restarts: Vec::new(),
        members: Vec::new(),
        feed: None,
        watch,
        values: BTreeSet::new(),
        next_sample: SAMPLE_EVERY,
    };
    run.feed = Feed::new(
        &mut world,
        s.brokers.max(1),
        plan.seed ^ 0xfeed,
        s.records,
        span,
        s.keyed_pct,
    );
    for _ in 0..s.members.clamp(1, MAX_MEMBERS as u32) {
        run.start_member(&mut world, None);
    }
    let mut events = plan.events.iter().peekable();

    // Safety phase: the feed, membership changes and faults.
    while world.elapsed() < span && world.violations().is_empty() {
        let mut next = span;
        if let Some(e) = events.peek() {
            next = next.min(Duration::from_millis(u64::from(e.at_ms)));
        }
        if let Some(t) = run.next_at(&world) {
            next = next.min(t);
        }
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
        while let Some(e) =
            events.next_if(|e| u64::from(e.at_ms) <= world.elapsed().as_millis() as u64)
        {
            run.apply(&mut world, e.event);
        }
        run.on_step(&mut world);
    }

    // Liveness phase: heal; every record must be delivered and the group converge.
    world.heal();
    let healed_at = world.elapsed();
    run.watch.healed(healed_at);
    let settled_at = healed_at + run.watch.bound() + heartbeat;
    let deadline = settled_at + GROUP_LIVENESS;
    while world.violations().is_empty() {
        run.on_step(&mut world);
        let at = world.elapsed();
        let feed_done = run.feed.as_ref().is_none_or(|f| f.done());
        if at >= settled_at
            && feed_done
            && run.undelivered().is_empty()
            && run.watch.all_delivered(&world)
        {
            break;
        }
        if at >= deadline {
            let missing = run.undelivered();
            let detail = format!(
                "healed world not done within {:?}: feed done {feed_done}, {} acknowledged record(s) never delivered (e.g. {:?})",
                deadline - healed_at,
                missing.len(),
                missing.first()
            );
            world.report("group-delivers-all", detail);
            break;
        }
        let next = run.next_at(&world).map_or(deadline, |t| t.min(deadline));
        let limit = world.now() + next.saturating_sub(world.elapsed());
        world.step(limit);
    }
    if world.violations().is_empty() {
        run.sample(&mut world);
        run.watch.check_all_delivered(&mut world);
    }
    let log = world.take_log();
    let report = GroupReport {
        trace_hash: world.trace_hash(),
        violations: world.violations().to_vec(),
        stats: world.stats(),
        counts: run.watch.counts(),
        members: run.members.len(),
        acked: run.feed.as_ref().map_or(0, |f| f.acked.len()),
        elapsed: world.elapsed(),
    };
    (report, log)
}

/// Shrinks `plan`, which must fail with `invariant`, within `budget` runs: delta debugging
/// over its events, then fewer members, partitions, records and brokers and a shorter safety
/// phase, keeping every change under which the run still breaks the same invariant.
pub fn shrink_group(plan: &GroupPlan, invariant: &str, budget: usize) -> GroupPlan {
    let runs = std::cell::Cell::new(0usize);
    let fails = |p: &GroupPlan| -> bool {
        runs.set(runs.get() + 1);
        run_group_plan(p)
            .violations
            .first()
            .is_some_and(|v| v.invariant == invariant)
    };
    let mut best = plan.clone();
    best.events = crate::shrink::ddmin(&best.events, budget, &runs, |events| {
        let mut cand = best.clone();
        cand.events = events.to_vec();
        fails(&cand)
    });
    type Knob = fn(&mut GroupPlan) -> bool;
    let knobs: [Knob; 5] = [
        |p| crate::shrink::halve(&mut p.scenario.members, 1),
        |p| crate::shrink::halve(&mut p.scenario.partitions, 1),
        |p| crate::shrink::halve(&mut p.scenario.records, 1),
        |p| crate::shrink::halve(&mut p.scenario.brokers, 1),
        |p| {
            let last = p.events.iter().map(|e| e.at_ms).max();
            crate::shrink::halve_safety(&mut p.scenario.safety_ms, last)
        },
    ];
    crate::shrink::shrink_numbers(best, &knobs, budget, &runs, fails)
}
