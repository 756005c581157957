//! Fetching: one Fetch per leader broker for its fetchable partitions, each blob asked for
//! with its own entry (PROTOCOL.md §3.4 exact method), entries sized from blob sizes seen so
//! the answer fits the frame limit, prefetch bounded by buffered bytes, and client-side
//! adaptive backoff on empty fetches (the server never waits).

use super::partition::{HeldAnswer, LayoutPart, PartState, ReadyBlob, Start};
use super::{Consumer, ConsumerEvent, LogStartAction, OffsetReset, Op, TopicPartition, emit};
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::offset_model::{self, EntryVerdict, Position};
use crate::refresh::Urgency;
use crate::request::Target;
use crate::shared::Shared;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    FetchPartition, FetchPartitionResponse, FetchRequest, FetchResponse, FetchTopic, RequestBody,
};
use stellflow_proto::{ErrorClass, ErrorCode, Reader, Wire};

/// Response-frame bytes reserved for headers and per-entry overhead.
const FRAME_SLACK: usize = 256 * 1024;

/// A Fetch request's partitions by topic, in request order.
type Topics = Vec<(Arc<str>, Vec<LayoutPart>)>;

/// What a Fetch in flight asked for, in request order.
#[derive(Debug, Clone)]
pub struct FetchLayout {
    pub(crate) broker: i32,
    topics: Topics,
    /// Blob bytes the request may bring (blob sizes seen times entries).
    estimate: usize,
}

impl PartState {
    /// Counts off the request `lp` of this partition, answered or failed; whether its answer
    /// still counts (same epoch and pipeline) rather than being dropped.
    fn answered(&mut self, lp: &LayoutPart) -> bool {
        if self.epoch != lp.epoch {
            // A seek or reset since: the request was already counted off.
            return false;
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.pipeline == lp.pipeline
    }
}

/// Why reading one partition's entries of a Fetch answer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntriesEnd {
    /// Read to the end, or to a blob not to deliver yet (at the high watermark, a duplicate
    /// run's end, a stop); nothing failed.
    Read,
    /// An entry carried an error code: fetched again after the longest backoff.
    Errored,
    /// Nothing at the position and a high watermark below it: ListOffsets checks the end.
    PastEnd,
    /// The position fell below the log start with policy `Latest`: reset to the log end.
    RestartLatest,
}

/// An entry of a Fetch answer carried `code`: a stale leader refreshes the metadata, any
/// other error is said with [`ConsumerEvent::FetchError`].
fn entry_error(tp: &TopicPartition, code: ErrorCode, sh: &mut Shared) {
    if code.class() == ErrorClass::RefreshMetadataAndRetry {
        sh.refresher.request(Urgency::AfterBackoff);
    } else {
        emit(
            sh,
            ConsumerEvent::FetchError {
                partition: tp.clone(),
                code,
            },
        );
    }
}

