//! Consumer group membership against the simulated cluster in-process: commit before
//! revocation, rejoins after a coordinator disconnect, a crash and the session timeout,
//! SyncGroup retries, and `close_consumer` answered once per call.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::Duration;
use stellflow_proto::ApiKey;
use stellflow_proto::messages::JoinGroupRequest;
use stellflow_sansio::{CommitKind, ConsumerEvent, Event, Position, TopicPartition};
use stellflow_sim::{ClusterConfig, Fault, FaultRule};

fn generation(w: &common::World) -> i32 {
    w.client.group_member().map_or(-1, |(_, g)| g)
}

#[test]
fn revocation_commits_positions_before_the_partitions_go() {
    let mut w = subscribed_world_with("rev", |c| {
        // Only the revocation may commit.
        c.consumer.auto_commit_interval = Duration::from_secs(3600);
    });
    w.sim.create_topic("other", 1, 1).unwrap();
    let exp = fill(&mut w, "s", 2, 8, 4);
    let (s0, s1) = (TopicPartition::new("s", 0), TopicPartition::new("s", 1));
    let total: usize = exp.values().map(Vec::len).sum();
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= total / 2);
    assert!(count(&got) >= total / 2);
    let before: Vec<(TopicPartition, Position)> = [&s0, &s1]
        .into_iter()
        .map(|tp| ((*tp).clone(), w.client.position(tp).expect("positioned")))
        .collect();
    assert_eq!(w.client.committed(&s0), None, "nothing committed yet");
    consumer_events(&mut w);

    // A new subscription takes `s` away.
    w.client.subscribe(w.now, &["other"]).unwrap();
    let ok = wait_for(&mut w, Duration::from_secs(30), |e| {
        matches!(
            e,
            ConsumerEvent::CommitCompleted {
                kind: CommitKind::Revocation,
                ..
            }
        )
    });
    assert!(ok, "{:?}", w.events);
    let ev = consumer_events(&mut w);
    let revoked = ev
        .iter()
        .position(|e| matches!(e, ConsumerEvent::PartitionsRevoked(p) if *p == vec![s0.clone(), s1.clone()]))
        .expect("s revoked");
    let assigned = ev
        .iter()
        .position(|e| matches!(e, ConsumerEvent::PartitionsAssigned(p) if *p == vec![TopicPartition::new("other", 0)]))
        .expect("other assigned");
    assert!(revoked < assigned, "revoked before assigned: {ev:?}");
    let committed = ev
        .iter()
        .find_map(|e| match e {
            ConsumerEvent::CommitCompleted {
                kind: CommitKind::Revocation,
                result,
                ..
            } => Some(result.clone()),
            _ => None,
        })
        .expect("revocation commit");
    let mut committed = committed.expect("revocation commit succeeded");
    committed.sort();
    assert_eq!(
        committed, before,
        "the positions at revocation were committed"
    );
    assert_eq!(w.client.assignment(), vec![TopicPartition::new("other", 0)]);

    // The broker holds them: a fresh member of the group resumes exactly there.
    let mut cfg = consumer_config("broker-1:9092", Some("rev"));
    cfg.consumer.enable_auto_commit = false;
    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, &[s0.clone(), s1.clone()]).unwrap();
    let rest: usize = exp
        .iter()
        .map(|(tp, e)| {
            let p = before.iter().find(|(t, _)| t == tp).unwrap().1;
            e.iter()
                .filter(|((o, i), _)| (*o, *i) >= (p.offset, p.index))
                .count()
        })
        .sum();
    let got2 = drain(&mut w, Duration::from_secs(30), |g| count(g) >= rest);
    let mut all = got;
    for (tp, v) in got2 {
        all.entry(tp).or_default().extend(v);
    }
    assert_exact(&exp, &all);
}

