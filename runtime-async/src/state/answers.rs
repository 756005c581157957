//! The core's events routed to the callers that wait for them: admin answers, single and
//! batch sends' outcomes, flushes, commits, closes, and the consumer's event log.

use super::{Events, Rebalance, State};
use crate::Error;
use crate::batch::Segment;
use stellflow_sansio::{
    ConsumerEvent, DeliveryError, DisconnectReason, Event, ProduceId, ProducedBatch, RecordMetadata,
};

impl State {
    pub(super) fn on_event(&mut self, event: Event) {
        match event {
            Event::Admin { id, result } => {
                if let Some(deliver) = self.admin.remove(&id) {
                    deliver(result);
                }
            }
            Event::Produced { id, result } => self.complete_record(id, result),
            Event::ProducedBatch(batch) => self.on_batch(&batch),
            Event::Flushed { id } => {
                if let Some(tx) = self.flushes.remove(&id) {
                    let _ = tx.send(());
                }
            }
            Event::ProducerClosed { failed } => self.producer_closed.finish(failed),
            Event::Connected { .. } => self.connect_error = None,
            Event::Disconnected {
                address,
                reason: DisconnectReason::ConnectFailed(e),
                ..
            } => self.connect_error = Some(format!("cannot connect to {address}: {e}")),
            Event::ConnectionError {
                address,
                error:
                    error @ (stellflow_sansio::ConnectionError::NotStellflow { .. }
                    | stellflow_sansio::ConnectionError::Negotiation(_)),
                ..
            } => self.connect_error = Some(format!("{address}: {error}")),
            Event::Consumer(ConsumerEvent::CommitCompleted { id, result, kind }) => {
                match self.commits.remove(&id) {
                    Some(tx) => drop(tx.send(result.map_err(Error::from))),
                    None => self.log(ConsumerEvent::CommitCompleted { id, result, kind }),
                }
            }
            Event::Consumer(ConsumerEvent::Closed) => {
                self.consumer_closed.finish(0);
                self.log(ConsumerEvent::Closed);
            }
            Event::Consumer(e) => {
                if self.listening {
                    let r = match &e {
                        ConsumerEvent::PartitionsRevoking { id, partitions } => {
                            Some(Rebalance::Revoking {
                                id: *id,
                                partitions: partitions.clone(),
                            })
                        }
                        ConsumerEvent::PartitionsRevoked(p) => Some(Rebalance::Revoked(p.clone())),
                        ConsumerEvent::PartitionsAssigned(p) => {
                            Some(Rebalance::Assigned(p.clone()))
                        }
                        ConsumerEvent::PartitionsLost(p) => Some(Rebalance::Lost(p.clone())),
                        _ => None,
                    };
                    self.rebalances.extend(r);
                }
                self.log(e)
            }
            _ => {}
        }
    }

    /// Hands every record of a batch the core reports at once its outcome: mostly records
    /// of `enqueue_all` batches (found by their run; the core batch becomes one entry of
    /// each call's outcome, no [`RecordMetadata`] is built), else single sends.
    fn on_batch(&mut self, batch: &ProducedBatch) {
        let segment = Segment {
            topic: batch.topic(),
            partition: batch.partition(),
            result: batch.result(),
        };
        let deliveries = &mut self.deliveries;
        let single = |id: ProduceId, i: usize| {
            if let Some(tx) = deliveries.remove(id.0)
                && let Some((_, result)) = batch.outcome(i)
            {
                drop(tx.send(result.map_err(Error::from)));
            }
        };
        self.batches
            .complete_batch(segment, batch.ids_with_timestamps(), single);
    }

    /// Hands one record its outcome: its place in an `enqueue_all` batch (found by its run),
    /// else its single send's slot.
    fn complete_record(&mut self, id: ProduceId, result: Result<RecordMetadata, DeliveryError>) {
        match self.batches.take_record(id.0) {
            Some((key, index)) => self.batches.complete(key, index, result),
            None => {
                if let Some(tx) = self.deliveries.remove(id.0) {
                    drop(tx.send(result.map_err(Error::from)));
                }
            }
        }
    }

    /// Keeps a consumer event for `Consumer::events`, dropping (and counting) the oldest one
    /// when [`Events::CAP`] are kept.
    fn log(&mut self, e: ConsumerEvent) {
        if self.events.len() == Events::CAP {
            self.events.pop_front();
            self.dropped_events += 1;
            if self.dropped_events == 1 {
                tracing::debug!("consumer events dropped: nobody reads Consumer::events");
            }
        }
        self.events.push_back(e);
    }
}
