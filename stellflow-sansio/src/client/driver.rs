//! [`DriverExt`]: the methods of [`Client`] that only the code driving it calls (an adapter's
//! driver loop, a test harness), kept apart from the application's commands.

use super::Client;
use super::consume::consumed;
use crate::consumer::RecordLease;
use crate::consumer_record::ConsumerRecord;
use crate::request::{ConnId, TraceContext};
use crate::shared::Shared;
use crate::trace::TraceIds;
use std::time::Instant;

/// The driver's part of the contract on [`Client`] (see "The driver contract" there): knobs and
/// shortcuts that the code moving bytes, time and trace context between the core and the world
/// calls, and an application never needs. The adapters call them; bring the trait into scope
/// (`use stellflow_sansio::DriverExt;`) when you write your own driver.
///
/// The methods are the client's own (a trait only groups them: nothing is added on the way).
pub trait DriverExt {
    /// Bytes still missing of the response frame `conn` has started to receive (0 when no
    /// frame is partly received, or its length is not known yet). A driver that reads into one
    /// buffer can make room for that much before it reads on, so the frame stays in one
    /// allocation and is never copied (see [`Client::handle_input`]).
    fn input_wanted(&self, conn: ConnId) -> usize;

    /// Tells the core the wall-clock time: `unix_ms` (ms since the Unix epoch) at `now`.
    /// Records without a timestamp get `unix_ms + (their now − now)`; without this call they
    /// get −1. The core never reads a clock itself, so the driver supplies it.
    fn set_wall_clock(&mut self, now: Instant, unix_ms: i64);

    /// Reports produce outcomes one [`crate::Event::ProducedBatch`] per batch instead of one
    /// [`crate::Event::Produced`] per record (off by default). A driver that completes whole
    /// batches at once turns it on (the adapters do): the core then makes one event, not one
    /// per record, and the driver finds its waiting callers a batch at a time. Records that
    /// fail before they reach a batch still have their own `Event::Produced`; either way,
    /// every accepted record has exactly one outcome. Hooks see each record's outcome as
    /// before.
    ///
    /// ```
    /// use std::time::Instant;
    /// use stellflow_sansio::{Client, ClientConfig, DriverExt, Event, Output};
    /// let now = Instant::now();
    /// let mut client = Client::new(ClientConfig::new("broker-1:9092").unwrap(), now, 1).unwrap();
    /// client.set_batch_outcomes(true);
    /// let mut buf = bytes::BytesMut::new();
    /// loop {
    ///     match client.poll_output(now, &mut buf) {
    ///         Output::Event(Event::ProducedBatch(batch)) => {
    ///             for (id, outcome) in batch.outcomes() {
    ///                 # let _ = (id, outcome);
    ///             }
    ///         }
    ///         Output::Timeout(_) => break,
    ///         _ => { /* connections, bytes and other events: see `Client::poll_output` */ }
    ///     }
    /// }
    /// ```
    fn set_batch_outcomes(&mut self, on: bool);

