//! A simulated Stellflow broker that behaves like the real server.
//!
//! Work in progress: see the project's issue tracker.
#![forbid(unsafe_code)]
