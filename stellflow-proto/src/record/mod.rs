//! Record data: the v1 batch, the SRFB envelope and the blob splitter (PROTOCOL.md §4).
//!
//! * Producing: [`BatchBuilder`] appends records into a `BytesMut` as a v1 batch, bare
//!   ([`Envelope::V1`], readable by the Java and Go SDKs) or inside the server-native SRFB
//!   envelope ([`Envelope::Srfb`], optionally gzip), with no allocation per record.
//! * Consuming: [`blob_records`] walks every record of one fetched blob (one offset) whatever
//!   its format, numbering records across all batches of the blob; [`split_blob`] yields the
//!   batches themselves. Keys, values and headers are zero-copy slices of the blob.
//! * Exact control: [`v1::V1BatchFields`] encodes a v1 batch with every field explicit;
//!   [`srfb`] encodes and validates envelopes exactly as the server does, and
//!   [`srfb::server_view`] is the server's view of any produced blob.
//!
//! Decoding never panics and never allocates from an untrusted length: every problem is a
//! [`BatchError`] naming the field at fault.

mod blob;
mod builder;
mod checksum;
mod cursor;
mod error;
mod parts;
pub mod srfb;
pub mod v1;
mod view;

pub use blob::{
    BlobBatch, BlobBatches, BlobFormat, BlobRecord, BlobRecords, blob_records,
    declared_record_count, sniff, split_blob,
};
pub use builder::{BatchBuilder, BatchParams, Envelope};
pub use error::BatchError;
pub use parts::RecordParts;
pub use srfb::{Compression, SrfbBatch, SrfbHeader, SrfbParams};
pub use v1::{Header, HeaderRef, Headers, Record, V1Batch, V1BatchHeader, V1Records, record_size};
pub use view::{HeaderViews, HeadersView, RecordView};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
