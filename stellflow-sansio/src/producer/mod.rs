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
//! Internals — each part owns its state, and [`ProducerCore`] composes them:
//!
//! * `accumulator` ([`accumulator::Accumulator`]): the batches of every partition (linger,
//!   `batch_size`), the records waiting for metadata, the buffer (`buffer_memory`), and the
//!   batches' deadlines; with `topics` (topics and partitions), `batch`, `partitioning`,
//!   `pool` (buffered bytes, recycled memory), `deadlines` and `waiting`;
//! * `sender` ([`sender::Sender`]): Produce requests per leader, the requests in flight,
//!   their answers, retries, the in-doubt rule and the producer id;
//! * [`idempotence`]: the producer id's state, sequence numbers and epoch bumps;
//! * `outcomes` ([`outcomes::Outcomes`]): the events for the driver and the flushes;
//! * `missing` ([`missing::MissingTopics`]): topics no broker knows;
//! * [`partitioner`]: Java/Go-compatible hashes, sticky, round robin.

pub(crate) mod accumulator;
mod batch;
mod clock;
mod deadlines;
mod error;
pub(crate) mod idempotence;
mod lifecycle;
pub(crate) mod missing;
pub(crate) mod outcomes;
mod owned;
mod partitioning;
mod pool;
mod readiness;
#[cfg(test)]
mod scale_tests;
pub(crate) mod sender;
mod topics;
mod waiting;

pub use crate::delivery::{DeliveryError, FlushId, ProduceId, ProducedBatch, RecordMetadata};
pub(crate) use crate::partitioner;
pub use crate::producer_config::{Acks, BatchFormat, ProducerConfig};
pub use crate::producer_record::{ProducerRecord, RecordHeader};
pub use error::ProduceError;
pub use owned::{IntoRecordBytes, Record};
pub use partitioner::{KeyedPartitioner, KeylessPartitioner, Partitioner, fnv1a32, java_hash};

use crate::event::Event;
use crate::hooks::{HeaderSink, SentRecord};
use crate::net::Completion;
use crate::request::RequestId;
use crate::shared::Shared;
use accumulator::Accumulator;
use missing::MissingTopics;
use outcomes::Outcomes;
use sender::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_proto::rng::Rng;

/// The producer half of the sans-IO core, held by [`crate::Client`] (the adapters'
/// `Producer` handles drive it through the client). Its steps take the client's shared
/// state first, `(sh, now, ..)` (ARCHITECTURE decision 29).
#[derive(Debug)]
pub(crate) struct ProducerCore {
    /// The batches, the records waiting for metadata, the buffer and the batch deadlines.
    acc: Accumulator,
    /// The requests in flight, their answers and retries, the producer id.
    sender: Sender,
    /// The events for the driver, and the flushes.
    outcomes: Outcomes,
    /// Topics no broker knows (the wait for them, their creation).
    missing: MissingTopics,
    /// The seeded random source of the sticky partitioner and the retry jitter.
    rng: Rng,
    /// `close_producer` was called: what has no outcome at this instant fails.
    closing: Option<Instant>,
    /// Closed: every record has its outcome and `produce` refuses new ones.
    closed: bool,
    /// Headers the hooks add to the record being produced (reused).
    header_sink: HeaderSink,
}

impl ProducerCore {
    /// A producer for `cfg` (already validated); `request_timeout` is the client's.
    pub(crate) fn new(cfg: ProducerConfig, request_timeout: Duration, seed: u64) -> Self {
        let sender = Sender::new(cfg.clone(), request_timeout);
        let missing = MissingTopics::new(cfg.metadata_max_wait, cfg.create_missing_topics);
        ProducerCore {
            acc: Accumulator::new(cfg, sender.identity()),
            sender,
            outcomes: Outcomes::default(),
            missing,
            rng: Rng::new(seed),
            closing: None,
            closed: false,
            header_sink: HeaderSink::default(),
        }
    }

    /// Installs a custom partitioner.
    pub(crate) fn set_partitioner(&mut self, p: Box<dyn Partitioner>) {
        self.acc.set_partitioner(p);
    }

