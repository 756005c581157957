//! Errors that name their cause: nothing listening is "unreachable" with the
//! address (not an unknown topic), a leaderless partition says why, a request timeout says
//! the outcome is unknown, a connection closed mid-frame gives the bytes received and
//! declared, and a bad consumer configuration is refused when the client is built.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::BytesMut;
use common::World;
use std::time::Duration;
use stellflow_proto::ApiKey;
use stellflow_proto::messages::{HealthCheckRequest, RequestBody};
use stellflow_sansio::{
    Client, ClientConfig, ConfigError, DisconnectReason, Event, LeaderlessReason, RequestError,
    RequestOptions, Target,
};
use stellflow_sansio::{DeliveryError, ProducerRecord};
use stellflow_sim::{ClusterConfig, Fault, FaultRule};

/// The outcome of the one record produced, waiting up to `max`.
fn outcome(w: &mut World, max: Duration) -> DeliveryError {
    let ok = w.run_until(max, |w| {
        w.events.iter().any(|e| matches!(e, Event::Produced { .. }))
    });
    assert!(ok, "no outcome within {max:?}: {:?}", w.events);
    w.events
        .iter()
        .find_map(|e| match e {
            Event::Produced { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap()
        .expect_err("the record must fail")
}

fn config(bootstrap: &str, tweak: impl FnOnce(&mut ClientConfig)) -> ClientConfig {
    let mut c = common::config(bootstrap);
    c.producer.delivery_timeout = Duration::from_secs(5);
    tweak(&mut c);
    c
}

#[test]
fn nothing_listening_is_unreachable_with_the_address_not_an_unknown_topic() {
    // The sim knows no broker at this address: every connect fails.
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        config("nowhere:9092", |_| {}),
    );
    w.client
        .produce(w.now, &ProducerRecord::new("t", b"v"))
        .unwrap();
    let e = outcome(&mut w, Duration::from_secs(10));
    let text = e.to_string();
    match &e {
        DeliveryError::Request(RequestError::Unreachable { address, cause, .. }) => {
            assert_eq!(address.to_string(), "nowhere:9092");
            assert!(cause.contains("connect failed"), "{cause}");
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
    assert!(
        text.contains("unreachable") && text.contains("nowhere:9092"),
        "{text}"
    );
    assert!(!text.contains("unknown"), "{text}");
    assert!(e.is_retriable(), "the broker may come up");
    assert!(!e.outcome_unknown(), "nothing was sent");
}

#[test]
fn a_leaderless_partition_fails_with_the_reason() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        config("broker-1:9092", |_| {}),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    w.bootstrap();
    // Restarted on its data: leader 0 until leadership is re-asserted.
    w.sim.restart(1, w.now).unwrap();
    w.client.refresh_metadata(w.now);
    w.run_until(Duration::from_secs(5), |w| {
        w.client
            .metadata()
            .partition("t", 0)
            .is_some_and(|p| p.leaderless.is_some())
    });
    w.client
        .produce(w.now, &ProducerRecord::new("t", b"v"))
        .unwrap();
    let e = outcome(&mut w, Duration::from_secs(10));
    let DeliveryError::Timeout {
        last: Some(last), ..
    } = &e
    else {
        panic!("expected a timeout with a cause, got {e:?}");
    };
    assert!(
        matches!(
            &**last,
            DeliveryError::Leaderless {
                partition: 0,
                reason: LeaderlessReason::RecoveredAfterRestart { .. },
                ..
            }
        ),
        "{last:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("t-0 has no leader") && text.contains("restarted on its data"),
        "{text}"
    );
    assert!(e.is_retriable());
}

#[test]
fn a_request_timeout_says_the_outcome_is_unknown() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        config("broker-1:9092", |c| {
            c.producer.retries = 0;
            c.producer.delivery_timeout = Duration::from_secs(60);
        }),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    w.bootstrap();
    // Written, but the answer never comes.
    w.sim
        .inject_fault(FaultRule::next(ApiKey::PRODUCE, 1, Fault::DropResponse));
    w.client
        .produce(w.now, &ProducerRecord::new("t", b"v"))
        .unwrap();
    let e = outcome(&mut w, Duration::from_secs(60));
    assert!(e.outcome_unknown(), "{e:?}");
    assert!(e.to_string().contains("outcome unknown"), "{e}");
    let timeout = RequestError::Timeout {
        api_key: ApiKey::PRODUCE,
        after: Duration::from_secs(5),
    };
    assert!(timeout.is_retriable() && timeout.outcome_unknown());
}

#[test]
fn a_connection_closed_mid_frame_says_how_far_the_frame_came() {
    let mut w = World::new(1, "broker-1:9092");
    w.bootstrap();
    let mut body = BytesMut::new();
    RequestBody::HealthCheck(HealthCheckRequest::default()).encode(&mut body);
    let id = w.client.request(
        w.now,
        Target::Broker(1),
        ApiKey::HEALTH_CHECK,
        None,
        body.freeze(),
        &RequestOptions::default(),
    );
    // Move the request by hand and deliver only part of the answer.
    let mut out = BytesMut::new();
    let conn = common::next_transmit(&mut w.client, w.now, &mut out);
    let sc = w.to_sim[&conn];
    w.sim.handle_input(sc, w.now, &mut out);
    let (_, frame) = w.sim.poll_transmit().expect("an answer");
    let declared = frame.len();
    let mut part = BytesMut::from(&frame[..declared / 2]);
    w.client.handle_input(conn, w.now, &mut part);
    w.client
        .handle_disconnected(conn, w.now, DisconnectReason::PeerClosed);
    w.step();
    let err = w
        .events
        .iter()
        .find_map(|e| match e {
            Event::Response { id: i, result } if *i == id => Some(result.clone()),
            _ => None,
        })
        .expect("an outcome")
        .expect_err("must fail");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "{} of the {declared} bytes it declared received",
            declared / 2
        )),
        "{text}"
    );
    assert!(err.outcome_unknown() && err.is_retriable());
}

