//! Producer and consumer hooks (Java's interceptors, franz-go's hooks): code the application
//! registers on [`crate::ClientConfig::hooks`] to see every record sent, every delivery
//! outcome, every record consumed and every commit, for metrics, tracing or auditing.
//!
//! The core calls them, not the adapters: one implementation serves tokio, smol, blocking and
//! a deterministic simulation alike, and each call sits where the core decides the thing
//! happened (a record accepted, an outcome handed out, records delivered, a commit answered),
//! so "exactly once per record" is the core's invariant rather than each adapter's. Hooks run
//! inside the command or output that triggers them — in the adapters under the client's lock —
//! so keep them short: count, stamp, hand off. With no hook registered each call site costs
//! one emptiness check.

use crate::consumer_event::{CommitId, CommitKind, ConsumerError};
use crate::consumer_record::ConsumerRecord;
use crate::delivery::{DeliveryError, ProduceId, RecordMetadata};
use crate::fetched_blob::FetchedBlob;
use crate::offset_model::Position;
use crate::producer_record::ProducerRecord;
use crate::topic_partition::TopicPartition;
use crate::trace::{TRACEPARENT, TRACESTATE, TraceIds};
use std::sync::Arc;

/// A record the producer accepted, as [`ProducerHook::on_send`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct SentRecord<'a> {
    /// The id its acknowledgement ([`ProducerHook::on_acknowledgement`]) will carry.
    pub id: ProduceId,
    /// The record as the application gave it (the headers hooks added are not in it).
    pub record: &'a ProducerRecord<'a>,
    /// The partition it goes to; `None` while its topic's metadata is awaited (a record sent
    /// to a topic the client has not seen yet).
    pub partition: Option<i32>,
    /// The trace context of the call that sent it (the adapters' `opentelemetry` feature
    /// reads the caller's span; a driver of the core hands it to `DriverExt::with_trace`).
    pub trace: Option<&'a TraceIds>,
}

/// A record's outcome, as [`ProducerHook::on_acknowledgement`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Acknowledgement<'a> {
    /// The id [`SentRecord::id`] had.
    pub id: ProduceId,
    /// Where it was written, or why it was not (the error the application gets too).
    pub result: Result<&'a RecordMetadata, &'a DeliveryError>,
}

/// A commit's outcome, as [`ConsumerHook::on_commit`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct CommitOutcome<'a> {
    /// The commit's id.
    pub id: CommitId,
    /// Who asked for it (a call, auto-commit, close).
    pub kind: CommitKind,
    /// The positions committed, or why the commit failed.
    pub result: Result<&'a [(TopicPartition, Position)], &'a ConsumerError>,
}

/// Headers a hook adds to a record before it is copied into its batch
/// ([`ProducerHook::add_headers`]). Reused from record to record: adding does not allocate
/// once it has grown to the largest record's needs.
#[derive(Debug, Default)]
pub struct HeaderSink {
    bytes: Vec<u8>,
    /// Per header: the end of its key in `bytes`, and the end of its value (`None`: null).
    ends: Vec<(usize, Option<usize>)>,
}

impl HeaderSink {
    /// Adds a header.
    pub fn push(&mut self, key: &str, value: Option<&[u8]>) {
        self.bytes.extend_from_slice(key.as_bytes());
        let key_end = self.bytes.len();
        let value_end = value.map(|v| {
            self.bytes.extend_from_slice(v);
            self.bytes.len()
        });
        self.ends.push((key_end, value_end));
    }

    /// How many headers were added.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether none were added.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// The headers added, as `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&[u8]>)> {
        let mut start = 0;
        self.ends.iter().map(move |&(key_end, value_end)| {
            let key = self.bytes.get(start..key_end).unwrap_or_default();
            let key = std::str::from_utf8(key).unwrap_or_default();
            let value = value_end.map(|end| self.bytes.get(key_end..end).unwrap_or_default());
            start = value_end.unwrap_or(key_end);
            (key, value)
        })
    }
}

