//! Consumer under broker faults, in-process against the simulated cluster: leader moves and
//! 9 / 10 during fetching, reordered responses, pipelined fetches answered out of order and
//! failing mid-pipeline, log-start jumps under the `Latest` and `None`
//! policies, and a leaderless partition that must not make metadata refreshes chatty.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::Duration;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{
    ConsumerEvent, Event, LogStartAction, OffsetReset, Position, SeekTo, TopicPartition,
};
use stellflow_sim::{ClusterConfig, DelayRule, Fault, FaultRule};

fn merge(into: &mut Got, more: Got) {
    for (tp, v) in more {
        into.entry(tp).or_default().extend(v);
    }
}

#[test]
fn leader_moves_while_fetching_lose_and_repeat_nothing() {
    let mut cfg = consumer_config("broker-1:9092,broker-2:9092,broker-3:9092", None);
    // Small fetches: many round trips, so the moves land mid-stream.
    cfg.consumer.max_entries_per_partition = 2;
    let mut w = common::World::with(ClusterConfig::with_brokers(3), cfg);
    w.sim.create_topic("m", 3, 3).unwrap();
    let mut exp = fill(&mut w, "m", 3, 20, 8);
    let half: usize = exp.values().map(Vec::len).sum::<usize>() / 2;
    w.bootstrap();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("m", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let mut got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= half);
    assert!(count(&got) >= half);
    let refreshes = w.client.counters().metadata_refreshes;
    // Every partition moves to the next broker; new data goes to the new leaders.
    for p in 0..3 {
        let new = leader(&w, "m", p) % 3 + 1;
        w.sim.move_leader("m", p, new).unwrap();
        for i in 0..4 {
            produce_values(
                &mut w,
                Some(new),
                &tps[p as usize],
                Kind::MultiV1,
                values(&format!("moved/{p}/{i}"), 5, 8),
                &mut exp,
            );
        }
    }
    let want: usize = exp.values().map(Vec::len).sum();
    let rest = want - count(&got);
    merge(
        &mut got,
        drain(&mut w, Duration::from_secs(60), |g| count(g) >= rest),
    );
    assert_exact(&exp, &got);
    assert_eq!(count(&drain(&mut w, Duration::from_secs(2), |_| false)), 0);
    assert!(w.client.counters().metadata_refreshes > refreshes);
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::FetchError { .. })),
        "leadership changes refresh silently: {ev:?}"
    );
    for p in 0..3 {
        let new = leader(&w, "m", p) % 3 + 1;
        let info = &w.client.metadata().topics["m"].partitions[&p];
        assert_eq!(info.leader(), Ok(new));
    }
}

#[test]
fn fetch_errors_9_and_10_refresh_metadata_and_resume_at_the_right_blob() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.max_entries_per_partition = 3;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("f", 2, 1).unwrap();
    let mut exp = fill(&mut w, "f", 2, 10, 4);
    w.bootstrap();
    let tps: Vec<_> = (0..2).map(|p| TopicPartition::new("f", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let first: usize = exp.values().map(Vec::len).sum();
    let mut got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= first);
    let refreshes = w.client.counters().metadata_refreshes;
    let fetches = w.client.counters().api(ApiKey::FETCH).requests;
    // Rules apply in order: three Fetches answered 9 per partition, then three 10, then
    // two header-only 9 (no body at all). The data written next has to come through them.
    w.sim.inject_fault(FaultRule::next(
        ApiKey::FETCH,
        3,
        Fault::PartitionError(ErrorCode(9)),
    ));
    w.sim.inject_fault(FaultRule::next(
        ApiKey::FETCH,
        3,
        Fault::PartitionError(ErrorCode(10)),
    ));
    w.sim.fail_next(ApiKey::FETCH, 2, ErrorCode(9));
    for i in 0..10 {
        for tp in &tps {
            let kind = [Kind::V1, Kind::Srfb, Kind::MultiV1][i % 3];
            let vals = values(&format!("late/{tp}/{i}"), 1 + i % 4, 4);
            produce_values(&mut w, None, tp, kind, vals, &mut exp);
        }
    }
    let total: usize = exp.values().map(Vec::len).sum();
    let rest = total - count(&got);
    merge(
        &mut got,
        drain(&mut w, Duration::from_secs(60), |g| count(g) >= rest),
    );
    assert_exact(&exp, &got);
    assert!(
        w.sim.knobs().faults.is_empty(),
        "every fault was hit: {:?} fetches {} -> {}",
        w.sim.knobs().faults,
        fetches,
        w.client.counters().api(ApiKey::FETCH).requests
    );
    assert!(w.client.counters().api(ApiKey::FETCH).requests >= fetches + 8);
    assert!(
        w.client.counters().metadata_refreshes > refreshes,
        "9 and 10 ask for metadata"
    );
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::FetchError { .. })),
        "{ev:?}"
    );
    assert_eq!(count(&drain(&mut w, Duration::from_secs(2), |_| false)), 0);
}

