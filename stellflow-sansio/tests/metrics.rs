//! The `metrics` feature: a capturing recorder reads every metric of DESIGN §6 (the nine of
//! the Java SDK, same names and kinds) and the per-topic, retry, buffer and lag figures after a
//! produce → consume → commit round trip against the simulated broker.
//!
//! Run with `cargo test -p stellflow-sansio --features metrics --test metrics`.
#![allow(clippy::unwrap_used)]

mod common;
mod consumer_support;

use bytes::Bytes;
use common::World;
use consumer_support::{Got, drain, subscribed_world_with};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use std::time::Duration;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::ProducerRecord;
use stellflow_sansio::{ConsumerEvent, Event, RequestOptions, Target, TopicPartition};

type Snapshot = Vec<(CompositeKey, DebugValue)>;

/// The value of `name` with exactly `labels`, or the sum of all label sets when `labels` is
/// `None` (counters only).
fn value(snap: &Snapshot, kind: MetricKind, name: &str, labels: Option<&[(&str, &str)]>) -> f64 {
    let mut sum = None;
    for (key, v) in snap {
        if key.kind() != kind || key.key().name() != name {
            continue;
        }
        if let Some(want) = labels {
            let have: Vec<(&str, &str)> =
                key.key().labels().map(|l| (l.key(), l.value())).collect();
            if have != want {
                continue;
            }
        }
        let x = match v {
            DebugValue::Counter(c) => *c as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(h) => h.len() as f64,
        };
        *sum.get_or_insert(0.0) += x;
    }
    sum.unwrap_or_else(|| panic!("{name} {labels:?} was never emitted"))
}

#[test]
fn every_metric_reads_what_the_round_trip_did() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (w, produced) = metrics::with_local_recorder(&recorder, || {
        let mut w = subscribed_world_with("metrics", |c| {
            c.consumer.enable_auto_commit = false;
            c.consumer.auto_offset_reset = stellflow_sansio::OffsetReset::Earliest;
        });
        let n = 10;
        for i in 0..n {
            let v = format!("value-{i}");
            let r = ProducerRecord::new("s", v.as_bytes()).with_partition(0);
            w.client.produce(w.now, &r).unwrap();
        }
        let ok = w.run_until(Duration::from_secs(10), |w| {
            w.events
                .iter()
                .filter(|e| matches!(e, Event::Produced { result: Ok(_), .. }))
                .count()
                == n
        });
        assert!(ok, "not produced: {:?}", w.events);
        let got: Got = drain(&mut w, Duration::from_secs(10), |g| {
            g.values().map(Vec::len).sum::<usize>() == n
        });
        assert_eq!(got.values().map(Vec::len).sum::<usize>(), n);
        w.client.commit(w.now).unwrap();
        let ok = w.run_until(Duration::from_secs(10), |w| {
            w.events.iter().any(|e| {
                matches!(
                    e,
                    Event::Consumer(ConsumerEvent::CommitCompleted { result: Ok(_), .. })
                )
            })
        });
        assert!(ok, "no commit: {:?}", w.events);
        // One request the broker fails as a whole: Metadata at a version it does not speak.
        let id = w.client.request(
            w.now,
            Target::Broker(1),
            ApiKey::METADATA,
            Some(999),
            Bytes::new(),
            &RequestOptions::default(),
        );
        let ok = w.run_until(Duration::from_secs(10), |w| {
            w.events
                .iter()
                .any(|e| matches!(e, Event::Response { id: i, .. } if *i == id))
        });
        assert!(ok, "no answer to the raw request");
        let answer = w.events.iter().find_map(|e| match e {
            Event::Response { id: i, result } if *i == id => Some(result.clone()),
            _ => None,
        });
        let answer = answer.unwrap().unwrap();
        assert_eq!(answer.header.error_code, ErrorCode::UNSUPPORTED_VERSION);
        assert!(answer.body.is_none());
        (w, n)
    });
    let snap: Snapshot = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(k, _, _, v)| (k, v))
        .collect();
    let c = w.client.counters();
    use MetricKind::{Counter, Gauge, Histogram};
    let produce = [("api", "Produce")];
    let metadata = [("api", "Metadata")];

    // The nine of the Java SDK.
    assert_eq!(
        value(&snap, Counter, "stellflow.client.requests", None),
        c.requests as f64
    );
    assert!(value(&snap, Counter, "stellflow.client.requests", Some(&produce)) >= 1.0);
    assert_eq!(
        value(&snap, Counter, "stellflow.client.request.errors", None),
        1.0,
        "exactly the Metadata v999 request failed"
    );
    assert_eq!(
        value(
            &snap,
            Counter,
            "stellflow.client.request.errors",
            Some(&metadata)
        ),
        1.0
    );
    assert_eq!(
        value(&snap, Histogram, "stellflow.client.request.duration", None),
        c.request_duration.count as f64,
        "one duration per answered request"
    );
    assert!(
        value(
            &snap,
            Histogram,
            "stellflow.client.request.duration",
            Some(&produce)
        ) >= 1.0
    );
    assert_eq!(
        value(&snap, Gauge, "stellflow.client.requests.inflight", None),
        c.requests_in_flight as f64
    );
    assert_eq!(
        value(&snap, Gauge, "stellflow.client.connections", None),
        1.0,
        "one broker, one connection"
    );
    assert_eq!(
        value(&snap, Counter, "stellflow.producer.records", None),
        produced as f64
    );
    assert_eq!(
        value(&snap, Counter, "stellflow.consumer.records", None),
        produced as f64
    );
    assert_eq!(
        value(&snap, Counter, "stellflow.consumer.offset.commits", None),
        c.offset_commits as f64
    );
    assert!(c.offset_commits >= 1);
    assert_eq!(
        value(&snap, Counter, "stellflow.consumer.group.operations", None),
        c.group_operations as f64
    );
    assert!(
        c.group_operations >= 3,
        "FindCoordinator, JoinGroup, SyncGroup"
    );

    // What a Kafka-client operator watches besides.
    let topic = [("topic", "s")];
    assert_eq!(
        value(
            &snap,
            Counter,
            "stellflow.producer.topic.records",
            Some(&topic)
        ),
        produced as f64
    );
    assert!(
        value(
            &snap,
            Counter,
            "stellflow.producer.topic.bytes",
            Some(&topic)
        ) >= 70.0
    );
    assert_eq!(
        value(
            &snap,
            Counter,
            "stellflow.consumer.topic.records",
            Some(&topic)
        ),
        produced as f64
    );
    assert_eq!(
        value(
            &snap,
            Counter,
            "stellflow.consumer.topic.bytes",
            Some(&topic)
        ),
        (0..produced)
            .map(|i| format!("value-{i}").len())
            .sum::<usize>() as f64
    );
    assert_eq!(
        value(&snap, Gauge, "stellflow.producer.buffer.bytes", None),
        0.0,
        "everything delivered"
    );
    let lag = |p: &str| {
        value(
            &snap,
            Gauge,
            "stellflow.consumer.lag",
            Some(&[("topic", "s"), ("partition", p)]),
        )
    };
    assert_eq!(lag("0"), 0.0, "consumed to the end");
    assert_eq!(lag("1"), 0.0);
    assert_eq!(
        w.client.lag(&TopicPartition::new("s", 0)),
        Some(0),
        "the gauge agrees with the client"
    );
}

