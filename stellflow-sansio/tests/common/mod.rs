//! An in-process world: one sans-IO client, one simulated cluster, a virtual clock, and a loop
//! that moves bytes between them (no sockets).
#![allow(dead_code)]

pub mod group;
pub mod producer;

use bytes::BytesMut;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    AdminError, AdminId, AdminOutput, Client, ClientConfig, ConnId, ConnectRequest,
    DisconnectReason, Event, Output,
};
use stellflow_sim::{ClusterConfig, SimCluster};

pub struct World {
    pub client: Client,
    pub sim: SimCluster,
    pub now: Instant,
    pub events: Vec<Event>,
    /// Connection attempts the client made, with the instant.
    pub attempts: Vec<(Instant, String)>,
    pub to_sim: HashMap<ConnId, stellflow_sim::ConnId>,
    pub to_client: HashMap<stellflow_sim::ConnId, ConnId>,
    /// The `Timeout` the client's last drain ended with.
    pub deadline: Option<Instant>,
    /// Checks every drain's end: right after its `Timeout`, another `poll_output` finds
    /// nothing and gives the same instant.
    pub check_drain_end: bool,
    buf: BytesMut,
    /// How many `Output::TransmitBytes` (shared record blobs) the client gave.
    pub shared_transmits: usize,
    /// Loses the connection of the first `Output::TransmitBytes` instead of writing it.
    pub cut_first_shared: bool,
    /// The connection lost so, and how many outputs went to it afterwards.
    pub cut: Option<ConnId>,
    pub sent_after_cut: usize,
    /// Records the entries of every Fetch request the client sends in `fetch_entries`.
    pub watch_fetches: bool,
    /// The entries of each Fetch request sent while `watch_fetches` was on.
    pub fetch_entries: Vec<usize>,
}

pub fn config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new(bootstrap).expect("valid bootstrap");
    c.request_timeout = Duration::from_secs(5);
    c
}

impl World {
    pub fn new(brokers: usize, bootstrap: &str) -> Self {
        Self::with(ClusterConfig::with_brokers(brokers), config(bootstrap))
    }

    pub fn with(cluster: ClusterConfig, config: ClientConfig) -> Self {
        let now = Instant::now();
        let sim = SimCluster::new(cluster, now, 7);
        let client = Client::new(config, now, 42).expect("valid config");
        let mut w = World {
            client,
            sim,
            now,
            events: Vec::new(),
            attempts: Vec::new(),
            to_sim: HashMap::new(),
            to_client: HashMap::new(),
            deadline: None,
            check_drain_end: false,
            buf: BytesMut::with_capacity(64 * 1024),
            shared_transmits: 0,
            cut_first_shared: false,
            cut: None,
            sent_after_cut: 0,
            watch_fetches: false,
            fetch_entries: Vec::new(),
        };
        w.step();
        w
    }

    /// Drains both sides until neither has anything to say.
    pub fn step(&mut self) {
        let now = self.now;
        for _ in 0..100_000 {
            let mut progress = false;
            let deadline = loop {
                self.buf.clear();
                match self.client.poll_output(now, &mut self.buf) {
                    Output::Connect(cr) => {
                        progress = true;
                        self.connect(cr);
                    }
                    Output::Close(close) => {
                        progress = true;
                        if let Some(sc) = self.to_sim.remove(&close.conn) {
                            self.to_client.remove(&sc);
                            self.sim.disconnect(sc);
                        }
                    }
                    Output::Transmit(c) => {
                        progress = true;
                        self.sent_after_cut += usize::from(self.cut == Some(c));
                        if self.watch_fetches {
                            self.fetch_entries.extend(fetch_entries(&self.buf));
                        }
                        if let Some(sc) = self.to_sim.get(&c) {
                            self.sim.handle_input(*sc, now, &mut self.buf);
                        }
                    }
                    Output::TransmitBytes(c, bytes) => {
                        progress = true;
                        self.shared_transmits += 1;
                        self.sent_after_cut += usize::from(self.cut == Some(c));
                        if self.cut_first_shared && self.cut.is_none() {
                            // The connection is lost with the frame's front sent, before
                            // the blob: the broker drops the connection and its bytes.
                            self.cut = Some(c);
                            if let Some(sc) = self.to_sim.remove(&c) {
                                self.to_client.remove(&sc);
                                self.sim.disconnect(sc);
                            }
                            self.client
                                .handle_disconnected(c, now, DisconnectReason::PeerClosed);
                            continue;
                        }
                        if let Some(sc) = self.to_sim.get(&c) {
                            self.sim
                                .handle_input(*sc, now, &mut BytesMut::from(&bytes[..]));
                        }
                    }
                    Output::Event(e) => {
                        progress = true;
                        self.events.push(e);
                    }
                    Output::Timeout(t) => break t,
                }
            };
            self.deadline = deadline;
            if self.check_drain_end {
                let again = self.client.poll_output(now, &mut self.buf);
                assert!(
                    matches!(again, Output::Timeout(t) if t == deadline),
                    "the drain ended with Timeout({deadline:?}) but then gave {again:?} {:?}",
                    &self.buf[..self.buf.len().min(12)]
                );
            }
            while let Some((sc, bytes)) = self.sim.poll_transmit() {
                progress = true;
                if let Some(c) = self.to_client.get(&sc) {
                    let mut b = BytesMut::from(&bytes[..]);
                    self.client.handle_input(*c, now, &mut b);
                }
            }
            while let Some(sc) = self.sim.poll_closed() {
                progress = true;
                self.sim.disconnect(sc);
                if let Some(c) = self.to_client.remove(&sc) {
                    self.to_sim.remove(&c);
                    self.client
                        .handle_disconnected(c, now, DisconnectReason::PeerClosed);
                }
            }
            if !progress {
                return;
            }
        }
        panic!("world did not settle");
    }

