//! Producer integration tests against the simulated cluster, in process with virtual time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use common::producer::{Outcomes, flush, leader, log_values, outcomes, produce_n};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use stellflow_proto::record::{blob_records, srfb::SrfbHeader};
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::Event;
use stellflow_sansio::{
    Acks, BatchFormat, DeliveryError, ProduceError, ProduceId, ProducerConfig, ProducerRecord,
};
use stellflow_sim::{ClusterConfig, Fault, FaultRule};

/// A world of `brokers` brokers with `topic` ready, its client producing with `p`.
fn world(brokers: usize, topic: &str, partitions: i32, rf: usize, p: ProducerConfig) -> World {
    let c = common::producer::client_config(brokers, p);
    common::producer::topic_world(brokers, (topic, partitions, rf), c)
}

fn cfg() -> ProducerConfig {
    ProducerConfig::default()
}

/// Checks that every record was delivered, that its reported position holds its value, and
/// that each partition's log holds each value exactly once, in produce order.
fn check_exact_in_order(
    w: &World,
    topic: &str,
    partitions: i32,
    out: &Outcomes,
    ids: &BTreeMap<ProduceId, u32>,
) {
    let mut logs = HashMap::new();
    for p in 0..partitions {
        logs.insert(p, log_values(w, leader(w, topic, p), topic, p));
    }
    let mut total = 0;
    for (p, log) in &logs {
        let values: Vec<u32> = log
            .iter()
            .map(|(_, _, v)| u32::from_be_bytes(v[..4].try_into().unwrap()))
            .collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]),
            "partition {p} out of order or duplicated: {values:?}"
        );
        total += values.len();
    }
    assert_eq!(total, ids.len(), "records in the logs");
    for (id, v) in ids {
        let md = out
            .get(id)
            .unwrap_or_else(|| panic!("no outcome for {id:?}"))
            .as_ref()
            .unwrap_or_else(|e| panic!("{id:?} failed: {e}"));
        let off = md.offset.unwrap();
        let log = &logs[&md.partition];
        let hit = log
            .iter()
            .find(|(o, i, _)| *o == off && *i == md.index)
            .expect("reported position exists");
        assert_eq!(hit.2, v.to_be_bytes().to_vec());
    }
}

#[test]
fn delivers_everything_in_order_with_positions() {
    let mut w = world(3, "orders", 6, 1, cfg());
    let ids = produce_n(&mut w, "orders", 0, 3000, 40);
    flush(&mut w);
    let out = outcomes(&mut w);
    check_exact_in_order(&w, "orders", 6, &out, &ids);
    let c = w.client.counters();
    assert_eq!(c.producer_records, 3000);
    // Big batches: far fewer blobs than records.
    assert!(c.producer_batches < 300, "{} batches", c.producer_batches);
}

#[test]
fn order_holds_under_errors_and_reordering() {
    let mut p = cfg();
    p.retry_backoff = Duration::from_millis(5);
    p.linger = Duration::from_millis(2);
    p.batch_size = 4 * 1024;
    let mut w = world(3, "o", 4, 1, p);
    w.sim.set_reordering(0.5, 0.5);
    w.sim.inject_fault(FaultRule::random(
        ApiKey::PRODUCE,
        0.25,
        Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER),
    ));
    w.sim.inject_fault(FaultRule::random(
        ApiKey::PRODUCE,
        0.05,
        Fault::CloseConnection,
    ));
    w.sim.inject_fault(FaultRule::random(
        ApiKey::PRODUCE,
        0.05,
        Fault::HeaderOnly(ErrorCode::THROTTLED),
    ));
    let ids = produce_n(&mut w, "o", 0, 4000, 13);
    flush(&mut w);
    let out = outcomes(&mut w);
    check_exact_in_order(&w, "o", 4, &out, &ids);
    assert!(w.client.counters().producer_retries > 0);
}