#[test]
fn reordered_responses_across_correlation_ids_keep_delivery_exact() {
    let mut cfg = consumer_config("broker-1:9092", Some("ro"));
    cfg.consumer.max_entries_per_partition = 2;
    cfg.consumer.auto_commit_interval = Duration::from_millis(20);
    cfg.consumer.heartbeat_interval = Duration::from_millis(30);
    cfg.metadata_max_age = Duration::from_millis(50);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("r", 4, 1).unwrap();
    let mut exp = fill(&mut w, "r", 4, 5, 4);
    w.sim.set_reordering(0.5, 0.5);
    w.bootstrap();
    w.client.subscribe(w.now, &["r"]).unwrap();
    let mut got = Got::new();
    // Blobs keep arriving for 2 s, so fetches, commits, registry rounds and metadata requests
    // stay pipelined on the one connection and come back in shuffled order.
    for i in 0..200 {
        let tp = TopicPartition::new("r", (i % 4) as i32);
        let kind = [Kind::V1, Kind::Srfb, Kind::MultiV1, Kind::SrfbGzip][i % 4];
        produce_values(
            &mut w,
            None,
            &tp,
            kind,
            values(&format!("{i}"), 1 + i % 7, 4),
            &mut exp,
        );
        let until = w.now + Duration::from_millis(10);
        while w.now < until {
            w.tick(until - w.now);
            take_records(&mut w, &mut got);
        }
    }
    let total: usize = exp.values().map(Vec::len).sum();
    w.run_until(Duration::from_secs(60), |w| {
        take_records(w, &mut got);
        count(&got) >= total
    });
    assert_exact(&exp, &got);
    assert_eq!(count(&drain(&mut w, Duration::from_secs(1), |_| false)), 0);
    for p in 0..4 {
        let tp = TopicPartition::new("r", p);
        assert_eq!(w.client.position(&tp), Some(Position::blob(55)));
    }
    assert!(w.client.counters().api(ApiKey::OFFSET_COMMIT).requests > 10);
    // Registry rounds (OffsetCommit, then OffsetFetch) replace heartbeats on this server.
    assert!(w.client.counters().api(ApiKey::OFFSET_FETCH).requests > 10);
}

/// Streams a filled one-partition topic with `depth` Fetch requests in flight, Fetch answers
/// 10 ms late and pipelined requests executed and answered in shuffled order: (virtual time
/// to the last record, Fetch requests sent by then).
fn stream_pipelined(depth: usize, faults: &[FaultRule]) -> (Duration, u64) {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.max_entries_per_partition = 2;
    cfg.consumer.max_fetches_in_flight = depth;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("pipe", 1, 1).unwrap();
    let exp = fill(&mut w, "pipe", 1, 120, 8);
    let total: usize = exp.values().map(Vec::len).sum();
    w.sim.add_delay(DelayRule {
        broker: None,
        api_key: Some(ApiKey::FETCH),
        delay: Duration::from_millis(10),
    });
    w.sim.set_reordering(0.5, 0.5);
    for f in faults {
        w.sim.inject_fault(f.clone());
    }
    let tp = TopicPartition::new("pipe", 0);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let start = w.now;
    let got = drain(&mut w, Duration::from_secs(120), |g| count(g) >= total);
    assert_exact(&exp, &got);
    let took = w.now - start;
    let requests = w.client.counters().api(ApiKey::FETCH).requests;
    assert_eq!(count(&drain(&mut w, Duration::from_secs(1), |_| false)), 0);
    assert_eq!(w.client.position(&tp), Some(Position::blob(120)));
    (took, requests)
}

#[test]
fn pipelined_fetches_answered_out_of_order_deliver_in_order_and_waste_no_answer() {
    let (one, one_requests) = stream_pipelined(1, &[]);
    let (four, four_requests) = stream_pipelined(4, &[]);
    // 120 blobs, 2 a request: 60 requests carry data with either depth. An answer that
    // overtook an earlier one is held, not dropped and asked again; only the requests
    // asked past the log end at the finish may come back empty.
    assert!(one_requests <= 62, "depth 1: {one_requests} Fetch requests");
    assert!(
        four_requests <= 66,
        "depth 4: {four_requests} Fetch requests"
    );
    // Four requests share each 10 ms wait.
    assert!(
        four * 3 < one,
        "depth 4 took {four:?}, depth 1 took {one:?}"
    );
}

#[test]
fn a_pipelined_fetch_that_fails_restarts_the_pipeline_without_losing_or_repeating() {
    // Requests fail while others of the same pipeline are in flight or held: a leader error
    // on a partition, a lost answer (timed out), a closed connection. Whatever the failing
    // request asked for is asked again; answers of the broken pipeline are dropped.
    let sometimes = |fault: Fault, times: u32| FaultRule {
        probability: 0.2,
        remaining: Some(times),
        ..FaultRule::random(ApiKey::FETCH, 0.2, fault)
    };
    let faults = [
        sometimes(Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER), 4),
        sometimes(Fault::DropResponse, 1),
        sometimes(Fault::CloseConnection, 1),
    ];
    let (_, requests) = stream_pipelined(4, &faults);
    assert!(requests > 66, "the faults hit: {requests} Fetch requests");
}

