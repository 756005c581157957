//! A member's state in the member registry (see `registry`) and its lease on its own clock:
//! when it must stop, which writes it withdraws, and what it drops when it loses its slot
//! or its membership. Its rounds are in `rounds.rs`, what it makes of a read (claims,
//! revocations, releases) in `rebalance.rs`, static membership in `instance.rs`.
//! ARCHITECTURE.md (decision 19) holds the safety argument; in short:
//!
//! * A member starts a partition only at a read made after a write that listed it as a claim
//!   was answered, when no other member that is not gone lists it (held or claimed). Of two
//!   members claiming at once, at least one sees the other's claim (each reads after its own
//!   write is in), and whoever sees a rival claim withdraws.
//! * A member gives a partition up only by a write that no longer lists it, after its fetching
//!   stopped and its position was committed.
//! * Others count a member gone when its counter has not moved for a session timeout on their
//!   own clock, or a slot says it was freed. The member itself stops delivering earlier: its
//!   lease ends a session timeout (a static member's: `instance::static_lease`), less a
//!   margin, after the sending of its last write that was answered within the margin and
//!   sent while the lease held. A member whose lease ended (a
//!   pause, a lost coordinator) drops its partitions without committing them and joins again
//!   as a new member.

use super::roster::View;
use super::{CommitId, Consumer, ConsumerEvent, RevocationId, TopicPartition, emit};
use crate::shared::Shared;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What follows a registry read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterRead {
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
pub(super) enum InFlight {
    Read(AfterRead),
    Write(Written),
}

/// What a registry write carries for this member's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotWrite {
    /// This member's registration (refreshes its lease and publishes its claims).
    Refresh,
    /// A static member closes: its registration marked closed, its partitions kept for the
    /// instance's next member (see `instance.rs`).
    Park,
    /// The slot freed: the member leaves (close, or a manual `assign`).
    Free,
}

/// A registry write on its way: what it wrote, to apply its answer.
#[derive(Debug)]
pub(super) struct Written {
    pub(super) sent: Instant,
    pub(super) counter: i64,
    /// The write listed no started partition (it may extend a lapsed lease).
    pub(super) holds_empty: bool,
    /// The claims it published.
    pub(super) claims: BTreeSet<TopicPartition>,
    /// Whether it refreshed the slot or freed it.
    pub(super) kind: SlotWrite,
}

/// A revocation under way.
#[derive(Debug)]
pub(super) struct Revocation {
    pub(super) partitions: Vec<TopicPartition>,
    /// The listener's answer is waited for until then.
    pub(super) deadline: Instant,
    pub(super) answered: bool,
    /// The commit whose end releases the partitions: its own, or the last earlier one of them.
    pub(super) commit: Option<CommitId>,
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
    pub(super) slot: Option<i32>,
    /// A static member's place among the members of its instance (0: not chosen yet; chosen
    /// with the slot, see `instance.rs`).
    pub(super) incarnation: u64,
    /// The counter of the last write answered.
    pub(super) counter: i64,
    pub(super) lease_until: Option<Instant>,
    pub(super) in_flight: Option<(u64, InFlight)>,
    pub(super) next_round: Option<Instant>,
    /// Something to publish: a round starts at once.
    pub(super) dirty: bool,
    /// The last read found this member's slot as it last wrote it.
    pub(super) confirmed: bool,
    /// A read found this member's registration in its slot (the slot is its own until a read
    /// finds something else there: then another member overwrote it).
    pub(super) owned: bool,
    /// When a read first found the registration in the current slot. A fresh member claims
    /// nothing until `heartbeat_interval / 4` later, so that members started together see
    /// each other before they claim (DST finding F3).
    pub(super) registered_at: Option<Instant>,
    pub(super) claims: BTreeSet<TopicPartition>,
    /// Claims that the last answered write published: a read after it may start them.
    pub(super) published: BTreeSet<TopicPartition>,
    pub(super) revocations: BTreeMap<RevocationId, Revocation>,
    pub(super) next_revocation: u64,
    pub(super) view: View,
    /// Slots to free with the next write.
    pub(super) frees: Vec<(i32, String)>,
    pub(super) live: Vec<String>,
    pub(crate) leave: Leave,
    /// A manual `assign` replaced the subscription then: the slot is being freed.
    pub(super) parting_since: Option<Instant>,
}

impl Membership {
    pub(crate) fn new() -> Self {
        Membership {
            active: false,
            listening: false,
            slot: None,
            incarnation: 0,
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

    pub(super) fn lease_valid(&self, now: Instant) -> bool {
        self.lease_until.is_some_and(|t| now < t)
    }

    /// When the registry write on its way was sent, if one is.
    pub(super) fn write_sent(&self) -> Option<Instant> {
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
    pub(super) fn drop_uncommitted(
        &mut self,
        now: Instant,
        sh: &mut Shared,
    ) -> Vec<TopicPartition> {
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
    pub(super) fn lose_slot(&mut self, now: Instant, sh: &mut Shared) {
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
}

impl Membership {
    /// The subscription changed: publish it.
    pub(crate) fn resubscribed(&mut self) {
        if self.active {
            self.dirty = true;
        }
    }
}
