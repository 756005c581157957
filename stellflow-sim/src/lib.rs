//! A simulated Stellflow broker that behaves like the real server.
#![forbid(unsafe_code)]

pub mod broker;
pub mod cluster;
pub mod config;
pub mod group;
pub mod knobs;
pub mod log;
pub mod metadata;
pub mod offsets;
pub mod producer_ids;
pub mod producer_state;
pub mod rng;
pub mod server;
pub mod srfb;

pub use config::{BrokerConfig, ClusterConfig, LogConfig, MetadataView};
pub use cluster::{ConnId, SimCluster, SimError};
pub use knobs::{DelayRule, Fault, FaultRule, Knobs};
pub use server::{ServerConfig, SimServer, serve, serve_with};
