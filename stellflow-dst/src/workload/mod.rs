//! The raw workload: each client issues admin commands, metadata refreshes and raw
//! Produce/Fetch requests (blobs from `BatchBuilder`) at random times, at most one Produce in
//! flight per partition, each Produce to the partition's leader in the client's metadata
//! (a Produce waits until the client knows one). Checked: exactly one outcome per command within its bound; acked
//! offsets grow per partition; one offset never acknowledges two different blobs; a fetched
//! blob equals the blob acknowledged at its offset; and (at the end) every acknowledged blob is
//! in the current leader's log at its offset.
//!
//! `issue.rs` sends the commands; this file schedules them, reads their outcomes and keeps the
//! ledger of acknowledged blobs.

use super::check::OutcomeBook;
use super::world::{ClientId, World};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;
use stellflow_proto::messages::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ProducePartitionData, ProduceRequest,
    ProduceResponse, ProduceTopicData,
};
use stellflow_proto::record::{BatchBuilder, BatchParams};
use stellflow_proto::{ApiKey, Reader, Wire};
use stellflow_sansio::{Event, OffsetSpec, RequestId, RequestOptions, Target};
use stellflow_sim::rng::SimRng;

mod issue;

use issue::leader;

/// The topic every workload writes to.
pub const TOPIC: &str = "t0";

/// Acknowledged blobs of the whole world: `(partition, offset) → blob`.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Every acknowledged blob by position.
    pub acked: BTreeMap<(i32, i64), Bytes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Produce {
        partition: i32,
        records: u32,
        acks: i16,
    },
    Fetch {
        partition: i32,
    },
    DescribeCluster,
    ListOffsets {
        partition: i32,
    },
    DescribeTopics,
    ApiVersions,
    HealthCheck,
    CreateTopic,
    Refresh,
}

#[derive(Debug, Clone)]
enum Cmd {
    Produce {
        partition: i32,
        blob: Bytes,
        acks: i16,
        goal: bool,
    },
    Fetch {
        partition: i32,
        offset: i64,
    },
    Admin {
        goal: bool,
    },
}

/// One client's raw workload.
#[derive(Debug)]
pub struct RawWorkload {
    client: ClientId,
    rng: SimRng,
    ops: VecDeque<(Duration, Op)>,
    book: OutcomeBook<RequestId>,
    cmds: BTreeMap<RequestId, Cmd>,
    busy: BTreeSet<i32>,
    deferred: VecDeque<Op>,
    seq: u64,
    last_offset: BTreeMap<i32, i64>,
    partitions: i32,
    request_timeout: Duration,
    /// Liveness goals still open: produces per partition and one admin command.
    goals_produce: BTreeSet<i32>,
    goal_admin: bool,
    retry_at: Option<Duration>,
    /// The last outcomes, for failure reports.
    history: VecDeque<String>,
}

impl RawWorkload {
    /// A workload of `ops` commands spread over `span`, for a client with `request_timeout`.
    pub fn new(
        client: ClientId,
        seed: u64,
        ops: u32,
        span: Duration,
        partitions: i32,
        request_timeout: Duration,
    ) -> Self {
        let mut rng = SimRng::new(seed);
        let span_ms = span.as_millis().max(1) as u64;
        let mut list: Vec<(Duration, Op)> = (0..ops)
            .map(|_| {
                let at = Duration::from_millis(rng.below(span_ms));
                let partition = rng.below(partitions.max(1) as u64) as i32;
                let op = match rng.below(12) {
                    0..=4 => Op::Produce {
                        partition,
                        records: 1 + rng.below(5) as u32,
                        acks: [1, -1, 0, 1][rng.below(4) as usize],
                    },
                    5 | 6 => Op::Fetch { partition },
                    7 => Op::DescribeCluster,
                    8 => Op::ListOffsets { partition },
                    9 => [Op::DescribeTopics, Op::ApiVersions][rng.below(2) as usize],
                    10 => [Op::HealthCheck, Op::CreateTopic][rng.below(2) as usize],
                    _ => Op::Refresh,
                };
                (at, op)
            })
            .collect();
        list.sort_by_key(|(at, _)| *at);
        RawWorkload {
            client,
            rng,
            ops: list.into(),
            book: OutcomeBook::default(),
            cmds: BTreeMap::new(),
            busy: BTreeSet::new(),
            deferred: VecDeque::new(),
            seq: 0,
            last_offset: BTreeMap::new(),
            partitions,
            request_timeout,
            goals_produce: BTreeSet::new(),
            goal_admin: false,
            retry_at: None,
            history: VecDeque::new(),
        }
    }

