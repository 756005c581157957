//! The consumer's commands, as the client's public methods (`client/consume.rs`) call them:
//! each checks what the command needs and changes the consumer's state, taking the rest of
//! the client's state it uses as `sh: &mut Shared`; the client then runs its loop.

use super::partition::Start;
use super::positions::Pausing;
use super::{
    CommitId, CommitKind, Consumer, ConsumerError, ConsumerEvent, OffsetReset, Position,
    RevocationId, SeekTo, TopicPartition, emit,
};
use crate::refresh::Urgency;
use crate::shared::Shared;
use crate::topic::validate_topic_name;
use std::time::Instant;

/// What a subscription does with a revocation: go on at once, or wait for the rebalance
/// listener (`Client::revocation_done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revocations {
    /// `Client::subscribe`: no listener, revocations go on at once.
    Immediate,
    /// `Client::subscribe_with_listener`: each revocation waits for the listener.
    WaitForListener,
}

/// What a group member's commit does with positions of partitions it does not own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unowned {
    /// Leaves them out (the positions were read from the assignment, which may have moved).
    Dropped,
    /// Refuses the commit with [`ConsumerError::NotAssigned`] (the caller named them).
    Refused,
}

/// What a `close` call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Close {
    /// Answered already (closed before: `Closed` is queued; or a close under way: this call
    /// gets its own `Closed` when it ends); nothing to run.
    Answered,
    /// The close started: the client runs its loop.
    Started,
}

impl Consumer {
    /// Whether a command may run: the client and the consumer are open. A command is the
    /// first thing a member back from a pause may do, before the driver shows it the time:
    /// it learns first that its partitions are no longer its own.
    pub(crate) fn command(&mut self, now: Instant, sh: &mut Shared) -> Result<(), ConsumerError> {
        if sh.closed || self.closing || self.closed {
            return Err(ConsumerError::Closed);
        }
        self.check_lease(now, sh);
        Ok(())
    }

    /// A member whose lease lapsed (paused past its session, or cut off) loses its
    /// membership before anything else happens.
    pub(crate) fn check_lease(&mut self, now: Instant, sh: &mut Shared) {
        if self.lease_lapsed(now) {
            self.lose_membership(now, "this member's lease lapsed on its own clock", sh);
        }
    }

    /// Consumes exactly `partitions` (manual assignment; replaces any subscription).
    pub(crate) fn assign(
        &mut self,
        now: Instant,
        partitions: &[TopicPartition],
        sh: &mut Shared,
    ) -> Result<(), ConsumerError> {
        self.command(now, sh)?;
        for tp in partitions {
            validate_topic_name(&tp.topic)?;
        }
        self.group.subscription.clear();
        // A registry member frees its slot (after committing what it gives up), so that the
        // others take its partitions at once rather than after its session.
        self.part_registry(now);
        self.apply_assignment(now, partitions.to_vec(), sh);
        self.watch_topics(partitions.iter().map(|tp| &*tp.topic), sh);
        Ok(())
    }

    /// Subscribes to `topics` as a member of the configured group.
    pub(crate) fn subscribe(
        &mut self,
        now: Instant,
        topics: &[&str],
        revocations: Revocations,
        sh: &mut Shared,
    ) -> Result<(), ConsumerError> {
        self.command(now, sh)?;
        if self.config.group_id.is_none() {
            return Err(ConsumerError::NoGroup);
        }
        for t in topics {
            validate_topic_name(t)?;
        }
        let g = &mut self.group;
        g.subscription = topics.iter().map(|t| (*t).to_owned()).collect();
        g.reg.listening = revocations == Revocations::WaitForListener;
        g.reg.resubscribed();
        if g.member == super::member::Member::Idle {
            sh.refresher.request(Urgency::AfterBackoff);
        }
        self.watch_topics(topics.iter().copied(), sh);
        Ok(())
    }

    /// Lets the revocation `id` go on.
    pub(crate) fn revocation_done(&mut self, now: Instant, id: RevocationId, sh: &mut Shared) {
        self.proceed_revocation(now, id, sh);
    }

