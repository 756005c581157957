//! The router: every request of every module goes through here.
//!
//! It owns the connection slots (one per broker address), resolves a [`Target`] to a slot,
//! queues requests per broker, opens connections on demand, negotiates versions first, writes
//! requests with fresh correlation ids into the driver's buffer, matches responses by
//! correlation id, enforces deadlines through the timer queue, and hands every outcome back as a
//! [`Completion`] tagged with the [`Origin`] that asked — the admin module, the metadata
//! refresher, raw requests, and later the producer and consumer. It knows nothing about what the
//! bodies mean except ApiVersions.
//!
//! One job per file, all on [`Net`]: this file routes (targets to slots, queues, sequence
//! numbers) and hands outcomes out; `connection` opens and drops connections; `input`
//! reassembles frames and matches answers; `transmit` writes requests; `timeouts` expires
//! requests and gives up silent connections.

use crate::address::BrokerAddress;
use crate::backoff::Backoff;
use crate::config::ClientConfig;
use crate::error::{ConnectionError, RequestError};
use crate::event::{DisconnectReason, Event};
use crate::metrics::Counters;
use crate::negotiate::Versions;
use crate::request::{ConnId, RequestOptions, Target};
use crate::rng::Rng;
use crate::timers::TimerQueue;
use bytes::{Bytes, BytesMut};
use slot::{ConnState, Negotiation, Slot};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{self, FrameError};
use stellflow_proto::header::{RequestHeader, ResponseHeader};
use stellflow_proto::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestBody};
use stellflow_proto::wire::Wire;
use stellflow_proto::{ApiKey, ErrorCode, NString, Reader, StrBytes};

mod connection;
mod health;
mod input;
mod slot;
mod timeouts;
mod transmit;

pub(crate) use crate::request::MAX_REQUEST_FRAME;
pub use connection::{CloseMode, CloseRequest};
pub(crate) use transmit::Transmitted;

/// Request timeouts a request that awaits its late answer (`Net::await_late_answer`) waits
/// before its connection is closed.
pub(crate) const LATE_TIMEOUTS_TO_CLOSE: u32 = 2;

/// Who asked for a request, so its outcome goes back to the right module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
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
    /// The consumer (fetches, offsets, group, commits), by the consumer's own note for the
    /// request (its `Op` as a tag).
    Consumer(OwnerTag),
}

/// What a feature's request is for, in the feature's own numbering and opaque to the router:
/// the feature makes one from its own note when it submits a request and reads it back from
/// the request's [`Completion`] (the consumer's steps, for instance). The router only carries
/// it, so it imports no feature type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnerTag {
    /// Which of the feature's steps the request is for.
    pub kind: u8,
    /// The command the request belongs to (a commit's id), or 0 when the step has none.
    pub id: u64,
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
pub(crate) struct Req {
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
pub(crate) struct Reply {
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
pub(crate) struct Completion {
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
#[non_exhaustive]
pub struct ConnectRequest {
    /// The id to report back in `handle_connected` / `handle_input` / `handle_disconnected`.
    pub conn: ConnId,
    /// Where to connect.
    pub address: BrokerAddress,
    /// How long the host may keep bytes written on this connection unacknowledged before it
    /// gives up on the connection: on Linux (and Android, Fuchsia) set `TCP_USER_TIMEOUT` to
    /// it once connected (socket2's `SockRef::set_tcp_user_timeout`), so the host stops
    /// retransmitting and resets the connection by itself, even while the process is stopped.
    /// The driver then sees the connection fail (`ETIMEDOUT`) and reports it disconnected as
    /// usual. `None`: leave the host's default (about 15 minutes of retransmissions on Linux).
    ///
    /// The core sets it on every connection of a client with a `consumer.group_id`, to the
    /// group's lease margin (`min(heartbeat_interval, session_timeout / 4)`): a commit or
    /// registry write sent at `s` then leaves the host by `s + margin` or never, so it cannot
    /// land after another member took the partition over when the member is paused and cut
    /// off at once (ARCHITECTURE.md decision 19 (e)). A driver on a system without the option
    /// ignores it (and loses that guarantee, nothing else).
    pub unacked_timeout: Option<Duration>,
}

/// The router (see the module docs).
#[derive(Debug)]
pub(crate) struct Net {
    slots: Vec<Slot<Req>>,
    by_address: HashMap<BrokerAddress, usize>,
    by_broker: HashMap<i32, usize>,
    parked: VecDeque<Req>,
    live: HashMap<u64, Loc>,
    timers: TimerQueue<Timer>,
    connects: VecDeque<ConnectRequest>,
    /// [`ConnectRequest::unacked_timeout`] of every connection opened.
    unacked_timeout: Option<Duration>,
    closes: VecDeque<CloseRequest>,
    completions: VecDeque<Completion>,
    events: VecDeque<Event>,
    header: RequestHeader,
    api_versions_body: ApiVersionsRequest,
    request_timeout: Duration,
    /// How long a new connection may take to answer its ApiVersions.
    setup_timeout: Duration,
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
    /// Each slot's liveness (by slot index), for the cluster health.
    health: Vec<health::SlotHealth>,
    /// When any broker last answered, and since when none has.
    liveness: health::Liveness,
    /// The rest of a frame whose record blobs go out without a copy, for the calls after.
    unsent: transmit::Unsent,
    /// Room for [`frame::encode_request_sharing`]'s pieces, reused.
    pieces: Vec<stellflow_proto::wire::SharedPiece>,
}

fn nstr(s: &Option<String>) -> NString {
    s.as_deref().map(StrBytes::from)
}

/// Which end of a slot's queue a request joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QueueEnd {
    /// First: a request sent again (after a renegotiation) keeps its turn.
    Front,
    /// Last: a new request, or one that waited for its broker.
    Back,
}

impl Net {
    /// A router for `config`, with `client_id` already resolved and its own jitter source.
    pub(crate) fn new(config: &ClientConfig, client_id: &str, rng: Rng) -> Self {
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
            unacked_timeout: None,
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
            setup_timeout: config.request_timeout.min(config.connection_setup_timeout),
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
            health: Vec::new(),
            liveness: health::Liveness::default(),
            unsent: transmit::Unsent::default(),
            pieces: Vec::new(),
        };
        for a in &config.bootstrap {
            net.slot_for(a);
        }
        net
    }