    /// The client this workload drives.
    pub fn client_id(&self) -> ClientId {
        self.client
    }

    /// When the next scheduled command is due (virtual time since the start).
    pub fn next_at(&self) -> Option<Duration> {
        let a = self.ops.front().map(|(at, _)| *at);
        match (a, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Commands waiting for their outcome.
    pub fn pending(&self) -> usize {
        self.book.pending()
    }

    /// Commands that got their outcome.
    pub fn completed(&self) -> usize {
        self.book.completed()
    }

    /// Whether every liveness goal is reached and nothing is pending.
    pub fn done(&self) -> bool {
        self.goals_produce.is_empty() && !self.goal_admin && self.book.pending() == 0
    }

    /// Describes what is still open (for a liveness failure).
    pub fn open_work(&self) -> String {
        format!(
            "client {}: {} pending command(s), produce goals on partitions {:?}, admin goal {}; last outcomes: {:?}",
            self.client.0,
            self.book.pending(),
            self.goals_produce,
            self.goal_admin,
            self.history
        )
    }

    /// Starts the liveness phase: one successful produce per partition and one successful
    /// admin command are required.
    pub fn start_goals(&mut self, world: &mut World) {
        self.ops.clear();
        self.deferred.clear();
        self.goals_produce = (0..self.partitions).collect();
        self.goal_admin = true;
        self.retry_at = Some(world.elapsed());
    }

    /// Issues every command due now.
    pub fn issue_due(&mut self, world: &mut World) {
        let now = world.elapsed();
        if self.retry_at.is_some_and(|r| r <= now) {
            self.retry_at = None;
            let goals: Vec<i32> = self.goals_produce.iter().copied().collect();
            for p in goals {
                if self.busy.contains(&p) {
                    continue;
                }
                match leader(world, self.client, p) {
                    Some(broker) => self.produce(world, broker, p, 1, 1, true),
                    None => self.schedule_retry(world),
                }
            }
            if self.goal_admin
                && !self
                    .cmds
                    .values()
                    .any(|c| matches!(c, Cmd::Admin { goal: true }))
            {
                let now = world.now();
                let id = world.client(self.client).describe_cluster(now, Target::Any);
                self.admin_issued(world, id, true);
            }
        }
        let deferred: Vec<Op> = self.deferred.drain(..).collect();
        for op in deferred {
            self.issue(world, op);
        }
        while self.ops.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, op)) = self.ops.pop_front() {
                self.issue(world, op);
            }
        }
    }

    /// Consumes the client's events and checks them.
    pub fn on_events(&mut self, world: &mut World, ledger: &mut Ledger) {
        while let Some(e) = world.poll_event(self.client) {
            let (id, ok_admin, raw) = match e {
                Event::Admin { id, result } => (id, result.is_ok(), None),
                Event::Response { id, result } => (id, false, Some(result)),
                _ => continue,
            };
            let at = world.elapsed();
            if self.history.len() == 8 {
                self.history.pop_front();
            }
            let mut line = format!("{at:?} {id:?} ok_admin={ok_admin}");
            if let Some(r) = &raw {
                match r {
                    Ok(r) => line.push_str(&format!(
                        " raw {:?} err {} body {:?}",
                        r.api_key,
                        r.header.error_code.0,
                        r.body.as_ref().map(|b| b.len())
                    )),
                    Err(e) => line.push_str(&format!(" raw error {e}")),
                }
            }
            self.history.push_back(line);
            if let Err(detail) = self.book.outcome(id, at) {
                world.report("one-outcome", format!("client {}: {detail}", self.client.0));
                continue;
            }
            let Some(cmd) = self.cmds.remove(&id) else {
                continue;
            };
            match cmd {
                Cmd::Admin { goal } => {
                    if goal {
                        if ok_admin {
                            self.goal_admin = false;
                        } else {
                            self.schedule_retry(world);
                        }
                    }
                }
                Cmd::Produce {
                    partition,
                    blob,
                    acks,
                    goal,
                } => {
                    self.busy.remove(&partition);
                    if self.goals_produce.contains(&partition) && !goal && self.retry_at.is_none() {
                        self.retry_at = Some(at);
                    }
                    let body = raw
                        .and_then(|r| r.ok())
                        .filter(|r| r.header.error_code.0 == 0);
                    let resp = body
                        .and_then(|r| r.body)
                        .and_then(|b| ProduceResponse::decode(&mut Reader::new(b)).ok());
                    let part = resp.and_then(|r| {
                        r.responses
                            .into_iter()
                            .flat_map(|t| t.partitions)
                            .find(|p| p.partition == partition)
                    });
                    let ok = part
                        .as_ref()
                        .is_some_and(|p| p.error_code.0 == 0 || p.error_code.0 == 7);
                    match part {
                        Some(p) if ok && acks != 0 && p.base_offset >= 0 => {
                            self.acked(world, ledger, partition, p.base_offset, blob);
                        }
                        _ => {}
                    }
                    if goal {
                        if ok {
                            self.goals_produce.remove(&partition);
                        } else {
                            self.schedule_retry(world);
                        }
                    }
                }
                Cmd::Fetch { partition, offset } => {
                    let body = raw
                        .and_then(|r| r.ok())
                        .filter(|r| r.header.error_code.0 == 0)
                        .and_then(|r| r.body);
                    let resp = body.and_then(|b| FetchResponse::decode(&mut Reader::new(b)).ok());
                    let data = resp.and_then(|r| {
                        r.responses
                            .into_iter()
                            .flat_map(|t| t.partitions)
                            .find(|p| p.partition == partition && p.error_code.0 == 0)
                            .and_then(|p| p.records)
                    });
                    if let Some(data) = data.filter(|d| !d.is_empty())
                        && let Some(expected) = ledger.acked.get(&(partition, offset))
                        && *expected != data
                    {
                        world.report(
                            "fetch-returns-acked-blob",
                            format!(
                                "client {}: fetch of t0-{partition}@{offset} returned {} bytes, acked blob has {}",
                                self.client.0,
                                data.len(),
                                expected.len()
                            ),
                        );
                    }
                }
            }
        }
        if let Some(detail) = self.book.overdue(world.elapsed()) {
            world.report(
                "outcome-in-time",
                format!("client {}: {detail}", self.client.0),
            );
        }
    }

    fn schedule_retry(&mut self, world: &mut World) {
        let at = world.elapsed() + Duration::from_millis(100);
        self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
        let now = world.now();
        world.client(self.client).refresh_metadata(now);
    }

    fn acked(
        &mut self,
        world: &mut World,
        ledger: &mut Ledger,
        partition: i32,
        offset: i64,
        blob: Bytes,
    ) {
        if let Some(prev) = self.last_offset.get(&partition)
            && *prev >= offset
        {
            world.report(
                "acked-in-order",
                format!(
                    "client {}: t0-{partition} acked offset {offset} after {prev}",
                    self.client.0
                ),
            );
        }
        self.last_offset.insert(partition, offset);
        if let Some(old) = ledger.acked.insert((partition, offset), blob.clone())
            && old != blob
        {
            world.report(
                "acked-offsets-unique",
                format!("t0-{partition}@{offset} acknowledged for two different blobs"),
            );
        }
    }
}

