//! The processed-position store: what the application marked as processed
//! ([`crate::Client::mark_processed`], rdkafka's `store_offset`), and the one answer to "which
//! positions does a commit take now" ([`Consumer::positions_to_commit`]).
//!
//! By default every delivered record counts as processed: a commit takes the consumer's
//! positions (the first record not yet delivered, mid-blob included). With
//! [`crate::ConsumerConfig::commit_marked_only`] (Kafka: `enable.auto.offset.store=false`),
//! commits — the auto-commit timer, the commit before partitions are revoked, the commit on
//! close, and [`crate::Client::commit`] / [`crate::Client::commit_async`] — take only the
//! positions marked here: a record delivered but not marked (its outputs not acknowledged
//! yet, say) is read again after a restart, never skipped.
//!
//! A mark is the position right after the marked record ([`ConsumerRecord::next_position`]),
//! so it is exact in the middle of a blob. Marks only move forward: marking a record marks
//! every earlier record of its partition, and marking an earlier record after a later one
//! changes nothing (mark in delivery order per partition). A partition's mark is forgotten
//! when the partition is revoked or sought (it starts over from the new position).

use super::{Consumer, ConsumerError, ConsumerRecord, Position, TopicPartition};
use std::collections::BTreeMap;

/// The marked positions of the assigned partitions.
#[derive(Debug, Default)]
pub(crate) struct Processed {
    marks: BTreeMap<TopicPartition, Position>,
}

impl Processed {
    /// Forgets the mark of `tp` (revoked, or moved by a seek).
    pub(crate) fn forget(&mut self, tp: &TopicPartition) {
        self.marks.remove(tp);
    }
}

impl Consumer {
    /// Marks everything of `tp` before `position` as processed. Errors when marking is off
    /// ([`crate::ConsumerConfig::commit_marked_only`] unset: a mark would be ignored) or `tp`
    /// is not assigned.
    pub(crate) fn mark(
        &mut self,
        tp: &TopicPartition,
        position: Position,
    ) -> Result<(), ConsumerError> {
        if !self.config.commit_marked_only {
            return Err(ConsumerError::MarkingOff);
        }
        if !self.parts.contains_key(tp) {
            return Err(ConsumerError::NotAssigned(tp.clone()));
        }
        match self.processed.marks.get_mut(tp) {
            Some(mark) => *mark = (*mark).max(position),
            None => drop(self.processed.marks.insert(tp.clone(), position)),
        }
        Ok(())
    }

    /// Marks `record` (and every earlier record of its partition) as processed.
    pub(crate) fn mark_record(&mut self, record: &ConsumerRecord) -> Result<(), ConsumerError> {
        self.mark(&record.topic_partition(), record.next_position())
    }

    /// The marked position of `tp`, if any.
    pub(crate) fn marked(&self, tp: &TopicPartition) -> Option<Position> {
        self.processed.marks.get(tp).copied()
    }

    /// The position a commit takes for `tp` now: its mark with
    /// [`crate::ConsumerConfig::commit_marked_only`], else its position (`None` when there
    /// is nothing to commit for it).
    pub(crate) fn commit_position(&self, tp: &TopicPartition) -> Option<Position> {
        if self.config.commit_marked_only {
            self.parts.get(tp)?;
            self.marked(tp)
        } else {
            self.position(tp)
        }
    }

    /// The positions a commit takes now, for every assigned partition that has one: what was
    /// marked with [`crate::ConsumerConfig::commit_marked_only`], else what was delivered.
    /// Every commit the consumer makes on its own (auto-commit, revocation, close) and
    /// [`crate::Client::commit`] take their positions from here.
    pub(crate) fn positions_to_commit(&self) -> Vec<(TopicPartition, Position)> {
        if !self.config.commit_marked_only {
            return self.positions();
        }
        self.parts
            .keys()
            .filter_map(|tp| self.commit_position(tp).map(|p| (tp.clone(), p)))
            .collect()
    }

    /// [`Consumer::positions_to_commit`] without the partitions whose position is committed
    /// already.
    pub(crate) fn uncommitted_positions(&self) -> Vec<(TopicPartition, Position)> {
        self.positions_to_commit()
            .into_iter()
            .filter(|(tp, pos)| {
                self.parts
                    .get(tp)
                    .is_some_and(|p| p.committed != Some(*pos))
            })
            .collect()
    }
}
