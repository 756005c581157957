//! A dead cluster reaches every caller in time: a consumer's poll gets the unreachable error
//! within `unreachable_timeout` (+ the slack below) whether it is a group member or not and
//! whether the cluster went away before or after its first poll, and an admin call fails
//! with the same cause instead of waiting out its own retries.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    AdminCall, ClusterUnreachable, ConsumerEvent, HealthState, Target, TopicPartition,
};
use stellflow_sim::ClusterConfig;

/// How late after `unreachable_timeout` the error may come: the health check runs at the
/// deadline itself; the slack covers the driver's wake-up and a connection attempt in flight.
const SLACK: Duration = Duration::from_secs(2);

/// Runs `w` until the consumer's poll would get the unreachable error; the instant it came.
fn first_unreachable(
    w: &mut common::World,
    max: Duration,
) -> Option<(Instant, ClusterUnreachable)> {
    let mut got = None;
    w.run_until(max, |w| {
        got = w.client.take_unreachable_error().map(|e| (w.now, e));
        got.is_some()
    });
    got
}

#[test]
fn a_group_member_gets_the_unreachable_error_in_time() {
    let mut w = subscribed_world_with("dead", |c| {
        c.unreachable_timeout = Duration::from_secs(10);
        c.consumer.session_timeout = Duration::from_secs(45);
        c.consumer.heartbeat_interval = Duration::from_secs(3);
        // A close commit would be retried until rebalance_timeout, as Kafka's close waits
        // for it: only the registry's slot is given up at once.
        c.consumer.enable_auto_commit = false;
    });
    let exp = fill(&mut w, "s", 2, 4, 4);
    let total: usize = exp.values().map(Vec::len).sum();
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) == total);
    assert_eq!(count(&got), total);
    let crashed = w.now;
    w.sim.crash(1, w.now).unwrap();
    let (at, e) = first_unreachable(&mut w, Duration::from_secs(60)).expect("no unreachable error");
    let took = at - crashed;
    assert!(
        took <= Duration::from_secs(10) + SLACK,
        "after {took:?}: {e}"
    );
    assert!(e.to_string().contains("broker-1:9092"), "{e}");
    // Closing now does not wait to free the registry slot, which no broker can write.
    let asked = w.now;
    w.client.close_consumer(w.now);
    let closed = wait_for(&mut w, Duration::from_secs(60), |e| {
        matches!(e, ConsumerEvent::Closed)
    });
    assert!(closed, "never closed");
    assert!(
        w.now - asked < Duration::from_secs(1),
        "closed after {:?}",
        w.now - asked
    );
}

#[test]
fn a_consumer_assigned_after_the_cluster_went_away_gets_the_error_at_once() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.unreachable_timeout = Duration::from_secs(5);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    w.bootstrap();
    let crashed = w.now;
    w.sim.crash(1, w.now).unwrap();
    // Something asks the cluster (a metadata refresh), so the outage is noticed.
    w.client.refresh_metadata(w.now);
    w.run_until(Duration::from_secs(30), |w| {
        matches!(
            w.client.cluster_health().state,
            HealthState::Unreachable { .. }
        )
    });
    assert!(matches!(
        w.client.cluster_health().state,
        HealthState::Unreachable { .. }
    ));
    w.client
        .assign(w.now, &[TopicPartition::new("t", 0)])
        .unwrap();
    let (at, e) = first_unreachable(&mut w, Duration::from_secs(30)).expect("no unreachable error");
    assert!(
        at - crashed <= Duration::from_secs(5) + SLACK,
        "after {:?}: {e}",
        at - crashed
    );
}

#[test]
fn an_admin_call_fails_with_the_unreachable_cause_in_time() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.unreachable_timeout = Duration::from_secs(5);
    cfg.request_timeout = Duration::from_secs(30);
    let mut w = common::World::with(ClusterConfig::with_brokers(1), cfg);
    w.bootstrap();
    let crashed = w.now;
    w.sim.crash(1, w.now).unwrap();
    // The client finds the broker gone (a refresh meets the closed connection), then a
    // command is asked while it reconnects in vain.
    w.client.refresh_metadata(w.now);
    w.advance(Duration::from_secs(1));
    let id = (w.client)
        .admin(
            w.now,
            AdminCall::describe_cluster(Target::Any),
            &Default::default(),
        )
        .unwrap();
    let r = w.admin(id);
    let took = w.now - crashed;
    let e = r.expect_err("the cluster is gone");
    assert!(
        took <= Duration::from_secs(5) + SLACK,
        "after {took:?}: {e}"
    );
    assert!(e.to_string().contains("unreachable"), "{e}");
}
