//! The resume bound: once the network and the brokers are healthy again, a client with pending
//! work makes progress within its backoff caps plus a few round trips.
//!
//! After the heal every broker is up with its leadership re-asserted and every link works, so
//! nothing stands between a client and its next step except its own timers. A client whose
//! work waits longer than the sum of the caps that may run one after the other (reconnect,
//! metadata refresh, retry or fetch backoff) plus round trips sat on work it could have done:
//! a back-off that kept growing past its cap, a leaderless partition not re-checked, a
//! partition that got its leader back and was not fetched or sent at once.
//!
//! The clock of a client runs only while it has pending work, restarts at each bit of progress
//! (a produce outcome, a delivered record) and stands still while the client still has
//! requests outstanding on a connection the heal could not repair (the broker side vanished
//! or the link is a black hole): such a request ends only by the client's own request timeout,
//! which is the timeout's bound, not this one.

use crate::net::NetConfig;
use crate::pipeline::{ConsumerLoad, ProducerLoad};
use crate::workload::Ledger;
use crate::world::{ClientId, World};
use std::time::Duration;
use stellflow_sansio::ClientConfig;

/// Round trips a resumption may take on top of the caps: ApiVersions, Metadata, then the
/// work itself (Produce or Fetch), and for a consumer in a group FindCoordinator, JoinGroup,
/// SyncGroup and OffsetFetch before it fetches.
pub const RESUME_ROUND_TRIPS: u32 = 8;

/// The resume bound of one client (see the module docs).
#[derive(Debug)]
pub struct ResumeWatch {
    what: &'static str,
    bound: Duration,
    since: Option<Duration>,
    progress: u64,
    slowest: Duration,
    reported: bool,
}

impl ResumeWatch {
    /// Watches a client described as `what` (for the report) with the bound `bound`.
    pub fn new(what: &'static str, bound: Duration) -> Self {
        ResumeWatch {
            what,
            bound,
            since: None,
            progress: 0,
            slowest: Duration::ZERO,
            reported: false,
        }
    }

    /// One sample at `now` (virtual time since the start): whether the client has `pending`
    /// work, whether it is `blocked` on requests outstanding on a dead connection, and its
    /// progress counter. Returns a violation's detail the first time the bound is exceeded.
    pub fn sample(
        &mut self,
        now: Duration,
        pending: bool,
        blocked: bool,
        progress: u64,
    ) -> Option<String> {
        if progress != self.progress {
            self.progress = progress;
            self.since = None;
        }
        if !pending || blocked {
            self.since = None;
            return None;
        }
        let since = *self.since.get_or_insert(now);
        let waited = now.saturating_sub(since);
        self.slowest = self.slowest.max(waited);
        if waited > self.bound && !self.reported {
            self.reported = true;
            return Some(format!(
                "{}: pending work and no progress for {waited:?} (since {since:?}) on a healed \
                 network, bound {:?}",
                self.what, self.bound
            ));
        }
        None
    }

    /// The longest wait for progress seen so far.
    pub fn slowest(&self) -> Duration {
        self.slowest
    }

    /// What is watched.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The bound.
    pub fn bound(&self) -> Duration {
        self.bound
    }
}

/// The resume bound of the built-in workloads' producer and consumer, sampled at every step
/// of the liveness phase.
#[derive(Debug)]
pub struct ResumeCheck {
    healed_at: Duration,
    producer: Option<ResumeWatch>,
    consumer: Option<ResumeWatch>,
}

