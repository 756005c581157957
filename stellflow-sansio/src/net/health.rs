//! Liveness bookkeeping: when a broker last answered, what failed on the way to each one since,
//! and since when no broker of the cluster has answered at all.
//!
//! The router notes every answer ([`Net::note_answer`]) and every failure that leaves requests
//! without an answer ([`Net::note_failure`]): a connection that could not be opened or was
//! lost with requests on it, a connection the core gave up, a request that timed out on the
//! wire. A connection the broker closes while nothing was asked of it is not a failure. The
//! client turns these notes into [`crate::ClusterHealth`] (see `crate::health`).

use super::*;

/// What the router knows about one broker's liveness.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotHealth {
    /// The last time a frame from this broker was read.
    pub last_answer: Option<Instant>,
    /// The first failure since its last answer, and the last cause seen since.
    pub failing: Option<Failing>,
}

/// A broker that failed since it last answered.
#[derive(Debug, Clone)]
pub(crate) struct Failing {
    /// When it first failed since its last answer.
    pub since: Instant,
    /// The last cause seen.
    pub cause: String,
    /// The peer answered, but not as a Stellflow broker: waiting does not help.
    pub not_stellflow: bool,
}

/// The cluster-wide part: the last answer of any broker and the first failure since.
#[derive(Debug, Clone, Default)]
pub(crate) struct Liveness {
    /// The last time any broker answered.
    pub last_answer: Option<Instant>,
    /// The first failure after the last answer of any broker: no broker has answered since.
    pub silent_since: Option<Instant>,
}

/// What a failure on the way to a broker says of the peer at its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Peer {
    /// Nothing beyond the failure: the broker may be back at the next attempt.
    MayBeBroker,
    /// The peer answered, and is not a Stellflow broker.
    NotStellflow,
}

impl Net {
    /// A frame arrived from `slot`: the broker is alive.
    pub(super) fn note_answer(&mut self, now: Instant, slot: usize) {
        if let Some(h) = self.health.get_mut(slot) {
            h.last_answer = Some(now);
            h.failing = None;
        }
        self.liveness.last_answer = Some(now);
        self.liveness.silent_since = None;
    }

    /// Something failed on the way to `slot` at `at` (never before the last answer of any
    /// broker, so an outage is counted from the first failure after the cluster fell silent).
    pub(super) fn note_failure(&mut self, at: Instant, slot: usize, cause: &str, peer: Peer) {
        let not_stellflow = peer == Peer::NotStellflow;
        let at = self.liveness.last_answer.map_or(at, |l| l.max(at));
        if let Some(h) = self.health.get_mut(slot) {
            match &mut h.failing {
                Some(f) => {
                    f.cause.clear();
                    f.cause.push_str(cause);
                    f.not_stellflow = not_stellflow;
                }
                None => {
                    h.failing = Some(Failing {
                        since: at,
                        cause: cause.to_owned(),
                        not_stellflow,
                    })
                }
            }
        }
        if self.slot_matters(slot) {
            self.liveness.silent_since.get_or_insert(at);
        }
    }

    /// Whether `slot` counts for the cluster's health: a broker the metadata names, or, while
    /// no broker is known yet, a bootstrap address. A bootstrap entry the metadata does not
    /// name (a stale address, a load balancer) is still listed and still asked for metadata,
    /// but its failures do not make the client degraded or unreachable.
    pub(crate) fn slot_matters(&self, slot: usize) -> bool {
        self.by_broker.is_empty() || self.slots.get(slot).is_some_and(|s| s.broker_id.is_some())
    }

    /// Each broker's liveness, by slot.
    pub(crate) fn slot_health(
        &self,
    ) -> impl Iterator<Item = (&BrokerAddress, Option<i32>, &SlotHealth)> {
        self.slots
            .iter()
            .zip(&self.health)
            .map(|(s, h)| (&s.address, s.broker_id, h))
    }

    /// The cluster-wide liveness.
    pub(crate) fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// While no broker answers (since the first failure after the last answer of any): the
    /// first failing broker and its last cause, for errors that would otherwise blame a
    /// timeout.
    pub(crate) fn silent_broker(&self) -> Option<(BrokerAddress, String)> {
        self.liveness.silent_since?;
        self.slot_health()
            .enumerate()
            .filter(|(slot, _)| self.slot_matters(*slot))
            .find_map(|(_, (a, _, h))| Some((a.clone(), h.failing.as_ref()?.cause.clone())))
    }

    /// The cluster became unreachable: every admin and raw request still waiting for a
    /// connection (queued on a broker that is not connected, or parked until its broker is
    /// known) fails now with [`RequestError::Unreachable`] and its broker's last failure,
    /// instead of at its own request timeout. None of its bytes went out, so it is safe to
    /// ask again. The features' own requests (produce, fetch, group) keep their deadlines:
    /// each has its own rule for an outage.
    pub(crate) fn fail_unsent_commands(&mut self, now: Instant) {
        let command = |r: &Req| matches!(r.origin, Origin::Admin(_) | Origin::Raw);
        let mut failed = Vec::new();
        for slot in 0..self.slots.len() {
            let Some((address, cause)) = self.unsent_cause(slot) else {
                continue;
            };
            let Some(s) = self.slots.get_mut(slot) else {
                continue;
            };
            let (gone, kept): (VecDeque<Req>, VecDeque<Req>) =
                std::mem::take(&mut s.queue).into_iter().partition(command);
            s.queue = kept;
            failed.extend(
                gone.into_iter()
                    .map(|r| (r, address.clone(), cause.clone())),
            );
        }
        if let Some((address, cause)) = self.silent_broker() {
            let (gone, kept): (VecDeque<Req>, VecDeque<Req>) = std::mem::take(&mut self.parked)
                .into_iter()
                .partition(command);
            self.parked = kept;
            failed.extend(
                gone.into_iter()
                    .map(|r| (r, address.clone(), cause.clone())),
            );
        }
        for (req, address, cause) in failed {
            let err = RequestError::Unreachable {
                api_key: req.api_key,
                address,
                cause,
            };
            tracing::warn!(api = %req.api_key, "request failed: {err}");
            self.complete(now, req, Err(err));
        }
    }

    /// The configured request timeout (`ClientConfig::request_timeout`).
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Whether `slot`'s connection is ready now.
    pub(crate) fn slot_ready(&self, slot: usize) -> bool {
        self.slots
            .get(slot)
            .is_some_and(|s| matches!(s.state, ConnState::Ready(_)))
    }
}
