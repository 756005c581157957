//! A simulated Stellflow broker that behaves like the real server (stellflow-service at
//! `0c64d3a`), quirks included, for deterministic tests without a JVM.
//!
//! Where it sits: the broker model depends on `stellflow-proto` only and never on client code,
//! so a client bug cannot hide on both sides (the seeded generator it shares with the client
//! core, [`rng::SimRng`], lives in proto too). The deterministic simulation harness that drives
//! real `stellflow-sansio` clients against it is the `stellflow-dst` crate; the repository's
//! `ARCHITECTURE.md` draws the whole workspace.
//!
//! Three layers, each usable on its own:
//!
//! * **State machines** with one job each: the partition [`log`] (one offset per blob, segments,
//!   retention, the soft fetch budget and the segment skip), [`producer_state`] (idempotence
//!   and the transaction flag), [`producer_ids`], the [`group`] coordinator, the [`offsets`]
//!   store, the [`metadata`] cache and SRFB validation ([`srfb`]).
//! * [`broker::Broker`], which answers decoded request frames exactly like the server
//!   (PROTOCOL.md §2–§4, §8), and [`SimCluster`], N brokers plus a simulated controller behind a
//!   sans-IO **byte-stream** interface: `connect` → `handle_input` (client bytes, any split) →
//!   `poll_transmit`/`take_replies` (response bytes), `poll_closed`, `disconnect`,
//!   `handle_timeout`/`poll_timeout`. Time is the `Instant` passed in; randomness comes only
//!   from the seed. Test knobs ([`Knobs`]): fault injection, response delays, response and
//!   execution reordering, crash/restart, replication pauses, leader moves, log-start moves.
//! * [`serve`] / [`serve_with`]: a loopback TCP server on `std::net` threads, no async runtime.
//!
//! ```
//! use bytes::BytesMut;
//! use std::time::Instant;
//! use stellflow_proto::frame::encode_request;
//! use stellflow_proto::header::RequestHeader;
//! use stellflow_proto::messages::{ApiVersionsRequest, Request};
//! use stellflow_sim::SimCluster;
//!
//! let now = Instant::now();
//! let mut cluster = SimCluster::single(now, 42);
//! let conn = cluster.connect(1, now).unwrap();
//! let mut out = BytesMut::new();
//! let header = RequestHeader::new(ApiVersionsRequest::API_KEY, 1, Some("doc"));
//! encode_request(&mut out, &header, &ApiVersionsRequest::default());
//! cluster.handle_input(conn, now, &mut out);
//! let (_, frame) = cluster.poll_transmit().unwrap();
//! assert_eq!(frame.len(), 4 + 209); // ApiVersions answer: frameLength 209
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

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

pub use cluster::{ConnId, SimCluster, SimError};
pub use config::{BrokerConfig, ClusterConfig, LogConfig, MetadataView};
pub use knobs::{DelayRule, Fault, FaultRule, Knobs};
pub use server::{ServerConfig, SimServer, serve, serve_with};
