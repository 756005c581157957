//! Cluster health in the core: healthy → degraded → unreachable within `unreachable_timeout`
//! of a broker crashing for good, one consumer error per outage, recovery by itself; a peer
//! that is not a Stellflow broker reported at its first answer and retried at the cap.

mod common;
mod consumer_support;

use bytes::BytesMut;
use common::{drain_by_hand, next_transmit};
use consumer_support::*;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    Client, ClientConfig, ConnectionError, ConsumerError, DisconnectReason, Event, HealthState,
    TopicPartition,
};
use stellflow_sim::ClusterConfig;

fn refused() -> DisconnectReason {
    DisconnectReason::connect_failed(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
}

fn health_events(w: &mut common::World) -> Vec<(Instant, HealthState)> {
    let now = w.now;
    w.take(|e| matches!(e, Event::HealthChanged(_)))
        .into_iter()
        .filter_map(|e| match e {
            Event::HealthChanged(h) => Some((now, h.state)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_broker_gone_for_good_makes_the_cluster_unreachable_once_and_it_recovers_by_itself() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.unreachable_timeout = Duration::from_secs(10);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let tp = TopicPartition::new("t", 0);
    let mut exp = Expected::new();
    produce_values(&mut w, None, &tp, Kind::V1, values("a", 5, 4), &mut exp);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) == 5);
    assert_eq!(count(&got), 5);
    assert_eq!(w.client.cluster_health().state, HealthState::Healthy);
    w.events.clear();

    let crashed = w.now;
    w.sim.crash(1, w.now).unwrap();
    let mut seen = Vec::new();
    let mut errors = Vec::new();
    w.run_until(Duration::from_secs(40), |w| {
        seen.extend(health_events(w));
        errors.extend(w.client.take_unreachable_error());
        false
    });
    let states: Vec<_> = seen.iter().map(|(_, s)| *s).collect();
    assert!(
        matches!(
            states[..],
            [HealthState::Degraded, HealthState::Unreachable { .. }]
        ),
        "{states:?}"
    );
    let (at, HealthState::Unreachable { since }) = seen[1] else {
        unreachable!()
    };
    assert!(
        since >= crashed && since - crashed < Duration::from_secs(1),
        "{since:?}"
    );
    let took = at - crashed;
    assert!(
        took >= Duration::from_secs(10) && took <= Duration::from_secs(12),
        "unreachable after {took:?}"
    );
    assert_eq!(errors.len(), 1, "once per outage: {errors:?}");
    let text = errors[0].to_string();
    assert!(text.contains("broker-1:9092"), "{text}");
    assert!(text.contains("unreachable_timeout"), "{text}");
    let e = ConsumerError::Unreachable(errors[0].clone());
    assert!(e.is_retriable());
    let health = w.client.cluster_health();
    let b = &health.brokers[0];
    assert!(!b.connected && b.last_cause.is_some(), "{b:?}");

    // The broker comes back: health recovers and records flow without any call.
    w.sim.restart(1, w.now).unwrap();
    w.sim.reassert_leadership(1).unwrap();
    produce_values(&mut w, None, &tp, Kind::V1, values("b", 3, 4), &mut exp);
    let got = drain(&mut w, Duration::from_secs(20), |g| count(g) == 3);
    assert_eq!(count(&got), 3, "consumption resumes by itself");
    let states: Vec<_> = health_events(&mut w).into_iter().map(|(_, s)| s).collect();
    assert!(
        !states.is_empty()
            && states
                .iter()
                .all(|s| !matches!(s, HealthState::Unreachable { .. })),
        "{states:?}"
    );
    assert!(w.client.take_unreachable_error().is_none());
}

#[test]
fn a_client_that_asks_nothing_is_never_unreachable() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.unreachable_timeout = Duration::from_secs(5);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.bootstrap();
    w.advance(Duration::from_secs(60));
    assert_eq!(w.client.cluster_health().state, HealthState::Healthy);
    assert!(health_events(&mut w).is_empty());
}

/// A driver by hand: the client's first connection, its ApiVersions, and the bytes `answer`
/// gives back for it.
fn first_answer(answer: impl FnOnce(i32) -> Vec<u8>) -> (Client, Vec<Event>, Instant) {
    let now = Instant::now();
    let mut cfg = ClientConfig::new("127.0.0.1:19299").unwrap();
    cfg.consumer.group_id = None;
    let mut c = Client::new(cfg, now, 1).unwrap();
    c.assign(now, &[TopicPartition::new("t", 0)]).unwrap();
    let conn = drain_by_hand(&mut c, now)
        .connects
        .first()
        .expect("a connection")
        .conn;
    c.handle_connected(conn, now);
    let mut out = BytesMut::new();
    assert_eq!(next_transmit(&mut c, now, &mut out), conn);
    let correlation = i32::from_be_bytes(out[10..14].try_into().unwrap());
    let mut input = BytesMut::from(&answer(correlation)[..]);
    c.handle_input(conn, now, &mut input);
    let events = drain_by_hand(&mut c, now).events;
    (c, events, now)
}

fn assert_not_stellflow(c: &mut Client, events: &[Event], now: Instant, says: &str) {
    let error = events.iter().find_map(|e| match e {
        Event::ConnectionError { error, address, .. } => Some((error, address)),
        _ => None,
    });
    let Some((ConnectionError::NotStellflow { detail }, address)) = error else {
        panic!("no NotStellflow error: {events:?}");
    };
    assert_eq!(address.to_string(), "127.0.0.1:19299");
    assert!(detail.contains(says), "{detail}");
    let retry = events.iter().find_map(|e| match e {
        Event::Disconnected { retry_in, .. } => Some(*retry_in),
        _ => None,
    });
    // At the reconnect cap (1 s, jitter at most -20 %), not the 100 ms first backoff.
    assert!(
        retry.is_some_and(|r| r >= Duration::from_millis(800)),
        "{retry:?}"
    );
    // Every broker known is not a Stellflow broker: unreachable at once.
    assert!(
        matches!(c.cluster_health().state, HealthState::Unreachable { .. }),
        "{:?}",
        c.cluster_health()
    );
    let e = c.take_unreachable_error().expect("the consumer is told");
    assert!(e.to_string().contains("not a Stellflow broker"), "{e}");
    // The next attempts stay at the cap.
    let mut last = now;
    let mut next = drain_by_hand(c, now).timeout;
    for _ in 0..3 {
        let Some(t) = next else { break };
        last = t;
        c.handle_timeout(t);
        let d = drain_by_hand(c, t);
        next = d.timeout;
        if let Some(cr) = d.connects.first() {
            c.handle_connected(cr.conn, t);
            drain_by_hand(c, t);
            let mut http = BytesMut::from(&b"HTTP/1.0 400 Bad request\r\n\r\n"[..]);
            c.handle_input(cr.conn, t, &mut http);
            let d = drain_by_hand(c, t);
            next = d.timeout;
            for e in d.events {
                if let Event::Disconnected { retry_in, .. } = e {
                    assert!(retry_in >= Duration::from_millis(800), "{retry_in:?}");
                }
            }
        }
    }
    assert!(last > now);
}

#[test]
fn an_http_server_is_not_a_stellflow_broker() {
    let (mut c, events, now) =
        first_answer(|_| b"HTTP/1.0 400 Bad request\r\nServer: SimpleHTTP/0.6\r\n\r\n".to_vec());
    assert_not_stellflow(&mut c, &events, now, "HTTP/1.0 400");
}

#[test]
fn a_wrong_correlation_id_is_not_a_stellflow_broker() {
    let (mut c, events, now) = first_answer(|corr| {
        let mut f = vec![0, 0, 0, 12];
        f.extend_from_slice(&(corr + 7).to_be_bytes());
        f.extend_from_slice(&[0; 8]);
        f
    });
    assert_not_stellflow(&mut c, &events, now, "correlation id");
}

#[test]
fn an_undecodable_api_versions_body_is_not_a_stellflow_broker() {
    let (mut c, events, now) = first_answer(|corr| {
        // A 12-byte header (correlation id, error 0, throttle 0) and a body of 3 odd bytes.
        let mut f = vec![0, 0, 0, 15];
        f.extend_from_slice(&corr.to_be_bytes());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        f.truncate(19);
        f
    });
    assert_not_stellflow(&mut c, &events, now, "not an ApiVersions response");
}

#[test]
fn a_refused_connection_is_degraded_not_not_stellflow() {
    let now = Instant::now();
    let mut cfg = ClientConfig::new("127.0.0.1:19299").unwrap();
    cfg.unreachable_timeout = Duration::from_secs(3);
    let mut c = Client::new(cfg, now, 1).unwrap();
    let conn = drain_by_hand(&mut c, now).connects.first().unwrap().conn;
    c.handle_disconnected(conn, now, refused());
    assert_eq!(c.cluster_health().state, HealthState::Degraded);
    let mut t = now;
    let mut next = drain_by_hand(&mut c, now).timeout;
    while t < now + Duration::from_secs(4) {
        t = next.unwrap();
        c.handle_timeout(t);
        let d = drain_by_hand(&mut c, t);
        next = d.timeout;
        if let Some(cr) = d.connects.first() {
            c.handle_disconnected(cr.conn, t, refused());
            next = drain_by_hand(&mut c, t).timeout;
        }
        if matches!(c.cluster_health().state, HealthState::Unreachable { .. }) {
            break;
        }
    }
    assert!(matches!(
        c.cluster_health().state,
        HealthState::Unreachable { since } if since == now
    ));
    assert!(
        t - now >= Duration::from_secs(3) && t - now < Duration::from_millis(3100),
        "{:?}",
        t - now
    );
    // No consumer: nobody to hand the error to.
    assert!(c.take_unreachable_error().is_none());
}

#[test]
fn a_peer_silent_on_api_versions_is_given_up_after_the_setup_timeout() {
    let now = Instant::now();
    let cfg = ClientConfig::new("127.0.0.1:19299").unwrap();
    let mut c = Client::new(cfg, now, 1).unwrap();
    let conn = drain_by_hand(&mut c, now).connects.first().unwrap().conn;
    c.handle_connected(conn, now);
    let d = drain_by_hand(&mut c, now);
    assert_eq!(d.sent.first().map(|s| s.0), Some(conn));
    let mut next = d.timeout;
    let (t, error) = loop {
        let t = next.unwrap();
        assert!(t <= now + Duration::from_secs(3), "{:?}", t - now);
        c.handle_timeout(t);
        let d = drain_by_hand(&mut c, t);
        next = d.timeout;
        if let Some(e) = d.events.into_iter().find_map(|e| match e {
            Event::ConnectionError { error, .. } => Some(error),
            _ => None,
        }) {
            break (t, e);
        }
    };
    assert_eq!(t - now, Duration::from_secs(3));
    assert!(
        matches!(error, ConnectionError::Negotiation(_)),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("connection_setup_timeout"),
        "{error}"
    );
}

/// A bootstrap address that fails and that the metadata does not name (a stale
/// entry) does not keep the client degraded: health counts the brokers of the metadata, and
/// the bootstrap list only while no broker is known. The address is still listed with its
/// failure, and still asked on metadata refreshes.
#[test]
fn a_dead_bootstrap_address_the_metadata_does_not_name_does_not_keep_the_client_degraded() {
    let cfg = ClientConfig::new("dead-1:9092,broker-1:9092").unwrap();
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    w.client.refresh_metadata(w.now);
    let ok = w.run_until(Duration::from_secs(30), |w| {
        w.attempts.iter().any(|(_, a)| a == "dead-1:9092")
            && w.client.metadata().topics.contains_key("t")
    });
    assert!(ok, "dead-1 dialled and metadata known: {:?}", w.attempts);
    let dials = w.attempts.len();
    w.advance(Duration::from_secs(20));
    w.client.refresh_metadata(w.now);
    w.advance(Duration::from_secs(1));
    assert!(
        w.attempts.len() > dials,
        "dead-1 is dialled again on refreshes: {:?}",
        w.attempts
    );
    let health = w.client.cluster_health();
    assert_eq!(health.state, HealthState::Healthy, "{health:?}");
    assert!(
        health
            .brokers
            .iter()
            .any(|b| b.address.to_string() == "dead-1:9092" && b.last_cause.is_some()),
        "the dead address is listed with its failure: {health:?}"
    );
    // Before any metadata, the bootstrap addresses are what matters: a lone dead one is
    // degraded at once.
    let mut w = common::World::with(
        ClusterConfig::with_brokers(1),
        ClientConfig::new("dead-1:9092").unwrap(),
    );
    w.client.refresh_metadata(w.now);
    w.advance(Duration::from_millis(10));
    assert_eq!(w.client.cluster_health().state, HealthState::Degraded);
}
