//! [`SimCluster`]: N simulated brokers, a simulated controller and the byte-stream interface
//! a client (or the loopback TCP server) drives, with no sockets and no clock.
//!
//! # Driving contract (sans-IO)
//!
//! Time comes in as `now` on every input; nothing reads the clock. Randomness comes from the
//! seed given to [`SimCluster::new`]. After every input (`connect`, `handle_input`,
//! `disconnect`, `handle_timeout`, control calls) drain [`SimCluster::poll_transmit`] (or
//! [`SimCluster::take_replies`] per connection) and [`SimCluster::poll_closed`] until empty, then
//! wait until new client bytes or [`SimCluster::poll_timeout`]. Spurious `handle_timeout` calls
//! are harmless.
//!
//! # Replication
//!
//! After every step the controller's followers copy whatever their leader has (instantly),
//! unless the follower is down or its replication is paused
//! ([`SimCluster::pause_replication`]); a follower that never fetches holds the high watermark
//! back, which is what makes `acks = -1` time out with `7`.
//!
//! This file holds the cluster, its brokers and the byte-stream interface; replication and the
//! controller's calls (topics, leaders, ISR, crash and restart) are in `controller.rs`.

use crate::broker::produce::ProduceJob;
use crate::broker::{Broker, Ctx, Reply};
use crate::config::{ClusterConfig, MetadataView};
use crate::knobs::{DelayRule, Fault, FaultRule, Knobs, partition_error_body};
use crate::rng::SimRng;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{
    FrameDecoder, encode_response, encode_response_header_only, split_request,
};
use stellflow_proto::header::{RequestHeader, ResponseHeader};
use stellflow_proto::messages::{RequestBody, ResponseBody};
use stellflow_proto::{ApiKey, ErrorCode};

mod controller;

/// Request headers [`SimCluster::record_headers`] keeps.
const HEADER_LOG: usize = 10_000;

/// Identifies one client connection to one simulated broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Errors of cluster control calls and connects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// No broker has this id.
    #[error("unknown broker {0}")]
    UnknownBroker(i32),
    /// The broker is crashed; restart it first.
    #[error("broker {0} is down")]
    BrokerDown(i32),
    /// No broker advertises this address.
    #[error("no broker at {0}")]
    UnknownAddress(String),
    /// The partition is not known to the controller.
    #[error("unknown partition {0}-{1}")]
    UnknownPartition(String, i32),
    /// Invalid arguments (replication factor above the broker count, no partitions, ...).
    #[error("invalid request: {0}")]
    Invalid(String),
}

#[derive(Debug)]
struct Node {
    broker: Broker,
    alive: bool,
    replication_paused: bool,
}

#[derive(Debug)]
struct Conn {
    broker: i32,
    inbuf: BytesMut,
    decoder: FrameDecoder,
    open: bool,
}

#[derive(Debug)]
struct Delayed {
    ready_at: Instant,
    conn: ConnId,
    bytes: Bytes,
}

#[derive(Debug)]
struct PendingJob {
    broker: i32,
    conn: ConnId,
    job: Box<ProduceJob>,
    delay: Duration,
    drop_response: bool,
}

/// A cluster of simulated brokers (one broker with id 1 by default).
#[derive(Debug)]
pub struct SimCluster {
    config: ClusterConfig,
    start: Instant,
    now: Instant,
    rng: SimRng,
    nodes: BTreeMap<i32, Node>,
    conns: HashMap<ConnId, Conn>,
    next_conn: u64,
    ready: VecDeque<(ConnId, Bytes)>,
    delayed: Vec<Delayed>,
    pending: Vec<PendingJob>,
    closed: VecDeque<ConnId>,
    knobs: Knobs,
    /// Request headers seen, newest last, while recording ([`SimCluster::record_headers`]).
    headers: Option<VecDeque<(i32, RequestHeader)>>,
}