#[test]
fn keyed_records_land_where_the_java_sdk_puts_them() {
    let mut w = world(1, "seven", 7, 1, cfg());
    let keys: [&[u8]; 4] = [&[0x80], b"a", &[0xff, 0x01], &[0x80, 0x81, 0xfe, 0xff]];
    let expected = [1, 2, 0, 4]; // floorMod(Arrays.hashCode(key), 7), derived by hand
    let mut ids = Vec::new();
    for k in keys {
        ids.push(
            w.client
                .produce(w.now, &ProducerRecord::new("seven", b"v").with_key(k))
                .unwrap(),
        );
    }
    // An empty key is no key: it goes to the sticky partition, not hash("") = 1.
    flush(&mut w);
    let out = outcomes(&mut w);
    for (id, want) in ids.iter().zip(expected) {
        assert_eq!(out[id].as_ref().unwrap().partition, want);
    }
    let mut p = cfg();
    p.keyed = stellflow_sansio::KeyedPartitioner::Fnv1a;
    let mut w = world(1, "four", 4, 1, p);
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("four", b"v").with_key(&[0x80]))
        .unwrap();
    flush(&mut w);
    assert_eq!(outcomes(&mut w)[&id].as_ref().unwrap().partition, 3);
}

#[test]
fn sticky_keyless_records_share_one_batch() {
    let mut w = world(1, "s", 8, 1, cfg());
    let mut ids = Vec::new();
    for i in 0..100u32 {
        let v = i.to_be_bytes();
        let mut rec = ProducerRecord::new("s", &v);
        if i % 2 == 0 {
            rec = rec.with_key(b""); // empty key = no key
        }
        ids.push(w.client.produce(w.now, &rec).unwrap());
    }
    flush(&mut w);
    let out = outcomes(&mut w);
    let parts: std::collections::BTreeSet<i32> = ids
        .iter()
        .map(|id| out[id].as_ref().unwrap().partition)
        .collect();
    assert_eq!(
        parts.len(),
        1,
        "sticky: one partition until the batch closes"
    );
    let offsets: std::collections::BTreeSet<i64> = ids
        .iter()
        .map(|id| out[id].as_ref().unwrap().offset.unwrap())
        .collect();
    assert_eq!(offsets.len(), 1, "one blob");
}

#[test]
fn a_batch_never_waits_past_linger() {
    let mut p = cfg();
    p.linger = Duration::from_millis(20);
    let mut w = world(1, "l", 1, 1, p);
    let t0 = w.now;
    let id = w
        .client
        .produce(t0, &ProducerRecord::new("l", b"x"))
        .unwrap();
    w.step();
    let deadline = w.deadline.unwrap();
    assert!(
        deadline <= t0 + Duration::from_millis(20),
        "the drain's timeout past linger"
    );
    // Just before linger: nothing sent.
    w.advance(Duration::from_millis(19));
    assert!(log_values(&w, 1, "l", 0).is_empty());
    assert!(outcomes(&mut w).is_empty());
    // At linger: sent and acknowledged without any other input.
    w.advance(Duration::from_millis(1));
    assert_eq!(log_values(&w, 1, "l", 0).len(), 1);
    let out = outcomes(&mut w);
    assert_eq!(out[&id].as_ref().unwrap().offset, Some(0));
    // A full batch goes at once, without waiting for linger.
    let big = vec![7u8; 600 * 1024];
    w.client
        .produce(w.now, &ProducerRecord::new("l", &big))
        .unwrap();
    w.client
        .produce(w.now, &ProducerRecord::new("l", &big))
        .unwrap();
    w.step();
    // Each big record fills a batch: both went out (one after the other, one request in
    // flight per partition) without any time passing.
    assert_eq!(
        log_values(&w, 1, "l", 0).len(),
        3,
        "full batches go out at once"
    );
}

