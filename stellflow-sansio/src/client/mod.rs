//! The [`Client`]: the sans-IO state machine that ties the router, the metadata cache, the
//! refresh schedule and the admin operations together behind the input/output contract.

mod admin;
mod consume;
mod health;
mod produce;
mod trace;

use crate::address::BrokerAddress;
use crate::admin::Admin;
use crate::backoff::Backoff;
use crate::config::ClientConfig;
use crate::config_error::ConfigError;
use crate::error::RequestError;
use crate::event::{DisconnectReason, Event};
use crate::metadata::{ClusterMetadata, MetadataCache};
use crate::metrics::Counters;
use crate::net::{Completion, ConnectRequest, Net, Origin, Transmitted};
use crate::output::{CloseRequest, DrainCursor, DrainStep, Output};
use crate::refresh::Refresher;
use crate::refresh::{RoundReply, Urgency};
use crate::request::{ConnId, RawResponse, RequestId, RequestOptions, Target};
use crate::rng::Rng;
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::time::Instant;
use stellflow_proto::messages::{MetadataResponse, RequestBody};
use stellflow_proto::{ApiKey, Reader, Wire};

/// The sans-IO Stellflow client: a state machine that takes bytes, time and commands in and
/// gives connections to open, bytes to send, deadlines and events out. The crate docs hold a
/// complete driver ([crate docs](crate)).
///
/// # The driver contract
///
/// This is the one place the contract is written; everything else points here.
///
/// The methods come in four groups:
///
/// 1. **Inputs** (the driver reports what happened): [`Client::handle_connected`],
///    [`Client::handle_input`] (takes every byte out of the buffer; [`Client::input_wanted`]
///    says how much of the current frame is still missing), [`Client::handle_disconnected`],
///    [`Client::handle_timeout`] (calling it early or twice is harmless).
/// 2. **Commands** (the application asks): [`Client::produce`], [`Client::flush`],
///    [`Client::subscribe`] and [`Client::assign`], [`Client::seek`], [`Client::commit_async`],
///    admin calls ([`Client::admin`] and its shortcuts), raw [`Client::request`],
///    [`Client::refresh_metadata`], [`Client::close`]. A command that cannot work returns an
///    error at once; everything else ends in exactly one event.
/// 3. **The driver's output**, one door: [`Client::poll_output`] → [`Output`].
/// 4. **Records**, the application's door: [`Client::poll_record`], [`Client::poll_records`],
///    [`Client::lease_records`] with [`Client::redeem_lease`], and [`Client::poll_blob`].
///
/// **The order.** After every input or command, call [`Client::poll_output`] until it returns
/// [`Output::Timeout`], acting on each output: open the connection of [`Output::Connect`] and
/// report back, drop the socket of [`Output::Close`] (resetting it first when its mode is
/// [`CloseMode::Abort`](crate::CloseMode::Abort)), write the bytes that
/// [`Output::Transmit`] appended to your buffer to its connection, and the shared bytes of
/// [`Output::TransmitBytes`] (a large record blob, not copied into your buffer) likewise —
/// each connection's bytes in the order the outputs come — and hand [`Output::Event`] to the
/// application. `poll_output` keeps the order of one round
/// (connects, closes, transmits, events) and repeats rounds until a whole round gives
/// nothing: the drain ends with `Timeout` and never earlier. Then take records (taking them
/// frees fetch buffer space; a consumer whose records are not taken stops fetching once its
/// buffer is full), and when you took any, drain again. Then sleep until socket readiness, a
/// new command, or the instant of `Timeout`; call [`Client::handle_timeout`] once it has
/// passed. Inputs may come in any order and at any time; a [`ConnId`] the core no longer
/// knows (an old socket) is ignored.
///
/// ```
/// # use std::time::Instant;
/// # use bytes::BytesMut;
/// # use stellflow_sansio::{Client, ClientConfig, Output};
/// # let now = Instant::now();
/// # let mut client = Client::new(ClientConfig::new("broker-1:9092").unwrap(), now, 1).unwrap();
/// let mut buf = BytesMut::new();
/// let next_wake = loop {
///     buf.clear();
///     match client.poll_output(now, &mut buf) {
///         Output::Connect(request) => { /* open a socket to request.address */ }
///         Output::Close(close) => { /* drop close.conn's socket (reset it on CloseMode::Abort) */ }
///         Output::Transmit(conn) => { /* write buf to conn's socket */ }
///         Output::TransmitBytes(conn, bytes) => { /* write bytes to conn's socket */ }
///         Output::Event(event) => { /* hand it to the application */ }
///         Output::Timeout(at) => break at,
///     }
/// };
/// # let _ = next_wake;
/// ```
#[derive(Debug)]
pub struct Client {
    /// Everything that is no feature's own (router, metadata, events, ...), lent to the
    /// features' methods as one borrow ([`Shared`]).
    pub(crate) shared: Shared,
    /// The admin feature: the commands running.
    pub(crate) admin: Admin,
    /// The producer feature: batches, requests in flight, outcomes.
    pub(crate) producer: crate::producer::ProducerCore,
    pub(crate) consumer: crate::consumer::Consumer,
    /// Where the driver's drain is ([`Client::poll_output`]).
    drain: DrainCursor,
}

