//! An in-process world: one sans-IO client, one simulated cluster, a virtual clock, and a loop
//! that moves bytes between them (no sockets).
#![allow(dead_code)]

use bytes::BytesMut;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    AdminError, AdminId, AdminOutput, Client, ClientConfig, ConnId, DisconnectReason, Event,
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
    buf: BytesMut,
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
            buf: BytesMut::with_capacity(64 * 1024),
        };
        w.step();
        w
    }

    /// Drains both sides until neither has anything to say.
    pub fn step(&mut self) {
        let now = self.now;
        for _ in 0..100_000 {
            let mut progress = false;
            while let Some(cr) = self.client.poll_connect() {
                progress = true;
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
            while let Some(c) = self.client.poll_close() {
                progress = true;
                if let Some(sc) = self.to_sim.remove(&c) {
                    self.to_client.remove(&sc);
                    self.sim.disconnect(sc);
                }
            }
            loop {
                self.buf.clear();
                let Some(c) = self.client.poll_transmit(now, &mut self.buf) else {
                    break;
                };
                progress = true;
                if let Some(sc) = self.to_sim.get(&c) {
                    self.sim.handle_input(*sc, now, &mut self.buf);
                }
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
            while let Some(e) = self.client.poll_event() {
                progress = true;
                self.events.push(e);
            }
            if !progress {
                return;
            }
        }
        panic!("world did not settle");
    }

    /// Advances the clock to the next deadline of either side (at most `max` ahead).
    pub fn tick(&mut self, max: Duration) {
        let limit = self.now + max;
        let next = [self.client.poll_timeout(), self.sim.poll_timeout()]
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