/// Sees what the producer sends and what becomes of it. Every method has an empty default;
/// implement the ones you need. Register with [`Hooks::producer`].
pub trait ProducerHook: Send + Sync + 'static {
    /// Adds headers to a record before it is sized and copied into its batch (trace
    /// propagation, an audit stamp). Called for every record `produce` is given, so possibly
    /// more than once for one record — a record refused because the buffer was full and
    /// offered again — and for records then refused: add headers here, count in
    /// [`ProducerHook::on_send`].
    fn add_headers(
        &self,
        _record: &ProducerRecord<'_>,
        _trace: Option<&TraceIds>,
        _headers: &mut HeaderSink,
    ) {
    }

    /// Exactly once per record the producer accepted (the `produce` call returned its id).
    fn on_send(&self, _record: &SentRecord<'_>) {}

    /// Exactly once per accepted record, when its outcome is handed out (as the core's
    /// `Event::Produced` leaves `poll_output`; in the adapters, before the record's `send` or
    /// `Delivery` completes): its metadata, or the error the application gets.
    fn on_acknowledgement(&self, _ack: &Acknowledgement<'_>) {}
}

/// Sees what the consumer delivers and commits. Every method has an empty default; register
/// with [`Hooks::consumer`].
pub trait ConsumerHook: Send + Sync + 'static {
    /// Records delivered to the application, once each, as they leave the core
    /// (the adapters' `poll`, `recv` and stream; the core's `poll_record`, `poll_records` and
    /// `redeem_lease`).
    fn on_consume(&self, _records: &[ConsumerRecord]) {}

    /// A blob handed over whole (the adapters' `poll_blobs`, the core's `poll_blob`):
    /// `records` of its records were not delivered before (the count its batches declare).
    /// Its records are not decoded for the hook; iterate a blob only if you must.
    fn on_consume_blob(&self, _blob: &FetchedBlob, _records: u64) {}

    /// Exactly once per commit, when its outcome is handed out (as the
    /// [`crate::ConsumerEvent::CommitCompleted`] leaves the core's `poll_output`).
    fn on_commit(&self, _commit: &CommitOutcome<'_>) {}
}

/// The hooks of a client, in [`crate::ClientConfig::hooks`]; each is called in the order it
/// was registered. Empty by default.
///
/// ```
/// # use stellflow_sansio::{ClientConfig, ProducerHook, SentRecord, TracePropagation};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// #[derive(Default)]
/// struct Count(AtomicU64);
/// impl ProducerHook for Count {
///     fn on_send(&self, _: &SentRecord<'_>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let mut config = ClientConfig::new("broker-1:9092").unwrap();
/// config.hooks.producer(Count::default()).producer(TracePropagation);
/// assert_eq!(config.hooks.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct Hooks {
    pub(crate) producer: Vec<Arc<dyn ProducerHook>>,
    pub(crate) consumer: Vec<Arc<dyn ConsumerHook>>,
}

impl Hooks {
    /// Registers a producer hook.
    pub fn producer(&mut self, hook: impl ProducerHook) -> &mut Self {
        self.producer.push(Arc::new(hook));
        self
    }

    /// Registers a producer hook shared with other code (e.g. to read its counts).
    pub fn producer_shared(&mut self, hook: Arc<dyn ProducerHook>) -> &mut Self {
        self.producer.push(hook);
        self
    }

    /// Registers a consumer hook.
    pub fn consumer(&mut self, hook: impl ConsumerHook) -> &mut Self {
        self.consumer.push(Arc::new(hook));
        self
    }

    /// Registers a consumer hook shared with other code.
    pub fn consumer_shared(&mut self, hook: Arc<dyn ConsumerHook>) -> &mut Self {
        self.consumer.push(hook);
        self
    }

