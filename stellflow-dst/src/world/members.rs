//! Faults of one client, as a process suffers them: a crash (dropped without `close`: its
//! sockets vanish and it is never driven again), a pause (not driven at all for a while, as
//! under SIGSTOP: bytes for it wait in the network, its timers do not fire) and isolation from
//! one broker (both directions of its links to that broker hold their bytes and new connects
//! fail, while its other links work).

use super::*;

impl World {
    /// Crashes client `id`: it is dropped without `close` and never driven again. Its
    /// connections vanish at once (the broker sees them closed, as a dead process's sockets
    /// are reset by its host), its pending connects are forgotten, and buffered events and
    /// records it produced are discarded (the application died with it).
    pub fn crash_client(&mut self, id: ClientId) {
        let Some(slot) = self.clients.get_mut(id.0) else {
            return;
        };
        if slot.run == Run::Crashed {
            return;
        }
        slot.run = Run::Crashed;
        slot.events.clear();
        slot.records.clear();
        let m = self.micros();
        self.trace.record(b'K', m, &(id.0 as u64).to_le_bytes());
        note!(self.log, self.elapsed(), "client {}: crashed", id.0);
        let keys: Vec<(usize, u64)> = self
            .links
            .range((id.0, 0)..=(id.0, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(link) = self.links.remove(&key)
                && let Some(sim) = link.sim
            {
                self.by_sim.remove(&sim);
                self.cluster.disconnect(sim);
            }
        }
        // Its gracefully closed sockets are reset by its host too.
        let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.closing)
            .into_iter()
            .partition(|l| l.client == id.0);
        self.closing = keep;
        for l in gone {
            self.cluster.disconnect(l.sim);
        }
        self.connects.retain(|c| c.client != id.0);
        self.settle();
    }

    /// Pauses client `id` for `for_`: nothing drives it meanwhile (no `handle_timeout`, no
    /// input, its outputs stay in it), bytes the brokers send it wait in the network, and
    /// its connects wait to complete. It resumes by itself (or at [`World::heal`]) and then
    /// sees everything at once, as a process continued after SIGSTOP does.
    pub fn pause_client(&mut self, id: ClientId, for_: Duration) {
        let Some(slot) = self.clients.get_mut(id.0) else {
            return;
        };
        if slot.run != Run::Running {
            return;
        }
        slot.run = Run::Paused;
        let m = self.micros();
        self.trace.record(b'Z', m, &(id.0 as u64).to_le_bytes());
        note!(
            self.log,
            self.elapsed(),
            "client {}: paused for {for_:?}",
            id.0
        );
        self.undo.push((self.now + for_, Undo::ResumeClient(id.0)));
    }

    /// Cuts client `id` off from `broker` for `for_`: bytes on its links to that broker are
    /// held both ways and its connects to it fail, while its links to other brokers work.
    pub fn isolate_client(&mut self, id: ClientId, broker: i32, for_: Duration) {
        let Some(slot) = self.clients.get_mut(id.0) else {
            return;
        };
        if slot.run == Run::Crashed || !slot.isolated.insert(broker) {
            return;
        }
        let m = self.micros();
        self.trace.record(b'I', m, &(id.0 as u64).to_le_bytes());
        note!(
            self.log,
            self.elapsed(),
            "client {}: cut off from broker {broker} for {for_:?}",
            id.0
        );
        self.undo
            .push((self.now + for_, Undo::Reconnect(id.0, broker)));
    }

    /// Whether client `id` is driven now (neither paused nor crashed).
    pub fn client_running(&self, id: ClientId) -> bool {
        self.clients
            .get(id.0)
            .is_some_and(|s| s.run == Run::Running)
    }

    /// Whether client `id` crashed ([`World::crash_client`]).
    pub fn client_crashed(&self, id: ClientId) -> bool {
        self.clients
            .get(id.0)
            .is_some_and(|s| s.run == Run::Crashed)
    }

    /// Whether client `id` is cut off from `broker` now ([`World::isolate_client`]).
    pub fn client_isolated(&self, id: ClientId, broker: i32) -> bool {
        self.clients
            .get(id.0)
            .is_some_and(|s| s.isolated.contains(&broker))
    }

    pub(super) fn resume_client_now(&mut self, i: usize) {
        if let Some(slot) = self.clients.get_mut(i)
            && slot.run == Run::Paused
        {
            slot.run = Run::Running;
            let m = self.micros();
            self.trace.record(b'z', m, &(i as u64).to_le_bytes());
            note!(self.log, self.elapsed(), "client {i}: resumed");
        }
    }

    pub(super) fn reconnect_client_now(&mut self, i: usize, broker: i32) {
        if let Some(slot) = self.clients.get_mut(i)
            && slot.isolated.remove(&broker)
        {
            let m = self.micros();
            self.trace.record(b'i', m, &(i as u64).to_le_bytes());
            note!(
                self.log,
                self.elapsed(),
                "client {i}: reaches broker {broker} again"
            );
        }
    }

    /// Whether client `i` is driven now.
    pub(super) fn runs(&self, i: usize) -> bool {
        self.clients.get(i).is_some_and(|s| s.run == Run::Running)
    }

