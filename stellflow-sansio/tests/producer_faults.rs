//! Producer fault tests against the simulated cluster (virtual time): the delivery timeout
//! firing inside a retry loop, error 18 under idempotence, and a queued Produce following a
//! leader move without waiting for the request timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use common::producer::{Outcomes, client_config, collect, flush, leader, log_numbers};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{ClientConfig, Event};
use stellflow_sansio::{DeliveryError, ProduceError, ProduceId, ProducerConfig, ProducerRecord};
use stellflow_sim::{DelayRule, Fault, FaultRule};

/// The logs hold exactly the delivered records — each once, in produce order per partition,
/// at the position its outcome reported — and nothing that failed.
/// A world of `brokers` brokers with `topic` ready, its client configured by `c`.
fn world(brokers: usize, topic: &str, partitions: i32, rf: usize, c: ClientConfig) -> World {
    common::producer::topic_world(brokers, (topic, partitions, rf), c)
}

/// Produces `n` records over 11 keys (value = big-endian `first + i`); returns id → value.
fn produce_n(w: &mut World, topic: &str, first: u32, n: u32) -> BTreeMap<ProduceId, u32> {
    common::producer::produce_n(w, topic, first, n, 11)
}

fn check_logs(
    w: &World,
    topic: &str,
    partitions: i32,
    out: &Outcomes,
    ids: &BTreeMap<ProduceId, u32>,
) {
    let mut by_pos = HashMap::new();
    let mut in_logs = 0;
    for p in 0..partitions {
        let log = log_numbers(w, leader(w, topic, p), topic, p);
        let values: Vec<u32> = log.iter().map(|e| e.2).collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]),
            "partition {p} reordered or duplicated: {values:?}"
        );
        in_logs += log.len();
        for (o, i, v) in log {
            by_pos.insert((p, o, i), v);
        }
    }
    let mut delivered = 0;
    for (id, v) in ids {
        match out
            .get(id)
            .unwrap_or_else(|| panic!("no outcome for {id:?}"))
        {
            Ok(md) => {
                delivered += 1;
                let pos = (md.partition, md.offset.unwrap(), md.index);
                assert_eq!(by_pos.get(&pos), Some(v), "{id:?} reported at {pos:?}");
            }
            Err(_) => assert!(
                !by_pos.values().any(|x| x == v),
                "{id:?} (value {v}) failed but is in a log"
            ),
        }
    }
    assert_eq!(
        in_logs, delivered,
        "the logs hold exactly the delivered records"
    );
}

fn is_timeout_after_not_leader(e: &DeliveryError, after: Duration) -> bool {
    matches!(
        e,
        DeliveryError::Timeout { after: a, last: Some(last) }
            if *a == after
                && **last == DeliveryError::Broker { code: ErrorCode::NOT_LEADER_OR_FOLLOWER }
    )
}

