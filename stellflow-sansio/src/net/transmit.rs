//! Writing requests: queued requests of ready connections framed with fresh correlation ids
//! into the driver's buffer, within the in-flight limit; large record blobs handed over
//! shared instead of copied into it.

use super::*;
use stellflow_proto::wire::SharedPiece;

/// Record blobs at least this long reach the driver as shared bytes
/// ([`Transmitted::Shared`]) instead of being copied into its buffer: past this size the copy
/// costs more than the driver's extra write.
pub(crate) const SHARE_BLOBS_FROM: usize = 32 * 1024;

/// What one [`Net::poll_transmit`] gave the driver.
#[derive(Debug)]
pub(crate) enum Transmitted {
    /// Bytes appended to the caller's buffer, for this connection.
    Buffer(ConnId),
    /// These bytes, for this connection, right after what it was given before.
    Shared(ConnId, Bytes),
}

/// The rest of a frame whose record blobs go out shared: the pieces after what the driver
/// already has, in order, for the calls that follow.
#[derive(Debug, Default)]
pub(crate) struct Unsent {
    conn: Option<ConnId>,
    pieces: VecDeque<Piece>,
}

/// One piece of an [`Unsent`] frame.
#[derive(Debug)]
enum Piece {
    /// Frame bytes between two blobs (or after the last), copied into the driver's buffer.
    Buffer(Bytes),
    /// A blob, handed over shared.
    Shared(Bytes),
}

impl Unsent {
    /// Holds back what follows the first piece's place: `buf` keeps the bytes before it, and
    /// the pieces and the frame bytes between them wait (the latter copied: they are short).
    fn hold(&mut self, conn: ConnId, buf: &mut BytesMut, pieces: &mut Vec<SharedPiece>) {
        let Some(first) = pieces.first().map(|p| p.at) else {
            return;
        };
        let tail = Bytes::copy_from_slice(buf.get(first..).unwrap_or_default());
        buf.truncate(first);
        self.conn = Some(conn);
        let mut iter = pieces.drain(..).peekable();
        while let Some(p) = iter.next() {
            self.pieces.push_back(Piece::Shared(p.bytes));
            let end = iter.peek().map_or(first + tail.len(), |next| next.at);
            if end > p.at {
                let between = tail.slice(p.at - first..end - first);
                self.pieces.push_back(Piece::Buffer(between));
            }
        }
    }
}