fn jump_world(policy: OffsetReset) -> (common::World, TopicPartition, Expected) {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.auto_offset_reset = policy;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 10, 4);
    w.sim.advance_log_start("t", 0, 6).unwrap();
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.advance(Duration::from_millis(100));
    w.client
        .seek(w.now, &tp, SeekTo::Position(Position::new(2, 1)))
        .unwrap();
    (w, tp, exp)
}

#[test]
fn log_start_jump_with_latest_moves_to_the_end() {
    let (mut w, tp, _) = jump_world(OffsetReset::Latest);
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::LogStartMoved {
            position: 2,
            log_start: 6,
            action: LogStartAction::MovedToEnd,
            ..
        }
    )));
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::PositionResolved { position, committed: false, .. } if *position == Position::blob(10)
    )));
    assert_eq!(w.client.position(&tp), Some(Position::blob(10)));
    // Nothing of the old data; what is written now arrives.
    let mut exp = Expected::new();
    produce_values(&mut w, None, &tp, Kind::Srfb, values("new", 3, 4), &mut exp);
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 3);
    assert_exact(&exp, &got);
    assert_eq!(count(&drain(&mut w, Duration::from_secs(1), |_| false)), 0);
}

#[test]
fn log_start_jump_with_none_stops_until_a_seek() {
    let (mut w, tp, exp) = jump_world(OffsetReset::None);
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::LogStartMoved {
            position: 2,
            log_start: 6,
            action: LogStartAction::Stopped,
            ..
        }
    )));
    let fetches = w.client.counters().api(ApiKey::FETCH).requests;
    let idle = drain(&mut w, Duration::from_secs(5), |_| false);
    assert_eq!(count(&idle), 0, "nothing delivered while stopped");
    assert_eq!(w.client.position(&tp), None);
    assert_eq!(
        w.client.counters().api(ApiKey::FETCH).requests,
        fetches,
        "a stopped partition is not fetched"
    );
    w.client.seek(w.now, &tp, SeekTo::Beginning).unwrap();
    let want: Vec<_> = exp[&tp]
        .iter()
        .filter(|((o, _), _)| *o >= 6)
        .map(|(p, _)| *p)
        .collect();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= want.len());
    assert_eq!(
        got[&tp].iter().map(|(p, _, _)| *p).collect::<Vec<_>>(),
        want
    );
}

#[test]
fn a_leaderless_partition_does_not_make_metadata_refreshes_chatty() {
    let mut w = common::World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("l", 1, 1).unwrap();
    let mut exp = fill(&mut w, "l", 1, 3, 4);
    let tp = TopicPartition::new("l", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let n = exp[&tp].len();
    let mut got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= n);
    // Restarted on its data, the broker reports leader 0 until leadership is re-asserted.
    w.sim.restart(1, w.now).unwrap();
    let refreshes = w.client.counters().metadata_refreshes;
    w.events.clear();
    advance_checked(&mut w, Duration::from_secs(600));
    let leaderless = w.client.metadata().leaderless().count();
    assert_eq!(leaderless, 1, "still leaderless");
    let rounds = w.client.counters().metadata_refreshes - refreshes;
    let updates = w.take(|e| matches!(e, Event::MetadataUpdated { .. })).len() as u64;
    // metadata_refresh_backoff 100 ms doubling to its cap, 1 s (jittered down to 0.8 s, never
    // above): a few rounds in the first second, then one every 0.8–1 s — 600 to 750 in 10
    // minutes. Without the backoff the fetch retry (every 500 ms) would ask for 1200.
    assert!(rounds <= 760, "{rounds} refresh rounds in 10 min");
    assert!(
        rounds >= 590,
        "{rounds}: a leaderless partition is re-checked on the cap"
    );
    assert!(updates <= rounds);
    // Once leadership is back, consumption resumes within the refresh cap (1 s) plus a round
    // trip: the leaderless partition is re-checked on the cap and fetched as soon as the
    // metadata names its leader.
    w.sim.reassert_leadership(1).unwrap();
    produce_values(
        &mut w,
        Some(1),
        &tp,
        Kind::V1,
        values("back", 2, 4),
        &mut exp,
    );
    let t = w.now;
    merge(
        &mut got,
        drain(&mut w, Duration::from_secs(15), |g| count(g) >= 2),
    );
    // The default cap, 1 s, plus a round trip (none to speak of in this world).
    assert!(w.now - t <= Duration::from_millis(1_050), "{:?}", w.now - t);
    assert_exact(&exp, &got);
}