/// The broker answers every Produce with a retriable 9: the producer retries with backoff
/// until the delivery timeout, then fails every record once with a `Timeout` carrying the
/// last error — not before the timeout, not long after it. Afterwards the partitions work
/// again and new records land in order.
#[test]
fn delivery_timeout_ends_a_retry_loop_with_one_timeout_per_record() {
    let timeout = Duration::from_secs(2);
    let mut p = ProducerConfig::default();
    p.delivery_timeout = timeout;
    p.retry_backoff = Duration::from_millis(20);
    p.retry_backoff_max = Duration::from_millis(200);
    p.batch_size = 1024;
    let mut w = world(1, "t", 3, 1, client_config(1, p));
    w.sim.inject_fault(FaultRule::random(
        ApiKey::PRODUCE,
        1.0,
        Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER),
    ));
    let start = w.now;
    let ids = produce_n(&mut w, "t", 0, 300);
    let mut out = Outcomes::new();
    w.advance(timeout - Duration::from_millis(100) - (w.now - start));
    collect(&mut w, &mut out);
    assert!(
        out.is_empty(),
        "nothing may fail before the delivery timeout: {out:?}"
    );
    assert!(
        w.client.counters().producer_retries > 10,
        "it kept retrying"
    );
    // Every batch expires within a backoff of its deadline.
    w.advance(Duration::from_millis(100 + 250));
    collect(&mut w, &mut out);
    assert_eq!(out.len(), ids.len(), "every record has its outcome");
    for (id, r) in &out {
        let e = r.as_ref().expect_err("nothing was written");
        assert!(is_timeout_after_not_leader(e, timeout), "{id:?}: {e:?}");
        assert!(e.to_string().contains("not delivered within"), "{e}");
    }
    assert_eq!(w.client.producer_buffered_bytes(), 0, "memory released");

    // The broker recovers: later records are delivered, in order, and only they are logged.
    w.sim.clear_faults();
    let more = produce_n(&mut w, "t", 1000, 300);
    flush(&mut w);
    collect(&mut w, &mut out);
    let mut all = ids.clone();
    all.extend(more.iter().map(|(k, v)| (*k, *v)));
    check_logs(&w, "t", 3, &out, &all);
    assert!(more.keys().all(|id| out[id].is_ok()));
    // Nothing further arrives for the expired records.
    w.advance(Duration::from_secs(5));
    collect(&mut w, &mut out);
}

/// Intermittent retriable errors with a short delivery timeout: some batches expire in the
/// retry loop, the others get through. Every record has exactly one outcome, expired records
/// are never in the log, and each partition's log stays in produce order without duplicates.
#[test]
fn delivery_timeout_under_intermittent_errors_never_reorders() {
    let timeout = Duration::from_millis(300);
    let mut p = ProducerConfig::default();
    p.delivery_timeout = timeout;
    p.retry_backoff = Duration::from_millis(40);
    p.retry_backoff_max = Duration::from_millis(160);
    p.linger = Duration::from_millis(2);
    p.batch_size = 2048;
    let mut w = world(2, "m", 4, 1, client_config(2, p));
    w.sim.set_reordering(0.3, 0.3);
    w.sim.inject_fault(FaultRule::random(
        ApiKey::PRODUCE,
        0.6,
        Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER),
    ));
    let ids = produce_n(&mut w, "m", 0, 3000);
    flush(&mut w);
    let mut out = Outcomes::new();
    collect(&mut w, &mut out);
    assert_eq!(out.len(), ids.len());
    let failed: Vec<&DeliveryError> = out.values().filter_map(|r| r.as_ref().err()).collect();
    let delivered = out.len() - failed.len();
    assert!(
        !failed.is_empty() && delivered > 0,
        "{} failed, {delivered} delivered",
        failed.len()
    );
    for e in &failed {
        assert!(is_timeout_after_not_leader(e, timeout), "{e:?}");
    }
    check_logs(&w, "m", 4, &out, &ids);
}

