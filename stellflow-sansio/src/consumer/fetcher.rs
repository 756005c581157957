//! Fetching: one Fetch per leader broker for its fetchable partitions, each blob asked for
//! with its own entry (PROTOCOL.md §3.4 exact method), entries sized from blob sizes seen so
//! the answer fits the frame limit, prefetch bounded by buffered bytes, and client-side
//! adaptive backoff on empty fetches (the server never waits).

use super::offset_model::{self, EntryVerdict, Position};
use super::partition::{HeldAnswer, LayoutPart, PartState, ReadyBlob, Start};
use super::{Consumer, ConsumerEvent, Ctx, LogStartAction, OffsetReset, Op, TopicPartition};
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::refresh::Urgency;
use crate::request::Target;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    FetchPartition, FetchPartitionResponse, FetchRequest, FetchResponse, FetchTopic, RequestBody,
};
use stellflow_proto::{ErrorClass, ErrorCode, Reader, Wire};

/// Response-frame bytes reserved for headers and per-entry overhead.
const FRAME_SLACK: usize = 256 * 1024;

/// What a Fetch in flight asked for, in request order.
#[derive(Debug, Clone)]
pub struct FetchLayout {
    pub(crate) broker: i32,
    topics: Vec<(Arc<str>, Vec<LayoutPart>)>,
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

impl Consumer {
    /// Sends Fetch requests until every leader broker that leads a fetchable partition has
    /// [`max_fetches_in_flight`](super::ConsumerConfig::max_fetches_in_flight) in flight or the
    /// prefetch bound is reached. Returns whether anything was sent.
    pub(crate) fn send_fetches(&mut self, now: Instant, ctx: &mut Ctx<'_>) -> bool {
        self.fetch_wake = false;
        let mut sent = false;
        // Each round asks every broker once; a streaming partition is in each round's request
        // until its pipeline is full, so this ends within `max_fetches_in_flight` rounds.
        while self.send_fetch_round(now, ctx) {
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
    fn send_fetch_round(&mut self, now: Instant, ctx: &mut Ctx<'_>) -> bool {
        let used = self.buffered + self.reserved_bytes();
        if self.closing || self.closed || used >= self.config.max_buffered_bytes {
            return false;
        }
        let room = self.config.max_buffered_bytes - used;
        let frame_budget = self.max_frame.saturating_sub(FRAME_SLACK).max(1);
        let budget = self
            .config
            .fetch_max_bytes
            .min(frame_budget)
            .min(room)
            .max(1);
        let depth = self.config.max_fetches_in_flight;
        let mut by_broker: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        let mut refresh = false;
        let cluster = ctx.metadata.cluster();
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
            ctx.refresher.request(Urgency::AfterBackoff);
        }
        let mut sent = false;
        for (broker, tps) in by_broker {
            let tps = self.one_request(tps);
            let per = budget / tps.len().max(1);
            let mut topics: Vec<(Arc<str>, Vec<LayoutPart>)> = Vec::new();
            let mut estimate = 0usize;
            for tp in tps {
                let Some(p) = self.parts.get_mut(&tp) else {
                    continue;
                };
                let count = offset_model::entries_for(
                    per,
                    p.blob_size,
                    self.config.max_entries_per_partition,
                );
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
            if topics.is_empty() {
                continue;
            }
            let body = FetchRequest {
                replica_id: -1,
                max_wait_ms: i32::try_from(self.config.fetch_max_wait.as_millis())
                    .unwrap_or(i32::MAX),
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
            };
            let seq = ctx.net.submit(
                now,
                Target::Broker(broker),
                RequestBody::Fetch(body),
                None,
                Origin::Consumer(Op::Fetch),
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

    /// The partitions of one broker's next Fetch (issue 13 item 2). An entry returns at least
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
        ctx: &mut Ctx<'_>,
    ) {
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
        let decoded = match &result {
            Ok(reply) => reply
                .body
                .clone()
                .and_then(|b| FetchResponse::decode(&mut Reader::new(b)).ok()),
            Err(_) => None,
        };
        let Some(resp) = decoded else {
            let too_large = match &result {
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
                            ctx.emit(ConsumerEvent::FetchTooLarge {
                                partition: tp.clone(),
                                offset: lp.first,
                                size,
                                max,
                            });
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
            return;
        };
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
                self.on_part_answer(now, &tp, lp, mine, ctx);
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
        ctx: &mut Ctx<'_>,
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
            if !self.apply_entries(now, tp, &lp, entries, ctx) {
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
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let policy = self.config.auto_offset_reset;
        let (min_backoff, max_backoff) = (self.config.fetch_backoff, self.config.fetch_backoff_max);
        let Some(p) = self.parts.get_mut(tp) else {
            return false;
        };
        let mut blobs = Vec::new();
        let mut restart_latest = false;
        let mut errored = false;
        let mut past_end = false;
        for (i, e) in entries.into_iter().enumerate() {
            if e.partition != tp.partition {
                break;
            }
            if e.error_code != ErrorCode::NONE {
                if e.error_code.class() == ErrorClass::RefreshMetadataAndRetry {
                    ctx.refresher.request(Urgency::AfterBackoff);
                } else {
                    ctx.emit(ConsumerEvent::FetchError {
                        partition: tp.clone(),
                        code: e.error_code,
                    });
                }
                errored = true;
                break;
            }
            p.high_watermark = Some(e.high_watermark);
            p.log_start = Some(e.log_start_offset);
            let fetch_offset = lp.first.saturating_add(i as i64);
            let records = e.records.unwrap_or_default();
            let mut verdict = offset_model::classify(
                p.fetch_next,
                fetch_offset,
                e.log_start_offset,
                records.is_empty(),
            );
            if let EntryVerdict::BelowLogStart { log_start } = verdict {
                let position = p.fetch_next;
                let action = match policy {
                    OffsetReset::Earliest => LogStartAction::MovedToLogStart,
                    OffsetReset::Latest => LogStartAction::MovedToEnd,
                    _ => LogStartAction::Stopped,
                };
                ctx.emit(ConsumerEvent::LogStartMoved {
                    partition: tp.clone(),
                    position,
                    log_start,
                    action,
                });
                match action {
                    LogStartAction::MovedToLogStart => {
                        if p.delivered.offset == p.fetch_next {
                            p.delivered = Position::blob(log_start);
                        }
                        p.fetch_next = log_start;
                        verdict = offset_model::classify(
                            p.fetch_next,
                            fetch_offset,
                            e.log_start_offset,
                            records.is_empty(),
                        );
                    }
                    LogStartAction::MovedToEnd => {
                        restart_latest = true;
                        break;
                    }
                    _ => {
                        p.start = Start::Stopped;
                        break;
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
                        && p.fetch_next > e.high_watermark
                        && !p
                            .end_checked
                            .is_some_and(|(at, until)| at == p.fetch_next && now < until) =>
                {
                    past_end = true;
                    break;
                }
                EntryVerdict::Deliver(offset) => {
                    let skip = if offset == p.delivered.offset {
                        p.delivered.index
                    } else {
                        0
                    };
                    p.saw_blob(records.len());
                    p.fetch_next = offset_model::next_after(offset);
                    blobs.push(ReadyBlob::new(tp.clone(), offset, p.epoch, skip, records));
                }
                EntryVerdict::Duplicate => {}
                _ => break,
            }
        }
        if past_end {
            p.start = Start::CheckEnd;
            p.retry_at = None;
        } else if errored {
            p.not_before = Some(now + max_backoff);
        } else if blobs.is_empty() {
            p.empty_backoff = if p.empty_backoff.is_zero() {
                min_backoff
            } else {
                (p.empty_backoff * 2).min(max_backoff)
            };
            p.not_before = Some(now + p.empty_backoff);
        } else {
            p.empty_backoff = Duration::ZERO;
            p.not_before = None;
        }
        let whole = !errored
            && !past_end
            && !restart_latest
            && p.start == Start::Ready
            && p.fetch_next == lp.first.saturating_add(lp.count as i64);
        if !whole {
            p.break_pipeline();
        }
        for b in blobs {
            self.push_blob(b);
        }
        if restart_latest {
            self.restart(tp, Start::NeedsReset(OffsetReset::Latest));
        }
        whole
    }
}
