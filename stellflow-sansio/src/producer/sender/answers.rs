//! The answers to the producer's requests: which request a completion belongs to, and what
//! the answer means for each batch of a Produce ([`Verdict`]).

use super::verdicts::Verdict;
use super::{InFlight, Sender, SentBatch};
use crate::error::RequestError;
use crate::net::{Completion, Net, Reply};
use crate::producer::accumulator::Accumulator;
use crate::producer::batch::Batch;
use crate::producer::outcomes::Outcomes;
use crate::producer::{Acks, DeliveryError};
use crate::shared::Shared;
use std::time::Instant;
use stellflow_proto::messages::{ProducePartitionResponse, ProduceResponse};
use stellflow_proto::rng::Rng;
use stellflow_proto::{ApiKey, ErrorClass, ErrorCode, Reader, Wire};

impl Sender {
    /// A request of the producer completed.
    pub(crate) fn on_completion(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        c: Completion,
        acc: &mut Accumulator,
        out: &mut Outcomes,
        rng: &mut Rng,
    ) {
        let Some(flight) = self.inflight.remove(&c.seq) else {
            return; // aborted (close) or unknown
        };
        acc.wake();
        match flight {
            InFlight::InitPid => self.on_pid(now, c, acc, rng),
            InFlight::Produce { sent, .. } => self.on_produce(sh, now, c, sent, (acc, out, rng)),
            InFlight::Probe { slot } => {
                // A failed probe (it took a request timeout or a lost connection, so this
                // cannot spin) is asked again while a batch still waits in doubt there; an
                // answered one resolved the doubt (the drain checks `answered_since`).
                if c.result.is_err()
                    && !self.closed
                    && let Some(conn) = Self::doubt_on(acc, slot)
                {
                    self.probe(now, &mut sh.net, slot, conn);
                }
            }
        }
    }

    fn on_produce(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        c: Completion,
        sent: Vec<SentBatch>,
        (acc, out, rng): (&mut Accumulator, &mut Outcomes, &mut Rng),
    ) {
        // Written and never answered: the broker may have written it, and (with idempotence)
        // may still be executing it.
        let unanswered = match &c.result {
            Err(RequestError::Timeout { .. } | RequestError::Disconnected { .. }) => c.sent_on,
            _ => None,
        };
        // A header-only 1 was answered (nothing still executes) but may follow a partial write.
        let partial = matches!(&c.result,
            Err(RequestError::Broker { code, .. }) if *code == ErrorCode::UNKNOWN_SERVER_ERROR);
        let mut doubt = None;
        let parsed = parse_produce(&sh.net, c.result);
        for mut s in sent {
            if let Some(ps) = acc.topics.part_mut(s.topic, s.part) {
                ps.in_flight = ps.in_flight.saturating_sub(1);
            }
            if s.batch.reported {
                // acks = 0: outcomes went out when it was sent; the answer is discarded.
                acc.release(s.topic, s.part, s.batch);
                acc.touch(s.topic, s.part);
                continue;
            }
            if partial {
                s.batch.maybe_written = true;
            }
            if let Some(on) = unanswered {
                s.batch.maybe_written = true;
                if self.idem.is_some() {
                    s.batch.in_doubt = Some(on);
                    doubt = Some(on);
                }
            }
            let verdict = self.verdict(&parsed, &s);
            let (ti, pi) = (s.topic, s.part);
            self.apply(sh, now, (ti, pi), s.batch, verdict, (acc, out, rng));
            acc.touch(ti, pi);
        }
        if let Some((slot, conn)) = doubt
            && Self::doubt_on(acc, slot).is_some()
        {
            self.probe(now, &mut sh.net, slot, conn);
        }
    }

