//! Helpers shared by the consumer test targets (`consumer`, `consumer_group`,
//! `consumer_commits`, `consumer_faults`): raw produce straight into the sim, blobs of every format, draining
//! records, exact-delivery checks. Needs `mod common;` next to it in the test crate.
#![allow(dead_code)]

use crate::common::{self, World};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::time::Duration;
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::{
    ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData, Request,
};
use stellflow_proto::record::{BatchBuilder, BatchParams, BlobFormat, Compression, Envelope};
use stellflow_proto::wire::Wire;
use stellflow_sansio::{
    Client, ClientConfig, ConsumerEvent, ConsumerRecord, Event, OffsetReset, TopicPartition,
};
use stellflow_sim::ClusterConfig;

/// Sends one raw request straight to a sim broker (not through the client) and decodes it.
pub fn raw_call<R: Request>(w: &mut World, broker: i32, req: &R) -> R::Response {
    let conn = w.sim.connect(broker, w.now).expect("broker up");
    let h = RequestHeader::new(R::API_KEY, 1, Some("test-producer"));
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &h, req);
    w.sim.handle_input(conn, w.now, &mut buf);
    let mut out = BytesMut::new();
    w.sim.take_replies(conn, &mut out);
    w.sim.disconnect(conn);
    let frame = FrameDecoder::new()
        .decode(&mut out)
        .expect("frame")
        .expect("an answer");
    let (_, body) = split_response(frame).expect("header");
    <R::Response as Wire>::from_bytes(body.expect("body")).expect("decodes")
}

/// The broker the sim makes leader of `partition` at topic creation.
pub fn leader(w: &World, _topic: &str, partition: i32) -> i32 {
    let ids = w.sim.broker_ids();
    ids[partition as usize % ids.len()]
}

/// Produces one raw blob to the creation-time leader; returns its offset.
pub fn produce(w: &mut World, topic: &str, partition: i32, blob: Bytes) -> i64 {
    let b = leader(w, topic, partition);
    produce_to(w, b, topic, partition, blob)
}

/// Produces one raw blob to `broker`; returns its offset.
pub fn produce_to(w: &mut World, broker: i32, topic: &str, partition: i32, blob: Bytes) -> i64 {
    let r: ProduceResponse = raw_call(
        w,
        broker,
        &ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![ProduceTopicData {
                topic: Some(topic.into()),
                partitions: vec![ProducePartitionData {
                    partition,
                    records: Some(blob),
                }],
            }],
        },
    );
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code.0, 0, "produce failed");
    p.base_offset
}

/// The blob formats the tests mix.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    V1,
    Srfb,
    SrfbGzip,
    MultiV1,
}

/// A blob of `values` in the given format; `MultiV1` splits them over up to three v1
/// batches back to back (one offset).
pub fn blob(kind: Kind, values: &[Vec<u8>]) -> Bytes {
    let build = |env: Envelope, vals: &[Vec<u8>]| {
        let mut b = BatchBuilder::with_capacity(BatchParams::default(), env, 1024);
        for (i, v) in vals.iter().enumerate() {
            let key = format!("k{i}");
            b.append(1_700_000_000_000 + i as i64, Some(key.as_bytes()), Some(v))
                .unwrap();
        }
        b.finish().unwrap()
    };
    match kind {
        Kind::V1 => build(Envelope::V1, values),
        Kind::Srfb => build(Envelope::Srfb(Compression::None), values),
        Kind::SrfbGzip => build(Envelope::Srfb(Compression::Gzip), values),
        Kind::MultiV1 => {
            let third = values.len().div_ceil(3).max(1);
            let mut all = BytesMut::new();
            for chunk in values.chunks(third) {
                all.extend_from_slice(&build(Envelope::V1, chunk));
            }
            all.freeze()
        }
    }
}

/// A client config for `bootstrap`, with `group` and the Earliest reset policy.
pub fn consumer_config(bootstrap: &str, group: Option<&str>) -> ClientConfig {
    let mut c = common::config(bootstrap);
    c.consumer.group_id = group.map(str::to_owned);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c
}

/// What each produced record should come back as: (offset, index) → value.
pub type Expected = BTreeMap<TopicPartition, Vec<((i64, u32), Vec<u8>)>>;

/// One produced blob's records, appended to `exp`.
pub fn produce_values(
    w: &mut World,
    broker: Option<i32>,
    tp: &TopicPartition,
    kind: Kind,
    values: Vec<Vec<u8>>,
    exp: &mut Expected,
) -> i64 {
    let b = broker.unwrap_or_else(|| leader(w, &tp.topic, tp.partition));
    let off = produce_to(w, b, &tp.topic, tp.partition, blob(kind, &values));
    let e = exp.entry(tp.clone()).or_default();
    for (j, v) in values.into_iter().enumerate() {
        e.push(((off, j as u32), v));
    }
    off
}

/// `n` values tagged with `tag`, each padded by `size` bytes.
pub fn values(tag: &str, n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|j| {
            let mut v = format!("{tag}/{j}/").into_bytes();
            v.resize(v.len() + size, b'x');
            v
        })
        .collect()
}

/// Produces `blobs` blobs per partition of varied size and format; returns the expectation.
pub fn fill(w: &mut World, topic: &str, partitions: i32, blobs: usize, size: usize) -> Expected {
    let kinds = [Kind::V1, Kind::Srfb, Kind::MultiV1, Kind::SrfbGzip];
    let mut exp = Expected::new();
    for p in 0..partitions {
        for i in 0..blobs {
            let n = 1 + (i * 7 + p as usize * 3) % 23;
            let vals = values(&format!("{topic}/{p}/{i}"), n, size);
            let kind = kinds[(i + p as usize) % kinds.len()];
            produce_values(
                w,
                None,
                &TopicPartition::new(topic, p),
                kind,
                vals,
                &mut exp,
            );
        }
    }
    exp
}

