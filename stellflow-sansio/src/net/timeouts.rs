//! Timeouts: the next deadline, expired requests (failed, or kept for their late answer), late
//! answers waited for, and connections given up when they stay silent.

use super::*;

impl Net {
    /// The earliest deadline that matters (stale timers are dropped on the way).
    pub(crate) fn poll_timeout(&mut self) -> Option<Instant> {
        while let Some((at, t)) = self.timers.peek() {
            let live = match *t {
                Timer::Request(seq) => self.live.contains_key(&seq),
                Timer::Reconnect(slot) => self
                    .slots
                    .get(slot)
                    .is_some_and(|s| matches!(s.state, ConnState::Backoff(u) if u == at)),
            };
            if live {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    /// Fires every timer due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        while let Some(t) = self.timers.pop_due(now) {
            match t {
                Timer::Request(seq) => self.expire(now, seq),
                Timer::Reconnect(slot) => {
                    if let Some(s) = self.slots.get_mut(slot)
                        && let ConnState::Backoff(u) = s.state
                        && u <= now
                    {
                        s.state = ConnState::Idle;
                        if s.wanted() {
                            self.ensure_connection(now, slot);
                        }
                    }
                }
            }
        }
    }

    /// A request's deadline passed: it fails with a timeout (or, for one still in flight that
    /// may be answered late, waits on), and a connection that keeps timing out is closed.
    fn expire(&mut self, now: Instant, seq: u64) {
        let Some(loc) = self.live.remove(&seq) else {
            return;
        };
        // Step 1: take the request out of where it waits (parked, queued or in flight).
        let Some(req) = self.take_expired(now, seq, loc) else {
            return;
        };
        self.counters.timeouts += 1;
        // Step 2: a connection that never answered ApiVersions is closed, nothing else.
        if req.origin == Origin::Negotiation {
            // A broker that never answers ApiVersions is useless: close and retry later.
            if let Loc::InFlight(slot, _) = loc {
                let err = ConnectionError::Negotiation(format!(
                    "the peer accepted the connection but did not answer ApiVersions within {:?} \
                     (connection_setup_timeout): it is not a Stellflow broker, or the broker is frozen",
                    self.setup_timeout
                ));
                self.close_with_error(now, slot, err);
            }
            return;
        }
        // Step 3: the error that names why, logged against its broker.
        let err = self.timeout_error(now, &req, loc);
        let broker = match loc {
            Loc::Queued(slot) | Loc::InFlight(slot, _) => self.address(slot).cloned(),
            Loc::Parked => None,
        };
        match broker {
            Some(b) => tracing::warn!(broker = %b, api = %req.api_key, "request failed: {err}"),
            None => tracing::warn!(api = %req.api_key, "request failed: {err}"),
        }
        // Step 4: the connection's failure is noted, the request fails, and a connection
        // that keeps timing out with nothing received is closed.
        if let Loc::InFlight(slot, _) = loc {
            let cause = format!(
                "{} request got no answer within {:?}",
                req.api_key,
                now.saturating_duration_since(req.created)
            );
            self.note_failure(req.created, slot, &cause, health::Peer::MayBeBroker);
        }
        self.complete(now, req, Err(err));
        // Repeated in-flight timeouts with nothing received: the connection is presumed dead
        // (no FIN, no RST will ever come); close it so the next requests reconnect.
        if let Loc::InFlight(slot, _) = loc
            && let Some(s) = self.slots.get_mut(slot)
        {
            s.silent_timeouts += 1;
            if s.silent_timeouts >= slot::SILENT_TIMEOUTS_TO_CLOSE {
                let timeouts = s.silent_timeouts;
                self.close_with_error(now, slot, ConnectionError::Unresponsive { timeouts });
            }
        }
    }

    /// Removes an expired request from where it waits; `None` when it is gone already or, in
    /// flight and awaiting a late answer, is left to wait on.
    fn take_expired(&mut self, now: Instant, seq: u64, loc: Loc) -> Option<Req> {
        match loc {
            Loc::Parked => {
                let pos = self.parked.iter().position(|r| r.seq == seq);
                pos.and_then(|p| self.parked.remove(p))
            }
            Loc::Queued(slot) => self.slots.get_mut(slot).and_then(|s| {
                let pos = s.queue.iter().position(|r| r.seq == seq)?;
                s.queue.remove(pos)
            }),
            Loc::InFlight(slot, corr) => {
                let waiting = self
                    .slots
                    .get_mut(slot)
                    .and_then(|s| s.in_flight.get_mut(corr))
                    .filter(|r| r.await_late)
                    .map(|r| {
                        r.late_timeouts += 1;
                        r.late_timeouts
                    });
                if let Some(late) = waiting {
                    self.wait_late(now, seq, slot, corr, late);
                    return None;
                }
                let r = self
                    .slots
                    .get_mut(slot)
                    .and_then(|s| s.in_flight.remove(corr));
                if r.is_some() {
                    self.counters.requests_in_flight =
                        self.counters.requests_in_flight.saturating_sub(1);
                }
                r
            }
        }
    }

    /// The error an expired request fails with: an unknown broker for one parked on a broker
    /// id, the connection's cause for one never sent, a timeout otherwise.
    fn timeout_error(&self, now: Instant, req: &Req, loc: Loc) -> RequestError {
        match (&req.target, loc) {
            (Target::Broker(id), Loc::Parked) => RequestError::UnknownBroker { broker: *id },
            (_, Loc::Queued(slot)) => match self.unsent_cause(slot) {
                Some((address, cause)) => RequestError::Unreachable {
                    api_key: req.api_key,
                    address,
                    cause,
                },
                None => RequestError::Timeout {
                    api_key: req.api_key,
                    after: now.saturating_duration_since(req.created),
                },
            },
            _ => RequestError::Timeout {
                api_key: req.api_key,
                after: now.saturating_duration_since(req.created),
            },
        }
    }

    /// A request that awaits its late answer passed its request timeout for the `late`-th
    /// time: keep waiting one more timeout, or give the connection up (then the request
    /// completes with `Disconnected`, like every other request in flight on it).
    fn wait_late(&mut self, now: Instant, seq: u64, slot: usize, corr: i32, late: u32) {
        self.counters.timeouts += 1;
        self.live.insert(seq, Loc::InFlight(slot, corr));
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        s.silent_timeouts += 1;
        let silent = s.silent_timeouts;
        let cause = format!("no answer within {late} request timeouts");
        self.note_failure(
            now.checked_sub(self.request_timeout).unwrap_or(now),
            slot,
            &cause,
            health::Peer::MayBeBroker,
        );
        if late >= LATE_TIMEOUTS_TO_CLOSE || silent >= slot::SILENT_TIMEOUTS_TO_CLOSE {
            let timeouts = silent.max(late);
            self.close_with_error(now, slot, ConnectionError::Unresponsive { timeouts });
        } else {
            self.timers
                .schedule(now + self.request_timeout, Timer::Request(seq));
        }
    }
}
