//! Writing requests: queued requests of ready connections framed with fresh correlation ids
//! into the driver's buffer, within the in-flight limit.

use super::*;

impl Net {
    /// Writes queued requests of one connection into `buf` and returns that connection.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut BytesMut) -> Option<ConnId> {
        let n = self.slots.len();
        for k in 0..n {
            let slot = (self.rr + k) % n;
            if let Some(conn) = self.transmit_slot(now, slot, buf) {
                self.rr = (slot + 1) % n;
                return Some(conn);
            }
        }
        None
    }

    fn transmit_slot(&mut self, now: Instant, slot: usize, buf: &mut BytesMut) -> Option<ConnId> {
        let s = self.slots.get_mut(slot)?;
        match s.state {
            ConnState::Negotiating(conn, Negotiation::ToSend) => {
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
                self.counters.bytes_sent += n as u64;
                self.counters.requests += 1;
                self.counters.requests_in_flight += 1;
                if let Some(a) = self.counters.api_mut(ApiKey::API_VERSIONS) {
                    a.requests += 1;
                }
                // Negotiation must finish within the request timeout too.
                self.live.insert(neg_seq, Loc::InFlight(slot, corr));
                self.timers.schedule(deadline, Timer::Request(neg_seq));
                Some(conn)
            }
            ConnState::Ready(conn) => {
                let mut wrote = false;
                loop {
                    let s = self.slots.get_mut(slot)?;
                    if !s.in_flight.has_room() {
                        break;
                    }
                    let Some(mut req) = s.queue.pop_front() else {
                        break;
                    };
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
                    let mut header = self.header.clone();
                    header.api_key = req.api_key;
                    header.api_version = version;
                    if let Some(t) = &req.trace {
                        header.trace_id.clone_from(&t.trace_id);
                        header.span_id.clone_from(&t.span_id);
                        header.trace_flags = t.flags;
                    }
                    let start = buf.len();
                    let seq = req.seq;
                    let api_key = req.api_key;
                    let corr = s.in_flight.insert(req);
                    header.correlation_id = corr;
                    let n = match s.in_flight.get(corr) {
                        Some(r) => frame::encode_request(buf, &header, &r.body),
                        None => continue,
                    };
                    if n > MAX_REQUEST_FRAME {
                        buf.truncate(start);
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
                    self.counters.bytes_sent += n as u64;
                    self.counters.requests += 1;
                    self.counters.requests_in_flight += 1;
                    if let Some(a) = self.counters.api_mut(api_key) {
                        a.requests += 1;
                    }
                }
                wrote.then_some(conn)
            }
            _ => None,
        }
    }
}
