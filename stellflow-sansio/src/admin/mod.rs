//! Admin commands with typed results: ApiVersions, DescribeCluster, HealthCheck, topics
//! (describe, create, delete), AlterPartition, ListOffsets, committed group offsets,
//! DecommissionBroker, and re-asserting leadership after a broker restart.
//!
//! A command is an [`AdminCall<T>`] (or one of the [`Client`] shortcuts that build one);
//! [`Client::admin`] starts it and returns an [`AdminId<T>`]. Exactly one [`Event::Admin`]
//! answers it, with an [`AdminOutcome`] that [`AdminOutcome::take`] turns into the `T` with
//! that id — typed from the call to the result, with no "wrong kind of answer" case to handle.
//! Per-partition outcomes are data in the result. Topic names are validated client-side before
//! anything is sent (DESIGN §3.11).
//!
//! The feature's state is [`Admin`] (the running commands); its methods take the client's
//! shared state explicitly (`sh: &mut Shared`), so admin imports neither the client nor
//! another feature. The module's parts, one job each:
//! * `crate::admin_results` (low, beside the other contract types) — the result types a
//!   caller reads;
//! * `crate::admin_call` (low) — commands ([`AdminCall`]), their ids ([`AdminId`]) and answers
//!   ([`AdminOutcome`]), which [`Event::Admin`] carries;
//! * `start` — validating a command and sending its first request (the public commands on
//!   the client, which call it, are in `client/admin.rs`);
//! * `route` — ListOffsets' per-leader routing and the commands that wait for metadata;
//! * `complete` — decoding answers and finishing each command.
//!
//! [`Client`]: crate::Client
//! [`Client::admin`]: crate::Client::admin
//! [`Event::Admin`]: crate::Event::Admin

mod complete;
mod route;
mod start;

pub(crate) use crate::admin_call::Outcome;
pub use crate::admin_call::{AdminCall, AdminId, AdminOutcome, AdminOutput, PartitionOverride};
pub use crate::admin_results::{
    ApiSupport, BrokerApiVersions, ClusterStatus, CommittedOffset, DecommissionResult,
    ListedOffset, OffsetInfo, OffsetSpec, PartitionOutcome, ReassertedPartition, TopicAdminResult,
    TopicDescription,
};

use crate::address::BrokerAddress;
use crate::error::AdminError;
use crate::metadata::ViewPartition;
use crate::request::RequestOptions;
use std::collections::{BTreeMap, HashMap};

/// The admin feature's own state: the commands running, by id. Its methods take the
/// client's shared state explicitly (`sh: &mut Shared`).
#[derive(Debug, Default)]
pub(crate) struct Admin {
    /// The running commands, by id.
    pub(crate) ops: HashMap<u64, AdminOp>,
}

/// The state of one running admin command.
#[derive(Debug)]
pub(crate) enum AdminOp {
    Single(Single),
    Committed {
        group: String,
        partitions: Vec<(String, i32)>,
        /// OffsetFetch sent (else FindCoordinator is in flight).
        fetching: bool,
        opts: RequestOptions,
    },
    DescribeTopics(Vec<String>),
    ListOffsets {
        specs: Vec<(String, i32, OffsetSpec)>,
        results: Vec<Option<Result<OffsetInfo, AdminError>>>,
        /// Request seq → (index in `results`, topic position, partition position) it carries.
        outstanding: BTreeMap<u64, Vec<(usize, usize, usize)>>,
        waited_for_metadata: bool,
    },
    Reassert {
        broker_id: i32,
        /// Metadata request seq while asking the broker for its view.
        asking: Option<u64>,
        results: Vec<ReassertedPartition>,
        outstanding: BTreeMap<u64, usize>,
        address: Option<BrokerAddress>,
    },
}

#[derive(Debug)]
pub(crate) enum Single {
    ApiVersions,
    DescribeCluster,
    HealthCheck,
    CreateTopic,
    DeleteTopic,
    AlterPartition(String, ViewPartition),
    Decommission,
}
