//! The consumer workload ([`ConsumerLoad`]): one consumer, group or assigned, restarted
//! gracefully at random times, with its delivery-order, duplicate and completeness checks.

use super::*;

/// The consumer workload.
#[derive(Debug)]
pub struct ConsumerLoad {
    client: ClientId,
    config: ClientConfig,
    shape: PipelineShape,
    partitions: i32,
    restarts: VecDeque<Duration>,
    closing: Option<Duration>,
    next_commit: Duration,
    last: BTreeMap<i32, Pos>,
    max: BTreeMap<i32, Pos>,
    delivered: BTreeMap<(i32, Pos), String>,
    floor: BTreeMap<i32, Pos>,
    windows: BTreeMap<i32, Vec<(Pos, Pos)>>,
    rejoins: u64,
    last_rejoin: String,
    last_restart: Option<Duration>,
    /// The last `GroupJoined`: when it was seen and the member id it gave.
    last_join: Option<(Duration, String)>,
    incarnations: u32,
    /// Records delivered so far (repeats included).
    deliveries: u64,
    /// Every unreachable error a poll got (`Client::take_unreachable_error`, what the
    /// adapters' `poll`/`recv` return), with when it was taken.
    unreachable: Vec<(Duration, stellflow_sansio::ClusterUnreachable)>,
}

/// How long a graceful restart waits for `ConsumerEvent::Closed`.
const RESTART_WAIT: Duration = Duration::from_secs(6);
/// Commit period of the explicit-commit consumer.
const COMMIT_EVERY: Duration = Duration::from_millis(700);

impl ConsumerLoad {
    /// Adds the consumer client to `world`; it restarts `restarts` times during `span`.
    pub fn new(
        world: &mut World,
        base: &ClientConfig,
        shape: PipelineShape,
        seed: u64,
        restarts: u32,
        span: Duration,
        partitions: i32,
    ) -> Option<Self> {
        let mut rng = SimRng::new(seed);
        let mut config = base.clone();
        config.header.client_id = Some(format!("dst-consumer-{seed:x}"));
        let c = &mut config.consumer;
        c.group_id = Some("dst".into());
        c.auto_offset_reset = OffsetReset::Earliest;
        c.enable_auto_commit = shape.auto_commit;
        c.auto_commit_interval = Duration::from_secs(1);
        c.session_timeout = Duration::from_secs(10);
        c.heartbeat_interval = Duration::from_secs(1);
        c.rebalance_timeout = Duration::from_secs(5);
        c.max_entries_per_partition = shape.fetch_entries;
        c.max_fetches_in_flight = shape.fetches_in_flight;
        let span_ms = span.as_millis().max(1) as u64;
        let mut r: Vec<Duration> = (0..restarts)
            .map(|_| Duration::from_millis(rng.below(span_ms)))
            .collect();
        r.sort();
        let mut load = ConsumerLoad {
            client: ClientId(usize::MAX),
            config,
            shape,
            partitions,
            restarts: r.into(),
            closing: None,
            next_commit: COMMIT_EVERY,
            last: BTreeMap::new(),
            max: BTreeMap::new(),
            delivered: BTreeMap::new(),
            floor: BTreeMap::new(),
            windows: BTreeMap::new(),
            rejoins: 0,
            last_rejoin: String::new(),
            last_restart: None,
            last_join: None,
            incarnations: 0,
            deliveries: 0,
            unreachable: Vec::new(),
        };
        load.start(world).then_some(load)
    }

