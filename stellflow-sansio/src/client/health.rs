//! The client's health methods: the report the driver asks for, and keeping it up to date
//! after every pass (the states are described in [`crate::health`]).

use super::Client;
use crate::event::Event;
use crate::health::{BrokerHealth, ClusterHealth, ClusterUnreachable, HealthState};
use crate::request::RequestOptions;
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

    /// Once per outage, the [`ClusterUnreachable`] error for a consumer: while the cluster is
    /// unreachable and the consumer has partitions or a subscription, the first call of the
    /// outage returns it — whether the outage began before or after the consumer's first
    /// poll, or before its `assign`/`subscribe` — and later calls `None` until a broker
    /// answers and the cluster falls silent again. Adapters return it from `poll`/`recv`
    /// (and their streams yield it) instead of waiting forever; [`Client::take_poll_error`]
    /// returns it together with the consumer's other poll errors.
    pub fn take_unreachable_error(&mut self) -> Option<ClusterUnreachable> {
        let HealthState::Unreachable { since } = self.shared.health.state else {
            return None;
        };
        if !self.consumer.active() || self.shared.health.consumer_told == Some(since) {
            return None;
        }
        self.shared.health.consumer_told = Some(since);
        Some(self.unreachable_since(since, self.shared.last_now))
    }

    /// The error of an outage that began at `since`, as of `now`: every broker and its last
    /// failure.
    fn unreachable_since(&self, since: Instant, now: Instant) -> ClusterUnreachable {
        ClusterUnreachable {
            silent_for: now.saturating_duration_since(since),
            timeout: self.shared.health.timeout,
            brokers: self
                .broker_health()
                .into_iter()
                .filter_map(|b| Some((b.address, b.last_cause?)))
                .collect(),
        }
    }

    /// The options of a command started while the cluster is unreachable: it waits at most
    /// `unreachable_timeout` for its answer (then fails naming each broker's last failure),
    /// not the whole request timeout. `None`: use `opts` as they are.
    pub(crate) fn outage_options(&self, opts: &RequestOptions) -> Option<RequestOptions> {
        if !matches!(self.shared.health.state, HealthState::Unreachable { .. }) {
            return None;
        }
        let bound = self.shared.health.timeout;
        let asked = opts.timeout.unwrap_or(self.shared.net.request_timeout());
        (asked > bound).then(|| RequestOptions {
            timeout: Some(bound),
            ..opts.clone()
        })
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

    /// Reports a change of state ([`Event::HealthChanged`]); on entering an outage, fails the
    /// admin and raw requests still waiting for a connection with the outage's cause rather
    /// than at their own request timeout (a consumer's poll learns of it from
    /// [`Client::take_unreachable_error`]).
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
                tracing::error!("{}", self.unreachable_since(since, now));
                if !was_unreachable {
                    self.shared.net.fail_unsent_commands(now);
                }
            }
            _ if was_unreachable => {
                tracing::info!("a broker answers again: the cluster is reachable");
            }
            _ => {}
        }
        let health = self.cluster_health();
        self.shared.events.push_back(Event::HealthChanged(health));
    }
}
