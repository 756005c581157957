//! The producer: partitioners, the accumulator, the sender and idempotence (DESIGN §3.1–3.5,
//! §3.12; PROTOCOL.md §3.3, §3.12).
//!
//! Use it through [`crate::Client`]:
//!
//! * [`crate::Client::produce`]`(now, &record)` copies the record into its partition's batch and
//!   returns a [`ProduceId`] at once — or a [`ProduceError`] (buffer full, record too large,
//!   bad topic or partition, closed) and then nothing else happens;
//! * every `Ok` gets exactly one [`crate::Event::Produced`] with a [`RecordMetadata`] (the
//!   blob's offset plus the record's index in it) or a [`DeliveryError`];
//! * [`crate::Client::flush`] ends with [`crate::Event::Flushed`] once every record produced
//!   before it has its outcome; [`crate::Client::close_producer`] flushes with a deadline, fails
//!   what remains, and ends with [`crate::Event::ProducerClosed`].
//!
//! Settings live in [`ProducerConfig`] (`ClientConfig::producer`).
//!
//! # Delivery guarantees (DESIGN §3 item 14)
//!
//! * **An outcome the client cannot know is reported as unknown.** A Produce that reached the
//!   network and was never answered — it timed out (a frozen, overloaded or partitioned
//!   broker), its connection died, or the broker answered a request-level error 1 — may have
//!   been written. If its records then fail (delivery timeout, close, a later refusal) they
//!   fail with [`DeliveryError::MaybeWritten`] ("may have been written"), never with a plain
//!   "not delivered" [`DeliveryError::Timeout`]; [`DeliveryError::outcome_unknown`]
//!   tells the two kinds apart.
//! * **Without idempotence the producer is at-least-once.** A timed-out request is retried
//!   (after the retry backoff, possibly on the same connection behind the unanswered one): if
//!   the first attempt was executed after all — a broker that was frozen (SIGSTOP, a long GC
//!   pause) runs it when it resumes — the log holds the records twice, and the outcome
//!   reported is the retry's.
//! * **With idempotence a retry never runs while the request it replaces may still be
//!   executing on the broker.** The server checks sequences racily (two handler threads,
//!   PROTOCOL.md §3.3.2), so a retry overlapping its original can be appended twice. The
//!   rule: a timed-out idempotent Produce keeps waiting for its late answer on its
//!   connection, up to [`crate::net::LATE_TIMEOUTS_TO_CLOSE`] request timeouts; when the
//!   connection is given up (or lost), its batches are *in doubt* and are re-sent once the
//!   same broker has answered on a newer connection (the producer asks for that round trip)
//!   and a settle has passed (1 s; plus the ack timeout for an `acks = -1` batch of
//!   a replicated partition, which the broker may hold that long), in order and with the
//!   same sequence numbers, which the broker answers as a duplicate with the original
//!   offset if the first attempt was written. A broker that is frozen keeps the batches waiting
//!   (up to the delivery timeout, then [`DeliveryError::MaybeWritten`]); it never gets two.
//!   A batch that may have been written is never re-stamped: if the producer epoch moved on
//!   meanwhile (another partition lost its sequence state, OUT_OF_ORDER_SEQUENCE, and the
//!   producer bumped the epoch), re-sending it under the new epoch would make the broker clear
//!   the producer's history and append it again, so it fails with
//!   [`DeliveryError::MaybeWritten`] instead.
//!   Idempotence still cannot help across a broker restart or a leader change: the server
//!   keeps producer state in memory, per broker.
//!
//! Internals: [`partitioner`] (Java/Go-compatible hashes, sticky, round robin),
//! `accumulator` (per-partition batches), `sender` (requests per leader, retries) and
//! [`idempotence`] (producer id, sequences, epoch-bump recovery).

mod accumulator;
mod error;
pub mod idempotence;
mod missing;
mod owned;
mod sender;