    /// Runs `command` (one or more of the client's commands, e.g. [`Client::produce`] or
    /// [`Client::commit`]) as part of the application call whose trace context is `trace`
    /// (`None`: none). The context is an argument of this call only: it applies to what
    /// `command` does and to nothing after it returns. A driver that knows the caller's span
    /// (the adapters, with their `opentelemetry` feature) passes it with each command; the
    /// core itself never looks for one.
    ///
    /// It goes into the request header's `traceId`, `spanId` and `traceFlags`
    /// (PROTOCOL.md §2.1) of what those commands send:
    ///
    /// * a record ([`Client::produce`]) keeps it until its batch is sent; a Produce
    ///   request carries the context of its **first** batch that has one, and a batch that of
    ///   its first record that has one (a request carries one context, and several spans'
    ///   records may share it; retries keep it);
    /// * an OffsetCommit carries its commit command's ([`Client::commit`] and the
    ///   other commit calls; auto-commits and the close commit carry none), and the
    ///   ListOffsets or OffsetFetch that resolves a [`Client::seek`] carries the seek's;
    /// * admin commands' requests and raw requests carry it unless their
    ///   [`crate::RequestOptions::trace`] names one.
    ///
    /// Producer hooks see it too ([`crate::ProducerHook::add_headers`]): with
    /// [`crate::TracePropagation`] registered, records carry it in a `traceparent` header.
    ///
    /// ```
    /// use std::time::Instant;
    /// use stellflow_sansio::{Client, ClientConfig, DriverExt, ProducerRecord, TraceIds};
    /// let now = Instant::now();
    /// let mut client = Client::new(ClientConfig::new("broker-1:9092").unwrap(), now, 1).unwrap();
    /// let span = TraceIds::new([7; 16], [9; 8], 1);
    /// let record = ProducerRecord::new("orders", b"order 1");
    /// let id = client.with_trace(span.as_ref(), |c| c.produce(now, &record));
    /// assert!(id.is_ok());
    /// ```
    fn with_trace<T>(
        &mut self,
        trace: Option<&TraceIds>,
        command: impl FnOnce(&mut Client) -> T,
    ) -> T;

    /// The trace context the Fetch requests sent from now on carry (`None`: none). Fetching
    /// runs ahead of the application's polls, so no Fetch belongs to one poll; the adapters
    /// call this on every poll with the poll's span, so a Fetch carries the context of the
    /// latest poll made before it was sent.
    fn set_fetch_trace(&mut self, trace: Option<TraceIds>);

    /// Lends out up to `max` records of the blobs first in line, to be decoded away from the
    /// client and then delivered by [`DriverExt::redeem_lease`] (see [`RecordLease`] for the
    /// contract). An adapter that guards the client with a lock decodes outside it, so the
    /// lock is held only to lend and to redeem. `None` when nothing is buffered.
    fn lease_records(&self, max: usize) -> Option<RecordLease>;

    /// Delivers the records of `lease` as [`Client::poll_records`] would have (decoding them
    /// first if [`RecordLease::decode`] was not called): positions move past them and their
    /// buffer space is freed. `None`, with nothing delivered or changed, when the lease is
    /// stale (the records it lent were taken or moved meanwhile): lease again.
    fn redeem_lease(&mut self, lease: RecordLease) -> Option<Vec<ConsumerRecord>>;
}

impl DriverExt for Client {
    #[inline]
    fn input_wanted(&self, conn: ConnId) -> usize {
        self.shared.net.input_wanted(conn)
    }

    #[inline]
    fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.producer.set_wall_clock(now, unix_ms);
    }

    #[inline]
    fn set_batch_outcomes(&mut self, on: bool) {
        self.producer.set_batch_outcomes(on);
    }

    #[inline]
    fn with_trace<T>(
        &mut self,
        trace: Option<&TraceIds>,
        command: impl FnOnce(&mut Client) -> T,
    ) -> T {
        let Some(trace) = trace else {
            return command(self);
        };
        // The features read the context of the command they run from the state they are
        // lent; it is there for this call only.
        self.shared.trace = Some(trace.clone());
        let r = command(self);
        self.shared.trace = None;
        r
    }

    #[inline]
    fn set_fetch_trace(&mut self, trace: Option<TraceIds>) {
        let c = &mut self.consumer;
        if c.fetch_trace != trace {
            c.fetch_options.trace = trace.as_ref().map(TraceContext::from);
            c.fetch_trace = trace;
        }
    }

    #[inline]
    fn lease_records(&self, max: usize) -> Option<RecordLease> {
        self.consumer.lease_records(max)
    }

    #[inline]
    fn redeem_lease(&mut self, lease: RecordLease) -> Option<Vec<ConsumerRecord>> {
        let Client {
            consumer,
            shared: Shared { events, net, .. },
            ..
        } = self;
        let records = consumer.redeem_lease(events, &mut net.counters, lease);
        if let Some(r) = &records
            && !r.is_empty()
            && !self.shared.hooks.consumer.is_empty()
        {
            consumed(&self.shared.hooks, r);
        }
        records
    }
}
