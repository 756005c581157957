//! A cluster gone for good ([`FaultKind::ClusterGone`](crate::FaultKind::ClusterGone)): the
//! invariants that the clients report it within a bound, once, checked from outside them.
//!
//! From the instant every broker went away (`gone`), no answer reaches any client except what
//! was already on the wire, so a client's last answer is at most `gone` plus the network's
//! delay. Per client, sampled after every step:
//!
//! * `unreachable-reported`: the consumer's poll gets the unreachable error
//!   (`Client::take_unreachable_error`, which the adapters' `poll`/`recv` return) by
//!   `anchor + unreachable_timeout + slack`, the anchor being `gone` (or the start of a
//!   consumer incarnation created later). The producer and the raw clients, from the first
//!   instant after `gone` at which they wait for an outcome (they are asking the cluster
//!   something), must show `HealthState::Unreachable` in `Client::cluster_health` within the
//!   same bound. A client that asks nothing after `gone` need not notice.
//! * `unreachable-once`: one outage, one report. The consumer gets the error at most once,
//!   and no client's health leaves `Unreachable` once in it, or enters it twice: no broker
//!   answered in between.
//!
//! The slack is [`CRASH_SLACK`] when the brokers crashed (connections are refused at once, so
//! the outage starts with the first request or reconnect), plus the longest a request may wait
//! for its answer when they went silent (only a timeout notices a broker that never answers).
//! The run then also holds the workloads to their outcome books (every record or command
//! without an answer fails with an error, in time) and checks the logs: what was acknowledged
//! is in the last leader's log, once (see [`crate::run`]).

use super::pipeline::{ConsumerLoad, ProducerLoad};
use super::workload::RawWorkload;
use super::world::{ClientId, World};
use std::time::Duration;
use stellflow_sansio::{ClientConfig, HealthState};

/// How long after its anchor (plus `unreachable_timeout`) a client of crashed brokers may take
/// to report the outage: its next request (a consumer heartbeats every second and fetches at
/// least every half second) or reconnect (the first reconnect backoff is 50 ms here) meets a
/// refused connection at once; two seconds cover that and the network's delay.
pub const CRASH_SLACK: Duration = Duration::from_secs(2);

/// How long the run goes on after the last report is due, to see that none comes twice.
pub const OBSERVE: Duration = Duration::from_secs(10);

/// What is watched of one client.
#[derive(Debug)]
struct Watched {
    what: &'static str,
    client: ClientId,
    /// Reporting is due by then (set once the client asks something after `gone`).
    due: Option<Duration>,
    /// Whether the client was already unreachable when the cluster went away (an outage that
    /// began earlier: every broker an impostor, say), so its report came before.
    unreachable_at_gone: bool,
    /// Whether its health is `Unreachable` now, and how often it entered it since `gone`.
    unreachable: bool,
    entered: u32,
    /// Whether a violation was reported for it already (one per client).
    failed: bool,
    slack: Duration,
    /// When it first reported the outage (the consumer's error, else its health).
    reported_at: Option<Duration>,
}

/// The outage invariants of one run, from the instant the cluster went away.
#[derive(Debug)]
pub struct OutageCheck {
    gone: Duration,
    timeout: Duration,
    watched: Vec<Watched>,
    /// The longest slack of any watched client.
    max_slack: Duration,
}

impl OutageCheck {
    /// Starts watching when the cluster went away (`world.gone_at()`); `silent` when the
    /// brokers went silent rather than crashed. `config` is the clients' common configuration.
    pub fn new(
        world: &mut World,
        config: &ClientConfig,
        silent: bool,
        raw: &[RawWorkload],
        producer: Option<&ProducerLoad>,
        consumer: Option<&ConsumerLoad>,
    ) -> Self {
        let gone = world.gone_at().unwrap_or_default();
        let slack = |longest: Duration| {
            if silent {
                CRASH_SLACK + longest
            } else {
                CRASH_SLACK
            }
        };
        let mut watched = Vec::new();
        for l in raw {
            watched.push(("raw client", l.client_id(), slack(config.request_timeout)));
        }
        if let Some(p) = producer {
            watched.push(("producer", p.client_id(), slack(p.request_timeout_max())));
        }
        if let Some(c) = consumer {
            // A JoinGroup waits up to the rebalance timeout for its answer.
            let cc = c.config();
            let longest = cc.request_timeout.max(cc.consumer.rebalance_timeout);
            watched.push(("consumer", c.client_id(), slack(longest)));
        }
        let watched: Vec<Watched> = watched
            .into_iter()
            .map(|(what, client, slack)| {
                let unreachable = is_unreachable(world, client);
                Watched {
                    what,
                    client,
                    due: (what == "consumer").then_some(gone + config.unreachable_timeout + slack),
                    unreachable_at_gone: unreachable,
                    unreachable,
                    entered: 0,
                    failed: false,
                    slack,
                    reported_at: None,
                }
            })
            .collect();
        let max_slack = watched.iter().map(|w| w.slack).max().unwrap_or_default();
        OutageCheck {
            gone,
            timeout: config.unreachable_timeout,
            watched,
            max_slack,
        }
    }