pub use crate::delivery::{DeliveryError, FlushId, ProduceId, ProducedBatch, RecordMetadata};
pub(crate) use crate::partitioner;
pub use crate::producer_config::{Acks, BatchFormat, ProducerConfig};
pub use crate::producer_record::{ProducerRecord, RecordHeader};
pub use error::ProduceError;
pub use owned::{IntoRecordBytes, Record};
pub use partitioner::{KeyedPartitioner, KeylessPartitioner, Partitioner, fnv1a32, java_hash};

use crate::event::Event;
use crate::metadata::MetadataCache;
use crate::net::Net;
use crate::rng::Rng;
use accumulator::{Batch, BatchStage, TopicState};
use bytes::{Bytes, BytesMut};
use idempotence::{Idempotence, PidState};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::record::Envelope;

/// A record waiting for its topic's metadata (owned copy; cold path).
#[derive(Debug)]
struct Pending {
    id: u64,
    topic: usize,
    partition: Option<i32>,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(String, Option<Bytes>)>,
    timestamp: i64,
    size: usize,
    deadline: Instant,
    trace: Option<crate::trace::TraceIds>,
}

/// A batch inside a Produce request, with its position in the request.
#[derive(Debug)]
struct Sent {
    topic: usize,
    part: usize,
    tpos: usize,
    ppos: usize,
    batch: Batch,
}

/// A request of the producer in flight.
#[derive(Debug)]
enum Flight {
    /// A Produce to broker `leader` carrying these batches.
    Produce {
        leader: i32,
        sent: Vec<Sent>,
    },
    InitPid,
    /// A round trip to `slot` on a fresh connection, asked for batches in doubt there.
    Probe {
        slot: usize,
    },
}

/// The producer state inside the [`crate::Client`].
#[derive(Debug)]
pub(crate) struct Producer {
    cfg: ProducerConfig,
    envelope: Envelope,
    request_timeout: Duration,
    topics: Vec<TopicState>,
    topic_ids: HashMap<String, usize>,
    last_topic: usize,
    custom: Option<Box<dyn Partitioner>>,
    rng: Rng,
    next_id: u64,
    next_serial: u64,
    next_flush: u64,
    buffered: usize,
    pending: VecDeque<Pending>,
    inflight: HashMap<u64, Flight>,
    idem: Option<Idempotence>,
    flushes: VecDeque<(u64, u64)>,
    /// Records with an id below this are sent without waiting for linger (flush/close).
    flush_upto: u64,
    closing: Option<Instant>,
    closed: bool,
    wall: Option<(Instant, i64)>,
    /// The last `now` a record's timestamp was taken at and that timestamp: the records of
    /// one batch send share their `now`, so the clock arithmetic runs once for all of them.
    last_stamp: Option<(Instant, i64)>,
    buffers: Vec<BytesMut>,
    slot_vecs: Vec<Vec<accumulator::Slot>>,
    picks: Vec<(i32, usize, usize)>,
    events: VecDeque<Event>,
    /// Outcomes go out one [`Event::ProducedBatch`] per batch (`Client::set_batch_outcomes`).
    pub(crate) batch_outcomes: bool,
    /// Something may be sendable: run the sender at the next `process`.
    dirty: bool,
    /// A record was refused for want of buffer space and none was taken since: open batches
    /// go out without waiting for their linger, so that space comes back (Kafka's rule while
    /// a sender waits for memory).
    exhausted: bool,
    /// Ask the client for a metadata refresh.
    want_refresh: bool,
    meta_gen: u64,
    /// Metadata moved a partition's leader: withdraw Produce requests still queued for the
    /// old one at the next `process` (see `sender::reroute`).
    leaders_moved: bool,
    /// Per-partition deadlines (linger, retry backoff, delivery timeout) as a lazily checked
    /// min-heap of `(instant, topic, partition)`: every change that can make a partition's
    /// next deadline earlier pushes it (`touch`), `poll_timeout` drops entries that no longer
    /// match. Invariant: a partition whose next deadline is `d` has an entry at or before `d`.
    timers: BinaryHeap<Reverse<(Instant, usize, usize)>>,
    /// A fatal producer error (fenced, producer id bound elsewhere): every record without an
    /// outcome fails with it, and `produce` refuses new ones.
    fatal: Option<DeliveryError>,
    /// Topic creations started for `create_missing_topics`, by admin id.
    creating: Vec<crate::request::RequestId>,
    /// The metadata generation `confirm_unknown` last looked at.
    confirmed_gen: u64,
    /// The client's hooks (only the producer's are called here).
    hooks: crate::hooks::Hooks,
    /// Headers the hooks add to the record being produced (reused).
    header_sink: crate::hooks::HeaderSink,
}

