//! Start positions: the committed offset (OffsetFetch on the coordinator), else the reset
//! policy (ListOffsets on the leader), else a stop until the user seeks.

use super::partition::{PartId, Start, by_topic};
use super::{Consumer, ConsumerEvent, LogStartAction, OffsetReset, Op, TopicPartition, emit};
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::offset_model::{self, Position};
use crate::refresh::Urgency;
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use crate::trace::TraceIds;
use std::collections::BTreeMap;
use std::time::Instant;
use stellflow_proto::messages::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
    OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic, RequestBody,
};
use stellflow_proto::{ErrorClass, ErrorCode, Reader, Wire};

/// How long a position found within the log end is not checked again while the high
/// watermark stays below it (a follower that lags).
const END_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the consumer sends a ListOffsets for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A reset to the log start (`Earliest`) or end (`Latest`).
    Reset(OffsetReset),
    /// A seek to the first blob appended at or after a time (ms since the epoch).
    Time(i64),
    /// Whether the position is past the log end (ListOffsets LATEST), see [`Start::CheckEnd`].
    CheckEnd,
}

impl Ask {
    /// The ListOffsets timestamp: −2 for the log start, −1 for the log end, else the time.
    fn timestamp(self) -> i64 {
        match self {
            Ask::Reset(OffsetReset::Earliest) => -2,
            Ask::Time(ms) => ms,
            _ => -1,
        }
    }

    /// The start to go back to when the ListOffsets failed.
    fn retry(self) -> Start {
        match self {
            Ask::Reset(policy) => Start::NeedsReset(policy),
            Ask::Time(ms) => Start::NeedsTime(ms),
            Ask::CheckEnd => Start::CheckEnd,
        }
    }
}

/// A partition asked for in a ListOffsets: its epoch, why, and its seek's trace context.
type Asked = (TopicPartition, u64, Ask, Option<TraceIds>);

/// Request options carrying `trace` (none: the defaults).
fn traced(trace: Option<&TraceIds>) -> RequestOptions {
    RequestOptions {
        trace: trace.map(Into::into),
        ..RequestOptions::default()
    }
}

impl Consumer {
    fn policy_start(&self, tp: &TopicPartition, sh: &mut Shared) -> Start {
        match self.config.auto_offset_reset {
            OffsetReset::Earliest => Start::NeedsReset(OffsetReset::Earliest),
            OffsetReset::Latest => Start::NeedsReset(OffsetReset::Latest),
            _ => {
                emit(sh, ConsumerEvent::NoPosition(tp.clone()));
                Start::Stopped
            }
        }
    }

    /// Asks for committed offsets and reset offsets of partitions without a position.
    /// Only the `woken` partitions (changed since the last pass, or whose wait ended) are
    /// looked at; one whose retry is not due yet wakes when it is.
    pub(crate) fn resolve_starts(
        &mut self,
        now: Instant,
        woken: &[PartId],
        sh: &mut Shared,
    ) -> bool {
        if self.closing || self.closed {
            return false;
        }
        // 1. Partitions with nothing known yet: the committed offset (with a group), else the
        //    reset policy.
        let (ask, fetch_trace) = self.choose_starts(now, woken, sh);
        // 2. One OffsetFetch on the coordinator for the committed offsets.
        let mut sent = self.send_offset_fetch(now, ask, fetch_trace, sh);
        // 3. The partitions to reset, seek by time or check the end of, by leader.
        let by_leader = self.resets_by_leader(now, woken, sh);
        // 4. One ListOffsets per leader.
        for (leader, list) in by_leader {
            self.send_list_offsets(now, leader, list, sh);
            sent = true;
        }
        sent
    }

