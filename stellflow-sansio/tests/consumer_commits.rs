//! Consumer commits against the simulated cluster in-process: the auto-commit timer,
//! `commit_async`, a commit waiting for a silent coordinator, the `None` reset policy with
//! nothing committed, the admin OffsetFetch, and the position a finished blob commits.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::{Duration, Instant};
use stellflow_proto::ApiKey;
use stellflow_sansio::{
    CommitKind, ConsumerError, ConsumerEvent, OffsetReset, Position, SeekTo, TopicPartition,
};
use stellflow_sim::{ClusterConfig, Fault, FaultRule};

/// Drives a world in 100 ms ticks, optionally producing one blob a second, taking records
/// and noting every auto-commit with its instant.
struct AutoRun {
    tp: TopicPartition,
    got: Got,
    auto: Vec<(Instant, Position)>,
    failed: Vec<(Instant, ConsumerError)>,
    next_blob: Instant,
    blobs: i64,
}

impl AutoRun {
    fn run(&mut self, w: &mut common::World, until: Instant, produce: bool) {
        while w.now < until {
            if produce && w.now >= self.next_blob {
                let vals = values(&format!("b{}", self.blobs), 3, 8);
                produce_values(w, None, &self.tp, Kind::V1, vals, &mut Expected::new());
                self.blobs += 1;
                self.next_blob += Duration::from_secs(1);
            }
            w.tick(Duration::from_millis(100));
            take_records(w, &mut self.got);
            for e in consumer_events(w) {
                if let ConsumerEvent::CommitCompleted {
                    kind: CommitKind::Auto,
                    result,
                    ..
                } = e
                {
                    match result {
                        Ok(r) => self.auto.push((w.now, r[0].1)),
                        Err(e) => self.failed.push((w.now, e)),
                    }
                }
            }
        }
    }
}

/// One broker, topic `t` of one partition, a consumer of group `group` auto-committing every
/// `interval` and assigned `t-0`.
fn auto_commit_world(group: &str, interval: Duration) -> (common::World, TopicPartition) {
    let mut cfg = consumer_config("broker-1:9092", Some(group));
    cfg.consumer.auto_commit_interval = interval;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    (w, tp)
}

#[test]
fn auto_commit_runs_on_its_interval_and_only_when_positions_moved() {
    let (mut w, tp) = auto_commit_world("auto", Duration::from_secs(5));
    let start = w.now;
    let mut run = AutoRun {
        tp: tp.clone(),
        got: Got::new(),
        auto: Vec::new(),
        failed: Vec::new(),
        next_blob: start,
        blobs: 0,
    };
    // 60 s of steady traffic: a commit every 5 s, never more often.
    run.run(&mut w, start + Duration::from_secs(60), true);
    assert!(run.failed.is_empty(), "{:?}", run.failed);
    assert!(
        (11..=12).contains(&run.auto.len()),
        "{} auto commits: {:?}",
        run.auto.len(),
        run.auto
    );
    for pair in run.auto.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= Duration::from_secs(5) && gap < Duration::from_millis(5200),
            "gap {gap:?} in {:?}",
            run.auto
        );
        assert!(pair[1].1 > pair[0].1, "each commit moves forward");
    }
    // Traffic stops: at most one more commit (the last records), then none at all.
    let t = w.now;
    run.run(&mut w, t + Duration::from_secs(6), false);
    let commits = w.client.counters().api(ApiKey::OFFSET_COMMIT).requests;
    let n = run.auto.len();
    let t = w.now;
    run.run(&mut w, t + Duration::from_secs(60), false);
    assert_eq!(run.auto.len(), n, "no auto commit without progress");
    assert_eq!(
        w.client.counters().api(ApiKey::OFFSET_COMMIT).requests,
        commits,
        "no OffsetCommit sent without progress"
    );
    assert_eq!(w.client.committed(&tp), w.client.position(&tp));
    assert_eq!(w.client.position(&tp), Some(Position::blob(run.blobs)));
}

fn commit_world(group: &str) -> (common::World, TopicPartition, Expected) {
    let mut cfg = consumer_config("broker-1:9092", Some(group));
    cfg.consumer.enable_auto_commit = false;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 10, 4);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    (w, tp, exp)
}

fn commit_outcome(
    w: &mut common::World,
    id: stellflow_sansio::CommitId,
) -> (
    CommitKind,
    Result<Vec<(TopicPartition, Position)>, ConsumerError>,
) {
    let ok = wait_for(
        w,
        Duration::from_secs(30),
        |e| matches!(e, ConsumerEvent::CommitCompleted { id: i, .. } if *i == id),
    );
    assert!(ok, "no outcome for {id:?}");
    consumer_events(w)
        .into_iter()
        .find_map(|e| match e {
            ConsumerEvent::CommitCompleted {
                id: i,
                kind,
                result,
            } if i == id => Some((kind, result)),
            _ => None,
        })
        .unwrap()
}

