//! What a member makes of a registry read: whether its slot is still its own, who is live,
//! which slot to take, the assignment it computes, and the handovers that follow — claims
//! confirmed and started, partitions revoked, committed and released.

use super::assignor::{MemberInput, assign_topic};
use super::membership::{AfterRead, Revocation, SlotWrite};
use super::registry::Slot;
use super::{CommitId, CommitKind, Consumer, ConsumerEvent, RevocationId, TopicPartition, emit};
use crate::shared::Shared;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::Instant;

impl Consumer {
    pub(super) fn on_registry_read(
        &mut self,
        now: Instant,
        slots: Vec<Slot>,
        after: AfterRead,
        sh: &mut Shared,
    ) {
        let session = self.config.session_timeout;
        let me = self.group.member_id().unwrap_or("").replace(' ', "_");
        self.group.reg.view.update(now, slots, session);
        // 0. A newer member of this member's static instance fences it for good.
        if self.group.reg.view.superseded(&me) {
            self.fence(now, sh);
            return;
        }
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
                self.choose_incarnation();
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
                    current: (s.reg.holds.iter())
                        .chain(s.reg.claims.iter())
                        .chain(m.view.inherited(&s.reg))
                        .collect(),
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
