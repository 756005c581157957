//! Delivery outcomes: the producer's events waiting for the driver — one
//! [`Event::Produced`] per record (or one [`Event::ProducedBatch`] per batch when the driver
//! asked for that), [`Event::Flushed`] per flush, and [`Event::ProducerClosed`] once.

use super::batch::BatchRecord;
use super::{DeliveryError, FlushId, ProduceId, ProducedBatch, RecordMetadata};
use crate::event::Event;
use std::collections::VecDeque;
use std::sync::Arc;

/// The producer's event queue, and the flushes waiting for their records' outcomes.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    events: VecDeque<Event>,
    /// Outcomes go out one [`Event::ProducedBatch`] per batch (`Client::set_batch_outcomes`).
    pub(crate) batch_outcomes: bool,
    /// Flushes not finished: `(flush id, first record id not covered)`.
    flushes: VecDeque<(u64, u64)>,
    /// The last flush id handed out.
    last_flush: u64,
}

impl Outcomes {
    /// The next event for the driver.
    #[inline]
    pub(crate) fn poll(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Reports the outcome of every record of a batch of `topic`'s `partition`: one
    /// [`Event::Produced`] per record, or one [`Event::ProducedBatch`] for all of them when
    /// the driver asked for that. `Ok(None)` is a success without an offset (acks = 0).
    pub(crate) fn report(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        records: &[BatchRecord],
        result: Result<Option<i64>, DeliveryError>,
    ) {
        if records.is_empty() {
            return;
        }
        if self.batch_outcomes {
            self.events.push_back(Event::ProducedBatch(ProducedBatch {
                topic: topic.clone(),
                partition,
                result,
                records: records.iter().map(|s| (s.id, s.timestamp)).collect(),
            }));
            return;
        }
        for (index, record) in records.iter().enumerate() {
            let result = match &result {
                Ok(offset) => Ok(RecordMetadata {
                    topic: topic.clone(),
                    partition,
                    offset: *offset,
                    index: index as u32,
                    timestamp: record.timestamp,
                }),
                Err(e) => Err(e.clone()),
            };
            self.events.push_back(Event::Produced {
                id: ProduceId(record.id),
                result,
            });
        }
    }

    /// One failure event for record `id` (a record outside any batch, or of a topic the
    /// producer no longer knows).
    pub(crate) fn fail_record(&mut self, id: u64, error: DeliveryError) {
        self.events.push_back(Event::Produced {
            id: ProduceId(id),
            result: Err(error),
        });
    }

    /// Starts a flush covering every record id below `upto`.
    pub(crate) fn start_flush(&mut self, upto: u64) -> FlushId {
        self.last_flush += 1;
        self.flushes.push_back((self.last_flush, upto));
        FlushId(self.last_flush)
    }

    /// Whether a flush waits.
    pub(crate) fn flushing(&self) -> bool {
        !self.flushes.is_empty()
    }

    /// Ends every flush whose records all have their outcome: `min` is the smallest id of a
    /// record without one (`u64::MAX` if none).
    pub(crate) fn end_flushes(&mut self, min: u64) {
        while let Some(&(id, upto)) = self.flushes.front() {
            if min < upto {
                break;
            }
            self.flushes.pop_front();
            self.events.push_back(Event::Flushed { id: FlushId(id) });
        }
    }

    /// Ends every flush now (the producer is aborted: every record has its outcome).
    pub(crate) fn end_all_flushes(&mut self) {
        while let Some((id, _)) = self.flushes.pop_front() {
            self.events.push_back(Event::Flushed { id: FlushId(id) });
        }
    }

    /// The producer is closed; `failed` records failed in its close.
    pub(crate) fn closed(&mut self, failed: u64) {
        self.events.push_back(Event::ProducerClosed { failed });
    }
}
