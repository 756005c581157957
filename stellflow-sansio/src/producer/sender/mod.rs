//! The sender: drains ready batches per leader broker into Produce requests, keeps the
//! requests in flight, and turns their answers into outcomes, retries, metadata refreshes
//! and idempotence recovery.
//!
//! * A batch is ready when it is full, its linger expired, a flush or close asks for it, the
//!   buffer refused a record (and none was taken since), or it waits for a retry whose
//!   backoff has passed ([`Accumulator::ready`]); it goes out only while its partition has
//!   fewer than `max_in_flight_per_partition` requests in flight (1 by default) and its
//!   leader is known.
//! * All ready batches for one leader go into one request (several partitions, one blob each),
//!   split only at `max_request_size`.
//! * A retried batch goes back to the front of its partition's queue, so records of a
//!   partition are never reordered (with the default of one request in flight).
//! * A request written and never answered (timed out, or its connection died) may have been
//!   written: its batches fail, if they fail at all, with [`DeliveryError::MaybeWritten`],
//!   never as "not delivered" (DESIGN §3 item 14). Without idempotence they are retried at
//!   once after the backoff (at-least-once: the log may then hold them twice).
//! * With idempotence a retry never runs while the request it replaces may still be
//!   executing on the broker: the in-doubt rule ([`in_doubt`]).
//!
//! The sending half is here; the answers ([`answers`]: what each batch's answer means),
//! what is done with them ([`verdicts`]: written, retried, failed, fatal), the in-doubt rule
//! and the producer id ([`producer_id`]) each have their file.

mod answers;
mod in_doubt;
mod producer_id;
mod verdicts;

use super::accumulator::Accumulator;
use super::batch::{Batch, BatchStage};
use super::idempotence::{Idempotence, Identity, PidState, Stamp, restamp};
use super::outcomes::Outcomes;
use super::{Acks, DeliveryError, ProducerConfig};
use crate::net::{Net, Origin};
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    ProducePartitionData, ProduceRequest, ProduceTopicData, RequestBody,
};
use stellflow_proto::rng::Rng;

/// A batch inside a Produce request, with its position in the request.
#[derive(Debug)]
struct SentBatch {
    topic: usize,
    part: usize,
    /// Its topic's index in the request, and its own inside that topic.
    tpos: usize,
    ppos: usize,
    batch: Batch,
}

/// What a batch's answer settles into: the accumulator (its partition's queue, the
/// memory), the outcomes, and the random source of the retry jitter.
type Parts<'a> = (&'a mut Accumulator, &'a mut Outcomes, &'a mut Rng);

/// A request of the producer in flight.
#[derive(Debug)]
enum InFlight {
    /// A Produce to broker `leader` carrying these batches.
    Produce { leader: i32, sent: Vec<SentBatch> },
    /// InitProducerId (idempotence).
    InitPid,
    /// A round trip to broker slot `slot` on a fresh connection, asked for batches in doubt
    /// there.
    Probe { slot: usize },
}

/// The producer's requests in flight, its idempotence state, and its fatal error.
#[derive(Debug)]
pub(crate) struct Sender {
    /// The producer's settings (read only).
    cfg: ProducerConfig,
    /// How long a Produce is waited for.
    request_timeout: Duration,
    /// The producer id and epoch (idempotence on).
    idem: Option<Idempotence>,
    /// Requests in flight, by sequence number.
    inflight: HashMap<u64, InFlight>,
    /// `(leader, topic, partition)` of the ready partitions (reused).
    picks: Vec<(i32, usize, usize)>,
    /// A fatal producer error (fenced, producer id bound elsewhere): every record without an
    /// outcome fails with it, and `produce` refuses new ones.
    fatal: Option<DeliveryError>,
    /// The producer closed: no more probes for batches in doubt.
    closed: bool,
}

