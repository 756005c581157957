//! One group member as an application runs it: subscribes (with a rebalance listener or
//! without), polls every record as soon as the world drains it, commits (automatically, or
//! explicitly every [`COMMIT_EVERY`]), closes gracefully or dies when the plan says so;
//! everything it delivers, every assignment and membership view it reports goes to the
//! [`GroupWatch`].
//!
//! A member with a listener answers each `PartitionsRevoking` after [`Listener::delay`]; an
//! explicitly committing one first commits the positions of the partitions it is losing and
//! answers once that commit has its outcome (Kafka's `onPartitionsRevoked` doing
//! `commitSync`).

use super::watch::GroupWatch;
use crate::workload::TOPIC;
use crate::world::{ClientId, World};
use std::collections::BTreeSet;
use std::time::Duration;
use stellflow_sansio::{
    BrokerAddress, ClientConfig, CommitId, ConsumerEvent, Event, OffsetReset, RevocationId,
    TopicPartition,
};

/// Commit period of a member that commits explicitly.
pub const COMMIT_EVERY: Duration = Duration::from_millis(700);
/// How long a graceful close may take before the member's client is closed anyway.
pub const CLOSE_WAIT: Duration = Duration::from_secs(10);
/// The group every member joins.
pub const GROUP: &str = "dst-group";

/// How a member answers revocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Subscribed without a listener: revocations go on at once.
    None,
    /// Subscribed with a listener that answers after this delay (plus its own commit's
    /// round trip when the member commits explicitly).
    Answers {
        /// How long the application takes before it answers.
        delay: Duration,
    },
}

impl Listener {
    /// The listener of member `index` from a plan's bits.
    pub fn from_bits(bits: u32, index: usize) -> Listener {
        match (bits >> ((16 + 2 * index) % 32)) & 0b11 {
            0 => Listener::None,
            1 => Listener::Answers {
                delay: Duration::ZERO,
            },
            2 => Listener::Answers {
                delay: Duration::from_millis(300),
            },
            _ => Listener::Answers {
                delay: Duration::from_millis(1_500),
            },
        }
    }

    /// The delay before an answer (zero without a listener).
    pub fn delay(&self) -> Duration {
        match self {
            Listener::None => Duration::ZERO,
            Listener::Answers { delay } => *delay,
        }
    }
}

