//! The connection lifecycle: opening a slot's connection on demand, reporting it connected,
//! dropping it (with what failed the requests it carried), closing everything (the
//! [`CloseRequest`]s the driver acts on), and saying why a broker is unreachable.

use super::*;

/// A connection the driver must close, from [`Output::Close`](crate::Output::Close): which one and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseRequest {
    /// The connection to close. Do not report it back as disconnected.
    pub conn: ConnId,
    /// How to close it: drop the socket, or reset it so that unsent bytes are discarded.
    pub mode: CloseMode,
}

/// How the driver closes a connection of [`Output::Close`](crate::Output::Close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseMode {
    /// An ordinary close (drop the socket): bytes already written may still reach the broker.
    /// Used by `Client::close` for connections with nothing the core needs withdrawn.
    Graceful,
    /// A reset that discards what the peer has not received: set `SO_LINGER` to zero before
    /// dropping the socket (tokio's `TcpStream::set_linger(Some(Duration::ZERO))`, socket2's
    /// `SockRef::set_linger`), so the host sends an RST and never retransmits bytes the broker
    /// has not acknowledged. The core asks for it whenever it gives up on a stream (its
    /// requests fail and are retried on a fresh connection, so a late copy could only
    /// duplicate them) and when a write it sent must not land late: a group member's commit
    /// or registry write left unanswered when its lease lapsed, past the lease margin, or at
    /// `Client::close` (ARCHITECTURE.md decision 19). A driver that cannot reset closes
    /// gracefully: it loses that guarantee (a commit can then land after a new owner's and
    /// move the group's position back), nothing else.
    Abort,
}

