//! The router: every request of every module goes through here.
//!
//! It owns the connection slots (one per broker address), resolves a [`Target`] to a slot,
//! queues requests per broker, opens connections on demand, negotiates versions first, writes
//! requests with fresh correlation ids into the driver's buffer, matches responses by
//! correlation id, enforces deadlines through the timer queue, and hands every outcome back as a
//! [`Completion`] tagged with the [`Origin`] that asked — the admin module, the metadata
//! refresher, raw requests, and later the producer and consumer. It knows nothing about what the
//! bodies mean except ApiVersions.

use crate::backoff::Backoff;
use crate::config::{BrokerAddress, ClientConfig};
use crate::conn::{ConnState, Slot};
use crate::error::{ConnectionError, RequestError};
use crate::event::{DisconnectReason, Event};
use crate::metrics::Counters;
use crate::negotiate::Versions;
use crate::request::{ConnId, RequestOptions, Target};
use crate::rng::Rng;
use crate::timers::TimerQueue;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{self, FrameError};
use stellflow_proto::header::{RequestHeader, ResponseHeader};
use stellflow_proto::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestBody};
use stellflow_proto::wire::Wire;
use stellflow_proto::{ApiKey, ErrorCode, NString, Reader, StrBytes};

/// The largest request frame the server accepts, length prefix included (PROTOCOL.md §1.2).
pub const MAX_REQUEST_FRAME: usize = 67_108_864;

/// Request timeouts a request that awaits its late answer (`Net::await_late_answer`) waits
/// before its connection is closed.
pub const LATE_TIMEOUTS_TO_CLOSE: u32 = 2;

/// Who asked for a request, so its outcome goes back to the right module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The connection's own ApiVersions (never completes outward).
    Negotiation,
    /// A metadata refresh round.
    Metadata,
    /// An admin operation, by its id.
    Admin(u64),
    /// A raw request.
    Raw,
    /// The producer (Produce and InitProducerId).
    Producer,
    /// The consumer (fetches, offsets, group, commits).
    Consumer(crate::consumer::Op),
}

impl Origin {
    /// Requests that should not wait for a reconnect: they fail as soon as the connection
    /// attempt fails (a refresh asks the other brokers anyway).
    fn fail_fast(self) -> bool {
        matches!(self, Origin::Metadata)
    }
}

/// A trace context in wire form.
#[derive(Debug, Clone)]
struct Trace {
    trace_id: NString,
    span_id: NString,
    flags: i8,
}

/// A request somewhere between its command and its answer.
#[derive(Debug)]
pub struct Req {
    seq: u64,
    target: Target,
    body: RequestBody,
    api_key: ApiKey,
    explicit_version: Option<i16>,
    sent_version: i16,
    origin: Origin,
    created: Instant,
    trace: Option<Trace>,
    renegotiated: bool,
    /// Wait past the request timeout for the late answer (see [`Net::await_late_answer`]).
    await_late: bool,
    /// Request timeouts that passed while this request waited for its late answer.
    late_timeouts: u32,
    /// The slot and connection it was written on.
    sent_on: Option<(usize, ConnId)>,
}

/// A successful exchange: the broker answered (possibly with a request-level error code).
#[derive(Debug, Clone)]
pub struct Reply {
    /// The response header.
    pub header: ResponseHeader,
    /// The body, `None` when the header came alone.
    pub body: Option<Bytes>,
    /// The slot that answered.
    pub slot: usize,
    /// The broker id, if known.
    pub broker_id: Option<i32>,
    /// The version that was sent.
    pub version: i16,
}

/// The outcome of one request, for the module that asked.
#[derive(Debug)]
pub struct Completion {
    /// The request's sequence number (its [`crate::RequestId`] for raw requests).
    pub seq: u64,
    /// Who asked.
    pub origin: Origin,
    /// The API called.
    pub api_key: ApiKey,
    /// The answer or why there is none.
    pub result: Result<Reply, RequestError>,
    /// The slot and connection the request was written on; `None` when none of its bytes
    /// went out (it failed while parked or queued, so the broker never saw it).
    pub sent_on: Option<(usize, ConnId)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Request(u64),
    Reconnect(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Parked,
    Queued(usize),
    InFlight(usize, i32),
}

/// A request the driver should open a connection for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The id to report back in `handle_connected` / `handle_input` / `handle_disconnected`.
    pub conn: ConnId,
    /// Where to connect.
    pub address: BrokerAddress,
}

