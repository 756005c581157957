//! The producer id (idempotence): asked for with InitProducerId before the first batch,
//! asked again after a backoff when that fails, and what batches are stamped with.

use super::{InFlight, Sender};
use crate::net::{Completion, Origin};
use crate::producer::DeliveryError;
use crate::producer::accumulator::Accumulator;
use crate::producer::batch::BatchStage;
use crate::producer::idempotence::PidState;
use crate::producer::outcomes::Outcomes;
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use std::time::Instant;
use stellflow_proto::messages::{InitProducerIdRequest, InitProducerIdResponse, RequestBody};
use stellflow_proto::rng::Rng;
use stellflow_proto::{ErrorCode, Reader, Wire};

impl Sender {
    /// What batches are stamped with: `Some(None)` without idempotence, `Some(Some(id,
    /// epoch))` once the producer id is known; `None` when nothing can be sent yet (the id
    /// is asked for when records wait) or ever (fenced: batches wait for their delivery
    /// timeout or the close).
    pub(super) fn stamp_base(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        acc: &Accumulator,
    ) -> Option<Option<(i64, i16)>> {
        let Some(i) = &self.idem else {
            return Some(None);
        };
        match i.pid {
            PidState::Ready { producer_id, epoch } => Some(Some((producer_id, epoch))),
            PidState::Fenced => None,
            _ => {
                if acc.has_records() {
                    self.request_pid(sh, now);
                }
                None
            }
        }
    }

    /// When the producer id is asked again after a failure, if records wait for it.
    pub(crate) fn pid_retry_at(&self, acc: &Accumulator) -> Option<Instant> {
        self.idem.as_ref().and_then(|i| match i.pid {
            PidState::Needed(Some(t)) if acc.has_records() => Some(t),
            _ => None,
        })
    }

    /// Asks for a producer id (idempotence), unless one is on its way.
    fn request_pid(&mut self, sh: &mut Shared, now: Instant) {
        let Some(idem) = &mut self.idem else {
            return;
        };
        match idem.pid {
            PidState::Needed(at) if at.is_none_or(|t| t <= now) => {}
            _ => return,
        }
        idem.pid = PidState::Requested;
        let seq = sh.net.submit(
            now,
            Target::Any,
            RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: None,
            }),
            None,
            Origin::Producer,
            &RequestOptions::default(),
        );
        self.inflight.insert(seq, InFlight::InitPid);
    }

    /// The InitProducerId answer: the id is known, or asked again after a backoff.
    pub(super) fn on_pid(
        &mut self,
        now: Instant,
        c: Completion,
        acc: &mut Accumulator,
        rng: &mut Rng,
    ) {
        let parsed = match c.result {
            Ok(reply) => reply.body.and_then(|b| {
                InitProducerIdResponse::decode(&mut Reader::new(b))
                    .ok()
                    .filter(|r| r.error_code == ErrorCode::NONE && r.producer_id >= 0)
            }),
            Err(_) => None,
        };
        let failures = self.idem.as_ref().map_or(1, |i| i.init_failures + 1);
        let backoff = self.retry_delay(failures, rng);
        let Some(idem) = &mut self.idem else {
            return;
        };
        match parsed {
            Some(r) => {
                idem.init_failures = 0;
                idem.pid = PidState::Ready {
                    producer_id: r.producer_id,
                    epoch: r.producer_epoch.max(0),
                };
            }
            None => {
                idem.init_failures += 1;
                idem.pid = PidState::Needed(Some(now + backoff));
            }
        }
        acc.set_identity(self.identity());
    }

    /// Fails, as "may have been written", every queued batch that was sent under an older
    /// producer id or epoch than `base` and never answered. It may already be in the log under
    /// its old stamp; re-sent under the new epoch, the broker would clear the producer's history
    /// (PROTOCOL.md §3.3.2) and write it a second time, a duplicate nobody is told about. The
    /// epoch moves on when another partition lost its sequence state (OUT_OF_ORDER_SEQUENCE).
    pub(super) fn fail_restamped_maybe_written(
        (producer_id, epoch): (i64, i16),
        acc: &mut Accumulator,
        out: &mut Outcomes,
    ) {
        // Only a suspect's queue can hold a batch possibly written.
        for i in 0..acc.suspects().len() {
            let Some(&(ti, pi)) = acc.suspects().get(i) else {
                break;
            };
            while let Some(ps) = acc.topics.part_mut(ti, pi)
                && let Some(batch) = ps.queue.pop_front_if(|b| {
                    b.maybe_written
                        && (b.stamp.producer_id != producer_id || b.stamp.epoch != epoch)
                })
            {
                let lost = DeliveryError::Broker {
                    code: ErrorCode::OUT_OF_ORDER_SEQUENCE,
                };
                acc.fail_batch(ti, pi, batch, lost, BatchStage::Closed, out);
                acc.touch(ti, pi);
            }
        }
    }
}