/// A record refused for want of buffer space makes every open batch ready at once, whatever
/// its linger (Kafka's rule while a sender waits for memory): partial batches of four
/// partitions that hold the whole buffer go out at the next pass instead of keeping the
/// caller waiting for 30 s, and the refused record fits once they are answered.
#[test]
fn a_full_buffer_sends_open_batches_without_waiting_for_linger() {
    let mut p = cfg();
    p.batch_size = 64 * 1024;
    p.buffer_memory = 64 * 1024;
    p.linger = Duration::from_secs(30);
    let mut w = world(1, "x", 4, 1, p);
    let value = vec![1u8; 1000];
    let record = |i: i32| ProducerRecord::new("x", &value).with_partition(i % 4);
    let logs = |w: &World| {
        (0..4)
            .map(|p| log_values(w, 1, "x", p).len())
            .collect::<Vec<_>>()
    };
    let mut ids = Vec::new();
    let mut i = 0;
    let refused = loop {
        if i == 40 {
            // Well below the bound: the partial batches linger.
            w.step();
            assert_eq!(logs(&w), [0, 0, 0, 0], "nothing sent before linger");
        }
        match w.client.produce(w.now, &record(i)) {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
        i += 1;
    };
    assert!(
        matches!(refused, ProduceError::BufferFull { .. }),
        "{refused:?}"
    );
    assert!(ids.len() > 40, "{} records took the buffer", ids.len());
    w.step();
    assert!(
        logs(&w).iter().all(|&n| n > 0),
        "every partition's open batch went out at once: {:?}",
        logs(&w)
    );
    assert!(w.run_until(Duration::from_secs(1), |w| {
        w.events
            .iter()
            .filter(|e| matches!(e, Event::Produced { .. }))
            .count()
            == ids.len()
    }));
    let out = outcomes(&mut w);
    assert!(ids.iter().all(|id| out[id].is_ok()));
    w.client.produce(w.now, &record(i)).expect("room again");
}

#[test]
fn buffer_bound_refuses_at_once_and_recovers() {
    let mut p = cfg();
    p.batch_size = 16 * 1024;
    p.buffer_memory = 64 * 1024;
    let mut w = world(1, "b", 1, 1, p);
    let v = [1u8; 1000];
    let mut accepted = 0;
    let err = loop {
        match w.client.produce(w.now, &ProducerRecord::new("b", &v)) {
            Ok(_) => accepted += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, ProduceError::BufferFull { limit: 65_536, .. }),
        "{err}"
    );
    assert!(accepted > 50 && accepted < 66, "{accepted}");
    assert!(w.client.producer_buffered_bytes() <= 64 * 1024);
    flush(&mut w);
    assert_eq!(outcomes(&mut w).len(), accepted);
    assert_eq!(w.client.producer_buffered_bytes(), 0);
    assert!(
        w.client
            .produce(w.now, &ProducerRecord::new("b", &v))
            .is_ok()
    );
    let too_big = vec![0u8; 17 * 1024 * 1024];
    assert!(matches!(
        w.client.produce(w.now, &ProducerRecord::new("b", &too_big)),
        Err(ProduceError::RecordTooLarge { .. })
    ));
    assert!(matches!(
        w.client.produce(w.now, &ProducerRecord::new("../b", &v)),
        Err(ProduceError::InvalidTopic(_))
    ));
    assert!(matches!(
        w.client
            .produce(w.now, &ProducerRecord::new("b", &v).with_partition(1)),
        Err(ProduceError::InvalidPartition { count: 1, .. })
    ));
}

#[test]
fn acks_zero_completes_without_offset_and_reads_the_answer() {
    let mut p = cfg();
    p.acks = Acks::None;
    p.linger = Duration::ZERO;
    let mut w = world(1, "z", 1, 1, p);
    // Responses are delayed: outcomes must not wait for them.
    w.sim.add_delay(stellflow_sim::DelayRule {
        broker: None,
        api_key: Some(ApiKey::PRODUCE),
        delay: Duration::from_millis(500),
    });
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("z", b"fire"))
        .unwrap();
    w.step();
    let out = outcomes(&mut w);
    let md = out[&id].as_ref().unwrap();
    assert_eq!(md.offset, None);
    w.advance(Duration::from_secs(1));
    assert_eq!(log_values(&w, 1, "z", 0).len(), 1);
    assert_eq!(w.client.counters().unknown_correlation_ids, 0);
    assert_eq!(
        w.client.producer_buffered_bytes(),
        0,
        "the answer was read and the batch freed"
    );
}

