//! A simulated Stellflow broker that behaves like the real server.
#![forbid(unsafe_code)]

pub mod config;
pub mod group;
pub mod log;
pub mod offsets;
pub mod producer_ids;
pub mod producer_state;
pub mod rng;
pub mod srfb;
