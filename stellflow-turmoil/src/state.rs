//! What the broker hosts of a world share: the cluster model, the bytes waiting for each
//! connection, the world's clock as the model sees it, and the trace.

use crate::trace::TraceHash;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stellflow_sim::rng::SimRng;
use stellflow_sim::{ConnId, SimCluster, SimError};
use tokio::sync::Notify;

/// Event kinds of the trace.
pub(crate) mod kind {
    /// Bytes a broker received on a connection.
    pub const IN: u8 = b'i';
    /// Bytes a broker sent on a connection.
    pub const OUT: u8 = b'o';
    /// A connection opened (its broker is the event's place).
    pub const OPEN: u8 = b'c';
    /// A connection refused: its broker is down in the model.
    pub const REFUSED: u8 = b'r';
    /// A fault the test applied.
    pub const FAULT: u8 = b'f';
    /// What an application reported.
    pub const APP: u8 = b'a';
}

/// The bytes waiting for one connection's host to write them.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub frames: VecDeque<Bytes>,
    /// The model closed the connection: the host drops its socket once `frames` are out.
    pub closed: bool,
    /// Wakes the connection's task.
    pub notify: Arc<Notify>,
}

/// The state behind a [`crate::SimulatedCluster`].
#[derive(Debug)]
pub(crate) struct ClusterState {
    pub model: SimCluster,
    /// The model's `Instant` at the world's start: the model's clock is this plus the
    /// world's virtual time, the same for every host.
    start: Instant,
    /// The latest world time seen (the model's clock never goes back).
    elapsed: Duration,
    pub outboxes: BTreeMap<ConnId, Outbox>,
    /// Wakes the broker hosts' timer tasks when the model's next deadline may have moved.
    pub timer: Arc<Notify>,
    pub trace: TraceHash,
    /// Seeds of the clients the world starts, drawn in the order they start.
    pub seeds: SimRng,
}

impl ClusterState {
    /// A state for `model`, whose clock started at `start`.
    pub fn new(model: SimCluster, start: Instant, seed: u64) -> Self {
        ClusterState {
            model,
            start,
            elapsed: Duration::ZERO,
            outboxes: BTreeMap::new(),
            timer: Arc::new(Notify::new()),
            trace: TraceHash::new(),
            // Apart from the model's own generator (seeded with `seed` itself).
            seeds: SimRng::new(seed ^ 0x5eed_c11e_4700_0001),
        }
    }

    /// The model's clock now: the world's virtual time, read on the calling host (or, between
    /// steps, the latest time a host or the test saw).
    pub fn now(&mut self) -> Instant {
        if let Some(elapsed) = turmoil::sim_elapsed() {
            self.elapsed = self.elapsed.max(elapsed);
        }
        self.start + self.elapsed
    }

    /// Moves the model's clock to `elapsed` of world time (the test, between steps).
    pub fn advance_to(&mut self, elapsed: Duration) -> Instant {
        self.elapsed = self.elapsed.max(elapsed);
        self.start + self.elapsed
    }

    /// Opens a model connection to `broker` for a socket just accepted on its host.
    pub fn open(&mut self, broker: i32) -> Result<(ConnId, Arc<Notify>), SimError> {
        let now = self.now();
        match self.model.connect(broker, now) {
            Ok(conn) => {
                self.trace
                    .record(kind::OPEN, broker as u64, &conn.0.to_be_bytes());
                let outbox = self.outboxes.entry(conn).or_default();
                Ok((conn, outbox.notify.clone()))
            }
            Err(e) => {
                self.trace.record(kind::REFUSED, broker as u64, &[]);
                Err(e)
            }
        }
    }

    /// Client bytes on `conn`, handed to the model; its answers are routed.
    pub fn input(&mut self, conn: ConnId, bytes: &mut BytesMut) {
        self.trace.record(kind::IN, conn.0, bytes);
        let now = self.now();
        self.model.handle_input(conn, now, bytes);
        self.route();
    }

    /// Fires the model's due timers; its answers are routed.
    pub fn fire_timers(&mut self) {
        let now = self.now();
        self.model.handle_timeout(now);
        self.route();
    }

    /// How long until the model's next deadline (`None`: none).
    pub fn next_timer(&mut self) -> Option<Duration> {
        let now = self.now();
        self.model
            .poll_timeout()
            .map(|t| t.saturating_duration_since(now))
    }

    /// Takes the frames waiting for `conn` and whether the model closed it.
    pub fn take_out(&mut self, conn: ConnId) -> (Vec<Bytes>, bool) {
        let Some(outbox) = self.outboxes.get_mut(&conn) else {
            return (Vec::new(), true);
        };
        let frames: Vec<Bytes> = outbox.frames.drain(..).collect();
        for f in &frames {
            self.trace.record(kind::OUT, conn.0, f);
        }
        (frames, outbox.closed)
    }

    /// The host dropped `conn`'s socket (the client went, the model closed it, or the host
    /// crashed).
    pub fn forget(&mut self, conn: ConnId) {
        self.outboxes.remove(&conn);
        self.model.disconnect(conn);
    }

    /// Moves the model's answers and closed connections to their connections' outboxes and
    /// wakes their tasks (each runs on its broker's host, which must do the writing).
    pub fn route(&mut self) {
        while let Some((conn, frame)) = self.model.poll_transmit() {
            if let Some(outbox) = self.outboxes.get_mut(&conn) {
                outbox.frames.push_back(frame);
                outbox.notify.notify_one();
            }
        }
        while let Some(conn) = self.model.poll_closed() {
            if let Some(outbox) = self.outboxes.get_mut(&conn) {
                outbox.closed = true;
                outbox.notify.notify_one();
            }
        }
        self.timer.notify_waiters();
    }
}
