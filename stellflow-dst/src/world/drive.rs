//! Driving the world: the next deadline, steps of virtual time, and the passes that drain
//! clients and brokers, move bytes through the network and finish connection attempts, with
//! the per-step invariants checked on the way.

use super::*;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{CloseMode, HealthState, Output};

impl World {
    /// The earliest instant anything in the world has work.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        };
        for s in &mut self.clients {
            if s.run == Run::Running {
                consider(s.deadline);
            }
        }
        consider(self.cluster.poll_timeout());
        for l in &self.closing {
            if !self.cut(l.client, l.broker) {
                consider(l.up.next_at());
            }
            consider(give_up_at(l.unacked_timeout, l.up.oldest_written()));
        }
        for ((client, _), l) in &self.links {
            consider(l.gives_up_at());
            if !self.cut(*client, l.broker) {
                consider(l.up.next_at());
                // A paused client reads nothing: what comes for it waits in the network.
                if self.runs(*client) {
                    consider(l.down.next_at());
                }
            }
        }
        consider(
            self.connects
                .iter()
                .filter(|c| self.runs(c.client))
                .map(|c| c.at)
                .min(),
        );
        consider(self.undo.iter().map(|(t, _)| *t).min());
        best
    }

    /// One step: drains everything due now, then advances the clock to the next deadline (at
    /// most to `limit`), fires the timers due then, and drains again.
    pub fn step(&mut self, limit: Instant) {
        self.settle();
        let target = self
            .next_deadline()
            .map_or(limit, |d| d.min(limit))
            .max(self.now);
        if target == self.now {
            self.stuck_steps += 1;
            if self.stuck_steps == MAX_STUCK_STEPS {
                let due: Vec<usize> = self
                    .clients
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, s)| s.run == Run::Running)
                    .filter_map(|(i, s)| s.deadline.filter(|d| *d <= target).map(|_| i))
                    .collect();
                let cluster_due = self.cluster.poll_timeout().is_some_and(|d| d <= target);
                self.report(
                    "time-advances",
                    format!(
                        "{MAX_STUCK_STEPS} steps without the clock moving; clients whose drain timeout stays due: {due:?}; cluster due: {cluster_due}"
                    ),
                );
            }
        } else {
            self.stuck_steps = 0;
        }
        self.now = target;
        self.stats.steps += 1;
        let now = self.now;
        self.cluster.handle_timeout(now);
        let due: Vec<Undo> = {
            let (due, keep): (Vec<_>, Vec<_>) = self.undo.drain(..).partition(|(t, _)| *t <= now);
            self.undo = keep;
            due.into_iter().map(|(_, u)| u).collect()
        };
        for u in due {
            self.run_undo(u);
        }
        let mut woken = Vec::new();
        for (i, slot) in self.clients.iter_mut().enumerate() {
            if slot.run == Run::Running && slot.deadline.is_some_and(|d| d <= now) {
                slot.client.handle_timeout(now);
                self.stats.wakeups += 1;
                slot.wakeups += 1;
                woken.push(i);
            }
        }
        self.settle();
        // After handle_timeout(now) and a full drain (records included) the next deadline is
        // never in the past. (It may be `now`: the consumer asks for an immediate call once
        // taken records freed buffer space; a driver spinning on that forever is caught by
        // the `time-advances` check.)
        for i in woken {
            if let Some(slot) = self.clients.get_mut(i)
                && let Some(d) = slot.deadline
                && d < now
            {
                let past = now - d;
                self.report(
                    "poll-timeout-not-in-past",
                    format!(
                        "client {i}: drain timeout {past:?} before now after handle_timeout(now) and a full drain"
                    ),
                );
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end && self.stuck_steps < MAX_STUCK_STEPS {
            self.step(end);
        }
    }

    /// Runs until `pred` holds (checked after every step) or `max` of virtual time passed;
    /// returns whether `pred` held.
    pub fn run_until(&mut self, max: Duration, mut pred: impl FnMut(&mut World) -> bool) -> bool {
        let end = self.now + max;
        loop {
            self.settle();
            if pred(self) {
                return true;
            }
            if self.now >= end || self.stuck_steps >= MAX_STUCK_STEPS {
                return false;
            }
            self.step(end);
        }
    }

    /// Drains every output of every party at the current instant (the drain rule), delivering
    /// whatever the network has due, until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..MAX_PASSES {
            if !self.pass() {
                return;
            }
        }
        self.report(
            "quiescence",
            format!("{MAX_PASSES} drain passes at one instant"),
        );
    }

    fn pass(&mut self) -> bool {
        let mut progress = false;
        for i in 0..self.clients.len() {
            if self.runs(i) {
                progress |= self.drain_client(i);
            }
        }
        progress |= self.drain_cluster();
        progress |= self.user_timeouts();
        progress |= self.deliver();
        progress |= self.finish_connects();
        progress
    }

    fn drain_client(&mut self, i: usize) -> bool {
        let now = self.now;
        let m = self.micros();
        let mut progress = false;
        let Some(slot) = self.clients.get_mut(i) else {
            return false;
        };
        slot.deadline = loop {
            self.buf.clear();
            let output = match slot.client.poll_output(now, &mut self.buf) {
                // Shared bytes travel like buffered ones (the buffer is empty: cleared above).
                Output::TransmitBytes(c, bytes) => {
                    self.buf.extend_from_slice(&bytes);
                    Output::Transmit(c)
                }
                output => output,
            };
            progress |= !matches!(output, Output::Timeout(_));
            match output {
                Output::Connect(cr) => {
                    let address = cr.address.to_string();
                    self.trace.record(b'C', m, address.as_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {i} conn {}: connect to {address}",
                        cr.conn.0
                    );
                    let at = now + self.net.latency;
                    self.connects.push(PendingConnect {
                        at,
                        client: i,
                        conn: cr.conn,
                        address,
                        unacked_timeout: cr.unacked_timeout,
                    });
                }
                Output::Close(close) => {
                    let c = close.conn;
                    let abort = close.mode == CloseMode::Abort;
                    let tag = if abort { b'A' } else { b'X' };
                    self.trace.record(tag, m, &c.0.to_le_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {i} conn {}: {} by the client",
                        c.0,
                        if abort { "reset (abort)" } else { "closed" }
                    );
                    self.connects.retain(|p| !(p.client == i && p.conn == c));
                    if let Some(link) = self.links.remove(&(i, c.0))
                        && let Some(sim) = link.sim
                    {
                        self.by_sim.remove(&sim);
                        if !abort && !link.half_open && link.up.pending() > 0 {
                            // A graceful close: the host still delivers what was sent.
                            self.closing.push(ClosingLink {
                                client: i,
                                broker: link.broker,
                                sim,
                                up: link.up,
                                unacked_timeout: link.unacked_timeout,
                            });
                        } else {
                            // An abort (or nothing left to deliver): the bytes the broker
                            // has not received are discarded with the connection.
                            self.cluster.disconnect(sim);
                        }
                    }
                }
                // (`TransmitBytes` was made a `Transmit` of its bytes above.)
                Output::Transmit(c) | Output::TransmitBytes(c, _) => {
                    self.trace.record(b'U', m, &self.buf);
                    let timeouts = slot.client.counters().timeouts;
                    let Some(link) = self.links.get_mut(&(i, c.0)) else {
                        self.violations.push(Violation {
                            at: now - self.epoch,
                            invariant: "transmit-on-open-connection",
                            detail: format!(
                                "client {i} wrote {} bytes to {c:?}, which is not connected",
                                self.buf.len()
                            ),
                        });
                        continue;
                    };
                    let before = link.obs.requests;
                    if let Err((invariant, detail)) = link.obs.on_request_bytes(
                        &self.buf,
                        now - self.epoch,
                        timeouts,
                        slot.max_in_flight,
                    ) {
                        self.violations.push(Violation {
                            at: now - self.epoch,
                            invariant,
                            detail: format!("client {i} {c:?}: {detail}"),
                        });
                    }
                    self.stats.requests += link.obs.requests - before;
                    slot.requests += link.obs.requests - before;
                    let at = now - self.epoch;
                    slot.tapped
                        .extend(link.obs.tapped.drain(..).map(|b| (at, b)));
                    for f in link.obs.frames.drain(..) {
                        note!(self.log, at, "client {i} conn {}: {f}", c.0);
                    }
                    if link.timed_out {
                        // The host gave the socket up: the write fails, nothing is sent.
                    } else if !link.half_open {
                        link.up.push(&mut self.rng, &self.net, now, &self.buf);
                    } else if link.black_hole {
                        link.unacked_since.get_or_insert(now);
                    } else if !link.rst {
                        link.rst = true;
                        link.down
                            .push_fin(&mut self.rng, &self.net, now + self.net.latency);
                    }
                }
                Output::Event(e) => {
                    self.trace
                        .record(b'E', m, trace_text(i, &e, self.epoch).as_bytes());
                    note!(self.log, now - self.epoch, "client {i} event {e:?}");
                    slot.events.push_back(e);
                }
                Output::Timeout(t) => break t,
            }
        };
        let mut deliver = |slot: &mut Slot, r: ConsumerRecord| {
            progress = true;
            let pos = format!("{i}:{}:{}:{}", r.partition, r.offset, r.index);
            self.trace.record(b'r', m, pos.as_bytes());
            slot.records.push_back(r);
        };
        match slot.delivery {
            Delivery::Records => {
                while let Some(r) = slot.client.poll_record() {
                    deliver(slot, r);
                }
            }
            Delivery::Leases { max, stale_every } => {
                while let Some(mut lease) = slot.client.lease_records(max) {
                    lease.decode();
                    slot.leases += 1;
                    if stale_every > 0 && slot.leases % stale_every == 0 {
                        // A record taken between lending and redeeming makes the lease stale.
                        if let Some(r) = slot.client.poll_record() {
                            deliver(slot, r);
                        }
                    }
                    for r in slot.client.redeem_lease(lease).into_iter().flatten() {
                        deliver(slot, r);
                    }
                }
            }
        }
        progress
    }

    fn drain_cluster(&mut self) -> bool {
        let now = self.now;
        let mut progress = false;
        while let Some((sc, bytes)) = self.cluster.poll_transmit() {
            progress = true;
            if let Some(key) = self.by_sim.get(&sc)
                && let Some(link) = self.links.get_mut(key)
            {
                link.down.push(&mut self.rng, &self.net, now, &bytes);
            }
        }
        let mut closed = Vec::new();
        while let Some(sc) = self.cluster.poll_closed() {
            closed.push(sc);
        }
        closed.sort();
        for sc in closed {
            progress = true;
            self.closing.retain(|l| l.sim != sc);
            self.cluster.disconnect(sc);
            self.stats.broker_closes += 1;
            if let Some(key) = self.by_sim.remove(&sc)
                && let Some(link) = self.links.get_mut(&key)
            {
                link.sim = None;
                link.up.clear();
                link.down.push_fin(&mut self.rng, &self.net, now);
            }
        }
        progress
    }

    /// The clients' hosts give up connections whose written bytes stayed unacknowledged for
    /// the connection's user timeout (Linux `TCP_USER_TIMEOUT`, which the core asks for with
    /// `ConnectRequest::unacked_timeout`): bytes written at `s` and still held at `s + u` —
    /// by a cut, a partition or a black hole; delivered counts as acknowledged — are
    /// discarded, never retransmitted later, and the connection is reset. The broker's end
    /// is closed at once (on a real network it learns it at its next write after the cut
    /// heals, from the RST the client's host answers with; it only forgets the connection
    /// later); the client learns it when it runs, as a process stopped at that moment does
    /// on its next call (`ETIMEDOUT`). The host does this even while the client is paused:
    /// it is the kernel's, not the process's. A gracefully closed connection's last bytes
    /// are given up the same way.
    fn user_timeouts(&mut self) -> bool {
        let now = self.now;
        let m = self.micros();
        let mut progress = false;
        let mut k = 0;
        while let Some(l) = self.closing.get(k) {
            if give_up_at(l.unacked_timeout, l.up.oldest_written()).is_some_and(|t| t <= now) {
                let l = self.closing.remove(k);
                progress = true;
                self.stats.user_timeouts += 1;
                self.cluster.disconnect(l.sim);
                self.trace.record(b'T', m, &(l.client as u64).to_le_bytes());
                note!(
                    self.log,
                    now - self.epoch,
                    "client {}: a closed connection's last bytes given up by its host (user timeout)",
                    l.client
                );
            } else {
                k += 1;
            }
        }
        let keys: Vec<(usize, u64)> = self.links.keys().copied().collect();
        for key in keys {
            let Some(link) = self.links.get_mut(&key) else {
                continue;
            };
            if link.gives_up_at().is_some_and(|t| t <= now) {
                progress = true;
                link.timed_out = true;
                link.up.clear();
                link.down.clear();
                link.unacked_since = None;
                self.stats.user_timeouts += 1;
                if let Some(sim) = link.sim.take() {
                    self.by_sim.remove(&sim);
                    self.cluster.disconnect(sim);
                }
                self.trace.record(b'T', m, &key.1.to_le_bytes());
                note!(
                    self.log,
                    now - self.epoch,
                    "client {} conn {}: given up by the client's host (bytes unacknowledged for the user timeout)",
                    key.0,
                    key.1
                );
            }
            if self.links.get(&key).is_some_and(|l| l.timed_out) && self.runs(key.0) {
                progress = true;
                self.links.remove(&key);
                if let Some(slot) = self.clients.get_mut(key.0) {
                    slot.client.handle_disconnected(
                        ConnId(key.1),
                        now,
                        DisconnectReason::Io(IoFailure::new(
                            std::io::ErrorKind::TimedOut,
                            "connection timed out",
                        )),
                    );
                }
            }
        }
        progress
    }

    fn deliver(&mut self) -> bool {
        let now = self.now;
        let m = self.micros();
        let mut progress = false;
        // Gracefully closed connections: their last bytes, then the close.
        let mut k = 0;
        while k < self.closing.len() {
            let Some(l) = self.closing.get(k) else {
                break;
            };
            if self.cut(l.client, l.broker) {
                k += 1;
                continue;
            }
            let Some(l) = self.closing.get_mut(k) else {
                break;
            };
            self.buf.clear();
            l.up.take_due(now, &mut self.buf);
            if !self.buf.is_empty() {
                progress = true;
                self.cluster.handle_input(l.sim, now, &mut self.buf);
            }
            if l.up.pending() == 0 {
                progress = true;
                let sim = l.sim;
                self.closing.remove(k);
                self.cluster.disconnect(sim);
            } else {
                k += 1;
            }
        }
        let keys: Vec<(usize, u64)> = self.links.keys().copied().collect();
        for key in keys {
            let runs = self.runs(key.0);
            let Some(broker) = self.links.get(&key).map(|l| l.broker) else {
                continue;
            };
            if self.cut(key.0, broker) {
                continue;
            }
            let Some(link) = self.links.get_mut(&key) else {
                continue;
            };
            self.buf.clear();
            link.up.take_due(now, &mut self.buf);
            if !self.buf.is_empty() {
                progress = true;
                if let Some(sim) = link.sim {
                    self.cluster.handle_input(sim, now, &mut self.buf);
                } else if link.impostor.is_some() {
                    let bytes = std::mem::take(&mut self.buf);
                    self.impostor_input(key, &bytes);
                    self.buf = bytes;
                }
            }
            let Some(link) = self.links.get_mut(&key) else {
                continue;
            };
            if !runs {
                // A paused client reads nothing: its bytes wait in the network.
                continue;
            }
            self.buf.clear();
            let fin = link.down.take_due(now, &mut self.buf);
            if !self.buf.is_empty() {
                progress = true;
                self.trace.record(b'D', m, &self.buf);
                // An impostor's garbage is no broker's answer: nothing to check in it.
                let checked = if link.impostor.is_none() {
                    link.obs.on_response_bytes(&self.buf)
                } else {
                    Ok(())
                };
                if let Err((invariant, detail)) = checked {
                    self.violations.push(Violation {
                        at: now - self.epoch,
                        invariant,
                        detail,
                    });
                }
                for f in link.obs.frames.drain(..) {
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: {f}",
                        key.0,
                        key.1
                    );
                }
                let impostor = link.impostor.is_some();
                let n = self.buf.len();
                if let Some(slot) = self.clients.get_mut(key.0) {
                    slot.client.handle_input(ConnId(key.1), now, &mut self.buf);
                }
                if impostor {
                    self.impostor_delivered(key, n);
                }
            }
            if fin {
                progress = true;
                self.links.remove(&key);
                self.trace.record(b'P', m, &key.1.to_le_bytes());
                note!(
                    self.log,
                    now - self.epoch,
                    "client {} conn {}: closed by the peer",
                    key.0,
                    key.1
                );
                if let Some(slot) = self.clients.get_mut(key.0) {
                    slot.client.handle_disconnected(
                        ConnId(key.1),
                        now,
                        DisconnectReason::PeerClosed,
                    );
                }
            }
        }
        progress
    }

    fn finish_connects(&mut self) -> bool {
        let now = self.now;
        let m = self.micros();
        // A paused client's connects complete when it runs again.
        let due_now = |w: &World, c: &PendingConnect| c.at <= now && w.runs(c.client);
        if !self.connects.iter().any(|c| due_now(self, c)) {
            return false;
        }
        let pending = std::mem::take(&mut self.connects);
        let (due, keep): (Vec<_>, Vec<_>) = pending.into_iter().partition(|c| due_now(self, c));
        self.connects = keep;
        for c in due {
            let broker = self.cluster.broker_for_addr(&c.address);
            let result = match broker {
                Some(b) if self.cut(c.client, b) => Err("connection timed out".to_owned()),
                Some(b) if self.impostor_of(b).is_some() => Ok((b, None)),
                Some(b) => self
                    .cluster
                    .connect(b, now)
                    .map(|sim| (b, Some(sim)))
                    .map_err(|e| e.to_string()),
                None => Err(format!("unknown host {}", c.address)),
            };
            let impostor = match (&result, broker.and_then(|b| self.impostor_of(b))) {
                (Ok((b, None)), Some(garbage)) => {
                    Some(self.impostor_connected(c.client, c.conn, *b, &c.address, garbage))
                }
                _ => None,
            };
            let Some(slot) = self.clients.get_mut(c.client) else {
                continue;
            };
            match result {
                Ok((broker, sim)) => {
                    self.stats.connects += 1;
                    self.trace.record(b'c', m, &c.conn.0.to_le_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: connected to broker {broker}",
                        c.client,
                        c.conn.0
                    );
                    self.links.insert(
                        (c.client, c.conn.0),
                        Link {
                            sim,
                            broker,
                            up: Pipe::new(now),
                            down: Pipe::new(now),
                            half_open: false,
                            black_hole: false,
                            rst: false,
                            obs: LinkObserver::tapping(slot.tap).recording(self.log.is_some()),
                            impostor,
                            unacked_timeout: c.unacked_timeout,
                            unacked_since: None,
                            timed_out: false,
                        },
                    );
                    if let Some(sim) = sim {
                        self.by_sim.insert(sim, (c.client, c.conn.0));
                    }
                    slot.client.handle_connected(c.conn, now);
                }
                Err(e) => {
                    self.stats.connect_failures += 1;
                    self.trace.record(b'f', m, e.as_bytes());
                    note!(
                        self.log,
                        now - self.epoch,
                        "client {} conn {}: connect failed: {e}",
                        c.client,
                        c.conn.0
                    );
                    slot.client.handle_disconnected(
                        c.conn,
                        now,
                        DisconnectReason::ConnectFailed(IoFailure::new(
                            std::io::ErrorKind::ConnectionRefused,
                            e,
                        )),
                    );
                }
            }
        }
        true
    }
}

