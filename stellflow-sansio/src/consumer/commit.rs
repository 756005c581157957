//! Commits: one OffsetCommit in flight at a time, in the order they were made (a retry goes
//! back to the front), auto-commit on its timer, queued commits failed at their deadline, and
//! each commit's outcome as a [`ConsumerEvent::CommitCompleted`].

use super::partition::by_topic;
use super::{
    CommitId, CommitKind, Consumer, ConsumerError, ConsumerEvent, Op, TopicPartition, emit,
};
use crate::address::BrokerAddress;
use crate::error::RequestError;
use crate::net::Origin;
use crate::offset_model::{self, Position};
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use bytes::Bytes;
use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;
use stellflow_proto::messages::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
    RequestBody,
};
use stellflow_proto::{ErrorCode, Reader, Wire};

/// A commit on its way.
#[derive(Debug, Clone)]
pub(super) struct CommitReq {
    id: CommitId,
    kind: CommitKind,
    positions: Vec<(TopicPartition, Position)>,
    started: Instant,
    pub(super) deadline: Instant,
    /// When its OffsetCommit was handed to the connection (`None` while queued).
    pub(super) sent: Option<Instant>,
    /// The trace context of the call that asked for it (its OffsetCommit carries it).
    trace: Option<RequestOptions>,
}

impl CommitReq {
    /// The commit's id.
    pub(super) fn id(&self) -> CommitId {
        self.id
    }

    /// Whether no position is left to commit.
    pub(super) fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Leaves out the positions of `lost` partitions (another member may own them now).
    pub(super) fn drop_partitions(&mut self, lost: &BTreeSet<&TopicPartition>) {
        self.positions.retain(|(tp, _)| !lost.contains(tp));
    }

    /// Whether it commits a position of one of `partitions`.
    pub(super) fn covers(&self, partitions: &[TopicPartition]) -> bool {
        self.positions.iter().any(|(tp, _)| partitions.contains(tp))
    }
}

impl Consumer {
    /// The auto-commit timer. Runs before the coordinator is needed: a commit queued while
    /// the coordinator is unknown is what makes the client look it up again (with manual
    /// assignment nothing else would, and auto-commits would stop for good). At most one
    /// auto-commit waits in the queue; a later tick refreshes its positions.
    pub(super) fn auto_commit(&mut self, now: Instant, sh: &mut Shared) -> bool {
        if !self.config.enable_auto_commit
            || self.closing
            || self.group.next_auto_commit.is_none_or(|t| t > now)
        {
            return false;
        }
        self.group.next_auto_commit = Some(now + self.config.auto_commit_interval);
        let changed = self.uncommitted_positions();
        if changed.is_empty() {
            return false;
        }
        if let Some(queued) = self
            .group
            .pending
            .iter_mut()
            .find(|c| c.kind == CommitKind::Auto)
        {
            queued.positions = changed;
            return false;
        }
        self.start_commit(now, changed, CommitKind::Auto, sh);
        true
    }

    /// Queues a commit of `positions`; its outcome is a [`ConsumerEvent::CommitCompleted`].
    ///
    /// Commits go out one at a time, in the order they were made, and a retried commit goes
    /// back to the front of the queue: two OffsetCommits in flight (or a retry sent after a
    /// newer commit) can be executed in either order by the server's two handler threads,
    /// and the older positions would then overwrite the newer ones — a restarted consumer
    /// would deliver records again (dst seeds 1515, 3022).
    pub(crate) fn start_commit(
        &mut self,
        now: Instant,
        positions: Vec<(TopicPartition, Position)>,
        kind: CommitKind,
        sh: &mut Shared,
    ) -> CommitId {
        self.start_commit_traced(now, positions, kind, None, sh)
    }