impl Sender {
    /// A sender for `cfg` (already validated); `request_timeout` is the client's.
    pub(crate) fn new(cfg: ProducerConfig, request_timeout: Duration) -> Self {
        // A Produce with acks=-1 may legitimately take `ack_timeout` at the broker.
        let request_timeout = if cfg.acks == Acks::All {
            request_timeout.max(cfg.ack_timeout + Duration::from_secs(1))
        } else {
            request_timeout
        };
        Sender {
            idem: cfg.idempotence.then(Idempotence::default),
            cfg,
            request_timeout,
            inflight: HashMap::new(),
            picks: Vec::new(),
            fatal: None,
            closed: false,
        }
    }

    /// The producer closed: nothing more is asked of the brokers.
    pub(crate) fn stop(&mut self) {
        self.closed = true;
    }

    /// The producer id batches are stamped with.
    pub(crate) fn identity(&self) -> Identity {
        Identity::of(self.idem.as_ref())
    }

    /// Whether the producer is fenced or otherwise fatal: it takes no more records.
    pub(crate) fn fenced(&self) -> bool {
        self.fatal.is_some()
            || self
                .idem
                .as_ref()
                .is_some_and(|i| i.pid == PidState::Fenced)
    }

    /// The smallest id of a record in flight without an outcome (`u64::MAX` if none).
    pub(crate) fn min_outstanding(&self) -> u64 {
        let mut min = u64::MAX;
        for f in self.inflight.values() {
            if let InFlight::Produce { sent, .. } = f {
                for s in sent {
                    if !s.batch.reported {
                        min = min.min(s.batch.first_id());
                    }
                }
            }
        }
        min
    }

    /// Sends every ready batch whose leader is known; returns whether it sent any.
    /// `closing`: the producer closes, so open batches go without their linger.
    pub(crate) fn drain(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        acc: &mut Accumulator,
        out: &mut Outcomes,
        closing: bool,
    ) -> bool {
        // 1. Batches are stamped with the producer id, so idempotence must have one.
        self.resolve_doubts(&sh.net, acc);
        let Some(stamp_base) = self.stamp_base(sh, now, acc) else {
            return false;
        };
        if let Some(base) = stamp_base {
            Self::fail_restamped_maybe_written(base, acc, out);
        }
        // 2. The partitions with a batch ready to go, sorted by leader.
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        acc.ready(now, closing, &mut picks);
        if picks.is_empty() {
            self.picks = picks;
            return false;
        }
        picks.sort_unstable();
        // 3. One Produce request per leader, as large as `max_request_size` allows.
        let mut i = 0;
        while let Some(&(leader, _, _)) = picks.get(i) {
            let batches = self.take_for_leader(acc, out, leader, &picks, &mut i, stamp_base);
            if !batches.1.is_empty() {
                self.submit(sh, now, acc, out, leader, batches);
            }
        }
        self.picks = picks;
        // Another batch of the same partition may be ready behind the one just sent.
        if self.cfg.max_in_flight_per_partition > 1 {
            acc.wake();
        }
        true
    }

    /// Takes the ready batches of `picks` for `leader` from `*i` on (all of that leader's,
    /// up to `max_request_size`), moving `*i` past those taken: the request's topics and
    /// the batches in it.
    fn take_for_leader(
        &mut self,
        acc: &mut Accumulator,
        out: &mut Outcomes,
        leader: i32,
        picks: &[(i32, usize, usize)],
        i: &mut usize,
        stamp_base: Option<(i64, i16)>,
    ) -> (Vec<ProduceTopicData>, Vec<SentBatch>) {
        let max_size = self.cfg.max_request_size;
        let mut topic_data: Vec<ProduceTopicData> = Vec::new();
        let mut sent: Vec<SentBatch> = Vec::new();
        let mut size = 0usize;
        while let Some(&(l, ti, pi)) = picks.get(*i) {
            if l != leader {
                break;
            }
            let est = acc.topics.ready_size(ti, pi);
            if !sent.is_empty() && size + est > max_size {
                break;
            }
            *i += 1;
            let Some(batch) = self.take_stamped(acc, out, ti, pi, stamp_base) else {
                continue;
            };
            size += batch.blob.len();
            let Some(t) = acc.topics.get(ti) else {
                continue;
            };
            if sent.last().is_none_or(|s| s.topic != ti) {
                topic_data.push(ProduceTopicData {
                    topic: Some(t.wire_name.clone()),
                    partitions: Vec::new(),
                });
            }
            let tpos = topic_data.len() - 1;
            let Some(td) = topic_data.last_mut() else {
                continue;
            };
            td.partitions.push(ProducePartitionData {
                partition: i32::try_from(pi).unwrap_or(0),
                records: Some(batch.blob.clone()),
            });
            let ppos = td.partitions.len() - 1;
            sent.push(SentBatch {
                topic: ti,
                part: pi,
                tpos,
                ppos,
                batch,
            });
        }
        (topic_data, sent)
    }

