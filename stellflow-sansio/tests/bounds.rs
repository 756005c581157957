//! Bounds on how long a record waits for an outcome: an in-flight Produce is not waited for
//! past its records' delivery deadline (without idempotence), and a send to a topic every
//! broker confirms unknown fails after `metadata_max_wait`, not after the delivery timeout.

mod common;

use common::World;
use std::time::{Duration, Instant};
use stellflow_proto::ApiKey;
use stellflow_sansio::{ClientConfig, DeliveryError, Event, ProducerRecord};
use stellflow_sim::{ClusterConfig, Fault, FaultRule};

/// The instant the one record produced got its outcome, and the outcome.
fn outcome(w: &mut World, max: Duration) -> (Instant, Result<(), DeliveryError>) {
    let mut got = None;
    w.run_until(max, |w| {
        for e in w.take(|e| matches!(e, Event::Produced { .. })) {
            if let Event::Produced { result, .. } = e {
                got = Some((w.now, result.map(drop)));
            }
        }
        got.is_some()
    });
    got.expect("an outcome")
}

fn world(tweak: impl FnOnce(&mut ClientConfig)) -> World {
    let mut c = common::config("broker-1:9092");
    tweak(&mut c);
    let mut w = World::with(ClusterConfig::with_brokers(1), c);
    w.sim.create_topic("t", 1, 1).unwrap();
    w.bootstrap();
    w.events.clear();
    w.client.refresh_metadata(w.now);
    w.bootstrap();
    assert!(w.client.metadata().topics.contains_key("t"));
    w
}

#[test]
fn an_unanswered_produce_is_given_up_at_the_delivery_deadline() {
    let mut w = world(|c| {
        c.request_timeout = Duration::from_secs(30);
        c.producer.delivery_timeout = Duration::from_secs(3);
    });
    w.sim
        .inject_fault(FaultRule::random(ApiKey::PRODUCE, 1.0, Fault::DropResponse));
    let start = w.now;
    w.client
        .produce(w.now, &ProducerRecord::new("t", b"v"))
        .unwrap();
    let (at, result) = outcome(&mut w, Duration::from_secs(60));
    let e = result.expect_err("never answered");
    assert!(e.outcome_unknown(), "it was sent: {e}");
    let took = at - start;
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(3200),
        "the acks=all request would have waited 30 s; took {took:?}: {e}"
    );
}

#[test]
fn a_topic_every_broker_confirms_unknown_fails_after_metadata_max_wait() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        common::config("broker-1:9092"),
    );
    w.bootstrap();
    w.advance(Duration::from_secs(1));
    let start = w.now;
    w.client
        .produce(w.now, &ProducerRecord::new("missing", b"v"))
        .unwrap();
    // The driver drains after a command.
    w.step();
    let (at, result) = outcome(&mut w, Duration::from_secs(200));
    let e = result.expect_err("no such topic");
    assert!(matches!(e, DeliveryError::UnknownTopic { .. }), "{e}");
    // The message blames the wait that ran out and names the remedies.
    let text = e.to_string();
    assert!(text.contains("producer.metadata_max_wait"), "{text}");
    assert!(!text.contains("delivery timeout"), "{text}");
    assert!(text.contains("stellflow topics create missing"), "{text}");
    let took = at - start;
    // The default wait (5 s) from the first round that confirmed it, not 120 s.
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(7),
        "{took:?}"
    );
}

#[test]
fn create_missing_topics_creates_the_topic_and_delivers() {
    let mut c = common::config("broker-1:9092");
    c.producer.create_missing_topics = Some(3);
    let mut w = World::with(ClusterConfig::with_brokers(1), c);
    w.bootstrap();
    w.client
        .produce(w.now, &ProducerRecord::new("made", b"v"))
        .unwrap();
    let (_, result) = outcome(&mut w, Duration::from_secs(30));
    result.expect("delivered to the created topic");
    let t = &w.client.metadata().topics["made"];
    assert_eq!(t.partitions.len(), 3);
    assert!(
        !w.events.iter().any(|e| matches!(e, Event::Admin { .. })),
        "the creation's answer is the producer's: {:?}",
        w.events
    );
}