    /// Anchors the wall clock: `unix_ms` is the time at `now`.
    pub(crate) fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.acc.set_wall_clock(now, unix_ms);
    }

    /// Reports outcomes one [`Event::ProducedBatch`] per batch (`DriverExt::set_batch_outcomes`).
    pub(crate) fn set_batch_outcomes(&mut self, on: bool) {
        self.outcomes.batch_outcomes = on;
    }

    /// Bytes of records held now.
    pub(crate) fn buffered(&self) -> usize {
        self.acc.buffered()
    }

    /// Next event of the producer.
    #[inline]
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.outcomes.poll()
    }

    /// Whether `process` has something to do after a `produce`.
    #[inline]
    pub(crate) fn needs_attention(&self) -> bool {
        self.acc.needs_attention()
    }

    /// Whether the producer wants a metadata refresh (clears the wish).
    pub(crate) fn take_refresh_wish(&mut self) -> bool {
        self.acc.take_metadata_wish()
    }

    /// The produce hot path (see [`crate::Client::produce`]), with the producer hooks around
    /// it when there are any.
    #[inline]
    pub(crate) fn produce(
        &mut self,
        sh: &Shared,
        now: Instant,
        rec: &ProducerRecord<'_>,
    ) -> Result<ProduceId, ProduceError> {
        if sh.hooks.producer.is_empty() {
            // Returned as it comes: converting the result here (dropping the partition)
            // makes the caller copy it whole right after this wrote it in pieces.
            return self.produce_record(sh, now, rec, &mut None);
        }
        self.produce_hooked(sh, now, rec)
    }

    /// `produce` with hooks: headers they add go into the record's copy in its batch (the
    /// caller's record is not changed), and `on_send` follows once it is accepted.
    #[cold]
    fn produce_hooked(
        &mut self,
        sh: &Shared,
        now: Instant,
        rec: &ProducerRecord<'_>,
    ) -> Result<ProduceId, ProduceError> {
        let hooks = &sh.hooks.producer;
        let trace = sh.trace.as_ref();
        let mut sink = std::mem::take(&mut self.header_sink);
        sink.clear();
        for h in hooks {
            h.add_headers(rec, trace, &mut sink);
        }
        let mut partition = None;
        let result = if sink.is_empty() {
            self.produce_record(sh, now, rec, &mut partition)
        } else {
            let mut headers = Vec::with_capacity(rec.headers.len() + sink.len());
            headers.extend_from_slice(rec.headers);
            headers.extend(sink.iter());
            let with = ProducerRecord {
                headers: &headers,
                ..*rec
            };
            self.produce_record(sh, now, &with, &mut partition)
        };
        if let Ok(id) = &result {
            let sent = SentRecord {
                id: *id,
                record: rec,
                partition,
                trace,
            };
            hooks.iter().for_each(|h| h.on_send(&sent));
        }
        self.header_sink = sink;
        result
    }

    /// Accepts one record: its id; its partition goes to `partition` when its topic's
    /// metadata is known (for the hooks, the only ones who need it).
    #[inline]
    fn produce_record(
        &mut self,
        sh: &Shared,
        now: Instant,
        rec: &ProducerRecord<'_>,
        partition: &mut Option<i32>,
    ) -> Result<ProduceId, ProduceError> {
        // A closing or fenced producer takes nothing.
        if self.closing.is_some() || self.closed {
            return Err(ProduceError::Closed);
        }
        if self.sender.fenced() {
            return Err(ProduceError::Fenced);
        }
        let parts = (&mut self.rng, &mut self.outcomes);
        self.acc.take(sh, now, rec, parts, partition)
    }

    /// Runs the sender if something may be sendable; returns whether requests were submitted.
    pub(crate) fn process(&mut self, sh: &mut Shared, now: Instant) -> bool {
        let (acc, out) = (&mut self.acc, &mut self.outcomes);
        acc.sync_metadata(now, &sh.metadata, &mut self.rng, out);
        if acc.take_leaders_moved() && !self.closed {
            self.sender.reroute(sh, acc);
        }
        let mut sent = false;
        if !self.closed && acc.take_wake() {
            sent = (self.sender).drain(sh, now, acc, out, self.closing.is_some());
        }
        if self.outcomes.flushing() || self.closing.is_some() {
            self.check_flushes();
        }
        sent
    }

    /// A request of the producer completed.
    pub(crate) fn on_completion(&mut self, sh: &mut Shared, now: Instant, c: Completion) {
        let (acc, out, rng) = (&mut self.acc, &mut self.outcomes, &mut self.rng);
        self.sender.on_completion(sh, now, c, acc, out, rng);
    }

    /// Fires due deadlines: delivery timeouts, linger, retries, the close deadline.
    pub(crate) fn handle_timeout(&mut self, sh: &Shared, now: Instant) {
        self.acc.wake();
        self.missing
            .fail_due(now, &mut self.acc, &mut self.outcomes);
        self.acc.expire(now, &mut self.outcomes);
        if let Some(deadline) = self.closing
            && deadline <= now
        {
            self.abort(sh, DeliveryError::Closed);
        }
    }

    /// The earliest instant at which something is due: a batch's deadline, the oldest record
    /// waiting for metadata, a topic's wait, the producer-id retry, the close deadline.
    pub(crate) fn poll_timeout(&mut self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        debug_assert_eq!(
            self.acc.identity(),
            self.sender.identity(),
            "identity in step"
        );
        [
            self.closing,
            self.acc.deadline(),
            self.missing.deadline(&self.acc.topics),
            self.sender.pid_retry_at(&self.acc),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// After new metadata: starts the wait for topics every broker confirmed unknown, and
    /// returns them with the partition count to create them with when
    /// `producer.create_missing_topics` says so.
    pub(crate) fn after_metadata(
        &mut self,
        sh: &Shared,
        now: Instant,
    ) -> Option<(Vec<Arc<str>>, i32)> {
        (self.missing).after_metadata(now, &mut self.acc.topics, &sh.metadata)
    }

    /// Notes `id`, a topic creation the producer started: its answer is the producer's.
    pub(crate) fn creating_topic(&mut self, id: RequestId) {
        self.missing.creating_topic(id);
    }

    /// Whether `id` is a topic creation the producer started (then forgets it).
    pub(crate) fn owns_creation(&mut self, id: RequestId) -> bool {
        self.missing.owns_creation(id)
    }
}