    fn start(&mut self, world: &mut World) -> bool {
        let client = match world.add_client(self.config.clone()) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("consumer config: {e}"));
                return false;
            }
        };
        self.client = client;
        self.incarnations += 1;
        self.last.clear();
        self.last_join = None;
        let now = world.now();
        let r = if self.shape.subscribe {
            world.client(client).subscribe(now, &[TOPIC])
        } else {
            let tps: Vec<TopicPartition> = (0..self.partitions)
                .map(|p| TopicPartition::new(TOPIC, p))
                .collect();
            world.client(client).assign(now, &tps)
        };
        if let Err(e) = r {
            world.report("setup", format!("consumer start: {e}"));
            return false;
        }
        true
    }

    /// When the consumer has timed work (restart, commit).
    pub fn next_at(&self) -> Option<Duration> {
        if let Some(since) = self.closing {
            return Some(since + RESTART_WAIT);
        }
        let r = self.restarts.front().copied();
        let c = (!self.shape.auto_commit).then_some(self.next_commit);
        match (r, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The current incarnation's client.
    pub fn client_id(&self) -> ClientId {
        self.client
    }

    /// Group rejoins seen so far.
    pub fn rejoins(&self) -> u64 {
        self.rejoins
    }

    /// The last rejoin's reason.
    pub fn last_rejoin(&self) -> &str {
        &self.last_rejoin
    }

    /// The group id the consumer uses.
    pub fn group_id(&self) -> &str {
        self.config.consumer.group_id.as_deref().unwrap_or_default()
    }

    /// The last `GroupJoined` of the current incarnation: when it was seen and the member id.
    pub fn last_join(&self) -> Option<(Duration, &str)> {
        self.last_join.as_ref().map(|(t, m)| (*t, m.as_str()))
    }

    /// When the last restart finished.
    pub fn last_restart(&self) -> Option<Duration> {
        self.last_restart
    }

    /// The consumer's client configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Records delivered so far, over all incarnations (repeats included).
    pub fn delivered_count(&self) -> u64 {
        self.deliveries
    }

    /// The session timeout.
    pub fn session_timeout(&self) -> Duration {
        self.config.consumer.session_timeout
    }

    /// Whether the consumer uses a group subscription.
    pub fn subscribed(&self) -> bool {
        self.shape.subscribe
    }

    /// No more restarts (liveness phase).
    pub fn stop_restarts(&mut self) {
        self.restarts.clear();
    }

    /// The unreachable errors polls got so far, with when each was taken.
    pub fn unreachable_errors(&self) -> &[(Duration, stellflow_sansio::ClusterUnreachable)] {
        &self.unreachable
    }

    /// Whether a graceful restart is under way.
    pub fn restarting(&self) -> bool {
        self.closing.is_some()
    }

    /// Runs timed work due now: commits and restarts.
    pub fn issue_due(&mut self, world: &mut World) {
        let at = world.elapsed();
        let now = world.now();
        if self.closing.is_none() && !self.shape.auto_commit && self.next_commit <= at {
            self.next_commit = at + COMMIT_EVERY;
            let _ = world.client(self.client).commit(now);
        }
        if self.closing.is_none() && self.restarts.front().is_some_and(|t| *t <= at) {
            self.restarts.pop_front();
            self.closing = Some(at);
            world.client(self.client).close_consumer(now);
        }
        if let Some(since) = self.closing
            && at >= since + RESTART_WAIT
        {
            self.finish_restart(world);
        }
    }

    fn finish_restart(&mut self, world: &mut World) {
        self.closing = None;
        self.last_restart = Some(world.elapsed());
        let now = world.now();
        world.client(self.client).close(now);
        while world.poll_record(self.client).is_some() {}
        for (p, max) in &self.max {
            let floor = self.floor.get(p).copied().unwrap_or((i64::MIN, 0));
            if floor <= *max {
                self.windows.entry(*p).or_default().push((floor, *max));
            }
        }
        self.start(world);
    }

    /// Consumes events and records, and checks them.
    ///
    /// Events come first, in the order the core queued them: every record `poll_record` hands
    /// out now was ready after all of them, so a `PartitionsLost` queued since the last call
    /// opens its redelivery window before the new run's records are checked (taking records
    /// first saw the new run's first record as a repeat of the old run's; seed 47008688). A
    /// graceful restart's `Closed` is the exception: the records still ready then belong to
    /// the incarnation that is closing, and are checked before it ends.
    pub fn on_events(&mut self, world: &mut World) {
        while let Some(e) = world.poll_event(self.client) {
            let Event::Consumer(e) = e else { continue };
            self.on_consumer_event(world, e);
        }
        self.take_records(world);
        // A poll that found no record takes the unreachable error, as the adapters' do.
        if let Some(e) = world.client(self.client).take_unreachable_error() {
            self.unreachable.push((world.elapsed(), e));
        }
    }

    /// Takes every record ready and checks its order, repeats and value.
    fn take_records(&mut self, world: &mut World) {
        while let Some(r) = world.poll_record(self.client) {
            self.deliveries += 1;
            let p = r.partition;
            let pos = (r.offset, r.index);
            let value = r
                .value
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default();
            if let Some(last) = self.last.get(&p)
                && *last >= pos
            {
                world.report(
                    "consumer-in-order",
                    format!(
                        "t0-{p}: {pos:?} delivered after {last:?} (incarnation {})",
                        self.incarnations
                    ),
                );
            }
            self.last.insert(p, pos);
            let m = self.max.entry(p).or_insert(pos);
            *m = (*m).max(pos);
            if self.delivered.insert((p, pos), value).is_some() {
                let allowed = self
                    .windows
                    .get(&p)
                    .is_some_and(|w| w.iter().any(|(lo, hi)| *lo <= pos && pos <= *hi));
                if !allowed {
                    world.report(
                        "consumer-exactly-once",
                        format!(
                            "t0-{p}: {pos:?} delivered twice (committed {:?}, incarnation {})",
                            self.floor.get(&p),
                            self.incarnations
                        ),
                    );
                }
            }
        }
    }

    /// Takes in one consumer event: commits raise the floor, a lapsed lease opens a
    /// redelivery window, a graceful restart's close ends the incarnation.
    fn on_consumer_event(&mut self, world: &mut World, e: ConsumerEvent) {
        match e {
            ConsumerEvent::CommitCompleted {
                result: Ok(list), ..
            } => {
                for (tp, pos) in list {
                    let f = self
                        .floor
                        .entry(tp.partition)
                        .or_insert((pos.offset, pos.index));
                    *f = (*f).max((pos.offset, pos.index));
                }
            }
            // A group member whose lease lapsed (its coordinator unanswered for a
            // session) drops these partitions without committing and takes them again
            // as a new member, from the committed position: what it delivered after its
            // last commit comes again, in a new run of that partition, as after a
            // restart (ARCHITECTURE.md decision 19). Nothing before the commit may.
            ConsumerEvent::PartitionsLost(lost) => {
                for tp in lost {
                    let p = tp.partition;
                    self.last.remove(&p);
                    if let Some(max) = self.max.get(&p).copied() {
                        let floor = self.floor.get(&p).copied().unwrap_or((i64::MIN, 0));
                        if floor <= max {
                            self.windows.entry(p).or_default().push((floor, max));
                        }
                    }
                }
            }
            ConsumerEvent::GroupJoined { member_id, .. } => {
                self.last_join = Some((world.elapsed(), member_id));
            }
            ConsumerEvent::GroupRejoining { reason, retry_in } => {
                self.rejoins += 1;
                self.last_rejoin =
                    format!("at {:?}: {reason} (retry in {retry_in:?})", world.elapsed());
            }
            ConsumerEvent::Closed if self.closing.is_some() => {
                self.take_records(world);
                self.finish_restart(world);
            }
            _ => {}
        }
    }

    /// Acknowledged records (producer and raw) not delivered yet.
    pub fn missing(&self, producer: Option<&ProducerLoad>, ledger: &Ledger) -> Vec<(i32, Pos)> {
        let mut want: Vec<(i32, Pos)> = Vec::new();
        if let Some(p) = producer {
            want.extend(p.written.keys().copied());
        }
        for ((p, offset), blob) in &ledger.acked {
            let n = blob_records(blob.clone()).count();
            want.extend((0..n).map(|i| (*p, (*offset, i as u32))));
        }
        want.retain(|k| !self.delivered.contains_key(k));
        want
    }

    /// End check: delivered values equal the acknowledged ones.
    pub fn check_values(&self, world: &mut World, producer: Option<&ProducerLoad>) {
        let Some(producer) = producer else { return };
        for (k, v) in &producer.written {
            if let Some(d) = self.delivered.get(k)
                && d != v
            {
                world.report(
                    "consumer-values",
                    format!("t0-{}@{:?}: delivered {d}, acknowledged {v}", k.0, k.1),
                );
                return;
            }
        }
    }
}