    /// Sets every partition whose start is unknown (and not waiting for a retry) on its way:
    /// `AwaitCommitted` with a group (once the coordinator is known: it is asked for
    /// meanwhile), else its reset policy. Returns the partitions to ask the committed offset
    /// of, with their epoch, and the first seek's trace context among them.
    fn choose_starts(
        &mut self,
        now: Instant,
        woken: &[PartId],
        sh: &mut Shared,
    ) -> (Vec<(TopicPartition, u64)>, Option<TraceIds>) {
        let has_group = self.config.group_id.is_some();
        let coordinator_known = self.group.coordinator.is_some();
        let mut unknown = Vec::new();
        for &id in woken {
            let Some((tp, p)) = self.parts.by_id(id) else {
                continue;
            };
            if p.start != Start::Unknown || p.handing_over {
                continue;
            }
            match p.retry_at {
                Some(t) if t > now => self.parts.wake_at(id, t, now),
                _ => unknown.push((id, tp.clone())),
            }
        }
        let mut ask = Vec::new();
        let mut fetch_trace = None;
        for (id, tp) in unknown {
            let start = if has_group {
                if !coordinator_known {
                    self.group.want_coordinator = true;
                    self.waiting_coordinator.push(id);
                    continue;
                }
                Start::AwaitCommitted
            } else {
                self.policy_start(&tp, sh)
            };
            if let Some(p) = self.parts.get_mut(&tp) {
                p.start = start;
                if start == Start::AwaitCommitted {
                    ask.push((tp.clone(), p.epoch));
                    fetch_trace = fetch_trace.or_else(|| p.seek_trace.clone());
                }
            }
        }
        (ask, fetch_trace)
    }

    /// One OffsetFetch on the coordinator for the committed offsets of `ask` (partition and
    /// epoch), carrying `trace`; the answer's order is kept to read it. Whether it was sent.
    fn send_offset_fetch(
        &mut self,
        now: Instant,
        ask: Vec<(TopicPartition, u64)>,
        trace: Option<TraceIds>,
        sh: &mut Shared,
    ) -> bool {
        let (false, Some(addr), Some(group)) = (
            ask.is_empty(),
            self.group.coordinator.clone(),
            self.config.group_id.clone(),
        ) else {
            return false;
        };
        let topics = by_topic(ask.iter().cloned())
            .into_iter()
            .map(|(tp, parts)| OffsetFetchTopic {
                topic: Some(tp.topic.as_ref().into()),
                partitions: parts
                    .into_iter()
                    .map(|(partition, _)| OffsetFetchPartition { partition })
                    .collect(),
            })
            .collect();
        let body = RequestBody::OffsetFetch(OffsetFetchRequest {
            group_id: Some(group.as_str().into()),
            topics,
        });
        let seq = sh.net.submit(
            now,
            Target::Address(addr),
            body,
            None,
            Origin::Consumer(Op::OffsetFetch.tag()),
            &traced(trace.as_ref()),
        );
        // The answer comes in request order: by topic, then partition.
        let order = by_topic(ask)
            .into_iter()
            .flat_map(|(tp, parts)| {
                parts.into_iter().map(move |(partition, epoch)| {
                    (
                        TopicPartition {
                            topic: tp.topic.clone(),
                            partition,
                        },
                        epoch,
                    )
                })
            })
            .collect();
        self.offset_fetches.insert(seq, order);
        true
    }

    /// The partitions that need a ListOffsets (a reset, a seek by time, an end check) and are
    /// not backing off, by leader; each is marked `AwaitReset`. A partition whose leader is
    /// unknown backs off until the metadata names one (a refresh is asked for).
    fn resets_by_leader(
        &mut self,
        now: Instant,
        woken: &[PartId],
        sh: &mut Shared,
    ) -> BTreeMap<i32, Vec<Asked>> {
        let mut by_leader: BTreeMap<i32, Vec<Asked>> = BTreeMap::new();
        let cluster = sh.metadata.cluster();
        let mut refresh = false;
        for &id in woken {
            let Some((tp, p)) = self.parts.by_id(id) else {
                continue;
            };
            let ask = match p.start {
                Start::NeedsReset(policy) => Ask::Reset(policy),
                Start::NeedsTime(ms) => Ask::Time(ms),
                Start::CheckEnd => Ask::CheckEnd,
                _ => continue,
            };
            let (waits_leader, retry_at) = (p.leader_wait, p.retry_at.filter(|t| *t > now));
            // Look the leader up only for a partition that may reset or waits for a leader.
            if !waits_leader && let Some(t) = retry_at {
                self.parts.wake_at(id, t, now);
                continue;
            }
            let leader = match cluster
                .partition(&tp.topic, tp.partition)
                .map(|i| i.leader())
            {
                Some(Ok(leader)) => Some(leader),
                _ => None,
            };
            let tp = tp.clone();
            if waits_leader
                && leader.is_none()
                && let Some(t) = retry_at
            {
                self.waiting_leader.push(id);
                self.parts.wake_at(id, t, now);
                continue;
            }
            let Some((_, p)) = self.parts.by_id_mut(id) else {
                continue;
            };
            p.leader_known(leader.is_some());
            match leader {
                Some(leader) => {
                    p.start = Start::AwaitReset;
                    by_leader.entry(leader).or_default().push((
                        tp,
                        p.epoch,
                        ask,
                        p.seek_trace.clone(),
                    ));
                }
                None => {
                    refresh = true;
                    let until = now + self.config.fetch_backoff_max;
                    p.leader_wait = true;
                    p.retry_at = Some(until);
                    self.waiting_leader.push(id);
                    self.parts.wake_at(id, until, now);
                }
            }
        }
        if refresh {
            sh.refresher.request(Urgency::AfterBackoff);
        }
        by_leader
    }

