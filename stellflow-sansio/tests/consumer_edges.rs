//! Consumer at the edges of the log: a position past the log end, a
//! high watermark below the log end, and fetch answers larger than the client accepts.

mod common;
mod consumer_support;

use common::World;
use consumer_support::*;
use std::time::Duration;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{
    ConsumerEvent, LogStartAction, OffsetReset, Position, SeekTo, TopicPartition,
};
use stellflow_sim::ClusterConfig;

/// One broker, topic `t` with two blobs, the consumer at `position` (past the end).
fn past_end_world(policy: OffsetReset, position: Position) -> (World, TopicPartition, Expected) {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.auto_offset_reset = policy;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 2, 4);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.advance(Duration::from_millis(100));
    w.client
        .seek(w.now, &tp, SeekTo::Position(position))
        .unwrap();
    (w, tp, exp)
}

fn out_of_range(e: &ConsumerEvent, action: LogStartAction) -> bool {
    matches!(
        e,
        ConsumerEvent::PositionOutOfRange { position: 5, log_end: 2, action: a, .. } if *a == action
    )
}

#[test]
fn a_position_past_the_log_end_is_reported_and_reset_to_earliest() {
    let (mut w, tp, exp) = past_end_world(OffsetReset::Earliest, Position::blob(5));
    // Without the fix: nothing delivered, position stays (5, 0), no event.
    assert!(
        wait_for(&mut w, Duration::from_secs(10), |e| out_of_range(
            e,
            LogStartAction::MovedToLogStart
        )),
        "{:?}",
        w.events
    );
    let got = drain(&mut w, Duration::from_secs(10), |g| {
        count(g) >= count_exp(&exp)
    });
    assert_exact(&exp, &got);
    assert_eq!(w.client.position(&tp), Some(Position::blob(2)));
}

#[test]
fn a_position_past_the_log_end_with_latest_moves_to_the_end() {
    let (mut w, tp, _) = past_end_world(OffsetReset::Latest, Position::new(5, 3));
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| out_of_range(
        e,
        LogStartAction::MovedToEnd
    )));
    assert_eq!(w.client.position(&tp), Some(Position::blob(2)));
    let mut exp = Expected::new();
    produce_values(&mut w, None, &tp, Kind::Srfb, values("new", 3, 4), &mut exp);
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 3);
    assert_exact(&exp, &got);
}

#[test]
fn a_position_past_the_log_end_with_none_stops_and_says_so() {
    let (mut w, tp, _) = past_end_world(OffsetReset::None, Position::blob(5));
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| out_of_range(
        e,
        LogStartAction::Stopped
    )));
    let fetches = w.client.counters().api(ApiKey::FETCH).requests;
    assert_eq!(count(&drain(&mut w, Duration::from_secs(5), |_| false)), 0);
    assert_eq!(w.client.position(&tp), None, "stopped until a seek");
    assert_eq!(w.client.counters().api(ApiKey::FETCH).requests, fetches);
    w.client.seek(w.now, &tp, SeekTo::Beginning).unwrap();
    assert!(count(&drain(&mut w, Duration::from_secs(10), |g| count(g) > 0)) > 0);
}

fn count_exp(exp: &Expected) -> usize {
    exp.values().map(Vec::len).sum()
}

/// Two brokers, topic `h` with two replicas, the follower's replication paused so the high
/// watermark stays behind the log end.
fn lagging_world() -> (World, TopicPartition) {
    let mut w = World::with(
        ClusterConfig::with_brokers(2),
        consumer_config("broker-1:9092,broker-2:9092", None),
    );
    w.sim.create_topic("h", 1, 2).unwrap();
    let tp = TopicPartition::new("h", 0);
    (w, tp)
}