impl SimCluster {
    /// A cluster from `config`, starting at `now`, with all randomness drawn from `seed`.
    pub fn new(config: ClusterConfig, now: Instant, seed: u64) -> Self {
        let nodes = config
            .brokers
            .iter()
            .map(|b| {
                (
                    b.broker_id,
                    Node {
                        broker: Broker::new(b.clone()),
                        alive: true,
                        replication_paused: false,
                    },
                )
            })
            .collect();
        SimCluster {
            config,
            start: now,
            now,
            rng: SimRng::new(seed),
            nodes,
            conns: HashMap::new(),
            next_conn: 1,
            ready: VecDeque::new(),
            delayed: Vec::new(),
            pending: Vec::new(),
            closed: VecDeque::new(),
            knobs: Knobs::default(),
            headers: None,
        }
    }

    /// A single broker (id 1, `broker-1:9092`) with the server's defaults.
    pub fn single(now: Instant, seed: u64) -> Self {
        SimCluster::new(ClusterConfig::default(), now, seed)
    }

    // ----- time -----------------------------------------------------------------------------

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// Broker wall-clock time (ms since the Unix epoch) at the latest `now` seen.
    pub fn wall_clock_ms(&self) -> i64 {
        let elapsed = self.now.saturating_duration_since(self.start).as_millis();
        self.config
            .wall_clock_start_ms
            .saturating_add(i64::try_from(elapsed).unwrap_or(i64::MAX))
    }

    // ----- brokers and addresses -------------------------------------------------------------