/// Idempotence and error 18 (the broker bound our producer id to another producer key): the
/// batch fails with the dedicated fatal error, everything queued behind it fails with it at
/// once (no waiting for the delivery timeout), each record exactly once; what was delivered
/// before stays delivered, and `produce` refuses new records.
#[test]
fn error_18_under_idempotence_is_fatal_with_one_outcome_per_record() {
    let mut p = ProducerConfig::default();
    p.idempotence = true;
    p.linger = Duration::from_millis(2);
    p.batch_size = 1024;
    let mut c = client_config(1, p);
    c.header.client_id = Some("idem-18".into());
    let mut w = world(1, "x", 4, 1, c);
    let mut ids = produce_n(&mut w, "x", 0, 200);
    flush(&mut w);
    let mut out = Outcomes::new();
    collect(&mut w, &mut out);
    assert!(out.values().all(Result::is_ok));

    // Answers take 50 ms, so later batches queue behind the one that meets the 18.
    w.sim.add_delay(DelayRule {
        broker: None,
        api_key: Some(ApiKey::PRODUCE),
        delay: Duration::from_millis(50),
    });
    w.sim.inject_fault(FaultRule::next(
        ApiKey::PRODUCE,
        1,
        Fault::PartitionError(ErrorCode::CONCURRENT_TRANSACTIONS),
    ));
    let start = w.now;
    ids.extend(produce_n(&mut w, "x", 200, 400));
    let done = w.run_until(Duration::from_secs(5), |w| {
        w.events
            .iter()
            .filter(|e| matches!(e, Event::Produced { .. }))
            .count()
            == 400
    });
    assert!(
        done,
        "every record has an outcome well before the delivery timeout"
    );
    assert!(
        w.now - start < Duration::from_secs(1),
        "took {:?}",
        w.now - start
    );
    collect(&mut w, &mut out);
    let conflicts = out
        .values()
        .filter(|r| matches!(r, Err(DeliveryError::ProducerIdConflict)))
        .count();
    assert!(conflicts > 0);
    for (id, r) in &out {
        match r {
            Ok(_) => {}
            Err(DeliveryError::ProducerIdConflict) => {}
            Err(e) => panic!("{id:?}: unexpected {e:?}"),
        }
    }
    let msg = DeliveryError::ProducerIdConflict.to_string();
    assert!(
        msg.contains("error 18") && msg.contains("client_id"),
        "{msg}"
    );
    assert_eq!(
        w.client.produce(w.now, &ProducerRecord::new("x", b"late")),
        Err(ProduceError::Fenced)
    );
    assert_eq!(w.client.producer_buffered_bytes(), 0, "memory released");
    // A flush after the fatal error completes at once, and nothing else arrives.
    flush(&mut w);
    w.advance(Duration::from_secs(5));
    collect(&mut w, &mut out);
    assert_eq!(out.len(), 600);
    check_logs(&w, "x", 4, &out, &ids);
}

/// A Produce queued for a leader that crashed waits (unsent) in the router while the client
/// reconnects; metadata then names a new leader. The request is withdrawn and its batch sent
/// to the new leader at once — well under the 30 s request timeout — without duplicates or
/// reordering.
#[test]
fn queued_produce_follows_a_leader_move_without_waiting_for_the_request_timeout() {
    let mut p = ProducerConfig::default();
    p.linger = Duration::from_millis(2);
    p.retry_backoff = Duration::from_millis(20);
    let mut c = client_config(2, p);
    c.request_timeout = Duration::from_secs(30);
    let mut w = world(2, "q", 1, 2, c);
    let mut ids = produce_n(&mut w, "q", 0, 100);
    flush(&mut w);
    let old = leader(&w, "q", 0);
    let new = 3 - old;

    // The leader dies; its connection closes and reconnecting fails.
    w.sim.crash(old, w.now).unwrap();
    w.step();
    // New records: their batch is drained towards the old leader and queues there, unsent.
    let start: Instant = w.now;
    ids.extend(produce_n(&mut w, "q", 100, 100));
    w.advance(Duration::from_millis(10));
    let mut out = Outcomes::new();
    collect(&mut w, &mut out);
    assert_eq!(
        out.len(),
        100,
        "the first 100 records were delivered before the crash"
    );
    // The controller moves the leadership (and drops the dead replica from the ISR, so
    // acks=-1 can complete); the client learns it.
    w.sim.move_leader("q", 0, new).unwrap();
    w.sim.set_isr("q", 0, vec![new]).unwrap();
    w.client.refresh_metadata(w.now);
    let done = w.run_until(Duration::from_secs(60), |w| {
        w.events
            .iter()
            .filter(|e| matches!(e, Event::Produced { .. }))
            .count()
            == 100
    });
    assert!(done);
    let took = w.now - start;
    assert!(
        took < Duration::from_secs(2),
        "took {took:?} (request timeout 30 s)"
    );
    assert_eq!(leader(&w, "q", 0), new);
    collect(&mut w, &mut out);
    assert!(out.values().all(Result::is_ok), "{out:?}");
    check_logs(&w, "q", 1, &out, &ids);
    assert_eq!(
        w.client.counters().timeouts,
        0,
        "no request waited for its timeout"
    );
}