#[test]
fn only_blobs_below_the_high_watermark_are_delivered() {
    let (mut w, tp) = lagging_world();
    let mut exp = Expected::new();
    for i in 0..3 {
        produce_values(
            &mut w,
            None,
            &tp,
            Kind::V1,
            values(&format!("c{i}"), 2, 4),
            &mut exp,
        );
    }
    w.advance(Duration::from_secs(2));
    let follower = 3 - leader(&w, "h", 0);
    w.sim.pause_replication(follower, true).unwrap();
    let mut above = Expected::new();
    for i in 0..2 {
        produce_values(
            &mut w,
            None,
            &tp,
            Kind::V1,
            values(&format!("u{i}"), 2, 4),
            &mut above,
        );
    }
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    // Without the fix the two blobs above the high watermark arrive too, with lag 0.
    let got = drain(&mut w, Duration::from_secs(10), |_| false);
    assert_exact(&exp, &got);
    assert_eq!(w.client.position(&tp), Some(Position::blob(3)));
    assert_eq!(
        w.client.lag(&tp),
        Some(0),
        "lag is measured from the high watermark"
    );
    assert!(
        !consumer_events(&mut w)
            .iter()
            .any(|e| matches!(e, ConsumerEvent::PositionOutOfRange { .. })),
        "a lagging high watermark is not the log end"
    );
    // Replicated: they come, once.
    w.sim.pause_replication(follower, false).unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 4);
    assert_exact(&above, &got);
}

#[test]
fn a_position_between_the_high_watermark_and_the_log_end_waits_without_a_reset() {
    let (mut w, tp) = lagging_world();
    let follower = 3 - leader(&w, "h", 0);
    w.sim.pause_replication(follower, true).unwrap();
    for i in 0..3 {
        produce_values(
            &mut w,
            None,
            &tp,
            Kind::V1,
            values(&format!("u{i}"), 1, 4),
            &mut Expected::new(),
        );
    }
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.advance(Duration::from_millis(100));
    // Position 3 = log end, high watermark 0: a ListOffsets check says it is in range.
    w.client
        .seek(w.now, &tp, SeekTo::Position(Position::blob(3)))
        .unwrap();
    let lists = w.client.counters().api(ApiKey::LIST_OFFSETS).requests;
    w.step();
    w.advance(Duration::from_secs(5));
    let checks = w.client.counters().api(ApiKey::LIST_OFFSETS).requests - lists;
    assert!(
        (1..=2).contains(&checks),
        "checked once per interval, not on every empty fetch: {checks}"
    );
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::PositionOutOfRange { .. })),
        "{ev:?}"
    );
    assert_eq!(w.client.position(&tp), Some(Position::blob(3)));
    let mut exp = Expected::new();
    produce_values(
        &mut w,
        None,
        &tp,
        Kind::Srfb,
        values("later", 2, 4),
        &mut exp,
    );
    w.sim.pause_replication(follower, false).unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 2);
    assert_exact(&exp, &got);
}

/// One broker, topic `big` with `partitions` partitions holding one blob of `mib` MiB each,
/// and a consumer whose response frame limit is `max_frame` bytes.
fn big_world(
    partitions: i32,
    mib: usize,
    max_frame: usize,
) -> (World, Vec<TopicPartition>, Expected) {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.max_response_frame = max_frame;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("big", partitions, 1).unwrap();
    let tps: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new("big", p))
        .collect();
    let mut exp = Expected::new();
    for tp in &tps {
        let value = vec![b'x'; mib << 20];
        produce_values(&mut w, None, tp, Kind::Srfb, vec![value], &mut exp);
    }
    w.bootstrap();
    w.client.assign(w.now, &tps).unwrap();
    (w, tps, exp)
}

#[test]
fn blobs_of_unknown_size_are_asked_alone_so_answers_fit_the_frame_limit() {
    // Three 3 MiB blobs, an 8 MiB frame limit: one request for all three would be refused.
    let (mut w, _, exp) = big_world(3, 3, 8 << 20);
    // Without the fix: nothing arrives, the connection is dropped again and again.
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= 3);
    assert_eq!(
        count(&got),
        3,
        "{:?}",
        w.events.iter().rev().take(5).collect::<Vec<_>>()
    );
    assert_exact(&exp, &got);
    assert_eq!(w.client.counters().disconnects, 0, "no answer was refused");
}

