//! Helpers of the producer tests: a world with one topic ready, records produced in bulk,
//! their outcomes, and what the simulated brokers' logs hold.

use super::World;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use stellflow_proto::record::blob_records;
use stellflow_sansio::{
    ClientConfig, DeliveryError, Event, ProduceError, ProduceId, ProducerConfig, ProducerRecord,
    RecordMetadata,
};
use stellflow_sim::ClusterConfig;

/// Every record's outcome, by id.
pub type Outcomes = HashMap<ProduceId, Result<RecordMetadata, DeliveryError>>;

/// A client configuration for `brokers` brokers (`broker-1:9092`, ...) with producer
/// settings `p`.
pub fn client_config(brokers: usize, p: ProducerConfig) -> ClientConfig {
    let bootstrap: Vec<String> = (1..=brokers).map(|i| format!("broker-{i}:9092")).collect();
    let mut c = super::config(&bootstrap.join(","));
    c.producer = p;
    c
}

/// A world of `brokers` brokers with `topic` created (`partitions`, replication `rf`) and
/// its metadata known to the client.
pub fn topic_world(
    brokers: usize,
    (topic, partitions, rf): (&str, i32, usize),
    c: ClientConfig,
) -> World {
    let mut w = World::with(ClusterConfig::with_brokers(brokers), c);
    w.sim.create_topic(topic, partitions, rf).unwrap();
    w.bootstrap();
    w.client.refresh_metadata(w.now);
    let t = topic.to_owned();
    assert!(w.run_until(Duration::from_secs(10), |w| {
        w.client
            .metadata()
            .topics
            .get(&t)
            .is_some_and(|ti| ti.partitions.len() == partitions as usize)
    }));
    w
}

/// Produces `n` keyed records (keys `k0..k{keys}`, value = big-endian `first + i`), waiting
/// while the buffer is full; returns id → value.
pub fn produce_n(
    w: &mut World,
    topic: &str,
    first: u32,
    n: u32,
    keys: u32,
) -> BTreeMap<ProduceId, u32> {
    let mut ids = BTreeMap::new();
    for i in first..first + n {
        let key = format!("k{}", i % keys);
        let value = i.to_be_bytes();
        let rec = ProducerRecord::new(topic, &value).with_key(key.as_bytes());
        let id = loop {
            match w.client.produce(w.now, &rec) {
                Ok(id) => break id,
                Err(ProduceError::BufferFull { .. }) => w.tick(Duration::from_millis(5)),
                Err(e) => panic!("{e}"),
            }
        };
        ids.insert(id, i);
        if i % 50 == 0 {
            w.tick(Duration::from_millis(1));
        }
    }
    ids
}

/// Flushes and runs until the flush completes.
pub fn flush(w: &mut World) {
    let id = w.client.flush(w.now);
    let ok = w.run_until(Duration::from_secs(300), |w| {
        w.events
            .iter()
            .any(|e| matches!(e, Event::Flushed { id: i } if *i == id))
    });
    assert!(ok, "flush never completed");
}

/// Moves the Produced events out of the world into `out`, failing on a second outcome.
pub fn collect(w: &mut World, out: &mut Outcomes) {
    for e in w.take(|e| matches!(e, Event::Produced { .. })) {
        if let Event::Produced { id, result } = e {
            assert!(out.insert(id, result).is_none(), "two outcomes for {id:?}");
        }
    }
}

/// The Produced outcomes taken out of the world's events.
pub fn outcomes(w: &mut World) -> Outcomes {
    let mut out = Outcomes::new();
    collect(w, &mut out);
    out
}

/// Every record of a partition's log on `broker`: (blob offset, index, value).
pub fn log_values(w: &World, broker: i32, topic: &str, p: i32) -> Vec<(i64, u32, Vec<u8>)> {
    let Some(log) = w.sim.broker(broker).and_then(|b| b.log(topic, p)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in log.entries_from(0) {
        for r in blob_records(e.blob.clone()) {
            let r = r.unwrap();
            let value = r.record.value.map(|v| v.to_vec()).unwrap_or_default();
            out.push((e.offset, r.index_in_blob, value));
        }
    }
    out
}

/// [`log_values`] with each value read as the number [`produce_n`] wrote.
pub fn log_numbers(w: &World, broker: i32, topic: &str, p: i32) -> Vec<(i64, u32, u32)> {
    (log_values(w, broker, topic, p).into_iter())
        .map(|(o, i, v)| (o, i, u32::from_be_bytes(v[..4].try_into().unwrap())))
        .collect()
}

/// The leader of `topic`'s partition `p` as the client's metadata has it.
pub fn leader(w: &World, topic: &str, p: i32) -> i32 {
    w.client.metadata().partition(topic, p).unwrap().leader_id
}