#[test]
fn error_7_is_reported_with_its_offset_and_not_retried() {
    let mut p = cfg();
    p.ack_timeout = Duration::from_millis(100);
    let mut w = world(2, "r", 1, 2, p);
    let follower = 3 - leader(&w, "r", 0);
    w.sim.pause_replication(follower, true).unwrap();
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("r", b"x"))
        .unwrap();
    let id2 = w
        .client
        .produce(w.now, &ProducerRecord::new("r", b"y"))
        .unwrap();
    flush(&mut w);
    let out = outcomes(&mut w);
    let e = out[&id].as_ref().unwrap_err();
    assert_eq!(
        *e,
        DeliveryError::NotReplicated {
            offset: 0,
            index: 0
        }
    );
    assert_eq!(e.written_offset(), Some(0));
    assert_eq!(out[&id2].as_ref().unwrap_err().written_offset(), Some(0));
    let log = log_values(&w, leader(&w, "r", 0), "r", 0);
    assert_eq!(log.len(), 2, "written once, never retried: {log:?}");
}

#[test]
fn idempotent_retries_are_deduplicated() {
    let mut p = cfg();
    p.idempotence = true;
    p.retry_backoff = Duration::from_millis(10);
    let mut c = common::config("broker-1:9092");
    c.request_timeout = Duration::from_millis(500);
    c.producer = p;
    c.header.client_id = Some("idem-1".into());
    let mut w = World::with(ClusterConfig::with_brokers(1), c);
    w.sim.create_topic("i", 2, 1).unwrap();
    w.bootstrap();
    // The broker executes the next three Produce requests but their answers are lost: the
    // client times out and resends the same bytes; the broker recognises the duplicates.
    w.sim
        .inject_fault(FaultRule::next(ApiKey::PRODUCE, 3, Fault::DropResponse));
    let ids = produce_n(&mut w, "i", 0, 500, 7);
    flush(&mut w);
    let out = outcomes(&mut w);
    check_exact_in_order(&w, "i", 2, &out, &ids);
    assert!(w.client.counters().producer_retries >= 1);
    for p in 0..2 {
        let log = w.sim.broker(1).unwrap().log("i", p).unwrap();
        for e in log.entries_from(0) {
            let h = SrfbHeader::parse(&e.blob).unwrap();
            assert!(
                h.producer_id >= 0 && h.base_sequence >= 0,
                "idempotent SRFB blobs"
            );
        }
    }
}

#[test]
fn idempotent_producer_recovers_after_broker_restart_without_duplicates() {
    let mut p = cfg();
    p.idempotence = true;
    p.format = BatchFormat::Native(stellflow_proto::record::Compression::Gzip);
    p.retry_backoff = Duration::from_millis(10);
    let mut c = common::config("broker-1:9092");
    c.producer = p;
    c.header.client_id = Some("idem-2".into());
    let mut w = World::with(ClusterConfig::with_brokers(1), c);
    w.sim.create_topic("r", 1, 1).unwrap();
    w.bootstrap();
    let mut ids = produce_n(&mut w, "r", 0, 200, 1);
    flush(&mut w);
    // The broker restarts: it forgets producer state (and leadership until re-asserted).
    w.sim.restart(1, w.now).unwrap();
    w.sim.reassert_leadership(1).unwrap();
    w.step();
    for i in 200..400u32 {
        let v = i.to_be_bytes();
        let id = w
            .client
            .produce(w.now, &ProducerRecord::new("r", &v).with_key(b"k0"))
            .unwrap();
        ids.insert(id, i);
    }
    flush(&mut w);
    let out = outcomes(&mut w);
    check_exact_in_order(&w, "r", 1, &out, &ids);
    assert!(
        w.client.counters().producer_epoch_bumps >= 1,
        "recovered by bumping the epoch"
    );
}