/// The router (see the module docs).
#[derive(Debug)]
pub struct Net {
    slots: Vec<Slot<Req>>,
    by_address: HashMap<BrokerAddress, usize>,
    by_broker: HashMap<i32, usize>,
    parked: VecDeque<Req>,
    live: HashMap<u64, Loc>,
    timers: TimerQueue<Timer>,
    connects: VecDeque<ConnectRequest>,
    closes: VecDeque<ConnId>,
    completions: VecDeque<Completion>,
    events: VecDeque<Event>,
    header: RequestHeader,
    api_versions_body: ApiVersionsRequest,
    request_timeout: Duration,
    max_in_flight: usize,
    max_frame: usize,
    backoff: Backoff,
    rng: Rng,
    next_conn: u64,
    next_seq: u64,
    rr: usize,
    /// What the router counted.
    pub counters: Counters,
    /// Why each slot's last connection failed or closed, until it is ready again: the cause
    /// named by errors of requests that could not be sent, and by the reconnect log line.
    last_cause: HashMap<usize, String>,
}

fn nstr(s: &Option<String>) -> NString {
    s.as_deref().map(StrBytes::from)
}

impl Net {
    /// A router for `config`, with `client_id` already resolved and its own jitter source.
    pub fn new(config: &ClientConfig, client_id: &str, rng: Rng) -> Self {
        let h = &config.header;
        let header = RequestHeader {
            client_id: Some(StrBytes::from(client_id)),
            tenant_id: nstr(&h.tenant_id),
            quota_key: nstr(&h.quota_key),
            auth_context_id: nstr(&h.auth_context_id),
            traffic_class: h.traffic_class,
            traffic_tag: nstr(&h.traffic_tag),
            flags: h.flags,
            ..RequestHeader::new(ApiKey::API_VERSIONS, 0, None)
        };
        let mut net = Net {
            slots: Vec::new(),
            by_address: HashMap::new(),
            by_broker: HashMap::new(),
            parked: VecDeque::new(),
            live: HashMap::new(),
            timers: TimerQueue::new(),
            connects: VecDeque::new(),
            closes: VecDeque::new(),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            header,
            api_versions_body: ApiVersionsRequest {
                client_software_name: Some(config.software_name.as_str().into()),
                client_software_version: Some(config.software_version.as_str().into()),
                supported_features: Vec::new(),
            },
            request_timeout: config.request_timeout,
            max_in_flight: config.max_in_flight_per_connection,
            max_frame: config.max_response_frame,
            backoff: Backoff::new(
                config.reconnect_backoff,
                config.reconnect_backoff_max,
                config.backoff_jitter,
            ),
            rng,
            next_conn: 0,
            next_seq: 0,
            rr: 0,
            counters: Counters::default(),
            last_cause: HashMap::new(),
        };
        for a in &config.bootstrap {
            net.slot_for(a);
        }
        net
    }

    /// The slot index for `address`, created idle if new.
    pub fn slot_for(&mut self, address: &BrokerAddress) -> usize {
        if let Some(i) = self.by_address.get(address) {
            return *i;
        }
        let i = self.slots.len();
        self.slots.push(Slot::new(
            address.clone(),
            self.max_in_flight,
            self.max_frame,
            self.backoff.clone(),
        ));
        self.by_address.insert(address.clone(), i);
        i
    }

    /// The address of a slot.
    pub fn address(&self, slot: usize) -> Option<&BrokerAddress> {
        self.slots.get(slot).map(|s| &s.address)
    }

    /// Every known address with whether its slot is waiting out a backoff.
    pub fn addresses(&self) -> impl Iterator<Item = (&BrokerAddress, bool)> {
        self.slots
            .iter()
            .map(|s| (&s.address, matches!(s.state, ConnState::Backoff(_))))
    }

