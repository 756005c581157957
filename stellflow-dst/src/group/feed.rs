//! The producer that feeds a group world: keyed and keyless records at random times (the
//! partitioner spreads them), idempotent with `acks = -1`, and the acknowledged ones kept so
//! the end check can ask that every one of them was delivered.

use crate::workload::TOPIC;
use crate::world::{ClientId, World};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use stellflow_sansio::{Acks, Event, ProduceId, ProducerRecord};
use stellflow_sim::rng::SimRng;

/// The feeding producer.
#[derive(Debug)]
pub struct Feed {
    client: ClientId,
    schedule: VecDeque<(Duration, u32, bool)>,
    pending: BTreeMap<ProduceId, String>,
    /// Acknowledged record values.
    pub acked: BTreeMap<String, (i32, i64, u32)>,
    /// Records whose produce failed (they may or may not be in the log).
    pub failed: u64,
}

impl Feed {
    /// Adds the producer to `world`: `records` records over `span`, `keyed_pct` % with a key.
    pub fn new(
        world: &mut World,
        brokers: u32,
        seed: u64,
        records: u32,
        span: Duration,
        keyed_pct: u32,
    ) -> Option<Feed> {
        let mut rng = SimRng::new(seed);
        let mut c = super::member::bootstrap_config(brokers);
        c.header.client_id = Some("dst-feed".into());
        c.request_timeout = Duration::from_millis(1_500);
        c.producer.acks = Acks::All;
        c.producer.idempotence = true;
        c.producer.linger = Duration::from_millis(rng.below(20));
        c.producer.delivery_timeout = Duration::from_secs(20);
        let client = match world.add_client(c) {
            Ok(c) => c,
            Err(e) => {
                world.report("setup", format!("feed config: {e}"));
                return None;
            }
        };
        let span_ms = span.as_millis().max(1) as u64;
        let mut schedule: Vec<(Duration, u32, bool)> = (0..records)
            .map(|n| {
                let at = Duration::from_millis(rng.below(span_ms));
                (at, n, rng.below(100) < u64::from(keyed_pct))
            })
            .collect();
        schedule.sort();
        Some(Feed {
            client,
            schedule: schedule.into(),
            pending: BTreeMap::new(),
            acked: BTreeMap::new(),
            failed: 0,
        })
    }

    /// When the next record is due.
    pub fn next_at(&self) -> Option<Duration> {
        self.schedule.front().map(|(at, _, _)| *at)
    }

    /// Whether every record was produced and has its outcome.
    pub fn done(&self) -> bool {
        self.schedule.is_empty() && self.pending.is_empty()
    }

    /// Produces the records due now and reads the outcomes.
    pub fn drive(&mut self, world: &mut World) {
        while let Some(e) = world.poll_event(self.client) {
            if let Event::Produced { id, result } = e
                && let Some(value) = self.pending.remove(&id)
            {
                match result {
                    Ok(md) => {
                        let at = (md.partition, md.offset.unwrap_or(-1), md.index);
                        self.acked.insert(value, at);
                    }
                    Err(_) => self.failed += 1,
                }
            }
        }
        let at = world.elapsed();
        while self.schedule.front().is_some_and(|(t, _, _)| *t <= at) {
            let Some((_, n, keyed)) = self.schedule.pop_front() else {
                break;
            };
            let value = format!("g{n}");
            let key = format!("k{}", n % 7);
            let mut record = ProducerRecord::new(TOPIC, value.as_bytes());
            if keyed {
                record = record.with_key(key.as_bytes());
            }
            let now = world.now();
            match world.client(self.client).produce(now, &record) {
                Ok(id) => {
                    self.pending.insert(id, value);
                }
                Err(_) => self.failed += 1,
            }
        }
    }
}