/// Every Produce is executed but its answer never comes (DESIGN §3 item 14): the client
/// cannot know whether the records were written, so when the delivery timeout ends the
/// attempts each record fails once with `MaybeWritten` — never a plain "not delivered"
/// `Timeout` — and the log does hold them. Without idempotence a record may be there more
/// than once (at-least-once); with idempotence exactly once (retries are de-duplicated and
/// never sent while the request they replace may still execute).
#[test]
fn unanswered_produce_is_reported_as_maybe_written() {
    for idempotence in [false, true] {
        let timeout = Duration::from_secs(3);
        let mut p = ProducerConfig::default();
        p.delivery_timeout = timeout;
        p.idempotence = idempotence;
        p.ack_timeout = Duration::from_millis(300); // a Produce times out after 1.3 s
        p.retry_backoff = Duration::from_millis(20);
        let mut c = client_config(1, p);
        c.request_timeout = Duration::from_millis(400);
        let mut w = world(1, "t", 1, 1, c);
        w.sim
            .inject_fault(FaultRule::random(ApiKey::PRODUCE, 1.0, Fault::DropResponse));
        let ids = produce_n(&mut w, "t", 0, 20);
        let mut out = Outcomes::new();
        w.advance(timeout + Duration::from_secs(6));
        collect(&mut w, &mut out);
        assert_eq!(
            out.len(),
            ids.len(),
            "idempotence {idempotence}: every record has its outcome"
        );
        for (id, r) in &out {
            let e = r.as_ref().expect_err("no answer ever came");
            assert!(
                matches!(e, DeliveryError::MaybeWritten { .. }) && e.outcome_unknown(),
                "idempotence {idempotence}, {id:?}: {e:?}"
            );
            assert!(e.to_string().contains("may have been written"), "{e}");
        }
        let logged = log_numbers(&w, 1, "t", 0);
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
        for (_, _, v) in &logged {
            *counts.entry(*v).or_default() += 1;
        }
        assert!(
            ids.values().all(|v| counts.contains_key(v)),
            "the records were written: {counts:?}"
        );
        if idempotence {
            assert!(
                counts.values().all(|n| *n == 1),
                "idempotence: each record once, {counts:?}"
            );
        }
    }
}

/// A broker restarted on its data reports its partitions leaderless (leader 0) until
/// leadership is re-asserted. A producer that keeps sending (one record every 20 ms) through
/// 7 leaderless seconds gets its next acknowledgement within the metadata refresh cap (1 s by
/// default) plus a round trip of the re-assertion: the leaderless partition is re-checked on
/// the cap, and a batch whose retry waited for a leader is sent as soon as the metadata names
/// one.
#[test]
fn a_producer_resumes_within_the_refresh_cap_once_leadership_is_reasserted() {
    let mut w = world(1, "back", 1, 1, client_config(1, ProducerConfig::default()));
    let mut out = Outcomes::new();
    let mut ids = produce_n(&mut w, "back", 0, 1);
    flush(&mut w);
    collect(&mut w, &mut out);
    assert!(out.values().all(Result::is_ok));
    w.sim.restart(1, w.now).unwrap();
    let leaderless_until = w.now + Duration::from_secs(7);
    let mut next = 1u32;
    while w.now < leaderless_until {
        ids.extend(produce_n(&mut w, "back", next, 1));
        next += 1;
        w.advance(Duration::from_millis(20));
    }
    collect(&mut w, &mut out);
    assert_eq!(out.len(), 1, "nothing acknowledged while leaderless");
    w.sim.reassert_leadership(1).unwrap();
    let reasserted = w.now;
    let mut first_ack = None;
    while w.now < reasserted + Duration::from_secs(10) && first_ack.is_none() {
        ids.extend(produce_n(&mut w, "back", next, 1));
        next += 1;
        w.advance(Duration::from_millis(20));
        collect(&mut w, &mut out);
        if out.len() > 1 {
            first_ack = Some(w.now - reasserted);
        }
    }
    let waited = first_ack.expect("the producer never resumed");
    // The default cap, 1 s, plus a round trip (none to speak of here) and the 20 ms step.
    assert!(
        waited <= Duration::from_millis(1_050),
        "resumed after {waited:?}"
    );
    flush(&mut w);
    collect(&mut w, &mut out);
    assert_eq!(out.len(), ids.len());
    assert!(out.values().all(Result::is_ok), "{out:?}");
}

