//! Which partitions the next Fetch to each broker asks for: per leader broker, a queue of the
//! partitions that may fetch (those whose blob size is unknown apart: each is asked alone),
//! filled from the partitions woken since the last pass. A request asks each partition for
//! the blobs it holds (up to the byte budget) and at most [`MAX_ENTRIES_PER_FETCH`] blobs in
//! all, so a consumer of many partitions sends many small requests, which the server answers
//! faster than a few wide ones. A request costs what it asks for:
//! no pass looks at every assigned partition, and a full buffer or a broker with no room for
//! another Fetch leaves the queues untouched.

use super::partition::{FetchLayout, LayoutPart, PartId, Start, Topics, same_topic};
use super::{Consumer, Op, TopicPartition};
use crate::net::Origin;
use crate::offset_model;
use crate::refresh::Urgency;
use crate::request::Target;
use crate::shared::Shared;
use std::collections::VecDeque;
use std::time::Instant;
use stellflow_proto::messages::{FetchPartition, FetchRequest, FetchTopic, RequestBody};

/// Response-frame bytes reserved for headers and per-entry overhead.
const FRAME_SLACK: usize = 256 * 1024;

/// Most entries (blobs) one Fetch asks for, over all its partitions. The server's time to
/// answer a Fetch grows faster than its entries (its encoder matches each entry to its file
/// region by scanning the regions not yet used), so on the real broker a request of a thousand
/// single-blob entries takes several times as long as sixteen requests of 64 with the same
/// blobs; the raw ceiling (`perf consume --raw`) asks 16.
const MAX_ENTRIES_PER_FETCH: usize = 64;

/// One broker's partitions that may fetch, in the order they are asked for.
#[derive(Debug, Default)]
pub(crate) struct BrokerQueue {
    /// Blob size known: they share requests.
    known: VecDeque<PartId>,
    /// Blob size unknown: each is asked alone, with one entry (see [`Consumer::next_request`]).
    unknown: VecDeque<PartId>,
}

impl BrokerQueue {
    fn is_empty(&self) -> bool {
        self.known.is_empty() && self.unknown.is_empty()
    }
}

/// The leader of `tp` in the metadata, if it names a usable one.
fn leader_of(sh: &Shared, tp: &TopicPartition) -> Option<i32> {
    let info = sh.metadata.cluster().partition(&tp.topic, tp.partition)?;
    info.leader().ok()
}

impl Consumer {
    /// Wakes the partitions whose wait may have ended outside any change of theirs: those
    /// waiting for a leader when the metadata changed, those waiting for the coordinator once
    /// it is known, and those whose backoff ended by `now`.
    pub(super) fn wake_waiting(&mut self, now: Instant, sh: &Shared) {
        let generation = sh.metadata.generation();
        if generation != self.seen_metadata {
            self.seen_metadata = generation;
            for id in std::mem::take(&mut self.waiting_leader) {
                self.parts.wake(id);
            }
        }
        if self.group.coordinator.is_some() {
            for id in std::mem::take(&mut self.waiting_coordinator) {
                self.parts.wake(id);
            }
        }
        self.parts.wake_due(now);
    }

