//! When to refresh metadata: at most one round in flight, error-triggered rounds spaced by an
//! exponential backoff, and a round at least every `metadata_max_age`.
//!
//! A round asks every known broker for all topics; it ends when every answer (or failure) is in.
//! Commands that need fresh metadata (describe_topics, list_offsets before the first round)
//! register as waiters and are woken when a round that *started after them* ends.

use crate::backoff::Backoff;
use crate::rng::Rng;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// How one request of a metadata round ended ([`Refresher::answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoundReply {
    /// The broker's Metadata answer came, decoded and was applied.
    Applied,
    /// The request failed, or its answer did not decode.
    Failed,
}

/// How soon a requested metadata round may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// After the error backoff: a broker answered that the metadata is stale.
    AfterBackoff,
    /// Now, ignoring the error backoff: a user command waits on the round.
    Now,
}

/// The refresh schedule (see the module docs).
#[derive(Debug)]
pub(crate) struct Refresher {
    round: Option<Round>,
    wanted: bool,
    urgent: bool,
    not_before: Option<Instant>,
    next_max_age: Instant,
    max_age: Duration,
    backoff: Backoff,
    waiting_next: Vec<u64>,
    completed_rounds: u64,
}

#[derive(Debug)]
struct Round {
    outstanding: HashSet<u64>,
    failures: usize,
    waiters: Vec<u64>,
}

impl Refresher {
    /// A schedule whose first round is due at once.
    pub(crate) fn new(now: Instant, max_age: Duration, backoff: Backoff) -> Self {
        Refresher {
            round: None,
            wanted: true,
            urgent: true,
            not_before: None,
            next_max_age: now + max_age,
            max_age,
            backoff,
            waiting_next: Vec::new(),
            completed_rounds: 0,
        }
    }

    /// Asks for a round: one [`Urgency::Now`] (a user command) ignores the error backoff.
    pub(crate) fn request(&mut self, urgency: Urgency) {
        self.wanted = true;
        self.urgent |= urgency == Urgency::Now;
    }

    /// Registers `op` to be woken when the next round that starts from now on ends.
    pub(crate) fn wait_next(&mut self, op: u64) {
        self.waiting_next.push(op);
        self.request(Urgency::Now);
    }

