//! What a consumer reports to its application: the event log ([`Events`]) and rebalances ([`Rebalance`]).

use stellflow_sansio::{ConsumerEvent, RevocationId, TopicPartition};

/// What `Consumer::events` returns: the consumer events since the last call, oldest first,
/// and how many older ones were dropped because nobody asked (at most [`Events::CAP`] are
/// kept; an overflow is reported here, never silent).
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct Events {
    /// The kept events, oldest first.
    pub events: Vec<ConsumerEvent>,
    /// Events dropped (the oldest first) since the last call because [`Events::CAP`] were kept.
    pub dropped: u64,
}

impl Events {
    /// How many events are kept between two calls.
    pub const CAP: usize = 1024;
}

impl IntoIterator for Events {
    type Item = ConsumerEvent;
    type IntoIter = std::vec::IntoIter<ConsumerEvent>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.into_iter()
    }
}

/// A rebalance as a subscription made with `Consumer::subscribe_with_listener` sees it, in
/// order (see `Consumer::rebalance`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rebalance {
    /// These partitions are about to go to another member. They are still this member's:
    /// commit them and flush the application's own state for them, then answer with
    /// `Consumer::revocation_done(id)`. Unanswered, the handover goes on after
    /// `consumer.revocation_timeout`.
    Revoking {
        /// Answer it with `Consumer::revocation_done`.
        id: RevocationId,
        /// The partitions being given up.
        partitions: Vec<TopicPartition>,
    },
    /// Given up: committed (auto-commit on) and released.
    Revoked(Vec<TopicPartition>),
    /// Given to this member.
    Assigned(Vec<TopicPartition>),
    /// Lost without a commit: this member's membership lapsed (a pause, a lost coordinator);
    /// another member may own them already. What the application keeps for them is stale.
    Lost(Vec<TopicPartition>),
}