impl Net {
    /// Gives the driver the next piece of bytes to send: the rest of a frame with shared
    /// blobs first, else queued requests of one connection written into `buf`.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut BytesMut,
    ) -> Option<Transmitted> {
        if let Some(t) = self.next_unsent(buf) {
            return Some(t);
        }
        let n = self.slots.len();
        for k in 0..n {
            let slot = (self.rr + k) % n;
            if let Some(conn) = self.transmit_slot(now, slot, buf) {
                self.rr = (slot + 1) % n;
                return Some(Transmitted::Buffer(conn));
            }
        }
        None
    }

    /// The next piece of a frame with shared blobs, while its connection is open (one that
    /// closed meanwhile takes nothing more: its requests failed with it).
    fn next_unsent(&mut self, buf: &mut BytesMut) -> Option<Transmitted> {
        let conn = self.unsent.conn?;
        let open = self
            .slot_of_conn(conn)
            .and_then(|slot| self.slots.get(slot))
            .is_some_and(|s| s.state.is_open());
        let piece = if open {
            self.unsent.pieces.pop_front()
        } else {
            None
        };
        if self.unsent.pieces.is_empty() || !open {
            self.unsent = Unsent::default();
        }
        match piece? {
            Piece::Buffer(bytes) => {
                buf.extend_from_slice(&bytes);
                Some(Transmitted::Buffer(conn))
            }
            Piece::Shared(bytes) => Some(Transmitted::Shared(conn, bytes)),
        }
    }

    /// Writes what one connection may send now: its ApiVersions while negotiating, else its
    /// queued requests while in-flight room lasts. `Some(conn)` when bytes were written.
    fn transmit_slot(&mut self, now: Instant, slot: usize, buf: &mut BytesMut) -> Option<ConnId> {
        match self.slots.get(slot)?.state {
            ConnState::Negotiating(conn, Negotiation::ToSend) => {
                self.send_negotiation(now, slot, conn, buf);
                Some(conn)
            }
            ConnState::Ready(conn) => self.send_queued(now, slot, conn, buf).then_some(conn),
            _ => None,
        }
    }

    /// A new connection's first request: ApiVersions v0, bounded by the setup timeout.
    fn send_negotiation(&mut self, now: Instant, slot: usize, conn: ConnId, buf: &mut BytesMut) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let deadline = now + self.setup_timeout;
        let neg_seq = u64::MAX - slot as u64;
        let req = Req {
            seq: neg_seq,
            target: Target::Any,
            body: RequestBody::ApiVersions(self.api_versions_body.clone()),
            api_key: ApiKey::API_VERSIONS,
            explicit_version: Some(0),
            sent_version: 0,
            origin: Origin::Negotiation,
            created: now,
            trace: None,
            renegotiated: false,
            await_late: false,
            late_timeouts: 0,
            sent_on: None,
        };
        s.state = ConnState::Negotiating(conn, Negotiation::InFlight);
        let corr = s.in_flight.insert(req);
        let mut header = self.header.clone();
        header.api_key = ApiKey::API_VERSIONS;
        header.api_version = 0;
        header.correlation_id = corr;
        let n = frame::encode_request(buf, &header, &self.api_versions_body);
        self.count_sent(ApiKey::API_VERSIONS, n);
        // Negotiation must finish within the request timeout too.
        self.live.insert(neg_seq, Loc::InFlight(slot, corr));
        self.timers.schedule(deadline, Timer::Request(neg_seq));
    }

    /// A ready connection's queued requests, in order, while it has in-flight room: each is
    /// stamped with the version the broker supports (or failed when it supports none),
    /// framed into `buf` (or failed when its frame is over the limit) and tracked until its
    /// answer; a frame with shared blobs ends the call ([`Unsent`]). `true` when at least one
    /// was written.
    fn send_queued(&mut self, now: Instant, slot: usize, conn: ConnId, buf: &mut BytesMut) -> bool {
        let mut wrote = false;
        while let Some(s) = self.slots.get_mut(slot) {
            if !s.in_flight.has_room() {
                break;
            }
            let Some(mut req) = s.queue.pop_front() else {
                break;
            };
            // Step 1: the version to send, or the request fails.
            let version = match req.explicit_version {
                Some(v) => Some(v),
                None => s.versions.as_ref().and_then(|v| v.get(req.api_key)),
            };
            let Some(version) = version else {
                let err = RequestError::UnsupportedApi {
                    api_key: req.api_key,
                    address: s.address.clone(),
                };
                self.complete(now, req, Err(err));
                continue;
            };
            req.sent_version = version;
            req.sent_on = Some((slot, conn));
            // Step 2: its header, carrying the trace context when it has one.
            let mut header = self.header.clone();
            header.api_key = req.api_key;
            header.api_version = version;
            if let Some(t) = &req.trace {
                header.trace_id.clone_from(&t.trace_id);
                header.span_id.clone_from(&t.span_id);
                header.trace_flags = t.flags;
            }
            // Step 3: in flight under a fresh correlation id, framed into the buffer.
            let start = buf.len();
            let seq = req.seq;
            let api_key = req.api_key;
            let corr = s.in_flight.insert(req);
            header.correlation_id = corr;
            let n = match s.in_flight.get(corr) {
                Some(r) => frame::encode_request_sharing(
                    buf,
                    &header,
                    &r.body,
                    SHARE_BLOBS_FROM,
                    &mut self.pieces,
                ),
                None => continue,
            };
            // Step 4: a frame over the limit is taken back out and fails the request.
            if n > MAX_REQUEST_FRAME {
                buf.truncate(start);
                self.pieces.clear();
                if let Some(req) = s.in_flight.remove(corr) {
                    let err = RequestError::TooLarge {
                        api_key,
                        size: n,
                        max: MAX_REQUEST_FRAME,
                    };
                    self.complete(now, req, Err(err));
                }
                continue;
            }
            wrote = true;
            self.live.insert(seq, Loc::InFlight(slot, corr));
            self.count_sent(api_key, n);
            // Step 5: a frame with shared blobs ends this call at its first blob; the rest
            // goes out in the calls after, before anything else.
            if !self.pieces.is_empty() {
                self.unsent.hold(conn, buf, &mut self.pieces);
                break;
            }
        }
        wrote
    }

    /// Counts one request of `n` bytes written.
    fn count_sent(&mut self, api_key: ApiKey, n: usize) {
        self.counters.bytes_sent += n as u64;
        self.counters.requests += 1;
        self.counters.requests_in_flight += 1;
        if let Some(a) = self.counters.api_mut(api_key) {
            a.requests += 1;
        }
    }
}
