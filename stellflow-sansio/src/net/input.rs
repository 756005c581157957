//! Frame reassembly and answers: the caller's bytes appended to a connection's receive buffer,
//! whole frames matched to their request by correlation id, the negotiation's ApiVersions
//! answer, and completions handed back to the module that asked.

use super::*;

impl Net {
    /// Bytes still missing of the frame `conn` has started to receive (0: none, or unknown).
    pub(crate) fn input_wanted(&self, conn: ConnId) -> usize {
        let Some(s) = self.slot_of_conn(conn).and_then(|i| self.slots.get(i)) else {
            return 0;
        };
        match frame::frame_length(&s.rx) {
            Some(total) if total <= s.decoder.max_frame_length() => {
                total.saturating_sub(s.rx.len())
            }
            _ => 0,
        }
    }

    /// Bytes arrived on `conn`. Takes every byte out of `buf`.
    pub(crate) fn handle_input(&mut self, now: Instant, conn: ConnId, buf: &mut BytesMut) {
        let Some(slot) = self.slot_of_conn(conn) else {
            buf.clear();
            return;
        };
        self.counters.bytes_received += buf.len() as u64;
        {
            let Some(s) = self.slots.get_mut(slot) else {
                return;
            };
            if !s.state.is_open() {
                buf.clear();
                return;
            }
            if !buf.is_empty() {
                s.silent_timeouts = 0;
            }
            append_input(&mut s.rx, buf, s.decoder.max_frame_length());
        }
        loop {
            let Some(s) = self.slots.get_mut(slot) else {
                return;
            };
            if s.state.conn() != Some(conn) {
                return;
            }
            // A first answer longer than any frame a Stellflow broker writes is not one.
            let absurd = first_answer(s)
                && frame::frame_length(&s.rx).is_some_and(|total| total > MAX_REQUEST_FRAME);
            // An oversize frame is refused once its correlation id is in (so the request it
            // answers fails with `ResponseTooLarge`, not as a plain disconnect).
            if let Some(total) = frame::frame_length(&s.rx)
                && s.rx.len() < total
                && (total <= s.decoder.max_frame_length() || (s.rx.len() < 8 && !absurd))
            {
                // Incomplete: wait for more without letting the decoder reserve room (that
                // would move the bytes, and the next read could no longer be joined in place).
                return;
            }
            match s.decoder.decode(&mut s.rx) {
                Ok(Some(frame)) => self.handle_frame(now, slot, frame),
                Ok(None) => return,
                Err(FrameError::TooLong { .. }) if absurd => {
                    let length = frame::frame_length(&s.rx).unwrap_or_default();
                    let detail = not_stellflow_prefix(length, &s.rx);
                    let err = ConnectionError::NotStellflow { detail };
                    return self.close_with_error(now, slot, err);
                }
                Err(FrameError::TooLong { length, max }) => {
                    return self.refuse_oversize(now, slot, length, max);
                }
                Err(e) => {
                    let err = ConnectionError::Malformed(stellflow_proto::DecodeError::invalid(
                        "frame",
                        e.to_string(),
                    ));
                    return self.close_with_error(now, slot, err);
                }
            }
        }
    }

