//! Cluster health: whether any broker answers, what failed on the way to each one, and the
//! one error per outage that a consumer's poll returns once no broker answered for
//! `unreachable_timeout`.
//!
//! The states, as [`Client::cluster_health`] reports them and [`Event::HealthChanged`]
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
use crate::client::Client;
use crate::event::Event;
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

/// What the client last reported, and the error a consumer has not been told yet.
#[derive(Debug)]
pub(crate) struct HealthReport {
    state: HealthState,
    consumer_error: Option<ClusterUnreachable>,
    timeout: Duration,
}

impl HealthReport {
    /// Healthy until something fails.
    pub(crate) fn new(timeout: Duration) -> Self {
        HealthReport {
            state: HealthState::Healthy,
            consumer_error: None,
            timeout,
        }
    }
}

impl Client {
    /// The cluster's health as of the last input (see [`crate::HealthState`]): healthy,
    /// degraded, or unreachable since an instant, with every broker's last answer and last
    /// failure. [`Event::HealthChanged`] says when the state changes.
    pub fn cluster_health(&self) -> ClusterHealth {
        ClusterHealth {
            state: self.shared.health.state,
            brokers: self.broker_health(),
        }
    }

    /// Once per outage, the [`ClusterUnreachable`] error for a consumer: set when the cluster
    /// becomes unreachable while the consumer has partitions or a subscription, taken by the
    /// first poll that finds no record, dropped when a broker answers again. Adapters return
    /// it from `poll`/`recv` (and their streams yield it) instead of waiting forever.
    pub fn take_unreachable_error(&mut self) -> Option<ClusterUnreachable> {
        self.shared.health.consumer_error.take()
    }

    fn broker_health(&self) -> Vec<BrokerHealth> {
        self.shared
            .net
            .slot_health()
            .enumerate()
            .map(|(slot, (address, broker_id, h))| BrokerHealth {
                address: address.clone(),
                broker_id,
                connected: self.shared.net.slot_ready(slot),
                last_answer: h.last_answer,
                failing_since: h.failing.as_ref().map(|f| f.since),
                last_cause: h.failing.as_ref().map(|f| f.cause.clone()),
                not_stellflow: h.failing.as_ref().is_some_and(|f| f.not_stellflow),
            })
            .collect()
    }

    /// The state the router's notes add up to at `now`.
    fn health_state(&self, now: Instant) -> HealthState {
        let mut any_failing = false;
        let mut all_not_stellflow = true;
        for (slot, (_, _, h)) in self.shared.net.slot_health().enumerate() {
            if !self.shared.net.slot_matters(slot) {
                continue;
            }
            any_failing |= h.failing.is_some();
            all_not_stellflow &= h.failing.as_ref().is_some_and(|f| f.not_stellflow);
        }
        if let Some(since) = self.shared.net.liveness().silent_since {
            // Once unreachable, the outage lasts until a broker answers (which clears
            // `silent_since`), even if the cause changes on the way: a peer that was not a
            // Stellflow broker gives way to a broker that refuses or never answers (dst seed
            // 27001667: an impostor leaves as the cluster goes away).
            let ongoing = matches!(self.shared.health.state, HealthState::Unreachable { since: s } if s == since);
            if ongoing
                || now >= since + self.shared.health.timeout
                || (any_failing && all_not_stellflow)
            {
                return HealthState::Unreachable { since };
            }
        }
        if any_failing {
            HealthState::Degraded
        } else {
            HealthState::Healthy
        }
    }

    /// When the health must be looked at again even if nothing happens: the instant a silent
    /// cluster becomes unreachable.
    pub(crate) fn health_deadline(&self) -> Option<Instant> {
        if self.shared.closed || matches!(self.shared.health.state, HealthState::Unreachable { .. })
        {
            return None;
        }
        Some(self.shared.net.liveness().silent_since? + self.shared.health.timeout)
    }

    /// Reports a change of state ([`Event::HealthChanged`]); on entering an outage, keeps the
    /// error the consumer's next empty poll returns; on leaving it, drops that error.
    pub(crate) fn update_health(&mut self, now: Instant) {
        if self.shared.closed {
            return;
        }
        let next = self.health_state(now);
        if next == self.shared.health.state {
            return;
        }
        let was_unreachable = matches!(self.shared.health.state, HealthState::Unreachable { .. });
        self.shared.health.state = next;
        match next {
            HealthState::Unreachable { since } => {
                let error = ClusterUnreachable {
                    silent_for: now.saturating_duration_since(since),
                    timeout: self.shared.health.timeout,
                    brokers: self
                        .broker_health()
                        .into_iter()
                        .filter_map(|b| Some((b.address, b.last_cause?)))
                        .collect(),
                };
                tracing::error!("{error}");
                if !was_unreachable && self.consumer.active() {
                    self.shared.health.consumer_error = Some(error);
                }
            }
            _ if was_unreachable => {
                tracing::info!("a broker answers again: the cluster is reachable");
                self.shared.health.consumer_error = None;
            }
            _ => {}
        }
        let health = self.cluster_health();
        self.shared.events.push_back(Event::HealthChanged(health));
    }
}
