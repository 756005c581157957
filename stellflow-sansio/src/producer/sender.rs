//! The sender: drains ready batches per leader broker into Produce requests and turns the
//! answers into outcomes, retries, metadata refreshes and idempotence recovery.
//!
//! * A batch is ready when it is full, its linger expired, a flush or close asks for it, the
//!   buffer refused a record (and none was taken since), or it waits for a retry whose
//!   backoff has passed; it goes out only while its partition has fewer
//!   than `max_in_flight_per_partition` requests in flight (1 by default) and its leader is
//!   known.
//! * All ready batches for one leader go into one request (several partitions, one blob each),
//!   split only at `max_request_size`.
//! * A retried batch goes back to the front of its partition's queue, so records of a
//!   partition are never reordered (with the default of one request in flight).
//! * A request written and never answered (timed out, or its connection died) may have been
//!   written: its batches fail, if they fail at all, with [`DeliveryError::MaybeWritten`],
//!   never as "not delivered" (DESIGN §3 item 14). Without idempotence they are retried at
//!   once after the backoff (at-least-once: the log may then hold them twice).
//! * With idempotence a retry never runs while the request it replaces may still be
//!   executing on the broker (the server checks sequences racily, PROTOCOL.md §3.3.2): a
//!   timed-out Produce keeps waiting for its late answer on its connection (up to
//!   [`crate::net::LATE_TIMEOUTS_TO_CLOSE`] request timeouts); if the connection is lost or
//!   given up, its batches stay *in doubt* until the broker has answered on a newer
//!   connection (a probe asks for that round trip) and [`DOUBT_SETTLE`] has passed — the
//!   broker takes requests of all connections from one FIFO queue, so a late original that
//!   reached it was taken before (or, read on another I/O thread after a freeze, about when)
//!   the fresh connection's first request; the settle covers its check, flushed append and
//!   sequence record, which nothing on the broker orders before a later request; an
//!   `acks = -1` batch of a replicated partition waits the ack timeout longer, the time the
//!   broker may hold its original for the followers before recording its sequence — and
//!   only then are they
//!   re-sent, in order, with the same sequence numbers, which the broker answers as a
//!   duplicate with the original offset if the first attempt was written.
//!
//! Why one file of ~900 lines: it is one state machine, a batch's life from ready to settled
//! (in flight, answered, retried, in doubt, failed), and its two rules — never reorder a
//! partition, never retry while the first attempt may still run — each hold only across both
//! halves: the sending half (`drain` to `request_pid`: ready batches, doubts and probes, the
//! requests) sets what the answering half (`on_completion` to the end: outcomes, retries,
//! recovery) relies on, and the other way round. Read it top to bottom in that order.

use super::accumulator::{Batch, BatchStage, Slot};
use super::idempotence::{PidState, Stamp, restamp};
use super::{Acks, DeliveryError, ProducedBatch, RecordMetadata};
use super::{Flight, Producer, Sent};
use crate::error::RequestError;
use crate::event::Event;
use crate::net::{Completion, Net, Origin, Reply};
use crate::request::{RequestOptions, Target};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducePartitionData, ProducePartitionResponse,
    ProduceRequest, ProduceResponse, ProduceTopicData, RequestBody,
};
use stellflow_proto::{ApiKey, ErrorClass, ErrorCode, Reader, Wire};

/// How long after the broker's first answer on a fresh connection a batch in doubt (its
/// request was written on a connection that was lost or given up, and never answered) is
/// re-sent: the margin by which a late original, already taken from the broker's request
/// queue, has recorded its sequence. The broker checks the sequence, appends with a flush
/// and only then records it, holding nothing across the three, so a copy checked in
/// between is appended too; on a loaded machine originals finished up to about 150 ms after
/// that first answer (ARCHITECTURE decision 4).
pub(crate) const DOUBT_SETTLE: Duration = Duration::from_secs(1);

/// What to do with a batch after its answer.
enum Verdict {
    Written(i64),
    NotReplicated(i64),
    Retry { refresh: bool, error: DeliveryError },
    LostState,
    Fail(DeliveryError),
}

