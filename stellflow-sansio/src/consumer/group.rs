//! Group membership with the coordinator: FindCoordinator (then host:port, never the nodeId),
//! JoinGroup (the member id), SyncGroup — a non-empty assignment wins and is kept with
//! heartbeats, rejoins with capped backoff after 19 or 1 and a thrash warning (DESIGN §3.1);
//! an empty one (always, on today's server) hands over to the member registry
//! (`membership.rs`, ARCHITECTURE.md decision 19), which shares the partitions among the
//! members without heartbeats. Commits, auto-commit and mid-blob positions included, are in
//! `commit.rs` (DESIGN §3.7); the coordinator's answers are taken in `coordinator.rs`. A request that merely
//! timed out is no reason to rejoin (its answer may be what got lost): a heartbeat goes again
//! at once, a SyncGroup is asked again for the same generation while the session can be
//! alive. A lost connection to the coordinator is no reason either: the session lives on the
//! server, not in the connection, so the member looks the coordinator up again and carries
//! on with the same generation; only the session timeout or an error answer rejoin.
//! Heartbeats also run while a SyncGroup is unanswered: SyncGroup does not refresh the
//! session on this server, a Heartbeat for the new generation does. A heartbeat times out
//! after a third of what the session leaves beside the heartbeat interval, so the two
//! timeouts in a row that make the connection layer give up a silently dead connection fit in
//! the session with room for the new connection.

use super::commit::CommitReq;
use super::member::{Member, heartbeat_timeout};
use super::membership::{Leave, Membership};
use super::{
    CommitId, CommitKind, Consumer, ConsumerConfig, ConsumerEvent, Op, TopicPartition, emit,
};
use crate::address::BrokerAddress;
use crate::backoff::Backoff;
use crate::net::Origin;
use crate::offset_model::Position;
use crate::refresh::Urgency;
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;
use stellflow_proto::ErrorCode;
use stellflow_proto::messages::{
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, RequestBody, SyncGroupRequest,
};

/// SyncGroups sent for one generation before a member whose SyncGroups keep timing out
/// joins again (its heartbeats may keep the session alive meanwhile, so the session alone
/// does not end the retries).
const MAX_SYNC_ATTEMPTS: u32 = 3;

/// Group and coordinator state.
#[derive(Debug)]
pub(crate) struct Group {
    pub(super) bootstrap: Option<BrokerAddress>,
    /// The coordinator's address, once found.
    pub(crate) coordinator: Option<BrokerAddress>,
    pub(crate) want_coordinator: bool,
    pub(super) find_in_flight: bool,
    pub(super) find_retry_at: Option<Instant>,
    pub(crate) subscription: Vec<String>,
    pub(crate) member: Member,
    pub(super) member_id: Option<String>,
    pub(super) generation: i32,
    pub(super) join_seq: Option<u64>,
    /// When the JoinGroup that the current generation came from was sent: the server refreshed
    /// the member's session no earlier than that (SyncGroup does not refresh it).
    pub(super) joined_at: Option<Instant>,
    pub(super) sync_seq: Option<u64>,
    /// SyncGroups sent for the current generation.
    pub(super) sync_attempts: u32,
    /// A SyncGroup lost with its connection waits for the coordinator to be found again.
    pub(super) resync: bool,
    pub(super) hb_seq: Option<u64>,
    pub(super) next_heartbeat: Option<Instant>,
    pub(super) last_ok: Option<Instant>,
    pub(super) stable_since: Option<Instant>,
    /// Delays of rejoins the membership asked for (19, 1, …): the rejoin rate cap.
    pub(super) backoff: Backoff,
    /// Delays of retries after a failed join or sync exchange: Kafka's 1 s cap.
    pub(super) retry_backoff: Backoff,
    pub(super) joins: VecDeque<Instant>,
    pub(super) thrash_warned: Option<Instant>,
    pub(crate) server_assignment: bool,
    pub(super) is_leader: bool,
    pub(super) next_auto_commit: Option<Instant>,
    pub(super) pending: VecDeque<CommitReq>,
    pub(super) in_flight: HashMap<u64, CommitReq>,
    pub(super) next_commit: u64,
    /// The instance id of a static member that a newer member of its instance fenced: the
    /// consumer takes no part in the group any more (`instance.rs`).
    pub(crate) fenced: Option<String>,
    /// Membership through the member registry (`membership.rs`), on once SyncGroup assigned
    /// nothing.
    pub(crate) reg: Membership,
}