impl ResumeCheck {
    /// Watches `producer` and `consumer` (the clients use `config`, the network `net`) from
    /// the heal at `healed_at` on.
    pub fn new(
        config: &ClientConfig,
        producer: Option<&ProducerLoad>,
        consumer: Option<&ConsumerLoad>,
        net: &NetConfig,
        healed_at: Duration,
    ) -> Self {
        // The caps that may run one after the other: a reconnect backoff, then a metadata
        // round that skipped the broker while it was backing off and waits its own backoff.
        let caps = config.reconnect_backoff_max + config.metadata_refresh_backoff_max;
        let trips = (net.latency + net.jitter) * 2 * RESUME_ROUND_TRIPS;
        let producer = producer.map(|p| {
            // A retry waits out its backoff (a leader error's ends when the metadata names a
            // new leader); an idempotent batch whose request may still be executing is re-sent
            // a request timeout after its broker answered on a fresh connection
            // (ARCHITECTURE.md decision 4).
            let mut b = caps + p.retry_backoff_max() + trips;
            if p.idempotent() {
                b += config.request_timeout;
            }
            ResumeWatch::new("producer", b)
        });
        let consumer = consumer.map(|c| {
            // A partition that fetched nothing waits out its empty-fetch backoff before it
            // sees new records, and a member whose join or sync failed during the faults
            // waits out its retry back-off (rejoins the group asked for, after fencing, are
            // the membership's business: the group-session invariant bounds those).
            let consumer = &c.config().consumer;
            let b = caps
                + consumer
                    .fetch_backoff_max
                    .max(consumer.join_retry_backoff_max)
                + trips;
            // A group member starts a partition only once its previous owner
            // released it or that owner's registration went stale: an owner closed or lost
            // while its link was cut never said so, so the partition waits out its session
            // (plus the round that reads the registry) on the new member's clock.
            let b = match consumer.group_id {
                Some(_) => b + consumer.session_timeout + consumer.heartbeat_interval,
                None => b,
            };
            ResumeWatch::new("consumer", b)
        });
        ResumeCheck {
            healed_at,
            producer,
            consumer,
        }
    }

    /// Whether `client` waits on a request only its timeout can end: one outstanding on a
    /// connection whose broker side is gone, or one written before the heal (its answer may
    /// have been dropped by a fault).
    fn blocked(&self, world: &World, client: ClientId) -> bool {
        world.links(client).iter().any(|l| {
            l.outstanding
                .iter()
                .any(|o| l.dead || o.sent_at < self.healed_at)
        })
    }

    /// Samples both clients now; reports `resume-after-heal` on the first overrun of each.
    pub fn sample(
        &mut self,
        world: &mut World,
        producer: Option<&ProducerLoad>,
        consumer: Option<&ConsumerLoad>,
        ledger: &Ledger,
    ) {
        let now = world.elapsed();
        if let Some(p) = producer {
            let blocked = self.blocked(world, p.client_id());
            if let Some(w) = &mut self.producer
                && let Some(detail) = w.sample(now, !p.done(), blocked, p.completed() as u64)
            {
                world.report("resume-after-heal", detail);
            }
        }
        if let Some(c) = consumer {
            let blocked = c.restarting() || self.blocked(world, c.client_id());
            let pending = !c.missing(producer, ledger).is_empty();
            if let Some(w) = &mut self.consumer
                && let Some(detail) = w.sample(now, pending, blocked, c.delivered_count())
            {
                world.report("resume-after-heal", detail);
            }
        }
    }

    /// Per watched client: what, the longest wait for progress, and the bound.
    pub fn summary(&self) -> Vec<(&'static str, Duration, Duration)> {
        [&self.producer, &self.consumer]
            .into_iter()
            .flatten()
            .map(|w| (w.what(), w.slowest(), w.bound()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_stall_longer_than_the_bound_is_reported_once() {
        let mut w = ResumeWatch::new("producer", 100 * MS);
        assert_eq!(w.sample(Duration::ZERO, true, false, 0), None);
        assert_eq!(w.sample(100 * MS, true, false, 0), None);
        assert!(w.sample(101 * MS, true, false, 0).is_some());
        assert_eq!(w.sample(300 * MS, true, false, 0), None);
        assert_eq!(w.slowest(), 300 * MS);
    }

    #[test]
    fn progress_idle_time_and_dead_links_restart_the_clock() {
        let mut w = ResumeWatch::new("consumer", 100 * MS);
        assert_eq!(w.sample(Duration::ZERO, true, false, 0), None);
        assert_eq!(w.sample(90 * MS, true, false, 1), None); // progress
        assert_eq!(w.sample(180 * MS, true, false, 1), None);
        assert_eq!(w.sample(250 * MS, false, false, 1), None); // nothing to do
        assert_eq!(w.sample(300 * MS, true, true, 1), None); // waits for a timeout
        assert_eq!(w.sample(500 * MS, true, false, 1), None);
        assert_eq!(w.sample(600 * MS, true, false, 1), None);
        assert!(w.sample(601 * MS, true, false, 1).is_some());
    }
}
