//! Large groups on the simulated cluster, in virtual time: `members` consumers of one group
//! over a topic of `partitions` partitions (no records: what is measured is membership),
//! through a join, a graceful close and a crash. A [`ScaleReport`] says how long the group
//! took to converge after each change (every partition owned by exactly one running
//! member, the shares balanced), the group requests each member sent per second, and the
//! registry bytes each member read per heartbeat interval. Virtual time is exact, so the
//! figures are the protocol's and not the machine's: CI asserts bounds on them
//! (`tests/group_scale.rs`), and `examples/group_scale.rs` prints them as `RESULT` lines.

use super::member::{GROUP, member_config};
use crate::net::NetConfig;
use crate::workload::TOPIC;
use crate::world::{ClientId, World};
use std::time::Duration;
use stellflow_proto::messages::{
    OffsetFetchPartitionResponse, OffsetFetchResponse, OffsetFetchTopicResponse,
};
use stellflow_proto::{ApiKey, ErrorCode, Wire};
use stellflow_sansio::REGISTRY_TOPIC;
use stellflow_sim::ClusterConfig;

/// How often convergence is sampled.
const SAMPLE: Duration = Duration::from_millis(50);
/// Longest wait for a convergence before the run gives up on it.
const GIVE_UP: Duration = Duration::from_secs(300);

/// The shape of a large-group world.
#[derive(Debug, Clone, Copy)]
pub struct ScaleConfig {
    /// Seed of the world.
    pub seed: u64,
    /// Members started together at the beginning.
    pub members: usize,
    /// Partitions of the topic.
    pub partitions: i32,
    /// The members' session timeout.
    pub session: Duration,
    /// The members' heartbeat interval.
    pub heartbeat: Duration,
    /// Heartbeat intervals of the steady window measured after the first convergence.
    pub steady_heartbeats: u32,
}

/// What a large-group world measured (times are virtual).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScaleReport {
    /// From the start of every member together to the first convergence.
    pub start: Duration,
    /// From one more member's start to convergence.
    pub join: Duration,
    /// From a member's `close_consumer` to convergence without it.
    pub close: Duration,
    /// From a member's crash to convergence without it.
    pub crash: Duration,
    /// Group requests (registry reads and writes, coordinator lookups, joins, commits) per
    /// member per second over the steady window.
    pub steady_requests_per_member_s: f64,
    /// The same over the join, the close and the crash, from the join to the end.
    pub change_requests_per_member_s: f64,
    /// Registry reads per member per heartbeat interval over the steady window.
    pub reads_per_heartbeat: f64,
    /// Bytes of one registry read's answer (its OffsetFetch body) in the steady group.
    pub bytes_per_read: usize,
    /// Registry bytes each member read per heartbeat interval in the steady group.
    pub bytes_per_heartbeat: f64,
    /// The least a member must read per heartbeat to see every other member's counter move
    /// on this server: one OffsetFetch partition entry with an empty metadata (16 bytes) per
    /// member, read once.
    pub forced_bytes_per_heartbeat: f64,
}

impl ScaleReport {
    /// The slowest convergence after a change (join, close or crash).
    pub fn slowest_change(&self) -> Duration {
        self.join.max(self.close).max(self.crash)
    }
}

/// A large group: its world and its members' clients (`None` once closed or crashed).
struct Scale {
    world: World,
    cfg: ScaleConfig,
    members: Vec<Option<ClientId>>,
    /// Every member's client ever started (their counters outlive them).
    all: Vec<ClientId>,
}

impl Scale {
    fn start(&mut self) {
        let index = self.members.len();
        let mut c = member_config(1, self.cfg.session, self.cfg.heartbeat, true, index);
        c.consumer.max_group_members = registry_slots(self.cfg.members);
        // Nothing is produced: empty partitions are asked rarely, so that what the world
        // spends its time on is the membership being measured.
        c.consumer.fetch_backoff = Duration::from_secs(5);
        c.consumer.fetch_backoff_max = Duration::from_secs(5);
        let id = match self.world.add_client(c) {
            Ok(id) => id,
            Err(e) => panic!("member config rejected: {e}"),
        };
        let now = self.world.now();
        if let Err(e) = self.world.client(id).subscribe(now, &[TOPIC]) {
            panic!("subscribe: {e}");
        }
        // Registry reads are counted from the requests on the wire (on connections opened
        // from now on).
        self.world.tap_requests(id, ApiKey::OFFSET_FETCH);
        self.members.push(Some(id));
        self.all.push(id);
    }

    fn running(&self) -> Vec<ClientId> {
        self.members.iter().flatten().copied().collect()
    }

    /// Every partition owned by exactly one running member, each holding its balanced
    /// share (`n / m` or one more).
    fn converged(&mut self) -> bool {
        let running = self.running();
        let n = self.cfg.partitions as usize;
        let (lo, hi) = (n / running.len(), n.div_ceil(running.len()));
        let mut owners = vec![0u32; n];
        for id in running {
            while self.world.poll_event(id).is_some() {}
            let assigned = self.world.client(id).assignment();
            if !(lo..=hi).contains(&assigned.len()) {
                return false;
            }
            for tp in assigned {
                if let Some(o) = usize::try_from(tp.partition)
                    .ok()
                    .and_then(|p| owners.get_mut(p))
                {
                    *o += 1;
                }
            }
        }
        owners.iter().all(|o| *o == 1)
    }