impl PartState {
    /// Reads the entries of one Fetch answer for this partition (`tp`, asked as `lp`), which
    /// start at or below `fetch_next`: the blobs to deliver (moving `fetch_next` past them) and
    /// why reading stopped. Error codes, a log start passed (applied by `policy`) and a
    /// position past the log end are said as events or in the answer.
    fn read_entries(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        lp: &LayoutPart,
        entries: Vec<FetchPartitionResponse>,
        policy: OffsetReset,
        sh: &mut Shared,
    ) -> (Vec<ReadyBlob>, EntriesEnd) {
        let mut blobs = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            if e.partition != tp.partition {
                break;
            }
            if e.error_code != ErrorCode::NONE {
                entry_error(tp, e.error_code, sh);
                return (blobs, EntriesEnd::Errored);
            }
            self.high_watermark = Some(e.high_watermark);
            self.log_start = Some(e.log_start_offset);
            let fetch_offset = lp.first.saturating_add(i as i64);
            let records = e.records.unwrap_or_default();
            let classify = |p: &PartState| {
                offset_model::classify(
                    p.fetch_next,
                    fetch_offset,
                    e.log_start_offset,
                    records.is_empty(),
                )
            };
            let mut verdict = classify(self);
            if let EntryVerdict::BelowLogStart { log_start } = verdict {
                match self.below_log_start(tp, log_start, policy, sh) {
                    LogStartAction::MovedToLogStart => verdict = classify(self),
                    LogStartAction::MovedToEnd => return (blobs, EntriesEnd::RestartLatest),
                    _ => {
                        self.start = Start::Stopped;
                        return (blobs, EntriesEnd::Read);
                    }
                }
            }
            match verdict {
                // Kafka's rule (DESIGN §3.13): only blobs below the high watermark of the same
                // answer are delivered; the server serves up to its log end.
                EntryVerdict::Deliver(offset) if offset >= e.high_watermark => break,
                // Nothing at the position and a high watermark below it: maybe past the log
                // end (the server answers that with no error), to be checked.
                EntryVerdict::End
                    if i == 0
                        && self.fetch_next > e.high_watermark
                        && !self
                            .end_checked
                            .is_some_and(|(at, until)| at == self.fetch_next && now < until) =>
                {
                    return (blobs, EntriesEnd::PastEnd);
                }
                EntryVerdict::Deliver(offset) => blobs.push(self.take_blob(tp, offset, records)),
                EntryVerdict::Duplicate => {}
                _ => break,
            }
        }
        (blobs, EntriesEnd::Read)
    }

    /// A blob at `offset` to deliver: `fetch_next` moves past it, and records already
    /// delivered of it (a mid-blob position) are skipped.
    fn take_blob(&mut self, tp: &TopicPartition, offset: i64, records: Bytes) -> ReadyBlob {
        let skip = if offset == self.delivered.offset {
            self.delivered.index
        } else {
            0
        };
        self.saw_blob(records.len());
        self.fetch_next = offset_model::next_after(offset);
        ReadyBlob::new(tp.clone(), offset, self.epoch, skip, records)
    }

    /// The position fell below the log start (retention): says so with
    /// [`ConsumerEvent::LogStartMoved`] and returns what `policy` does about it; moving to
    /// the log start is done here.
    fn below_log_start(
        &mut self,
        tp: &TopicPartition,
        log_start: i64,
        policy: OffsetReset,
        sh: &mut Shared,
    ) -> LogStartAction {
        let action = LogStartAction::under(policy);
        emit(
            sh,
            ConsumerEvent::LogStartMoved {
                partition: tp.clone(),
                position: self.fetch_next,
                log_start,
                action,
            },
        );
        if action == LogStartAction::MovedToLogStart {
            if self.delivered.offset == self.fetch_next {
                self.delivered = Position::blob(log_start);
            }
            self.fetch_next = log_start;
        }
        action
    }

    /// When this partition is fetched next, after an answer that ended as `end`: a past-end
    /// check first; the longest backoff after an error; a doubling backoff
    /// (`(min, max)`) after an answer that delivered nothing; at once after data.
    fn schedule_next_fetch(
        &mut self,
        now: Instant,
        end: EntriesEnd,
        nothing: bool,
        (min_backoff, max_backoff): (Duration, Duration),
    ) {
        if end == EntriesEnd::PastEnd {
            self.start = Start::CheckEnd;
            self.retry_at = None;
        } else if end == EntriesEnd::Errored {
            self.not_before = Some(now + max_backoff);
        } else if nothing {
            self.empty_backoff = if self.empty_backoff.is_zero() {
                min_backoff
            } else {
                (self.empty_backoff * 2).min(max_backoff)
            };
            self.not_before = Some(now + self.empty_backoff);
        } else {
            self.empty_backoff = Duration::ZERO;
            self.not_before = None;
        }
    }
}

impl Consumer {
    /// Sends Fetch requests until every leader broker that leads a fetchable partition has
    /// [`max_fetches_in_flight`](super::ConsumerConfig::max_fetches_in_flight) in flight or the
    /// prefetch bound is reached. Returns whether anything was sent.
    pub(crate) fn send_fetches(&mut self, now: Instant, sh: &mut Shared) -> bool {
        self.fetch_wake = false;
        let mut sent = false;
        // Each round asks every broker once; a streaming partition is in each round's request
        // until its pipeline is full, so this ends within `max_fetches_in_flight` rounds.
        while self.send_fetch_round(now, sh) {
            sent = true;
        }
        sent
    }