#[test]
fn a_blob_larger_than_the_frame_limit_raises_an_event_and_is_not_asked_again() {
    let (mut w, tps, _) = big_world(1, 3, 2 << 20);
    assert!(
        wait_for(&mut w, Duration::from_secs(10), |e| matches!(
            e,
            ConsumerEvent::FetchTooLarge { offset: 0, max, .. } if *max == 2 << 20
        )),
        "{:?}",
        w.events
    );
    let fetches = w.client.counters().api(ApiKey::FETCH).requests;
    let disconnects = w.client.counters().disconnects;
    assert_eq!(count(&drain(&mut w, Duration::from_secs(10), |_| false)), 0);
    assert_eq!(w.client.counters().api(ApiKey::FETCH).requests, fetches);
    assert_eq!(w.client.counters().disconnects, disconnects);
    assert_eq!(w.client.position(&tps[0]), None, "stopped until a seek");
    // Seeking past it goes on with what comes next.
    let mut exp = Expected::new();
    produce_values(
        &mut w,
        None,
        &tps[0],
        Kind::V1,
        values("small", 2, 4),
        &mut exp,
    );
    w.client
        .seek(w.now, &tps[0], SeekTo::Position(Position::blob(1)))
        .unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 2);
    assert_exact(&exp, &got);
}

#[test]
fn a_refused_answer_makes_its_partitions_go_alone_and_nothing_is_lost() {
    // Small blobs teach a small size; then 3 MiB blobs follow, so the next request (many
    // entries) is answered with far more than the 8 MiB limit and refused once.
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.max_response_frame = 8 << 20;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("g", 1, 1).unwrap();
    let tp = TopicPartition::new("g", 0);
    let mut exp = Expected::new();
    for i in 0..4 {
        produce_values(
            &mut w,
            None,
            &tp,
            Kind::V1,
            values(&format!("s{i}"), 1, 8),
            &mut exp,
        );
    }
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let mut got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 4);
    for i in 0..5u8 {
        let big = vec![b'0' + i; 3 << 20];
        produce_values(&mut w, None, &tp, Kind::Srfb, vec![big], &mut exp);
    }
    let more = drain(&mut w, Duration::from_secs(30), |g| count(g) >= 5);
    for (k, v) in more {
        got.entry(k).or_default().extend(v);
    }
    assert_exact(&exp, &got);
    let refused = w.client.counters().disconnects;
    assert!(
        (1..=2).contains(&refused),
        "refused once, then asked alone: {refused} disconnects"
    );
    assert!(
        !consumer_events(&mut w)
            .iter()
            .any(|e| matches!(e, ConsumerEvent::FetchTooLarge { .. })),
        "each blob fits alone"
    );
}

#[test]
fn a_committed_position_of_a_recreated_topic_resets_and_delivers_the_new_records() {
    // The scenario: commit (5, 0), delete and re-create the topic, produce two blobs,
    // assign with the same group.
    let mut cfg = consumer_config("broker-1:9092", Some("g"));
    cfg.consumer.enable_auto_commit = false;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("r", 1, 1).unwrap();
    fill(&mut w, "r", 1, 5, 4);
    let tp = TopicPartition::new("r", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let id = w
        .client
        .commit_positions(w.now, vec![(tp.clone(), Position::blob(5))])
        .unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::CommitCompleted { id: i, result: Ok(_), .. } if *i == id
    )));
    w.client.assign(w.now, &[]).unwrap();
    let del = w
        .client
        .delete_topic(w.now, "r", stellflow_sansio::Target::Any)
        .unwrap();
    assert!(w.admin(del).is_ok());
    let cre = w
        .client
        .create_topic(w.now, "r", 1, stellflow_sansio::Target::Any)
        .unwrap();
    assert!(w.admin(cre).is_ok());
    let mut exp = Expected::new();
    for i in 0..2 {
        produce_values(
            &mut w,
            None,
            &tp,
            Kind::V1,
            values(&format!("n{i}"), 2, 4),
            &mut exp,
        );
    }
    consumer_events(&mut w);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    // Without the fix: position stays (5, 0), nothing is delivered, no event.
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 4);
    assert_exact(&exp, &got);
    let ev = consumer_events(&mut w);
    assert!(
        ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::PositionOutOfRange {
                position: 5,
                log_end: 2,
                action: LogStartAction::MovedToLogStart,
                ..
            }
        )),
        "{ev:?}"
    );
}