    /// Puts the woken partitions that may fetch into their leader's queue; one backing off
    /// wakes when its backoff ends, one whose leader is unknown backs off until the metadata
    /// names one (a refresh is asked for). The others wait for a change of theirs (an answer,
    /// a seek, a resume) to be woken again.
    pub(super) fn queue_fetchable(&mut self, now: Instant, woken: &[PartId], sh: &mut Shared) {
        let depth = self.config.max_fetches_in_flight;
        let mut refresh = false;
        for &id in woken {
            if self.parts.is_queued(id) {
                continue;
            }
            let Some((tp, p)) = self.parts.by_id(id) else {
                continue;
            };
            if p.start != Start::Ready || p.paused || p.handing_over {
                continue;
            }
            // Look the leader up only for a partition that may fetch or waits for a leader.
            let (waits_leader, not_before) = (p.leader_wait, p.not_before);
            if !waits_leader && !p.fetchable(now, depth) {
                if let Some(t) = not_before {
                    self.parts.wake_at(id, t, now);
                }
                continue;
            }
            let leader = leader_of(sh, tp);
            if waits_leader
                && leader.is_some()
                && let Some((_, p)) = self.parts.by_id_mut(id)
            {
                p.leader_known(true);
            }
            let Some((_, p)) = self.parts.by_id(id) else {
                continue;
            };
            if !p.fetchable(now, depth) {
                let (waits_leader, not_before) = (p.leader_wait, p.not_before);
                if let Some(t) = not_before {
                    self.parts.wake_at(id, t, now);
                }
                if waits_leader {
                    self.waiting_leader.push(id);
                }
                continue;
            }
            match leader {
                Some(leader) => self.enqueue(leader, id),
                None => {
                    refresh = true;
                    let until = now + self.config.fetch_backoff_max;
                    if let Some((_, p)) = self.parts.by_id_mut(id) {
                        p.leader_wait = true;
                        p.not_before = Some(until);
                    }
                    self.waiting_leader.push(id);
                    self.parts.wake_at(id, until, now);
                }
            }
        }
        if refresh {
            sh.refresher.request(Urgency::AfterBackoff);
        }
    }

    /// Puts `id` at the back of `leader`'s queue (the one of its kind: blob size known or not).
    fn enqueue(&mut self, leader: i32, id: PartId) {
        let Some((_, p)) = self.parts.by_id(id) else {
            return;
        };
        let known = p.blob_size.is_some();
        self.parts.set_queued(id);
        let q = self.fetch_queues.entry(leader).or_default();
        if known {
            q.known.push_back(id);
        } else {
            q.unknown.push_back(id);
        }
    }

    /// Sends Fetch requests until every leader broker that leads a queued partition has
    /// [`max_fetches_in_flight`](super::ConsumerConfig::max_fetches_in_flight) in flight or the
    /// prefetch bound is reached. Returns whether anything was sent.
    pub(crate) fn send_fetches(&mut self, now: Instant, sh: &mut Shared) -> bool {
        self.fetch_wake = false;
        let mut sent = false;
        // Each round asks every broker once; a streaming partition goes back to its queue
        // after each request until its pipeline is full, so this ends within
        // `max_fetches_in_flight` rounds.
        while self.send_fetch_round(now, sh) {
            sent = true;
        }
        self.fetch_queues.retain(|_, q| !q.is_empty());
        sent
    }

    /// Bytes asked for and not yet delivered: the estimates of the requests in flight and the
    /// answers held for an earlier one.
    fn reserved_bytes(&mut self) -> usize {
        let asked: usize = self.fetches.values().map(|l| l.estimate).sum();
        let parts = &self.parts;
        let mut held = 0;
        self.held_parts.retain(|&id| {
            let bytes = parts.by_id(id).map_or(0, |(_, p)| p.held_bytes());
            held += bytes;
            bytes > 0
        });
        asked + held
    }