/// Records received per partition: ((offset, index), value, format).
pub type Got = BTreeMap<TopicPartition, Vec<((i64, u32), Vec<u8>, BlobFormat)>>;

/// Adds `r` to `got`.
pub fn keep(got: &mut Got, r: &ConsumerRecord) {
    got.entry(TopicPartition::new(&r.topic, r.partition))
        .or_default()
        .push((
            (r.offset, r.index),
            r.value.clone().unwrap().to_vec(),
            r.format,
        ));
}

/// Two brokers, `orders` with one partition on each holding 30 blobs of every format (1 to 23
/// records each); the client bootstrapped and assigned both partitions.
pub fn two_partitions_of_30_blobs() -> (World, Expected, Vec<TopicPartition>) {
    let mut w = World::with(
        ClusterConfig::with_brokers(2),
        consumer_config("broker-1:9092,broker-2:9092", None),
    );
    w.sim.create_topic("orders", 2, 1).unwrap();
    let exp = fill(&mut w, "orders", 2, 30, 20);
    w.bootstrap();
    let tps: Vec<_> = (0..2).map(|p| TopicPartition::new("orders", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    (w, exp, tps)
}

/// Takes every buffered record into `got`.
pub fn take_records(w: &mut World, got: &mut Got) -> usize {
    let mut n = 0;
    while let Some(r) = w.client.poll_record() {
        keep(got, &r);
        n += 1;
    }
    n
}

/// Polls records until `until` says stop or time runs out.
pub fn drain(w: &mut World, max: Duration, mut until: impl FnMut(&Got) -> bool) -> Got {
    let mut got = Got::new();
    w.run_until(max, |w| {
        while let Some(r) = w.client.poll_record() {
            keep(&mut got, &r);
            if until(&got) {
                return true;
            }
        }
        until(&got)
    });
    got
}

/// Records in `g`.
pub fn count(g: &Got) -> usize {
    g.values().map(Vec::len).sum()
}

/// Every expected record arrived once, in order, with its position and value.
pub fn assert_exact(exp: &Expected, got: &Got) {
    for (tp, e) in exp {
        let g: Vec<((i64, u32), Vec<u8>)> = got
            .get(tp)
            .map(|v| v.iter().map(|(p, v, _)| (*p, v.clone())).collect())
            .unwrap_or_default();
        assert_eq!(g.len(), e.len(), "{tp}: record count");
        for (a, b) in g.iter().zip(e) {
            assert_eq!(a.0, b.0, "{tp}: position");
            assert_eq!(a.1, b.1, "{tp}: value at {:?}", a.0);
        }
    }
    for tp in got.keys() {
        assert!(exp.contains_key(tp), "{tp}: unexpected records");
    }
}

/// Removes and returns the consumer events.
pub fn consumer_events(w: &mut World) -> Vec<ConsumerEvent> {
    w.take(|e| matches!(e, Event::Consumer(_)))
        .into_iter()
        .filter_map(|e| match e {
            Event::Consumer(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Replaces the client by a fresh one with `config` (same sim, same clock).
pub fn replace_client(w: &mut World, config: ClientConfig) {
    for (_, sc) in w.to_sim.drain() {
        w.sim.disconnect(sc);
    }
    w.to_client.clear();
    w.client = Client::new(config, w.now, 99).unwrap();
    w.events.clear();
    w.step();
}

/// A one-broker world with topic `s` (2 partitions) and a client subscribed to it in
/// `group` (session 10 s, heartbeat 3 s), run until it joined.
pub fn subscribed_world(group: &str) -> World {
    subscribed_world_with(group, |_| {})
}

/// Like [`subscribed_world`], with the client config adjusted by `tweak`.
pub fn subscribed_world_with(group: &str, tweak: impl FnOnce(&mut ClientConfig)) -> World {
    let mut cfg = consumer_config("broker-1:9092", Some(group));
    cfg.consumer.session_timeout = Duration::from_secs(10);
    cfg.consumer.heartbeat_interval = Duration::from_secs(3);
    tweak(&mut cfg);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("s", 2, 1).unwrap();
    w.bootstrap();
    w.client.subscribe(w.now, &["s"]).unwrap();
    let ok = w.run_until(Duration::from_secs(10), |w| {
        w.events
            .iter()
            .any(|e| matches!(e, Event::Consumer(ConsumerEvent::GroupJoined { .. })))
    });
    assert!(ok, "never joined: {:?}", w.events);
    w
}

/// Runs until a consumer event matching `f` is in `w.events` (not removed).
pub fn wait_for(w: &mut World, max: Duration, f: impl Fn(&ConsumerEvent) -> bool) -> bool {
    w.run_until(max, |w| {
        w.events
            .iter()
            .any(|e| matches!(e, Event::Consumer(c) if f(c)))
    })
}

/// Like [`World::advance`], but fails instead of hanging when the client keeps asking to be
/// woken at the current instant without anything happening (a busy loop in a real driver).
pub fn advance_checked(w: &mut World, d: Duration) {
    let end = w.now + d;
    let mut stuck = 0;
    while w.now < end {
        let before = w.now;
        w.tick(end - w.now);
        if w.now == before {
            stuck += 1;
            assert!(
                stuck < 1000,
                "the drain's timeout keeps returning {:?} (now) without progress",
                w.deadline.map(|t| t.saturating_duration_since(w.now))
            );
        } else {
            stuck = 0;
        }
    }
}