    /// Opens the connection the client asked for on the simulated cluster and reports back.
    fn connect(&mut self, cr: ConnectRequest) {
        let now = self.now;
        self.attempts.push((now, cr.address.to_string()));
        match self.sim.connect_addr(&cr.address.to_string(), now) {
            Ok(sc) => {
                self.to_sim.insert(cr.conn, sc);
                self.to_client.insert(sc, cr.conn);
                self.client.handle_connected(cr.conn, now);
            }
            Err(e) => self.client.handle_disconnected(
                cr.conn,
                now,
                DisconnectReason::ConnectFailed(stellflow_sansio::IoFailure::new(
                    std::io::ErrorKind::ConnectionRefused,
                    e.to_string(),
                )),
            ),
        }
    }

    /// The client's next deadline: drains first (a command since the last drain may have
    /// moved it), then the `Timeout` the drain ended with.
    pub fn client_deadline(&mut self) -> Option<Instant> {
        self.step();
        self.deadline
    }

    /// Advances the clock to the next deadline of either side (at most `max` ahead).
    pub fn tick(&mut self, max: Duration) {
        let limit = self.now + max;
        let next = [self.client_deadline(), self.sim.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(limit)
            .clamp(self.now, limit);
        self.now = next;
        self.sim.handle_timeout(self.now);
        self.client.handle_timeout(self.now);
        self.step();
    }

    /// Moves time forward by `d`, firing every deadline on the way.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick(end - self.now);
        }
    }

    /// Runs until `pred` holds, for at most `max` of virtual time.
    pub fn run_until(&mut self, max: Duration, mut pred: impl FnMut(&mut World) -> bool) -> bool {
        let end = self.now + max;
        loop {
            self.step();
            if pred(self) {
                return true;
            }
            if self.now >= end {
                return false;
            }
            self.tick(end - self.now);
        }
    }

    /// Takes the event answering admin command `id`, running the world until it arrives.
    pub fn admin<T: AdminOutput>(&mut self, asked: AdminId<T>) -> Result<T, AdminError> {
        let id = asked.id();
        let found = self.run_until(Duration::from_secs(60), |w| {
            w.events
                .iter()
                .any(|e| matches!(e, Event::Admin { id: i, .. } if *i == id))
        });
        assert!(found, "no answer for {id:?}");
        let pos = self
            .events
            .iter()
            .position(|e| matches!(e, Event::Admin { id: i, .. } if *i == id))
            .expect("present");
        match self.events.remove(pos) {
            Event::Admin { result, .. } => result.map(|o| o.take(asked).expect("its own answer")),
            _ => unreachable!(),
        }
    }

    /// Runs until the first metadata round is done.
    pub fn bootstrap(&mut self) {
        let ok = self.run_until(Duration::from_secs(30), |w| {
            w.events
                .iter()
                .any(|e| matches!(e, Event::MetadataUpdated { .. }))
        });
        assert!(ok, "metadata never arrived: {:?}", self.events);
    }

    /// Removes and returns all events matching `f`.
    pub fn take(&mut self, f: impl Fn(&Event) -> bool) -> Vec<Event> {
        let (hit, keep) = std::mem::take(&mut self.events)
            .into_iter()
            .partition(|e| f(e));
        self.events = keep;
        hit
    }
}

/// One drain of a client driven by hand (no world), its outputs sorted by kind.
#[derive(Debug, Default)]
pub struct Drained {
    pub connects: Vec<ConnectRequest>,
    pub closes: Vec<ConnId>,
    /// Each transmit with the bytes it appended.
    pub sent: Vec<(ConnId, BytesMut)>,
    pub events: Vec<Event>,
    /// The `Timeout` that ended the drain.
    pub timeout: Option<Instant>,
}

/// Drains `client` at `now` until its `Output::Timeout`.
pub fn drain_by_hand(client: &mut Client, now: Instant) -> Drained {
    let mut d = Drained::default();
    let mut buf = BytesMut::new();
    loop {
        match client.poll_output(now, &mut buf) {
            Output::Connect(cr) => d.connects.push(cr),
            Output::Close(c) => d.closes.push(c.conn),
            Output::Transmit(c) => d.sent.push((c, buf.split())),
            Output::TransmitBytes(c, bytes) => d.sent.push((c, BytesMut::from(&bytes[..]))),
            Output::Event(e) => d.events.push(e),
            Output::Timeout(t) => {
                d.timeout = t;
                return d;
            }
        }
    }
}

/// The next output of `client`, which must be a transmit (its bytes appended to `buf`).
pub fn next_transmit(client: &mut Client, now: Instant, buf: &mut BytesMut) -> ConnId {
    match client.poll_output(now, buf) {
        Output::Transmit(c) => c,
        other => panic!("expected a transmit, got {other:?}"),
    }
}

/// The entries (partition, offset pairs) of each Fetch request in the frames of `bytes`.
pub fn fetch_entries(bytes: &[u8]) -> Vec<usize> {
    let mut buf = BytesMut::from(bytes);
    let mut frames = stellflow_proto::frame::FrameDecoder::new();
    let mut out = Vec::new();
    while let Ok(Some(frame)) = frames.decode(&mut buf) {
        if let Ok((_, stellflow_proto::messages::RequestBody::Fetch(f))) =
            stellflow_proto::frame::decode_request(frame)
        {
            out.push(f.topic_partitions.iter().map(|t| t.partitions.len()).sum());
        }
    }
    out
}
