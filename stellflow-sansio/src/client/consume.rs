//! The consumer's commands and outputs on [`Client`], and its hooks into the client's loop.

use crate::client::Client;
use crate::consumer::positions::Pausing;
use crate::consumer::{Close, Revocations, SeekTo, Unowned};
use crate::consumer_event::{CommitId, CommitKind, ConsumerError, RevocationId};
use crate::consumer_record::ConsumerRecord;
use crate::fetched_blob::FetchedBlob;
use crate::net::{Completion, OwnerTag};
use crate::offset_model::Position;
use crate::shared::Shared;
use crate::topic_partition::TopicPartition;
use std::time::Instant;

/// Hands records on their way to the application to the consumer hooks.
#[cold]
pub(super) fn consumed(hooks: &crate::hooks::Hooks, records: &[ConsumerRecord]) {
    hooks.consumer.iter().for_each(|h| h.on_consume(records));
}

impl Client {
    /// Consumes exactly `partitions` (manual assignment; replaces any subscription). Each
    /// starts at its committed position when `consumer.group_id` is set, else at the reset
    /// policy. Revoked and assigned partitions are reported as events.
    pub fn assign(
        &mut self,
        now: Instant,
        partitions: &[TopicPartition],
    ) -> Result<(), ConsumerError> {
        self.shared.last_now = now;
        self.consumer.assign(now, partitions, &mut self.shared)?;
        self.process(now);
        Ok(())
    }

    /// Subscribes to `topics` as a member of `consumer.group_id`: joins the group and consumes
    /// the partitions SyncGroup assigns, or — when it assigns none (always, today) — this
    /// member's share, agreed with the other members through the group's member registry
    /// (`docs/groups.md`): balanced, sticky, handed over only after the old owner committed
    /// and released it.
    pub fn subscribe(&mut self, now: Instant, topics: &[&str]) -> Result<(), ConsumerError> {
        self.subscribe_as(now, topics, Revocations::Immediate)
    }

    /// Like [`Client::subscribe`], with a rebalance listener: every
    /// [`crate::ConsumerEvent::PartitionsRevoking`] waits for [`Client::revocation_done`] (at
    /// most `consumer.revocation_timeout`) before the positions are committed and the
    /// partitions go to their new owner. Between the two, the partitions are still this
    /// member's: commit them, flush what the application keeps for them. Kafka's
    /// `onPartitionsRevoked`; [`crate::ConsumerEvent::PartitionsAssigned`] is
    /// `onPartitionsAssigned`, and [`crate::ConsumerEvent::PartitionsLost`] `onPartitionsLost`.
    pub fn subscribe_with_listener(
        &mut self,
        now: Instant,
        topics: &[&str],
    ) -> Result<(), ConsumerError> {
        self.subscribe_as(now, topics, Revocations::WaitForListener)
    }

    /// Lets the revocation `id` go on ([`crate::ConsumerEvent::PartitionsRevoking`]): the
    /// positions are committed (auto-commit on) and the partitions released. An id that is
    /// unknown or already past (its bound ran out) is ignored.
    pub fn revocation_done(&mut self, now: Instant, id: RevocationId) {
        self.shared.last_now = now;
        self.consumer.revocation_done(now, id, &mut self.shared);
        self.process(now);
    }

    fn subscribe_as(
        &mut self,
        now: Instant,
        topics: &[&str],
        revocations: Revocations,
    ) -> Result<(), ConsumerError> {
        self.shared.last_now = now;
        self.consumer
            .subscribe(now, topics, revocations, &mut self.shared)?;
        self.process(now);
        Ok(())
    }

    /// The error a consumer's poll returns instead of waiting (adapters return it from
    /// `poll`/`recv` when no record is ready). First the fatal one, every time: this member
    /// was fenced ([`Client::fatal_consumer_error`]). Then, once each: the cluster is
    /// unreachable ([`ConsumerError::Unreachable`], see [`Client::take_unreachable_error`]),
    /// or a topic asked for is unknown to every broker ([`ConsumerError::UnknownTopic`]);
    /// those two are retriable: consumption goes on by itself once the cause is gone.
    pub fn take_poll_error(&mut self) -> Option<ConsumerError> {
        if let Some(fatal) = self.fatal_consumer_error() {
            return Some(fatal);
        }
        if let Some(e) = self.take_unreachable_error() {
            return Some(ConsumerError::Unreachable(e));
        }
        self.consumer.take_missing_error()
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.consumer.assignment()
    }

