//! Consumer settings ([`ConsumerConfig`]), part of [`crate::ClientConfig::consumer`].

use crate::address::BrokerAddress;
use crate::config_error::ConfigError;
use std::time::Duration;

/// What to do when a partition has no usable position: nothing committed, the position fell
/// below the log start (retention deleted it; the server clamps silently, PROTOCOL.md §3.4), or
/// it is past the log end (the topic was deleted and re-created; the server answers with
/// nothing and no error, so the client detects it, see
/// [`crate::ConsumerEvent::PositionOutOfRange`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OffsetReset {
    /// Start at the log start (ListOffsets EARLIEST).
    Earliest,
    /// Start at the log end: only blobs written from now on (ListOffsets LATEST). The
    /// reference SDKs' default.
    #[default]
    Latest,
    /// Do not move: raise [`crate::ConsumerEvent::NoPosition`] (nothing committed) or the
    /// event that found the position unusable, and wait for a `seek`.
    None,
}

/// Consumer settings. Defaults follow the Kafka clients where the server allows it.
///
/// ```
/// # use stellflow_sansio::{ClientConfig, OffsetReset};
/// let mut config = ClientConfig::new("127.0.0.1:9092").unwrap();
/// config.consumer.group_id = Some("billing".into());
/// config.consumer.auto_offset_reset = OffsetReset::Earliest;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// The group: needed for `subscribe` and for committed offsets (commits
    /// and OffsetFetch go to the group's coordinator). `None`: manual assignment without
    /// commits.
    pub group_id: Option<String>,
    /// The broker asked for the coordinator (FindCoordinator). Every broker names itself and
    /// keeps its own group state and offsets (PROTOCOL.md §3.8), so all members of a group must
    /// ask the same one. Default: the first bootstrap address.
    pub coordinator_bootstrap: Option<BrokerAddress>,
    /// Where to start without a committed offset, after the log start passed the position, or
    /// when the position is past the log end.
    pub auto_offset_reset: OffsetReset,
    /// How long a topic that `subscribe` or `assign` asked for may stay unknown to every
    /// broker before a poll returns [`ConsumerError::UnknownTopic`](crate::ConsumerError::UnknownTopic),
    /// counted from the first metadata answer without it (which raises
    /// [`ConsumerEvent::TopicUnknown`](crate::ConsumerEvent::TopicUnknown)); the error comes
    /// with the next metadata answer after it (rdkafka: `topic.metadata.propagation.max.ms`).
    /// Default 5 s.
    pub missing_topic_wait: Duration,
    /// Commit delivered positions every [`auto_commit_interval`](Self::auto_commit_interval),
    /// before partitions are revoked, and when the consumer closes. Default true.
    pub enable_auto_commit: bool,
    /// Default 5 s.
    pub auto_commit_interval: Duration,
    /// Commit only what the application marked processed (`mark_processed`,
    /// rdkafka's `store_offset`; Kafka key `enable.auto.offset.store=false`): auto-commit,
    /// the commit before partitions are revoked, the one on close and
    /// explicit commits take the marked positions instead of the delivered ones, so
    /// a record whose processing did not finish is read again after a crash (at-least-once
    /// without bookkeeping). Default false: every delivered record counts as processed.
    pub commit_marked_only: bool,
    /// `sessionTimeoutMs` of JoinGroup: the member expires without a Heartbeat for this long.
    /// Also the time without a successful heartbeat after which the client rejoins on its own.
    /// Default 45 s.
    pub session_timeout: Duration,
    /// Heartbeat period. Default 3 s. A heartbeat may go unanswered for a third of what the
    /// session timeout leaves beside this period (14 s with the defaults) before it counts as
    /// timed out and goes again: two timeouts in a row make the client replace a silently
    /// dead coordinator connection, and both fit in the session.
    pub heartbeat_interval: Duration,
    /// Deadline of JoinGroup and SyncGroup (the protocol has no rebalance timeout field; the
    /// server answers at once). Default 30 s.
    pub rebalance_timeout: Duration,
    /// First delay before rejoining after 19 (fenced), 1 (unknown member), a failed
    /// JoinGroup or the session timeout; doubles while it keeps happening. Default 100 ms. A
    /// lost connection to the coordinator is no reason to rejoin: the member finds the
    /// coordinator again and keeps its generation while its session lasts.
    pub rejoin_backoff: Duration,
    /// Largest delay of a rejoin the group's membership asked for — fenced (19), unknown
    /// member (1), another error in a heartbeat answer: caps the rejoin rate of members that
    /// keep fencing each other on today's server (DESIGN §3.7). Default 10 s.
    pub rejoin_backoff_max: Duration,
    /// Largest delay before a JoinGroup/SyncGroup exchange that failed is tried again (a lost,
    /// timed-out or undecodable answer, an error other than 19 or 1, a session that expired
    /// without contact). Starts at [`rejoin_backoff`](Self::rejoin_backoff) and doubles while
    /// failures continue. Default 1 s, Kafka's `retry.backoff.max.ms`: a member is back within
    /// about a second once its coordinator answers again.
    pub join_retry_backoff_max: Duration,
    /// Rejoins within [`thrash_window`](Self::thrash_window) that raise
    /// [`crate::ConsumerEvent::GroupThrashing`]. Default 5.
    pub thrash_threshold: usize,
    /// Default 60 s.
    pub thrash_window: Duration,
    /// The most members a group can have: the number of slots of the group's member registry
    /// (the partitions of the reserved topic `stellflow:members` in the group's offset
    /// store), all read in one OffsetFetch every heartbeat interval. Every member of a group
    /// must use the same value. Default 64.
    pub max_group_members: usize,
    /// How long a revocation waits for `revocation_done` when the subscription was made with
    /// `subscribe_with_listener`; the handover then goes on as
    /// if answered (the application's listener is late, not lost). The new owner waits for
    /// it. Default 10 s.
    pub revocation_timeout: Duration,
    /// Byte budget of one Fetch request (all its partitions). Capped by the response frame
    /// limit. Default 8 MiB: answers that stay in cache decode ~1.8x faster than 32 MiB ones
    /// (benches/consumer.rs), and several requests still keep the buffer full.
    pub fetch_max_bytes: usize,
    /// Most entries (blobs) asked per partition in one Fetch. Default 256.
    pub max_entries_per_partition: usize,
    /// Most records one poll of an adapter returns (`Consumer::poll`; Kafka's
    /// `max.poll.records`). The core's own doors take their limit per call. Default 500.
    pub max_poll_records: usize,
    /// Fetch requests in flight to one broker. A partition that is streaming (its last answer
    /// was full, its blob size known) is asked ahead, up to this many requests, each starting
    /// where the previous one ends; answers the server hands back out of order are held until
    /// the earlier ones arrive, so records are still delivered in order and exactly once. Every
    /// request in flight counts against [`max_buffered_bytes`](Self::max_buffered_bytes).
    /// 1 asks for nothing before the previous answer is in. Default 4: one request at a time
    /// leaves the broker idle for a round trip between answers (`docs/performance.md`).
    pub max_fetches_in_flight: usize,
    /// Prefetch bound: no Fetch is sent while this many blob bytes wait for delivery or are
    /// asked for by Fetch requests in flight. Default 64 MiB.
    pub max_buffered_bytes: usize,
    /// `maxWaitMs` sent in Fetch (ignored by today's server, honoured by one with long-poll).
    /// Default 500 ms.
    pub fetch_max_wait: Duration,
    /// First client-side delay after an empty fetch of a partition; doubles while fetches stay
    /// empty. Default 5 ms.
    pub fetch_backoff: Duration,
    /// Largest empty-fetch delay; also the delay before a partition whose fetch failed is
    /// fetched again. A partition waiting for a leader is fetched as soon as the metadata
    /// names one. Default 500 ms.
    pub fetch_backoff_max: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            coordinator_bootstrap: None,
            auto_offset_reset: OffsetReset::Latest,
            missing_topic_wait: Duration::from_secs(5),
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            commit_marked_only: false,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            rebalance_timeout: Duration::from_secs(30),
            rejoin_backoff: Duration::from_millis(100),
            rejoin_backoff_max: Duration::from_secs(10),
            join_retry_backoff_max: Duration::from_secs(1),
            thrash_threshold: 5,
            thrash_window: Duration::from_secs(60),
            max_group_members: 64,
            revocation_timeout: Duration::from_secs(10),
            fetch_max_bytes: 8 * 1024 * 1024,
            max_entries_per_partition: 256,
            max_poll_records: 500,
            max_fetches_in_flight: 4,
            max_buffered_bytes: 64 * 1024 * 1024,
            fetch_max_wait: Duration::from_millis(500),
            fetch_backoff: Duration::from_millis(5),
            fetch_backoff_max: Duration::from_millis(500),
        }
    }
}

