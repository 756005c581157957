//! Group membership with the coordinator: FindCoordinator (then host:port, never the nodeId),
//! JoinGroup (the member id), SyncGroup — a non-empty assignment wins and is kept with
//! heartbeats, rejoins with capped backoff after 19 or 1 and a thrash warning (DESIGN §3.1);
//! an empty one (always, on today's server) hands over to the member registry
//! (`membership.rs`, ARCHITECTURE.md decision 19), which shares the partitions among the
//! members without heartbeats. Commits, auto-commit and mid-blob positions included, are in
//! `commit.rs` (DESIGN §3.7), and this file routes their answers there. A request that merely
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
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::offset_model::Position;
use crate::refresh::Urgency;
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;
use stellflow_proto::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, RequestBody, SyncGroupRequest, SyncGroupResponse,
};
use stellflow_proto::{ErrorCode, Reader, Wire};

/// SyncGroups sent for one generation before a member whose SyncGroups keep timing out
/// joins again (its heartbeats may keep the session alive meanwhile, so the session alone
/// does not end the retries).
const MAX_SYNC_ATTEMPTS: u32 = 3;

/// Group and coordinator state.
#[derive(Debug)]
pub struct Group {
    bootstrap: Option<BrokerAddress>,
    /// The coordinator's address, once found.
    pub(crate) coordinator: Option<BrokerAddress>,
    pub(crate) want_coordinator: bool,
    find_in_flight: bool,
    find_retry_at: Option<Instant>,
    pub(crate) subscription: Vec<String>,
    pub(crate) member: Member,
    member_id: Option<String>,
    generation: i32,
    join_seq: Option<u64>,
    /// When the JoinGroup that the current generation came from was sent: the server refreshed
    /// the member's session no earlier than that (SyncGroup does not refresh it).
    joined_at: Option<Instant>,
    sync_seq: Option<u64>,
    /// SyncGroups sent for the current generation.
    sync_attempts: u32,
    /// A SyncGroup lost with its connection waits for the coordinator to be found again.
    resync: bool,
    hb_seq: Option<u64>,
    next_heartbeat: Option<Instant>,
    last_ok: Option<Instant>,
    stable_since: Option<Instant>,
    /// Delays of rejoins the membership asked for (19, 1, …): the rejoin rate cap.
    backoff: Backoff,
    /// Delays of retries after a failed join or sync exchange: Kafka's 1 s cap.
    retry_backoff: Backoff,
    joins: VecDeque<Instant>,
    thrash_warned: Option<Instant>,
    pub(crate) server_assignment: bool,
    is_leader: bool,
    pub(super) next_auto_commit: Option<Instant>,
    pub(super) pending: VecDeque<CommitReq>,
    pub(super) in_flight: HashMap<u64, CommitReq>,
    next_commit: u64,
    /// Membership through the member registry (`membership.rs`), on once SyncGroup assigned
    /// nothing.
    pub(crate) reg: Membership,
}

/// Why a member rejoins, which picks the back-off of its delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rejoin {
    /// The group moved on without it (19, or another error in a heartbeat answer).
    Membership,
    /// The coordinator no longer knows the member (1): join again as a new member.
    UnknownMember,
    /// The join or sync exchange failed, or contact was lost: retry soon.
    Failed,
}

impl Rejoin {
    /// The cause of an error in a JoinGroup or SyncGroup answer.
    fn answered(code: ErrorCode) -> Self {
        match code {
            ErrorCode(1) => Rejoin::UnknownMember,
            ErrorCode(19) => Rejoin::Membership,
            _ => Rejoin::Failed,
        }
    }
}