    /// How many hooks are registered.
    pub fn len(&self) -> usize {
        self.producer.len() + self.consumer.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("producer", &self.producer.len())
            .field("consumer", &self.consumer.len())
            .finish()
    }
}

/// Record-level trace propagation as a producer hook: writes the W3C `traceparent` (and
/// `tracestate`, when the context has one) header into every record sent with a trace
/// context (the adapters' `opentelemetry` feature passes the current span's; a driver of the
/// core, the context it hands to `DriverExt::with_trace`), unless the record already has a `traceparent`. Consumers read it back
/// with [`TraceIds::from_record_headers`] (the adapters: their `otel` module's
/// `record_context`). Opt-in: register it with [`Hooks::producer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TracePropagation;

impl ProducerHook for TracePropagation {
    fn add_headers(
        &self,
        record: &ProducerRecord<'_>,
        trace: Option<&TraceIds>,
        headers: &mut HeaderSink,
    ) {
        let Some(t) = trace else {
            return;
        };
        if record
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(TRACEPARENT))
        {
            return;
        }
        headers.push(TRACEPARENT, Some(t.traceparent().as_bytes()));
        if let Some(state) = &t.state {
            headers.push(TRACESTATE, Some(state.as_bytes()));
        }
    }
}

/// Calls the hooks an outcome leaving [`crate::Client::poll_output`] concerns: delivery
/// outcomes and commit outcomes (each event leaves once, so each is seen once).
pub(crate) fn on_event(hooks: &Hooks, event: &crate::Event) {
    match event {
        crate::Event::Produced { id, result } if !hooks.producer.is_empty() => {
            let ack = Acknowledgement {
                id: *id,
                result: result.as_ref(),
            };
            hooks
                .producer
                .iter()
                .for_each(|h| h.on_acknowledgement(&ack));
        }
        crate::Event::ProducedBatch(batch) if !hooks.producer.is_empty() => {
            for (id, result) in batch.outcomes() {
                let ack = Acknowledgement {
                    id,
                    result: result.as_ref(),
                };
                hooks
                    .producer
                    .iter()
                    .for_each(|h| h.on_acknowledgement(&ack));
            }
        }
        crate::Event::Consumer(crate::ConsumerEvent::CommitCompleted { id, kind, result })
            if !hooks.consumer.is_empty() =>
        {
            let outcome = CommitOutcome {
                id: *id,
                kind: *kind,
                result: result.as_ref().map(Vec::as_slice),
            };
            hooks.consumer.iter().for_each(|h| h.on_commit(&outcome));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sink_keeps_order_and_nulls() {
        let mut s = HeaderSink::default();
        s.push("a", Some(b"1"));
        s.push("bb", None);
        s.push("c", Some(b""));
        let got: Vec<_> = s.iter().collect();
        assert_eq!(
            got,
            vec![("a", Some(&b"1"[..])), ("bb", None), ("c", Some(&b""[..]))]
        );
        s.clear();
        assert!(s.is_empty());
    }

    #[test]
    fn propagation_writes_traceparent_once() {
        let t = TraceIds::new([7; 16], [9; 8], 1).unwrap().with_state("k=v");
        let mut s = HeaderSink::default();
        TracePropagation.add_headers(&ProducerRecord::new("t", b"v"), Some(&t), &mut s);
        let got: Vec<_> = s.iter().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, TRACEPARENT);
        assert_eq!(got[0].1, Some(t.traceparent().as_bytes()));
        assert_eq!(got[1], (TRACESTATE, Some(&b"k=v"[..])));
        // Already there: nothing added; no trace: nothing added.
        let mut s = HeaderSink::default();
        let own = [(TRACEPARENT, Some(&b"x"[..]))];
        let r = ProducerRecord::new("t", b"v").with_headers(&own);
        TracePropagation.add_headers(&r, Some(&t), &mut s);
        TracePropagation.add_headers(&ProducerRecord::new("t", b"v"), None, &mut s);
        assert!(s.is_empty());
    }
}