#[test]
fn leader_move_mid_stream() {
    let mut p = cfg();
    p.linger = Duration::from_millis(1);
    p.batch_size = 2048;
    p.retry_backoff = Duration::from_millis(5);
    let mut w = world(2, "m", 2, 2, p);
    let mut ids = produce_n(&mut w, "m", 0, 500, 5);
    let old = leader(&w, "m", 0);
    w.sim.move_leader("m", 0, 3 - old).unwrap();
    w.sim.move_leader("m", 1, 3 - leader(&w, "m", 1)).unwrap();
    let more = produce_n(&mut w, "m", 0, 500, 5);
    ids.extend(more.into_iter().map(|(id, v)| (id, v + 500)));
    flush(&mut w);
    let out = outcomes(&mut w);
    assert!(out.values().all(Result::is_ok));
    assert_ne!(leader(&w, "m", 0), old, "the client followed the move");
    // Offsets per partition increase with produce order.
    let mut last: HashMap<i32, (i64, u32)> = HashMap::new();
    for id in ids.keys() {
        let md = out[id].as_ref().unwrap();
        let pos = (md.offset.unwrap(), md.index);
        if let Some(prev) = last.insert(md.partition, pos) {
            assert!(prev < pos, "reordered: {prev:?} then {pos:?}");
        }
    }
}

#[test]
fn unknown_topic_fails_after_the_delivery_timeout() {
    let mut p = cfg();
    p.delivery_timeout = Duration::from_secs(2);
    let mut w = world(1, "known", 1, 1, p);
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("nowhere", b"x"))
        .unwrap();
    w.advance(Duration::from_secs(3));
    let out = outcomes(&mut w);
    assert!(
        matches!(out[&id], Err(DeliveryError::UnknownTopic { .. })),
        "{:?}",
        out[&id]
    );
}

