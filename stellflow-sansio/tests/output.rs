//! The one driver door: `Client::poll_output` ends a drain with `Output::Timeout` only when
//! nothing is left, even though each transmit runs the client's pass and can create outputs
//! of every kind: right after `Timeout`, another call finds nothing and gives the same instant.

mod common;
mod consumer_support;

use common::World;
use consumer_support::consumer_config;
use std::time::Duration;
use stellflow_sansio::{OffsetReset, ProducerRecord, TopicPartition};
use stellflow_sim::ClusterConfig;

/// Producing, consuming and a broker that crashes and comes back, on three brokers: every
/// drain the world makes is checked at its end.
#[test]
fn a_drain_ends_only_when_nothing_is_left() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.producer.linger = Duration::from_millis(5);
    cfg.consumer.auto_offset_reset = OffsetReset::Earliest;
    let mut w = World::with(ClusterConfig::with_brokers(3), cfg);
    w.check_drain_end = true;
    w.sim.create_topic("t", 3, 3).unwrap();
    w.bootstrap();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("t", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let mut taken = 0;
    for round in 0..60 {
        for i in 0..5 {
            let value = format!("v{round}-{i}");
            let _ = w
                .client
                .produce(w.now, &ProducerRecord::new("t", value.as_bytes()));
        }
        if round == 20 {
            w.sim.crash(2, w.now).unwrap();
        }
        if round == 30 {
            w.sim.restart(2, w.now).unwrap();
        }
        w.tick(Duration::from_millis(20));
        while w.client.poll_record().is_some() {
            taken += 1;
        }
        w.step();
    }
    w.advance(Duration::from_secs(5));
    while w.client.poll_record().is_some() {
        taken += 1;
    }
    assert!(taken > 20, "records were consumed: {taken}");
}

/// The producer takes the answer to its own CreateTopics out of the event stream and asks for
/// a metadata round: the request for it is an output the same drain must still give.
#[test]
fn a_drain_gives_what_taking_an_event_asked_for() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.producer.create_missing_topics = Some(1);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.check_drain_end = true;
    w.bootstrap();
    w.client
        .produce(w.now, &ProducerRecord::new("new-topic", b"x"))
        .unwrap();
    let delivered = w.run_until(Duration::from_secs(10), |w| {
        w.events
            .iter()
            .any(|e| matches!(e, stellflow_sansio::Event::Produced { result: Ok(_), .. }))
    });
    assert!(delivered, "{:?}", w.events);
}

/// Produces `n` records of 100 bytes to each of `partitions` of `t` in one go (a blob of
/// ~130 KiB per partition, past the size from which blobs go out shared).
fn produce_large_blobs(w: &mut World, n: usize, partitions: i32) {
    for p in 0..partitions {
        for i in 0..n {
            let value = format!("{i:0>100}");
            w.client
                .produce(
                    w.now,
                    &ProducerRecord::new("t", value.as_bytes()).with_partition(p),
                )
                .unwrap();
        }
    }
}

/// Reads `partitions` of `t` from the start; each partition's values in order.
fn read_back(w: &mut World, n: usize, partitions: i32) -> Vec<Vec<Vec<u8>>> {
    let tps: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new("t", p))
        .collect();
    w.client.assign(w.now, &tps).unwrap();
    let mut got = vec![Vec::new(); partitions as usize];
    let mut total = 0;
    w.run_until(Duration::from_secs(10), |w| {
        while let Some(r) = w.client.poll_record() {
            got[r.partition as usize].push(r.value.map(|v| v.to_vec()).unwrap_or_default());
            total += 1;
        }
        total >= n * partitions as usize
    });
    got
}

/// The values `produce_large_blobs` writes to each partition.
fn values(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{i:0>100}").into_bytes()).collect()
}

/// Whether `n` records were delivered.
fn delivered(w: &World, n: usize) -> bool {
    let ok = |e: &&stellflow_sansio::Event| {
        matches!(e, stellflow_sansio::Event::Produced { result: Ok(_), .. })
    };
    w.events.iter().filter(ok).count() == n
}

/// Large record blobs reach the driver as `Output::TransmitBytes` (not copied into its
/// buffer), between the `Transmit`s that carry the rest of their frame; written in order, the
/// broker reads the frame whole, and every record comes back once, in order.
#[test]
fn large_blobs_go_out_shared_and_arrive_whole() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.producer.linger = Duration::from_millis(5);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.check_drain_end = true;
    w.sim.create_topic("t", 2, 1).unwrap();
    w.bootstrap();
    produce_large_blobs(&mut w, 1200, 2);
    let ok = w.run_until(Duration::from_secs(10), |w| delivered(w, 2400));
    assert!(ok, "all 2400 records delivered: {:?}", w.events.last());
    assert!(w.shared_transmits >= 2, "the blobs went out shared");
    assert_eq!(read_back(&mut w, 1200, 2), [values(1200), values(1200)]);
}

/// A connection lost between the pieces of a frame (after its first blob) gets none of the
/// rest (its requests fail with it and are sent again on a new connection): the records
/// are delivered exactly once.
#[test]
fn a_frame_cut_short_by_a_lost_connection_is_sent_again_whole() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.producer.linger = Duration::from_millis(5);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 2, 1).unwrap();
    w.bootstrap();
    w.cut_first_shared = true;
    produce_large_blobs(&mut w, 1200, 2);
    let ok = w.run_until(Duration::from_secs(20), |w| delivered(w, 2400));
    assert!(ok, "{:?}", w.events.last());
    assert!(w.cut.is_some(), "a blob was handed over shared");
    assert_eq!(
        w.sent_after_cut, 0,
        "nothing more went to the lost connection"
    );
    assert_eq!(read_back(&mut w, 1200, 2), [values(1200), values(1200)]);
}