impl Client {
    /// A client for `config`. `now` is the current time; `seed` drives every random choice
    /// (backoff jitter, the default client id), so a run replays exactly from its seed.
    ///
    /// Nothing happens until the driver polls: the first [`Client::poll_output`] asks for the
    /// bootstrap connections that fetch metadata.
    pub fn new(config: ClientConfig, now: Instant, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut rng = Rng::new(seed);
        let client_id = match &config.header.client_id {
            Some(id) => id.clone(),
            None => format!("stellflow-rs-{:016x}", rng.next_u64()),
        };
        let net_rng = Rng::new(rng.next_u64());
        let mut net = Net::new(&config, &client_id, net_rng);
        let producer = crate::producer::ProducerCore::new(
            config.producer.clone(),
            config.request_timeout,
            seed ^ 0x5052_4f44_5543_4552,
        );
        let consumer = crate::consumer::Consumer::new(
            config.consumer.clone(),
            config.bootstrap.first().cloned(),
            config.max_response_frame,
        );
        net.set_unacked_timeout(consumer.unacked_timeout());
        let refresher = Refresher::new(
            now,
            config.metadata_max_age,
            Backoff::new(
                config.metadata_refresh_backoff,
                config.metadata_refresh_backoff_max,
                config.backoff_jitter,
            ),
        );
        let mut c = Client {
            shared: Shared {
                net,
                metadata: MetadataCache::new(),
                refresher,
                events: VecDeque::new(),
                rng,
                last_now: now,
                client_id,
                closed: false,
                obs: crate::observe::Observe::default(),
                health: crate::health::HealthReport::new(config.unreachable_timeout),
                trace: None,
                hooks: config.hooks.clone(),
            },
            admin: Admin::default(),
            producer,
            consumer,
            drain: DrainCursor::default(),
        };
        c.shared.obs.span = tracing::info_span!("stellflow", client_id = %c.shared.client_id);
        c.process(now);
        Ok(c)
    }

    /// The `clientId` sent in every request header.
    pub fn client_id(&self) -> &str {
        &self.shared.client_id
    }

    /// The merged cluster metadata (brokers, topics, leaders).
    pub fn metadata(&self) -> &ClusterMetadata {
        self.shared.metadata.cluster()
    }

    /// Everything counted so far (DESIGN §6 metrics).
    pub fn counters(&self) -> &Counters {
        &self.shared.net.counters
    }

    // ---- inputs ----------------------------------------------------------------------------

    /// The driver established the connection `conn` asked for by [`Output::Connect`].
    pub fn handle_connected(&mut self, conn: ConnId, now: Instant) {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.last_now = now;
        self.shared.net.handle_connected(now, conn);
        self.process(now);
    }