impl Net {
    pub(super) fn ensure_connection(&mut self, now: Instant, slot: usize) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        if s.state != ConnState::Idle {
            return;
        }
        if let Some(t) = s.next_attempt
            && t > now
        {
            s.state = ConnState::Backoff(t);
            self.timers.schedule(t, Timer::Reconnect(slot));
            return;
        }
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        s.state = ConnState::Connecting(conn);
        self.connects.push_back(ConnectRequest {
            conn,
            address: s.address.clone(),
            unacked_timeout: self.unacked_timeout,
        });
        tracing::debug!(broker = %s.address, conn = conn.0, "connecting");
        self.counters.connection_attempts += 1;
    }

    /// Bounds how long the host may keep this client's written bytes unacknowledged, on every
    /// connection opened from now on ([`ConnectRequest::unacked_timeout`]).
    pub(crate) fn set_unacked_timeout(&mut self, timeout: Option<Duration>) {
        self.unacked_timeout = timeout;
    }

    pub(super) fn slot_of_conn(&self, conn: ConnId) -> Option<usize> {
        self.slots.iter().position(|s| s.state.conn() == Some(conn))
    }

    /// The driver connected `conn`.
    pub(crate) fn handle_connected(&mut self, _now: Instant, conn: ConnId) {
        let Some(slot) = self.slot_of_conn(conn) else {
            return;
        };
        if let Some(s) = self.slots.get_mut(slot)
            && s.state == ConnState::Connecting(conn)
        {
            s.state = ConnState::Negotiating(conn, Negotiation::ToSend);
            s.rx.clear();
            s.versions = None;
            self.counters.connections += 1;
            tracing::debug!(broker = %s.address, conn = conn.0, "connected; negotiating versions");
        }
    }

    /// The driver lost `conn` (or never established it).
    pub(crate) fn handle_disconnected(
        &mut self,
        now: Instant,
        conn: ConnId,
        reason: DisconnectReason,
    ) {
        if let Some(slot) = self.slot_of_conn(conn) {
            self.drop_connection(now, slot, reason);
        }
    }

    /// Gives up on `slot`'s stream: an abort, for nothing still unsent on it should reach the
    /// broker later (its requests fail now and are retried on a fresh connection; a late copy
    /// could only duplicate them, or land a group member's commit after a new owner's).
    pub(super) fn close_with_error(&mut self, now: Instant, slot: usize, error: ConnectionError) {
        self.close_slot(now, slot, error, CloseMode::Abort);
    }

    /// Aborts the connection to `address`, if one is open or opening: the driver resets it
    /// ([`CloseMode::Abort`]: bytes the broker has not received are discarded, never
    /// retransmitted), the requests in flight on it fail as disconnected and a fresh
    /// connection is opened (with the usual backoff) for what still needs one. Whether there
    /// was a connection to abort.
    pub(crate) fn abort_address(
        &mut self,
        now: Instant,
        address: &BrokerAddress,
        error: ConnectionError,
    ) -> bool {
        let Some(&slot) = self.by_address.get(address) else {
            return false;
        };
        if self.slots.get(slot).and_then(|s| s.state.conn()).is_none() {
            return false;
        }
        self.close_slot(now, slot, error, CloseMode::Abort);
        true
    }

    fn close_slot(&mut self, now: Instant, slot: usize, error: ConnectionError, mode: CloseMode) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        if let Some(conn) = s.state.conn() {
            tracing::warn!(broker = %s.address, conn = conn.0, ?mode, "closing the connection: {error}");
            self.closes.push_back(CloseRequest { conn, mode });
            self.events.push_back(Event::ConnectionError {
                conn,
                address: s.address.clone(),
                error: error.clone(),
            });
        }
        self.drop_connection(now, slot, DisconnectReason::Core(error));
    }

    /// A connection ended (closed by either side, failed, or given up): its slot goes idle
    /// with a backoff before the next attempt, its requests in flight and its fail-fast
    /// queued ones fail, the failure is noted for health, and the driver hears of it.
    fn drop_connection(&mut self, now: Instant, slot: usize, reason: DisconnectReason) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let Some(conn) = s.state.conn() else {
            return;
        };
        if s.state.is_open() {
            self.counters.connections = self.counters.connections.saturating_sub(1);
        }
        self.counters.disconnects += 1;
        let not_stellflow = matches!(
            reason,
            DisconnectReason::Core(ConnectionError::NotStellflow { .. })
        );
        // A peer that is not a Stellflow broker will not become one in a second.
        let delay = if not_stellflow {
            s.backoff.at_cap(&mut self.rng)
        } else {
            s.backoff.next_delay(&mut self.rng)
        };
        s.next_attempt = Some(now + delay);
        let was_open = s.state.is_open();
        let cause = disconnect_cause(&reason, &s.rx);
        s.state = ConnState::Idle;
        s.rx.clear();
        s.versions = None;
        s.silent_timeouts = 0;
        let address = s.address.clone();
        let in_flight = s.in_flight.drain_sorted();
        // Fail-fast requests do not wait for the reconnect.
        // Requests were waiting on it: the failure leaves them without an answer (a broker
        // closing a connection nobody uses is not a failure).
        let failed_someone = !was_open || !in_flight.is_empty() || !s.queue.is_empty();
        let mut keep = VecDeque::with_capacity(s.queue.len());
        let mut fail = Vec::new();
        for r in s.queue.drain(..) {
            // Waiting for a peer that is not a Stellflow broker cannot help either.
            if r.origin.fail_fast() || not_stellflow {
                fail.push(r);
            } else {
                keep.push_back(r);
            }
        }
        s.queue = keep;
        self.counters.requests_in_flight = self
            .counters
            .requests_in_flight
            .saturating_sub(in_flight.len() as u64);
        // The requests it held fail: those written as disconnected (their outcome unknown),
        // those never sent as unreachable.
        self.fail_requests(now, in_flight, fail, &address, &cause);
        if failed_someone {
            let peer = if not_stellflow {
                health::Peer::NotStellflow
            } else {
                health::Peer::MayBeBroker
            };
            self.note_failure(now, slot, &cause, peer);
        }
        self.log_disconnect(slot, conn, &address, was_open, delay, &cause);
        self.last_cause.insert(slot, cause);
        self.events.push_back(Event::Disconnected {
            conn,
            address,
            reason,
            retry_in: delay,
        });
        self.ensure_connection(now, slot);
    }

    /// Fails a dropped connection's requests: `in_flight` ones (written, so their outcome is
    /// unknown) with `Disconnected`, `unsent` ones with `Unreachable`, in that order.
    fn fail_requests(
        &mut self,
        now: Instant,
        in_flight: Vec<(i32, Req)>,
        unsent: Vec<Req>,
        address: &BrokerAddress,
        cause: &str,
    ) {
        let failed_in_flight = in_flight.into_iter().map(|(_, r)| (r, true));
        for (r, written) in failed_in_flight.chain(unsent.into_iter().map(|r| (r, false))) {
            let err = if written {
                RequestError::Disconnected {
                    api_key: r.api_key,
                    address: address.clone(),
                    cause: cause.to_owned(),
                }
            } else {
                RequestError::Unreachable {
                    api_key: r.api_key,
                    address: address.clone(),
                    cause: cause.to_owned(),
                }
            };
            self.complete(now, r, Err(err));
        }
    }

    /// Logs a dropped connection: a lost one at warn, a failed attempt at warn the first time
    /// its cause is seen and at debug while it repeats.
    fn log_disconnect(
        &self,
        slot: usize,
        conn: ConnId,
        address: &BrokerAddress,
        was_open: bool,
        delay: Duration,
        cause: &str,
    ) {
        if was_open {
            tracing::warn!(broker = %address, conn = conn.0, ?delay, "connection lost: {cause}");
        } else if self.last_cause.get(&slot).map(String::as_str) == Some(cause) {
            // The same failure again: said once at warn already.
            tracing::debug!(broker = %address, conn = conn.0, ?delay, "cannot connect: {cause}");
        } else {
            tracing::warn!(broker = %address, conn = conn.0, ?delay, "cannot connect: {cause}");
        }
    }

    /// Fails every request (the client is closing) and forgets every connection.
    pub(crate) fn close_all(&mut self, now: Instant) {
        for slot in 0..self.slots.len() {
            if let Some(s) = self.slots.get_mut(slot) {
                if let Some(conn) = s.state.conn() {
                    self.closes.push_back(CloseRequest {
                        conn,
                        mode: CloseMode::Graceful,
                    });
                }
                if s.state.is_open() {
                    self.counters.connections = self.counters.connections.saturating_sub(1);
                }
                s.state = ConnState::Idle;
                let reqs: Vec<Req> = s
                    .in_flight
                    .drain_sorted()
                    .into_iter()
                    .map(|(_, r)| r)
                    .chain(s.queue.drain(..))
                    .collect();
                for r in reqs {
                    self.complete(now, r, Err(RequestError::Closed));
                }
            }
        }
        self.counters.requests_in_flight = 0;
        while let Some(r) = self.parked.pop_front() {
            self.complete(now, r, Err(RequestError::Closed));
        }
        self.connects.clear();
    }

    /// Why a request queued for `slot` could not be sent: the slot is not ready, with the
    /// last failure seen (or the state it is stuck in). `None` when the connection is ready
    /// (the request waited for room in flight).
    pub(super) fn unsent_cause(&self, slot: usize) -> Option<(BrokerAddress, String)> {
        let s = self.slots.get(slot)?;
        let state = match s.state {
            ConnState::Ready(_) => return None,
            ConnState::Negotiating(..) => "connected, but version negotiation did not finish",
            ConnState::Connecting(_) => "the connection attempt has not completed",
            ConnState::Idle | ConnState::Backoff(_) => "not connected",
        };
        let cause = match self.last_cause.get(&slot) {
            Some(c) => format!("{state}; last failure: {c}"),
            None => state.to_owned(),
        };
        Some((s.address.clone(), cause))
    }

    /// The last failure of the connection to `address`, if it is not ready again since.
    pub(crate) fn last_cause(&self, address: &BrokerAddress) -> Option<&str> {
        let slot = self.by_address.get(address)?;
        self.last_cause.get(slot).map(String::as_str)
    }
}

/// What to say about a connection that is gone: the driver's reason, plus how far a response
/// frame had come when the broker closed in the middle of it.
fn disconnect_cause(reason: &DisconnectReason, rx: &BytesMut) -> String {
    if rx.is_empty() {
        return reason.to_string();
    }
    match frame::frame_length(rx) {
        Some(declared) => format!(
            "{reason} in the middle of a response frame ({} of the {declared} bytes it declared received)",
            rx.len()
        ),
        None => format!(
            "{reason} in the middle of a response frame ({} bytes of its 4-byte length prefix received)",
            rx.len()
        ),
    }
}
