//! Cluster health: whether any broker answers, what failed on the way to each one, and the
//! one error per outage that a consumer's poll returns once no broker answered for
//! `unreachable_timeout`.
//!
//! The states, as [`Client::cluster_health`](crate::Client::cluster_health) reports them and [`Event::HealthChanged`](crate::Event::HealthChanged)
//! announces them:
//!
//! * [`HealthState::Healthy`]: no broker failed since it last answered;
//! * [`HealthState::Degraded`]: some broker failed (a refused or lost connection, a request
//!   that got no answer) since it last answered, but the cluster has not been silent for
//!   `unreachable_timeout` yet, or another broker answers;
//! * [`HealthState::Unreachable`]: no broker answered since `since` for at least
//!   `ClientConfig::unreachable_timeout` — or every broker known turned out not to be a
//!   Stellflow broker, which waiting cannot fix. The first answer of any broker ends it, and
//!   nothing else does (not a change of cause on the way).
//!
//! An outage is counted from the first failure after the last answer of any broker: a
//! client that asks nothing is never unreachable, and a broker that closes a connection
//! nobody uses did not fail. Only the brokers the metadata names count (the bootstrap
//! addresses, while none is known): a bootstrap entry the cluster does not name, such as a
//! stale address, is listed with its failures but makes the client neither degraded nor
//! unreachable.

use crate::address::BrokerAddress;
use std::fmt;
use std::time::{Duration, Instant};

/// The client's view of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterHealth {
    /// Healthy, degraded or unreachable.
    pub state: HealthState,
    /// Every broker address the client knows (bootstrap and metadata), with its liveness.
    pub brokers: Vec<BrokerHealth>,
}

/// The cluster's state as one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HealthState {
    /// No broker failed since it last answered.
    Healthy,
    /// Some broker failed since it last answered; the cluster is not unreachable (yet).
    Degraded,
    /// No broker answered since `since`, for `unreachable_timeout` or more (or every broker
    /// known is not a Stellflow broker).
    Unreachable {
        /// The first failure after the last answer of any broker.
        since: Instant,
    },
}

/// One broker's liveness.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerHealth {
    /// The address dialled.
    pub address: BrokerAddress,
    /// Its broker id, once metadata named this address.
    pub broker_id: Option<i32>,
    /// Whether a negotiated connection to it is open now.
    pub connected: bool,
    /// When a frame from it was last read.
    pub last_answer: Option<Instant>,
    /// When it first failed since its last answer (`None`: it did not).
    pub failing_since: Option<Instant>,
    /// The last failure seen since its last answer (e.g. `connect failed: Connection refused`).
    pub last_cause: Option<String>,
    /// The peer answered, but not as a Stellflow broker.
    pub not_stellflow: bool,
}

/// No broker answered for `unreachable_timeout`: what a consumer's poll returns once per
/// outage, naming every broker and the last failure seen on the way to it. Retriable:
/// consumption goes on by itself once a broker answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct ClusterUnreachable {
    /// How long no broker had answered when the error was raised.
    pub silent_for: Duration,
    /// The configured `ClientConfig::unreachable_timeout`.
    pub timeout: Duration,
    /// Every broker with a failure, and its last cause.
    pub brokers: Vec<(BrokerAddress, String)>,
}

impl fmt::Display for ClusterUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not_stellflow = self
            .brokers
            .iter()
            .all(|(_, c)| c.contains("not a Stellflow"));
        if not_stellflow && !self.brokers.is_empty() {
            f.write_str("no Stellflow broker to talk to")?;
        } else {
            write!(
                f,
                "cluster unreachable: no broker answered for {:.1}s (unreachable_timeout {:?})",
                self.silent_for.as_secs_f64(),
                self.timeout
            )?;
        }
        for (i, (address, cause)) in self.brokers.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            write!(f, "{sep}{address}: {cause}")?;
        }
        Ok(())
    }
}

/// What the client last reported, and which outage the consumer was told of.
#[derive(Debug)]
pub(crate) struct HealthReport {
    /// The state last reported ([`Event::HealthChanged`](crate::Event::HealthChanged)).
    pub(crate) state: HealthState,
    /// The start (`since`) of the outage whose error a poll returned: each outage is told
    /// once, to whichever poll comes first while the consumer has work (partitions or a
    /// subscription), however long after the outage began it started.
    pub(crate) consumer_told: Option<Instant>,
    /// `unreachable_timeout`: how long a silent cluster takes to be unreachable.
    pub(crate) timeout: Duration,
}

impl HealthReport {
    /// Healthy until something fails.
    pub(crate) fn new(timeout: Duration) -> Self {
        HealthReport {
            state: HealthState::Healthy,
            consumer_told: None,
            timeout,
        }
    }
}
