//! The producer's linger checks, both ways: no batch on the wire before `linger` (without a
//! flush), and no sendable due batch held longer than [`LINGER_SLACK`] (the precise rule is on
//! [`ProducerLoad`]).

use super::*;

impl ProducerLoad {
    /// The linger upper bound (see [`ProducerLoad`]).
    pub(super) fn check_linger_bound(&mut self, world: &mut World) {
        let now = world.elapsed();
        if self.topic_known_at.is_none()
            && world
                .client(self.client)
                .metadata()
                .topics
                .get(TOPIC)
                .is_some_and(|t| !t.partitions.is_empty())
        {
            self.topic_known_at = Some(now);
        }
        let Some(known_at) = self.topic_known_at else {
            return; // every record waits for metadata
        };
        // Per partition: the oldest unsent record without outcome, and whether a record that
        // was on the wire still waits for its outcome.
        let mut oldest: BTreeMap<i32, (u64, &str)> = BTreeMap::new();
        let mut busy: BTreeSet<i32> = BTreeSet::new();
        for (partition, seq, value) in self.info.values() {
            if self.sent.contains(value) {
                busy.insert(*partition);
            } else if oldest.get(partition).is_none_or(|(s, _)| seq < s) {
                oldest.insert(*partition, (*seq, value.as_str()));
            }
        }
        for p in 0..self.partitions {
            let named = world
                .client(self.client)
                .metadata()
                .partition(TOPIC, p)
                .is_some_and(|m| m.leader().is_ok());
            if named {
                self.leader_known_since.entry(p).or_insert(now);
            } else {
                self.leader_known_since.remove(&p);
            }
        }
        let mut due: Vec<(i32, Duration, String)> = Vec::new();
        for p in 0..self.partitions {
            let Some((_, value)) = oldest.get(&p) else {
                self.sendable_since.remove(&p);
                self.attempt_from.remove(&p);
                continue;
            };
            let Some(produced) = self.produced_at.get(*value).copied() else {
                continue;
            };
            // A record produced before the topic's partitions were known opens its batch when
            // they become known.
            let opened = produced.max(known_at);
            let flushed = self.flushes.iter().copied().find(|f| *f > produced);
            let due_at = flushed.map_or(opened + self.linger, |f| f.min(opened + self.linger));
            due.push((p, due_at, (*value).to_owned()));
        }
        if due.is_empty() {
            return;
        }
        let links = world.links(self.client);
        let live = |o: &&Outstanding| o.sent_at + self.request_timeout_max > now;
        let mut in_flight: BTreeSet<i32> = BTreeSet::new();
        for l in &links {
            for o in l.outstanding.iter().filter(live) {
                let Some(body) = o.body.clone() else { continue };
                if let Ok(req) = ProduceRequest::decode(&mut Reader::new(body)) {
                    in_flight.extend(
                        req.topic_data
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.partition)),
                    );
                }
            }
        }
        for (p, due_at, value) in due {
            let leader = world
                .client(self.client)
                .metadata()
                .partition(TOPIC, p)
                .and_then(|m| m.leader().ok());
            if self.attempt_from.get(&p).is_some_and(|(v, _)| *v != value) {
                self.attempt_from.remove(&p);
            }
            if now >= due_at && leader.is_some() && !self.attempt_from.contains_key(&p) {
                // The producer may have handed the batch to its network layer as soon as it
                // was due with a leader named, which can be before this sample (the world does
                // not step at every instant).
                let named_since = self.leader_known_since.get(&p).copied().unwrap_or(now);
                self.attempt_from
                    .insert(p, (value.clone(), due_at.max(named_since).min(now)));
            }
            // Handed to the network layer at that sample at the latest, the request may have
            // timed out waiting for a connection or an in-flight slot since: then the batch
            // waits for its retry backoff, which the wire does not show.
            let maybe_retrying = self
                .attempt_from
                .get(&p)
                .is_some_and(|(_, at)| now >= *at + self.request_timeout);
            let sendable = !maybe_retrying
                && !busy.contains(&p)
                && !in_flight.contains(&p)
                && (!self.idempotent || self.produce_seen)
                && leader.is_some_and(|l| {
                    let to: Vec<&LinkView> = links.iter().filter(|k| k.broker == l).collect();
                    !to.is_empty()
                        && to.iter().all(|k| {
                            k.negotiated
                                && k.outstanding.iter().filter(live).count() < self.max_in_flight
                        })
                });
            if !sendable {
                self.sendable_since.remove(&p);
                continue;
            }
            let since = *self.sendable_since.entry(p).or_insert(now);
            let deadline = due_at.max(since) + LINGER_SLACK;
            if self.bound_counted.get(&p) != Some(&value) {
                self.bound_counted.insert(p, value.clone());
                self.bound_checks += 1;
            }
            if now > deadline {
                world.report(
                    "linger-upper-bound",
                    format!(
                        "t0-{p}: batch starting with {value} due at {due_at:?} (linger {:?}), partition sendable to leader {leader:?} since {since:?}, still not sent at {now:?}",
                        self.linger
                    ),
                );
            }
        }
    }

    pub(super) fn check_linger(&mut self, world: &mut World, at: Duration, body: Bytes) {
        let Ok(req) = ProduceRequest::decode(&mut Reader::new(body)) else {
            world.report(
                "well-formed-requests",
                "producer sent an undecodable Produce".into(),
            );
            return;
        };
        for t in req.topic_data {
            for p in t.partitions {
                let Some(blob) = p.records else { continue };
                self.produce_seen = true;
                for r in blob_records(blob.clone()).flatten() {
                    if let Some(v) = r.record.value {
                        self.sent.insert(String::from_utf8_lossy(&v).into_owned());
                    }
                }
                let Some(Ok(first)) = blob_records(blob).next() else {
                    continue;
                };
                let Some(v) = first.record.value else {
                    continue;
                };
                let value = String::from_utf8_lossy(&v).into_owned();
                if !self.on_wire.insert(value.clone()) {
                    continue; // a retry
                }
                let Some(produced) = self.produced_at.get(&value).copied() else {
                    continue;
                };
                let flushed = self.flushes.iter().any(|f| *f >= produced && *f <= at);
                if !flushed && at < produced + self.linger {
                    world.report(
                        "linger-honoured",
                        format!(
                            "batch starting with {value} produced at {produced:?} sent at {at:?}, linger {:?}",
                            self.linger
                        ),
                    );
                }
            }
        }
    }
}