impl ConsumerConfig {
    /// Checks values that cannot work, naming the field and the rule (called by
    /// [`crate::ClientConfig::validate`], so a client is never built with them).
    ///
    /// ```
    /// use std::time::Duration;
    /// # use stellflow_sansio::ConsumerConfig;
    /// let mut c = ConsumerConfig::default();
    /// c.heartbeat_interval = c.session_timeout;
    /// let e = c.validate().unwrap_err().to_string();
    /// assert!(e.contains("consumer.heartbeat_interval"), "{e}");
    /// ```
    // Long by design: one independent check per field, in field order (a list).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, reason| Err(ConfigError::Invalid { field, reason });
        let ms_i32 = |d: Duration| i32::try_from(d.as_millis()).is_ok();
        if self.group_id.as_deref().is_some_and(str::is_empty) {
            return bad(
                "consumer.group_id",
                "must not be empty (use None for no group)",
            );
        }
        if self.session_timeout.is_zero() || !ms_i32(self.session_timeout) {
            return bad(
                "consumer.session_timeout",
                "must be positive and fit in a 32-bit millisecond count",
            );
        }
        if self.heartbeat_interval.is_zero() {
            return bad("consumer.heartbeat_interval", "must be positive");
        }
        if self.heartbeat_interval >= self.session_timeout {
            return bad(
                "consumer.heartbeat_interval",
                "must be less than consumer.session_timeout (a third of it is usual); otherwise the member expires between heartbeats and rejoins every session",
            );
        }
        if self.rebalance_timeout.is_zero() {
            return bad("consumer.rebalance_timeout", "must be positive");
        }
        if self.enable_auto_commit && self.auto_commit_interval.is_zero() {
            return bad(
                "consumer.auto_commit_interval",
                "must be positive when enable_auto_commit is set",
            );
        }
        if self.rejoin_backoff > self.rejoin_backoff_max {
            return bad(
                "consumer.rejoin_backoff",
                "must not exceed consumer.rejoin_backoff_max",
            );
        }
        if self.rejoin_backoff > self.join_retry_backoff_max {
            return bad(
                "consumer.rejoin_backoff",
                "must not exceed consumer.join_retry_backoff_max",
            );
        }
        if self.thrash_threshold == 0 {
            return bad("consumer.thrash_threshold", "must be at least 1");
        }
        if self.max_group_members == 0 || self.max_group_members > 1024 {
            return bad("consumer.max_group_members", "must be between 1 and 1024");
        }
        if self.revocation_timeout.is_zero() {
            return bad("consumer.revocation_timeout", "must be positive");
        }
        if self.fetch_max_bytes == 0 {
            return bad("consumer.fetch_max_bytes", "must be positive");
        }
        if self.max_entries_per_partition == 0 {
            return bad("consumer.max_entries_per_partition", "must be at least 1");
        }
        if self.max_poll_records == 0 {
            return bad("consumer.max_poll_records", "must be at least 1");
        }
        if self.max_fetches_in_flight == 0 {
            return bad("consumer.max_fetches_in_flight", "must be at least 1");
        }
        if self.max_buffered_bytes == 0 {
            return bad("consumer.max_buffered_bytes", "must be positive");
        }
        if !ms_i32(self.fetch_max_wait) {
            return bad(
                "consumer.fetch_max_wait",
                "must fit in a 32-bit millisecond count",
            );
        }
        if self.fetch_backoff > self.fetch_backoff_max {
            return bad(
                "consumer.fetch_backoff",
                "must not exceed consumer.fetch_backoff_max",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_rule_names_its_field() {
        assert_eq!(ConsumerConfig::default().validate(), Ok(()));
        type Break = fn(&mut ConsumerConfig);
        let cases: [(&str, Break); 8] = [
            ("consumer.heartbeat_interval", |c| {
                c.heartbeat_interval = c.session_timeout
            }),
            ("consumer.session_timeout", |c| {
                c.session_timeout = Duration::ZERO
            }),
            ("consumer.group_id", |c| c.group_id = Some(String::new())),
            ("consumer.auto_commit_interval", |c| {
                c.auto_commit_interval = Duration::ZERO
            }),
            ("consumer.rejoin_backoff", |c| {
                c.rejoin_backoff = c.rejoin_backoff_max * 2
            }),
            ("consumer.rejoin_backoff", |c| {
                c.rejoin_backoff = c.join_retry_backoff_max * 2
            }),
            ("consumer.max_entries_per_partition", |c| {
                c.max_entries_per_partition = 0
            }),
            ("consumer.max_fetches_in_flight", |c| {
                c.max_fetches_in_flight = 0
            }),
        ];
        for (field, break_it) in cases {
            let mut c = ConsumerConfig::default();
            break_it(&mut c);
            match c.validate() {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