    /// Whether the link of client `i` to `broker` holds its bytes both ways now (the broker
    /// is partitioned from everyone, or this client is cut off from it).
    pub(super) fn cut(&self, i: usize, broker: i32) -> bool {
        self.partitioned.contains(&broker)
            || self
                .clients
                .get(i)
                .is_some_and(|s| s.isolated.contains(&broker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::NetConfig;
    use stellflow_sansio::{ClientConfig, Target};

    const S: Duration = Duration::from_secs(1);

    fn world() -> (World, ClientId) {
        let mut w = World::new(9, ClusterConfig::with_brokers(1), NetConfig::default());
        let mut c = ClientConfig::new("broker-1:9092").unwrap();
        c.request_timeout = S * 10;
        let id = w.add_client(c).unwrap();
        (w, id)
    }

    /// Asks for the cluster description; whether the answer came within `within`.
    fn answered(w: &mut World, id: ClientId, within: Duration) -> bool {
        let now = w.now();
        let _ = w.client(id).describe_cluster(now, Target::Any);
        w.run_until(within, |w| {
            let mut got = false;
            while let Some(e) = w.poll_event(id) {
                got |= matches!(e, Event::Admin { .. });
            }
            got
        })
    }

    #[test]
    fn a_paused_client_does_nothing_until_it_resumes() {
        let (mut w, id) = world();
        assert!(answered(&mut w, id, S));
        w.pause_client(id, S * 3);
        let before = w.client_activity(id);
        assert!(
            !answered(&mut w, id, S * 2),
            "a paused client got an answer"
        );
        assert_eq!(w.client_activity(id), before, "a paused client was driven");
        assert!(!w.client_running(id));
        w.run_for(S * 2);
        assert!(w.client_running(id));
        assert!(answered(&mut w, id, S), "the resumed client is served");
        assert!(w.violations().is_empty(), "{:?}", w.violations());
    }

    /// The host's `TCP_USER_TIMEOUT` (what the core asks for on a group client's
    /// connections): bytes a cut holds past it are given up and the connection reset, even
    /// while the process is stopped; the client learns it when it runs again, and its
    /// request goes again on a fresh connection once the cut heals. Without a group the
    /// connection waits out the cut.
    #[test]
    fn a_hosts_user_timeout_gives_up_bytes_held_by_a_cut_even_while_paused() {
        for group in [true, false] {
            let mut w = World::new(9, ClusterConfig::with_brokers(1), NetConfig::default());
            let mut c = ClientConfig::new("broker-1:9092").unwrap();
            c.request_timeout = S * 20;
            if group {
                c.consumer.group_id = Some("g".into());
            }
            c.consumer.session_timeout = S * 4;
            c.consumer.heartbeat_interval = S; // lease margin: 1 s
            let id = w.add_client(c).unwrap();
            assert!(answered(&mut w, id, S));
            while w.poll_event(id).is_some() {}
            w.isolate_client(id, 1, S * 5);
            let now = w.now();
            let _ = w.client(id).describe_cluster(now, Target::Any);
            w.settle();
            let held = w.links(id);
            assert_eq!(held.len(), 1);
            assert_eq!(held[0].outstanding.len(), 1, "the request is on the wire");
            w.pause_client(id, S * 3);
            w.run_for(S * 2);
            let given_up = u64::from(group);
            assert_eq!(w.stats().user_timeouts, given_up, "group {group}");
            assert_eq!(
                w.links(id)[0].dead,
                group,
                "the paused client cannot know yet"
            );
            w.run_for(S * 2); // resumed at 3 s, still cut off
            let mut timed_out = false;
            while let Some(e) = w.poll_event(id) {
                timed_out |= matches!(
                    e,
                    Event::Disconnected {
                        reason: DisconnectReason::Io(ref f),
                        ..
                    } if f.kind == std::io::ErrorKind::TimedOut
                );
            }
            assert_eq!(timed_out, group, "the resumed client saw ETIMEDOUT");
            assert!(
                answered(&mut w, id, S * 10),
                "group {group}: served after the cut"
            );
            assert!(w.violations().is_empty(), "{:?}", w.violations());
        }
    }

    #[test]
    fn an_isolated_client_waits_and_a_crashed_one_is_gone() {
        let (mut w, id) = world();
        assert!(answered(&mut w, id, S));
        w.isolate_client(id, 1, S * 3);
        assert!(w.client_isolated(id, 1));
        assert!(!answered(&mut w, id, S * 2), "an answer crossed the cut");
        w.run_for(S * 2);
        assert!(!w.client_isolated(id, 1));
        assert!(answered(&mut w, id, S * 3), "served after the cut ends");
        w.crash_client(id);
        assert!(w.client_crashed(id));
        assert!(w.links(id).is_empty(), "a crashed client keeps its sockets");
        let before = w.client_activity(id);
        w.run_for(S * 5);
        assert_eq!(w.client_activity(id), before, "a crashed client was driven");
        assert!(w.violations().is_empty(), "{:?}", w.violations());
    }
}