#[test]
fn bad_consumer_config_is_refused_when_the_client_is_built() {
    let mut c = ClientConfig::new("broker-1:9092").unwrap();
    c.consumer.session_timeout = Duration::from_secs(10);
    c.consumer.heartbeat_interval = Duration::from_secs(10);
    let e = Client::new(c, std::time::Instant::now(), 1).unwrap_err();
    assert!(
        matches!(
            e,
            ConfigError::Invalid {
                field: "consumer.heartbeat_interval",
                ..
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("consumer.heartbeat_interval") && text.contains("session_timeout"),
        "{text}"
    );
    assert!(!e.is_retriable());
}

#[test]
fn admin_commands_against_nothing_listening_say_unreachable() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        config("nowhere:9092", |_| {}),
    );
    let describe = w.client.describe_topics(w.now, &["t"]).unwrap();
    let offsets = w
        .client
        .list_offsets(w.now, &[("t", 0, stellflow_sansio::OffsetSpec::Latest)])
        .unwrap();
    let cluster = w.client.describe_cluster(w.now, Target::Any).unwrap();
    let errors = [
        w.admin(describe).expect_err("nothing listens"),
        w.admin(offsets).expect_err("nothing listens"),
        w.admin(cluster).expect_err("nothing listens"),
    ];
    for e in errors {
        let text = e.to_string();
        assert!(
            text.contains("unreachable") && text.contains("nowhere:9092"),
            "{text}"
        );
        assert!(e.is_retriable(), "{e:?}");
    }
}

#[test]
fn a_record_over_the_request_size_names_the_setting_and_its_value() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        config("broker-1:9092", |_| {}),
    );
    let value = vec![0u8; 17 * 1024 * 1024];
    let e = w
        .client
        .produce(w.now, &ProducerRecord::new("t", &value))
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("refused"), "{text}");
    assert!(
        text.contains("producer.max_request_size is 16777216 bytes"),
        "{text}"
    );
    assert!(
        text.contains("bytes of request and batch headers"),
        "{text}"
    );
    let mut small = config("broker-1:9092", |c| {
        c.producer.max_request_size = 8 * 1024 * 1024;
        c.producer.buffer_memory = 2 * 1024 * 1024;
        c.producer.batch_size = 1024 * 1024;
    });
    small.producer.linger = Duration::from_millis(1);
    let mut w = World::with(ClusterConfig::with_brokers(1), small);
    let value = vec![0u8; 3 * 1024 * 1024];
    let text = w
        .client
        .produce(w.now, &ProducerRecord::new("t", &value))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("producer.buffer_memory is 2097152 bytes,"),
        "{text}"
    );
}

#[test]
fn a_commit_while_no_broker_answers_says_unreachable() {
    let mut cfg = config("nowhere:9092", |_| {});
    cfg.consumer.group_id = Some("g".into());
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.client
        .assign(w.now, &[stellflow_sansio::TopicPartition::new("t", 0)])
        .unwrap();
    let positions = vec![(
        stellflow_sansio::TopicPartition::new("t", 0),
        stellflow_sansio::Position::new(3, 0),
    )];
    let id = w.client.commit_positions(w.now, positions).unwrap();
    let done = w.run_until(Duration::from_secs(60), |w| {
        w.events.iter().any(|e| {
            matches!(e, Event::Consumer(stellflow_sansio::ConsumerEvent::CommitCompleted { id: i, .. }) if *i == id)
        })
    });
    assert!(done, "{:?}", w.events);
    let result = w.events.iter().find_map(|e| match e {
        Event::Consumer(stellflow_sansio::ConsumerEvent::CommitCompleted { result, .. }) => {
            Some(result.clone())
        }
        _ => None,
    });
    let text = result.unwrap().unwrap_err().to_string();
    assert!(
        text.contains("unreachable") && text.contains("nowhere:9092"),
        "{text}"
    );
    assert!(!text.contains("timed out"), "{text}");
    assert!(!text.contains("may have executed"), "{text}");
}