    /// A frame over `consumer.max_response_frame` (or the client's limit) declared on `slot`:
    /// the request it answers fails with `ResponseTooLarge` and the connection is closed; a
    /// first answer for a request never sent means the peer is not a Stellflow broker.
    fn refuse_oversize(&mut self, now: Instant, slot: usize, length: u32, max: usize) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let size = u64::from(length) + 4;
        let refused =
            s.rx.get(4..8)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .and_then(|id| s.in_flight.remove(i32::from_be_bytes(id)));
        if refused.is_none() && first_answer(s) {
            let detail = format!(
                "its first answer declares a frame of {size} bytes for a request never sent on the connection"
            );
            let err = ConnectionError::NotStellflow { detail };
            return self.close_with_error(now, slot, err);
        }
        if let Some(req) = refused {
            self.counters.requests_in_flight = self.counters.requests_in_flight.saturating_sub(1);
            let api_key = req.api_key;
            let err = RequestError::ResponseTooLarge { api_key, size, max };
            self.complete(now, req, Err(err));
        }
        let err = ConnectionError::FrameTooLarge { size, max };
        self.close_with_error(now, slot, err);
    }

    fn handle_frame(&mut self, now: Instant, slot: usize, frame: Bytes) {
        let negotiating = self.slots.get(slot).is_some_and(first_answer);
        let (header, body) = match frame::split_response(frame) {
            Ok(x) => x,
            Err(e) if negotiating => {
                let detail = format!("its first answer is not a response frame ({e})");
                return self.close_with_error(now, slot, ConnectionError::NotStellflow { detail });
            }
            Err(FrameError::ResponseHeader(e)) => {
                return self.close_with_error(now, slot, ConnectionError::Malformed(e));
            }
            Err(e) => {
                let e = stellflow_proto::DecodeError::invalid("response", e.to_string());
                return self.close_with_error(now, slot, ConnectionError::Malformed(e));
            }
        };
        if negotiating {
            let Some(s) = self.slots.get(slot) else {
                return;
            };
            if s.in_flight.get(header.correlation_id).is_none() {
                let detail = format!(
                    "its first answer carries correlation id {}, which was never sent on the connection",
                    header.correlation_id
                );
                return self.close_with_error(now, slot, ConnectionError::NotStellflow { detail });
            }
        } else {
            self.note_answer(now, slot);
        }
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        if let Some(c) = s.state.conn()
            && s.last_answer_conn.is_none_or(|(l, _)| l != c)
        {
            s.last_answer_conn = Some((c, now));
        }
        let Some(req) = s.in_flight.remove(header.correlation_id) else {
            tracing::debug!(broker = %s.address, correlation_id = header.correlation_id,
                "answer to no request in flight (late after a timeout?); dropped");
            self.counters.unknown_correlation_ids += 1;
            return;
        };
        self.counters.requests_in_flight = self.counters.requests_in_flight.saturating_sub(1);
        if req.origin == Origin::Negotiation {
            self.live.remove(&req.seq);
            return self.finish_negotiation(now, slot, header, body);
        }
        if header.error_code == ErrorCode::UNSUPPORTED_VERSION
            && body.is_none()
            && req.explicit_version.is_none()
        {
            if req.renegotiated {
                let err = RequestError::UnsupportedVersion {
                    api_key: req.api_key,
                    version: req.sent_version,
                    address: s.address.clone(),
                };
                return self.complete(now, req, Err(err));
            }
            // Renegotiate this connection, then send the request again (once).
            tracing::debug!(broker = %s.address, api = %req.api_key, "UNSUPPORTED_VERSION; renegotiating");
            if let ConnState::Ready(c) = s.state {
                s.state = ConnState::Negotiating(c, Negotiation::ToSend);
            }
            let mut req = req;
            req.renegotiated = true;
            return self.enqueue(now, slot, req, QueueEnd::Front);
        }
        let reply = Reply {
            header,
            body,
            slot,
            broker_id: s.broker_id,
            version: req.sent_version,
        };
        self.complete(now, req, Ok(reply));
    }

    fn finish_negotiation(
        &mut self,
        now: Instant,
        slot: usize,
        header: ResponseHeader,
        body: Option<Bytes>,
    ) {
        let parsed = match body {
            None => Err(format!(
                "ApiVersions answered {} without a body",
                header.error_code
            )),
            Some(b) => ApiVersionsResponse::decode(&mut Reader::new(b)).map_err(|e| e.to_string()),
        };
        let resp = match parsed {
            Ok(r) => r,
            Err(e) => {
                let detail = format!("its first answer is not an ApiVersions response ({e})");
                return self.close_with_error(now, slot, ConnectionError::NotStellflow { detail });
            }
        };
        self.note_answer(now, slot);
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let ConnState::Negotiating(conn, _) = s.state else {
            return;
        };
        s.versions = Some(Versions::negotiate(&resp));
        s.api_versions = Some(resp);
        s.state = ConnState::Ready(conn);
        s.backoff.reset();
        s.next_attempt = None;
        match self.last_cause.remove(&slot) {
            Some(cause) => tracing::info!(broker = %s.address, broker_id = ?s.broker_id,
                conn = conn.0, "reconnected (the last connection ended: {cause})"),
            None => tracing::debug!(broker = %s.address, broker_id = ?s.broker_id, conn = conn.0,
                apis = s.api_versions.as_ref().map_or(0, |r| r.api_versions.len()), "ready"),
        }
        self.events.push_back(Event::Connected {
            conn,
            address: s.address.clone(),
            broker_id: s.broker_id,
        });
    }

    pub(super) fn complete(&mut self, now: Instant, req: Req, result: Result<Reply, RequestError>) {
        self.live.remove(&req.seq);
        let failed = match &result {
            Ok(r) => r.header.error_code.is_err() && r.body.is_none(),
            Err(_) => true,
        };
        if let Ok(_r) = &result {
            self.counters
                .request_duration
                .record(now.saturating_duration_since(req.created));
            let took = now.saturating_duration_since(req.created);
            crate::metrics::emit::request_duration(req.api_key, took);
        }
        if failed {
            self.counters.request_errors += 1;
            if let Some(a) = self.counters.api_mut(req.api_key) {
                a.errors += 1;
            }
        }
        if req.origin == Origin::Negotiation {
            return;
        }
        self.completions.push_back(Completion {
            seq: req.seq,
            origin: req.origin,
            api_key: req.api_key,
            result,
            sent_on: req.sent_on,
        });
    }
}