    /// Bytes arrived on `conn`. The core takes every byte out of `buf` (it keeps an incomplete
    /// frame itself), so the driver may reuse `buf` for the next read.
    pub fn handle_input(&mut self, conn: ConnId, now: Instant, buf: &mut BytesMut) {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.last_now = now;
        self.shared.net.handle_input(now, conn, buf);
        self.process(now);
    }

    /// Bytes still missing of the response frame `conn` has started to receive (0 when no
    /// frame is partly received, or its length is not known yet). A driver that reads into one
    /// buffer can make room for that much before it reads on, so the frame stays in one
    /// allocation and is never copied (see [`Client::handle_input`]).
    pub fn input_wanted(&self, conn: ConnId) -> usize {
        self.shared.net.input_wanted(conn)
    }

    /// `conn` failed to connect, or closed, or failed on read/write. Requests in flight on it
    /// fail with a retriable error; the core reconnects with backoff when it still needs it.
    pub fn handle_disconnected(&mut self, conn: ConnId, now: Instant, reason: DisconnectReason) {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.last_now = now;
        self.shared.net.handle_disconnected(now, conn, reason);
        self.process(now);
    }

    /// Time passed. Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.last_now = now;
        self.shared.net.handle_timeout(now);
        self.producer.handle_timeout(&self.shared, now);
        self.process(now);
    }

    // ---- outputs ---------------------------------------------------------------------------

    /// The one driver door: the next thing to do, or [`Output::Timeout`] when nothing is left.
    ///
    /// Call it in a loop after every input or command until it returns `Timeout`; each
    /// [`Output::Transmit`] appends one connection's bytes to `buf`. One round gives every
    /// connect, then every close, then every transmit (each of which runs the client's pass,
    /// which can create outputs of every kind), then every event; a round that gave anything
    /// (or took an event the client acts on itself) is followed by another, so `Timeout`
    /// means a whole round gave nothing.
    #[must_use = "an output is work for the driver; drain until Output::Timeout"]
    pub fn poll_output(&mut self, now: Instant, buf: &mut BytesMut) -> Output {
        loop {
            // Each step returns its output where it finds it, so an event (the most frequent
            // output, and a large one) is moved once, not through an `Option<Output>` first.
            macro_rules! give {
                ($found:expr, $variant:path) => {
                    if let Some(found) = $found {
                        self.drain.moved = true;
                        return $variant(found);
                    }
                };
            }
            match self.drain.step {
                DrainStep::Connect => give!(self.poll_connect(), Output::Connect),
                DrainStep::Close => give!(self.poll_close(), Output::Close),
                DrainStep::Transmit => give!(self.poll_transmit(now, buf), Output::transmitted),
                DrainStep::Event => give!(self.poll_event(), Output::Event),
            }
            self.drain.step = match self.drain.step {
                DrainStep::Connect => DrainStep::Close,
                DrainStep::Close => DrainStep::Transmit,
                DrainStep::Transmit => DrainStep::Event,
                DrainStep::Event => DrainStep::Connect,
            };
            if self.drain.step == DrainStep::Connect && !std::mem::take(&mut self.drain.moved) {
                return Output::Timeout(self.poll_timeout());
            }
        }
    }

    /// A connection the driver should open; report back with the returned id.
    fn poll_connect(&mut self) -> Option<ConnectRequest> {
        self.shared.net.poll_connect()
    }

    /// A connection the driver should close at once (the core gave up on its stream; the
    /// matching [`Event::ConnectionError`] says why). Do not report it back as disconnected.
    fn poll_close(&mut self) -> Option<CloseRequest> {
        self.shared.net.poll_close()
    }

    /// Appends the bytes to send on one connection to `buf` (or hands over a shared blob for
    /// it) and returns that connection, after running the pass (`process`).
    fn poll_transmit(&mut self, now: Instant, buf: &mut BytesMut) -> Option<Transmitted> {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.last_now = now;
        let r = self.shared.net.poll_transmit(now, buf);
        if self.process(now) && r.is_none() {
            // The pass made something new (bytes to send, a connection to open, an event):
            // the drain needs another round.
            self.drain.moved = true;
        }
        r
    }

    /// The earliest instant at which [`Client::handle_timeout`] must be called.
    fn poll_timeout(&mut self) -> Option<Instant> {
        let net = [self.shared.net.poll_timeout(), self.producer.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let refresh = if self.shared.closed {
            None
        } else {
            self.shared.refresher.deadline(self.shared.last_now)
        };
        let consumer = self.consumer_deadline();
        let health = self.health_deadline();
        [net, refresh, consumer, health].into_iter().flatten().min()
    }

    /// The next outcome: connection changes, metadata updates, admin and raw results.
    // Out of line: its result is then written whole and `poll_output` copies it in the same
    // 16-byte pieces the driver reads back; inlined, the event's variant word is split off and
    // every `Output::Event` reaches the driver's match as stores that do not line up with its
    // loads (a store-forwarding stall per event). `next_event` returns the event it keeps
    // instead of breaking out of its loop with it, which saves a copy of each event.
    #[inline(never)]
    fn poll_event(&mut self) -> Option<Event> {
        let mut event = self.next_event()?;
        self.explain(&mut event);
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        self.shared.obs.trace(&event);
        if !self.shared.hooks.is_empty() {
            crate::hooks::on_event(&self.shared.hooks, &event);
        }
        Some(event)
    }

    /// The next queued event (the client's, then the producer's), past the answers to topic
    /// creations the producer started: it acts on those itself.
    fn next_event(&mut self) -> Option<Event> {
        loop {
            let event = (self.shared.events.pop_front()).or_else(|| self.producer.poll_event())?;
            let taken = match &event {
                Event::Admin { id, result } => self.producer_takes_admin(*id, result),
                _ => false,
            };
            if !taken {
                return Some(event);
            }
            // The producer acts on it (a metadata round): the drain needs another round.
            self.drain.moved = true;
        }
    }

    /// Replaces an outcome that blames the wrong thing by the cause the client saw: a topic
    /// or partition "unknown to every broker" when no broker ever answered is an unreachable
    /// cluster (with each address and its last failure), not a missing topic.
    // In place: an event is large, and moving it through a function by value costs copies
    // on every event of the drain.
    fn explain(&self, event: &mut Event) {
        if !self.shared.metadata.cluster().brokers.is_empty() {
            return;
        }
        let blames_the_topic = match &*event {
            Event::Produced { result, .. } => {
                matches!(
                    result,
                    Err(crate::producer::DeliveryError::UnknownTopic { .. })
                )
            }
            Event::ProducedBatch(batch) => matches!(
                batch.result,
                Err(crate::producer::DeliveryError::UnknownTopic { .. })
            ),
            Event::Admin { result, .. } => nothing_found(result),
            _ => false,
        };
        if !blames_the_topic {
            return;
        }
        let Some(unreachable) = self.unreachable_error() else {
            return;
        };
        match event {
            Event::Produced { result, .. } => {
                *result = Err(crate::producer::DeliveryError::Request(unreachable));
            }
            Event::ProducedBatch(batch) => {
                batch.result = Err(crate::producer::DeliveryError::Request(unreachable));
            }
            Event::Admin { result, .. } => {
                *result = Err(crate::AdminError::Request(unreachable));
            }
            _ => {}
        }
    }

    /// Why no broker answered: every known address with its last failure.
    fn unreachable_error(&self) -> Option<RequestError> {
        let mut failed = self
            .shared
            .net
            .addresses()
            .filter_map(|(a, _)| Some((a.clone(), self.shared.net.last_cause(a)?.to_owned())));
        let (address, mut cause) = failed.next()?;
        for (a, c) in failed {
            cause.push_str(&format!("; {a}: {c}"));
        }
        Some(RequestError::Unreachable {
            api_key: ApiKey::METADATA,
            address,
            cause,
        })
    }

    // ---- commands --------------------------------------------------------------------------

    /// Asks for a metadata refresh round now (at most one runs at a time).
    pub fn refresh_metadata(&mut self, now: Instant) {
        self.shared.last_now = now;
        self.shared.refresher.request(Urgency::Now);
        self.process(now);
    }

    /// Sends a raw request: `body` is written verbatim after the header. `version` forces an API
    /// version; `None` uses the negotiated one (the request fails with
    /// [`RequestError::UnsupportedApi`] if the broker does not list `api_key`). The answer comes
    /// as [`Event::Response`] with the body undecoded.
    ///
    /// Nothing is routed for you: a raw Produce sent to a broker that is not the partition's
    /// replica makes today's server create the partition locally (PROTOCOL.md §8), giving it a
    /// second log with offsets of its own. Send raw Produce and Fetch requests to the leader
    /// the metadata names ([`Client::metadata`]), or use [`Client::produce`].
    pub fn request(
        &mut self,
        now: Instant,
        target: Target,
        api_key: ApiKey,
        version: Option<i16>,
        body: Bytes,
        opts: &RequestOptions,
    ) -> RequestId {
        self.shared.last_now = now;
        let body = RequestBody::Opaque {
            api_key,
            api_version: version.unwrap_or(0),
            payload: body,
        };
        let seq = if self.shared.closed {
            let id = self.shared.net.alloc_seq();
            self.shared.events.push_back(Event::Response {
                id: RequestId(id),
                result: Err(RequestError::Closed),
            });
            id
        } else {
            let bounded = self.outage_options(opts);
            let opts = bounded.as_ref().unwrap_or(opts);
            let traced = self.shared.traced_options(opts);
            let opts = traced.as_ref().unwrap_or(opts);
            self.shared
                .net
                .submit(now, target, body, version, Origin::Raw, opts)
        };
        self.process(now);
        RequestId(seq)
    }

    /// Closes the client: every pending request and command fails with
    /// [`RequestError::Closed`] and every connection comes out as [`Output::Close`].
    pub fn close(&mut self, now: Instant) {
        self.shared.last_now = now;
        self.shared.closed = true;
        // The producer first: it asks the router which of its requests were written.
        (self.producer).abort(&self.shared, crate::producer::DeliveryError::Closed);
        // A group member's writes still unanswered must not land after it is gone (a close
        // at the end of a lapsed lease): their connection is reset, the others close.
        if let Some(coordinator) = self.consumer.coordinator_with_unanswered_writes() {
            self.shared.net.abort_address(
                now,
                &coordinator,
                crate::error::ConnectionError::WritesWithdrawn {
                    reason: "the client closed before they were answered",
                },
            );
        }
        self.shared.net.close_all(now);
        self.process(now);
    }

    // ---- internals -------------------------------------------------------------------------

    /// Runs everything that became possible after an input: dispatches completions, forwards
    /// router events, starts a due metadata round. Returns whether anything happened.
    pub(crate) fn process(&mut self, now: Instant) -> bool {
        let span = self.shared.obs.span.clone();
        let _entered = span.enter();
        let mut any = false;
        loop {
            let mut progressed = false;
            while let Some(c) = self.shared.net.poll_completion() {
                progressed = true;
                self.dispatch(now, c);
            }
            while let Some(e) = self.shared.net.poll_event() {
                progressed = true;
                if matches!(e, Event::Disconnected { .. }) && !self.shared.closed {
                    self.shared.refresher.request(Urgency::AfterBackoff);
                }
                self.shared.events.push_back(e);
            }
            if !self.shared.closed && self.shared.refresher.due(now) {
                progressed = true;
                self.start_refresh(now);
            }
            progressed |= self.producer_drive(now);
            progressed |= self.consumer_drive(now);
            any |= progressed;
            if !progressed {
                break;
            }
        }
        self.update_health(now);
        #[cfg(feature = "metrics")]
        {
            let assigned = self.assignment();
            let lags: Vec<_> = assigned
                .into_iter()
                .filter_map(|tp| Some((tp.clone(), self.lag(&tp)?)))
                .collect();
            let buffered = self.producer.buffered();
            self.shared
                .obs
                .metrics
                .publish(&self.shared.net.counters, buffered, lags.into_iter());
        }
        any
    }

    fn dispatch(&mut self, now: Instant, c: Completion) {
        if let Err(e) = &c.result
            && e.wants_metadata_refresh()
            && !self.shared.closed
        {
            self.shared.refresher.request(Urgency::AfterBackoff);
        }
        match c.origin {
            Origin::Negotiation => {}
            Origin::Metadata => self.on_metadata(now, c),
            Origin::Raw => {
                let result = c.result.map(|r| RawResponse {
                    api_key: c.api_key,
                    api_version: r.version,
                    header: r.header,
                    body: r.body,
                    address: self
                        .shared
                        .net
                        .address(r.slot)
                        .cloned()
                        .unwrap_or_else(|| BrokerAddress::new("", 0)),
                    broker_id: r.broker_id,
                });
                self.shared.events.push_back(Event::Response {
                    id: RequestId(c.seq),
                    result,
                });
            }
            Origin::Admin(op) => (self.admin).on_completion(&mut self.shared, now, op, c),
            Origin::Producer => self.producer.on_completion(&mut self.shared, now, c),
            Origin::Consumer(tag) => self.on_consumer_completion(now, tag, c),
        }
    }

    fn start_refresh(&mut self, now: Instant) {
        tracing::debug!("metadata refresh");
        self.shared.refresher.start();
        self.shared.net.counters.metadata_refreshes += 1;
        let all: Vec<(BrokerAddress, bool)> = self
            .shared
            .net
            .addresses()
            .map(|(a, backoff)| (a.clone(), backoff))
            .collect();
        let healthy: Vec<&BrokerAddress> =
            all.iter().filter(|(_, b)| !*b).map(|(a, _)| a).collect();
        let targets: Vec<BrokerAddress> = if healthy.is_empty() {
            all.iter().map(|(a, _)| a.clone()).collect()
        } else {
            if healthy.len() < all.len() {
                self.shared.refresher.skipped();
            }
            healthy.into_iter().cloned().collect()
        };
        for a in targets {
            self.shared.ask_metadata(now, a);
        }
    }

    fn on_metadata(&mut self, now: Instant, c: Completion) {
        let mut round_reply = RoundReply::Failed;
        if let Ok(reply) = &c.result
            && let Some(body) = &reply.body
            && let Ok(resp) = MetadataResponse::decode(&mut Reader::new(body.clone()))
            && let Some(address) = self.shared.net.address(reply.slot).cloned()
        {
            round_reply = RoundReply::Applied;
            self.shared.apply_metadata(now, address, &resp, c.seq);
        }
        let meta = &self.shared.metadata;
        let finished = self.shared.refresher.answered(
            now,
            c.seq,
            round_reply,
            || meta.cluster().leaderless().next().is_none(),
            &mut self.shared.rng,
        );
        if let Some(waiters) = finished {
            self.shared
                .obs
                .metadata_round(self.shared.metadata.cluster());
            let m = self.shared.metadata.cluster();
            self.shared.events.push_back(Event::MetadataUpdated {
                brokers: m.brokers.len(),
                topics: m.topics.len(),
                leaderless: m.leaderless().count(),
            });
            for op in waiters {
                (self.admin).on_metadata_round(&mut self.shared, now, op);
            }
        }
    }
}

/// Whether an admin answer only says "not found" (a describe, an unknown or leaderless
/// partition, ListOffsets failing everywhere) — what an unreachable cluster looks like.
fn nothing_found(result: &Result<crate::AdminOutcome, crate::AdminError>) -> bool {
    use crate::admin::Outcome;
    match result {
        Ok(outcome) => match outcome.value() {
            Outcome::Topics(..) => true,
            Outcome::Offsets(offsets) => offsets.iter().all(|o| o.result.is_err()),
            _ => false,
        },
        Err(crate::AdminError::UnknownPartition { .. } | crate::AdminError::Leaderless { .. }) => {
            true
        }
        Err(_) => false,
    }
}
