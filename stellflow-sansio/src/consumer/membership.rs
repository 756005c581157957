//! Group membership through the member registry (see `registry`): a member's rounds (write
//! its slot, then read every slot), its lease on its own clock, the claim → confirm → start
//! of a partition, the revoke → commit → release of one, and the release of everything on
//! close. ARCHITECTURE.md (decision 19) holds the safety argument; in short:
//!
//! * A member starts a partition only at a read made after a write that listed it as a claim
//!   was answered, when no other member that is not gone lists it (held or claimed). Of two
//!   members claiming at once, at least one sees the other's claim (each reads after its own
//!   write is in), and whoever sees a rival claim withdraws.
//! * A member gives a partition up only by a write that no longer lists it, after its fetching
//!   stopped and its position was committed.
//! * Others count a member gone when its counter has not moved for a session timeout on their
//!   own clock, or a slot says it was freed. The member itself stops delivering earlier: its
//!   lease ends a session timeout (less a margin) after the sending of its last write that was
//!   answered within the margin and sent while the lease held. A member whose lease ended (a
//!   pause, a lost coordinator) drops its partitions without committing them and joins again
//!   as a new member.

use super::assignor::{MemberInput, assign_topic};
use super::registry::{FreeReason, REGISTRY_TOPIC, Registration, Slot, View, encode_free};
use super::{
    CommitId, CommitKind, Consumer, ConsumerEvent, Op, RevocationId, TopicPartition, emit,
};
use crate::address::BrokerAddress;
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
    OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic, RequestBody,
};
use stellflow_proto::{ErrorCode, Reader, Wire};

/// What follows a registry read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterRead {
    /// A round's first read: this member's write follows at once, if the slot is still its
    /// own. No write goes out on an older read: members that write the same slot one after
    /// the other would each read their own write back and never see each other (DST
    /// finding F2), and a member back from isolation would overwrite a newcomer (F4).
    Write,
    /// The read after a write: confirms the slot and may start the claims; a write follows
    /// only when something changed.
    Confirm,
    /// The read before freeing the slot (close, or a manual `assign`): freed only if it is
    /// still this member's.
    Leave,
}

/// The registry request on its way.
#[derive(Debug)]
enum InFlight {
    Read(AfterRead),
    Write(Written),
}

/// What a registry write carries for this member's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotWrite {
    /// This member's registration (refreshes its lease and publishes its claims).
    Refresh,
    /// The slot freed: the member leaves (close, or a manual `assign`).
    Free,
}

/// A registry write on its way: what it wrote, to apply its answer.
#[derive(Debug)]
struct Written {
    sent: Instant,
    counter: i64,
    /// The write listed no started partition (it may extend a lapsed lease).
    holds_empty: bool,
    /// The claims it published.
    claims: BTreeSet<TopicPartition>,
    /// Whether it refreshed the slot or freed it.
    kind: SlotWrite,
}

/// A revocation under way.
#[derive(Debug)]
struct Revocation {
    partitions: Vec<TopicPartition>,
    /// The listener's answer is waited for until then.
    deadline: Instant,
    answered: bool,
    /// The commit whose end releases the partitions: its own, or the last earlier one of them.
    commit: Option<CommitId>,
}

/// Where the close-time release stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    /// Not closing (or nothing to release).
    No,
    /// The slot is to be freed; the close waits until `deadline` at most.
    Wanted { deadline: Instant },
    /// Freed (or given up): the close may finish.
    Done,
}

/// The registry side of a member.
#[derive(Debug)]
pub(crate) struct Membership {
    /// Membership runs through the registry (the server assigned nothing).
    pub(crate) active: bool,
    /// Revocations wait for [`crate::Client::revocation_done`].
    pub(crate) listening: bool,
    slot: Option<i32>,
    /// The counter of the last write answered.
    counter: i64,
    lease_until: Option<Instant>,
    in_flight: Option<(u64, InFlight)>,
    next_round: Option<Instant>,
    /// Something to publish: a round starts at once.
    dirty: bool,
    /// The last read found this member's slot as it last wrote it.
    confirmed: bool,
    /// A read found this member's registration in its slot (the slot is its own until a read
    /// finds something else there: then another member overwrote it).
    owned: bool,
    /// When a read first found the registration in the current slot. A fresh member claims
    /// nothing until `heartbeat_interval / 4` later, so that members started together see
    /// each other before they claim (DST finding F3).
    registered_at: Option<Instant>,
    claims: BTreeSet<TopicPartition>,
    /// Claims that the last answered write published: a read after it may start them.
    published: BTreeSet<TopicPartition>,
    revocations: BTreeMap<RevocationId, Revocation>,
    next_revocation: u64,
    view: View,
    /// Slots to free with the next write.
    frees: Vec<(i32, String)>,
    live: Vec<String>,
    pub(crate) leave: Leave,
    /// A manual `assign` replaced the subscription then: the slot is being freed.
    parting_since: Option<Instant>,
}