/// Whether the next frame on `s`'s connection is its first: the answer to ApiVersions, which
/// says whether the peer is a Stellflow broker at all.
fn first_answer(s: &Slot<Req>) -> bool {
    matches!(s.state, ConnState::Negotiating(c, _) if s.last_answer_conn.is_none_or(|(l, _)| l != c))
}

/// What an absurd first frame says about the peer: its declared length, and the first bytes as
/// text when they look like text (an HTTP server answers `HTTP/1.0 400 ...`).
fn not_stellflow_prefix(length: usize, rx: &BytesMut) -> String {
    let head: String = rx
        .iter()
        .take(16)
        .map(|b| match *b {
            b' '..=b'~' => char::from(*b),
            _ => '.',
        })
        .collect();
    format!(
        "its first answer declares a frame of {length} bytes, more than a Stellflow broker ever sends; it begins {head:?}"
    )
}

/// Moves the caller's bytes to the end of a connection's receive buffer, leaving `buf`
/// empty, copying as little as possible:
///
/// * nothing buffered: `buf`'s bytes are taken as they are (no copy; `buf` keeps its spare
///   capacity, so a driver that reads into it again produces a contiguous continuation);
/// * the chunk continues the buffered bytes in the same allocation (the case above, read
///   again): joined in O(1) by [`BytesMut::unsplit`];
/// * otherwise copied once, into room reserved for the whole frame at once (never regrown
///   chunk by chunk).
fn append_input(rx: &mut BytesMut, buf: &mut BytesMut, max_frame: usize) {
    if rx.is_empty() {
        *rx = buf.split();
        return;
    }
    let chunk = buf.split();
    let contiguous = rx.as_ptr().wrapping_add(rx.len()) == chunk.as_ptr();
    if !contiguous
        && let Some(total) = frame::frame_length(rx)
        && total <= max_frame
    {
        rx.reserve(total.saturating_sub(rx.len()).max(chunk.len()));
    }
    // O(1) when contiguous; one copy otherwise.
    rx.unsplit(chunk);
}