/// When a host with user timeout `timeout` gives up bytes unacknowledged `since`.
fn give_up_at(timeout: Option<Duration>, since: Option<Instant>) -> Option<Instant> {
    Some(since? + timeout?)
}

/// How an event enters the trace hash: its `Debug` text, except where it holds instants
/// (a health change), which are written as offsets from the world's epoch so that the same
/// plan hashes the same in every run (the epoch is a real `Instant` taken at construction).
fn trace_text(i: usize, e: &Event, epoch: Instant) -> String {
    let since = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(epoch));
    match e {
        Event::HealthChanged(h) => {
            let state = match h.state {
                HealthState::Unreachable { since: t } => {
                    format!("Unreachable({:?})", t.saturating_duration_since(epoch))
                }
                other => format!("{other:?}"),
            };
            let brokers: Vec<String> = (h.brokers.iter())
                .map(|b| {
                    format!(
                        "{} {:?} {} {:?} {:?} {:?} {}",
                        b.address,
                        b.broker_id,
                        b.connected,
                        since(b.last_answer),
                        since(b.failing_since),
                        b.last_cause,
                        b.not_stellflow
                    )
                })
                .collect();
            format!("{i}HealthChanged {state} {brokers:?}")
        }
        _ => format!("{i}{e:?}"),
    }
}