/// A lost connection to the coordinator is not a lost session (the session lives on the
/// server): the member looks the coordinator up again and heartbeats the same generation on a
/// new connection, without rejoining. Was a rejoin (and, on this server, a generation bump that
/// fences every other member); found by the dst soak (seed 2363443201538263633).
#[test]
fn a_coordinator_disconnect_keeps_the_membership_and_keeps_consuming() {
    let mut w = subscribed_world("disc");
    let member = w.client.group_member().map(|(m, _)| m.to_owned()).unwrap();
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );
    let finds = w.client.counters().api(ApiKey::FIND_COORDINATOR).requests;
    let reads = w.client.counters().api(ApiKey::OFFSET_FETCH).requests;
    consumer_events(&mut w);
    // The coordinator drops the connection on the next registry read, with it in flight.
    w.sim.inject_fault(FaultRule::next(
        ApiKey::OFFSET_FETCH,
        1,
        Fault::CloseConnection,
    ));
    // Regression: while the coordinator was being looked up again, a past instant was
    // reported by poll_timeout and the driver spun.
    advance_checked(&mut w, Duration::from_secs(10));
    assert!(
        w.events
            .iter()
            .any(|e| matches!(e, Event::Disconnected { .. })),
        "{:?}",
        w.events
    );
    assert!(
        w.client.counters().api(ApiKey::FIND_COORDINATOR).requests > finds,
        "the coordinator is looked up again"
    );
    w.advance(Duration::from_secs(30));
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::GroupRejoining { .. } | ConsumerEvent::PartitionsLost(_)
        )),
        "a lost connection is no reason to rejoin: {ev:?}"
    );
    assert_eq!(
        w.client.group_member().map(|(m, _)| m.to_owned()),
        Some(member),
        "same member"
    );
    assert!(
        w.client.counters().api(ApiKey::OFFSET_FETCH).requests > reads + 8,
        "registry rounds go on over the new connection"
    );
    assert_eq!(w.client.counters().api(ApiKey::HEARTBEAT).requests, 0);
    // Records still flow.
    let off = produce(&mut w, "s", 1, blob(Kind::V1, &[b"after".to_vec()]));
    let got = drain(&mut w, Duration::from_secs(5), |g| count(g) >= 1);
    assert_eq!(got[&TopicPartition::new("s", 1)][0].0, (off, 0));
}