impl Membership {
    pub(crate) fn new() -> Self {
        Membership {
            active: false,
            listening: false,
            slot: None,
            counter: 0,
            lease_until: None,
            in_flight: None,
            next_round: None,
            dirty: false,
            confirmed: false,
            owned: false,
            registered_at: None,
            claims: BTreeSet::new(),
            published: BTreeSet::new(),
            revocations: BTreeMap::new(),
            next_revocation: 0,
            view: View::default(),
            frees: Vec::new(),
            live: Vec::new(),
            leave: Leave::No,
            parting_since: None,
        }
    }

    /// Starts registry membership (after a SyncGroup that assigned nothing).
    pub(crate) fn start(&mut self) {
        self.active = true;
        self.dirty = true;
    }

    /// The earliest instant after `last_now` the membership needs a pass at. Each instant is
    /// weighed on its own: a round overdue while the coordinator is unknown must not hide the
    /// end of the lease, which matters while closing too (a close commit still queued when
    /// the lease ends is dropped).
    pub(crate) fn deadline(&self, closing: bool, last_now: Instant) -> Option<Instant> {
        let mut d: Vec<Instant> = Vec::new();
        if let Leave::Wanted { deadline } = self.leave {
            d.push(deadline);
        }
        if self.active {
            d.extend(self.lease_until);
        }
        if self.active && !closing && self.parting_since.is_none() {
            d.extend(
                (self.revocations.values())
                    .filter(|r| !r.answered)
                    .map(|r| r.deadline),
            );
            if self.in_flight.is_none() {
                d.extend(self.next_round);
            }
        }
        d.into_iter().filter(|t| *t > last_now).min()
    }

    fn lease_valid(&self, now: Instant) -> bool {
        self.lease_until.is_some_and(|t| now < t)
    }

    /// When the registry write on its way was sent, if one is.
    fn write_sent(&self) -> Option<Instant> {
        match &self.in_flight {
            Some((_, InFlight::Write(w))) => Some(w.sent),
            _ => None,
        }
    }
}

/// How much earlier than the others' judgment a member stops: also the longest a write may
/// take to be answered and still extend the lease.
pub(crate) fn lease_margin(session: Duration, heartbeat: Duration) -> Duration {
    heartbeat.min(session / 4)
}

impl Consumer {
    /// How long the host may keep this client's written bytes unacknowledged
    /// ([`crate::ConnectRequest::unacked_timeout`]): the lease margin for a client with a
    /// group id, on every connection, because the coordinator's connection is the slot of
    /// its address, shared with everything sent to that broker and often opened before
    /// FindCoordinator named it (decision 19 (e)). `None` without a group.
    pub(crate) fn unacked_timeout(&self) -> Option<Duration> {
        self.config.group_id.as_ref()?;
        Some(lease_margin(
            self.config.session_timeout,
            self.config.heartbeat_interval,
        ))
    }

    /// Whether registry membership is on and this member's lease has lapsed while it holds or
    /// claims partitions or has a slot: a member that holds nothing forgets its slot too, for
    /// the others may have freed it and given it to a newcomer (DST finding F4). A closing
    /// member too: its close commit may still wait for the coordinator (DST group seeds
    /// 1000223, 1000784: closed while cut off, it committed stale positions on its return).
    pub(crate) fn lease_lapsed(&self, now: Instant) -> bool {
        let m = &self.group.reg;
        m.active
            && !m.lease_valid(now)
            && (!self.parts.is_empty() || !m.claims.is_empty() || m.slot.is_some())
            && m.lease_until.is_some()
    }

    /// When the oldest write still unanswered on the coordinator connection (a commit or a
    /// registry write) was sent, while registry membership is on.
    pub(crate) fn oldest_unanswered_write(&self) -> Option<Instant> {
        if !self.group.reg.active {
            return None;
        }
        (self.group.in_flight.values())
            .filter_map(|c| c.sent)
            .chain(self.group.reg.write_sent())
            .min()
    }

    /// The coordinator, when a write is unanswered on its connection (see
    /// [`Consumer::oldest_unanswered_write`]).
    pub(crate) fn coordinator_with_unanswered_writes(
        &self,
    ) -> Option<crate::address::BrokerAddress> {
        self.oldest_unanswered_write()?;
        self.group.coordinator.clone()
    }