    /// One ListOffsets to `leader` for `list`, carrying the first seek's trace context that
    /// has one (one request, one context, as a Produce does); the answer's order is kept.
    fn send_list_offsets(&mut self, now: Instant, leader: i32, list: Vec<Asked>, sh: &mut Shared) {
        let trace = list.iter().find_map(|(.., t)| t.clone());
        let grouped = by_topic(list.into_iter().map(|(tp, e, pol, _)| (tp, (e, pol))));
        let topics = grouped
            .iter()
            .map(|(tp, parts)| ListOffsetsTopic {
                topic: Some(tp.topic.as_ref().into()),
                partitions: parts
                    .iter()
                    .map(|(partition, (_, ask))| ListOffsetsPartition {
                        partition: *partition,
                        current_leader_epoch: -1,
                        timestamp: ask.timestamp(),
                        max_num_offsets: 1,
                    })
                    .collect(),
            })
            .collect();
        let seq = sh.net.submit(
            now,
            Target::Broker(leader),
            RequestBody::ListOffsets(ListOffsetsRequest {
                replica_id: -1,
                isolation_level: 0,
                topics,
            }),
            None,
            Origin::Consumer(Op::ListOffsets.tag()),
            &traced(trace.as_ref()),
        );
        let order = grouped
            .into_iter()
            .flat_map(|(tp, parts)| {
                parts.into_iter().map(move |(partition, (e, pol))| {
                    (
                        TopicPartition {
                            topic: tp.topic.clone(),
                            partition,
                        },
                        e,
                        pol,
                    )
                })
            })
            .collect();
        self.resets.insert(seq, order);
    }

    /// An OffsetFetch answered.
    pub(crate) fn on_offset_fetch(
        &mut self,
        now: Instant,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let Some(order) = self.offset_fetches.remove(&seq) else {
            return;
        };
        if result.is_err() {
            self.group.lost_coordinator(now);
        }
        let resp = result
            .ok()
            .and_then(|r| r.body)
            .and_then(|b| OffsetFetchResponse::decode(&mut Reader::new(b)).ok());
        let answers: Vec<(i64, Option<String>, ErrorCode)> = resp
            .map(|r| {
                r.topics
                    .into_iter()
                    .flat_map(|t| t.partitions)
                    .map(|p| (p.offset, p.metadata.map(|m| m.to_string()), p.error_code))
                    .collect()
            })
            .unwrap_or_default();
        let mut answers = answers.into_iter();
        for (tp, epoch) in order {
            let answer = answers.next();
            let Some(p) = self.parts.get(&tp) else {
                continue;
            };
            if p.epoch != epoch || p.start != Start::AwaitCommitted {
                continue;
            }
            match answer {
                Some((offset, metadata, code)) if code == ErrorCode::NONE => {
                    match offset_model::resume_from(offset, metadata.as_deref()) {
                        Some(pos) => {
                            self.reposition(&tp, pos);
                            if let Some(p) = self.parts.get_mut(&tp) {
                                p.committed = Some(pos);
                            }
                            emit(
                                sh,
                                ConsumerEvent::PositionResolved {
                                    partition: tp,
                                    position: pos,
                                    committed: true,
                                },
                            );
                        }
                        None => {
                            let s = self.policy_start(&tp, sh);
                            if let Some(p) = self.parts.get_mut(&tp) {
                                p.start = s;
                            }
                        }
                    }
                }
                _ => {
                    if let Some(p) = self.parts.get_mut(&tp) {
                        p.start = Start::Unknown;
                        p.retry_at = Some(now + self.config.rejoin_backoff);
                    }
                }
            }
        }
    }