#[test]
fn coordinator_crash_keeps_consuming_and_rejoins_after_restart() {
    let mut cfg = consumer_config("broker-1:9092,broker-2:9092,broker-3:9092", Some("crash"));
    cfg.consumer.session_timeout = Duration::from_secs(10);
    cfg.consumer.heartbeat_interval = Duration::from_secs(3);
    let mut w = common::World::with(ClusterConfig::with_brokers(3), cfg);
    w.sim.create_topic("c", 2, 2).unwrap();
    // The data lives on brokers 2 and 3; broker 1 is only the coordinator.
    w.sim.move_leader("c", 0, 2).unwrap();
    w.sim.move_leader("c", 1, 3).unwrap();
    w.bootstrap();
    w.client.subscribe(w.now, &["c"]).unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(20), |e| matches!(
        e,
        ConsumerEvent::GroupJoined { .. }
    )));
    let gen0 = generation(&w);
    consumer_events(&mut w);
    let (c0, c1) = (TopicPartition::new("c", 0), TopicPartition::new("c", 1));
    let mut exp = Expected::new();
    produce_values(&mut w, Some(2), &c0, Kind::V1, values("a", 3, 4), &mut exp);
    produce_values(
        &mut w,
        Some(3),
        &c1,
        Kind::Srfb,
        values("b", 3, 4),
        &mut exp,
    );
    let mut got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= 6);

    w.sim.crash(1, w.now).unwrap();
    // The controller drops the dead replica from the ISR, so the high watermark moves on
    // (the consumer delivers only below it, DESIGN §3.13).
    w.sim.set_isr("c", 0, vec![2]).unwrap();
    w.sim.set_isr("c", 1, vec![3]).unwrap();
    // While the coordinator is down the assignment keeps being consumed, until the member's
    // lease lapses (its registry refreshes go unanswered): then it may no longer assume the
    // partitions are its own, and drops them without committing.
    produce_values(
        &mut w,
        Some(2),
        &c0,
        Kind::MultiV1,
        values("c", 5, 4),
        &mut exp,
    );
    produce_values(&mut w, Some(3), &c1, Kind::V1, values("d", 2, 4), &mut exp);
    let more = drain(&mut w, Duration::from_secs(20), |g| count(g) >= 7);
    assert_eq!(count(&more), 7, "{:?}", w.events);
    for (tp, v) in more {
        got.entry(tp).or_default().extend(v);
    }
    w.advance(Duration::from_secs(20));
    let ev = consumer_events(&mut w);
    assert!(
        ev.iter()
            .any(|e| matches!(e, ConsumerEvent::PartitionsLost(p) if p.len() == 2)),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, ConsumerEvent::GroupRejoining { .. })),
        "{ev:?}"
    );
    assert!(w.client.assignment().is_empty());
    // Back up (on its data): the member joins again.
    w.sim.restart(1, w.now).unwrap();
    w.sim.reassert_leadership(1).unwrap();
    let ok = wait_for(&mut w, Duration::from_secs(60), |e| {
        matches!(e, ConsumerEvent::GroupJoined { .. })
    });
    assert!(ok, "{:?}", w.events);
    assert!(generation(&w) >= 1 && w.client.group_member().is_some());
    let _ = gen0;
    produce_values(&mut w, Some(2), &c0, Kind::V1, values("e", 1, 4), &mut exp);
    // What was delivered while the coordinator was down was never committed: it comes
    // again (at least once), then the new record.
    let last = drain(&mut w, Duration::from_secs(20), |g| {
        g.get(&c0).is_some_and(|v| v.iter().any(|r| r.0 == (2, 0)))
    });
    for (tp, v) in last {
        got.entry(tp).or_default().extend(v);
    }
    for (tp, want) in &exp {
        let have = &got[tp];
        for r in want {
            assert!(
                have.iter().any(|(p, v, _)| *p == r.0 && *v == r.1),
                "{tp}: {r:?} never delivered"
            );
        }
    }
}

#[test]
fn a_driver_stall_past_the_session_timeout_loses_the_partitions_and_rejoins_as_a_new_member() {
    let mut w = subscribed_world("stall");
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );
    let old = w.client.group_member().map(|(m, _)| m.to_owned());
    consumer_events(&mut w);
    let commits = w.client.counters().offset_commits;
    // The driver does not call in for 25 s (session timeout 10 s).
    w.now += Duration::from_secs(25);
    w.sim.handle_timeout(w.now);
    w.client.handle_timeout(w.now);
    w.step();
    let ev = consumer_events(&mut w);
    assert!(
        matches!(ev.first(), Some(ConsumerEvent::PartitionsLost(p)) if p.len() == 2),
        "the first thing after the stall: {ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, ConsumerEvent::GroupRejoining { reason, .. }
            if reason.contains("lease"))),
        "{ev:?}"
    );
    assert_eq!(
        w.client.counters().offset_commits,
        commits,
        "no commit for partitions that may be another member's"
    );
    assert!(wait_for(&mut w, Duration::from_secs(10), |e| matches!(
        e,
        ConsumerEvent::GroupJoined { .. }
    )));
    assert_ne!(w.client.group_member().map(|(m, _)| m.to_owned()), old);
    let off = produce(&mut w, "s", 0, blob(Kind::V1, &[b"x".to_vec()]));
    let got = drain(&mut w, Duration::from_secs(15), |g| {
        g.get(&TopicPartition::new("s", 0))
            .is_some_and(|v| v.iter().any(|r| r.0 == (off, 0)))
    });
    assert!(
        got[&TopicPartition::new("s", 0)]
            .iter()
            .any(|r| r.0 == (off, 0))
    );
}

