//! The sans-IO Stellflow client: a pure state machine that takes bytes and time in and gives
//! bytes, connect requests, timer deadlines and events out.
//!
//! WIP docs: replaced below.
#![forbid(unsafe_code)]

pub mod admin;
pub mod backoff;
pub mod client;
pub mod config;
pub mod conn;
pub mod error;
pub mod event;
pub mod inflight;
pub mod metadata;
pub mod metrics;
pub mod negotiate;
pub mod net;
pub mod refresh;
pub mod request;
pub mod rng;
pub mod timers;
pub mod topic;

pub use admin::{
    AdminRequest, AdminResponse, ApiSupport, BrokerApiVersions, ClusterStatus, DecommissionResult,
    ListedOffset, OffsetInfo, OffsetSpec, PartitionOutcome, ReassertedPartition, TopicAdminResult,
    TopicDescription,
};
pub use client::Client;
pub use config::{BrokerAddress, ClientConfig, HeaderFields, parse_bootstrap};
pub use error::{AdminError, ConfigError, ConnectionError, InvalidTopicName, RequestError};
pub use event::{DisconnectReason, Event};
pub use metadata::{BrokerInfo, ClusterMetadata, LeaderlessReason, PartitionInfo};
pub use metrics::Counters;
pub use net::ConnectRequest;
pub use request::{ConnId, RawResponse, RequestId, RequestOptions, Target, TraceContext};
pub use stellflow_proto;
pub use topic::validate_topic_name;