    /// Bytes asked for and not yet delivered: the estimates of the requests in flight and the
    /// answers held for an earlier one.
    fn reserved_bytes(&self) -> usize {
        let asked: usize = self.fetches.values().map(|l| l.estimate).sum();
        asked
            + self
                .parts
                .values()
                .map(PartState::held_bytes)
                .sum::<usize>()
    }

    /// One Fetch to every broker with room for one more that leads a fetchable partition.
    fn send_fetch_round(&mut self, now: Instant, sh: &mut Shared) -> bool {
        // 1. The bytes this round may ask for: none while closing or with the buffer full.
        let Some(budget) = self.round_budget() else {
            return false;
        };
        // 2. The fetchable partitions, by the leader broker that has room for one more Fetch.
        let by_broker = self.fetchable_by_leader(now, sh);
        let mut sent = false;
        for (broker, tps) in by_broker {
            // 3. Which of them this request asks for, and how many blobs each.
            let tps = self.one_request(tps);
            let (topics, estimate) = self.lay_out(tps, budget);
            if topics.is_empty() {
                continue;
            }
            // 4. The request, sent; its layout is kept to read the answer.
            let body = self.fetch_request(&topics, budget);
            let seq = sh.net.submit(
                now,
                Target::Broker(broker),
                RequestBody::Fetch(body),
                None,
                Origin::Consumer(Op::Fetch.tag()),
                &self.fetch_options,
            );
            *self.fetching.entry(broker).or_default() += 1;
            self.fetches.insert(
                seq,
                FetchLayout {
                    broker,
                    topics,
                    estimate,
                },
            );
            sent = true;
        }
        sent
    }

    /// The bytes one Fetch of this round may bring: the configured maximum within the frame
    /// limit and the room left in the buffer (counting what is asked for and held); `None`
    /// while closing or with no room left.
    fn round_budget(&self) -> Option<usize> {
        let used = self.buffered + self.reserved_bytes();
        if self.closing || self.closed || used >= self.config.max_buffered_bytes {
            return None;
        }
        let room = self.config.max_buffered_bytes - used;
        let frame_budget = self.max_frame.saturating_sub(FRAME_SLACK).max(1);
        Some(
            self.config
                .fetch_max_bytes
                .min(frame_budget)
                .min(room)
                .max(1),
        )
    }

    /// The fetchable partitions grouped by their leader, for the leaders with fewer than
    /// `max_fetches_in_flight` Fetches in flight. A partition whose leader is unknown backs
    /// off until the metadata names one (a refresh is asked for).
    fn fetchable_by_leader(
        &mut self,
        now: Instant,
        sh: &mut Shared,
    ) -> BTreeMap<i32, Vec<TopicPartition>> {
        let depth = self.config.max_fetches_in_flight;
        let mut by_broker: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        let mut refresh = false;
        let cluster = sh.metadata.cluster();
        for (tp, p) in self.parts.iter_mut() {
            // Look the leader up only for a partition that may fetch or waits for a leader.
            if !p.leader_wait && !p.fetchable(now, depth) {
                continue;
            }
            let leader = cluster
                .partition(&tp.topic, tp.partition)
                .map(|i| i.leader());
            p.leader_known(matches!(leader, Some(Ok(_))));
            if !p.fetchable(now, depth) {
                continue;
            }
            match leader {
                Some(Ok(leader)) => {
                    if self.fetching.get(&leader).copied().unwrap_or(0) < depth {
                        by_broker.entry(leader).or_default().push(tp.clone());
                    }
                }
                _ => {
                    refresh = true;
                    p.leader_wait = true;
                    p.not_before = Some(now + self.config.fetch_backoff_max);
                }
            }
        }
        if refresh {
            sh.refresher.request(Urgency::AfterBackoff);
        }
        by_broker
    }