    /// What to do with one batch of a Produce request given the request's answer: its
    /// partition's outcome in the answer, or the request's error.
    fn verdict(&self, parsed: &Result<ProduceResponse, RequestError>, s: &SentBatch) -> Verdict {
        match parsed {
            Ok(r) => match r
                .responses
                .get(s.tpos)
                .and_then(|t| t.partitions.get(s.ppos))
            {
                Some(pr) => self.classify(pr, &s.batch),
                None => Verdict::Retry {
                    refresh: false,
                    error: DeliveryError::Request(RequestError::Decode {
                        api_key: ApiKey::PRODUCE,
                        error: stellflow_proto::DecodeError::invalid(
                            "ProduceResponse",
                            "a partition of the request is missing from the answer",
                        ),
                    }),
                },
            },
            Err(e) if matches!(e, RequestError::Broker { code, .. } if *code == ErrorCode::UNKNOWN_SERVER_ERROR) =>
            {
                // Header-only 1: the request may have been partly applied. Not retried
                // (a retry could duplicate); the caller decides.
                Verdict::Fail(DeliveryError::Request(e.clone()))
            }
            Err(e) if e.is_retriable() => Verdict::Retry {
                refresh: e.wants_metadata_refresh(),
                error: DeliveryError::Request(e.clone()),
            },
            Err(e) => Verdict::Fail(DeliveryError::Request(e.clone())),
        }
    }

    /// What one partition's answer means for its batch.
    fn classify(&self, pr: &ProducePartitionResponse, batch: &Batch) -> Verdict {
        let code = pr.error_code;
        let idempotent = self.idem.is_some();
        match code {
            ErrorCode::NONE => Verdict::Written(pr.base_offset),
            // Never sent by today's server; the server table says "treat as success".
            ErrorCode::DUPLICATE_SEQUENCE if pr.base_offset >= 0 => {
                Verdict::Written(pr.base_offset)
            }
            ErrorCode::BROKER_NOT_AVAILABLE
                if self.cfg.acks == Acks::All && pr.base_offset >= 0 =>
            {
                Verdict::NotReplicated(pr.base_offset)
            }
            ErrorCode::OUT_OF_ORDER_SEQUENCE if idempotent => Verdict::LostState,
            // The broker bound our producer id to another producer key (PROTOCOL.md §3.3.2):
            // no retry can succeed with this identity.
            ErrorCode::CONCURRENT_TRANSACTIONS if idempotent => {
                Verdict::Fail(DeliveryError::ProducerIdConflict)
            }
            ErrorCode::FENCED_INSTANCE_ID if idempotent => {
                let current = (self.idem.as_ref())
                    .and_then(|i| i.current())
                    .map_or(i16::MIN, |(_, e)| e);
                if batch.stamp.epoch < current {
                    // Our own epoch bump overtook this batch: resend it with the new epoch.
                    Verdict::Retry {
                        refresh: false,
                        error: DeliveryError::Broker { code },
                    }
                } else {
                    Verdict::Fail(DeliveryError::Fenced)
                }
            }
            _ => match code.class() {
                ErrorClass::RefreshMetadataAndRetry => Verdict::Retry {
                    refresh: true,
                    error: DeliveryError::Broker { code },
                },
                ErrorClass::RetryAfterBackoff => Verdict::Retry {
                    refresh: false,
                    error: DeliveryError::Broker { code },
                },
                _ => Verdict::Fail(DeliveryError::Broker { code }),
            },
        }
    }
}

/// A Produce request's answer decoded, or why there is none: the request's error, a header
/// that carries one (a header-only answer), or a body that does not decode.
fn parse_produce(
    net: &Net,
    result: Result<Reply, RequestError>,
) -> Result<ProduceResponse, RequestError> {
    match result {
        Ok(reply) => match reply.body {
            Some(b) => {
                ProduceResponse::decode(&mut Reader::new(b)).map_err(|error| RequestError::Decode {
                    api_key: ApiKey::PRODUCE,
                    error,
                })
            }
            None => Err(RequestError::Broker {
                api_key: ApiKey::PRODUCE,
                code: reply.header.error_code,
                address: net
                    .address(reply.slot)
                    .cloned()
                    .unwrap_or_else(|| crate::address::BrokerAddress::new("", 0)),
            }),
        },
        Err(e) => Err(e),
    }
}