/// `SeekTo::Timestamp` is resolved by the core's seek state machine (ListOffsets by time on the
/// leader, a failed answer retried): it lands on the first blob the broker appended at or after
/// the time, and on the log end when no blob is that recent (the server's OFFSET_OUT_OF_RANGE).
#[test]
fn a_seek_to_a_timestamp_lands_on_the_first_blob_appended_at_or_after_it() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    let tp = TopicPartition::new("t", 0);
    let mut exp = Expected::new();
    produce_values(&mut w, None, &tp, Kind::Srfb, values("a", 2, 4), &mut exp);
    w.advance(Duration::from_secs(1));
    let between = w.sim.wall_clock_ms();
    w.advance(Duration::from_secs(1));
    produce_values(&mut w, None, &tp, Kind::V1, values("b", 3, 4), &mut exp);
    produce_values(&mut w, None, &tp, Kind::Srfb, values("c", 1, 4), &mut exp);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.advance(Duration::from_millis(100));
    let _ = drain(&mut w, Duration::from_secs(5), |g| count(g) >= 6);
    w.events.clear();

    // One failed ListOffsets first: the seek is retried, not lost.
    w.sim
        .fail_next(ApiKey::LIST_OFFSETS, 1, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    w.client
        .seek(w.now, &tp, SeekTo::Timestamp(between))
        .unwrap();
    assert_eq!(
        w.client.position(&tp),
        None,
        "resolved by the broker's answer"
    );
    assert!(
        wait_for(&mut w, Duration::from_secs(10), |e| matches!(
            e,
            ConsumerEvent::PositionResolved { position, committed: false, .. }
                if *position == Position::blob(1)
        )),
        "{:?}",
        w.events
    );
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 4);
    let offsets: Vec<(i64, u32)> = got[&tp].iter().map(|r| r.0).collect();
    assert_eq!(offsets, [(1, 0), (1, 1), (1, 2), (2, 0)]);

    // Later than every blob: the log end.
    w.events.clear();
    w.client
        .seek(w.now, &tp, SeekTo::Timestamp(between + 3_600_000))
        .unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::PositionResolved { position, .. } if *position == Position::blob(3)
    )));
    assert_eq!(w.client.position(&tp), Some(Position::blob(3)));
}

/// A blob whose second v1 batch fails its CRC: `poll_record` delivers the first batch's
/// records, raises `CorruptBlob` and goes on with the next blob; a lease (of 100 records) does
/// the same, the event raised when it is redeemed; `poll_blob` yields the same records and
/// then one `Err`, and the partition goes on the same way. Nothing is repeated.
#[test]
fn a_corrupt_batch_ends_its_blob_on_every_delivery_path() {
    for path in ["records", "leases", "blobs"] {
        let whole_blobs = path == "blobs";
        let mut w = World::with(
            ClusterConfig::with_brokers(1),
            consumer_config("broker-1:9092", None),
        );
        w.sim.create_topic("t", 1, 1).unwrap();
        let tp = TopicPartition::new("t", 0);
        let good = blob(Kind::V1, &values("a", 3, 8));
        let mut bad = bytes::BytesMut::from(&good[..]);
        bad.extend_from_slice(&blob(Kind::V1, &values("b", 2, 8)));
        let last = bad.len() - 1;
        bad[last] ^= 0xff; // inside the second batch's last value: its CRC no longer matches
        assert_eq!(produce(&mut w, "t", 0, bad.freeze()), 0);
        assert_eq!(produce(&mut w, "t", 0, good), 1);
        w.bootstrap();
        w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
        let mut got: Vec<(i64, u32)> = Vec::new();
        let mut errors = 0;
        w.run_until(Duration::from_secs(10), |w| {
            if whole_blobs {
                while let Some(b) = w.client.poll_blob() {
                    let offset = b.offset();
                    for r in b {
                        match r {
                            Ok(r) => got.push((offset, r.index_in_blob)),
                            Err(_) => errors += 1,
                        }
                    }
                }
            } else if path == "leases" {
                while let Some(mut lease) = w.client.lease_records(100) {
                    lease.decode();
                    let records = w.client.redeem_lease(lease).unwrap();
                    got.extend(records.iter().map(|r| (r.offset, r.index)));
                }
            } else {
                while let Some(r) = w.client.poll_record() {
                    got.push((r.offset, r.index));
                }
            }
            got.len() >= 6
        });
        if !whole_blobs {
            w.advance(Duration::from_millis(1)); // drains the events the last poll raised
            errors = consumer_events(&mut w)
                .iter()
                .filter(|e| matches!(e, ConsumerEvent::CorruptBlob { offset: 0, .. }))
                .count();
        }
        assert_eq!(
            got,
            vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)],
            "{path}"
        );
        assert_eq!(errors, 1, "{path}");
        assert_eq!(w.client.position(&tp), Some(Position::blob(2)));
    }
}