impl Producer {
    /// A producer for `cfg` (already validated); `request_timeout` is the client's.
    pub(crate) fn new(cfg: ProducerConfig, request_timeout: Duration, seed: u64) -> Self {
        let envelope = match cfg.effective_format() {
            BatchFormat::V1 => Envelope::V1,
            BatchFormat::Native(c) => Envelope::Srfb(c),
        };
        // A Produce with acks=-1 may legitimately take `ack_timeout` at the broker.
        let request_timeout = if cfg.acks == Acks::All {
            request_timeout.max(cfg.ack_timeout + Duration::from_secs(1))
        } else {
            request_timeout
        };
        Producer {
            idem: cfg.idempotence.then(Idempotence::default),
            envelope,
            request_timeout,
            cfg,
            topics: Vec::new(),
            topic_ids: HashMap::new(),
            last_topic: usize::MAX,
            custom: None,
            rng: Rng::new(seed),
            next_id: 0,
            next_serial: 0,
            next_flush: 0,
            buffered: 0,
            pending: VecDeque::new(),
            inflight: HashMap::new(),
            flushes: VecDeque::new(),
            flush_upto: 0,
            closing: None,
            closed: false,
            wall: None,
            last_stamp: None,
            buffers: Vec::new(),
            slot_vecs: Vec::new(),
            picks: Vec::new(),
            events: VecDeque::new(),
            batch_outcomes: false,
            dirty: false,
            exhausted: false,
            want_refresh: false,
            meta_gen: u64::MAX,
            leaders_moved: false,
            timers: BinaryHeap::new(),
            fatal: None,
            creating: Vec::new(),
            confirmed_gen: 0,
            hooks: crate::hooks::Hooks::default(),
            header_sink: crate::hooks::HeaderSink::default(),
        }
    }

    /// Installs the client's hooks.
    pub(crate) fn set_hooks(&mut self, hooks: crate::hooks::Hooks) {
        self.hooks = hooks;
    }

    /// Installs a custom partitioner.
    pub(crate) fn set_partitioner(&mut self, p: Box<dyn Partitioner>) {
        self.custom = Some(p);
    }