#[test]
fn commit_async_reports_its_outcome_and_is_never_retried() {
    let (mut w, tp, exp) = commit_world("ca");
    let n = exp[&tp].len();
    drain(&mut w, Duration::from_secs(10), |g| count(g) >= n / 3);
    let p1 = w.client.position(&tp).unwrap();
    let id = w.client.commit_async(w.now).unwrap();
    let (kind, result) = commit_outcome(&mut w, id);
    assert_eq!(kind, CommitKind::Async);
    assert_eq!(result, Ok(vec![(tp.clone(), p1)]));
    assert_eq!(w.client.committed(&tp), Some(p1));

    // A failed async commit is reported once and not sent again.
    drain(&mut w, Duration::from_secs(10), |g| count(g) >= n / 3);
    let p2 = w.client.position(&tp).unwrap();
    assert!(p2 > p1);
    let sent = w.client.counters().api(ApiKey::OFFSET_COMMIT).requests;
    w.sim.inject_fault(FaultRule::next(
        ApiKey::OFFSET_COMMIT,
        1,
        Fault::CloseConnection,
    ));
    let id = w.client.commit_async(w.now).unwrap();
    let (kind, result) = commit_outcome(&mut w, id);
    assert_eq!(kind, CommitKind::Async);
    assert!(
        matches!(result, Err(ConsumerError::Request(ref e)) if e.is_retriable()),
        "{result:?}"
    );
    // Regression: the coordinator retry instant stayed in poll_timeout after it passed.
    advance_checked(&mut w, Duration::from_secs(10));
    assert_eq!(
        w.client.counters().api(ApiKey::OFFSET_COMMIT).requests,
        sent + 1,
        "an async commit is not retried"
    );
    assert_eq!(
        w.client.committed(&tp),
        Some(p1),
        "unchanged after the failure"
    );
    assert!(
        !consumer_events(&mut w)
            .iter()
            .any(|e| matches!(e, ConsumerEvent::CommitCompleted { .. })),
        "exactly one outcome"
    );

    // The same failure under a sync commit is retried and succeeds.
    w.sim.inject_fault(FaultRule::next(
        ApiKey::OFFSET_COMMIT,
        1,
        Fault::CloseConnection,
    ));
    let id = w.client.commit(w.now).unwrap();
    let (kind, result) = commit_outcome(&mut w, id);
    assert_eq!(kind, CommitKind::Sync);
    assert_eq!(result, Ok(vec![(tp.clone(), p2)]));
    assert_eq!(
        w.client.counters().api(ApiKey::OFFSET_COMMIT).requests,
        sent + 3
    );
    assert_eq!(w.client.committed(&tp), Some(p2));
}

#[test]
fn none_policy_with_nothing_committed_waits_for_a_seek_or_a_commit() {
    let mut cfg = consumer_config("broker-1:9092", Some("nopos"));
    cfg.consumer.auto_offset_reset = OffsetReset::None;
    cfg.consumer.enable_auto_commit = false;
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 6, 4);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::NoPosition(p) if *p == tp
    )));
    assert!(w.client.counters().api(ApiKey::OFFSET_FETCH).requests >= 1);
    w.advance(Duration::from_secs(5));
    assert_eq!(w.client.position(&tp), None);
    assert!(w.client.poll_record().is_none());
    assert_eq!(
        w.client.counters().api(ApiKey::FETCH).requests,
        0,
        "nothing fetched without a position"
    );
    assert_eq!(w.client.counters().api(ApiKey::LIST_OFFSETS).requests, 0);
    // Asking for the committed position again: still none.
    consumer_events(&mut w);
    w.client.seek(w.now, &tp, SeekTo::Committed).unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::NoPosition(_)
    )));
    // Once something is committed, seeking to it starts there (mid-blob).
    let at = Position::new(2, 1);
    let id = w
        .client
        .commit_positions(w.now, vec![(tp.clone(), at)])
        .unwrap();
    let (_, result) = commit_outcome(&mut w, id);
    assert!(result.is_ok());
    w.client.seek(w.now, &tp, SeekTo::Committed).unwrap();
    let want: Vec<_> = exp[&tp]
        .iter()
        .filter(|(p, _)| *p >= (2, 1))
        .map(|(p, _)| *p)
        .collect();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= want.len());
    assert_eq!(
        got[&tp].iter().map(|(p, _, _)| *p).collect::<Vec<_>>(),
        want
    );
    assert!(consumer_events(&mut w).iter().any(|e| matches!(
        e,
        ConsumerEvent::PositionResolved { position, committed: true, .. } if *position == at
    )));
}

#[test]
fn auto_commit_resumes_after_a_failed_commit_lost_the_coordinator() {
    let (mut w, tp) = auto_commit_world("again", Duration::from_secs(2));
    w.sim.inject_fault(FaultRule::next(
        ApiKey::OFFSET_COMMIT,
        1,
        Fault::CloseConnection,
    ));
    let mut run = AutoRun {
        tp: tp.clone(),
        got: Got::new(),
        auto: Vec::new(),
        failed: Vec::new(),
        next_blob: w.now,
        blobs: 0,
    };
    let t = w.now;
    run.run(&mut w, t + Duration::from_secs(20), true);
    // The first auto commit failed (and is not retried); later ones go through.
    assert_eq!(run.failed.len(), 1, "{:?}", run.failed);
    assert!(run.auto.len() >= 7, "{:?}", run.auto);
    let t = w.now;
    run.run(&mut w, t + Duration::from_secs(5), false);
    assert_eq!(w.client.committed(&tp), Some(Position::blob(run.blobs)));
}

