//! One group member as an application runs it: subscribes, polls every record as soon as
//! the world drains it, commits (automatically, or explicitly every [`COMMIT_EVERY`]),
//! closes gracefully or dies when the plan says so; everything it delivers and every
//! assignment it reports goes to the [`GroupWatch`].

use super::watch::GroupWatch;
use crate::workload::TOPIC;
use crate::world::{ClientId, World};
use std::collections::BTreeSet;
use std::time::Duration;
use stellflow_sansio::{BrokerAddress, ClientConfig, ConsumerEvent, Event, OffsetReset};

/// Commit period of a member that commits explicitly.
pub const COMMIT_EVERY: Duration = Duration::from_millis(700);
/// How long a graceful close may take before the member's client is closed anyway.
pub const CLOSE_WAIT: Duration = Duration::from_secs(10);
/// The group every member joins.
pub const GROUP: &str = "dst-group";

/// Where a member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Subscribed and consuming.
    Live,
    /// `close_consumer` called at this time; waiting for `Closed`.
    Closing(Duration),
    /// Closed or crashed: never driven again.
    Gone,
}

/// One member (one client: a member that rejoins after a restart is a new member).
#[derive(Debug)]
pub struct Member {
    /// The member's number in the world (0 for the first started).
    pub index: usize,
    /// Its client.
    pub client: ClientId,
    /// Whether it auto-commits.
    pub auto_commit: bool,
    /// Where it is in its life.
    pub state: MemberState,
    next_commit: Duration,
}

/// A client configuration bootstrapping from every one of `brokers` brokers (each broker
/// describes only itself and what it leads, so a client must know them all to see every
/// partition).
pub fn bootstrap_config(brokers: u32) -> ClientConfig {
    let list: Vec<String> = (1..=brokers.max(1))
        .map(|b| format!("broker-{b}:9092"))
        .collect();
    match ClientConfig::new(&list.join(",")) {
        Ok(c) => c,
        Err(e) => panic!("bootstrap {list:?} rejected: {e}"),
    }
}

/// The configuration of member `index` in a world of `brokers` brokers: the group's
/// coordinator is broker 1 ([`super::watch::COORDINATOR`]).
pub fn member_config(
    brokers: u32,
    session: Duration,
    heartbeat: Duration,
    auto_commit: bool,
    index: usize,
) -> ClientConfig {
    let mut c = bootstrap_config(brokers);
    c.consumer.coordinator_bootstrap = Some(BrokerAddress::new("broker-1", 9092));
    c.header.client_id = Some(format!("dst-member-{index}"));
    c.request_timeout = Duration::from_millis(1_500);
    c.reconnect_backoff = Duration::from_millis(50);
    c.metadata_refresh_backoff = Duration::from_millis(50);
    let g = &mut c.consumer;
    g.group_id = Some(GROUP.into());
    g.auto_offset_reset = OffsetReset::Earliest;
    g.enable_auto_commit = auto_commit;
    g.auto_commit_interval = Duration::from_secs(1);
    g.session_timeout = session;
    g.heartbeat_interval = heartbeat;
    g.rebalance_timeout = session;
    c
}

impl Member {
    /// Starts member `index` in `world` and subscribes it to the topic.
    pub fn start(
        world: &mut World,
        brokers: u32,
        index: usize,
        session: Duration,
        heartbeat: Duration,
        auto_commit: bool,
    ) -> Option<Member> {
        let config = member_config(brokers, session, heartbeat, auto_commit, index);
        let client = match world.add_client(config) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("member config: {e}"));
                return None;
            }
        };
        let now = world.now();
        if let Err(e) = world.client(client).subscribe(now, &[TOPIC]) {
            world.report("setup", format!("subscribe: {e}"));
            return None;
        }
        Some(Member {
            index,
            client,
            auto_commit,
            state: MemberState::Live,
            next_commit: world.elapsed() + COMMIT_EVERY,
        })
    }

    /// Whether the member is subscribed and consuming (not closing, not gone).
    pub fn live(&self) -> bool {
        self.state == MemberState::Live
    }

    /// When the member has timed work.
    pub fn next_at(&self) -> Option<Duration> {
        match self.state {
            MemberState::Live if !self.auto_commit => Some(self.next_commit),
            MemberState::Closing(since) => Some(since + CLOSE_WAIT),
            _ => None,
        }
    }

    /// Takes the member's records and events (when its process runs), reports them to
    /// `watch`, and runs its timed work.
    pub fn drive(
        &mut self,
        world: &mut World,
        watch: &mut GroupWatch,
        values: &mut BTreeSet<String>,
    ) {
        if self.state == MemberState::Gone || !world.client_running(self.client) {
            return;
        }
        while let Some(r) = world.poll_record(self.client) {
            if let Some(v) = &r.value {
                values.insert(String::from_utf8_lossy(v).into_owned());
            }
            watch.delivered(world, self.index, r.partition, (r.offset, r.index));
        }
        while let Some(e) = world.poll_event(self.client) {
            let Event::Consumer(e) = e else { continue };
            match e {
                ConsumerEvent::PartitionsRevoked(tps) | ConsumerEvent::PartitionsAssigned(tps) => {
                    watch.reassigned(
                        self.index,
                        tps.iter()
                            .filter(|tp| &*tp.topic == TOPIC)
                            .map(|tp| tp.partition),
                    );
                }
                ConsumerEvent::Closed if matches!(self.state, MemberState::Closing(_)) => {
                    self.finish_close(world, watch);
                }
                _ => {}
            }
        }
        let at = world.elapsed();
        let now = world.now();
        match self.state {
            MemberState::Live if !self.auto_commit && self.next_commit <= at => {
                self.next_commit = at + COMMIT_EVERY;
                let _ = world.client(self.client).commit(now);
            }
            MemberState::Closing(since) if at >= since + CLOSE_WAIT => {
                self.finish_close(world, watch);
            }
            _ => {}
        }
    }

    /// Starts a graceful close.
    pub fn close(&mut self, world: &mut World) {
        if self.state != MemberState::Live {
            return;
        }
        self.state = MemberState::Closing(world.elapsed());
        let now = world.now();
        world.client(self.client).close_consumer(now);
    }

    fn finish_close(&mut self, world: &mut World, watch: &mut GroupWatch) {
        let now = world.now();
        world.client(self.client).close(now);
        self.state = MemberState::Gone;
        watch.stopped(self.index);
    }

    /// Crashes the member: its client is dropped without any close.
    pub fn crash(&mut self, world: &mut World, watch: &mut GroupWatch) {
        if self.state == MemberState::Gone {
            return;
        }
        world.crash_client(self.client);
        self.state = MemberState::Gone;
        watch.stopped(self.index);
    }
}