/// `stellflow.consumer.offset.commits` counts the commits of consumed positions that
/// succeeded (one per commit, whatever it holds), not OffsetCommit requests: a group member
/// also keeps its membership in the coordinator's offset store with OffsetCommit requests,
/// which count in `stellflow.consumer.group.operations` (and every OffsetCommit request in
/// `stellflow.client.requests{api="OffsetCommit"}`).
#[test]
fn offset_commits_count_the_applications_commits_not_the_registry_writes() {
    let mut w = subscribed_world_with("meanings", |c| {
        c.consumer.enable_auto_commit = false;
        c.consumer.auto_offset_reset = stellflow_sansio::OffsetReset::Earliest;
    });
    let r = ProducerRecord::new("s", &b"v"[..]).with_partition(0);
    w.client.produce(w.now, &r).unwrap();
    let got: Got = drain(&mut w, Duration::from_secs(10), |g| {
        g.values().map(Vec::len).sum::<usize>() == 1
    });
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), 1);
    // A while as a member: the lease in the registry is renewed meanwhile.
    w.advance(Duration::from_secs(40));
    let committed = |w: &World| {
        w.events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Consumer(ConsumerEvent::CommitCompleted { result: Ok(_), .. })
                )
            })
            .count()
    };
    for n in 1..=3 {
        w.client.commit(w.now).unwrap();
        let ok = w.run_until(Duration::from_secs(10), |w| committed(w) == n);
        assert!(ok, "commit {n} did not complete: {:?}", w.events);
    }
    let c = w.client.counters();
    assert_eq!(c.offset_commits, 3, "one per commit of the application");
    let requests = |key| c.api(key).requests;
    let offset_commit_requests = requests(ApiKey::OFFSET_COMMIT);
    let registry_writes = offset_commit_requests - c.offset_commits;
    assert!(
        registry_writes >= 3,
        "the member's registry writes are OffsetCommit requests too: {offset_commit_requests}"
    );
    // Group operations: the coordinator handshake and the registry's writes and reads (the
    // reads share OffsetFetch with the consumer's reads of its committed offsets).
    let handshake = requests(ApiKey::FIND_COORDINATOR)
        + requests(ApiKey::JOIN_GROUP)
        + requests(ApiKey::SYNC_GROUP)
        + requests(ApiKey::HEARTBEAT);
    assert!(
        c.group_operations >= handshake + registry_writes,
        "{} < {handshake} + {registry_writes}",
        c.group_operations
    );
    assert!(c.group_operations <= handshake + registry_writes + requests(ApiKey::OFFSET_FETCH));
}