#[test]
fn unanswered_registry_refreshes_drop_the_partitions_within_the_session_timeout() {
    let mut w = subscribed_world("mute");
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );
    consumer_events(&mut w);
    let t0 = w.now;
    // The coordinator executes registry writes (and commits) but never answers them.
    w.sim.inject_fault(FaultRule::random(
        ApiKey::OFFSET_COMMIT,
        1.0,
        Fault::DropResponse,
    ));
    let ok = wait_for(&mut w, Duration::from_secs(60), |e| {
        matches!(e, ConsumerEvent::PartitionsLost(_))
    });
    assert!(ok);
    assert!(
        w.now - t0 <= Duration::from_secs(10),
        "dropped {:?} after the last answered refresh; session timeout 10 s",
        w.now - t0
    );
    w.sim.clear_faults();
    assert!(
        w.run_until(Duration::from_secs(30), |w| w.client.assignment().len()
            == 2)
    );
}

/// Regression: a second `close_consumer` was silently ignored (no `Closed`), so a driver had
/// to remember the first. Every call is answered by its own `Closed`: at once after the
/// close finished, at its end while it is under way.
#[test]
fn every_close_consumer_call_gets_its_own_closed() {
    let closed = |w: &mut common::World| {
        w.take(|e| matches!(e, Event::Consumer(ConsumerEvent::Closed)))
            .len()
    };
    // Auto-commit on: the close commits first (under way for a while).
    let mut w = subscribed_world("close2");
    let exp = fill(&mut w, "s", 2, 4, 4);
    let total: usize = exp.values().map(Vec::len).sum();
    drain(&mut w, Duration::from_secs(30), |g| count(g) >= total);
    let now = w.now;
    w.client.close_consumer(now);
    w.client.close_consumer(now);
    let ok = w.run_until(Duration::from_secs(30), |w| {
        w.events
            .iter()
            .filter(|e| matches!(e, Event::Consumer(ConsumerEvent::Closed)))
            .count()
            >= 2
    });
    assert!(ok, "{:?}", w.events);
    assert_eq!(closed(&mut w), 2);
    // After the close: answered at once.
    let now = w.now;
    w.client.close_consumer(now);
    w.step();
    assert_eq!(closed(&mut w), 1);
}

/// A world like [`subscribed_world_with`] whose coordinator drops SyncGroup answers by `rule`
/// from the start; returns once the client subscribed (not joined).
fn world_dropping_sync(group: &str, rule: FaultRule) -> common::World {
    let mut cfg = consumer_config("broker-1:9092", Some(group));
    cfg.consumer.session_timeout = Duration::from_secs(10);
    cfg.consumer.heartbeat_interval = Duration::from_secs(3);
    cfg.consumer.rebalance_timeout = Duration::from_secs(4);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("s", 2, 1).unwrap();
    w.sim.inject_fault(rule);
    w.bootstrap();
    w.client.subscribe(w.now, &["s"]).unwrap();
    w
}

/// dst seed 129: a SyncGroup whose answer was lost timed out and the member rejoined, which
/// on this server bumps the generation and fences every other member. Now the SyncGroup is
/// asked again for the same generation and member id: one JoinGroup, no rejoin.
#[test]
fn a_timed_out_sync_group_is_retried_for_the_same_generation() {
    let mut w = world_dropping_sync(
        "sync-lost",
        FaultRule::next(ApiKey::SYNC_GROUP, 1, Fault::DropResponse),
    );
    assert!(wait_for(&mut w, Duration::from_secs(20), |e| matches!(
        e,
        ConsumerEvent::GroupJoined { .. }
    )));
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::GroupRejoining { .. })),
        "{ev:?}"
    );
    let c = w.client.counters();
    assert_eq!(c.api(ApiKey::JOIN_GROUP).requests, 1);
    assert_eq!(c.api(ApiKey::SYNC_GROUP).requests, 2);
    assert_eq!(generation(&w), 1);
    // And the member stays: heartbeats succeed on the generation the retry confirmed.
    w.advance(Duration::from_secs(15));
    assert!(
        !consumer_events(&mut w)
            .iter()
            .any(|e| matches!(e, ConsumerEvent::GroupRejoining { .. }))
    );
    assert_eq!(generation(&w), 1);
}