    /// Ids of all brokers, ascending.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.nodes.keys().copied().collect()
    }

    /// A broker's state (read-only), whether up or down.
    pub fn broker(&self, id: i32) -> Option<&Broker> {
        self.nodes.get(&id).map(|n| &n.broker)
    }

    /// Whether a broker is up.
    pub fn is_alive(&self, id: i32) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.alive)
    }

    /// The advertised `host:port` of a broker.
    pub fn address_of(&self, id: i32) -> Option<String> {
        self.nodes.get(&id).map(|n| n.broker.config().address())
    }

    /// The broker advertising `addr` (`host:port`), for resolving a client's connect request.
    pub fn broker_for_addr(&self, addr: &str) -> Option<i32> {
        self.nodes
            .iter()
            .find(|(_, n)| n.broker.config().address() == addr)
            .map(|(id, _)| *id)
    }

    /// Changes a broker's advertised address (Metadata and FindCoordinator report it).
    pub fn set_advertised(&mut self, id: i32, host: &str, port: i32) -> Result<(), SimError> {
        let node = self.nodes.get_mut(&id).ok_or(SimError::UnknownBroker(id))?;
        node.broker.set_advertised(host.to_owned(), port);
        if let Some(c) = self.config.brokers.iter_mut().find(|b| b.broker_id == id) {
            c.host = host.to_owned();
            c.port = port;
        }
        Ok(())
    }

    /// Switches the Metadata view (broker-local like the server, or cluster-wide).
    pub fn set_metadata_view(&mut self, view: MetadataView) {
        self.config.metadata_view = view;
    }

    // ----- connections -----------------------------------------------------------------------

    /// Opens a connection to a broker.
    pub fn connect(&mut self, broker_id: i32, now: Instant) -> Result<ConnId, SimError> {
        self.advance(now);
        let node = self
            .nodes
            .get(&broker_id)
            .ok_or(SimError::UnknownBroker(broker_id))?;
        if !node.alive {
            return Err(SimError::BrokerDown(broker_id));
        }
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        let max = usize::try_from(node.broker.config().max_frame_length).unwrap_or(usize::MAX);
        self.conns.insert(
            id,
            Conn {
                broker: broker_id,
                inbuf: BytesMut::new(),
                decoder: FrameDecoder::with_max_frame_length(max),
                open: true,
            },
        );
        Ok(id)
    }

    /// Opens a connection to the broker advertising `addr`.
    pub fn connect_addr(&mut self, addr: &str, now: Instant) -> Result<ConnId, SimError> {
        let id = self
            .broker_for_addr(addr)
            .ok_or_else(|| SimError::UnknownAddress(addr.to_owned()))?;
        self.connect(id, now)
    }

    /// The broker a connection goes to.
    pub fn conn_broker(&self, conn: ConnId) -> Option<i32> {
        self.conns.get(&conn).map(|c| c.broker)
    }

    /// Whether a connection is open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.open)
    }

    /// The client closed a connection. Responses not yet polled are discarded.
    pub fn disconnect(&mut self, conn: ConnId) {
        self.drop_outputs(conn);
        self.conns.remove(&conn);
    }

    fn drop_outputs(&mut self, conn: ConnId) {
        self.ready.retain(|(c, _)| *c != conn);
        self.delayed.retain(|d| d.conn != conn);
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn)
            && c.open
        {
            c.open = false;
            c.inbuf.clear();
            self.closed.push_back(conn);
        }
        self.drop_outputs(conn);
    }

    /// Bytes from the client on `conn`, split anywhere. `data` is drained. Bytes for a closed
    /// or unknown connection are ignored.
    pub fn handle_input(&mut self, conn: ConnId, now: Instant, data: &mut BytesMut) {
        self.advance(now);
        let chunk = data.split();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.open {
            return;
        }
        c.inbuf.extend_from_slice(&chunk);
        let mut frames = Vec::new();
        let mut framing_error = false;
        loop {
            match c.decoder.decode(&mut c.inbuf) {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(_) => {
                    framing_error = true;
                    break;
                }
            }
        }
        let broker = c.broker;
        if self.knobs.reorder_execution > 0.0 {
            let mut i = 0;
            while i + 1 < frames.len() {
                if self.rng.chance(self.knobs.reorder_execution) {
                    frames.swap(i, i + 1);
                    i += 2;
                } else {
                    i += 1;
                }
            }
        }
        for payload in frames {
            if !self.process_frame(conn, broker, payload) {
                self.close(conn);
                break;
            }
        }
        if framing_error {
            self.close(conn);
        }
        self.settle();
    }

    /// Executes one request frame; `false` means "close the connection".
    fn process_frame(&mut self, conn: ConnId, broker_id: i32, payload: Bytes) -> bool {
        if !self.is_open(conn) {
            return false;
        }
        let Ok((header, body)) = split_request(payload) else {
            return false;
        };
        if let Some(log) = &mut self.headers {
            if log.len() == HEADER_LOG {
                log.pop_front();
            }
            log.push_back((broker_id, header.clone()));
        }
        let corr = header.correlation_id;
        let key = header.api_key;
        let rng = &mut self.rng;
        let fault = self.knobs.take_fault(broker_id, key, |p| rng.chance(p));
        let delay = self.knobs.delay(broker_id, key);
        let mut drop_response = false;
        match fault {
            Some(Fault::CloseConnection) => return false,
            Some(Fault::HeaderOnly(code)) => {
                self.enqueue_header_only(conn, corr, code, delay);
                return true;
            }
            Some(Fault::PartitionError(code)) => {
                if header.api_version == 0 && key.is_known() {
                    let Ok(decoded) = RequestBody::decode(key, 0, body) else {
                        return false;
                    };
                    match partition_error_body(&decoded, code) {
                        Some(b) => self.enqueue_body(conn, corr, ErrorCode::NONE, &b, delay),
                        None => self.enqueue_header_only(conn, corr, code, delay),
                    }
                } else {
                    self.enqueue_header_only(conn, corr, code, delay);
                }
                return true;
            }
            Some(Fault::DropResponse) => drop_response = true,
            _ => {}
        }
        let view = self.cluster_view();
        let now = self.now;
        let now_ms = self.wall_clock_ms();
        let Some(node) = self.nodes.get_mut(&broker_id) else {
            return false;
        };
        let mut ctx = Ctx {
            now,
            now_ms,
            rng: &mut self.rng,
            view: view.as_ref(),
            record_lag: self.knobs.record_lag,
        };
        let reply = node.broker.handle(&mut ctx, &header, body);
        self.deliver(conn, broker_id, corr, reply, delay, drop_response)
    }

    fn deliver(
        &mut self,
        conn: ConnId,
        broker: i32,
        corr: i32,
        reply: Reply,
        delay: Duration,
        drop_response: bool,
    ) -> bool {
        match reply {
            Reply::Close => return false,
            Reply::Pending(job) => self.pending.push(PendingJob {
                broker,
                conn,
                job,
                delay,
                drop_response,
            }),
            _ if drop_response => {}
            Reply::HeaderOnly(code) => self.enqueue_header_only(conn, corr, code, delay),
            Reply::Body(code, body) => self.enqueue_body(conn, corr, code, &body, delay),
        }
        true
    }

    fn enqueue_header_only(&mut self, conn: ConnId, corr: i32, code: ErrorCode, delay: Duration) {
        let mut buf = BytesMut::new();
        encode_response_header_only(&mut buf, &ResponseHeader::new(corr, code));
        self.enqueue(conn, buf.freeze(), delay);
    }

    fn enqueue_body(
        &mut self,
        conn: ConnId,
        corr: i32,
        code: ErrorCode,
        body: &ResponseBody,
        delay: Duration,
    ) {
        let mut buf = BytesMut::new();
        encode_response(&mut buf, &ResponseHeader::new(corr, code), Some(body));
        self.enqueue(conn, buf.freeze(), delay);
    }

    fn enqueue(&mut self, conn: ConnId, bytes: Bytes, delay: Duration) {
        if !self.is_open(conn) {
            return;
        }
        if delay > Duration::ZERO {
            self.delayed.push(Delayed {
                ready_at: self.now + delay,
                conn,
                bytes,
            });
            return;
        }
        self.push_ready(conn, bytes);
    }

    fn push_ready(&mut self, conn: ConnId, bytes: Bytes) {
        if self.knobs.reorder_responses > 0.0
            && let Some(prev) = self.ready.iter().rposition(|(c, _)| *c == conn)
            && self.rng.chance(self.knobs.reorder_responses)
        {
            self.ready.insert(prev, (conn, bytes));
            return;
        }
        self.ready.push_back((conn, bytes));
    }

    /// The next response frame to send, with its connection.
    pub fn poll_transmit(&mut self) -> Option<(ConnId, Bytes)> {
        self.ready.pop_front()
    }

    /// Appends every response ready on `conn` to `buf`; returns whether anything was appended.
    pub fn take_replies(&mut self, conn: ConnId, buf: &mut BytesMut) -> bool {
        let mut any = false;
        let mut rest = VecDeque::with_capacity(self.ready.len());
        for (c, b) in self.ready.drain(..) {
            if c == conn {
                buf.extend_from_slice(&b);
                any = true;
            } else {
                rest.push_back((c, b));
            }
        }
        self.ready = rest;
        any
    }

    /// Starts (or, with `false`, stops and clears) recording the header of every request the
    /// brokers receive — the real server only logs its trace fields, so this is how a test
    /// sees what a client sent. At most the newest 10 000 are kept.
    pub fn record_headers(&mut self, on: bool) {
        self.headers = on.then(VecDeque::new);
    }

    /// Takes the request headers recorded so far, oldest first, each with the id of the
    /// broker that received it.
    pub fn take_headers(&mut self) -> Vec<(i32, RequestHeader)> {
        self.headers
            .as_mut()
            .map(|log| log.drain(..).collect())
            .unwrap_or_default()
    }

    /// A connection the broker closed (framing or decoding failure, crash, fault knob). The
    /// connection accepts no more input; call [`disconnect`](Self::disconnect) to forget it.
    pub fn poll_closed(&mut self) -> Option<ConnId> {
        self.closed.pop_front()
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work: a
    /// delayed response or an `acks = -1` deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let d = self.delayed.iter().map(|d| d.ready_at).min();
        let p = self.pending.iter().filter_map(|p| p.job.deadline()).min();
        match (d, p) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Advances time: releases due delayed responses and times out `acks = -1` waits.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.settle();
    }

    /// Replicates, resumes waiting Produce requests and releases due delayed responses.
    ///
    /// Replication and resumption repeat until no waiting request moves on: a request that
    /// resumes appends to its next partition and waits again, and the real server's followers,
    /// which fetch continuously, copy that append within milliseconds rather than at the next
    /// unrelated event. Each round either finishes a partition of some request or stops, so the
    /// loop ends after at most as many rounds as there are waiting partitions.
    fn settle(&mut self) {
        loop {
            self.replicate();
            if !self.resume_pending() {
                break;
            }
        }
        let now = self.now;
        let mut due = Vec::new();
        self.delayed.retain(|d| {
            if d.ready_at <= now {
                due.push((d.ready_at, d.conn, d.bytes.clone()));
                false
            } else {
                true
            }
        });
        due.sort_by_key(|d| d.0);
        for (_, conn, bytes) in due {
            self.push_ready(conn, bytes);
        }
    }

    /// Resumes every waiting Produce request once; `true` if any of them got past a partition
    /// (finished, or moved on to wait for a later partition).
    fn resume_pending(&mut self) -> bool {
        let jobs = std::mem::take(&mut self.pending);
        let now = self.now;
        let now_ms = self.wall_clock_ms();
        let mut moved = false;
        for p in jobs {
            let Some(node) = self.nodes.get_mut(&p.broker) else {
                continue;
            };
            if !node.alive {
                continue;
            }
            let mut ctx = Ctx {
                now,
                now_ms,
                rng: &mut self.rng,
                view: None,
                record_lag: self.knobs.record_lag,
            };
            let corr = p.job.correlation_id;
            let before = p.job.position();
            let reply = node.broker.resume_produce(&mut ctx, p.job);
            match reply {
                Reply::Pending(job) => {
                    moved |= job.position() != before;
                    self.pending.push(PendingJob { job, ..p });
                }
                other => {
                    moved = true;
                    self.deliver(p.conn, p.broker, corr, other, p.delay, p.drop_response);
                }
            }
        }
        moved
    }

    // ----- knobs -----------------------------------------------------------------------------

    /// The knobs (read-only).
    pub fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    /// Adds a fault rule (first matching rule wins).
    pub fn inject_fault(&mut self, rule: FaultRule) {
        self.knobs.faults.push(rule);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&mut self) {
        self.knobs.faults.clear();
    }

    /// Adds a response delay rule.
    pub fn add_delay(&mut self, rule: DelayRule) {
        self.knobs.delays.push(rule);
    }

    /// Removes every delay rule.
    pub fn clear_delays(&mut self) {
        self.knobs.delays.clear();
    }

    /// Sets the reordering probabilities (responses among unsent ones on a connection;
    /// execution of adjacent pipelined requests).
    pub fn set_reordering(&mut self, responses: f64, execution: f64) {
        self.knobs.reorder_responses = responses;
        self.knobs.reorder_execution = execution;
    }

    /// Leaves an idempotent batch's sequence unrecorded for `lag` after an append that needs
    /// no followers, as the real server's check, append and record do under load
    /// ([`Knobs::record_lag`]).
    pub fn set_record_lag(&mut self, lag: Duration) {
        self.knobs.record_lag = lag;
    }

    /// Convenience for error injection: the next `count` requests of `api_key` on any broker
    /// get a header-only `code`.
    pub fn fail_next(&mut self, api_key: ApiKey, count: u32, code: ErrorCode) {
        self.inject_fault(FaultRule::next(api_key, count, Fault::HeaderOnly(code)));
    }
}
