//! Drives the Stellflow sans-IO client on blocking std::net.
//!
//! Work in progress: see the project's issue tracker.
