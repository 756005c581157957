//! Readiness over many partitions: batches go out when their own linger passes (in that
//! order, never before), a flush sends every partition's batch at once, and a retry on one
//! partition among a thousand runs after its backoff without holding the others or
//! reordering its own records.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use common::producer::{flush, log_numbers, outcomes};
use std::time::{Duration, Instant};
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{ProducerConfig, ProducerRecord};
use stellflow_sim::{Fault, FaultRule};

const PARTITIONS: i32 = 1024;

fn world(linger: Duration) -> World {
    let mut p = ProducerConfig::default();
    p.linger = linger;
    let c = common::producer::client_config(1, p);
    common::producer::topic_world(1, ("many", PARTITIONS, 1), c)
}

/// Produces the number `value` to partition `p` of topic `many`.
fn produce_to(w: &mut World, p: i32, value: u32) {
    let bytes = value.to_be_bytes();
    let mut rec = ProducerRecord::new("many", &bytes);
    rec.partition = Some(p);
    w.client.produce(w.now, &rec).unwrap();
}

/// The numbers in partition `p`'s log, in log order.
fn numbers(w: &World, p: i32) -> Vec<u32> {
    (log_numbers(w, 1, "many", p).into_iter())
        .map(|(_, _, v)| v)
        .collect()
}

#[test]
fn each_batch_leaves_when_its_own_linger_passes_in_that_order() {
    let linger = Duration::from_millis(100);
    let mut w = world(linger);
    // One record every 10 ms, to partitions far apart in index and out of index order.
    let parts = [900, 3, 512, 1023, 0, 77, 640, 255];
    let mut produced: Vec<(i32, Instant)> = Vec::new();
    for (i, &p) in parts.iter().enumerate() {
        produce_to(&mut w, p, i as u32);
        produced.push((p, w.now));
        w.step();
        w.advance(Duration::from_millis(10));
    }
    // Step 1 ms at a time and note when each partition's record reaches the log.
    let mut arrived: Vec<(i32, Instant)> = Vec::new();
    let end = w.now + Duration::from_millis(300);
    while w.now < end && arrived.len() < parts.len() {
        w.advance(Duration::from_millis(1));
        for &(p, _) in &produced {
            if !arrived.iter().any(|(q, _)| *q == p) && !numbers(&w, p).is_empty() {
                arrived.push((p, w.now));
            }
        }
    }
    assert_eq!(
        arrived.len(),
        parts.len(),
        "every batch was sent: {arrived:?}"
    );
    let order: Vec<i32> = arrived.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        order, parts,
        "batches left in the order their lingers passed"
    );
    for ((p, at), (_, made)) in arrived.iter().zip(&produced) {
        let waited = *at - *made;
        assert!(
            waited >= linger && waited <= linger + Duration::from_millis(10),
            "partition {p}: in the log {waited:?} after it was produced (linger {linger:?})"
        );
    }
    assert!(
        outcomes(&mut w).values().all(Result::is_ok),
        "every record written"
    );
}

#[test]
fn a_flush_sends_the_open_batch_of_every_partition_at_once() {
    // A linger far longer than the test: only the flush can send these batches.
    let mut w = world(Duration::from_secs(600));
    for p in 0..PARTITIONS {
        produce_to(&mut w, p, p as u32);
        produce_to(&mut w, p, p as u32 + 10_000);
    }
    w.advance(Duration::from_millis(50));
    assert!(
        (0..PARTITIONS).all(|p| numbers(&w, p).is_empty()),
        "nothing is sent before its linger without a flush"
    );
    let start = w.now;
    flush(&mut w);
    assert!(
        w.now - start < Duration::from_secs(1),
        "the flush took {:?}",
        w.now - start
    );
    for p in 0..PARTITIONS {
        assert_eq!(
            numbers(&w, p),
            vec![p as u32, p as u32 + 10_000],
            "partition {p}"
        );
    }
    let out = outcomes(&mut w);
    assert_eq!(out.len(), 2 * PARTITIONS as usize);
    assert!(out.values().all(Result::is_ok));
}

#[test]
fn a_retry_on_one_partition_among_many_keeps_its_order_and_holds_no_other() {
    let mut w = world(Duration::from_millis(5));
    // The first Produce (partition 7's first record alone) fails with a retriable error.
    w.sim.inject_fault(FaultRule::next(
        ApiKey::PRODUCE,
        1,
        Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER),
    ));
    produce_to(&mut w, 7, 1);
    w.advance(Duration::from_millis(20));
    assert!(numbers(&w, 7).is_empty(), "the first attempt failed");
    assert!(w.sim.knobs().faults.is_empty(), "the fault was used");
    // Every other partition gets a record while partition 7 waits for its retry, and
    // partition 7 a second one behind its first.
    for p in 0..PARTITIONS {
        produce_to(&mut w, p, 1000 + p as u32);
    }
    flush(&mut w);
    assert_eq!(numbers(&w, 7), vec![1, 1007], "partition 7 kept its order");
    for p in (0..PARTITIONS).filter(|p| *p != 7) {
        assert_eq!(numbers(&w, p), vec![1000 + p as u32], "partition {p}");
    }
    let out = outcomes(&mut w);
    assert_eq!(out.len(), PARTITIONS as usize + 1);
    assert!(out.values().all(Result::is_ok), "every record written once");
}
