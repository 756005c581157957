//! Batch sends: the outcome of `Producer::enqueue_all` ([`BatchDelivery`], answering a
//! [`BatchOutcome`]) and the table that collects a batch's per-record outcomes while its
//! records are on their way.
//!
//! A batch costs a constant number of allocations whatever its length: a small table of
//! sources (one per core batch that delivered records of the call, and one per run of records
//! refused at once), a few spans, one one-shot channel, and its entry in the table. Its
//! records take no slot of their own in the table: records fed to the core in one go get
//! consecutive produce ids and consecutive places in the outcome, so one [`Run`](collect::Run) (first id,
//! first index, length) stands for all of them, and an outcome finds its place by
//! arithmetic. The core reports a whole batch of the partition at once
//! (`Event::ProducedBatch`), whose ids mostly fall in one run after the other, so finding the
//! run is one comparison per record, and the batch becomes one source. A stretch of its
//! records with consecutive ids and one timestamp is written as one [`Span`](outcome::Span) (place, length,
//! source, first index in the blob, timestamp) however long; only stretches shorter than
//! `SPAN_MIN` (keyed records spread over partitions) are written record by record, into a
//! vector of 16-byte slots made when the first one comes. The [`RecordMetadata`](crate::RecordMetadata) of a record
//! is built only when the caller asks for it.

mod collect;
mod delivery;
mod iter;
mod outcome;
#[cfg(test)]
mod tests;

pub(crate) use collect::{Batches, Fed, Segment};
pub use delivery::BatchDelivery;
pub use iter::{BatchErrors, BatchOutcomeIntoIter, BatchOutcomeIter};
pub use outcome::BatchOutcome;
