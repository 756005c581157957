//! The group member's protocol state ([`Member`]) and how long its heartbeats may go
//! unanswered: shared by the coordinator protocol (`group.rs`) and the member registry
//! (`membership.rs`), which hands the member back to [`Member::Idle`].

use super::ConsumerConfig;
use std::time::Instant;

/// How long a heartbeat may go unanswered: a third of what the session timeout leaves beside
/// the heartbeat interval (never less than the interval or half the session, whichever is
/// smaller). The connection layer gives up a silently dead connection (a black hole) after
/// two request timeouts in a row, so the heartbeat due one interval after the last success
/// and the one after it both time out, the connection is replaced and a heartbeat on the new
/// one succeeds — all within the session. With half the session, two timeouts alone used it
/// up and the member always rejoined (dst soak seed 6457169394887060760).
pub(super) fn heartbeat_timeout(config: &ConsumerConfig) -> std::time::Duration {
    let session = config.session_timeout;
    let interval = config.heartbeat_interval;
    (session.saturating_sub(interval) / 3).max(interval.min(session / 2))
}

/// The member's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Member {
    /// Not joining (no subscription).
    Idle,
    /// JoinGroup in flight.
    Joining,
    /// SyncGroup in flight.
    Syncing,
    /// Joined; heartbeating.
    Stable,
    /// Waiting to (re)join at this instant.
    Waiting(Instant),
}
