//! Batch outcomes (`Client::set_batch_outcomes`): one `Event::ProducedBatch` per batch says
//! exactly what the per-record `Event::Produced` events of the same run say — same ids, same
//! metadata, same errors — in successes, failures and with `acks = 0`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use std::collections::BTreeMap;
use std::time::Duration;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sansio::{
    Acks, DeliveryError, Event, ProduceId, ProducerConfig, ProducerRecord, RecordMetadata,
};
use stellflow_sim::{Fault, FaultRule};

type Outcomes = BTreeMap<ProduceId, Result<RecordMetadata, DeliveryError>>;

/// What one run saw: every record's outcome, and how many events carried them.
struct Run {
    outcomes: Outcomes,
    produced_events: usize,
    batch_events: usize,
}

fn world(p: ProducerConfig, batched: bool) -> World {
    let c = common::producer::client_config(1, p);
    let mut w = common::producer::topic_world(1, ("t", 3, 1), c);
    w.client.set_batch_outcomes(batched);
    w
}

/// Produces `n` records over the three partitions (some to a partition of their own
/// choosing), optionally under a fault, waits `wait`, and collects every outcome.
fn run(p: ProducerConfig, batched: bool, fault: Option<Fault>, wait: Duration) -> Run {
    let mut w = world(p, batched);
    if let Some(f) = fault {
        w.sim
            .inject_fault(FaultRule::random(ApiKey::PRODUCE, 1.0, f));
    }
    let mut ids = Vec::new();
    for i in 0..2000u32 {
        let value = i.to_be_bytes();
        let mut r = ProducerRecord::new("t", &value);
        if i % 7 == 0 {
            r.partition = Some(2);
        }
        ids.push(w.client.produce(w.now, &r).unwrap());
        if i % 100 == 0 {
            w.step();
        }
    }
    w.client.flush(w.now);
    w.advance(wait);
    let mut run = Run {
        outcomes: Outcomes::new(),
        produced_events: 0,
        batch_events: 0,
    };
    for e in w.take(|e| matches!(e, Event::Produced { .. } | Event::ProducedBatch(_))) {
        match e {
            Event::Produced { id, result } => {
                run.produced_events += 1;
                assert!(run.outcomes.insert(id, result).is_none(), "{id:?} twice");
            }
            Event::ProducedBatch(b) => {
                run.batch_events += 1;
                assert!(!b.is_empty());
                assert_eq!(b.ids().len(), b.len());
                assert_eq!(b.ids_with_timestamps().len(), b.len());
                let stamps = b.ids_with_timestamps();
                for (i, ((id, result), stamp)) in b.outcomes().zip(stamps).enumerate() {
                    assert_eq!(b.outcome(i), Some((id, result.clone())));
                    assert_eq!(stamp.0, id, "the same ids, in blob order");
                    if let Ok(m) = &result {
                        assert_eq!((&*m.topic, m.partition), (&**b.topic(), b.partition()));
                        assert_eq!(m.offset, b.result().unwrap());
                        assert_eq!((m.index, m.timestamp), (i as u32, stamp.1));
                    }
                    assert!(run.outcomes.insert(id, result).is_none(), "{id:?} twice");
                }
                assert_eq!(b.outcome(b.len()), None);
            }
            _ => unreachable!(),
        }
    }
    assert_eq!(
        run.outcomes.len(),
        ids.len(),
        "every record has one outcome"
    );
    run
}

/// Both modes of the same seeded run give every record the same outcome; the batch mode
/// does it in far fewer events and with no per-record event at all.
fn same_outcomes(p: ProducerConfig, fault: Option<Fault>, wait: Duration) -> Outcomes {
    let single = run(p.clone(), false, fault.clone(), wait);
    let batched = run(p, true, fault, wait);
    assert_eq!(single.batch_events, 0, "off by default");
    assert_eq!(single.produced_events, single.outcomes.len());
    assert_eq!(batched.produced_events, 0, "every record reached a batch");
    assert!(
        batched.batch_events * 10 < batched.outcomes.len(),
        "{} batch events for {} records",
        batched.batch_events,
        batched.outcomes.len()
    );
    assert_eq!(single.outcomes, batched.outcomes);
    batched.outcomes
}

fn config() -> ProducerConfig {
    let mut p = ProducerConfig::default();
    p.batch_size = 4096;
    p
}

#[test]
fn delivered_batches_report_what_their_records_would() {
    let out = same_outcomes(config(), None, Duration::from_secs(5));
    assert!(
        out.values()
            .all(|r| r.as_ref().is_ok_and(|m| m.offset.is_some()))
    );
    // Indexes follow the blob: some record of a batch has index > 0.
    assert!(out.values().any(|r| r.as_ref().is_ok_and(|m| m.index > 0)));
}

#[test]
fn failed_batches_report_the_same_error_for_every_record() {
    let mut p = config();
    p.delivery_timeout = Duration::from_secs(1);
    p.retry_backoff = Duration::from_millis(20);
    p.retry_backoff_max = Duration::from_millis(100);
    let fault = Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let out = same_outcomes(p, Some(fault), Duration::from_secs(5));
    assert!(
        out.values()
            .all(|r| matches!(r, Err(DeliveryError::Timeout { .. })))
    );
}

#[test]
fn acks_zero_batches_report_without_offsets() {
    let mut p = config();
    p.acks = Acks::None;
    let out = same_outcomes(p, None, Duration::from_secs(5));
    assert!(
        out.values()
            .all(|r| r.as_ref().is_ok_and(|m| m.offset.is_none()))
    );
}