/// Why a member rejoins, which picks the back-off of its delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rejoin {
    /// The group moved on without it (19, or another error in a heartbeat answer).
    Membership,
    /// The coordinator no longer knows the member (1): join again as a new member.
    UnknownMember,
    /// The join or sync exchange failed, or contact was lost: retry soon.
    Failed,
}

impl Rejoin {
    /// The cause of an error in a JoinGroup or SyncGroup answer.
    pub(super) fn answered(code: ErrorCode) -> Self {
        match code {
            ErrorCode(1) => Rejoin::UnknownMember,
            ErrorCode(19) => Rejoin::Membership,
            _ => Rejoin::Failed,
        }
    }
}

impl Group {
    /// Group state for `config`; FindCoordinator goes to `bootstrap` (or the configured one).
    pub(crate) fn new(config: &ConsumerConfig, bootstrap: Option<BrokerAddress>) -> Self {
        Group {
            bootstrap: config.coordinator_bootstrap.clone().or(bootstrap),
            coordinator: None,
            want_coordinator: false,
            find_in_flight: false,
            find_retry_at: None,
            subscription: Vec::new(),
            member: Member::Idle,
            member_id: None,
            generation: -1,
            join_seq: None,
            joined_at: None,
            sync_seq: None,
            sync_attempts: 0,
            resync: false,
            hb_seq: None,
            next_heartbeat: None,
            last_ok: None,
            stable_since: None,
            backoff: Backoff::new(config.rejoin_backoff, config.rejoin_backoff_max, 0.2),
            retry_backoff: Backoff::new(config.rejoin_backoff, config.join_retry_backoff_max, 0.2),
            joins: VecDeque::new(),
            thrash_warned: None,
            server_assignment: false,
            is_leader: false,
            next_auto_commit: None,
            pending: VecDeque::new(),
            in_flight: HashMap::new(),
            next_commit: 0,
            fenced: None,
            reg: Membership::new(),
        }
    }

    /// Whether the group needs driving (subscribed, or commits outstanding).
    pub(crate) fn active(&self) -> bool {
        !self.subscription.is_empty() || !self.pending.is_empty() || !self.in_flight.is_empty()
    }

    /// The member id, once joined.
    pub(crate) fn member_id(&self) -> Option<&str> {
        self.member_id.as_deref()
    }

    /// The generation, once joined (−1 before).
    pub(crate) fn generation(&self) -> i32 {
        self.generation
    }

    /// Forgets the coordinator after a transport failure; it is looked up again.
    pub(crate) fn lost_coordinator(&mut self, now: Instant) {
        self.coordinator = None;
        self.find_retry_at = Some(now + self.backoff_base());
    }

    fn backoff_base(&self) -> std::time::Duration {
        std::time::Duration::from_millis(100)
    }

    pub(crate) fn alloc_commit(&mut self) -> CommitId {
        self.next_commit += 1;
        CommitId(self.next_commit)
    }

    /// The earliest group deadline after `last_now`. Instants at or before `last_now` were
    /// handled by the pass that ran then, or wait for something else (the coordinator, a
    /// connection) that has its own deadline: reporting them would make the driver spin.
    pub(crate) fn deadline(
        &self,
        config: &ConsumerConfig,
        has_group: bool,
        closing: bool,
        last_now: Instant,
    ) -> Option<Instant> {
        if !has_group {
            return None;
        }
        let mut d: Vec<Option<Instant>> =
            vec![self.next_auto_commit.filter(|_| config.enable_auto_commit)];
        if self.coordinator.is_none() && !self.find_in_flight {
            d.push(self.find_retry_at);
        }
        match self.member {
            Member::Waiting(t) => d.push(Some(t)),
            Member::Stable if self.reg.active => {}
            Member::Stable => {
                if self.hb_seq.is_none() {
                    d.push(self.next_heartbeat);
                }
                d.push(self.last_ok.map(|t| t + config.session_timeout));
            }
            Member::Syncing if self.hb_seq.is_none() => d.push(self.next_heartbeat),
            _ => {}
        }
        // A queued commit (waiting for a coordinator) fails at its deadline.
        d.extend(self.pending.iter().map(|c| Some(c.deadline)));
        d.push(self.reg.deadline(closing, last_now));
        d.into_iter().flatten().filter(|t| *t > last_now).min()
    }
}