    /// The instant a write unanswered since [`Consumer::oldest_unanswered_write`] is
    /// withdrawn: the lease margin after its sending.
    pub(crate) fn withdraw_deadline(&self) -> Option<Instant> {
        let margin = lease_margin(self.config.session_timeout, self.config.heartbeat_interval);
        self.oldest_unanswered_write().map(|t| t + margin)
    }

    /// Withdraws the writes still unanswered on the coordinator connection by aborting it
    /// (decision 19, (d)): the driver resets the socket, so that bytes of a commit or
    /// registry write the coordinator has not received are discarded by this host and never
    /// land after another member took the partitions over. Their requests fail as
    /// disconnected (a commit is retried only for partitions still owned); a fresh connection
    /// is opened. Nothing happens when no write is on its way.
    pub(crate) fn withdraw_unanswered_writes(
        &mut self,
        now: Instant,
        reason: &'static str,
        sh: &mut Shared,
    ) {
        if self.oldest_unanswered_write().is_none() {
            return;
        }
        let Some(coordinator) = self.group.coordinator.clone() else {
            return;
        };
        if sh.net.abort_address(
            now,
            &coordinator,
            crate::error::ConnectionError::WritesWithdrawn { reason },
        ) {
            tracing::info!(%coordinator, "coordinator connection reset: {reason}");
        }
    }

    /// Drops every partition without committing it (another member may own them by now):
    /// commits not sent yet lose them too, and writes on their way are withdrawn (the
    /// coordinator connection is reset). The partitions dropped.
    fn drop_uncommitted(&mut self, now: Instant, sh: &mut Shared) -> Vec<TopicPartition> {
        self.withdraw_unanswered_writes(now, "the member dropped its partitions", sh);
        let lost: Vec<TopicPartition> = self.parts.keys().cloned().collect();
        self.drop_unsent_commits(&lost, sh);
        self.set_assignment(&[]);
        lost
    }

    /// Another member overwrote this member's slot (two members picked the same free slot):
    /// members that never saw this member's registration may have taken its partitions, so it
    /// drops them without committing, withdraws its claims and registers in another slot,
    /// keeping its member id (the others who saw it take the new registration, whose counter
    /// is higher, as its own).
    fn lose_slot(&mut self, now: Instant, sh: &mut Shared) {
        let lost = self.drop_uncommitted(now, sh);
        let m = &mut self.group.reg;
        m.slot = None;
        m.owned = false;
        m.registered_at = None;
        m.confirmed = false;
        m.claims.clear();
        m.published.clear();
        m.revocations.clear();
        if !lost.is_empty() {
            emit(sh, ConsumerEvent::PartitionsLost(lost));
        }
    }

    /// The member lost its membership (lease lapsed, or another member freed its slot): drops
    /// every partition without committing it and joins again as a new member.
    pub(crate) fn lose_membership(&mut self, now: Instant, reason: &str, sh: &mut Shared) {
        // Commits not sent yet must not write positions another member may own by now.
        let lost = self.drop_uncommitted(now, sh);
        let listening = self.group.reg.listening;
        if self.closing {
            // A closing member finishes its close at once: nothing committed, its slot left
            // to the others (they count it gone, and may have given the slot to another).
            self.group.reg = Membership::new();
            self.group.reg.listening = listening;
            self.group.reg.leave = Leave::Done;
            if !lost.is_empty() {
                emit(sh, ConsumerEvent::PartitionsLost(lost));
            }
            self.finish_close(sh);
            return;
        }
        let mut view = std::mem::take(&mut self.group.reg.view);
        // The old registration is this member's own and holds nothing any more: the next
        // read frees its slot, so that nobody waits a session timeout for it.
        if let Some(old) = self
            .group
            .member_id()
            .and_then(|id| view.members.get_mut(id))
        {
            old.gone = true;
        }
        self.group.reg = Membership::new();
        // What this member saw of the others stays true on its clock.
        self.group.reg.view = view;
        self.group.reg.listening = listening;
        if !lost.is_empty() {
            emit(sh, ConsumerEvent::PartitionsLost(lost));
        }
        self.rejoin_as_new_member(now, reason, sh);
    }

    /// One membership pass: lease, revocations past their bound, and the next round.
    pub(crate) fn drive_membership(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let due: Vec<RevocationId> = (self.group.reg.revocations.iter())
            .filter(|(_, r)| !r.answered && r.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.proceed_revocation(now, id, sh);
        }
        let m = &self.group.reg;
        if m.in_flight.is_some() || !(m.dirty || m.next_round.is_none_or(|t| t <= now)) {
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Write, sh);
        true
    }