    /// Per watched client: what it is, when it reported the outage and by when it had to
    /// (virtual time since the cluster went away; no bound for a client that asked nothing).
    pub fn summary(&self) -> Vec<(&'static str, Option<Duration>, Option<Duration>)> {
        self.watched
            .iter()
            .map(|w| {
                let after = |t: Duration| t.saturating_sub(self.gone);
                (w.what, w.reported_at.map(after), w.due.map(after))
            })
            .collect()
    }

    /// When the run may end: every report due, plus [`OBSERVE`].
    pub fn end(&self) -> Duration {
        self.gone + self.timeout + self.max_slack + OBSERVE
    }

    /// Samples every watched client after a step.
    pub fn sample(
        &mut self,
        world: &mut World,
        raw: &[RawWorkload],
        producer: Option<&ProducerLoad>,
        consumer: Option<&ConsumerLoad>,
    ) {
        let now = world.elapsed();
        let mut problems = Vec::new();
        for w in &mut self.watched {
            let asking = match w.what {
                "producer" => producer.is_some_and(|p| p.pending() > 0),
                "raw client" => raw
                    .iter()
                    .any(|l| l.client_id() == w.client && l.pending() > 0),
                _ => false,
            };
            if let Some(c) = consumer.filter(|_| w.what == "consumer")
                && c.client_id() != w.client
            {
                // A new incarnation, started after the cluster went away: its own outage.
                w.client = c.client_id();
                w.due = Some(now + self.timeout + w.slack);
                w.unreachable_at_gone = false;
                w.unreachable = false;
                w.entered = 0;
                w.reported_at = None;
            }
            if asking && w.due.is_none() {
                w.due = Some(now + self.timeout + w.slack);
            }
            let unreachable = is_unreachable(world, w.client);
            if unreachable && !w.unreachable {
                w.entered += 1;
                if w.what != "consumer" {
                    w.reported_at.get_or_insert(now);
                }
            }
            if w.failed {
                w.unreachable = unreachable;
                continue;
            }
            if w.unreachable && !unreachable {
                w.failed = true;
                problems.push((
                    "unreachable-once",
                    format!(
                        "{} (client {}): health left Unreachable at {now:?} although no broker answered since the cluster went away at {:?}",
                        w.what, w.client.0, self.gone
                    ),
                ));
            }
            w.unreachable = unreachable;
            if w.entered > 1 {
                w.failed = true;
                problems.push((
                    "unreachable-once",
                    format!(
                        "{} (client {}): health entered Unreachable {} times in the one outage since {:?}",
                        w.what, w.client.0, w.entered, self.gone
                    ),
                ));
                continue;
            }
            if w.what == "consumer" {
                let Some(c) = consumer else { continue };
                let since = c.last_restart().map_or(self.gone, |r| r.max(self.gone));
                let errors: Vec<_> = c
                    .unreachable_errors()
                    .iter()
                    .filter(|(at, _)| *at >= since)
                    .collect();
                if errors.len() > 1 {
                    w.failed = true;
                    problems.push((
                        "unreachable-once",
                        format!(
                            "consumer (client {}): {} unreachable errors in one outage, at {:?}",
                            w.client.0,
                            errors.len(),
                            errors.iter().map(|(t, _)| *t).collect::<Vec<_>>()
                        ),
                    ));
                    continue;
                }
                if let Some((at, e)) = errors.first()
                    && (e.brokers.is_empty() || !e.to_string().contains("unreachable"))
                {
                    w.failed = true;
                    problems.push((
                        "unreachable-reported",
                        format!(
                            "consumer (client {}): the error at {at:?} names no broker or does not say unreachable: {e}",
                            w.client.0
                        ),
                    ));
                    continue;
                }
                if let Some((at, _)) = errors.first() {
                    w.reported_at.get_or_insert(*at);
                }
                let reported = !errors.is_empty() || w.unreachable_at_gone;
                if let Some(due) = w.due
                    && now > due
                    && !reported
                {
                    w.failed = true;
                    problems.push((
                        "unreachable-reported",
                        format!(
                            "consumer (client {}): no unreachable error by {due:?} (cluster gone at {:?}, incarnation since {since:?}, unreachable_timeout {:?} + slack {:?}); health {:?}",
                            w.client.0,
                            self.gone,
                            self.timeout,
                            w.slack,
                            world.client(w.client).cluster_health().state
                        ),
                    ));
                }
            } else if let Some(due) = w.due
                && now > due
                && !unreachable
                && !w.unreachable_at_gone
                && w.entered == 0
            {
                w.failed = true;
                problems.push((
                    "unreachable-reported",
                    format!(
                        "{} (client {}): health not Unreachable by {due:?} (asking since {:?}, cluster gone at {:?}, unreachable_timeout {:?} + slack {:?}): {:?}",
                        w.what,
                        w.client.0,
                        due - self.timeout - w.slack,
                        self.gone,
                        self.timeout,
                        w.slack,
                        world.client(w.client).cluster_health().state
                    ),
                ));
            }
        }
        for (inv, p) in problems {
            world.report(inv, p);
        }
    }
}

fn is_unreachable(world: &mut World, client: ClientId) -> bool {
    matches!(
        world.client(client).cluster_health().state,
        HealthState::Unreachable { .. }
    )
}