/// A revocation the member's listener has not answered yet.
#[derive(Debug, Clone, Copy)]
struct Answer {
    id: RevocationId,
    /// Not before this time.
    due: Duration,
    /// The member's own commit of the partitions, answered first.
    commit: Option<CommitId>,
}

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
    /// How it answers revocations.
    pub listener: Listener,
    /// Its `group.instance.id` when it is a static member.
    pub instance: Option<String>,
    next_commit: Duration,
    answers: Vec<Answer>,
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
    /// Starts member `index` in `world` with `config` (see [`member_config`]; its
    /// `group_instance_id` makes it a static member) and subscribes it to the topic.
    pub fn start(
        world: &mut World,
        config: ClientConfig,
        index: usize,
        listener: Listener,
    ) -> Option<Member> {
        let auto_commit = config.consumer.enable_auto_commit;
        let instance = config.consumer.group_instance_id.clone();
        let client = match world.add_client(config) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("member config: {e}"));
                return None;
            }
        };
        let now = world.now();
        let subscribed = match listener {
            Listener::None => world.client(client).subscribe(now, &[TOPIC]),
            Listener::Answers { .. } => world.client(client).subscribe_with_listener(now, &[TOPIC]),
        };
        if let Err(e) = subscribed {
            world.report("setup", format!("subscribe: {e}"));
            return None;
        }
        Some(Member {
            index,
            client,
            auto_commit,
            state: MemberState::Live,
            listener,
            instance,
            next_commit: world.elapsed() + COMMIT_EVERY,
            answers: Vec::new(),
        })
    }

    /// Whether the member is subscribed and consuming (not closing, not gone).
    pub fn live(&self) -> bool {
        self.state == MemberState::Live
    }

    /// When the member has timed work.
    pub fn next_at(&self) -> Option<Duration> {
        if self.state == MemberState::Gone {
            // Closed or crashed: its unanswered revocations died with it.
            return None;
        }
        let answer = self
            .answers
            .iter()
            .filter(|a| a.commit.is_none())
            .map(|a| a.due)
            .min();
        let own = match self.state {
            MemberState::Live if !self.auto_commit => Some(self.next_commit),
            MemberState::Closing(since) => Some(since + CLOSE_WAIT),
            _ => None,
        };
        own.into_iter().chain(answer).min()
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
                ConsumerEvent::PartitionsRevoking { id, partitions } => {
                    self.revoking(world, id, partitions);
                }
                ConsumerEvent::CommitCompleted { id, .. } => {
                    for a in &mut self.answers {
                        if a.commit == Some(id) {
                            a.commit = None;
                        }
                    }
                }
                ConsumerEvent::GroupMembers(view) => watch.view(self.index, view),
                ConsumerEvent::PartitionsAssigned(tps) => {
                    let parts = (tps.iter())
                        .filter(|tp| &*tp.topic == TOPIC)
                        .map(|tp| tp.partition)
                        .collect();
                    watch.assigned(self.index, &parts, world.elapsed());
                    watch.reassigned(
                        self.index,
                        tps.iter()
                            .filter(|tp| &*tp.topic == TOPIC)
                            .map(|tp| tp.partition),
                    );
                }
                ConsumerEvent::PartitionsRevoked(tps) | ConsumerEvent::PartitionsLost(tps) => {
                    watch.reassigned(
                        self.index,
                        tps.iter()
                            .filter(|tp| &*tp.topic == TOPIC)
                            .map(|tp| tp.partition),
                    );
                }
                ConsumerEvent::Fenced { instance_id } => self.fenced(world, watch, instance_id),
                ConsumerEvent::Closed if matches!(self.state, MemberState::Closing(_)) => {
                    self.finish_close(world, watch);
                }
                _ => {}
            }
        }
        let at = world.elapsed();
        let now = world.now();
        let (due, wait): (Vec<Answer>, Vec<Answer>) = self
            .answers
            .drain(..)
            .partition(|a| a.commit.is_none() && a.due <= at);
        self.answers = wait;
        for a in due {
            world.client(self.client).revocation_done(now, a.id);
        }
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

    /// The listener's part of a revocation: an explicitly committing member commits the
    /// positions of the partitions it is losing, then (after its delay) answers.
    fn revoking(&mut self, world: &mut World, id: RevocationId, partitions: Vec<TopicPartition>) {
        let Listener::Answers { delay } = self.listener else {
            return;
        };
        let mut commit = None;
        if !self.auto_commit {
            let positions: Vec<_> = partitions
                .iter()
                .filter_map(|tp| {
                    world
                        .client(self.client)
                        .position(tp)
                        .map(|p| (tp.clone(), p))
                })
                .collect();
            if !positions.is_empty() {
                let now = world.now();
                commit = world
                    .client(self.client)
                    .commit_positions(now, positions)
                    .ok();
            }
        }
        self.answers.push(Answer {
            id,
            due: world.elapsed() + delay,
            commit,
        });
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

    /// A newer member of this member's instance fenced it: the error `poll` returns must name
    /// the instance; the application gives up and closes its client.
    fn fenced(&mut self, world: &mut World, watch: &mut GroupWatch, instance_id: String) {
        let error = world.client(self.client).fatal_consumer_error();
        let named = error.as_ref().is_some_and(|e| {
            self.instance.as_deref() == Some(instance_id.as_str())
                && e.to_string().contains(&format!("{instance_id:?}"))
        });
        if !named {
            world.report(
                "group-fence-names-the-instance",
                format!(
                    "member {} ({:?}) fenced as {instance_id:?} with error {error:?}",
                    self.index, self.instance
                ),
            );
        }
        watch.fenced();
        if self.state != MemberState::Gone {
            let now = world.now();
            world.client(self.client).close(now);
            self.state = MemberState::Gone;
            watch.stopped(self.index);
        }
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