    /// Anchors the wall clock: `unix_ms` is the time at `now`.
    pub(crate) fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.wall = Some((now, unix_ms));
        self.last_stamp = None;
    }

    fn wall_ms(&self, now: Instant) -> i64 {
        match self.wall {
            Some((at, ms)) => {
                let d = now.saturating_duration_since(at).as_millis();
                ms.saturating_add(i64::try_from(d).unwrap_or(i64::MAX))
            }
            None => -1,
        }
    }

    /// Bytes of records held now.
    pub(crate) fn buffered(&self) -> usize {
        self.buffered
    }

    fn fenced(&self) -> bool {
        self.fatal.is_some()
            || self
                .idem
                .as_ref()
                .is_some_and(|i| i.pid == PidState::Fenced)
    }

    fn has_records(&self) -> bool {
        self.buffered > 0
    }

    /// Next event of the producer.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether `process` has something to do after a `produce`.
    pub(crate) fn needs_attention(&self) -> bool {
        self.dirty || self.want_refresh
    }

    /// Whether the producer wants a metadata refresh (clears the wish).
    pub(crate) fn take_refresh_wish(&mut self) -> bool {
        std::mem::take(&mut self.want_refresh)
    }

    /// Runs the sender if something may be sendable; returns whether requests were submitted.
    pub(crate) fn process(&mut self, now: Instant, net: &mut Net, meta: &MetadataCache) -> bool {
        self.sync_metadata(now, meta);
        if std::mem::take(&mut self.leaders_moved) && !self.closed {
            self.reroute(net);
        }
        let mut sent = false;
        if self.dirty && !self.closed {
            self.dirty = false;
            sent = self.drain(now, net);
        }
        if !self.flushes.is_empty() || self.closing.is_some() {
            self.check_flushes(now);
        }
        sent
    }

    /// Fires due deadlines: delivery timeouts, linger, retries, the close deadline.
    pub(crate) fn handle_timeout(&mut self, now: Instant, net: &Net) {
        self.dirty = true;
        self.expire(now);
        if let Some(deadline) = self.closing
            && deadline <= now
        {
            self.abort(crate::producer::DeliveryError::Closed, net);
        }
    }

    /// Whether batches may be sent (no producer id is awaited).
    fn sending(&self) -> bool {
        match &self.idem {
            None => true,
            Some(i) => matches!(i.pid, PidState::Ready { .. }),
        }
    }

    /// Partition `(ti, pi)`'s next deadline: its oldest batch's delivery timeout, and — when it
    /// could send (producer id known, leader known, room in flight) — its queued batch's retry
    /// time or its open batch's linger.
    fn part_deadline(&self, ti: usize, pi: usize, sending: bool) -> Option<Instant> {
        let ps = self.part(ti, pi)?;
        let oldest = ps.queue.front().or(ps.open.as_ref());
        let expiry = oldest.filter(|b| !b.slots.is_empty()).map(|b| b.deadline);
        if !sending || ps.leader.is_none() || ps.in_flight >= self.cfg.max_in_flight_per_partition {
            return expiry;
        }
        let due = match ps.queue.front() {
            // In doubt: it waits for a round trip (the probe's answer wakes the producer).
            Some(b) if b.in_doubt.is_some() => None,
            Some(b) => b.retry_at,
            None => ps
                .open
                .as_ref()
                .filter(|b| !b.slots.is_empty())
                .map(|b| b.created + self.cfg.linger),
        };
        match (expiry, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Records partition `(ti, pi)`'s next deadline after a change that may have made it
    /// earlier (per batch, never per record). Keeps the heap within a few entries per
    /// partition by rebuilding it when stale entries pile up (amortised O(1) per push).
    pub(crate) fn touch(&mut self, ti: usize, pi: usize) {
        let Some(d) = self.part_deadline(ti, pi, self.sending()) else {
            return;
        };
        let parts: usize = self.topics.iter().map(|t| t.parts.len()).sum();
        if self.timers.len() >= 4 * parts + 64 {
            self.touch_all();
        }
        self.timers.push(Reverse((d, ti, pi)));
    }

    /// Rebuilds the deadline heap from every partition (metadata changes, producer id known).
    pub(crate) fn touch_all(&mut self) {
        self.timers.clear();
        let sending = self.sending();
        for ti in 0..self.topics.len() {
            let parts = self.topics.get(ti).map_or(0, |t| t.parts.len());
            for pi in 0..parts {
                if let Some(d) = self.part_deadline(ti, pi, sending) {
                    self.timers.push(Reverse((d, ti, pi)));
                }
            }
        }
    }

    /// The earliest deadline that is not a partition's: the close deadline, the oldest record
    /// waiting for metadata, and the producer-id retry.
    fn non_partition_deadline(&self) -> Option<Instant> {
        let pid_retry = self.idem.as_ref().and_then(|i| match i.pid {
            PidState::Needed(Some(t)) if self.has_records() => Some(t),
            _ => None,
        });
        [
            self.closing,
            self.pending.front().map(|p| p.deadline),
            self.missing_deadline(),
            pid_retry,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The earliest instant at which something is due. O(1) when nothing changed, otherwise
    /// O(log n) per stale heap entry dropped (amortised over the changes that pushed them).
    pub(crate) fn poll_timeout(&mut self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let mut best = self.non_partition_deadline();
        let mut at = |t: Instant| best = Some(best.map_or(t, |b| b.min(t)));
        let sending = self.sending();
        while let Some(&Reverse((t, ti, pi))) = self.timers.peek() {
            match self.part_deadline(ti, pi, sending) {
                Some(d) if d == t => {
                    at(t);
                    break;
                }
                Some(d) => {
                    self.timers.pop();
                    self.timers.push(Reverse((d, ti, pi)));
                }
                None => {
                    self.timers.pop();
                }
            }
        }
        #[cfg(debug_assertions)]
        debug_assert_eq!(best, self.poll_timeout_scan(), "producer deadline heap");
        best
    }

    /// The same as `poll_timeout` by scanning every partition: checks the heap in debug
    /// builds.
    #[cfg(debug_assertions)]
    fn poll_timeout_scan(&self) -> Option<Instant> {
        let mut best = self.non_partition_deadline();
        let mut at = |t: Instant| best = Some(best.map_or(t, |b| b.min(t)));
        let sending = self.sending();
        for (ti, t) in self.topics.iter().enumerate() {
            for pi in 0..t.parts.len() {
                if let Some(d) = self.part_deadline(ti, pi, sending) {
                    at(d);
                }
            }
        }
        best
    }

    /// Fails everything whose delivery timeout passed and that is not in flight.
    fn expire(&mut self, now: Instant) {
        self.fail_missing(now);
        let after = self.cfg.delivery_timeout;
        while self.pending.front().is_some_and(|p| p.deadline <= now) {
            if let Some(p) = self.pending.pop_front() {
                self.buffered = self.buffered.saturating_sub(p.size);
                let topic = self
                    .topics
                    .get_mut(p.topic)
                    .map(|t| {
                        t.pending = t.pending.saturating_sub(1);
                        t.name.to_string()
                    })
                    .unwrap_or_default();
                let known = self.topics.get(p.topic).is_some_and(|t| t.count > 0);
                let err = if known {
                    DeliveryError::Timeout { after, last: None }
                } else {
                    DeliveryError::UnknownTopic { topic }
                };
                self.emit_failure(p.id, err);
            }
        }
        for ti in 0..self.topics.len() {
            let parts = self.topics.get(ti).map_or(0, |t| t.parts.len());
            for pi in 0..parts {
                while let Some(ps) = self.part_mut(ti, pi) {
                    if ps.queue.front().is_none_or(|b| b.deadline > now) {
                        break;
                    }
                    let Some(b) = ps.queue.pop_front() else {
                        break;
                    };
                    let last = b.last_error.clone().map(Box::new);
                    self.fail_batch(
                        ti,
                        pi,
                        b,
                        DeliveryError::Timeout { after, last },
                        BatchStage::Closed,
                    );
                }
                let expired = self
                    .part(ti, pi)
                    .and_then(|ps| ps.open.as_ref())
                    .is_some_and(|b| !b.slots.is_empty() && b.deadline <= now);
                if expired && let Some(b) = self.part_mut(ti, pi).and_then(|ps| ps.open.take()) {
                    self.fail_batch(
                        ti,
                        pi,
                        b,
                        DeliveryError::Timeout { after, last: None },
                        BatchStage::Open,
                    );
                }
                self.touch(ti, pi);
            }
        }
    }

    /// Starts a flush; [`Event::Flushed`] follows once every record produced so far has its
    /// outcome.
    pub(crate) fn flush(&mut self, now: Instant) -> FlushId {
        self.next_flush += 1;
        let id = self.next_flush;
        let upto = self.next_id + 1;
        self.flush_upto = self.flush_upto.max(upto);
        self.flushes.push_back((id, upto));
        self.dirty = true;
        self.check_flushes(now);
        FlushId(id)
    }

    /// Stops accepting records, flushes, and fails what remains at `deadline`.
    pub(crate) fn close(&mut self, now: Instant, timeout: Duration) {
        if self.closed || self.closing.is_some() {
            return;
        }
        self.closing = Some(now + timeout);
        self.flush_upto = self.next_id + 1;
        self.dirty = true;
        self.check_flushes(now);
    }

    fn check_flushes(&mut self, _now: Instant) {
        let min = self.min_outstanding();
        while let Some(&(id, upto)) = self.flushes.front() {
            if min < upto {
                break;
            }
            self.flushes.pop_front();
            self.events.push_back(Event::Flushed { id: FlushId(id) });
        }
        if self.closing.is_some() && min == u64::MAX {
            self.closing = None;
            self.closed = true;
            self.events.push_back(Event::ProducerClosed { failed: 0 });
        }
    }

    /// The smallest id of a record without an outcome (`u64::MAX` if none).
    fn min_outstanding(&self) -> u64 {
        let mut min = self.pending.front().map_or(u64::MAX, |p| p.id);
        for t in &self.topics {
            for ps in &t.parts {
                if let Some(b) = &ps.open {
                    min = min.min(b.first_id());
                }
                for b in &ps.queue {
                    min = min.min(b.first_id());
                }
            }
        }
        for f in self.inflight.values() {
            if let Flight::Produce { sent, .. } = f {
                for s in sent {
                    if !s.batch.reported {
                        min = min.min(s.batch.first_id());
                    }
                }
            }
        }
        min
    }

    /// Fails every record without an outcome with `error` and forgets the requests in flight
    /// (their answers are ignored). Used by close (deadline passed) and the client's `close`.
    pub(crate) fn abort(&mut self, error: DeliveryError, net: &Net) {
        let mut failed = 0u64;
        while let Some(p) = self.pending.pop_front() {
            failed += 1;
            self.emit_failure(p.id, error.clone());
        }
        // Every batch still holding records, failed oldest first so that outcomes keep the
        // order the records were produced in (per partition, as a caller expects).
        let mut failing: Vec<(usize, usize, Batch, BatchStage)> = Vec::new();
        for ti in 0..self.topics.len() {
            let parts = self.topics.get(ti).map_or(0, |t| t.parts.len());
            for pi in 0..parts {
                let Some(ps) = self.part_mut(ti, pi) else {
                    continue;
                };
                ps.in_flight = 0;
                let open = ps.open.take();
                failing.extend(ps.queue.drain(..).map(|b| (ti, pi, b, BatchStage::Closed)));
                failing.extend(open.map(|b| (ti, pi, b, BatchStage::Open)));
            }
        }
        for (seq, f) in self.inflight.drain() {
            if let Flight::Produce { sent, .. } = f {
                // Written and never answered: they may have been written.
                let written = net.was_written(seq);
                failing.extend(sent.into_iter().map(|mut s| {
                    s.batch.maybe_written |= written;
                    (s.topic, s.part, s.batch, BatchStage::Closed)
                }));
            }
        }
        failing.sort_by_key(|(_, _, b, _)| b.first_id());
        for (ti, pi, b, stage) in failing {
            if !b.reported {
                failed += b.slots.len() as u64;
            }
            self.fail_batch(ti, pi, b, error.clone(), stage);
        }
        if let Some(i) = &mut self.idem
            && i.pid == PidState::Requested
        {
            i.pid = PidState::Needed(None);
        }
        self.buffered = 0;
        while let Some((id, _)) = self.flushes.pop_front() {
            self.events.push_back(Event::Flushed { id: FlushId(id) });
        }
        // Exactly one ProducerClosed per producer, used or not, whether `close_producer`
        // finished it earlier (then it was already said) or this abort does.
        let first = !self.closed;
        self.closing = None;
        self.closed = true;
        if first {
            self.events.push_back(Event::ProducerClosed { failed });
        }
    }
}
