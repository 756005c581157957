//! The sans-IO Stellflow client: a pure state machine that takes bytes and time in and
//! gives bytes, connect requests, timer deadlines and events out.
//!
//! Work in progress: see the project's issue tracker.
#![forbid(unsafe_code)]