impl Group {
    /// Group state for `config`; FindCoordinator goes to `bootstrap` (or the configured one).
    pub fn new(config: &ConsumerConfig, bootstrap: Option<BrokerAddress>) -> Self {
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
            reg: Membership::new(),
        }
    }

    /// Whether the group needs driving (subscribed, or commits outstanding).
    pub fn active(&self) -> bool {
        !self.subscription.is_empty() || !self.pending.is_empty() || !self.in_flight.is_empty()
    }

    /// The member id, once joined.
    pub fn member_id(&self) -> Option<&str> {
        self.member_id.as_deref()
    }

    /// The generation, once joined (−1 before).
    pub fn generation(&self) -> i32 {
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
        let revoking: Vec<TopicPartition> = self
            .parts
            .keys()
            .filter(|tp| !wanted.contains(tp))
            .cloned()
            .collect();
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
    fn send_sync(&mut self, now: Instant, sh: &mut Shared) -> bool {
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
    fn sync_may_retry(&self, now: Instant) -> bool {
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
    fn rejoin(&mut self, now: Instant, reason: &str, cause: Rejoin, sh: &mut Shared) {
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

    /// A group or commit request answered: each request kind has its own step.
    pub(crate) fn on_group(
        &mut self,
        now: Instant,
        op: Op,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let transport = result.as_ref().err().cloned();
        let body = result.ok().and_then(|r| r.body);
        match op {
            Op::FindCoordinator => self.on_find_coordinator(now, body),
            Op::Join => self.on_join(now, seq, body, transport, sh),
            Op::Sync => self.on_sync(now, seq, body, transport, sh),
            Op::Heartbeat => self.on_heartbeat(now, seq, body, transport, sh),
            Op::Commit(_) => self.on_commit(now, seq, body, transport, sh),
            _ => {}
        }
    }

    /// FindCoordinator answered: the coordinator's address (host and port, never the node
    /// id), else a lookup again after the backoff.
    fn on_find_coordinator(&mut self, now: Instant, body: Option<Bytes>) {
        self.group.find_in_flight = false;
        let resp = body.and_then(|b| FindCoordinatorResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let host = r.host.map(|h| h.to_string()).unwrap_or_default();
                match u16::try_from(r.port) {
                    Ok(port) if !host.is_empty() && port != 0 => {
                        self.group.coordinator = Some(BrokerAddress::new(host, port));
                        self.group.backoff.reset();
                    }
                    _ => self.group.lost_coordinator(now),
                }
            }
            _ => self.group.lost_coordinator(now),
        }
    }

    /// JoinGroup answered: the member id and generation, then a SyncGroup; else a rejoin.
    fn on_join(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.join_seq != Some(seq) {
            return;
        }
        self.group.join_seq = None;
        let resp = body.and_then(|b| JoinGroupResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let g = &mut self.group;
                g.member_id = r.member_id.map(|m| m.to_string());
                g.generation = r.generation_id;
                let leader = r.leader_id.map(|l| l.to_string());
                g.is_leader = leader.is_some() && leader == g.member_id;
                // Heartbeats keep the session alive while the SyncGroup is out.
                g.last_ok = None;
                g.next_heartbeat = Some(now + self.config.heartbeat_interval);
                g.sync_attempts = 0;
                g.resync = false;
                if !self.send_sync(now, sh) {
                    self.rejoin(now, "coordinator lost during the join", Rejoin::Failed, sh);
                }
            }
            Some(r) => {
                let reason = format!("JoinGroup answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::answered(r.error_code), sh);
            }
            None => {
                if transport.is_some() {
                    self.group.lost_coordinator(now);
                }
                self.rejoin(now, "JoinGroup failed", Rejoin::Failed, sh);
            }
        }
    }

    /// SyncGroup answered: the member is stable (with the server's assignment, or the
    /// registry's); a generation that moved on keeps the registry going; a lost answer is
    /// asked again while the session can be alive; anything else rejoins.
    fn on_sync(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.sync_seq != Some(seq) {
            return;
        }
        self.group.sync_seq = None;
        let resp = body.and_then(|b| SyncGroupResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => self.synced(now, &r, sh),
            // Another member joined between this member's JoinGroup and SyncGroup: the
            // generation moved on, which on this server says nothing about the
            // assignment (there is none). Joining again would fence that member in
            // turn; the registry needs no generation, so it goes on from here.
            Some(r) if r.error_code == ErrorCode(19) && self.group.member_id.is_some() => {
                let g = &mut self.group;
                g.retry_backoff.reset();
                g.member = Member::Stable;
                g.server_assignment = false;
                g.stable_since = Some(now);
                let member_id = g.member_id.clone().unwrap_or_default();
                emit(
                    sh,
                    ConsumerEvent::GroupJoined {
                        generation: g.generation,
                        member_id,
                        leader: g.is_leader,
                        server_assignment: false,
                    },
                );
                self.group.reg.start();
            }
            Some(r) => {
                let reason = format!("SyncGroup answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::answered(r.error_code), sh);
            }
            // A timed-out SyncGroup does not mean the generation is gone: only its
            // answer may have been lost. SyncGroup is a pure check on this server
            // (PROTOCOL.md §3.10), so ask again with the same generation and member id
            // while the session (opened by the JoinGroup, refreshed by heartbeats)
            // can still be alive, up to `MAX_SYNC_ATTEMPTS` times; a JoinGroup
            // instead would bump the generation and fence every other member
            // (§3.11). A 19 or 1 in the answer then rejoins as usual. A SyncGroup
            // lost with its connection (or timed out while the coordinator is being
            // looked up again) is asked again once the coordinator is known.
            None if transport.is_some() && self.sync_may_retry(now) => {
                let timeout = matches!(transport, Some(RequestError::Timeout { .. }));
                if !timeout {
                    self.group.lost_coordinator(now);
                }
                if !(timeout && self.send_sync(now, sh)) {
                    self.group.resync = true;
                }
            }
            None => {
                if transport.is_some() {
                    self.group.lost_coordinator(now);
                }
                self.rejoin(now, "SyncGroup failed", Rejoin::Failed, sh);
            }
        }
    }

    /// A successful SyncGroup: the member is stable and says so with
    /// [`ConsumerEvent::GroupJoined`]; a non-empty assignment from the server is applied, an
    /// empty one (always, on today's server) starts the member registry.
    fn synced(&mut self, now: Instant, r: &SyncGroupResponse, sh: &mut Shared) {
        let server: Vec<TopicPartition> = r
            .assignments
            .iter()
            .filter_map(|a| {
                a.topic
                    .as_ref()
                    .map(|t| TopicPartition::new(&**t, a.partition))
            })
            .collect();
        self.group.server_assignment = !server.is_empty();
        let registry = server.is_empty();
        let g = &mut self.group;
        g.retry_backoff.reset();
        g.member = Member::Stable;
        g.last_ok = Some(now);
        g.stable_since = Some(now);
        g.next_heartbeat = Some(now + self.config.heartbeat_interval);
        let member_id = g.member_id.clone().unwrap_or_default();
        emit(
            sh,
            ConsumerEvent::GroupJoined {
                generation: g.generation,
                member_id,
                leader: g.is_leader,
                server_assignment: g.server_assignment,
            },
        );
        if registry {
            // Today's server: the members share the partitions through the
            // registry in the group's offset store (`membership.rs`).
            self.group.reg.start();
        } else {
            self.apply_assignment(now, server, sh);
        }
    }

    /// Heartbeat answered: the session is alive; a fence (19) or an unknown member (1)
    /// rejoins; a lost answer or connection only waits for the next heartbeat.
    fn on_heartbeat(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.hb_seq != Some(seq) {
            return;
        }
        self.group.hb_seq = None;
        let resp = body.and_then(|b| HeartbeatResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let g = &mut self.group;
                g.last_ok = Some(now);
                if g.stable_since
                    .is_some_and(|t| t + self.config.thrash_window <= now)
                {
                    g.backoff.reset();
                }
            }
            Some(r) if r.error_code == ErrorCode(19) => {
                self.rejoin(
                    now,
                    "fenced (19): the generation moved",
                    Rejoin::Membership,
                    sh,
                );
            }
            Some(r) if r.error_code == ErrorCode(1) => {
                self.rejoin(
                    now,
                    "unknown member (1): the session expired",
                    Rejoin::UnknownMember,
                    sh,
                );
            }
            Some(r) => {
                let reason = format!("Heartbeat answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::Membership, sh);
            }
            // A timed-out heartbeat is not a lost session: only its answer may have
            // been lost (the broker may have counted it). The next heartbeat is due at
            // once; the session-timeout check rejoins when none succeeds in time.
            None if matches!(transport, Some(RequestError::Timeout { .. })) => {}
            // The connection to the coordinator was lost (or could not be made): the
            // session lives on the server, not in the connection. Look the
            // coordinator up again and heartbeat the same generation at once; the
            // session-timeout check rejoins when none succeeds in time, and a
            // coordinator that lost the group (a restart) answers 1.
            None if transport.is_some() => {
                self.group.lost_coordinator(now);
                self.group.next_heartbeat = Some(now);
            }
            None => {
                self.rejoin(now, "Heartbeat answer undecodable", Rejoin::Failed, sh);
            }
        }
    }
}
