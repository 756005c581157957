//! Heap allocations per request/response round trip inside the core.
//!
//! The counting global allocator (`alloc-counter`) counts per thread. Only the client's own
//! calls are counted (the simulated broker's work and the driver's buffers are not).
//!
//! Run with `cargo test -p stellflow-sansio --test alloc -- --nocapture` to see the figures.
#![allow(clippy::unwrap_used)]

mod common;

use alloc_counter::counted;
use bytes::{Bytes, BytesMut};
use common::World;
use stellflow_proto::ApiKey;
use stellflow_proto::messages::{HealthCheckRequest, RequestBody};
use stellflow_sansio::{Event, RequestOptions, Target};

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
    let conn = counted(&mut n, || w.client.poll_transmit(now, out)).expect("a request");
    assert!(counted(&mut n, || w.client.poll_transmit(now, out)).is_none());
    let sc = w.to_sim[&conn];
    w.sim.handle_input(sc, now, out);
    let (_, frame) = w.sim.poll_transmit().expect("an answer");
    let mut input = BytesMut::from(&frame[..]);
    counted(&mut n, || w.client.handle_input(conn, now, &mut input));
    let ev = counted(&mut n, || w.client.poll_event()).expect("an event");
    assert!(matches!(
        ev,
        Event::Response { result: Ok(_), .. } | Event::Admin { result: Ok(_), .. }
    ));
    counted(&mut n, || drop(ev));
    counted(&mut n, || w.client.poll_timeout());
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