/// Every acknowledged blob must be in the current leader's log at its offset (the last
/// leader's, once the cluster is gone for good).
pub fn check_ledger(world: &mut World, ledger: &Ledger) {
    let key = Some(TOPIC.to_owned());
    let mut problems = Vec::new();
    // A cluster gone for good keeps its logs: the last leader's is the one to read.
    let gone = world.gone_at().is_some();
    for ((partition, offset), blob) in &ledger.acked {
        let cluster = world.cluster();
        let leader = cluster.broker_ids().into_iter().find(|id| {
            (cluster.is_alive(*id) || gone)
                && cluster
                    .broker(*id)
                    .and_then(|b| b.metadata().get(&key, *partition))
                    .is_some_and(|m| m.leader == *id)
        });
        let Some(leader) = leader else {
            problems.push(format!("t0-{partition} has no leader at the end"));
            continue;
        };
        let Some(log) = cluster
            .broker(leader)
            .and_then(|b| b.log(TOPIC, *partition))
        else {
            problems.push(format!("leader {leader} has no log for t0-{partition}"));
            continue;
        };
        if *offset < log.log_start() {
            continue;
        }
        match log.entry(*offset) {
            Some(e) if e.blob == *blob => {}
            Some(_) => problems.push(format!(
                "t0-{partition}@{offset}: leader {leader} holds another blob"
            )),
            None => problems.push(format!(
                "t0-{partition}@{offset}: missing on leader {leader} (log end {})",
                log.log_end()
            )),
        }
    }
    for p in problems.into_iter().take(3) {
        world.report("acked-in-log", p);
    }
}