impl Consumer {
    /// Runs the group: coordinator lookup, joins, heartbeats, auto-commit, queued commits.
    pub(crate) fn drive_group(&mut self, now: Instant, sh: &mut Shared) -> bool {
        let Some(group_id) = self.config.group_id.clone() else {
            return false;
        };
        // 1. What runs on the member's own clock: lease, withdrawn writes, commit deadlines,
        //    auto-commit, the session.
        let mut sent = self.drive_group_clocks(now, sh);
        // A fenced static member takes no part any more (`instance.rs`).
        if self.group.fenced.is_some() {
            return sent;
        }
        // 2. The coordinator, looked up when anything needs it.
        let subscribed = !self.group.subscription.is_empty() && !self.closing;
        sent |= self.find_coordinator(now, &group_id, subscribed, sh);
        let Some(coordinator) = self.group.coordinator.clone() else {
            return sent;
        };
        self.group.want_coordinator = false;
        // 3. Queued commits, one at a time and in the order they were made (see `start_commit`).
        if self.group.in_flight.is_empty()
            && let Some(c) = self.group.pending.pop_front()
        {
            self.send_commit(now, &group_id, &coordinator, c, sh);
            sent = true;
        }
        // 4. Leaving: on close, or when a manual `assign` replaced the subscription (the
        //    registry slot is freed).
        if self.closing {
            sent |= self.drive_leave(now, &group_id, &coordinator, sh);
            return sent;
        }
        if self.group.reg.active && self.group.subscription.is_empty() {
            sent |= self.drive_part(now, &group_id, &coordinator, sh);
            return sent;
        }
        if !subscribed {
            return sent;
        }
        // 5. A SyncGroup lost with its connection is asked again, or the member rejoins.
        if self.group.resync && self.group.member == Member::Syncing {
            self.group.resync = false;
            if !(self.sync_may_retry(now) && self.send_sync(now, sh)) {
                self.rejoin(
                    now,
                    "SyncGroup lost with its connection",
                    Rejoin::Failed,
                    sh,
                );
            }
            sent = true;
        }
        // 6. JoinGroup when due, Heartbeat when due.
        sent |= self.send_join(now, &group_id, &coordinator, sh);
        sent |= self.send_heartbeat(now, &group_id, &coordinator, sh);
        // 7. The assignment: shared through the member registry, or every partition of the
        //    subscribed topics when the server assigns nothing and there is no registry.
        if self.group.member == Member::Stable && self.group.reg.active {
            sent |= self.drive_membership(now, &group_id, &coordinator, sh);
        } else if self.group.member == Member::Stable && !self.group.server_assignment {
            let wanted = self.subscribed_partitions(sh);
            let differs = wanted.len() != self.parts.len()
                || wanted.iter().any(|tp| !self.parts.contains_key(tp));
            if differs && !wanted.is_empty() {
                self.apply_assignment(now, wanted, sh);
            }
        }
        sent
    }

    /// The group's work on the member's own clock, whether or not the coordinator is known:
    /// a lapsed lease loses the membership, writes unanswered past the lease margin are
    /// withdrawn, commits past their deadline fail, auto-commit runs, and a session without a
    /// successful heartbeat rejoins. Returns whether a commit was sent.
    fn drive_group_clocks(&mut self, now: Instant, sh: &mut Shared) -> bool {
        if self.group.next_auto_commit.is_none() {
            self.group.next_auto_commit = Some(now + self.config.auto_commit_interval);
        }
        // Before anything commits: a member whose lease lapsed (paused past its session, or
        // cut off from the coordinator) may no longer own its partitions.
        if self.lease_lapsed(now) {
            self.lose_membership(now, "this member's lease lapsed on its own clock", sh);
        }
        // A write unanswered for the lease margin is withdrawn while the member still runs:
        // if this process stops before its lease would lapse (SIGSTOP while cut off), the
        // host must not deliver it later, after another member took the partitions over.
        if self.withdraw_deadline().is_some_and(|t| t <= now) {
            self.withdraw_unanswered_writes(
                now,
                "a write stayed unanswered past the lease margin",
                sh,
            );
        }
        self.expire_pending_commits(now, sh);
        let sent = self.auto_commit(now, sh);
        // The session expires on its own clock, whether or not the coordinator is known.
        if !self.closing
            && self.group.member == Member::Stable
            && !self.group.reg.active
            && self
                .group
                .last_ok
                .is_some_and(|t| t + self.config.session_timeout <= now)
        {
            self.rejoin(
                now,
                "no successful heartbeat within the session timeout",
                Rejoin::Failed,
                sh,
            );
        }
        sent
    }