/// SyncGroup retries stop once the session the JoinGroup opened may have expired: then the
/// member rejoins (and joins once answers come through again).
#[test]
fn sync_group_retries_end_with_the_session() {
    let mut w = world_dropping_sync(
        "sync-mute",
        FaultRule::random(ApiKey::SYNC_GROUP, 1.0, Fault::DropResponse),
    );
    let t0 = w.now;
    assert!(wait_for(&mut w, Duration::from_secs(30), |e| matches!(
        e,
        ConsumerEvent::GroupRejoining { .. }
    )));
    // SyncGroup at 0, 4 and 8 s (4 s timeout each); the one timing out at 12 s is past the
    // 10 s session.
    assert!(w.now - t0 <= Duration::from_secs(13), "{:?}", w.now - t0);
    assert_eq!(w.client.counters().api(ApiKey::SYNC_GROUP).requests, 3);
    w.sim.clear_faults();
    assert!(wait_for(&mut w, Duration::from_secs(30), |e| matches!(
        e,
        ConsumerEvent::GroupJoined { .. }
    )));
}

/// A JoinGroup/SyncGroup exchange that keeps failing is retried with Kafka's 1 s cap, so the
/// member is back within about a second once the coordinator answers again; rejoins the
/// group asks for (fenced, 19) keep the longer rejoin cap that limits thrashing.
#[test]
fn failed_syncs_retry_within_a_second_and_other_members_joining_fence_nobody() {
    let mut cfg = consumer_config("broker-1:9092", Some("flaky"));
    cfg.consumer.session_timeout = Duration::from_secs(10);
    cfg.consumer.heartbeat_interval = Duration::from_secs(3);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("s", 2, 1).unwrap();
    w.bootstrap();
    // Eight SyncGroup answers fail (an error without a body).
    w.sim
        .fail_next(ApiKey::SYNC_GROUP, 8, stellflow_proto::ErrorCode(6));
    w.client.subscribe(w.now, &["s"]).unwrap();
    assert!(wait_for(&mut w, Duration::from_secs(60), |e| matches!(
        e,
        ConsumerEvent::GroupJoined { .. }
    )));
    let retries: Vec<Duration> = consumer_events(&mut w)
        .into_iter()
        .filter_map(|e| match e {
            ConsumerEvent::GroupRejoining { reason, retry_in }
                if reason.starts_with("SyncGroup") =>
            {
                Some(retry_in)
            }
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 8, "{retries:?}");
    assert!(
        retries.iter().all(|d| *d <= Duration::from_secs(1)),
        "{retries:?}"
    );
    assert!(
        retries[7] >= Duration::from_millis(800),
        "backs off: {retries:?}"
    );
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );

    // Other clients join the group again and again: on today's server each JoinGroup moves
    // the generation, which fenced every member before. Registry members do not heartbeat,
    // so nobody is fenced and nothing moves.
    for round in 0..6 {
        raw_call(
            &mut w,
            1,
            &JoinGroupRequest {
                group_id: Some("flaky".into()),
                member_id: Some(format!("intruder-{round}").into()),
                session_timeout_ms: 60_000,
            },
        );
        w.advance(Duration::from_secs(2));
    }
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::GroupRejoining { .. }
                | ConsumerEvent::PartitionsRevoking { .. }
                | ConsumerEvent::PartitionsLost(_)
                | ConsumerEvent::GroupThrashing { .. }
        )),
        "{ev:?}"
    );
    assert_eq!(w.client.assignment().len(), 2);
}