    /// A ListOffsets (reset) answered.
    pub(crate) fn on_list_offsets(
        &mut self,
        now: Instant,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let Some(order) = self.resets.remove(&seq) else {
            return;
        };
        let resp = result
            .ok()
            .and_then(|r| r.body)
            .and_then(|b| ListOffsetsResponse::decode(&mut Reader::new(b)).ok());
        let answers: Vec<(i64, ErrorCode)> = resp
            .map(|r| {
                r.topics
                    .into_iter()
                    .flat_map(|t| t.partitions)
                    .map(|p| (p.offset, p.error_code))
                    .collect()
            })
            .unwrap_or_default();
        let mut answers = answers.into_iter();
        for (tp, epoch, policy) in order {
            let answer = answers.next();
            let Some(p) = self.parts.get_mut(&tp) else {
                continue;
            };
            if p.epoch != epoch || p.start != Start::AwaitReset {
                continue;
            }
            match answer {
                Some((offset, code)) if code == ErrorCode::NONE && offset >= 0 => match policy {
                    Ask::Reset(_) | Ask::Time(_) => self.resolved(&tp, Position::blob(offset), sh),
                    Ask::CheckEnd => self.checked_end(now, &tp, offset, sh),
                },
                // No blob that recent: the server answers OFFSET_OUT_OF_RANGE with the log end
                // (PROTOCOL.md §3.5), where the seek lands, as Kafka's consumer does.
                Some((offset, code))
                    if code == ErrorCode::OFFSET_OUT_OF_RANGE
                        && offset >= 0
                        && matches!(policy, Ask::Time(_)) =>
                {
                    self.resolved(&tp, Position::blob(offset), sh)
                }
                other => {
                    if let Some((_, code)) = other
                        && code.class() == ErrorClass::RefreshMetadataAndRetry
                    {
                        sh.refresher.request(Urgency::AfterBackoff);
                    }
                    p.start = policy.retry();
                    p.retry_at = Some(now + self.config.fetch_backoff_max);
                }
            }
        }
    }

    /// A reset found its position.
    fn resolved(&mut self, tp: &TopicPartition, pos: Position, sh: &mut Shared) {
        self.reposition(tp, pos);
        emit(
            sh,
            ConsumerEvent::PositionResolved {
                partition: tp.clone(),
                position: pos,
                committed: false,
            },
        );
    }

    /// ListOffsets LATEST answered `log_end` for a partition in [`Start::CheckEnd`]: a position
    /// past the log end is reported and handled by the reset policy (DESIGN §3.13); one within
    /// it only waits for the high watermark, fetching again after the empty-fetch backoff.
    fn checked_end(&mut self, now: Instant, tp: &TopicPartition, log_end: i64, sh: &mut Shared) {
        let (min_backoff, max_backoff) = (self.config.fetch_backoff, self.config.fetch_backoff_max);
        let policy = self.config.auto_offset_reset;
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        let position = p.fetch_next;
        if position <= log_end {
            p.start = Start::Ready;
            p.end_checked = Some((position, now + END_CHECK_INTERVAL));
            p.empty_backoff = p
                .empty_backoff
                .saturating_mul(2)
                .clamp(min_backoff, max_backoff);
            p.not_before = Some(now + p.empty_backoff);
            return;
        }
        let action = LogStartAction::under(policy);
        emit(
            sh,
            ConsumerEvent::PositionOutOfRange {
                partition: tp.clone(),
                position,
                log_end,
                action,
            },
        );
        match action {
            LogStartAction::MovedToLogStart => {
                self.restart(tp, Start::NeedsReset(OffsetReset::Earliest));
            }
            LogStartAction::MovedToEnd => self.resolved(tp, Position::blob(log_end), sh),
            _ => {
                self.restart(tp, Start::Stopped);
            }
        }
    }
}