    /// Takes partition `(ti, pi)`'s next batch to send, stamped with the producer id, epoch
    /// and the partition's next sequence (idempotence; re-encoded when its guess was wrong).
    fn take_stamped(
        &mut self,
        acc: &mut Accumulator,
        out: &mut Outcomes,
        ti: usize,
        pi: usize,
        base: Option<(i64, i16)>,
    ) -> Option<Batch> {
        let mut batch = acc.take_next(ti, pi, out)?;
        let Some((producer_id, epoch)) = base else {
            acc.touch(ti, pi);
            return Some(batch);
        };
        let ps = acc.topics.part_mut(ti, pi)?;
        let want = Stamp {
            producer_id,
            epoch,
            sequence: ps.seq.for_epoch(epoch),
        };
        if batch.stamp != want {
            match restamp(&batch.blob, want, self.cfg.gzip_level) {
                Ok(blob) => {
                    batch.blob = blob;
                    batch.stamp = want;
                }
                Err(e) => {
                    ps.in_flight -= 1;
                    let e = DeliveryError::Encode(e.to_string());
                    acc.fail_batch(ti, pi, batch, e, BatchStage::Closed, out);
                    acc.touch(ti, pi);
                    return None;
                }
            }
        }
        acc.touch(ti, pi);
        Some(batch)
    }

    /// Submits one Produce request to `leader`; with acks = 0 its records succeed now.
    fn submit(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        acc: &Accumulator,
        out: &mut Outcomes,
        leader: i32,
        (topic_data, mut sent): (Vec<ProduceTopicData>, Vec<SentBatch>),
    ) {
        let acks = self.cfg.acks;
        let req = ProduceRequest {
            transactional_id: None,
            acks: acks.wire(),
            timeout_ms: i32::try_from(self.cfg.ack_timeout.as_millis()).unwrap_or(i32::MAX),
            topic_data,
        };
        let opts = RequestOptions {
            trace: (sent.iter())
                .find_map(|s| s.batch.trace.as_ref())
                .map(crate::request::TraceContext::from),
            timeout: Some(self.produce_timeout(now, &sent)),
        };
        let net = &mut sh.net;
        let seq = net.submit(
            now,
            Target::Broker(leader),
            RequestBody::Produce(req),
            None,
            Origin::Producer,
            &opts,
        );
        if self.idem.is_some() {
            net.await_late_answer(seq);
        }
        net.counters.producer_batches += sent.len() as u64;
        if acks == Acks::None {
            Self::report_unacknowledged(net, acc, out, &mut sent);
        }
        self.inflight
            .insert(seq, InFlight::Produce { leader, sent });
    }

