//! The client's health methods: the report the driver asks for, and keeping it up to date
//! after every pass (the states are described in [`crate::health`]).

use super::Client;
use crate::event::Event;
use crate::health::{BrokerHealth, ClusterHealth, ClusterUnreachable, HealthState};
use std::time::Instant;

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
