//! Assignment and positions: partitions added and removed, seeks, resets, handovers to
//! another member and pauses, and the position and lag they read.

use super::partition::{PartId, PartState, ReadyBlob, Start};
use super::{Consumer, TopicPartition};
use crate::offset_model::Position;

/// Which way [`Consumer::set_paused`] turns a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pausing {
    /// No fetching, no delivery; buffered blobs are held aside.
    Pause,
    /// Fetching and delivery go on, the held blobs first.
    Resume,
}
use std::collections::{HashSet, VecDeque};
use std::time::Duration;

impl Consumer {
    /// A new epoch: answers asked for under an older one are dropped.
    pub(crate) fn bump_epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    /// The assigned partitions that `wanted` does not name, in name order (one pass over
    /// each, whatever their sizes).
    pub(crate) fn not_wanted(&self, wanted: &[TopicPartition]) -> Vec<TopicPartition> {
        let wanted: HashSet<&TopicPartition> = wanted.iter().collect();
        (self.parts.keys())
            .filter(|tp| !wanted.contains(tp))
            .cloned()
            .collect()
    }

    /// Replaces the assignment; returns (revoked, added).
    pub(crate) fn set_assignment(
        &mut self,
        wanted: &[TopicPartition],
    ) -> (Vec<TopicPartition>, Vec<TopicPartition>) {
        let revoked = self.not_wanted(wanted);
        self.remove_partitions(&revoked);
        let mut added = Vec::new();
        for tp in wanted {
            if !self.parts.contains_key(tp) {
                let e = self.bump_epoch();
                self.parts.insert(tp.clone(), PartState::new(e));
                added.push(tp.clone());
            }
        }
        (revoked, added)
    }

    /// Unassigns `gone` with their queued and parked blobs: one pass over the delivery queue
    /// for all of them, not one per partition.
    fn remove_partitions(&mut self, gone: &[TopicPartition]) {
        let ids: HashSet<PartId> = gone.iter().filter_map(|tp| self.parts.id_of(tp)).collect();
        if ids.is_empty() {
            return;
        }
        let mut freed = 0;
        self.ready.retain(|b| {
            let keep = !ids.contains(&b.part);
            if !keep {
                freed += b.size;
            }
            keep
        });
        for tp in gone {
            self.processed.forget(tp);
            if let Some(p) = self.parts.remove(tp) {
                freed += p.parked.iter().map(|b| b.size).sum::<usize>();
            }
        }
        self.release(freed);
    }

    /// Moves `tp` to `position`: drops what was fetched, invalidates fetches in flight.
    pub(crate) fn reposition(&mut self, tp: &TopicPartition, position: Position) {
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            p.epoch = e;
            p.delivered = position;
            p.fetch_next = position.offset;
            p.start = Start::Ready;
            p.seek_trace = None;
            p.in_flight = 0;
            p.break_pipeline();
            p.not_before = None;
            p.empty_backoff = Duration::ZERO;
            self.fetch_wake = true;
        }
    }

    /// Stops `tp` for a handover to another group member: its undelivered records are
    /// dropped, fetches in flight are ignored when they answer, nothing more is fetched, and
    /// its position (mid-blob included) stays what was delivered, for the commit that comes
    /// before the release.
    pub(crate) fn stop_for_handover(&mut self, tp: &TopicPartition) {
        let position = self.position(tp);
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            if let Some(pos) = position {
                p.delivered = pos;
            }
            p.epoch = e;
            p.in_flight = 0;
            p.break_pipeline();
            p.handing_over = true;
        }
    }

    /// Sets `tp` back to start resolution `start` (seek to beginning/end/committed).
    pub(crate) fn restart(&mut self, tp: &TopicPartition, start: Start) {
        self.drop_ready(tp);
        let e = self.bump_epoch();
        if let Some(p) = self.parts.get_mut(tp) {
            p.epoch = e;
            p.start = start;
            p.in_flight = 0;
            p.break_pipeline();
            p.retry_at = None;
        }
    }

    /// The position of `tp`, counting records delivered from a partly consumed blob.
    pub(crate) fn position(&self, tp: &TopicPartition) -> Option<Position> {
        let id = self.parts.id_of(tp)?;
        let (_, p) = self.parts.by_id(id)?;
        if !matches!(p.start, Start::Ready) {
            return None;
        }
        // Only the queue's front blob can be partly taken (records are taken from the front):
        // any other blob of this partition starts where its position says.
        let front = if p.paused {
            p.parked.front()
        } else {
            self.ready.front().filter(|b| b.part == id)
        };
        match front {
            Some(b) if b.offset == p.delivered.offset && b.epoch == p.epoch => {
                Some(Position::new(b.offset, b.progress()))
            }
            _ => Some(p.delivered),
        }
    }

    /// Every positioned partition with its position.
    pub(crate) fn positions(&self) -> Vec<(TopicPartition, Position)> {
        self.parts
            .keys()
            .filter_map(|tp| self.position(tp).map(|p| (tp.clone(), p)))
            .collect()
    }

    /// Pauses or resumes `tp`; its buffered blobs are held aside meanwhile.
    pub(crate) fn set_paused(&mut self, tp: &TopicPartition, pausing: Pausing) {
        let paused = pausing == Pausing::Pause;
        let Some(id) = self.parts.id_of(tp) else {
            return;
        };
        let Some((_, p)) = self.parts.by_id_mut(id) else {
            return;
        };
        if p.paused == paused {
            return;
        }
        p.paused = paused;
        if paused {
            let (mine, rest): (VecDeque<ReadyBlob>, VecDeque<ReadyBlob>) =
                std::mem::take(&mut self.ready)
                    .into_iter()
                    .partition(|b| b.part == id);
            self.ready = rest;
            p.parked = mine;
        } else {
            self.ready.extend(p.parked.drain(..));
            self.fetch_wake = true;
        }
    }

    /// Lag of `tp`: high watermark − position, from the latest fetch.
    pub(crate) fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        let hw = self.parts.get(tp)?.high_watermark?;
        let pos = self.position(tp)?;
        Some((hw - pos.offset).max(0))
    }
}
