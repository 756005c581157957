//! A batch of one partition's records: its bytes (being built, then finished), the id and
//! timestamp of each record in it, and what the sender learnt about it on the way (attempts,
//! errors, whether a request carrying it may have been written).

use super::DeliveryError;
use super::idempotence::Stamp;
use crate::trace::TraceIds;
use bytes::Bytes;
use std::time::Instant;
use stellflow_proto::record::BatchBuilder;

/// Bytes a batch adds around its records: the SRFB envelope (37) and the v1 header (57).
pub(crate) const BATCH_OVERHEAD: usize = 37 + 57;

/// One record of a batch, as the producer remembers it: what its outcome is reported with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchRecord {
    /// The [`super::ProduceId`] the caller was given.
    pub id: u64,
    /// The record's timestamp (ms), as written into the batch.
    pub timestamp: i64,
}

/// Whether a batch that fails was closed (counted in its partition's pipeline) or was still
/// the open one ([`super::accumulator::Accumulator::fail_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchStage {
    /// Closed: a finished blob, counted in the partition's pipeline.
    Closed,
    /// The partition's open batch, not counted yet.
    Open,
}

/// One batch: open (a builder) or closed (a finished blob).
#[derive(Debug)]
pub(crate) struct Batch {
    /// Increases with every batch of the producer: retries go back in this order.
    pub serial: u64,
    pub builder: Option<BatchBuilder>,
    pub blob: Bytes,
    pub records: Vec<BatchRecord>,
    /// Bytes counted against `buffer_memory`.
    pub bytes: usize,
    pub created: Instant,
    pub deadline: Instant,
    pub attempts: u32,
    /// Consecutive 21 answers (lost producer state) for this batch.
    pub lost_state: u32,
    pub retry_at: Option<Instant>,
    /// `retry_at` is only a backoff after an error that asked for fresh metadata (a leader
    /// error, a lost connection): when the metadata names a new leader for the partition the
    /// backoff ends at once (Kafka's KIP-951), as nothing the backoff waits for remains.
    pub awaits_leader: bool,
    pub stamp: Stamp,
    pub last_error: Option<DeliveryError>,
    /// Outcomes already reported (acks = 0).
    pub reported: bool,
    /// A request carrying this batch was written and never answered (timed out, or its
    /// connection died): the records may be in the log whatever happens next, so a failure
    /// is reported as [`DeliveryError::MaybeWritten`].
    pub maybe_written: bool,
    /// Idempotence: the request that carried this batch was written on this connection of
    /// this broker slot and never answered, so it may still be executing on the broker. The
    /// batch is not re-sent before the broker answered on a newer connection
    /// ([`crate::net::Net::answered_since`]).
    pub in_doubt: Option<(usize, crate::request::ConnId)>,
    /// The trace context of its first record that had one: its Produce request carries it
    /// (see [`crate::DriverExt::with_trace`]).
    pub trace: Option<TraceIds>,
}

impl Batch {
    /// Its size on the wire: as encoded so far, or the finished blob's.
    pub(crate) fn size(&self) -> usize {
        match &self.builder {
            Some(b) => b.encoded_size(),
            None => self.blob.len(),
        }
    }

    /// The id of its first record (`u64::MAX` when empty).
    pub(crate) fn first_id(&self) -> u64 {
        self.records.first().map_or(u64::MAX, |s| s.id)
    }

    /// Its record count.
    pub(crate) fn count(&self) -> i32 {
        i32::try_from(self.records.len()).unwrap_or(i32::MAX)
    }
}
