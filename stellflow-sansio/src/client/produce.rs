//! The producer's commands on [`Client`]. The logic lives in the producer modules; these are
//! thin delegations that keep the drain rule (every command runs what became possible), and
//! the glue between the producer and admin (creating a missing topic), which only the client
//! sees both of.

use super::Client;
use crate::admin::AdminOutcome;
use crate::error::AdminError;
use crate::producer::{FlushId, Partitioner, ProduceError, ProduceId, ProducerRecord};
use crate::refresh::Urgency;
use crate::request::{RequestId, Target};
use std::time::{Duration, Instant};

impl Client {
    /// Queues one record for sending and returns its id at once; its outcome comes later as
    /// exactly one [`crate::Event::Produced`]. The record's bytes are copied into its
    /// partition's batch, so the caller keeps ownership.
    ///
    /// Errors mean the record was not queued and no event will follow:
    /// [`ProduceError::BufferFull`] (poll events and try again — adapters wait up to their
    /// maximum block time), [`ProduceError::RecordTooLarge`], an invalid topic name or
    /// partition, or a closed producer.
    ///
    /// ```
    /// use std::time::Instant;
    /// use stellflow_sansio::{Client, ClientConfig};
    /// use stellflow_sansio::ProducerRecord;
    /// let now = Instant::now();
    /// let mut client = Client::new(ClientConfig::new("broker-1:9092").unwrap(), now, 1).unwrap();
    /// let id = client.produce(now, &ProducerRecord::new("orders", b"hello")).unwrap();
    /// # let _ = id;
    /// ```
    pub fn produce(
        &mut self,
        now: Instant,
        record: &ProducerRecord<'_>,
    ) -> Result<ProduceId, ProduceError> {
        self.shared.last_now = now;
        if self.shared.closed {
            return Err(ProduceError::Closed);
        }
        let r = self.producer.produce(&self.shared, now, record);
        // The id is taken out and the result made again after the pass: a result held
        // across the call would be copied whole right after its callee wrote it in pieces, a
        // store-forwarding stall per record.
        match r {
            Ok(id) => {
                self.after_produce(now);
                Ok(id)
            }
            Err(e) => {
                self.after_produce(now);
                Err(e)
            }
        }
    }

    /// Runs the pass when the produce made something possible (a full batch, a wish for
    /// metadata).
    #[inline]
    fn after_produce(&mut self, now: Instant) {
        if self.producer.needs_attention() {
            self.process(now);
        }
    }

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
    /// use stellflow_sansio::{Client, ClientConfig, Event, Output};
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
    pub fn set_batch_outcomes(&mut self, on: bool) {
        self.producer.set_batch_outcomes(on);
    }

    /// Sends every batch at once (ignoring linger) and reports [`crate::Event::Flushed`] with
    /// the returned id when every record produced before this call has its outcome.
    pub fn flush(&mut self, now: Instant) -> FlushId {
        self.shared.last_now = now;
        let id = self.producer.flush();
        self.process(now);
        id
    }

    /// Closes the producer gracefully: `produce` fails with [`ProduceError::Closed`] from now
    /// on, everything buffered is sent at once, and whatever has no outcome `timeout` from now
    /// fails with [`crate::producer::DeliveryError::Closed`]. Ends with
    /// [`crate::Event::ProducerClosed`]. (The client's [`Client::close`] closes at once.)
    pub fn close_producer(&mut self, now: Instant, timeout: Duration) {
        self.shared.last_now = now;
        self.producer.close(now, timeout);
        self.process(now);
    }

    /// Replaces the partitioner for records without an explicit partition.
    pub fn set_partitioner(&mut self, partitioner: Box<dyn Partitioner>) {
        self.producer.set_partitioner(partitioner);
    }

    /// Tells the core the wall-clock time: `unix_ms` (ms since the Unix epoch) at `now`.
    /// Records without a timestamp get `unix_ms + (their now − now)`; without this call they
    /// get −1. The core never reads a clock itself.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.producer.set_wall_clock(now, unix_ms);
    }

    /// Bytes of records the producer holds (waiting, in flight or being retried), the figure
    /// bounded by `buffer_memory`.
    pub fn producer_buffered_bytes(&self) -> usize {
        self.producer.buffered()
    }

    /// The producer's part of [`Client::process`]: runs its sender and passes on its wish for a
    /// metadata refresh. Returns whether it submitted requests.
    pub(crate) fn producer_drive(&mut self, now: Instant) -> bool {
        let sent = self.producer.process(&mut self.shared, now);
        self.producer_after_metadata(now);
        if self.producer.take_refresh_wish() && !self.shared.closed {
            self.shared.refresher.request(Urgency::AfterBackoff);
        }
        sent
    }

    /// After new metadata: starts the producer's wait for topics every broker confirmed
    /// unknown, and creates them when `producer.create_missing_topics` says so.
    pub(crate) fn producer_after_metadata(&mut self, now: Instant) {
        let Some((topics, partitions)) = self.producer.after_metadata(&self.shared, now) else {
            return;
        };
        for topic in topics {
            tracing::info!(%topic, partitions, "creating the missing topic (producer.create_missing_topics)");
            match self.create_topic(now, &topic, partitions, Target::Any) {
                Ok(id) => self.producer.creating_topic(id.id()),
                Err(e) => tracing::warn!(%topic, "cannot create the missing topic: {e}"),
            }
        }
    }

    /// Whether `id` is a topic creation the producer started (its answer is the producer's,
    /// not the caller's): logs it and asks for metadata that names the topic.
    pub(crate) fn producer_takes_admin(
        &mut self,
        id: RequestId,
        result: &Result<AdminOutcome, AdminError>,
    ) -> bool {
        if !self.producer.owns_creation(id) {
            return false;
        }
        match result {
            Ok(_) => tracing::debug!("missing topic created"),
            Err(e) => tracing::warn!("cannot create the missing topic: {e}"),
        }
        self.shared.refresher.request(Urgency::Now);
        true
    }
}