/// Like Kafka's KIP-951: a batch refused with NOT_LEADER_OR_FOLLOWER waits out its
/// retry backoff only while nothing changed; as soon as the metadata names another leader it
/// is sent there, without waiting for the rest of the backoff.
#[test]
fn a_batch_refused_by_a_former_leader_goes_to_the_new_one_without_its_backoff() {
    let mut p = ProducerConfig::default();
    p.linger = Duration::from_millis(2);
    p.retry_backoff = Duration::from_secs(3);
    p.retry_backoff_max = Duration::from_secs(3);
    let mut w = world(2, "k", 1, 2, client_config(2, p));
    let mut ids = produce_n(&mut w, "k", 0, 1);
    flush(&mut w);
    let old = leader(&w, "k", 0);
    // The leadership moves and the client does not know yet: its next batch is refused.
    w.sim.move_leader("k", 0, 3 - old).unwrap();
    let start = w.now;
    ids.extend(produce_n(&mut w, "k", 1, 1));
    let done = w.run_until(Duration::from_secs(30), |w| {
        w.events
            .iter()
            .filter(|e| matches!(e, Event::Produced { .. }))
            .count()
            == 2
    });
    assert!(done);
    let took = w.now - start;
    assert!(
        took < Duration::from_secs(1),
        "took {took:?} (retry backoff 2.4–3 s)"
    );
    assert!(
        w.client.counters().producer_retries >= 1,
        "it was refused once"
    );
    let mut out = Outcomes::new();
    collect(&mut w, &mut out);
    assert!(out.values().all(Result::is_ok), "{out:?}");
    check_logs(&w, "k", 1, &out, &ids);
}

/// Cuts every connection of the client, as a proxy that drops them would.
fn cut_all(w: &mut World) {
    let now = w.now;
    for (c, sc) in std::mem::take(&mut w.to_sim) {
        w.to_client.remove(&sc);
        w.sim.disconnect(sc);
        w.client
            .handle_disconnected(c, now, stellflow_sansio::DisconnectReason::PeerClosed);
    }
    w.step();
}

/// An idempotent producer whose connection is cut with a Produce in flight
/// re-sends it on the fresh connection as soon as the broker answers there (plus a 1 s
/// settle), in order and with the same sequence numbers — not a request timeout (30 s here)
/// later. Whether the lost original was executed (its answer dropped) or never reached the
/// broker, each record is in the log once, at the offset its outcome reports.
#[test]
fn an_idempotent_producer_resends_within_a_round_trip_after_a_cut() {
    for executed in [true, false] {
        let mut p = ProducerConfig::default();
        p.idempotence = true;
        let mut c = client_config(1, p);
        c.request_timeout = Duration::from_secs(30);
        let mut w = world(1, "t", 1, 1, c);
        let fault = if executed {
            Fault::DropResponse
        } else {
            Fault::CloseConnection
        };
        w.sim
            .inject_fault(FaultRule::next(ApiKey::PRODUCE, 1, fault));
        let mut ids = produce_n(&mut w, "t", 0, 10);
        // Let the first batch go out; it is executed without an answer, or the broker
        // closes the connection without executing it.
        assert!(w.run_until(Duration::from_secs(2), |w| {
            if executed {
                log_numbers(w, 1, "t", 0).len() == 10
            } else {
                w.to_sim.is_empty()
            }
        }));
        // More records queue behind the batch in flight (one request per partition).
        ids.extend(produce_n(&mut w, "t", 10, 10));
        w.advance(Duration::from_millis(50));
        let cut = w.now;
        if executed {
            cut_all(&mut w);
        }
        let mut out = Outcomes::new();
        let done = w.run_until(Duration::from_secs(60), |w| {
            collect(w, &mut out);
            out.len() == ids.len()
        });
        assert!(done, "executed {executed}: {} outcomes", out.len());
        let took = w.now - cut;
        assert!(
            took < Duration::from_secs(2),
            "executed {executed}: the in-flight batch was re-sent {took:?} after the cut"
        );
        assert!(
            out.values().all(Result::is_ok),
            "executed {executed}: {out:?}"
        );
        check_logs(&w, "t", 1, &out, &ids);
    }
}