    /// One Fetch to every broker with a queued partition and room for one more.
    fn send_fetch_round(&mut self, now: Instant, sh: &mut Shared) -> bool {
        // 1. The bytes this round may ask for: none while closing or with the buffer full.
        let Some(budget) = self.round_budget() else {
            return false;
        };
        // 2. The brokers with queued partitions and room for one more Fetch.
        let depth = self.config.max_fetches_in_flight;
        let brokers: Vec<i32> = (self.fetch_queues.iter())
            .filter(|(b, q)| !q.is_empty() && self.fetching.get(b).copied().unwrap_or(0) < depth)
            .map(|(b, _)| *b)
            .collect();
        let mut sent = false;
        for broker in brokers {
            // 3. Which partitions this request asks for, and how many blobs each.
            let ids = self.next_request(now, broker, budget, sh);
            let (topics, estimate) = self.lay_out(broker, ids, budget);
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
            // 5. A partition that may stream on goes to the back of its queue.
            for (_, parts) in &topics {
                for lp in parts {
                    self.requeue_if_fetchable(now, broker, lp.id);
                }
            }
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

    /// Puts `id`, just asked for, back in `broker`'s queue if it may be asked for again.
    fn requeue_if_fetchable(&mut self, now: Instant, broker: i32, id: PartId) {
        let depth = self.config.max_fetches_in_flight;
        let fetchable = (self.parts.by_id(id)).is_some_and(|(_, p)| p.fetchable(now, depth));
        if fetchable && !self.parts.is_queued(id) {
            self.enqueue(broker, id);
        }
    }

    /// The bytes one Fetch of this round may bring: the configured maximum within the frame
    /// limit and the room left in the buffer (counting what is asked for and held); `None`
    /// while closing or with no room left.
    fn round_budget(&mut self) -> Option<usize> {
        if self.closing || self.closed || self.buffered >= self.config.max_buffered_bytes {
            return None;
        }
        let used = self.buffered + self.reserved_bytes();
        if used >= self.config.max_buffered_bytes {
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

    /// The next queued partition of `broker` of one kind (blob size `known` or not) that may
    /// fetch now. A partition that may not is dropped from the queue (it is woken again by
    /// its next change, or at the end of its backoff); one whose leader moved is woken to be
    /// queued again; one whose blob size changed kind moves to the other queue.
    fn pop_fetchable(
        &mut self,
        now: Instant,
        broker: i32,
        known: bool,
        sh: &Shared,
    ) -> Option<PartId> {
        let depth = self.config.max_fetches_in_flight;
        loop {
            let q = self.fetch_queues.get_mut(&broker)?;
            let id = if known {
                q.known.pop_front()
            } else {
                q.unknown.pop_front()
            }?;
            if !self.parts.take_queued(id) {
                continue;
            }
            let Some((tp, p)) = self.parts.by_id(id) else {
                continue;
            };
            let (fetchable, not_before) = (p.fetchable(now, depth), p.not_before);
            let kind_moved = p.blob_size.is_some() != known;
            let leader_moved = leader_of(sh, tp) != Some(broker);
            if !fetchable {
                if let Some(t) = not_before {
                    self.parts.wake_at(id, t, now);
                }
                continue;
            }
            if leader_moved {
                self.parts.wake(id);
                continue;
            }
            if kind_moved {
                self.enqueue(broker, id);
                continue;
            }
            return Some(id);
        }
    }

    /// The partitions of `broker`'s next Fetch. An entry returns at least one whole blob
    /// whatever its budget, and a blob can be as large as the produce frame limit
    /// (PROTOCOL.md §3.4), so a partition whose blob size is unknown is asked alone, with one
    /// entry: its answer fits any frame a blob fits in. The partitions with known sizes share
    /// the other requests, as many as one blob each fits in `budget` (sized by
    /// [`offset_model::entries_for`]); when both kinds wait, requests alternate between them
    /// so neither starves.
    fn next_request(
        &mut self,
        now: Instant,
        broker: i32,
        budget: usize,
        sh: &Shared,
    ) -> Vec<PartId> {
        self.fetch_turn = self.fetch_turn.wrapping_add(1);
        let (known_waits, unknown_waits) =
            self.fetch_queues.get(&broker).map_or((false, false), |q| {
                (!q.known.is_empty(), !q.unknown.is_empty())
            });
        if unknown_waits && (!known_waits || !self.fetch_turn.is_multiple_of(2)) {
            let ids = self.unknown_request(now, broker, sh);
            if !ids.is_empty() {
                return ids;
            }
        }
        let mut ids = Vec::new();
        let (mut estimate, mut room) = (0usize, MAX_ENTRIES_PER_FETCH);
        while let Some(id) = self.pop_fetchable(now, broker, true, sh) {
            let (count, size) = self.next_ask(id, budget, room);
            if !ids.is_empty() && (room == 0 || estimate.saturating_add(size) > budget) {
                // Not in this request: first in line for the next.
                self.parts.set_queued(id);
                if let Some(q) = self.fetch_queues.get_mut(&broker) {
                    q.known.push_front(id);
                }
                break;
            }
            estimate = estimate.saturating_add(size);
            room = room.saturating_sub(count);
            ids.push(id);
        }
        if ids.is_empty() {
            ids.extend(self.pop_fetchable(now, broker, false, sh));
        }
        ids
    }

    /// Partitions of unknown blob size for one request: as many as the response frame holds
    /// if each blob were four times the largest blob fetched lately (at most
    /// [`MAX_ENTRIES_PER_FETCH`]), so that a consumer of many partitions does not learn
    /// their sizes one round trip at a time;
    /// alone before any blob was fetched, or when an answer shared with others was too large
    /// (then the request's partitions are asked alone, see `on_fetch_failed`).
    fn unknown_request(&mut self, now: Instant, broker: i32, sh: &Shared) -> Vec<PartId> {
        let guess = self.largest_blob.saturating_mul(4);
        let frame = self.max_frame.saturating_sub(FRAME_SLACK).max(1);
        let most = (frame.checked_div(guess)).map_or(1, |n| n.clamp(1, MAX_ENTRIES_PER_FETCH));
        let mut ids = Vec::new();
        while ids.len() < most {
            let Some(id) = self.pop_fetchable(now, broker, false, sh) else {
                break;
            };
            let alone = self.parts.by_id(id).is_some_and(|(_, p)| p.ask_alone);
            if alone && !ids.is_empty() {
                // First in line for a request of its own.
                self.parts.set_queued(id);
                if let Some(q) = self.fetch_queues.get_mut(&broker) {
                    q.unknown.push_front(id);
                }
                break;
            }
            ids.push(id);
            if alone {
                break;
            }
        }
        ids
    }

    /// How many blobs the next request asks of `id`, and the bytes they are expected to
    /// bring, with `budget` bytes and `room` entries (at most `max_entries_per_partition`)
    /// for it alone: every blob known to be there that fits, each expected as large as the
    /// larger of its own recent blobs and any partition's (a partition's first blobs say
    /// little about its later ones); one blob of up to `budget` when its size is unknown.
    fn next_ask(&self, id: PartId, budget: usize, room: usize) -> (usize, usize) {
        let Some((_, p)) = self.parts.by_id(id) else {
            return (0, 0);
        };
        let most = room.min(self.config.max_entries_per_partition);
        let expect = p.blob_size.map(|s| s.max(self.largest_blob));
        let first = p.fetch_next.max(p.asked_until);
        let count = p.entries_from(first, offset_model::entries_for(budget, expect, most));
        (count, count.saturating_mul(expect.unwrap_or(budget)))
    }

    /// The entries of one Fetch for `ids` within `budget` bytes, by topic in first-seen
    /// order, and the blob bytes they may bring; each partition asked for counts one more
    /// request in flight and moves its pipeline's end past what is asked.
    fn lay_out(&mut self, broker: i32, ids: Vec<PartId>, budget: usize) -> (Topics, usize) {
        // A blob of unknown size may take its share of the budget (all of it alone).
        let per = budget / ids.len().max(1);
        let mut topics: Topics = Vec::new();
        let (mut estimate, mut room) = (0usize, MAX_ENTRIES_PER_FETCH);
        for id in ids {
            let Some((_, p)) = self.parts.by_id(id) else {
                continue;
            };
            let (first, known) = (p.fetch_next.max(p.asked_until), p.blob_size.is_some());
            let (count, size) = self.next_ask(id, budget, room);
            let size = if known {
                size
            } else {
                count.saturating_mul(per)
            };
            if estimate > 0 && (room == 0 || estimate.saturating_add(size) > budget) {
                self.enqueue(broker, id);
                continue;
            }
            estimate = estimate.saturating_add(size);
            room = room.saturating_sub(count);
            let Some((tp, p)) = self.parts.by_id_mut(id) else {
                continue;
            };
            let part = LayoutPart {
                id,
                partition: tp.partition,
                first,
                count,
                epoch: p.epoch,
                pipeline: p.pipeline,
            };
            p.in_flight += 1;
            p.asked_until = first.saturating_add(count as i64);
            match topics.iter_mut().find(|(t, _)| same_topic(t, &tp.topic)) {
                Some((_, v)) => v.push(part),
                None => topics.push((tp.topic.clone(), vec![part])),
            }
        }
        (topics, estimate)
    }

    /// The Fetch request for a layout: one entry per blob asked for.
    fn fetch_request(&self, topics: &Topics, budget: usize) -> FetchRequest {
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
}
