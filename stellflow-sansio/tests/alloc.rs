//! Heap allocations inside the core: per request/response round trip, and per record taken
//! through leases.
//!
//! The counting global allocator (`alloc-counter`) counts per thread. Only the client's own
//! calls are counted (the simulated broker's work and the driver's buffers are not).
//!
//! Run with `cargo test -p stellflow-sansio --test alloc -- --nocapture` to see the figures.
#![allow(clippy::unwrap_used)]

mod common;
mod consumer_support;

use alloc_counter::counted;
use bytes::{Bytes, BytesMut};
use common::{World, next_transmit};
use consumer_support::{Kind, blob, consumer_config, produce, values};
use std::time::Duration;
use stellflow_proto::ApiKey;
use stellflow_proto::messages::{HealthCheckRequest, RequestBody};
use stellflow_sansio::DriverExt;
use stellflow_sansio::{Event, Output, Position, RequestOptions, SeekTo, Target, TopicPartition};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// One round trip; returns the allocations made inside the client.
fn round_trip(w: &mut World, out: &mut BytesMut, body: &Bytes, raw: bool) -> usize {
    let mut n = 0;
    let now = w.now;
    let opts = RequestOptions::default();
    let client = &mut w.client;
    counted(&mut n, || {
        if raw {
            client.request(
                now,
                Target::Broker(1),
                ApiKey::HEALTH_CHECK,
                None,
                body.clone(),
                &opts,
            );
        } else {
            client.health_check(now, Target::Broker(1)).unwrap();
        }
    });
    out.clear();
    let conn = counted(&mut n, || next_transmit(&mut w.client, now, out));
    let end = counted(&mut n, || w.client.poll_output(now, out));
    assert!(matches!(end, Output::Timeout(_)), "{end:?}");
    let sc = w.to_sim[&conn];
    w.sim.handle_input(sc, now, out);
    let (_, frame) = w.sim.poll_transmit().expect("an answer");
    let mut input = BytesMut::from(&frame[..]);
    counted(&mut n, || w.client.handle_input(conn, now, &mut input));
    let ev = counted(&mut n, || w.client.poll_output(now, out));
    assert!(
        matches!(
            ev,
            Output::Event(
                Event::Response { result: Ok(_), .. } | Event::Admin { result: Ok(_), .. }
            )
        ),
        "{ev:?}"
    );
    counted(&mut n, || drop(ev));
    let end = counted(&mut n, || w.client.poll_output(now, out));
    assert!(matches!(end, Output::Timeout(_)), "{end:?}");
    n
}

#[test]
fn allocations_per_round_trip_are_small() {
    let mut w = World::new(1, "broker-1:9092");
    w.bootstrap();
    w.events.clear();
    let body = RequestBody::HealthCheck(HealthCheckRequest::default());
    let mut b = BytesMut::new();
    body.encode(&mut b);
    let body = b.freeze();
    let mut out = BytesMut::with_capacity(4096);
    // Warm up: tables and queues reach their steady capacity.
    for _ in 0..64 {
        round_trip(&mut w, &mut out, &body, true);
        round_trip(&mut w, &mut out, &body, false);
    }
    let rounds = 1000;
    let raw: usize = (0..rounds)
        .map(|_| round_trip(&mut w, &mut out, &body, true))
        .sum();
    let admin: usize = (0..rounds)
        .map(|_| round_trip(&mut w, &mut out, &body, false))
        .sum();
    let raw_per = raw as f64 / rounds as f64;
    let admin_per = admin as f64 / rounds as f64;
    println!("RESULT sansio-allocs-per-raw-round-trip {raw_per:.2}");
    println!("RESULT sansio-allocs-per-admin-round-trip {admin_per:.2}");
    assert!(raw_per <= 2.0, "raw round trip: {raw_per} allocations");
    assert!(
        admin_per <= 3.0,
        "admin round trip: {admin_per} allocations"
    );
}

/// Leases allocate per lease, not per record: over v1 blobs of 1000 small records, leases of
/// 500 make at most four allocations each (the lent blobs, the records' vector), and the
/// records come out the same as `poll_records` gives them with one vector per call.
/// Prints `RESULT sansio-allocs-per-leased-record X` beside the `poll_records` figure.
#[test]
fn leases_allocate_per_lease_not_per_record() {
    let mut w = World::with(
        stellflow_sim::ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    for i in 0..20 {
        produce(
            &mut w,
            "t",
            0,
            blob(Kind::V1, &values(&format!("b{i}"), 1000, 20)),
        );
    }
    w.bootstrap();
    let tp = TopicPartition::new("t", 0);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let (mut leased, mut leases, mut lease_allocs) = (0, 0, 0);
    w.run_until(Duration::from_secs(30), |w| {
        loop {
            let records = counted(&mut lease_allocs, || {
                let mut lease = w.client.lease_records(500)?;
                lease.decode();
                w.client.redeem_lease(lease)
            });
            let Some(records) = records else {
                return leased >= 20_000;
            };
            leases += 1;
            leased += records.len();
        }
    });
    assert_eq!(leased, 20_000);
    // The same records again through poll_records, as the baseline.
    w.client
        .seek(w.now, &tp, SeekTo::Position(Position::blob(0)))
        .unwrap();
    let (mut polled, mut poll_allocs) = (0, 0);
    w.run_until(Duration::from_secs(30), |w| {
        loop {
            let n = counted(&mut poll_allocs, || {
                let mut out = Vec::with_capacity(500);
                w.client.poll_records(&mut out, 500)
            });
            if n == 0 {
                return polled >= 20_000;
            }
            polled += n;
        }
    });
    assert_eq!(polled, 20_000);
    let per_lease = lease_allocs as f64 / leases as f64;
    println!(
        "RESULT sansio-allocs-per-leased-record {:.4}",
        lease_allocs as f64 / leased as f64
    );
    println!(
        "RESULT sansio-allocs-per-polled-record {:.4}",
        poll_allocs as f64 / polled as f64
    );
    assert!(
        per_lease <= 4.0,
        "{per_lease:.1} allocations per lease of 500 records"
    );
}