    /// On close: frees this member's slot (its partitions are released at once) before the
    /// consumer reports `Closed`.
    pub(crate) fn drive_leave(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let Leave::Wanted { deadline } = self.group.reg.leave else {
            return false;
        };
        if now >= deadline {
            self.group.reg.leave = Leave::Done;
            self.finish_close(sh);
            return false;
        }
        if self.group.reg.in_flight.is_some() {
            return false;
        }
        if self.group.reg.slot.is_none() {
            self.registry_left(sh);
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Leave, sh);
        true
    }

    /// After a manual `assign` replaced the subscription: frees this member's slot once the
    /// commits of what it gave up are answered (so that the partitions' new owners start
    /// from them), at most `rebalance_timeout` after the `assign`. Afterwards the member is
    /// out of the registry; a later `subscribe` joins again.
    pub(crate) fn drive_part(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let m = &self.group.reg;
        if m.in_flight.is_some() {
            return false;
        }
        let deadline = m.parting_since.map(|t| t + self.config.rebalance_timeout);
        if m.slot.is_none() || deadline.is_some_and(|d| now >= d) {
            self.registry_left(sh);
            return false;
        }
        if !self.group.pending.is_empty() || !self.group.in_flight.is_empty() {
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Leave, sh);
        true
    }

    /// A manual `assign` while registered: the member stops taking part (no rounds, no
    /// lease, no claims, no revocations of its own); `drive_part` frees its slot.
    pub(crate) fn part_registry(&mut self, now: Instant) {
        let m = &mut self.group.reg;
        if !m.active {
            return;
        }
        m.parting_since = Some(now);
        m.lease_until = None;
        m.claims.clear();
        m.published.clear();
        m.revocations.clear();
        m.dirty = false;
    }

    /// The slot is freed (or given up): a closing consumer may finish, one that parted
    /// after `assign` is out of the registry and joins again on a later `subscribe`.
    fn registry_left(&mut self, sh: &mut Shared) {
        if self.closing {
            self.group.reg.leave = Leave::Done;
            self.finish_close(sh);
            return;
        }
        let listening = self.group.reg.listening;
        self.group.reg = Membership::new();
        self.group.reg.listening = listening;
        self.group.member = super::member::Member::Idle;
    }

    fn registry_options(&self) -> RequestOptions {
        RequestOptions {
            timeout: Some(super::member::heartbeat_timeout(&self.config)),
            ..RequestOptions::default()
        }
    }