    /// Whether a round is in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> bool {
        self.round.is_some()
    }

    /// Rounds completed so far.
    pub(crate) fn completed_rounds(&self) -> u64 {
        self.completed_rounds
    }

    /// Whether a round should start at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        if self.round.is_some() {
            return false;
        }
        if now >= self.next_max_age {
            return true;
        }
        self.wanted && (self.urgent || self.not_before.is_none_or(|t| now >= t))
    }

    /// When [`Refresher::due`] turns true by itself (for `poll_timeout`); `last_now` is the
    /// latest instant the client was given (an urgent round is due then).
    pub(crate) fn deadline(&self, last_now: Instant) -> Option<Instant> {
        if self.round.is_some() {
            return None;
        }
        let mut at = self.next_max_age;
        if self.wanted {
            match (self.urgent, self.not_before) {
                (true, _) | (false, None) => at = at.min(last_now),
                (false, Some(t)) => at = at.min(t),
            }
        }
        Some(at)
    }

    /// Starts a round; returns the waiters it will wake.
    pub(crate) fn start(&mut self) {
        self.wanted = false;
        self.urgent = false;
        self.round = Some(Round {
            outstanding: HashSet::new(),
            failures: 0,
            waiters: std::mem::take(&mut self.waiting_next),
        });
    }

    /// Records that the running round skipped a known broker (waiting out a reconnect
    /// backoff): the round counts as failed, so another one follows after the backoff.
    pub(crate) fn skipped(&mut self) {
        if let Some(r) = &mut self.round {
            r.failures += 1;
        }
    }

    /// Adds a request (by sequence number) to the running round.
    pub(crate) fn add(&mut self, seq: u64) {
        if let Some(r) = &mut self.round {
            r.outstanding.insert(seq);
        }
    }

    /// Whether `seq` belongs to the running round.
    pub(crate) fn owns(&self, seq: u64) -> bool {
        self.round
            .as_ref()
            .is_some_and(|r| r.outstanding.contains(&seq))
    }

    /// Records the outcome of one request of the round. When it was the last one, ends the
    /// round and returns its waiters. `healthy` says whether the merged view needs no repair
    /// (no leaderless partition); an unhealthy or failing round keeps the backoff growing.
    pub(crate) fn answered(
        &mut self,
        now: Instant,
        seq: u64,
        reply: RoundReply,
        healthy: impl FnOnce() -> bool,
        rng: &mut Rng,
    ) -> Option<Vec<u64>> {
        let r = self.round.as_mut()?;
        if !r.outstanding.remove(&seq) {
            return None;
        }
        if reply == RoundReply::Failed {
            r.failures += 1;
        }
        if !r.outstanding.is_empty() {
            return None;
        }
        let round = self.round.take()?;
        self.completed_rounds += 1;
        self.next_max_age = now + self.max_age;
        if round.failures == 0 && healthy() {
            self.backoff.reset();
            self.not_before = None;
        } else {
            // An incomplete round (a broker failed or was skipped, or a partition has no
            // leader) is retried after the backoff by itself: a partition whose only holder
            // did not answer is simply absent from the merged view, and nothing else would
            // ask again before `metadata_max_age`.
            self.not_before = Some(now + self.backoff.next_delay(rng));
            self.wanted = true;
        }
        if !self.waiting_next.is_empty() {
            self.wanted = true;
            self.urgent = true;
        }
        Some(round.waiters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refresher(now: Instant) -> Refresher {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5), 0.0);
        Refresher::new(now, Duration::from_secs(300), b)
    }

    #[test]
    fn first_round_is_due_at_once_and_only_one_runs() {
        let t0 = Instant::now();
        let mut r = refresher(t0);
        assert!(r.due(t0));
        r.start();
        r.add(1);
        r.add(2);
        r.request(Urgency::Now);
        assert!(!r.due(t0), "at most one round in flight");
        assert_eq!(r.deadline(t0), None);
        let mut rng = Rng::new(1);
        assert!(
            r.answered(t0, 1, RoundReply::Applied, || true, &mut rng)
                .is_none()
        );
        assert!(
            r.answered(t0, 9, RoundReply::Applied, || true, &mut rng)
                .is_none(),
            "not ours"
        );
        assert_eq!(
            r.answered(t0, 2, RoundReply::Applied, || true, &mut rng),
            Some(vec![])
        );
        assert_eq!(r.completed_rounds(), 1);
        // The urgent request made during the round is still wanted.
        assert!(r.due(t0));
    }

    #[test]
    fn error_rounds_back_off_and_max_age_forces_a_round() {
        let t0 = Instant::now();
        let mut r = refresher(t0);
        let mut rng = Rng::new(1);
        r.start();
        r.add(1);
        r.answered(t0, 1, RoundReply::Failed, || true, &mut rng);
        r.request(Urgency::AfterBackoff);
        assert!(!r.due(t0));
        assert_eq!(r.deadline(t0), Some(t0 + Duration::from_millis(100)));
        assert!(r.due(t0 + Duration::from_millis(100)));
        r.start();
        r.add(2);
        let t1 = t0 + Duration::from_millis(100);
        r.answered(t1, 2, RoundReply::Applied, || false, &mut rng);
        r.request(Urgency::AfterBackoff);
        assert_eq!(r.deadline(t1), Some(t1 + Duration::from_millis(200)));
        // A healthy round resets the backoff; then only max age is pending.
        r.start();
        r.add(3);
        r.answered(t1, 3, RoundReply::Applied, || true, &mut rng);
        assert!(!r.due(t1));
        assert_eq!(r.deadline(t1), Some(t1 + Duration::from_secs(300)));
        assert!(r.due(t1 + Duration::from_secs(300)));
    }

    #[test]
    fn waiters_wake_with_the_next_round() {
        let t0 = Instant::now();
        let mut r = refresher(t0);
        let mut rng = Rng::new(1);
        r.start();
        r.add(1);
        r.wait_next(77);
        assert_eq!(
            r.answered(t0, 1, RoundReply::Applied, || true, &mut rng),
            Some(vec![])
        );
        assert!(r.due(t0));
        r.start();
        r.add(2);
        assert_eq!(
            r.answered(t0, 2, RoundReply::Applied, || true, &mut rng),
            Some(vec![77])
        );
        assert!(!r.in_flight());
    }

    /// Regression (dst seed 137): a round in which a broker failed (or was skipped while it
    /// waited out a reconnect backoff) left the partitions only it holds out of the merged
    /// view, and no new round came before `metadata_max_age`. It is retried by itself.
    #[test]
    fn an_incomplete_round_is_retried_after_the_backoff_without_a_request() {
        let t0 = Instant::now();
        let mut r = refresher(t0);
        let mut rng = Rng::new(1);
        r.start();
        r.add(1);
        r.answered(t0, 1, RoundReply::Failed, || true, &mut rng);
        assert!(!r.due(t0));
        let retry = t0 + Duration::from_millis(100);
        assert_eq!(r.deadline(t0), Some(retry));
        assert!(r.due(retry));
        // A skipped broker counts as a failure too.
        r.start();
        r.add(2);
        r.skipped();
        r.answered(retry, 2, RoundReply::Applied, || true, &mut rng);
        assert!(r.due(retry + Duration::from_millis(200)));
        // A complete, healthy round stops the retries.
        r.start();
        r.add(3);
        let t1 = retry + Duration::from_millis(200);
        r.answered(t1, 3, RoundReply::Applied, || true, &mut rng);
        assert!(!r.due(t1 + Duration::from_secs(299)));
    }
}
