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