    /// Records that `broker_id` lives at `address` (from metadata) and releases requests that
    /// were waiting for it.
    pub fn learn_broker(&mut self, now: Instant, broker_id: i32, address: &BrokerAddress) {
        let slot = self.slot_for(address);
        if let Some(old) = self.by_broker.insert(broker_id, slot)
            && old != slot
            && let Some(s) = self.slots.get_mut(old)
            && s.broker_id == Some(broker_id)
        {
            s.broker_id = None;
        }
        if let Some(s) = self.slots.get_mut(slot) {
            s.broker_id = Some(broker_id);
        }
        let waiting: Vec<Req> = {
            let (hit, keep): (VecDeque<Req>, VecDeque<Req>) = std::mem::take(&mut self.parked)
                .into_iter()
                .partition(|r| r.target == Target::Broker(broker_id));
            self.parked = keep;
            hit.into()
        };
        for r in waiting {
            self.enqueue(now, slot, r, false);
        }
    }

    /// Submits a request; its outcome comes back as a [`Completion`] with the returned sequence
    /// number. `version` forces an API version (raw requests); `None` uses the negotiated one.
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        &mut self,
        now: Instant,
        target: Target,
        body: RequestBody,
        version: Option<i16>,
        origin: Origin,
        opts: &RequestOptions,
    ) -> u64 {
        let seq = self.alloc_seq();
        let deadline = now + opts.timeout.unwrap_or(self.request_timeout);
        let trace = opts.trace.as_ref().map(|t| Trace {
            trace_id: nstr(&t.trace_id),
            span_id: nstr(&t.span_id),
            flags: t.trace_flags,
        });
        let req = Req {
            seq,
            api_key: body.api_key(),
            target: target.clone(),
            body,
            explicit_version: version,
            sent_version: 0,
            origin,
            created: now,
            trace,
            renegotiated: false,
            await_late: false,
            late_timeouts: 0,
            sent_on: None,
        };
        self.timers.schedule(deadline, Timer::Request(seq));
        match self.resolve(now, &target) {
            Some(slot) => self.enqueue(now, slot, req, false),
            None => {
                self.live.insert(seq, Loc::Parked);
                self.parked.push_back(req);
            }
        }
        seq
    }

    /// Withdraws request `seq` if none of its bytes went out yet (it waits for its broker to be
    /// known or in its connection's queue). Returns whether it was withdrawn: then no
    /// [`Completion`] will follow for it. A request already written is left alone.
    pub fn cancel_unsent(&mut self, seq: u64) -> bool {
        let req = match self.live.get(&seq).copied() {
            Some(Loc::Parked) => {
                let pos = self.parked.iter().position(|r| r.seq == seq);
                pos.and_then(|p| self.parked.remove(p))
            }
            Some(Loc::Queued(slot)) => self.slots.get_mut(slot).and_then(|s| {
                let pos = s.queue.iter().position(|r| r.seq == seq)?;
                s.queue.remove(pos)
            }),
            _ => None,
        };
        if req.is_some() {
            // Its request timer goes stale and is dropped by `poll_timeout`.
            self.live.remove(&seq);
        }
        req.is_some()
    }

    /// Makes request `seq` (not yet written) wait past its request timeout for its late
    /// answer instead of failing with [`RequestError::Timeout`]: the idempotent producer must
    /// not send a retry while the request it replaces may still be executing on the broker
    /// (DESIGN §3 item 14). The wait is bounded: once two request timeouts passed without the
    /// answer (or the connection's silent-timeout rule fires first), the connection is closed
    /// and the request completes with [`RequestError::Disconnected`]; the caller then waits
    /// for [`Net::answered_since`] before re-sending.
    pub fn await_late_answer(&mut self, seq: u64) {
        let req = match self.live.get(&seq).copied() {
            Some(Loc::Parked) => self.parked.iter_mut().find(|r| r.seq == seq),
            Some(Loc::Queued(slot)) => self
                .slots
                .get_mut(slot)
                .and_then(|s| s.queue.iter_mut().find(|r| r.seq == seq)),
            Some(Loc::InFlight(slot, corr)) => self
                .slots
                .get_mut(slot)
                .and_then(|s| s.in_flight.get_mut(corr)),
            None => None,
        };
        if let Some(r) = req {
            r.await_late = true;
        }
    }

    /// When `slot` first received an answer on a connection opened after `conn` (`None`
    /// while it has not): the broker behind it completed a round trip since `conn` was lost.
    /// A request written on `conn` and never answered was read by the broker before that
    /// answer or never (a frozen broker reads it when it resumes, at the latest together
    /// with the new connection's first request).
    pub fn answered_since(&self, slot: usize, conn: ConnId) -> Option<Instant> {
        self.slots
            .get(slot)
            .and_then(|s| s.last_answer_conn)
            .filter(|(c, _)| c.0 > conn.0)
            .map(|(_, at)| at)
    }

    /// Whether request `seq` is written and unanswered (in flight on a connection).
    pub fn was_written(&self, seq: u64) -> bool {
        matches!(self.live.get(&seq), Some(Loc::InFlight(..)))
    }

    /// The address of `slot`, as a target.
    pub fn slot_target(&self, slot: usize) -> Option<Target> {
        self.address(slot).cloned().map(Target::Address)
    }

    /// A fresh id from the request sequence (also used for admin operation ids).
    pub fn alloc_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn resolve(&mut self, now: Instant, target: &Target) -> Option<usize> {
        match target {
            Target::Address(a) => Some(self.slot_for(a)),
            Target::Broker(id) => self.by_broker.get(id).copied(),
            Target::Any => {
                let rank = |s: &Slot<Req>| -> (u8, usize) {
                    let class = match s.state {
                        ConnState::Ready(_) => 0,
                        ConnState::Negotiating(..) | ConnState::Connecting(_) => 1,
                        ConnState::Idle if s.next_attempt.is_none_or(|t| t <= now) => 2,
                        _ => 3,
                    };
                    (class, s.load())
                };
                (0..self.slots.len())
                    .min_by_key(|i| self.slots.get(*i).map_or((u8::MAX, usize::MAX), &rank))
            }
        }
    }

    fn enqueue(&mut self, now: Instant, slot: usize, req: Req, front: bool) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        self.live.insert(req.seq, Loc::Queued(slot));
        if front {
            s.queue.push_front(req);
        } else {
            s.queue.push_back(req);
        }
        self.ensure_connection(now, slot);
    }

    fn ensure_connection(&mut self, now: Instant, slot: usize) {
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
        });
        tracing::debug!(broker = %s.address, conn = conn.0, "connecting");
        self.counters.connection_attempts += 1;
    }

    /// Next connection the driver should open.
    pub fn poll_connect(&mut self) -> Option<ConnectRequest> {
        // Skip requests whose slot moved on (e.g. the attempt was abandoned).
        while let Some(c) = self.connects.pop_front() {
            if self.slot_of_conn(c.conn).is_some() {
                return Some(c);
            }
        }
        None
    }

    /// Next connection the driver should close.
    pub fn poll_close(&mut self) -> Option<ConnId> {
        self.closes.pop_front()
    }

    /// Next router event (connections).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Next completed request.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    fn slot_of_conn(&self, conn: ConnId) -> Option<usize> {
        self.slots.iter().position(|s| s.state.conn() == Some(conn))
    }

    /// Bytes still missing of the frame `conn` has started to receive (0: none, or unknown).
    pub fn input_wanted(&self, conn: ConnId) -> usize {
        let Some(s) = self.slot_of_conn(conn).and_then(|i| self.slots.get(i)) else {
            return 0;
        };
        match frame_total(&s.rx) {
            Some(total) if total <= s.decoder.max_frame_length() => {
                total.saturating_sub(s.rx.len())
            }
            _ => 0,
        }
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, _now: Instant, conn: ConnId) {
        let Some(slot) = self.slot_of_conn(conn) else {
            return;
        };
        if let Some(s) = self.slots.get_mut(slot)
            && s.state == ConnState::Connecting(conn)
        {
            s.state = ConnState::Negotiating(conn, false);
            s.rx.clear();
            s.versions = None;
            self.counters.connections += 1;
            tracing::debug!(broker = %s.address, conn = conn.0, "connected; negotiating versions");
        }
    }

    /// The driver lost `conn` (or never established it).
    pub fn handle_disconnected(&mut self, now: Instant, conn: ConnId, reason: DisconnectReason) {
        if let Some(slot) = self.slot_of_conn(conn) {
            self.drop_connection(now, slot, reason);
        }
    }

    fn close_with_error(&mut self, now: Instant, slot: usize, error: ConnectionError) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        if let Some(conn) = s.state.conn() {
            tracing::warn!(broker = %s.address, conn = conn.0, "closing the connection: {error}");
            self.closes.push_back(conn);
            self.events.push_back(Event::ConnectionError {
                conn,
                address: s.address.clone(),
                error: error.clone(),
            });
        }
        self.drop_connection(now, slot, DisconnectReason::Core(error));
    }

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
        let delay = s.backoff.next_delay(&mut self.rng);
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
        let mut keep = VecDeque::with_capacity(s.queue.len());
        let mut fail = Vec::new();
        for r in s.queue.drain(..) {
            if r.origin.fail_fast() {
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
        for r in in_flight.into_iter().map(|(_, r)| r).chain(fail) {
            let err = RequestError::Disconnected {
                api_key: r.api_key,
                address: address.clone(),
                cause: cause.clone(),
            };
            self.complete(now, r, Err(err));
        }
        if was_open {
            tracing::warn!(broker = %address, conn = conn.0, ?delay, "connection lost: {cause}");
        } else if self.last_cause.get(&slot) == Some(&cause) {
            // The same failure again: said once at warn already.
            tracing::debug!(broker = %address, conn = conn.0, ?delay, "cannot connect: {cause}");
        } else {
            tracing::warn!(broker = %address, conn = conn.0, ?delay, "cannot connect: {cause}");
        }
        self.last_cause.insert(slot, cause);
        self.events.push_back(Event::Disconnected {
            conn,
            address,
            reason,
            retry_in: delay,
        });
        self.ensure_connection(now, slot);
    }

    /// Bytes arrived on `conn`. Takes every byte out of `buf`.
    pub fn handle_input(&mut self, now: Instant, conn: ConnId, buf: &mut BytesMut) {
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
            // An oversize frame is refused once its correlation id is in (so the request it
            // answers fails with `ResponseTooLarge`, not as a plain disconnect).
            if let Some(total) = frame_total(&s.rx)
                && s.rx.len() < total
                && (total <= s.decoder.max_frame_length() || s.rx.len() < 8)
            {
                // Incomplete: wait for more without letting the decoder reserve room (that
                // would move the bytes, and the next read could no longer be joined in place).
                return;
            }
            match s.decoder.decode(&mut s.rx) {
                Ok(Some(frame)) => self.handle_frame(now, slot, frame),
                Ok(None) => return,
                Err(FrameError::TooLong { length, max }) => {
                    let size = u64::from(length) + 4;
                    let refused =
                        s.rx.get(4..8)
                            .and_then(|b| <[u8; 4]>::try_from(b).ok())
                            .and_then(|id| s.in_flight.remove(i32::from_be_bytes(id)));
                    if let Some(req) = refused {
                        self.counters.requests_in_flight =
                            self.counters.requests_in_flight.saturating_sub(1);
                        let api_key = req.api_key;
                        let err = RequestError::ResponseTooLarge { api_key, size, max };
                        self.complete(now, req, Err(err));
                    }
                    let err = ConnectionError::FrameTooLarge { size, max };
                    return self.close_with_error(now, slot, err);
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

    fn handle_frame(&mut self, now: Instant, slot: usize, frame: Bytes) {
        let (header, body) = match frame::split_response(frame) {
            Ok(x) => x,
            Err(FrameError::ResponseHeader(e)) => {
                return self.close_with_error(now, slot, ConnectionError::Malformed(e));
            }
            Err(e) => {
                let e = stellflow_proto::DecodeError::invalid("response", e.to_string());
                return self.close_with_error(now, slot, ConnectionError::Malformed(e));
            }
        };
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
                s.state = ConnState::Negotiating(c, false);
            }
            let mut req = req;
            req.renegotiated = true;
            return self.enqueue(now, slot, req, true);
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
            Err(e) => return self.close_with_error(now, slot, ConnectionError::Negotiation(e)),
        };
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

    fn complete(&mut self, now: Instant, req: Req, result: Result<Reply, RequestError>) {
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
            ConnState::Negotiating(conn, false) => {
                let deadline = now + self.request_timeout;
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
                s.state = ConnState::Negotiating(conn, true);
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

    /// The earliest deadline that matters (stale timers are dropped on the way).
    pub fn poll_timeout(&mut self) -> Option<Instant> {
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
    pub fn handle_timeout(&mut self, now: Instant) {
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

    fn expire(&mut self, now: Instant, seq: u64) {
        let Some(loc) = self.live.remove(&seq) else {
            return;
        };
        let req = match loc {
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
                    return self.wait_late(now, seq, slot, corr, late);
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
        };
        let Some(req) = req else {
            return;
        };
        self.counters.timeouts += 1;
        if req.origin == Origin::Negotiation {
            // A broker that never answers ApiVersions is useless: close and retry later.
            if let Loc::InFlight(slot, _) = loc {
                let err = ConnectionError::Negotiation("ApiVersions timed out".to_owned());
                self.close_with_error(now, slot, err);
            }
            return;
        }
        let err = match (&req.target, loc) {
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
        };
        let broker = match loc {
            Loc::Queued(slot) | Loc::InFlight(slot, _) => self.address(slot).cloned(),
            Loc::Parked => None,
        };
        match broker {
            Some(b) => tracing::warn!(broker = %b, api = %req.api_key, "request failed: {err}"),
            None => tracing::warn!(api = %req.api_key, "request failed: {err}"),
        }
        self.complete(now, req, Err(err));
        // Repeated in-flight timeouts with nothing received: the connection is presumed dead
        // (no FIN, no RST will ever come); close it so the next requests reconnect.
        if let Loc::InFlight(slot, _) = loc
            && let Some(s) = self.slots.get_mut(slot)
        {
            s.silent_timeouts += 1;
            if s.silent_timeouts >= crate::conn::SILENT_TIMEOUTS_TO_CLOSE {
                let timeouts = s.silent_timeouts;
                self.close_with_error(now, slot, ConnectionError::Unresponsive { timeouts });
            }
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
        if late >= LATE_TIMEOUTS_TO_CLOSE || silent >= crate::conn::SILENT_TIMEOUTS_TO_CLOSE {
            let timeouts = silent.max(late);
            self.close_with_error(now, slot, ConnectionError::Unresponsive { timeouts });
        } else {
            self.timers
                .schedule(now + self.request_timeout, Timer::Request(seq));
        }
    }

    /// Fails every request (the client is closing) and forgets every connection.
    pub fn close_all(&mut self, now: Instant) {
        for slot in 0..self.slots.len() {
            if let Some(s) = self.slots.get_mut(slot) {
                if let Some(c) = s.state.conn() {
                    self.closes.push_back(c);
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
}

impl Net {
    /// Why a request queued for `slot` could not be sent: the slot is not ready, with the
    /// last failure seen (or the state it is stuck in). `None` when the connection is ready
    /// (the request waited for room in flight).
    fn unsent_cause(&self, slot: usize) -> Option<(BrokerAddress, String)> {
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
    pub fn last_cause(&self, address: &BrokerAddress) -> Option<&str> {
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
    match frame_total(rx) {
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

/// The size of the frame starting `rx` (length prefix included), once the prefix is in.
fn frame_total(rx: &BytesMut) -> Option<usize> {
    let prefix: [u8; frame::LENGTH_PREFIX_LEN] =
        rx.get(..frame::LENGTH_PREFIX_LEN)?.try_into().ok()?;
    Some((u32::from_be_bytes(prefix) as usize).saturating_add(frame::LENGTH_PREFIX_LEN))
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
        && let Some(total) = frame_total(rx)
        && total <= max_frame
    {
        rx.reserve(total.saturating_sub(rx.len()).max(chunk.len()));
    }
    // O(1) when contiguous; one copy otherwise.
    rx.unsplit(chunk);
}