    /// The entries of one Fetch for `tps` within `budget` bytes, by topic in first-seen
    /// order, and the blob bytes they may bring; each partition asked for counts one more
    /// request in flight and moves its pipeline's end past what is asked.
    fn lay_out(&mut self, tps: Vec<TopicPartition>, budget: usize) -> (Topics, usize) {
        let per = budget / tps.len().max(1);
        let mut topics: Topics = Vec::new();
        let mut estimate = 0usize;
        for tp in tps {
            let Some(p) = self.parts.get_mut(&tp) else {
                continue;
            };
            let count =
                offset_model::entries_for(per, p.blob_size, self.config.max_entries_per_partition);
            let size = count.saturating_mul(p.blob_size.unwrap_or(budget));
            if estimate > 0 && estimate + size > budget {
                continue;
            }
            estimate += size;
            let first = p.fetch_next.max(p.asked_until);
            let part = LayoutPart {
                partition: tp.partition,
                first,
                count,
                epoch: p.epoch,
                pipeline: p.pipeline,
            };
            p.in_flight += 1;
            p.asked_until = first.saturating_add(count as i64);
            match topics.iter_mut().find(|(t, _)| *t == tp.topic) {
                Some((_, v)) => v.push(part),
                None => topics.push((tp.topic.clone(), vec![part])),
            }
        }
        (topics, estimate)
    }

