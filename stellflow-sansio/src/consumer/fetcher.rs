//! Fetch answers: each partition's entries read in the order asked (each blob asked for with
//! its own entry, PROTOCOL.md §3.4 exact method), answers that overtook an earlier one held,
//! and client-side adaptive backoff on empty fetches (the server never waits). What a request
//! asks for (one Fetch per leader broker, entries sized from blob sizes seen, prefetch bounded
//! by buffered bytes) is `consumer/schedule.rs`.

use super::partition::{FetchLayout, HeldAnswer, LayoutPart, PartId, PartState, ReadyBlob, Start};
use super::{Consumer, ConsumerEvent, LogStartAction, OffsetReset, TopicPartition, emit};
use crate::error::RequestError;
use crate::net::Reply;
use crate::offset_model::{self, EntryVerdict, Position};
use crate::refresh::Urgency;
use crate::shared::Shared;
use bytes::Bytes;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{FetchPartitionResponse, FetchResponse};
use stellflow_proto::{ErrorClass, ErrorCode, Reader, Wire};

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
                EntryVerdict::Deliver(offset) => {
                    blobs.push(self.take_blob((lp.id, tp), offset, records));
                }
                EntryVerdict::Duplicate => {}
                _ => break,
            }
        }
        (blobs, EntriesEnd::Read)
    }

    /// A blob at `offset` to deliver: `fetch_next` moves past it, and records already
    /// delivered of it (a mid-blob position) are skipped.
    fn take_blob(
        &mut self,
        (id, tp): (PartId, &TopicPartition),
        offset: i64,
        records: Bytes,
    ) -> ReadyBlob {
        let skip = if offset == self.delivered.offset {
            self.delivered.index
        } else {
            0
        };
        self.saw_blob(records.len());
        self.fetch_next = offset_model::next_after(offset);
        ReadyBlob::new((id, tp.clone()), offset, self.epoch, skip, records)
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
        for (_, parts) in layout.topics {
            let answered = topics.next();
            let mut entries = answered
                .map(|t| t.partitions)
                .unwrap_or_default()
                .into_iter();
            for lp in parts {
                let mine: Vec<_> = entries.by_ref().take(lp.count).collect();
                self.on_part_answer(now, lp, mine, sh);
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
        for (_, parts) in &layout.topics {
            for lp in parts {
                let Some((tp, p)) = self.parts.by_id_mut(lp.id) else {
                    continue;
                };
                if !p.answered(lp) {
                    continue;
                }
                let tp = tp.clone();
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
                        p.ask_alone = true;
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
        lp: LayoutPart,
        entries: Vec<FetchPartitionResponse>,
        sh: &mut Shared,
    ) {
        let id = lp.id;
        let Some((_, p)) = self.parts.by_id_mut(id) else {
            return;
        };
        // The epoch first: the id may have been given to another partition since.
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
            self.held_parts.insert(id);
            return;
        }
        let mut next = Some((lp, entries));
        while let Some((lp, entries)) = next.take() {
            if !self.apply_entries(now, &lp, entries, sh) {
                return;
            }
            next = self
                .parts
                .by_id_mut(id)
                .and_then(|(_, p)| {
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
        lp: &LayoutPart,
        entries: Vec<FetchPartitionResponse>,
        sh: &mut Shared,
    ) -> bool {
        let policy = self.config.auto_offset_reset;
        let backoff = (self.config.fetch_backoff, self.config.fetch_backoff_max);
        let Some((tp, p)) = self.parts.by_id_mut(lp.id) else {
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
        let restart = (end == EntriesEnd::RestartLatest).then(|| tp.clone());
        for b in blobs {
            self.largest_blob = b.size.max(self.largest_blob - self.largest_blob / 64);
            self.push_blob(b);
        }
        if let Some(tp) = restart {
            self.restart(&tp, Start::NeedsReset(OffsetReset::Latest));
        }
        whole
    }
}