    /// Moves `tp` (buffered records are dropped). A [`Position`] may point inside a blob.
    pub fn seek(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        to: SeekTo,
    ) -> Result<(), ConsumerError> {
        self.shared.last_now = now;
        self.consumer.seek(now, tp, to, &mut self.shared)?;
        self.process(now);
        Ok(())
    }

    /// The position of `tp`: the next record [`Client::poll_record`] delivers from it.
    /// `None` while the start position is being resolved or the partition is not assigned.
    pub fn position(&self, tp: &TopicPartition) -> Option<Position> {
        self.consumer.position(tp)
    }

    /// The last committed position of `tp` this consumer knows (read at start or written by
    /// one of its commits).
    pub fn committed(&self, tp: &TopicPartition) -> Option<Position> {
        self.consumer.committed(tp)
    }

    /// Stops fetching and delivering `tp`; buffered records are kept for [`Client::resume`].
    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), ConsumerError> {
        self.consumer.pause(tp, Pausing::Pause)
    }

    /// Resumes a paused partition.
    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), ConsumerError> {
        self.consumer.pause(tp, Pausing::Resume)
    }

    /// High watermark − position of `tp`, with the watermark from the latest fetch: the blobs
    /// the consumer may still deliver (it never delivers at or above the high watermark).
    pub fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.consumer.lag(tp)
    }

    /// Fetched bytes waiting for delivery (bounded by `consumer.max_buffered_bytes`).
    pub fn buffered_bytes(&self) -> usize {
        self.consumer.buffered_bytes()
    }

    /// The group member id and generation, once joined.
    pub fn group_member(&self) -> Option<(&str, i32)> {
        self.consumer.group_member()
    }

    /// The next record, decoded from fetched bytes without copying its key, value or
    /// headers; `None` when nothing is buffered. Records of one partition come in order.
    pub fn poll_record(&mut self) -> Option<ConsumerRecord> {
        let Client {
            consumer,
            shared: Shared { events, net, .. },
            ..
        } = self;
        let r = consumer.poll_record(events, &mut net.counters);
        if let Some(r) = &r
            && !self.shared.hooks.consumer.is_empty()
        {
            consumed(&self.shared.hooks, std::slice::from_ref(r));
        }
        r
    }

    /// Appends up to `max` records to `out` (like `max` calls of [`Client::poll_record`]) and
    /// returns how many. Cheaper per record: each is built in its slot of `out`, not moved
    /// there. Reserve room in `out` first to keep it from growing while it fills.
    pub fn poll_records(&mut self, out: &mut Vec<ConsumerRecord>, max: usize) -> usize {
        let Client {
            consumer,
            shared: Shared { events, net, .. },
            ..
        } = self;
        let start = out.len();
        let n = consumer.poll_records(events, &mut net.counters, out, max);
        if n > 0 && !self.shared.hooks.consumer.is_empty() {
            consumed(&self.shared.hooks, out.get(start..).unwrap_or_default());
        }
        n
    }

    /// The next fetched blob, handed over whole: its records decode as the caller iterates
    /// the [`FetchedBlob`], without a [`ConsumerRecord`] each (the cheapest way to read small
    /// records). Taking it delivers all of it: the position moves past the blob. `None` when
    /// nothing is buffered. Blobs of one partition come in order, and mixing this with
    /// [`Client::poll_record`] is fine (a blob partly taken as records yields the rest).
    pub fn poll_blob(&mut self) -> Option<FetchedBlob> {
        let Client {
            consumer,
            shared: Shared { net, .. },
            ..
        } = self;
        let blob = consumer.poll_blob(&mut net.counters)?;
        if !self.shared.hooks.consumer.is_empty() {
            let records = blob.undelivered_records();
            (self.shared.hooks.consumer.iter()).for_each(|h| h.on_consume_blob(&blob, records));
        }
        Some(blob)
    }

    /// Marks `record`, and every earlier record of its partition, as processed (rdkafka's
    /// `store_offset`): with `consumer.commit_marked_only` set, commits — auto-commit, the
    /// commit before a revocation, the one on close, [`Client::commit`] — take only marked
    /// positions, so a record delivered but not marked is delivered again after a restart.
    /// Mark a record once its outputs are acknowledged. The mark is
    /// [`ConsumerRecord::next_position`] (exact mid-blob); marks only move forward, and a
    /// seek or a revocation forgets the partition's mark. Does no I/O.
    ///
    /// Errors: [`ConsumerError::MarkingOff`] without `commit_marked_only`,
    /// [`ConsumerError::NotAssigned`] for a partition no longer assigned (its next owner
    /// reads the record again).
    pub fn mark_processed(&mut self, record: &ConsumerRecord) -> Result<(), ConsumerError> {
        self.consumer.mark_record(record)
    }

    /// Like [`Client::mark_processed`] with an explicit position: everything of `tp` before
    /// `position` is processed (e.g. [`FetchedBlob::next_position`] after a whole blob).
    pub fn mark_position(
        &mut self,
        tp: &TopicPartition,
        position: Position,
    ) -> Result<(), ConsumerError> {
        self.consumer.mark(tp, position)
    }

    /// The position marked processed for `tp` (see [`Client::mark_processed`]), if any.
    pub fn marked(&self, tp: &TopicPartition) -> Option<Position> {
        self.consumer.marked(tp)
    }

    /// Commits the positions of every assigned partition — the first undelivered record,
    /// mid-blob included, or with `consumer.commit_marked_only` the marked positions (see
    /// [`Client::mark_processed`]) — retrying retriable failures until
    /// `consumer.rebalance_timeout`. The outcome is
    /// [`crate::ConsumerEvent::CommitCompleted`] with the returned id.
    pub fn commit(&mut self, now: Instant) -> Result<CommitId, ConsumerError> {
        let positions = self.consumer.positions_to_commit();
        self.commit_with(now, positions, CommitKind::Sync, Unowned::Dropped)
    }

    /// Like [`Client::commit`], without retries.
    pub fn commit_async(&mut self, now: Instant) -> Result<CommitId, ConsumerError> {
        let positions = self.consumer.positions_to_commit();
        self.commit_with(now, positions, CommitKind::Async, Unowned::Dropped)
    }

    /// Commits explicit positions (e.g. [`ConsumerRecord::next_position`] of the last
    /// processed record), retried like [`Client::commit`].
    pub fn commit_positions(
        &mut self,
        now: Instant,
        positions: Vec<(TopicPartition, Position)>,
    ) -> Result<CommitId, ConsumerError> {
        self.commit_with(now, positions, CommitKind::Sync, Unowned::Refused)
    }

    fn commit_with(
        &mut self,
        now: Instant,
        positions: Vec<(TopicPartition, Position)>,
        kind: CommitKind,
        unowned: Unowned,
    ) -> Result<CommitId, ConsumerError> {
        self.shared.last_now = now;
        let id = (self.consumer).commit(now, positions, kind, unowned, &mut self.shared)?;
        self.process(now);
        Ok(id)
    }

    /// Stops consuming: no more fetches or heartbeats; with auto-commit on, the positions are
    /// committed first (there is no LeaveGroup: the member expires after its session).
    /// [`crate::ConsumerEvent::Closed`] follows; then close the client with [`Client::close`].
    ///
    /// Every call is answered by its own `Closed`: a call after the consumer closed gets one
    /// at once, a call while a close is under way gets one when it finishes (so a driver can
    /// forward each `Closed` to one waiter without tracking earlier calls).
    pub fn close_consumer(&mut self, now: Instant) {
        self.shared.last_now = now;
        if self.consumer.close(now, &mut self.shared) == Close::Started {
            self.process(now);
        }
    }

    /// The error that ended the consumer's part in its group for good, if one did: today
    /// only [`ConsumerError::FencedInstanceId`] (another consumer took over this member's
    /// `consumer.group_instance_id`). It stays: adapters return it from every `poll`/`recv`
    /// that finds no record.
    pub fn fatal_consumer_error(&self) -> Option<ConsumerError> {
        let instance_id = self.consumer.group.fenced.clone()?;
        Some(ConsumerError::FencedInstanceId { instance_id })
    }

    /// One consumer pass inside [`Client::process`]; whether it sent anything.
    pub(crate) fn consumer_drive(&mut self, now: Instant) -> bool {
        self.consumer.drive(now, &mut self.shared)
    }

    /// The consumer's earliest deadline, for the drain's [`crate::Output::Timeout`].
    pub(crate) fn consumer_deadline(&self) -> Option<Instant> {
        self.consumer.deadline(&self.shared)
    }

    /// Routes a consumer request's outcome.
    pub(crate) fn on_consumer_completion(&mut self, now: Instant, tag: OwnerTag, c: Completion) {
        self.consumer.on_completion(now, tag, c, &mut self.shared);
    }
}