impl Producer {
    /// Sends every ready batch whose leader is known.
    pub(crate) fn drain(&mut self, now: Instant, net: &mut Net) -> bool {
        // 1. Batches are stamped with the producer id, so idempotence must have one.
        self.resolve_doubts(net);
        let Some(stamp_base) = self.stamp_base(now, net) else {
            return false;
        };
        if let Some(base) = stamp_base {
            self.fail_restamped_maybe_written(base);
        }
        // 2. The partitions with a batch ready to go, sorted by leader.
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        self.pick_ready(now, &mut picks);
        if picks.is_empty() {
            self.picks = picks;
            return false;
        }
        picks.sort_unstable();
        // 3. One Produce request per leader, as large as `max_request_size` allows.
        let mut i = 0;
        while let Some(&(leader, _, _)) = picks.get(i) {
            self.send_to_leader(now, net, leader, &picks, &mut i, stamp_base);
        }
        self.picks = picks;
        // Another batch of the same partition may be ready behind the one just sent.
        if self.cfg.max_in_flight_per_partition > 1 {
            self.dirty = true;
        }
        true
    }

    /// What batches are stamped with: `Some(None)` without idempotence, `Some(Some(id,
    /// epoch))` once the producer id is known; `None` when nothing can be sent yet (the id
    /// is asked for when records wait) or ever (fenced: batches wait for their delivery
    /// timeout or the close).
    fn stamp_base(&mut self, now: Instant, net: &mut Net) -> Option<Option<(i64, i16)>> {
        let Some(i) = &self.idem else {
            return Some(None);
        };
        match i.pid {
            PidState::Ready { producer_id, epoch } => Some(Some((producer_id, epoch))),
            PidState::Fenced => None,
            _ => {
                if self.has_records() {
                    self.request_pid(now, net);
                }
                None
            }
        }
    }

    /// Adds `(leader, topic, partition)` to `picks` for every partition with a batch ready
    /// to send and room in its pipeline: its first queued batch (not in doubt, its retry
    /// due), or its open batch once it lingered, is flushed, the buffer is exhausted, or the
    /// producer closes. A ready
    /// partition without a known leader asks for metadata instead.
    fn pick_ready(&mut self, now: Instant, picks: &mut Vec<(i32, usize, usize)>) {
        let linger = self.cfg.linger;
        let max_in_flight = self.cfg.max_in_flight_per_partition;
        let flush_upto = self.flush_upto;
        let no_linger = self.closing.is_some() || self.exhausted;
        for (ti, t) in self.topics.iter().enumerate() {
            for (pi, ps) in t.parts.iter().enumerate() {
                if ps.in_flight >= max_in_flight {
                    continue;
                }
                let ready = match ps.queue.front() {
                    Some(b) => b.in_doubt.is_none() && b.retry_at.is_none_or(|r| r <= now),
                    None => ps.open.as_ref().is_some_and(|b| {
                        !b.slots.is_empty()
                            && (b.created + linger <= now || b.first_id() < flush_upto || no_linger)
                    }),
                };
                if !ready {
                    continue;
                }
                match ps.leader {
                    Some(l) => picks.push((l, ti, pi)),
                    None => self.want_refresh = true,
                }
            }
        }
    }