    /// Runs until the group converged; how long that took.
    fn until_converged(&mut self) -> Duration {
        let from = self.world.elapsed();
        loop {
            let limit = self.world.now() + SAMPLE;
            self.world.step(limit);
            if self.world.elapsed() - from >= SAMPLE && self.converged() {
                return self.world.elapsed() - from;
            }
            if self.world.elapsed() - from > GIVE_UP {
                panic!(
                    "the group of {} did not converge within {GIVE_UP:?}",
                    self.cfg.members
                );
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.world.elapsed() + d;
        while self.world.elapsed() < end {
            let limit = self.world.now() + (end - self.world.elapsed()).min(SAMPLE);
            self.world.step(limit);
            for id in self.running() {
                while self.world.poll_event(id).is_some() {}
            }
        }
    }

    fn group_requests(&mut self) -> u64 {
        let ids = self.all.clone();
        (ids.into_iter())
            .map(|id| self.world.client(id).counters().group_operations)
            .sum()
    }

    /// The body of an OffsetFetch answer for every registry slot, as the coordinator's
    /// store holds them now.
    fn registry_read_bytes(&self) -> usize {
        let Some(broker) = self.world.cluster().broker(1) else {
            return 0;
        };
        let slots = registry_slots(self.cfg.members) as i32;
        let partitions = (0..slots)
            .map(|partition| {
                let c = broker
                    .offsets()
                    .fetch(Some(GROUP), Some(REGISTRY_TOPIC), partition);
                OffsetFetchPartitionResponse {
                    partition,
                    offset: c.offset,
                    metadata: c.metadata.as_deref().map(Into::into),
                    error_code: ErrorCode::NONE,
                }
            })
            .collect();
        let reply = OffsetFetchResponse {
            topics: vec![OffsetFetchTopicResponse {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions,
            }],
        };
        reply.to_bytes().len()
    }
}

/// Registry slots for a group of `members` with room for one more: at least the default 64.
pub fn registry_slots(members: usize) -> usize {
    (members + members / 4 + 1).max(64)
}

/// Runs one large-group world.
pub fn run_scale(cfg: ScaleConfig) -> ScaleReport {
    let net = NetConfig {
        latency: Duration::from_micros(200),
        jitter: Duration::from_micros(100),
        split_chance: 0.0,
    };
    let mut world = World::new(cfg.seed, ClusterConfig::with_brokers(1), net);
    if let Err(e) = world.cluster_mut().create_topic(TOPIC, cfg.partitions, 1) {
        panic!("create_topic: {e}");
    }
    world.settle();
    let mut s = Scale {
        world,
        cfg,
        members: Vec::new(),
        all: Vec::new(),
    };
    let mut report = ScaleReport::default();
    for _ in 0..cfg.members {
        s.start();
    }
    report.start = s.until_converged();

    // Steady: group requests and registry reads over whole heartbeat intervals.
    for id in s.running() {
        s.world.take_tapped(id);
    }
    let (ops, t0) = (s.group_requests(), s.world.elapsed());
    s.run_for(cfg.heartbeat * cfg.steady_heartbeats);
    let secs = (s.world.elapsed() - t0).as_secs_f64();
    let members = cfg.members as f64;
    report.steady_requests_per_member_s = (s.group_requests() - ops) as f64 / members / secs;
    let reads: usize = (s.running().into_iter())
        .map(|id| s.world.take_tapped(id).len())
        .sum();
    report.reads_per_heartbeat = reads as f64 / members / f64::from(cfg.steady_heartbeats);
    report.bytes_per_read = s.registry_read_bytes();
    report.bytes_per_heartbeat = report.reads_per_heartbeat * report.bytes_per_read as f64;
    report.forced_bytes_per_heartbeat = 16.0 * members;

    // Changes: a join, a close, a crash, each to convergence. Members started together
    // keep their rounds in step, and the group converges right after a round: each change
    // comes a little over an interval later, just after the members' next round — the
    // slowest moment for the others to see it.
    let after_rounds = cfg.heartbeat + cfg.heartbeat / 20;
    let (ops, t0) = (s.group_requests(), s.world.elapsed());
    s.run_for(after_rounds);
    s.start();
    report.join = s.until_converged();
    s.run_for(after_rounds);
    let closing = s.members[0].take();
    if let Some(id) = closing {
        let now = s.world.now();
        s.world.client(id).close_consumer(now);
    }
    report.close = s.until_converged();
    s.run_for(after_rounds);
    let crashed = s.members[1].take();
    if let Some(id) = crashed {
        s.world.crash_client(id);
    }
    report.crash = s.until_converged();
    let secs = (s.world.elapsed() - t0).as_secs_f64();
    report.change_requests_per_member_s = (s.group_requests() - ops) as f64 / members / secs;
    report
}
