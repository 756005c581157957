//! A simulated Stellflow broker that behaves like the real server.
#![forbid(unsafe_code)]

pub mod config;
pub mod log;
pub mod rng;