    /// [`Consumer::start_commit`] for a call made with a trace context: its OffsetCommit
    /// request (retries included) carries it.
    pub(crate) fn start_commit_traced(
        &mut self,
        now: Instant,
        positions: Vec<(TopicPartition, Position)>,
        kind: CommitKind,
        trace: Option<&crate::trace::TraceIds>,
        sh: &mut Shared,
    ) -> CommitId {
        let id = self.group.alloc_commit();
        let req = CommitReq {
            id,
            kind,
            positions,
            started: now,
            deadline: now + self.config.rebalance_timeout,
            sent: None,
            trace: trace.map(|t| RequestOptions {
                trace: Some(t.into()),
                timeout: None,
            }),
        };
        if req.positions.is_empty() {
            self.finish_commit(req, Ok(()), sh);
            return id;
        }
        let first = self.group.pending.is_empty() && self.group.in_flight.is_empty();
        match (self.group.coordinator.clone(), self.config.group_id.clone()) {
            (Some(addr), Some(group)) if first => self.send_commit(now, &group, &addr, req, sh),
            (_, Some(_)) => self.group.pending.push_back(req),
            (_, None) => self.finish_commit(req, Err(ConsumerError::NoGroup), sh),
        }
        id
    }

    pub(super) fn send_commit(
        &mut self,
        now: Instant,
        group: &str,
        coordinator: &BrokerAddress,
        req: CommitReq,
        sh: &mut Shared,
    ) {
        let topics = by_topic(req.positions.iter().cloned())
            .into_iter()
            .map(|(tp, parts)| OffsetCommitTopic {
                topic: Some(tp.topic.as_ref().into()),
                partitions: parts
                    .into_iter()
                    .map(|(partition, pos)| {
                        let (offset, metadata) = offset_model::commit_form(pos);
                        OffsetCommitPartition {
                            partition,
                            offset,
                            metadata: Some(metadata.into()),
                        }
                    })
                    .collect(),
            })
            .collect();
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            RequestBody::OffsetCommit(OffsetCommitRequest {
                group_id: Some(group.into()),
                topics,
            }),
            None,
            Origin::Consumer(Op::Commit(req.id.0).tag()),
            req.trace.as_ref().unwrap_or(&RequestOptions::default()),
        );
        let mut req = req;
        req.sent = Some(now);
        self.group.in_flight.insert(seq, req);
    }

    pub(super) fn finish_commit(
        &mut self,
        req: CommitReq,
        result: Result<(), ConsumerError>,
        sh: &mut Shared,
    ) {
        if result.is_ok() {
            for (tp, pos) in &req.positions {
                if let Some(p) = self.parts.get_mut(tp) {
                    p.committed = Some(*pos);
                }
            }
            sh.net.counters.offset_commits += 1;
        }
        let close = req.kind == CommitKind::Close;
        let id = req.id;
        emit(
            sh,
            ConsumerEvent::CommitCompleted {
                id: req.id,
                kind: req.kind,
                result: result.map(|()| req.positions),
            },
        );
        if close {
            self.finish_close(sh);
        }
        // A group handover waits for this commit (its own, or the last one of the partitions
        // it releases) before it releases them.
        self.revocation_committed(id, sh);
    }

    /// The last commit not finished yet (queued or in flight) with a position of one of
    /// `partitions`: commits finish in the order they were made, so once it has, none of
    /// theirs is left.
    pub(super) fn last_commit_covering(&self, partitions: &[TopicPartition]) -> Option<CommitId> {
        let g = &self.group;
        (g.pending.iter().chain(g.in_flight.values()))
            .filter(|c| c.covers(partitions))
            .map(|c| c.id)
            .max()
    }

    /// Leaves the positions of `lost` partitions out of every commit not sent yet — queued,
    /// or in flight with none of its bytes written (withdrawn from the connection, then
    /// queued first again): another member may own them by now. A commit left with nothing
    /// fails with [`ConsumerError::NotAssigned`]. Commits already written are left alone.
    pub(super) fn drop_unsent_commits(&mut self, lost: &[TopicPartition], sh: &mut Shared) {
        if lost.is_empty() {
            return;
        }
        let unsent: Vec<u64> = (self.group.in_flight.iter())
            .filter(|(_, c)| c.covers(lost))
            .map(|(seq, _)| *seq)
            .collect();
        for seq in unsent {
            if sh.net.cancel_unsent(seq)
                && let Some(c) = self.group.in_flight.remove(&seq)
            {
                // It was made before everything queued: it stays first.
                self.group.pending.push_front(c);
            }
        }
        let lost_set: BTreeSet<&TopicPartition> = lost.iter().collect();
        let mut emptied = Vec::new();
        for c in self.group.pending.iter_mut() {
            c.drop_partitions(&lost_set);
            if c.is_empty() {
                emptied.push(c.id());
            }
        }
        let (dropped, keep): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.group.pending)
            .into_iter()
            .partition(|c| emptied.contains(&c.id()));
        self.group.pending = keep;
        for c in dropped {
            let tp = lost[0].clone();
            self.finish_commit(c, Err(ConsumerError::NotAssigned(tp)), sh);
        }
    }

    /// Fails every queued commit whose deadline passed while it waited for a coordinator
    /// (a silent or unreachable coordinator must not make a commit wait forever): the error
    /// is a retriable [`RequestError::Timeout`] of OffsetCommit. Commits in flight fail
    /// through their request's own timeout and are not re-queued past their deadline.
    pub(super) fn expire_pending_commits(&mut self, now: Instant, sh: &mut Shared) {
        if self.group.pending.iter().all(|c| c.deadline > now) {
            return;
        }
        let (due, keep): (VecDeque<CommitReq>, VecDeque<CommitReq>) =
            std::mem::take(&mut self.group.pending)
                .into_iter()
                .partition(|c| c.deadline <= now);
        self.group.pending = keep;
        let api_key = stellflow_proto::ApiKey::OFFSET_COMMIT;
        // No broker answers: the commit never left the client, say why.
        let silent = sh.net.silent_broker();
        for c in due {
            let after = now.saturating_duration_since(c.started);
            let err = ConsumerError::Request(match &silent {
                Some((address, cause)) => RequestError::Unreachable {
                    api_key,
                    address: address.clone(),
                    cause: format!("not sent within {after:?}; {cause}"),
                },
                None => RequestError::Timeout { api_key, after },
            });
            self.finish_commit(c, Err(err), sh);
        }
    }

    /// Fails every queued and in-flight commit (the client is closing).
    pub(crate) fn fail_commits(&mut self, sh: &mut Shared) {
        let pending: Vec<CommitReq> = self.group.pending.drain(..).collect();
        for c in pending {
            self.finish_commit(c, Err(ConsumerError::Closed), sh);
        }
    }

    /// An OffsetCommit answered (or failed): the commit's outcome, or, for a retriable failure
    /// of a commit that must land, a retry at the front of the queue.
    pub(super) fn on_commit(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        let Some(req) = self.group.in_flight.remove(&seq) else {
            return;
        };
        let resp = body.and_then(|b| OffsetCommitResponse::decode(&mut Reader::new(b)).ok());
        let outcome = match (resp, transport) {
            (Some(r), _) => {
                match r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.error_code != ErrorCode::NONE)
                {
                    Some(p) => Err(ConsumerError::Broker {
                        what: "OffsetCommit",
                        code: p.error_code,
                    }),
                    None => Ok(()),
                }
            }
            (None, Some(e)) => {
                // A timeout says nothing about the coordinator (the commit may not even
                // have left the connection's queue, e.g. behind an unanswered
                // SyncGroup): keep it, as the heartbeat and SyncGroup answers do;
                // forgetting it would turn that SyncGroup's retry into a rejoin.
                if !matches!(e, RequestError::Timeout { .. }) {
                    self.group.lost_coordinator(now);
                }
                Err(ConsumerError::Request(e))
            }
            (None, None) => Err(ConsumerError::Decode("OffsetCommit")),
        };
        let retry = outcome.as_ref().is_err_and(|e| match e {
            ConsumerError::Request(r) => r.is_retriable(),
            _ => false,
        }) && matches!(
            req.kind,
            CommitKind::Sync | CommitKind::Close | CommitKind::Revocation
        ) && now < req.deadline;
        let mut req = req;
        if retry && !self.group.subscription.is_empty() {
            // A group member re-sends only what it still owns: the partitions it lost while
            // the commit was unanswered (a lapsed lease) may be another member's by now (DST
            // group seed 3001548: the retry after the reconnect moved the group back).
            let first = req.positions.first().map(|(tp, _)| tp.clone());
            req.positions.retain(|(tp, _)| self.parts.contains_key(tp));
            if req.is_empty() {
                let tp = first.unwrap_or_else(|| TopicPartition::new("", 0));
                self.finish_commit(req, Err(ConsumerError::NotAssigned(tp)), sh);
                return;
            }
        }
        if retry {
            // Older than everything queued: it goes first.
            self.group.pending.push_front(req);
        } else {
            self.finish_commit(req, outcome, sh);
        }
    }
}
