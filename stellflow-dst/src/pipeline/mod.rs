//! The producer and consumer workloads, on the real `Client::produce` and consumer APIs.
//!
//! Producer: records with explicit partitions and per-partition sequence numbers at random
//! times. Checked: exactly one `Produced` per accepted record within the delivery bound;
//! acknowledged positions grow with the sequence per partition; every acknowledged record is
//! in the leader's log at its `(offset, index)`; with idempotence no record is in the log
//! twice; linger, both ways: a batch's first record never hits the wire earlier than `linger`
//! after it was produced (unless a flush was asked for), and never later than
//! [`LINGER_SLACK`] after the batch is due and its partition could be sent (see
//! [`ProducerLoad`] for the precise rule).
//!
//! Consumer: one consumer (group subscription or manual assignment with commits), restarted
//! gracefully at random times. Checked: records of a partition come in strictly increasing
//! position within one incarnation; a record is delivered twice only when a restart (or a
//! group lease that lapsed, `PartitionsLost`) happened between its delivery and a successful
//! commit covering it; in the end every acknowledged
//! record (producer and raw) is delivered; with a healthy network an idle group member never
//! rejoins.
//!
//! One file per job: `producer.rs` (the producer workload and its log checks), `linger.rs` (its
//! linger checks, both ways), `consumer.rs` (the consumer workload); the shape and the bounds
//! they share are here.

use super::check::OutcomeBook;
use super::wire::Outstanding;
use super::workload::{Ledger, TOPIC};
use super::world::{ClientId, LinkView, World};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;
use stellflow_proto::messages::ProduceRequest;
use stellflow_proto::record::blob_records;
use stellflow_proto::{ApiKey, Reader, Wire};
use stellflow_sansio::{
    Acks, ClientConfig, ConsumerEvent, Event, OffsetReset, ProduceId, ProducerRecord,
    TopicPartition,
};
use stellflow_sim::rng::SimRng;

mod consumer;
mod linger;
mod producer;

pub use consumer::ConsumerLoad;
pub use producer::{ProducerLoad, leader_entries};

/// A record position: blob offset and index in the blob.
pub type Pos = (i64, u32);

/// Workload bits that enable the consumer (either bit; mask them to run without one).
pub const CONSUMER_BITS: u32 = 0b1100;
/// Workload bit that turns on producer idempotence (mask it to run without).
pub const IDEMPOTENCE_BIT: u32 = 0x10;

/// Which producer/consumer workloads a scenario runs, from its workload bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineShape {
    /// Run a producer client.
    pub producer: bool,
    /// Run a consumer client.
    pub consumer: bool,
    /// Producer idempotence.
    pub idempotent: bool,
    /// `acks = -1` (else 1).
    pub acks_all: bool,
    /// Consumer subscribes through the group (else manual assignment).
    pub subscribe: bool,
    /// Consumer auto-commit (else explicit commits).
    pub auto_commit: bool,
    /// Consumer `max_entries_per_partition`: small values make a partition's backlog span
    /// several Fetch requests, so fetches are pipelined.
    pub fetch_entries: usize,
    /// Consumer `max_fetches_in_flight`.
    pub fetches_in_flight: usize,
}

impl PipelineShape {
    /// The shape encoded in a scenario's workload bits.
    pub fn from_bits(wl: u32) -> Self {
        PipelineShape {
            producer: wl & 0b11 != 0,
            consumer: wl & 0b1100 != 0,
            idempotent: wl & 0x10 != 0,
            acks_all: wl & 0x20 != 0,
            subscribe: wl & 0x40 != 0,
            auto_commit: wl & 0x80 != 0,
            fetch_entries: [256, 1, 2, 4][((wl >> 16) & 0b11) as usize],
            fetches_in_flight: [4, 1, 2, 8][((wl >> 18) & 0b11) as usize],
        }
    }
}

/// How late past its due time a sendable batch may hit the wire: the producer must send it
/// in the step in which it becomes due, so any positive gap is a missed wake-up.
pub const LINGER_SLACK: Duration = Duration::from_millis(1);