    /// How long a Produce carrying `sent` is waited for. Without idempotence not past its
    /// batches' delivery deadline (Kafka's delivery.timeout.ms bounds in-flight batches too);
    /// with it, the request must run its course (the retry rule, ARCHITECTURE decision 4).
    fn produce_timeout(&self, now: Instant, sent: &[SentBatch]) -> Duration {
        let left = (sent.iter())
            .map(|s| s.batch.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(self.request_timeout)
            .max(Duration::from_millis(1));
        match self.idem {
            Some(_) => self.request_timeout,
            None => self.request_timeout.min(left),
        }
    }

    /// acks = 0: every record of `sent` succeeds (without an offset) as it is sent, once.
    fn report_unacknowledged(
        net: &mut Net,
        acc: &Accumulator,
        out: &mut Outcomes,
        sent: &mut [SentBatch],
    ) {
        for s in sent {
            if s.batch.reported {
                continue; // re-routed: its outcomes went out the first time
            }
            let Some(t) = acc.topics.get(s.topic) else {
                continue;
            };
            let partition = i32::try_from(s.part).unwrap_or(0);
            out.report(&t.name, partition, &s.batch.records, Ok(None));
            net.counters.producer_records += s.batch.records.len() as u64;
            let (n, bytes) = (s.batch.records.len(), s.batch.bytes);
            crate::metrics::emit::produced(&mut net.counters, &t.name, n, bytes);
            s.batch.reported = true;
        }
    }

    /// Re-routes Produce requests whose partitions moved (metadata named another leader, or
    /// none) while the request still waited unsent — parked for an unknown broker or queued
    /// behind a connection that is down or busy. Such a request is withdrawn from the router
    /// and its batches go back to the front of their partitions' queues (in serial order,
    /// unchanged: same bytes, same idempotent sequence, no attempt counted), so the next drain
    /// sends them to the new leader at once instead of after the request timeout. Nothing of
    /// a withdrawn request reached a broker, so this can neither duplicate nor reorder (it is
    /// skipped while an earlier batch of one of its partitions is in flight). A request
    /// already written is left alone: its answer, disconnect or timeout decides.
    pub(crate) fn reroute(&mut self, sh: &mut Shared, acc: &mut Accumulator) {
        let mut stale: Vec<u64> = Vec::new();
        for (seq, f) in &self.inflight {
            // Only when this request is its partitions' sole one in flight: with several per
            // partition, an earlier batch already on the wire to the old leader would fail
            // and be retried after the re-routed later one.
            if let InFlight::Produce { leader, sent } = f
                && sent.iter().any(|s| {
                    (acc.topics.part(s.topic, s.part)).is_none_or(|ps| ps.leader != Some(*leader))
                })
                && sent
                    .iter()
                    .all(|s| (acc.topics.part(s.topic, s.part)).is_none_or(|ps| ps.in_flight <= 1))
            {
                stale.push(*seq);
            }
        }
        stale.sort_unstable(); // deterministic whatever the map's order
        for seq in stale {
            if !sh.net.cancel_unsent(seq) {
                continue;
            }
            let Some(InFlight::Produce { sent, .. }) = self.inflight.remove(&seq) else {
                continue;
            };
            for s in sent {
                if let Some(ps) = acc.topics.part_mut(s.topic, s.part) {
                    ps.in_flight = ps.in_flight.saturating_sub(1);
                }
                acc.requeue(s.topic, s.part, s.batch);
            }
            acc.wake();
        }
    }

    /// Forgets every request in flight (their answers are ignored) and hands back their
    /// batches, marked as possibly written when their request was written; an InitProducerId
    /// in flight is asked again later.
    pub(crate) fn abandon(
        &mut self,
        net: &Net,
        batches: &mut Vec<(usize, usize, Batch, BatchStage)>,
    ) {
        for (seq, f) in self.inflight.drain() {
            if let InFlight::Produce { sent, .. } = f {
                // Written and never answered: they may have been written.
                let written = net.was_written(seq);
                batches.extend(sent.into_iter().map(|mut s| {
                    s.batch.maybe_written |= written;
                    (s.topic, s.part, s.batch, BatchStage::Closed)
                }));
            }
        }
        if let Some(i) = &mut self.idem
            && i.pid == PidState::Requested
        {
            i.pid = PidState::Needed(None);
        }
    }
}