    /// The partitions currently assigned.
    pub(crate) fn assignment(&self) -> Vec<TopicPartition> {
        self.parts.keys().cloned().collect()
    }

    /// Moves `tp` (buffered records are dropped); the request that resolves the target
    /// carries the caller's trace context (`sh.trace`).
    pub(crate) fn seek(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        to: SeekTo,
        sh: &mut Shared,
    ) -> Result<(), ConsumerError> {
        self.command(now, sh)?;
        if !self.parts.contains_key(tp) {
            return Err(ConsumerError::NotAssigned(tp.clone()));
        }
        self.processed.forget(tp);
        if let Some(p) = self.parts.get_mut(tp) {
            p.seek_trace.clone_from(&sh.trace);
        }
        match to {
            SeekTo::Position(p) => self.reposition(tp, p),
            SeekTo::Beginning => self.restart(tp, Start::NeedsReset(OffsetReset::Earliest)),
            SeekTo::End => self.restart(tp, Start::NeedsReset(OffsetReset::Latest)),
            SeekTo::Committed => self.restart(tp, Start::Unknown),
            SeekTo::Timestamp(ms) => self.restart(tp, Start::NeedsTime(ms)),
        }
        Ok(())
    }

    /// The last committed position of `tp` this consumer knows.
    pub(crate) fn committed(&self, tp: &TopicPartition) -> Option<Position> {
        self.parts.get(tp).and_then(|p| p.committed)
    }

    /// Pauses or resumes an assigned partition.
    pub(crate) fn pause(
        &mut self,
        tp: &TopicPartition,
        pausing: Pausing,
    ) -> Result<(), ConsumerError> {
        if !self.parts.contains_key(tp) {
            return Err(ConsumerError::NotAssigned(tp.clone()));
        }
        self.set_paused(tp, pausing);
        Ok(())
    }

    /// Fetched bytes waiting for delivery.
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// The group member id and generation, once joined.
    pub(crate) fn group_member(&self) -> Option<(&str, i32)> {
        let g = &self.group;
        g.member_id().map(|m| (m, g.generation()))
    }

    /// Commits `positions` as a commit of `kind`, carrying the caller's trace context; a
    /// group member commits only what it owns (see [`Unowned`]).
    pub(crate) fn commit(
        &mut self,
        now: Instant,
        positions: Vec<(TopicPartition, Position)>,
        kind: CommitKind,
        unowned: Unowned,
        sh: &mut Shared,
    ) -> Result<CommitId, ConsumerError> {
        self.command(now, sh)?;
        if self.config.group_id.is_none() {
            return Err(ConsumerError::NoGroup);
        }
        let mut positions = positions;
        if !self.group.subscription.is_empty() {
            // A group member commits only what it owns: another member may own the rest
            // (a partition lost in a pause, or released meanwhile).
            if unowned == Unowned::Refused {
                if let Some((tp, _)) = positions
                    .iter()
                    .find(|(tp, _)| !self.parts.contains_key(tp))
                {
                    return Err(ConsumerError::NotAssigned(tp.clone()));
                }
            } else {
                positions.retain(|(tp, _)| self.parts.contains_key(tp));
            }
        }
        let trace = sh.trace.clone();
        Ok(self.start_commit_traced(now, positions, kind, trace.as_ref(), sh))
    }

    /// Stops consuming: with auto-commit on, the positions are committed first; every call
    /// is answered by its own [`ConsumerEvent::Closed`].
    pub(crate) fn close(&mut self, now: Instant, sh: &mut Shared) -> Close {
        if self.closed {
            emit(sh, ConsumerEvent::Closed);
            return Close::Answered;
        }
        if self.closing {
            self.extra_close_waiters += 1;
            return Close::Answered;
        }
        // A member back from a pause closes without committing what it no longer owns.
        self.check_lease(now, sh);
        self.closing = true;
        self.close_started = Some(now);
        let positions = self.uncommitted_positions();
        let commit = self.config.enable_auto_commit
            && self.config.group_id.is_some()
            && !positions.is_empty()
            && !sh.closed;
        if commit {
            self.start_commit(now, positions, CommitKind::Close, sh);
        } else {
            self.finish_close(sh);
        }
        Close::Started
    }
}