#[test]
fn topic_created_after_the_first_record_is_produced_to() {
    let mut w = world(1, "known", 1, 1, cfg());
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("later", b"x"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    w.sim.create_topic("later", 3, 1).unwrap();
    w.client.refresh_metadata(w.now);
    flush(&mut w);
    let out = outcomes(&mut w);
    assert_eq!(out[&id].as_ref().unwrap().offset, Some(0));
}

#[test]
fn close_producer_flushes_then_fails_the_rest_at_the_deadline() {
    let mut w = world(1, "c", 1, 1, cfg());
    let a = w
        .client
        .produce(w.now, &ProducerRecord::new("c", b"a"))
        .unwrap();
    w.client.close_producer(w.now, Duration::from_secs(1));
    assert!(matches!(
        w.client.produce(w.now, &ProducerRecord::new("c", b"b")),
        Err(ProduceError::Closed)
    ));
    w.step();
    let closed = w.take(|e| matches!(e, Event::ProducerClosed { .. }));
    assert_eq!(closed, vec![Event::ProducerClosed { failed: 0 }]);
    assert!(outcomes(&mut w)[&a].is_ok());

    // Unreachable leader: the deadline fails what is left.
    let mut w = world(1, "c", 1, 1, cfg());
    w.sim.crash(1, w.now).unwrap();
    w.step();
    let b = w
        .client
        .produce(w.now, &ProducerRecord::new("c", b"b"))
        .unwrap();
    w.client.close_producer(w.now, Duration::from_secs(1));
    w.advance(Duration::from_secs(2));
    assert_eq!(outcomes(&mut w)[&b], Err(DeliveryError::Closed));
    let closed = w.take(|e| matches!(e, Event::ProducerClosed { .. }));
    assert_eq!(closed, vec![Event::ProducerClosed { failed: 1 }]);
}

/// Regression: `Client::close` failed the records it abandoned in hash-map order, so a
/// partition's later records could be reported before its earlier ones (in flight, queued,
/// open batch). Outcomes now keep produce order per partition.
#[test]
fn close_fails_abandoned_records_in_produce_order() {
    let mut p = cfg();
    p.batch_size = 256;
    p.max_in_flight_per_partition = 1;
    p.linger = Duration::from_millis(1);
    let mut w = world(1, "q", 2, 1, p);
    // Produce answers are lost, so the first batch of each partition stays in flight and the
    // rest queue behind it.
    w.sim
        .inject_fault(FaultRule::random(ApiKey::PRODUCE, 1.0, Fault::DropResponse));
    let mut by_partition: HashMap<ProduceId, i32> = HashMap::new();
    for i in 0..60u32 {
        let partition = (i % 2) as i32;
        let value = [i as u8; 40];
        let rec = ProducerRecord::new("q", &value).with_partition(partition);
        by_partition.insert(w.client.produce(w.now, &rec).unwrap(), partition);
        if i % 10 == 9 {
            w.tick(Duration::from_millis(2));
        }
    }
    w.client.close(w.now);
    w.step();
    let mut last: HashMap<i32, ProduceId> = HashMap::new();
    let mut seen_closed = std::collections::HashSet::new();
    let mut failed = 0;
    let mut maybe_written = 0;
    for e in w.take(|e| matches!(e, Event::Produced { .. })) {
        let Event::Produced { id, result } = e else {
            unreachable!()
        };
        // Queued records were never sent: Closed. The batch in flight was written and never
        // answered: its outcome is unknown (DESIGN §3 item 14).
        match &result {
            Err(DeliveryError::Closed) => {}
            Err(DeliveryError::MaybeWritten { last }) if **last == DeliveryError::Closed => {
                maybe_written += 1;
            }
            other => panic!("{id:?}: {other:?}"),
        }
        let partition = by_partition[&id];
        // The first batch of each partition was sent and never answered: its records may have
        // been written. Everything queued behind it was never sent: plainly closed. So per
        // partition the outcomes are "may have been written" first, then "closed", never back.
        let maybe = matches!(&result, Err(DeliveryError::MaybeWritten { last }) if **last == DeliveryError::Closed);
        let expected = if maybe {
            !seen_closed.contains(&partition)
        } else {
            result == Err(DeliveryError::Closed)
        };
        if !maybe {
            seen_closed.insert(partition);
        }
        assert!(
            expected,
            "partition {partition}: {id:?} failed with {result:?}"
        );
        if let Some(prev) = last.insert(partition, id) {
            assert!(
                prev < id,
                "partition {partition}: {id:?} reported after {prev:?}"
            );
        }
        failed += 1;
    }
    assert_eq!(failed, 60, "every record gets exactly one outcome");
    assert!(
        maybe_written > 0 && maybe_written < 60,
        "the batches in flight, and only they, may have been written: {maybe_written}"
    );
}

#[derive(Debug)]
struct LastByte;

impl stellflow_sansio::Partitioner for LastByte {
    fn partition(&mut self, _topic: &str, key: Option<&[u8]>, partitions: i32) -> i32 {
        key.and_then(|k| k.last()).map_or(0, |b| i32::from(*b)) % partitions
    }
}

#[test]
fn round_robin_custom_partitioner_and_native_format() {
    let mut p = cfg();
    p.keyless = stellflow_sansio::KeylessPartitioner::RoundRobin;
    p.format = BatchFormat::Native(stellflow_proto::record::Compression::None);
    let mut w = world(1, "rr", 3, 1, p);
    let ids: Vec<ProduceId> = (0..6)
        .map(|_| {
            w.client
                .produce(w.now, &ProducerRecord::new("rr", b"v"))
                .unwrap()
        })
        .collect();
    flush(&mut w);
    let out = outcomes(&mut w);
    let parts: Vec<i32> = ids
        .iter()
        .map(|id| out[id].as_ref().unwrap().partition)
        .collect();
    assert_eq!(parts, vec![0, 1, 2, 0, 1, 2]);
    let blob = &w
        .sim
        .broker(1)
        .unwrap()
        .log("rr", 0)
        .unwrap()
        .entry(0)
        .unwrap()
        .blob;
    let h = SrfbHeader::parse(blob).unwrap();
    assert_eq!(
        (h.producer_id, h.base_sequence, h.record_count),
        (-1, -1, 2)
    );

    w.client.set_partitioner(Box::new(LastByte));
    let id = w
        .client
        .produce(w.now, &ProducerRecord::new("rr", b"v").with_key(b"x\x05"))
        .unwrap();
    flush(&mut w);
    assert_eq!(outcomes(&mut w)[&id].as_ref().unwrap().partition, 2);
}

/// Regression: `Client::close` emitted no `ProducerClosed` when the producer was never used,
/// so adapters had to track use themselves. Exactly one comes now, used or not, and none
/// twice after `close_producer` already finished.
#[test]
fn client_close_says_producer_closed_exactly_once_used_or_not() {
    let mut w = world(1, "c", 1, 1, cfg());
    let now = w.now;
    w.client.close(now);
    w.step();
    let closed = w.take(|e| matches!(e, Event::ProducerClosed { .. }));
    assert_eq!(closed, vec![Event::ProducerClosed { failed: 0 }]);
    let now = w.now;
    w.client.close(now);
    w.step();
    assert!(
        w.take(|e| matches!(e, Event::ProducerClosed { .. }))
            .is_empty()
    );

    let mut w = world(1, "c", 1, 1, cfg());
    w.client.close_producer(w.now, Duration::from_secs(1));
    w.step();
    let closed = w.take(|e| matches!(e, Event::ProducerClosed { .. }));
    assert_eq!(closed, vec![Event::ProducerClosed { failed: 0 }]);
    let now = w.now;
    w.client.close(now);
    w.step();
    assert!(
        w.take(|e| matches!(e, Event::ProducerClosed { .. }))
            .is_empty()
    );
}

/// Records without a timestamp of their own take the wall clock anchored by
/// `set_wall_clock`; records produced at one `now` share one computed time, and re-anchoring
/// the clock at that same `now` applies to the next record at once.
#[test]
fn records_take_the_wall_clock_anchored_last_even_at_the_same_now() {
    let mut w = world(1, "stamps", 1, 1, cfg());
    let now = w.now;
    w.client.set_wall_clock(now, 1_000_000);
    for v in [b"a", b"b"] {
        w.client
            .produce(now, &ProducerRecord::new("stamps", v))
            .unwrap();
    }
    w.client.set_wall_clock(now, 5_000_000);
    w.client
        .produce(now, &ProducerRecord::new("stamps", b"c"))
        .unwrap();
    flush(&mut w);
    let mut stamps = Vec::new();
    let log = w.sim.broker(1).and_then(|b| b.log("stamps", 0)).unwrap();
    for e in log.entries_from(0) {
        for r in blob_records(e.blob.clone()) {
            let r = r.unwrap();
            stamps.push((r.record.value.unwrap().to_vec(), r.record.timestamp));
        }
    }
    assert_eq!(
        stamps,
        [
            (b"a".to_vec(), 1_000_000),
            (b"b".to_vec(), 1_000_000),
            (b"c".to_vec(), 5_000_000)
        ]
    );
}