/// An `acks = -1` batch of a replicated partition may be held by the broker for its followers
/// up to the ack timeout before its sequence is recorded: in doubt after a cut, it waits that
/// long (plus the settle) after the fresh connection's answer (and no request timeout more),
/// and is in the log once.
#[test]
fn a_replicated_acks_all_batch_in_doubt_waits_the_ack_timeout() {
    let mut p = ProducerConfig::default();
    p.idempotence = true;
    p.ack_timeout = Duration::from_secs(2);
    let mut c = client_config(3, p);
    c.request_timeout = Duration::from_secs(30);
    let mut w = world(3, "r", 1, 3, c);
    let lead = leader(&w, "r", 0);
    w.sim
        .inject_fault(FaultRule::next(ApiKey::PRODUCE, 1, Fault::DropResponse));
    let ids = produce_n(&mut w, "r", 0, 10);
    assert!(w.run_until(Duration::from_secs(2), |w| {
        log_numbers(w, lead, "r", 0).len() == 10
    }));
    let cut = w.now;
    cut_all(&mut w);
    let mut out = Outcomes::new();
    let mut resent_at = None;
    let done = w.run_until(Duration::from_secs(60), |w| {
        collect(w, &mut out);
        if resent_at.is_none() && !out.is_empty() {
            resent_at = Some(w.now);
        }
        out.len() == ids.len()
    });
    assert!(done, "{} outcomes", out.len());
    let took = resent_at.unwrap() - cut;
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(4),
        "re-sent {took:?} after the cut (ack timeout 2 s plus the 1 s settle)"
    );
    assert!(out.values().all(Result::is_ok), "{out:?}");
    check_logs(&w, "r", 1, &out, &ids);
}

/// The real server records an idempotent batch's sequence only after its append and flush,
/// with nothing held across check, append and record; under load an original cut off with
/// its connection finished more than 100 ms after the broker answered on the fresh
/// connection, and a copy checked before its record was appended a second time. In doubt
/// after a cut, a batch whose original records its sequence 300 ms after its append is
/// re-sent only after that, so the re-send is a duplicate and each record is in the log once.
#[test]
fn an_in_doubt_batch_is_not_resent_while_its_original_may_still_be_recording() {
    let mut p = ProducerConfig::default();
    p.idempotence = true;
    let mut c = client_config(1, p);
    c.request_timeout = Duration::from_secs(30);
    let mut w = world(1, "s", 1, 1, c);
    w.sim.set_record_lag(Duration::from_millis(300));
    w.sim
        .inject_fault(FaultRule::next(ApiKey::PRODUCE, 1, Fault::DropResponse));
    let ids = produce_n(&mut w, "s", 0, 10);
    // The original is appended (visible) at once; its sequence is recorded 300 ms later.
    assert!(w.run_until(Duration::from_secs(2), |w| {
        log_values(w, 1, "s", 0).len() == 10
    }));
    cut_all(&mut w);
    let mut out = Outcomes::new();
    let done = w.run_until(Duration::from_secs(60), |w| {
        collect(w, &mut out);
        out.len() == ids.len()
    });
    assert!(done, "{} outcomes", out.len());
    assert!(out.values().all(Result::is_ok), "{out:?}");
    check_logs(&w, "s", 1, &out, &ids);
}