    /// FindCoordinator when no coordinator is known, none is being looked up, the retry
    /// backoff is over, and something needs one (a subscription, a command, a commit).
    fn find_coordinator(
        &mut self,
        now: Instant,
        group_id: &str,
        subscribed: bool,
        sh: &mut Shared,
    ) -> bool {
        let g = &mut self.group;
        if g.coordinator.is_some()
            || g.find_in_flight
            || g.find_retry_at.is_some_and(|t| t > now)
            || !(subscribed || g.want_coordinator || !g.pending.is_empty())
        {
            return false;
        }
        let target = g.bootstrap.clone().map_or(Target::Any, Target::Address);
        sh.net.submit(
            now,
            target,
            RequestBody::FindCoordinator(FindCoordinatorRequest {
                key: Some(group_id.into()),
                key_type: 0,
            }),
            None,
            Origin::Consumer(Op::FindCoordinator.tag()),
            &RequestOptions::default(),
        );
        sh.net.counters.group_operations += 1;
        g.find_in_flight = true;
        true
    }

    /// JoinGroup when the member is idle or its rejoin wait is over; counts the join and
    /// warns with [`ConsumerEvent::GroupThrashing`] when joins come too often.
    fn send_join(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let g = &mut self.group;
        let join_now = match g.member {
            Member::Idle => true,
            Member::Waiting(t) => t <= now,
            _ => false,
        };
        if !join_now {
            return false;
        }
        let rebalance = RequestOptions {
            timeout: Some(self.config.rebalance_timeout),
            ..RequestOptions::default()
        };
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            RequestBody::JoinGroup(JoinGroupRequest {
                group_id: Some(group_id.into()),
                member_id: g.member_id.as_deref().map(Into::into),
                session_timeout_ms: i32::try_from(self.config.session_timeout.as_millis())
                    .unwrap_or(i32::MAX),
            }),
            None,
            Origin::Consumer(Op::Join.tag()),
            &rebalance,
        );
        sh.net.counters.group_operations += 1;
        g.join_seq = Some(seq);
        g.joined_at = Some(now);
        g.member = Member::Joining;
        g.joins.push_back(now);
        while g
            .joins
            .front()
            .is_some_and(|t| *t + self.config.thrash_window < now)
        {
            g.joins.pop_front();
        }
        if g.joins.len() >= self.config.thrash_threshold
            && g.thrash_warned
                .is_none_or(|t| t + self.config.thrash_window < now)
        {
            g.thrash_warned = Some(now);
            emit(
                sh,
                ConsumerEvent::GroupThrashing {
                    rejoins: g.joins.len(),
                    window: self.config.thrash_window,
                },
            );
        }
        true
    }

    /// Heartbeat when due, for a member that joined (or syncs) with a server that assigns
    /// partitions itself; members of the registry never heartbeat.
    fn send_heartbeat(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let g = &mut self.group;
        if !(matches!(g.member, Member::Stable | Member::Syncing)
            && !g.reg.active
            && g.hb_seq.is_none()
            && g.next_heartbeat.is_some_and(|t| t <= now))
        {
            return false;
        }
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            RequestBody::Heartbeat(HeartbeatRequest {
                group_id: Some(group_id.into()),
                generation_id: g.generation,
                member_id: g.member_id.as_deref().map(Into::into),
            }),
            None,
            Origin::Consumer(Op::Heartbeat.tag()),
            &RequestOptions {
                timeout: Some(heartbeat_timeout(&self.config)),
                ..RequestOptions::default()
            },
        );
        sh.net.counters.group_operations += 1;
        g.hb_seq = Some(seq);
        g.next_heartbeat = Some(now + self.config.heartbeat_interval);
        true
    }

    /// Every partition of the subscribed topics, from metadata.
    pub(crate) fn subscribed_partitions(&self, sh: &mut Shared) -> Vec<TopicPartition> {
        let cluster = sh.metadata.cluster();
        let mut out = Vec::new();
        let mut missing = false;
        for t in &self.group.subscription {
            match cluster.topics.get(t) {
                Some(info) => {
                    out.extend(info.partitions.keys().map(|p| TopicPartition::new(t, *p)))
                }
                None => missing = true,
            }
        }
        if missing {
            sh.refresher.request(Urgency::AfterBackoff);
        }
        out
    }

    /// Replaces the assignment: commits and revokes what goes, then assigns what comes.
    pub(crate) fn apply_assignment(
        &mut self,
        now: Instant,
        wanted: Vec<TopicPartition>,
        sh: &mut Shared,
    ) {
        let revoking = self.not_wanted(&wanted);
        if !revoking.is_empty() {
            if self.config.enable_auto_commit && self.config.group_id.is_some() {
                let positions: Vec<(TopicPartition, Position)> = revoking
                    .iter()
                    .filter_map(|tp| {
                        let pos = self.commit_position(tp)?;
                        (self.parts.get(tp)?.committed != Some(pos)).then(|| (tp.clone(), pos))
                    })
                    .collect();
                if !positions.is_empty() {
                    self.start_commit(now, positions, CommitKind::Revocation, sh);
                }
            }
            emit(sh, ConsumerEvent::PartitionsRevoked(revoking));
        }
        let (_, added) = self.set_assignment(&wanted);
        if !added.is_empty() {
            emit(sh, ConsumerEvent::PartitionsAssigned(added));
        }
        self.fetch_wake = true;
    }

    /// Sends SyncGroup for the current generation and member id to the coordinator; false
    /// when no coordinator is known.
    pub(super) fn send_sync(&mut self, now: Instant, sh: &mut Shared) -> bool {
        let g = &mut self.group;
        let Some(addr) = g.coordinator.clone() else {
            return false;
        };
        let group_id = self.config.group_id.clone().unwrap_or_default();
        let seq = sh.net.submit(
            now,
            Target::Address(addr),
            RequestBody::SyncGroup(SyncGroupRequest {
                group_id: Some(group_id.as_str().into()),
                generation_id: g.generation,
                member_id: g.member_id.as_deref().map(Into::into),
            }),
            None,
            Origin::Consumer(Op::Sync.tag()),
            &RequestOptions {
                timeout: Some(self.config.rebalance_timeout),
                ..RequestOptions::default()
            },
        );
        sh.net.counters.group_operations += 1;
        g.sync_seq = Some(seq);
        g.sync_attempts += 1;
        g.member = Member::Syncing;
        true
    }

    /// Whether a SyncGroup for the current generation may be asked again: fewer than
    /// `MAX_SYNC_ATTEMPTS` sent and the session (opened by the JoinGroup, refreshed by
    /// heartbeats) possibly still alive.
    pub(super) fn sync_may_retry(&self, now: Instant) -> bool {
        let g = &self.group;
        g.sync_attempts < MAX_SYNC_ATTEMPTS
            && g.joined_at
                .max(g.last_ok)
                .is_some_and(|t| now < t + self.config.session_timeout)
    }

    /// Joins again as a new member (a fresh member id from the coordinator) after the retry
    /// back-off: the registry membership of the old id is over.
    pub(crate) fn rejoin_as_new_member(&mut self, now: Instant, reason: &str, sh: &mut Shared) {
        self.rejoin(now, reason, Rejoin::UnknownMember, sh);
    }

    /// Leaves the generation and joins again after a delay: from the membership back-off when
    /// the group asked for it (`cause`), from the retry back-off after a failed exchange.
    pub(super) fn rejoin(&mut self, now: Instant, reason: &str, cause: Rejoin, sh: &mut Shared) {
        let forget_member = cause == Rejoin::UnknownMember;
        let g = &mut self.group;
        if forget_member {
            g.member_id = None;
        }
        g.join_seq = None;
        g.joined_at = None;
        g.sync_seq = None;
        g.resync = false;
        g.hb_seq = None;
        g.next_heartbeat = None;
        g.last_ok = None;
        g.stable_since = None;
        let delay = match cause {
            Rejoin::Failed => g.retry_backoff.next_delay(&mut sh.rng),
            Rejoin::Membership | Rejoin::UnknownMember => g.backoff.next_delay(&mut sh.rng),
        };
        g.member = Member::Waiting(now + delay);
        emit(
            sh,
            ConsumerEvent::GroupRejoining {
                reason: reason.to_owned(),
                retry_in: delay,
            },
        );
    }

    /// Marks the consumer closed and says so.
    pub(crate) fn finish_close(&mut self, sh: &mut Shared) {
        // A registry member frees its slot first, so that the others take its partitions
        // over at once (the server has no LeaveGroup).
        if let (true, Leave::No, Some(started)) = (
            self.group.reg.active,
            self.group.reg.leave,
            self.close_started,
        ) {
            self.group.reg.leave = Leave::Wanted {
                deadline: started + self.config.rebalance_timeout,
            };
            return;
        }
        if let Leave::Wanted { .. } = self.group.reg.leave {
            return;
        }
        if !self.closed {
            self.closed = true;
            emit(sh, ConsumerEvent::Closed);
            for _ in 0..std::mem::take(&mut self.extra_close_waiters) {
                emit(sh, ConsumerEvent::Closed);
            }
        }
    }
}
