//! Drives the Stellflow sans-IO client on smol (async-io).
//!
//! Work in progress: see the project's issue tracker.
