//! Copies on the read path: a response frame that arrives in many reads is not copied by the
//! core when the driver reads into the spare capacity of the buffer it hands over (the reads
//! are joined in place), and is copied at most once otherwise (room for the whole frame is
//! reserved once, never regrown chunk by chunk).
//!
//! Bytes are counted by the workspace's counting allocator (alloc-counter), per thread: only
//! what the test's own thread (which runs the client) allocates.
#![allow(clippy::unwrap_used)]

mod common;
mod consumer_support;

use bytes::{Bytes, BytesMut};
use common::World;
use stellflow_proto::ApiKey;
use stellflow_proto::messages::{FetchPartition, FetchRequest, FetchTopic, RequestBody};
use stellflow_sansio::{ConnId, Event, Output, RequestOptions, Target};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const BLOB: usize = 1 << 20;
const CHUNK: usize = 1000;

/// Sends a raw Fetch of the big blob and returns the answer's bytes and connection.
fn fetch_answer(w: &mut World) -> (ConnId, Bytes) {
    let body = RequestBody::Fetch(FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: i32::MAX,
        isolation_level: 0,
        session_id: 0,
        topic_partitions: vec![FetchTopic {
            topic: Some("big".into()),
            partitions: vec![FetchPartition {
                partition: 0,
                current_leader_epoch: -1,
                fetch_offset: 0,
                log_start_offset: -1,
                partition_max_bytes: i32::MAX,
            }],
        }],
    });
    let mut b = BytesMut::new();
    body.encode(&mut b);
    let now = w.now;
    w.client.request(
        now,
        Target::Broker(1),
        ApiKey::FETCH,
        None,
        b.freeze(),
        &RequestOptions::default(),
    );
    let mut out = BytesMut::new();
    let conn = common::next_transmit(&mut w.client, now, &mut out);
    let sc = w.to_sim[&conn];
    w.sim.handle_input(sc, now, &mut out);
    let (_, frame) = w.sim.poll_transmit().expect("an answer");
    assert!(frame.len() > BLOB);
    (conn, frame)
}

fn response_body(w: &mut World) -> Bytes {
    loop {
        match w.client.poll_output(w.now, &mut BytesMut::new()) {
            Output::Event(Event::Response { result, .. }) => return result.unwrap().body.unwrap(),
            Output::Timeout(_) => panic!("no response"),
            _ => continue,
        }
    }
}

#[test]
fn a_frame_split_over_many_reads_is_not_copied_or_copied_once() {
    let mut w = World::new(1, "broker-1:9092");
    w.bootstrap();
    w.sim.create_topic("big", 1, 1).unwrap();
    consumer_support::produce(&mut w, "big", 0, Bytes::from(vec![7u8; BLOB]));
    w.events.clear();

    // A driver reading into the spare capacity of one buffer: joined in place, no copy.
    let (conn, frame) = fetch_answer(&mut w);
    let mut buf = BytesMut::with_capacity(frame.len());
    let start = buf.as_ptr() as usize;
    let end = start + frame.len();
    let before = alloc_counter::bytes_allocated();
    for piece in frame.chunks(CHUNK) {
        buf.extend_from_slice(piece); // the driver's read, into spare capacity
        w.client.handle_input(conn, w.now, &mut buf);
        assert!(buf.is_empty(), "handle_input consumes the caller's bytes");
    }
    let body = response_body(&mut w);
    let core = alloc_counter::bytes_allocated().wrapping_sub(before);
    let p = body.as_ptr() as usize;
    assert!(
        p >= start && p + body.len() <= end,
        "the body was copied out of the driver's buffer"
    );
    assert!(
        core < BLOB / 4,
        "{core} bytes allocated for a {BLOB}-byte frame"
    );
    assert!(body.iter().filter(|b| **b == 7).count() >= BLOB);

    // A driver handing a fresh buffer per read: each byte copied once, room reserved once.
    let (conn, frame) = fetch_answer(&mut w);
    let chunks: Vec<BytesMut> = frame.chunks(CHUNK).map(BytesMut::from).collect();
    let before = alloc_counter::bytes_allocated();
    for mut c in chunks {
        w.client.handle_input(conn, w.now, &mut c);
        assert!(c.is_empty());
    }
    let body = response_body(&mut w);
    let core = alloc_counter::bytes_allocated().wrapping_sub(before);
    println!(
        "RESULT sansio-read-path-bytes-allocated-per-frame-byte {:.2}",
        core as f64 / frame.len() as f64
    );
    assert!(
        core < frame.len() + frame.len() / 4,
        "{core} bytes allocated for a {}-byte frame (regrown chunk by chunk?)",
        frame.len()
    );
    assert!(body.iter().filter(|b| **b == 7).count() >= BLOB);
}