    /// Sends one Produce request to `leader` with the ready batches of `picks` from `*i` on
    /// (all of that leader's, up to `max_request_size`), moving `*i` past those taken.
    fn send_to_leader(
        &mut self,
        now: Instant,
        net: &mut Net,
        leader: i32,
        picks: &[(i32, usize, usize)],
        i: &mut usize,
        stamp_base: Option<(i64, i16)>,
    ) {
        let max_size = self.cfg.max_request_size;
        let mut topic_data: Vec<ProduceTopicData> = Vec::new();
        let mut sent: Vec<Sent> = Vec::new();
        let mut size = 0usize;
        while let Some(&(l, ti, pi)) = picks.get(*i) {
            if l != leader {
                break;
            }
            let est = self.ready_size(ti, pi);
            if !sent.is_empty() && size + est > max_size {
                break;
            }
            *i += 1;
            let Some(batch) = self.take_ready(ti, pi, stamp_base) else {
                continue;
            };
            size += batch.blob.len();
            let Some(t) = self.topics.get(ti) else {
                continue;
            };
            let same_topic = sent.last().is_some_and(|s| s.topic == ti);
            if !same_topic {
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
            sent.push(Sent {
                topic: ti,
                part: pi,
                tpos,
                ppos: td.partitions.len() - 1,
                batch,
            });
        }
        if !sent.is_empty() {
            self.submit(now, net, leader, topic_data, sent);
        }
    }

    /// Clears the doubt of every queued batch whose broker answered on a newer connection
    /// since the one its unanswered request was written on. It is re-sent [`DOUBT_SETTLE`]
    /// after that answer (ARCHITECTURE decision 4): the broker's request queue is one FIFO for
    /// all connections, so a late original that reached it was taken by a handler thread
    /// before (or, read on another I/O thread, about when) the fresh connection's first
    /// request, and records its sequence within that margin. An `acks = -1` original of a replicated
    /// partition may wait for its followers at the broker for up to the ack timeout before
    /// its sequence is recorded, so it is given that much more.
    fn resolve_doubts(&mut self, net: &Net) {
        let mut cleared = Vec::new();
        let all = self.cfg.acks == Acks::All;
        let ack_timeout = self.cfg.ack_timeout;
        for (ti, t) in self.topics.iter_mut().enumerate() {
            for (pi, ps) in t.parts.iter_mut().enumerate() {
                let settle = if all && ps.replicated {
                    DOUBT_SETTLE + ack_timeout
                } else {
                    DOUBT_SETTLE
                };
                for b in &mut ps.queue {
                    if let Some((slot, conn)) = b.in_doubt
                        && let Some(at) = net.answered_since(slot, conn)
                    {
                        b.in_doubt = None;
                        b.awaits_leader = false;
                        b.retry_at = Some(b.retry_at.map_or(at + settle, |r| r.max(at + settle)));
                        cleared.push((ti, pi));
                    }
                }
            }
        }
        for (ti, pi) in cleared {
            self.touch(ti, pi);
        }
    }

    /// Asks `slot` for a round trip on a fresh connection (one probe per slot at a time)
    /// unless it answered on one already: the batches in doubt there wait for it.
    fn probe(&mut self, now: Instant, net: &mut Net, slot: usize, conn: crate::request::ConnId) {
        if net.answered_since(slot, conn).is_some()
            || self
                .inflight
                .values()
                .any(|f| matches!(f, Flight::Probe { slot: s } if *s == slot))
        {
            return;
        }
        let Some(target) = net.slot_target(slot) else {
            return;
        };
        let seq = net.submit(
            now,
            target,
            RequestBody::ApiVersions(stellflow_proto::messages::ApiVersionsRequest::default()),
            Some(0),
            Origin::Producer,
            &RequestOptions::default(),
        );
        self.inflight.insert(seq, Flight::Probe { slot });
    }

    /// Whether a queued batch still waits in doubt on `slot`.
    fn doubt_on(&self, slot: usize) -> Option<crate::request::ConnId> {
        self.topics
            .iter()
            .flat_map(|t| t.parts.iter())
            .flat_map(|ps| ps.queue.iter())
            .filter_map(|b| b.in_doubt)
            .find(|(s, _)| *s == slot)
            .map(|(_, c)| c)
    }

    fn ready_size(&self, ti: usize, pi: usize) -> usize {
        self.part(ti, pi).map_or(0, |ps| match ps.queue.front() {
            Some(b) => b.size(),
            None => ps.open.as_ref().map_or(0, Batch::size),
        })
    }

    /// Fails, as "may have been written", every queued batch that was sent under an older
    /// producer id or epoch than `base` and never answered. It may already be in the log under
    /// its old stamp; re-sent under the new epoch, the broker would clear the producer's history
    /// (PROTOCOL.md §3.3.2) and write it a second time, a duplicate nobody is told about. The
    /// epoch moves on when another partition lost its sequence state (OUT_OF_ORDER_SEQUENCE).
    fn fail_restamped_maybe_written(&mut self, (producer_id, epoch): (i64, i16)) {
        for ti in 0..self.topics.len() {
            let parts = self.topics.get(ti).map_or(0, |t| t.parts.len());
            for pi in 0..parts {
                while let Some(ps) = self.part_mut(ti, pi) {
                    let stale = ps.queue.front().is_some_and(|b| {
                        b.maybe_written
                            && (b.stamp.producer_id != producer_id || b.stamp.epoch != epoch)
                    });
                    if !stale {
                        break;
                    }
                    let Some(batch) = ps.queue.pop_front() else {
                        break;
                    };
                    let lost = DeliveryError::Broker {
                        code: ErrorCode::OUT_OF_ORDER_SEQUENCE,
                    };
                    self.fail_batch(ti, pi, batch, lost, BatchStage::Closed);
                    self.touch(ti, pi);
                }
            }
        }
    }

    /// Takes the partition's next batch to send, stamped for idempotence.
    fn take_ready(&mut self, ti: usize, pi: usize, base: Option<(i64, i16)>) -> Option<Batch> {
        if self.part(ti, pi).is_some_and(|ps| ps.queue.is_empty()) {
            self.close_open(ti, pi);
        }
        let gzip = self.cfg.gzip_level;
        let ps = self.part_mut(ti, pi)?;
        let mut batch = ps.queue.pop_front()?;
        ps.in_flight += 1;
        let Some((producer_id, epoch)) = base else {
            self.touch(ti, pi);
            return Some(batch);
        };
        if ps.seq_epoch != epoch {
            ps.seq_epoch = epoch;
            ps.next_seq = 0;
        }
        let want = Stamp {
            producer_id,
            epoch,
            sequence: ps.next_seq,
        };
        if batch.stamp != want {
            match restamp(&batch.blob, want, gzip) {
                Ok(blob) => {
                    batch.blob = blob;
                    batch.stamp = want;
                }
                Err(e) => {
                    ps.in_flight -= 1;
                    self.fail_batch(
                        ti,
                        pi,
                        batch,
                        DeliveryError::Encode(e.to_string()),
                        BatchStage::Closed,
                    );
                    self.touch(ti, pi);
                    return None;
                }
            }
        }
        self.touch(ti, pi);
        Some(batch)
    }

    fn submit(
        &mut self,
        now: Instant,
        net: &mut Net,
        leader: i32,
        topic_data: Vec<ProduceTopicData>,
        mut sent: Vec<Sent>,
    ) {
        let acks = self.cfg.acks;
        let req = ProduceRequest {
            transactional_id: None,
            acks: acks.wire(),
            timeout_ms: i32::try_from(self.cfg.ack_timeout.as_millis()).unwrap_or(i32::MAX),
            topic_data,
        };
        // Without idempotence a request is not waited for past its batches' delivery
        // deadline (Kafka's delivery.timeout.ms bounds in-flight batches too); with it, the
        // request must run its course (the retry rule, ARCHITECTURE decision 4).
        let left = sent
            .iter()
            .map(|s| s.batch.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(self.request_timeout)
            .max(Duration::from_millis(1));
        let timeout = match self.idem {
            Some(_) => self.request_timeout,
            None => self.request_timeout.min(left),
        };
        // One context per request: its first batch's that has one (see `Client::set_trace`).
        let trace = sent
            .iter()
            .find_map(|s| s.batch.trace.as_ref())
            .map(crate::request::TraceContext::from);
        let opts = RequestOptions {
            trace,
            timeout: Some(timeout),
        };
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
            for s in &mut sent {
                if s.batch.reported {
                    continue; // re-routed: its outcomes went out the first time
                }
                let Some(t) = self.topics.get(s.topic) else {
                    continue;
                };
                let topic = t.name.clone();
                let partition = i32::try_from(s.part).unwrap_or(0);
                Self::report(
                    &mut self.events,
                    self.batch_outcomes,
                    &topic,
                    partition,
                    &s.batch.slots,
                    Ok(None),
                );
                net.counters.producer_records += s.batch.slots.len() as u64;
                crate::metrics::emit::produced(
                    &mut net.counters,
                    &t.name,
                    s.batch.slots.len(),
                    s.batch.bytes,
                );
                s.batch.reported = true;
            }
        }
        self.inflight.insert(seq, Flight::Produce { leader, sent });
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
    pub(crate) fn reroute(&mut self, net: &mut Net) {
        let mut stale: Vec<u64> = Vec::new();
        for (seq, f) in &self.inflight {
            // Only when this request is its partitions' sole one in flight: with several per
            // partition, an earlier batch already on the wire to the old leader would fail
            // and be retried after the re-routed later one.
            if let Flight::Produce { leader, sent } = f
                && sent.iter().any(|s| {
                    self.part(s.topic, s.part)
                        .is_none_or(|ps| ps.leader != Some(*leader))
                })
                && sent.iter().all(|s| {
                    self.part(s.topic, s.part)
                        .is_none_or(|ps| ps.in_flight <= 1)
                })
            {
                stale.push(*seq);
            }
        }
        stale.sort_unstable(); // deterministic whatever the map's order
        for seq in stale {
            if !net.cancel_unsent(seq) {
                continue;
            }
            let Some(Flight::Produce { sent, .. }) = self.inflight.remove(&seq) else {
                continue;
            };
            for s in sent {
                if let Some(ps) = self.part_mut(s.topic, s.part) {
                    ps.in_flight = ps.in_flight.saturating_sub(1);
                }
                self.requeue(s.topic, s.part, s.batch);
            }
            self.dirty = true;
        }
    }

    /// Makes `error` fatal for this producer (fenced, or its producer id bound to another
    /// producer): retrying cannot help, so every record not in flight fails with it at once —
    /// nothing waits for its delivery timeout — answers still due fail with it unless they
    /// report success, and `produce` refuses new records.
    fn make_fatal(&mut self, net: &mut Net, error: DeliveryError) {
        if self.fatal.is_some() {
            return;
        }
        self.fatal = Some(error.clone());
        if let Some(idem) = &mut self.idem {
            idem.pid = PidState::Fenced;
        }
        while let Some(p) = self.pending.pop_front() {
            self.buffered = self.buffered.saturating_sub(p.size);
            if let Some(t) = self.topics.get_mut(p.topic) {
                t.pending = t.pending.saturating_sub(1);
            }
            net.counters.producer_record_errors += 1;
            self.emit_failure(p.id, error.clone());
        }
        for ti in 0..self.topics.len() {
            let parts = self.topics.get(ti).map_or(0, |t| t.parts.len());
            for pi in 0..parts {
                while let Some(b) = self.part_mut(ti, pi).and_then(|ps| ps.queue.pop_front()) {
                    net.counters.producer_record_errors += b.slots.len() as u64;
                    self.fail_batch(ti, pi, b, error.clone(), BatchStage::Closed);
                }
                if let Some(b) = self.part_mut(ti, pi).and_then(|ps| ps.open.take()) {
                    net.counters.producer_record_errors += b.slots.len() as u64;
                    self.fail_batch(ti, pi, b, error.clone(), BatchStage::Open);
                }
            }
        }
    }

    /// Asks for a producer id (idempotence), unless one is on its way.
    pub(crate) fn request_pid(&mut self, now: Instant, net: &mut Net) {
        let Some(idem) = &mut self.idem else {
            return;
        };
        match idem.pid {
            PidState::Needed(at) if at.is_none_or(|t| t <= now) => {}
            _ => return,
        }
        idem.pid = PidState::Requested;
        let seq = net.submit(
            now,
            Target::Any,
            RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: None,
            }),
            None,
            Origin::Producer,
            &RequestOptions::default(),
        );
        self.inflight.insert(seq, Flight::InitPid);
    }