/// Regression: a sync commit queued while the coordinator is unknown only checked its
/// deadline when a response came, so against a silent broker it waited forever. It must fail
/// with a retriable timeout at its deadline, woken by `poll_timeout`.
#[test]
fn a_commit_waiting_for_a_silent_coordinator_fails_at_its_deadline() {
    let mut cfg = consumer_config("broker-1:9092", Some("silent"));
    cfg.consumer.enable_auto_commit = false;
    cfg.consumer.rebalance_timeout = Duration::from_secs(12);
    cfg.request_timeout = Duration::from_secs(2);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 6, 4);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let n = exp[&tp].len();
    drain(&mut w, Duration::from_secs(10), |g| count(g) >= n / 2);
    consumer_events(&mut w);
    // The broker stops answering anything.
    w.sim.inject_fault(FaultRule {
        broker: None,
        api_key: None,
        fault: Fault::DropResponse,
        probability: 1.0,
        remaining: None,
    });
    let t0 = w.now;
    let id = w.client.commit(w.now).unwrap();
    let ok = wait_for(
        &mut w,
        Duration::from_secs(60),
        |e| matches!(e, ConsumerEvent::CommitCompleted { id: i, .. } if *i == id),
    );
    assert!(ok, "the commit never completed");
    let took = w.now - t0;
    assert!(
        took <= Duration::from_secs(12),
        "completed after {took:?}, past its 12 s deadline"
    );
    let result = consumer_events(&mut w)
        .into_iter()
        .find_map(|e| match e {
            ConsumerEvent::CommitCompleted { id: i, result, .. } if i == id => Some(result),
            _ => None,
        })
        .unwrap();
    assert!(
        matches!(result, Err(ConsumerError::Request(ref e)) if e.is_retriable()),
        "{result:?}"
    );
    assert_eq!(w.client.committed(&tp), None);
    // Nothing keeps the driver spinning afterwards.
    advance_checked(&mut w, Duration::from_secs(5));
}

/// The admin OffsetFetch: a group's committed positions through FindCoordinator and the
/// coordinator's host:port, typed (mid-blob index included), in request order.
#[test]
fn admin_committed_offsets_reads_what_the_consumer_committed() {
    let (mut w, tp, exp) = commit_world("adm");
    let n = exp[&tp].len();
    drain(&mut w, Duration::from_secs(10), |g| count(g) >= n / 2);
    let id = w.client.commit(w.now).unwrap();
    let (_, result) = commit_outcome(&mut w, id);
    let committed = result.unwrap()[0].1;
    assert_eq!(w.client.committed(&tp), Some(committed));
    let now = w.now;
    let id = w
        .client
        .committed_offsets(now, "adm", &[("t", 0), ("other", 3)])
        .unwrap();
    let list = w.admin(id).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].topic.as_str(), list[0].partition), ("t", 0));
    assert_eq!(list[0].result, Ok(Some(committed)));
    assert_eq!((list[1].topic.as_str(), list[1].partition), ("other", 3));
    assert_eq!(list[1].result, Ok(None), "nothing committed there");
    // A group that never committed.
    let now = w.now;
    let id = w
        .client
        .committed_offsets(now, "nobody", &[("t", 0)])
        .unwrap();
    let r = w.admin(id).unwrap();
    assert_eq!(r[0].result, Ok(None), "{r:?}");
}

/// `next_position` after a blob's last record names the next blob, `(offset + 1, 0)`, the
/// same position the consumer reports (and would auto-commit) once the blob is finished;
/// inside a blob it is `(offset, index + 1)`.
#[test]
fn next_position_after_a_blob_s_last_record_is_the_next_blob() {
    let (mut w, tp, exp) = commit_world("np");
    let n = exp[&tp].len();
    let mut seen = 0;
    let mut lasts = 0;
    let ok = w.run_until(Duration::from_secs(30), |w| {
        while let Some(r) = w.client.poll_record() {
            seen += 1;
            let next = r.next_position();
            if r.last_in_blob {
                lasts += 1;
                assert_eq!(next, Position::blob(r.offset + 1));
                assert_eq!(
                    w.client.position(&tp),
                    Some(next),
                    "consistent with position()"
                );
            } else {
                assert_eq!(next, Position::new(r.offset, r.index + 1));
            }
        }
        seen >= n
    });
    assert!(ok, "{seen} of {n} records");
    assert_eq!(lasts, 10, "one last record per blob");
    // Committing it is the same as committing the consumer's own position.
    let id = w.client.commit(w.now).unwrap();
    let (_, result) = commit_outcome(&mut w, id);
    assert_eq!(result.unwrap()[0].1, Position::blob(10));
}
