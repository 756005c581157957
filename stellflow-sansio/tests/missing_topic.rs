//! A topic that `subscribe` or `assign` asks for and no broker knows: an event at the first
//! metadata answer without it, an error from poll naming it `consumer.missing_topic_wait`
//! later (within one more metadata round), and nothing else: a topic created later is
//! picked up by itself.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::{Duration, Instant};
use stellflow_sansio::{ConsumerError, ConsumerEvent, Event, TopicPartition};
use stellflow_sim::ClusterConfig;

/// The instant the consumer event matching `f` came, running `w` for at most `max`.
fn event_at(
    w: &mut common::World,
    max: Duration,
    f: impl Fn(&ConsumerEvent) -> bool,
) -> Option<Instant> {
    let mut at = None;
    w.run_until(max, |w| {
        let seen = w
            .events
            .iter()
            .any(|e| matches!(e, Event::Consumer(c) if f(c)));
        if seen {
            at = Some(w.now);
        }
        seen
    });
    at
}

/// The first poll error and its instant, running `w` for at most `max`.
fn poll_error(w: &mut common::World, max: Duration) -> Option<(Instant, ConsumerError)> {
    let mut got = None;
    w.run_until(max, |w| {
        got = w.client.take_poll_error().map(|e| (w.now, e));
        got.is_some()
    });
    got
}

fn world(group: Option<&str>) -> common::World {
    let cfg = consumer_config("broker-1:9092", group);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.bootstrap();
    w
}

#[test]
fn assigning_a_missing_topic_gives_an_event_then_a_poll_error_and_picks_it_up_once_created() {
    let mut w = world(None);
    let asked = w.now;
    let tp = TopicPartition::new("typo", 0);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let seen = event_at(
        &mut w,
        Duration::from_secs(5),
        |e| matches!(e, ConsumerEvent::TopicUnknown { topic, error_after } if topic == "typo" && *error_after == Duration::from_secs(5)),
    );
    let seen = seen.expect("no TopicUnknown event");
    assert!(
        seen - asked < Duration::from_secs(1),
        "event after {:?}",
        seen - asked
    );
    let (at, e) = poll_error(&mut w, Duration::from_secs(30)).expect("no poll error");
    assert!(
        matches!(&e, ConsumerError::UnknownTopic { topic, .. } if topic == "typo"),
        "{e:?}"
    );
    // The wait (5 s) after the event, plus one metadata round.
    let after = at - seen;
    assert!(
        after >= Duration::from_secs(5) && after < Duration::from_secs(6),
        "error {after:?} after the event"
    );
    assert!(e.to_string().contains("typo") && e.is_retriable(), "{e}");
    // Once: the next polls wait on.
    assert!(poll_error(&mut w, Duration::from_secs(10)).is_none());

    // Created later: picked up by itself.
    w.sim.create_topic("typo", 1, 1).unwrap();
    let mut exp = Expected::new();
    produce_values(&mut w, None, &tp, Kind::V1, values("a", 3, 4), &mut exp);
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) == 3);
    assert_eq!(count(&got), 3, "the topic created later is consumed");
}

#[test]
fn subscribing_to_a_missing_topic_gives_the_event_and_the_poll_error() {
    let mut w = world(Some("g-missing"));
    w.client.subscribe(w.now, &["nope"]).unwrap();
    let seen = event_at(
        &mut w,
        Duration::from_secs(5),
        |e| matches!(e, ConsumerEvent::TopicUnknown { topic, .. } if topic == "nope"),
    );
    assert!(seen.is_some(), "no TopicUnknown event: {:?}", w.events);
    let (_, e) = poll_error(&mut w, Duration::from_secs(30)).expect("no poll error");
    assert!(
        matches!(&e, ConsumerError::UnknownTopic { topic, .. } if topic == "nope"),
        "{e:?}"
    );
}

#[test]
fn a_topic_created_within_the_wait_gives_no_error() {
    let mut w = world(None);
    let tp = TopicPartition::new("soon", 0);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let seen = event_at(&mut w, Duration::from_secs(5), |e| {
        matches!(e, ConsumerEvent::TopicUnknown { .. })
    });
    assert!(seen.is_some());
    w.sim.create_topic("soon", 1, 1).unwrap();
    assert!(poll_error(&mut w, Duration::from_secs(20)).is_none());
}

#[test]
fn a_known_topic_gives_neither() {
    let mut w = world(None);
    w.sim.create_topic("here", 1, 1).unwrap();
    w.client.refresh_metadata(w.now);
    w.advance(Duration::from_secs(1));
    w.client
        .assign(w.now, &[TopicPartition::new("here", 0)])
        .unwrap();
    w.advance(Duration::from_secs(15));
    assert!(
        !w.events
            .iter()
            .any(|e| matches!(e, Event::Consumer(ConsumerEvent::TopicUnknown { .. }))),
        "{:?}",
        w.events
    );
    assert!(w.client.take_poll_error().is_none());
}
