//! Drives the Stellflow sans-IO client on tokio.
//!
//! Work in progress: see the project's issue tracker.