    /// The slot index for `address`, created idle if new.
    pub(crate) fn slot_for(&mut self, address: &BrokerAddress) -> usize {
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
        self.health.push(health::SlotHealth::default());
        i
    }

    /// The address of a slot.
    pub(crate) fn address(&self, slot: usize) -> Option<&BrokerAddress> {
        self.slots.get(slot).map(|s| &s.address)
    }

    /// Every known address with whether its slot is waiting out a backoff.
    pub(crate) fn addresses(&self) -> impl Iterator<Item = (&BrokerAddress, bool)> {
        self.slots
            .iter()
            .map(|s| (&s.address, matches!(s.state, ConnState::Backoff(_))))
    }

    /// Records that `broker_id` lives at `address` (from metadata) and releases requests that
    /// were waiting for it.
    pub(crate) fn learn_broker(&mut self, now: Instant, broker_id: i32, address: &BrokerAddress) {
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
            self.enqueue(now, slot, r, QueueEnd::Back);
        }
    }

    /// Submits a request; its outcome comes back as a [`Completion`] with the returned sequence
    /// number. `version` forces an API version (raw requests); `None` uses the negotiated one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn submit(
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
            Some(slot) => self.enqueue(now, slot, req, QueueEnd::Back),
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
    pub(crate) fn cancel_unsent(&mut self, seq: u64) -> bool {
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
    pub(crate) fn await_late_answer(&mut self, seq: u64) {
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
    pub(crate) fn answered_since(&self, slot: usize, conn: ConnId) -> Option<Instant> {
        self.slots
            .get(slot)
            .and_then(|s| s.last_answer_conn)
            .filter(|(c, _)| c.0 > conn.0)
            .map(|(_, at)| at)
    }

    /// Whether request `seq` is written and unanswered (in flight on a connection).
    pub(crate) fn was_written(&self, seq: u64) -> bool {
        matches!(self.live.get(&seq), Some(Loc::InFlight(..)))
    }

    /// The address of `slot`, as a target.
    pub(crate) fn slot_target(&self, slot: usize) -> Option<Target> {
        self.address(slot).cloned().map(Target::Address)
    }

    /// A fresh id from the request sequence (also used for admin operation ids).
    pub(crate) fn alloc_seq(&mut self) -> u64 {
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

    /// Queues `req` on `slot`, at `end` of its queue, and connects the slot if it must.
    fn enqueue(&mut self, now: Instant, slot: usize, req: Req, end: QueueEnd) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        self.live.insert(req.seq, Loc::Queued(slot));
        match end {
            QueueEnd::Front => s.queue.push_front(req),
            QueueEnd::Back => s.queue.push_back(req),
        }
        self.ensure_connection(now, slot);
    }

    /// Next connection the driver should open.
    pub(crate) fn poll_connect(&mut self) -> Option<ConnectRequest> {
        // Skip requests whose slot moved on (e.g. the attempt was abandoned).
        while let Some(c) = self.connects.pop_front() {
            if self.slot_of_conn(c.conn).is_some() {
                return Some(c);
            }
        }
        None
    }

    /// Next connection the driver should close.
    pub(crate) fn poll_close(&mut self) -> Option<CloseRequest> {
        self.closes.pop_front()
    }

    /// Next router event (connections).
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Next completed request.
    pub(crate) fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }
}