    fn send_registry_read(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        after: AfterRead,
        sh: &mut Shared,
    ) {
        let slots = i32::try_from(self.config.max_group_members).unwrap_or(i32::MAX);
        let body = RequestBody::OffsetFetch(OffsetFetchRequest {
            group_id: Some(group_id.into()),
            topics: vec![OffsetFetchTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions: (0..slots)
                    .map(|partition| OffsetFetchPartition { partition })
                    .collect(),
            }],
        });
        let options = self.registry_options();
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            body,
            None,
            Origin::Consumer(Op::RegistryRead.tag()),
            &options,
        );
        sh.net.counters.group_operations += 1;
        self.group.reg.in_flight = Some((seq, InFlight::Read(after)));
    }

    /// This member's registration as the next write publishes it.
    fn registration(&self, counter: i64) -> Registration {
        let m = &self.group.reg;
        Registration {
            member: self.group.member_id().unwrap_or("").replace(' ', "_"),
            counter,
            topics: self.group.subscription.iter().cloned().collect(),
            holds: self.parts.keys().cloned().collect(),
            claims: m.claims.clone(),
        }
    }

    fn send_registry_write(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        kind: SlotWrite,
        sh: &mut Shared,
    ) {
        let leave = kind == SlotWrite::Free;
        let counter = self.group.reg.counter + 1;
        let Some(slot) = self.group.reg.slot else {
            // Nothing to free: the close (or the parting) may finish.
            if leave {
                self.registry_left(sh);
            }
            return;
        };
        let member = self.group.member_id().unwrap_or("").replace(' ', "_");
        let mine = if leave {
            encode_free(&member, counter, FreeReason::Left)
        } else {
            self.registration(counter).encode()
        };
        let mut partitions = vec![OffsetCommitPartition {
            partition: slot,
            offset: if leave { -1 } else { counter },
            metadata: Some(mine.as_str().into()),
        }];
        let frees = std::mem::take(&mut self.group.reg.frees);
        partitions.extend(frees.iter().filter(|(s, _)| *s != slot).map(|(s, md)| {
            OffsetCommitPartition {
                partition: *s,
                offset: -1,
                metadata: Some(md.as_str().into()),
            }
        }));
        let body = RequestBody::OffsetCommit(OffsetCommitRequest {
            group_id: Some(group_id.into()),
            topics: vec![OffsetCommitTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions,
            }],
        });
        let options = self.registry_options();
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            body,
            None,
            Origin::Consumer(Op::RegistryWrite.tag()),
            &options,
        );
        sh.net.counters.group_operations += 1;
        let m = &mut self.group.reg;
        m.dirty = false;
        m.in_flight = Some((
            seq,
            InFlight::Write(Written {
                sent: now,
                counter,
                holds_empty: self.parts.is_empty(),
                claims: m.claims.clone(),
                kind,
            }),
        ));
    }

    /// A registry request answered (or failed).
    pub(crate) fn on_registry(
        &mut self,
        now: Instant,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let Some((want, _)) = &self.group.reg.in_flight else {
            return;
        };
        if *want != seq {
            return;
        }
        let Some((_, what)) = self.group.reg.in_flight.take() else {
            return;
        };
        let transport = result.as_ref().err().cloned();
        let body = result.ok().and_then(|r| r.body);
        if matches!(transport, Some(ref e) if !matches!(e, RequestError::Timeout { .. })) {
            self.group.lost_coordinator(now);
        }
        let leaving = matches!(
            what,
            InFlight::Read(AfterRead::Leave)
                | InFlight::Write(Written {
                    kind: SlotWrite::Free,
                    ..
                })
        );
        if (self.closing || self.group.reg.parting_since.is_some()) && !leaving {
            // A round answered after the close (or an `assign`) began: the member takes no
            // part any more; the slot is freed next.
            return;
        }
        match what {
            InFlight::Read(AfterRead::Leave) => self.on_leave_read(now, body, sh),
            InFlight::Read(after) => {
                let slots = body
                    .and_then(|b| OffsetFetchResponse::decode(&mut Reader::new(b)).ok())
                    .and_then(|r| self.slots_of(r));
                match slots {
                    Some(slots) => self.on_registry_read(now, slots, after, sh),
                    None => {
                        self.group.reg.next_round = Some(now + self.config.heartbeat_interval / 4)
                    }
                }
            }
            InFlight::Write(w) => self.on_registry_written(now, body, w, sh),
        }
    }

    /// The read before freeing the slot answered: the slot is freed if it is still this
    /// member's; unread or no longer its own, there is nothing to free (the others count it
    /// gone a session after its last refresh) and the member has left.
    fn on_leave_read(&mut self, now: Instant, body: Option<Bytes>, sh: &mut Shared) {
        let me = self.group.member_id().unwrap_or("").replace(' ', "_");
        let slots = body
            .and_then(|b| OffsetFetchResponse::decode(&mut Reader::new(b)).ok())
            .and_then(|r| self.slots_of(r));
        let m = &self.group.reg;
        let mine = m.slot.is_some_and(|slot| {
            slots.as_ref().is_some_and(
                |s| matches!(s.get(slot as usize), Some(Slot::Member(r)) if r.member == me),
            )
        });
        match (mine, self.group.coordinator.clone()) {
            (true, Some(coordinator)) => {
                let group_id = self.config.group_id.clone().unwrap_or_default();
                self.send_registry_write(now, &group_id, &coordinator, SlotWrite::Free, sh);
            }
            _ => self.registry_left(sh),
        }
    }

    /// A registry write answered. Freeing the slot ends the member's part, answered or not
    /// (unanswered, the others count it gone a session after its last refresh). A refresh
    /// that failed is retried a quarter interval later; one that succeeded extends the lease
    /// (when it was sent while the lease held, or held nothing, and was answered within the
    /// margin), publishes its claims, and is read back at once to confirm the slot.
    fn on_registry_written(
        &mut self,
        now: Instant,
        body: Option<Bytes>,
        w: Written,
        sh: &mut Shared,
    ) {
        let ok = body
            .and_then(|b| OffsetCommitResponse::decode(&mut Reader::new(b)).ok())
            .is_some_and(|r| {
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .all(|p| p.error_code == ErrorCode::NONE)
            });
        if w.kind == SlotWrite::Free {
            self.registry_left(sh);
            return;
        }
        if !ok {
            self.group.reg.next_round = Some(now + self.config.heartbeat_interval / 4);
            self.group.reg.dirty = true;
            return;
        }
        let margin = lease_margin(self.config.session_timeout, self.config.heartbeat_interval);
        let m = &mut self.group.reg;
        m.counter = w.counter;
        let valid_at_send = m.lease_until.is_some_and(|t| w.sent < t);
        if (valid_at_send || w.holds_empty) && now.saturating_duration_since(w.sent) <= margin {
            m.lease_until = Some(w.sent + self.config.session_timeout - margin);
        }
        m.published = w.claims;
        // Read at once: it confirms the slot and may start the claims.
        if let Some(coordinator) = self.group.coordinator.clone() {
            let group_id = self.config.group_id.clone().unwrap_or_default();
            self.send_registry_read(now, &group_id, &coordinator, AfterRead::Confirm, sh);
        } else {
            self.group.reg.next_round = Some(now);
        }
    }

    /// The registry's slots from an OffsetFetch answer; `None` when it is not the answer
    /// asked for.
    fn slots_of(&self, r: OffsetFetchResponse) -> Option<Vec<Slot>> {
        let t = r
            .topics
            .into_iter()
            .find(|t| t.topic.as_deref() == Some(REGISTRY_TOPIC))?;
        let mut slots = vec![Slot::Empty; self.config.max_group_members];
        for p in t.partitions {
            let i = usize::try_from(p.partition).ok()?;
            *slots.get_mut(i)? = Slot::decode(p.offset, p.metadata.as_deref());
        }
        Some(slots)
    }

    fn on_registry_read(
        &mut self,
        now: Instant,
        slots: Vec<Slot>,
        after: AfterRead,
        sh: &mut Shared,
    ) {
        let session = self.config.session_timeout;
        let me = self.group.member_id().unwrap_or("").replace(' ', "_");
        self.group.reg.view.update(now, slots, session);
        // 1. Is this member's slot still its own? A slot another member freed ends the
        //    membership; one another member overwrote is given up.
        if self.confirm_slot(now, &me, sh).is_break() {
            return;
        }
        // 2. The slots to free, and the live members (said when they change).
        self.note_members(&me, sh);
        // 3. A member without a slot picks a free one; with none free it waits a round.
        if self.group.reg.slot.is_none() && self.pick_slot(now, &me, sh).is_break() {
            return;
        }
        // 4. Claims and releases once settled, then when the next round is due.
        self.schedule_round(now, &me, sh);
        // 5. A write goes out only right after a read that found the slot this member's (or
        //    free, for a first write): never on an older read.
        let m = &self.group.reg;
        if m.slot.is_some()
            && (after == AfterRead::Write || m.dirty)
            && let Some(coordinator) = self.group.coordinator.clone()
        {
            let group_id = self.config.group_id.clone().unwrap_or_default();
            self.send_registry_write(now, &group_id, &coordinator, SlotWrite::Refresh, sh);
        }
    }

    /// Checks this member's slot in the view just read: as it last wrote it (or later: a
    /// write whose answer was lost may have landed) confirms it; freed by another member
    /// ends the membership (`Break`); written by another member (both picked it while it
    /// was free) gives it up, for members that never saw this one may have taken its
    /// partitions (DST finding F2); a first write that lost (or never landed) picks again.
    fn confirm_slot(&mut self, now: Instant, me: &str, sh: &mut Shared) -> ControlFlow<()> {
        let m = &mut self.group.reg;
        m.confirmed = false;
        let mut overwritten = false;
        if let Some(slot) = m.slot {
            match m.view.slots.get(slot as usize) {
                Some(Slot::Member(r)) if r.member == me && r.counter >= m.counter => {
                    m.counter = r.counter;
                    m.confirmed = true;
                    if !m.owned {
                        m.owned = true;
                        m.registered_at = Some(now);
                    }
                }
                Some(Slot::Freed { member, .. }) if *member == me => {
                    self.lose_membership(now, "another member freed this member's slot", sh);
                    return ControlFlow::Break(());
                }
                _ if m.owned => overwritten = true,
                _ => m.slot = None,
            }
        }
        if overwritten {
            self.lose_slot(now, sh);
        }
        ControlFlow::Continue(())
    }

    /// The slots this member frees (lapsed members'), and the live members, said with
    /// [`ConsumerEvent::GroupMembers`] when they changed (this member counts once its slot
    /// is confirmed).
    fn note_members(&mut self, me: &str, sh: &mut Shared) {
        let m = &mut self.group.reg;
        m.frees = m.view.to_free(me);
        let mut live: Vec<String> = m.view.live().map(|s| s.reg.member.clone()).collect();
        if !m.confirmed {
            live.retain(|id| *id != me);
        }
        if live != m.live {
            m.live = live.clone();
            emit(sh, ConsumerEvent::GroupMembers(live));
        }
    }

    /// Picks a free slot for a member without one. Members that start together read the
    /// same free slots: each picks one by its own id, so that two rarely write the same slot
    /// (when they do, the reads before and after every write find it out). With the registry
    /// full the member waits a round and says so (`Break`).
    fn pick_slot(&mut self, now: Instant, me: &str, sh: &mut Shared) -> ControlFlow<()> {
        let m = &mut self.group.reg;
        let taken: BTreeSet<i32> = m.frees.iter().map(|(s, _)| *s).collect();
        let free: Vec<i32> = (m.view.slots.iter().enumerate())
            .filter(|(i, s)| s.claimable() && !taken.contains(&(*i as i32)))
            .map(|(i, _)| i as i32)
            .collect();
        let pick = crate::partitioner::fnv1a32(me.as_bytes()) as usize;
        match free.get(pick % free.len().max(1)).copied() {
            Some(s) => {
                m.slot = Some(s);
                m.dirty = true;
                ControlFlow::Continue(())
            }
            None => {
                m.next_round = Some(now + self.config.heartbeat_interval);
                emit(
                    sh,
                    ConsumerEvent::GroupRejoining {
                        reason: format!(
                            "the group's registry is full (consumer.max_group_members = {})",
                            self.config.max_group_members
                        ),
                        retry_in: self.config.heartbeat_interval,
                    },
                );
                ControlFlow::Break(())
            }
        }
    }

    /// Rebalances once this member's registration settled, then sets the next round: a
    /// quarter interval while a handover waits, an interval otherwise, earlier when the
    /// settling ends or another member's slot expires first.
    fn schedule_round(&mut self, now: Instant, me: &str, sh: &mut Shared) {
        let session = self.config.session_timeout;
        let interval = self.config.heartbeat_interval;
        let m = &self.group.reg;
        // A fresh member claims nothing until a read a quarter interval after its
        // registration was first read back: members registered within that time of each
        // other all see each other before any of them claims.
        let settle = m.registered_at.map(|t| t + interval / 4);
        let settled = settle.is_some_and(|t| now >= t);
        let waiting = if m.confirmed && settled {
            self.rebalance(now, me, sh)
        } else {
            false
        };
        let m = &mut self.group.reg;
        if !m.frees.is_empty() {
            m.dirty = true;
        }
        let period = if waiting { interval / 4 } else { interval };
        let mut next = now + period;
        if m.confirmed && !settled {
            next = next.min(settle.unwrap_or(next));
        }
        let expiry = m.view.next_expiry(me, session);
        m.next_round = Some(expiry.filter(|t| *t > now).map_or(next, |t| t.min(next)));
    }

    /// Computes the assignment from the view and acts on it: revokes what goes elsewhere,
    /// withdraws claims, starts confirmed claims, claims what is free. Whether a partition
    /// this member should own is still taken by another.
    fn rebalance(&mut self, now: Instant, me: &str, sh: &mut Shared) -> bool {
        let mut mine: BTreeSet<TopicPartition> = BTreeSet::new();
        let wanted = self.subscribed_partitions(sh);
        {
            let m = &self.group.reg;
            let live: Vec<MemberInput<'_>> = m
                .view
                .live()
                .map(|s| MemberInput {
                    id: s.reg.member.as_str(),
                    topics: &s.reg.topics,
                    current: s.reg.holds.iter().chain(s.reg.claims.iter()).collect(),
                })
                .collect();
            let mut topics: BTreeMap<&str, Vec<TopicPartition>> = BTreeMap::new();
            for tp in &wanted {
                topics.entry(&tp.topic).or_default().push(tp.clone());
            }
            for (topic, mut parts) in topics {
                parts.sort();
                if let Some(list) = assign_topic(topic, &parts, &live).remove(me) {
                    mine.extend(list);
                }
            }
        }
        let revoking: BTreeSet<TopicPartition> = (self.group.reg.revocations.values())
            .flat_map(|r| r.partitions.iter().cloned())
            .collect();
        let held: Vec<TopicPartition> = self.parts.keys().cloned().collect();
        let give_up: Vec<TopicPartition> = held
            .iter()
            .filter(|tp| !mine.contains(*tp) && !revoking.contains(*tp))
            .cloned()
            .collect();
        if !give_up.is_empty() {
            self.start_revocation(now, give_up, sh);
        }
        let lease = self.group.reg.lease_valid(now);
        let m = &mut self.group.reg;
        let mut start = Vec::new();
        let claims: Vec<TopicPartition> = m.claims.iter().cloned().collect();
        for tp in claims {
            let taken = m.view.taken_by_other(me, &tp);
            if !mine.contains(&tp) || taken {
                m.claims.remove(&tp);
                m.dirty = true;
            } else if m.published.contains(&tp) && lease {
                m.claims.remove(&tp);
                start.push(tp);
                m.dirty = true;
            }
        }
        let mut waiting = false;
        for tp in &mine {
            if self.parts.contains_key(tp) || m.claims.contains(tp) || start.contains(tp) {
                continue;
            }
            if m.view.taken_by_other(me, tp) {
                waiting = true;
            } else {
                m.claims.insert(tp.clone());
                m.dirty = true;
                waiting = true;
            }
        }
        if !start.is_empty() {
            let mut all: Vec<TopicPartition> = self.parts.keys().cloned().collect();
            all.extend(start.iter().cloned());
            let (_, added) = self.set_assignment(&all);
            if !added.is_empty() {
                emit(sh, ConsumerEvent::PartitionsAssigned(added));
            }
            self.fetch_wake = true;
        }
        waiting
    }

    /// Stops the partitions, says so, and waits for the listener (or goes on at once).
    fn start_revocation(&mut self, now: Instant, partitions: Vec<TopicPartition>, sh: &mut Shared) {
        for tp in &partitions {
            self.stop_for_handover(tp);
        }
        let m = &mut self.group.reg;
        m.next_revocation += 1;
        let id = RevocationId(m.next_revocation);
        let listening = m.listening;
        m.revocations.insert(
            id,
            Revocation {
                partitions: partitions.clone(),
                deadline: now + self.config.revocation_timeout,
                answered: !listening,
                commit: None,
            },
        );
        emit(sh, ConsumerEvent::PartitionsRevoking { id, partitions });
        if !listening {
            self.proceed_revocation(now, id, sh);
        }
    }

    /// The listener answered (or its bound passed): commit the positions, then release.
    pub(crate) fn proceed_revocation(&mut self, now: Instant, id: RevocationId, sh: &mut Shared) {
        let Some(r) = self.group.reg.revocations.get_mut(&id) else {
            return;
        };
        r.answered = true;
        let partitions = r.partitions.clone();
        let positions: Vec<_> = if self.config.enable_auto_commit {
            partitions
                .iter()
                .filter_map(|tp| {
                    // What was delivered, or only what was marked processed
                    // (`consumer.commit_marked_only`).
                    let pos = self.commit_position(tp)?;
                    (self.parts.get(tp)?.committed != Some(pos)).then(|| (tp.clone(), pos))
                })
                .collect()
        } else {
            Vec::new()
        };
        if positions.is_empty() {
            // Nothing more to commit, but a commit of the partitions made earlier (by the
            // application, or an auto-commit) may still be on its way: released before it
            // lands, it would overwrite the new owner's commits (a zombie commit).
            match self.last_commit_covering(&partitions) {
                Some(commit) => {
                    if let Some(r) = self.group.reg.revocations.get_mut(&id) {
                        r.commit = Some(commit);
                    }
                }
                None => self.finish_revocation(id, sh),
            }
        } else {
            let commit = self.start_commit(now, positions, CommitKind::Revocation, sh);
            if let Some(r) = self.group.reg.revocations.get_mut(&id) {
                r.commit = Some(commit);
            }
        }
    }

    /// A commit finished (landed or failed for good): the revocations that waited for it (their
    /// own commit, or the last earlier commit of their partitions) release their partitions.
    pub(crate) fn revocation_committed(&mut self, commit: CommitId, sh: &mut Shared) {
        let ids: Vec<RevocationId> = (self.group.reg.revocations.iter())
            .filter(|(_, r)| r.commit == Some(commit))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.finish_revocation(id, sh);
        }
    }

    fn finish_revocation(&mut self, id: RevocationId, sh: &mut Shared) {
        let Some(r) = self.group.reg.revocations.remove(&id) else {
            return;
        };
        // Commits made after the revocation's own and still queued lose these partitions:
        // once released, another member may start them.
        self.drop_unsent_commits(&r.partitions, sh);
        let keep: Vec<TopicPartition> = (self.parts.keys())
            .filter(|tp| !r.partitions.contains(tp))
            .cloned()
            .collect();
        self.set_assignment(&keep);
        emit(sh, ConsumerEvent::PartitionsRevoked(r.partitions));
        self.group.reg.dirty = true;
    }
}

impl Membership {
    /// The subscription changed: publish it.
    pub(crate) fn resubscribed(&mut self) {
        if self.active {
            self.dirty = true;
        }
    }
}