    /// A request of the producer completed.
    pub(crate) fn on_completion(&mut self, now: Instant, net: &mut Net, c: Completion) {
        let Some(flight) = self.inflight.remove(&c.seq) else {
            return; // aborted (close) or unknown
        };
        self.dirty = true;
        match flight {
            Flight::InitPid => self.on_pid(now, c),
            Flight::Produce { sent, .. } => self.on_produce(now, net, c, sent),
            Flight::Probe { slot } => {
                // A failed probe (it took a request timeout or a lost connection, so this
                // cannot spin) is asked again while a batch still waits in doubt there; an
                // answered one resolved the doubt (the drain checks `answered_since`).
                if c.result.is_err()
                    && !self.closed
                    && let Some(conn) = self.doubt_on(slot)
                {
                    self.probe(now, net, slot, conn);
                }
            }
        }
    }

    fn on_pid(&mut self, now: Instant, c: Completion) {
        let parsed = match c.result {
            Ok(reply) => reply.body.and_then(|b| {
                InitProducerIdResponse::decode(&mut Reader::new(b))
                    .ok()
                    .filter(|r| r.error_code == ErrorCode::NONE && r.producer_id >= 0)
            }),
            Err(_) => None,
        };
        let backoff = self.retry_delay(self.idem.as_ref().map_or(1, |i| i.init_failures + 1));
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
                self.touch_all();
            }
            None => {
                idem.init_failures += 1;
                idem.pid = PidState::Needed(Some(now + backoff));
            }
        }
    }

    fn on_produce(&mut self, now: Instant, net: &mut Net, c: Completion, sent: Vec<Sent>) {
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
        let parsed = parse_produce(net, c.result);
        for s in sent {
            if let Some(ps) = self.part_mut(s.topic, s.part) {
                ps.in_flight = ps.in_flight.saturating_sub(1);
            }
            if s.batch.reported {
                // acks = 0: outcomes went out when it was sent; the answer is discarded.
                self.release(s.topic, s.part, s.batch);
                self.touch(s.topic, s.part);
                continue;
            }
            let mut s = s;
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
            self.apply(now, net, s.topic, s.part, s.batch, verdict);
            self.touch(s.topic, s.part);
        }
        if let Some((slot, conn)) = doubt
            && self.doubt_on(slot).is_some()
        {
            self.probe(now, net, slot, conn);
        }
    }

    /// What to do with one batch of a Produce request given the request's answer: its
    /// partition's outcome in the answer, or the request's error.
    fn verdict(&self, parsed: &Result<ProduceResponse, RequestError>, s: &Sent) -> Verdict {
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
                let current = self
                    .idem
                    .as_ref()
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

    /// Applies the broker's verdict on one batch of partition `(ti, pi)`; once the producer is
    /// fatal, what would be retried fails with the fatal error.
    fn apply(
        &mut self,
        now: Instant,
        net: &mut Net,
        ti: usize,
        pi: usize,
        batch: Batch,
        verdict: Verdict,
    ) {
        let verdict = match (&self.fatal, verdict) {
            // Fatal already: what would be retried fails with the fatal error instead.
            (Some(e), Verdict::Retry { .. } | Verdict::LostState) => Verdict::Fail(e.clone()),
            (_, v) => v,
        };
        // One step per verdict: written, appended but not replicated, the broker lost the
        // producer's state, worth a retry, or failed.
        match verdict {
            Verdict::Written(offset) => self.on_written(net, ti, pi, batch, offset),
            Verdict::NotReplicated(offset) => self.on_not_replicated(net, ti, pi, batch, offset),
            Verdict::LostState => self.on_lost_state(now, net, ti, pi, batch),
            Verdict::Retry { refresh, error } => {
                self.on_retry(now, net, (ti, pi), batch, refresh, error);
            }
            Verdict::Fail(e) => self.on_failed(net, ti, pi, batch, e),
        }
    }

    /// The batch was written at `offset`: the partition's next sequence moves past it and its
    /// records succeed.
    fn on_written(&mut self, net: &mut Net, ti: usize, pi: usize, batch: Batch, offset: i64) {
        let count = batch.count();
        if let Some(ps) = self.part_mut(ti, pi)
            && batch.stamp.sequence >= 0
            && batch.stamp.epoch == ps.seq_epoch
        {
            ps.next_seq = batch.stamp.sequence.wrapping_add(count);
        }
        net.counters.producer_records += batch.slots.len() as u64;
        if let Some(t) = self.topics.get(ti) {
            let (n, bytes) = (batch.slots.len(), batch.bytes);
            crate::metrics::emit::produced(&mut net.counters, &t.name, n, bytes);
        }
        self.succeed_batch(ti, pi, batch, Some(offset));
    }

    /// The leader appended the batch at `offset` but could not replicate it: every record
    /// fails as `NotReplicated` (its outcome unknown; decision 3) and the batch is released.
    fn on_not_replicated(
        &mut self,
        net: &mut Net,
        ti: usize,
        pi: usize,
        batch: Batch,
        offset: i64,
    ) {
        net.counters.producer_record_errors += batch.slots.len() as u64;
        let topic_part = (ti, pi);
        let errors: Vec<(u64, DeliveryError)> = batch
            .slots
            .iter()
            .enumerate()
            .map(|(index, s)| {
                (
                    s.id,
                    DeliveryError::NotReplicated {
                        offset,
                        index: index as u32,
                    },
                )
            })
            .collect();
        for (id, e) in errors {
            self.emit_failure(id, e);
        }
        self.release(topic_part.0, topic_part.1, batch);
    }

    /// The broker lost the producer's sequence state: bump the epoch and re-send at once, or
    /// fail the batch after three such answers.
    fn on_lost_state(
        &mut self,
        now: Instant,
        net: &mut Net,
        ti: usize,
        pi: usize,
        mut batch: Batch,
    ) {
        batch.lost_state += 1;
        if batch.lost_state > 3 {
            let code = ErrorCode::OUT_OF_ORDER_SEQUENCE;
            net.counters.producer_record_errors += batch.slots.len() as u64;
            self.fail_batch(
                ti,
                pi,
                batch,
                DeliveryError::Broker { code },
                BatchStage::Closed,
            );
            return;
        }
        if let Some(idem) = &mut self.idem
            && idem.bump_from(batch.stamp.epoch)
        {
            net.counters.producer_epoch_bumps += 1;
        }
        net.counters.producer_retries += 1;
        batch.retry_at = Some(now);
        batch.awaits_leader = false;
        batch.last_error = Some(DeliveryError::Broker {
            code: ErrorCode::OUT_OF_ORDER_SEQUENCE,
        });
        self.requeue(ti, pi, batch);
    }

    /// A retriable failure: retry after the backoff (after a metadata refresh when `refresh`),
    /// or fail once the retries or the delivery timeout are spent.
    fn on_retry(
        &mut self,
        now: Instant,
        net: &mut Net,
        (ti, pi): (usize, usize),
        mut batch: Batch,
        refresh: bool,
        error: DeliveryError,
    ) {
        batch.attempts += 1;
        if refresh {
            self.want_refresh = true;
        }
        if batch.attempts > self.cfg.retries {
            let attempts = batch.attempts;
            net.counters.producer_record_errors += batch.slots.len() as u64;
            let e = DeliveryError::RetriesExhausted {
                attempts,
                last: Box::new(error),
            };
            self.fail_batch(ti, pi, batch, e, BatchStage::Closed);
        } else if now >= batch.deadline {
            net.counters.producer_record_errors += batch.slots.len() as u64;
            let e = DeliveryError::Timeout {
                after: self.cfg.delivery_timeout,
                last: Some(Box::new(error)),
            };
            self.fail_batch(ti, pi, batch, e, BatchStage::Closed);
        } else {
            net.counters.producer_retries += 1;
            let topic = self.topics.get(ti).map(|t| &*t.name);
            tracing::debug!(
                topic,
                partition = pi,
                attempt = batch.attempts,
                "retrying a batch: {error}"
            );
            batch.retry_at = Some(now + self.retry_delay(batch.attempts));
            batch.awaits_leader = refresh;
            batch.last_error = Some(error);
            self.requeue(ti, pi, batch);
        }
    }

    /// A final failure: the batch fails, and a fencing of the idempotent producer makes it
    /// fatal.
    fn on_failed(&mut self, net: &mut Net, ti: usize, pi: usize, batch: Batch, e: DeliveryError) {
        net.counters.producer_record_errors += batch.slots.len() as u64;
        let fatal = matches!(e, DeliveryError::Fenced | DeliveryError::ProducerIdConflict)
            && self.idem.is_some();
        if fatal {
            self.fail_batch(ti, pi, batch, e.clone(), BatchStage::Closed);
            self.make_fatal(net, e);
        } else {
            self.fail_batch(ti, pi, batch, e, BatchStage::Closed);
        }
    }

    /// Puts a batch back in its partition's queue, before every later batch.
    fn requeue(&mut self, ti: usize, pi: usize, batch: Batch) {
        if let Some(ps) = self.part_mut(ti, pi) {
            let pos = ps
                .queue
                .iter()
                .position(|b| b.serial > batch.serial)
                .unwrap_or(ps.queue.len());
            ps.queue.insert(pos, batch);
            self.touch(ti, pi);
        }
    }

    /// Exponential retry delay with jitter for attempt `n` (1-based).
    pub(crate) fn retry_delay(&mut self, n: u32) -> Duration {
        let factor = 1u32
            .checked_shl(n.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        let raw = self
            .cfg
            .retry_backoff
            .saturating_mul(factor)
            .min(self.cfg.retry_backoff_max.max(self.cfg.retry_backoff));
        // Jitter, then the cap again: the cap is a bound (Kafka's `ExponentialBackoff`).
        raw.mul_f64(0.8 + 0.4 * self.rng.next_f64())
            .min(self.cfg.retry_backoff_max.max(self.cfg.retry_backoff))
    }

    /// Reports every record of a delivered batch and frees it.
    fn succeed_batch(&mut self, ti: usize, pi: usize, batch: Batch, offset: Option<i64>) {
        if let Some(t) = self.topics.get(ti) {
            let partition = i32::try_from(pi).unwrap_or(0);
            Self::report(
                &mut self.events,
                self.batch_outcomes,
                &t.name,
                partition,
                &batch.slots,
                Ok(offset),
            );
        }
        self.release(ti, pi, batch);
    }

    /// Reports the outcome of every record of a batch: one [`Event::Produced`] per record,
    /// or one [`Event::ProducedBatch`] for all of them when the driver asked for that.
    fn report(
        events: &mut VecDeque<Event>,
        batched: bool,
        topic: &Arc<str>,
        partition: i32,
        slots: &[Slot],
        result: Result<Option<i64>, DeliveryError>,
    ) {
        if slots.is_empty() {
            return;
        }
        if batched {
            events.push_back(Event::ProducedBatch(ProducedBatch {
                topic: topic.clone(),
                partition,
                result,
                records: slots.iter().map(|s| (s.id, s.timestamp)).collect(),
            }));
            return;
        }
        for (index, slot) in slots.iter().enumerate() {
            let result = match &result {
                Ok(offset) => Ok(RecordMetadata {
                    topic: topic.clone(),
                    partition,
                    offset: *offset,
                    index: index as u32,
                    timestamp: slot.timestamp,
                }),
                Err(e) => Err(e.clone()),
            };
            events.push_back(Event::Produced {
                id: super::ProduceId(slot.id),
                result,
            });
        }
    }

    /// Reports every record of a batch as failed and frees it. `stage` says whether the
    /// batch had been counted in the partition's pipeline (closed batches).
    pub(crate) fn fail_batch(
        &mut self,
        ti: usize,
        pi: usize,
        batch: Batch,
        error: DeliveryError,
        stage: BatchStage,
    ) {
        let error = self.with_leaderless_cause(ti, pi, error);
        let error = match error {
            DeliveryError::MaybeWritten { .. } => error,
            e if batch.maybe_written => DeliveryError::MaybeWritten { last: Box::new(e) },
            e => e,
        };
        if !batch.reported {
            match self.topics.get(ti) {
                Some(t) => Self::report(
                    &mut self.events,
                    self.batch_outcomes,
                    &t.name,
                    i32::try_from(pi).unwrap_or(0),
                    &batch.slots,
                    Err(error),
                ),
                None => batch.slots.iter().for_each(|s| {
                    self.events.push_back(Event::Produced {
                        id: super::ProduceId(s.id),
                        result: Err(error.clone()),
                    })
                }),
            }
        }
        if stage == BatchStage::Closed {
            self.release(ti, pi, batch);
        } else {
            self.recycle(batch);
        }
    }

    /// A delivery timeout with no failure attached gets the reason the partition has no
    /// leader, when the metadata gave one (a broker restarted on its data, a leader that is
    /// not a known broker).
    fn with_leaderless_cause(&self, ti: usize, pi: usize, error: DeliveryError) -> DeliveryError {
        match error {
            DeliveryError::Timeout { after, last: None } => {
                let last = self.topics.get(ti).and_then(|t| {
                    let reason = t.parts.get(pi)?.leaderless.clone()?;
                    Some(Box::new(DeliveryError::Leaderless {
                        topic: t.name.to_string(),
                        partition: i32::try_from(pi).unwrap_or(i32::MAX),
                        reason,
                    }))
                });
                DeliveryError::Timeout { after, last }
            }
            e => e,
        }
    }

    /// Frees a closed batch (its records have their outcomes).
    pub(crate) fn release(&mut self, ti: usize, pi: usize, batch: Batch) {
        let count = i64::from(batch.count());
        if let Some(ps) = self.part_mut(ti, pi) {
            ps.pipeline = (ps.pipeline - count).max(0);
        }
        self.recycle(batch);
    }

    /// One failure event for a record that never reached a batch.
    pub(crate) fn emit_failure(&mut self, id: u64, error: DeliveryError) {
        self.events.push_back(Event::Produced {
            id: super::ProduceId(id),
            result: Err(error),
        });
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