    /// The Fetch request for a layout: one entry per blob asked for.
    fn fetch_request(&self, topics: &[(Arc<str>, Vec<LayoutPart>)], budget: usize) -> FetchRequest {
        FetchRequest {
            replica_id: -1,
            max_wait_ms: i32::try_from(self.config.fetch_max_wait.as_millis()).unwrap_or(i32::MAX),
            min_bytes: 1,
            max_bytes: i32::try_from(budget).unwrap_or(i32::MAX),
            isolation_level: 0,
            session_id: 0,
            topic_partitions: topics
                .iter()
                .map(|(t, parts)| FetchTopic {
                    topic: Some(t.as_ref().into()),
                    partitions: parts
                        .iter()
                        .flat_map(|lp| {
                            offset_model::fetch_entries(lp.first, lp.count).map(
                                |(fetch_offset, max)| FetchPartition {
                                    partition: lp.partition,
                                    current_leader_epoch: -1,
                                    fetch_offset,
                                    log_start_offset: -1,
                                    partition_max_bytes: max,
                                },
                            )
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// The partitions of one broker's next Fetch. An entry returns at least
    /// one whole blob whatever its budget, and a blob can be as large as the produce frame
    /// limit (PROTOCOL.md §3.4), so a partition whose blob size is unknown is asked alone,
    /// with one entry: its answer fits any frame a blob fits in. The partitions with known
    /// sizes share the other requests (sized by [`offset_model::entries_for`]); when both
    /// kinds wait, requests alternate between them so neither starves.
    fn one_request(&mut self, tps: Vec<TopicPartition>) -> Vec<TopicPartition> {
        let (unknown, known): (Vec<_>, Vec<_>) = tps
            .into_iter()
            .partition(|tp| self.parts.get(tp).is_some_and(|p| p.blob_size.is_none()));
        self.fetch_turn = self.fetch_turn.wrapping_add(1);
        if unknown.is_empty() || (!known.is_empty() && self.fetch_turn.is_multiple_of(2)) {
            return known;
        }
        let pick = (self.fetch_turn / 2) % unknown.len();
        unknown.into_iter().skip(pick).take(1).collect()
    }

    /// A Fetch answered (or failed).
    pub(crate) fn on_fetch(
        &mut self,
        now: Instant,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        // 1. The request is no longer in flight: its broker has room for another.
        let Some(layout) = self.fetches.remove(&seq) else {
            return;
        };
        if let Some(n) = self.fetching.get_mut(&layout.broker) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.fetching.remove(&layout.broker);
            }
        }
        self.fetch_wake = true;
        // 2. The answer, decoded; a failed or undecodable one ends every partition's pipeline.
        let decoded = match &result {
            Ok(reply) => reply
                .body
                .clone()
                .and_then(|b| FetchResponse::decode(&mut Reader::new(b)).ok()),
            Err(_) => None,
        };
        let Some(resp) = decoded else {
            self.on_fetch_failed(now, &layout, &result, sh);
            return;
        };
        // 3. Each partition takes its entries, in the order they were asked for.
        let mut topics = resp.responses.into_iter();
        for (topic, parts) in layout.topics {
            let answered = topics.next();
            let mut entries = answered
                .map(|t| t.partitions)
                .unwrap_or_default()
                .into_iter();
            for lp in parts {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: lp.partition,
                };
                let mine: Vec<_> = entries.by_ref().take(lp.count).collect();
                self.on_part_answer(now, &tp, lp, mine, sh);
            }
        }
    }

    /// A Fetch that failed or did not decode: every partition it asked for (of the current
    /// pipeline) starts a new pipeline, after a backoff, or at once asked alone when the
    /// answer was too large; a single blob too large alone stops its partition.
    fn on_fetch_failed(
        &mut self,
        now: Instant,
        layout: &FetchLayout,
        result: &Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let too_large = match result {
            Err(RequestError::ResponseTooLarge { size, max, .. }) => Some((*size, *max)),
            _ => None,
        };
        let single = layout.topics.iter().map(|(_, v)| v.len()).sum::<usize>() == 1;
        for (topic, parts) in &layout.topics {
            for lp in parts {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: lp.partition,
                };
                let Some(p) = self.parts.get_mut(&tp) else {
                    continue;
                };
                if !p.answered(lp) {
                    continue;
                }
                p.break_pipeline();
                match too_large {
                    // One blob alone is larger than the client accepts: asking again
                    // would loop. Say so and stop the partition until a seek.
                    Some((size, max)) if single && lp.count == 1 => {
                        emit(
                            sh,
                            ConsumerEvent::FetchTooLarge {
                                partition: tp.clone(),
                                offset: lp.first,
                                size,
                                max,
                            },
                        );
                        self.restart(&tp, Start::Stopped);
                        break;
                    }
                    // The sizes seen were too small a guess: ask each of these alone,
                    // one blob at a time, until their sizes are known again.
                    Some(_) => {
                        p.blob_size = None;
                        p.not_before = None;
                    }
                    None => p.not_before = Some(now + self.config.fetch_backoff_max),
                }
            }
        }
    }

    /// One partition's part of a Fetch answer: applied if it starts at `fetch_next`, then any
    /// held answers it makes next in line; held if an earlier answer of the same pipeline is
    /// still out; dropped if its pipeline or epoch ended.
    fn on_part_answer(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        lp: LayoutPart,
        entries: Vec<FetchPartitionResponse>,
        sh: &mut Shared,
    ) {
        let Some(p) = self.parts.get_mut(tp) else {
            return;
        };
        if !p.answered(&lp) {
            return;
        }
        if lp.first > p.fetch_next {
            let size = entries
                .iter()
                .map(|e| e.records.as_ref().map_or(0, |r| r.len()))
                .sum();
            p.held.insert(
                lp.first,
                HeldAnswer {
                    part: lp,
                    entries,
                    size,
                },
            );
            return;
        }
        let mut next = Some((lp, entries));
        while let Some((lp, entries)) = next.take() {
            if !self.apply_entries(now, tp, &lp, entries, sh) {
                return;
            }
            next = self
                .parts
                .get_mut(tp)
                .and_then(|p| {
                    let at = p.fetch_next;
                    p.held.remove(&at)
                })
                .map(|h| (h.part, h.entries));
        }
    }

    /// Applies one partition's entries, which start at or below `fetch_next`. Returns whether
    /// the answer was whole (every blob asked for delivered), i.e. the pipeline goes on; any
    /// other outcome ends it.
    fn apply_entries(
        &mut self,
        now: Instant,
        tp: &TopicPartition,
        lp: &LayoutPart,
        entries: Vec<FetchPartitionResponse>,
        sh: &mut Shared,
    ) -> bool {
        let policy = self.config.auto_offset_reset;
        let backoff = (self.config.fetch_backoff, self.config.fetch_backoff_max);
        let Some(p) = self.parts.get_mut(tp) else {
            return false;
        };
        // 1. The entries in order: the blobs to deliver, and why reading them stopped.
        let (blobs, end) = p.read_entries(now, tp, lp, entries, policy, sh);
        // 2. When this partition is fetched next.
        p.schedule_next_fetch(now, end, blobs.is_empty(), backoff);
        // 3. Whether the pipeline goes on: every blob asked for came, nothing went wrong.
        let whole = end == EntriesEnd::Read
            && p.start == Start::Ready
            && p.fetch_next == lp.first.saturating_add(lp.count as i64);
        if !whole {
            p.break_pipeline();
        }
        // 4. The blobs queue for delivery; a log start passed with policy Latest resets.
        for b in blobs {
            self.push_blob(b);
        }
        if end == EntriesEnd::RestartLatest {
            self.restart(tp, Start::NeedsReset(OffsetReset::Latest));
        }
        whole
    }
}
