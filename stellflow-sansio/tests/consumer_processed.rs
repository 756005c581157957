//! The processed-position store (`mark_processed`, `consumer.commit_marked_only`): commits
//! take only marked positions — auto-commit, close, `commit` — mid-blob marks resume exactly,
//! marks only move forward, and a seek or a revocation forgets them.

mod common;
mod consumer_support;

use common::World;
use consumer_support::*;
use std::time::Duration;
use stellflow_sansio::{
    CommitKind, ConsumerError, ConsumerEvent, ConsumerRecord, Event, Position, SeekTo,
    TopicPartition,
};
use stellflow_sim::ClusterConfig;

/// Records taken whole (to mark them), until `n` came or time ran out.
fn take_n(w: &mut World, n: usize) -> Vec<ConsumerRecord> {
    let mut got = Vec::new();
    w.run_until(Duration::from_secs(30), |w| {
        while got.len() < n {
            match w.client.poll_record() {
                Some(r) => got.push(r),
                None => break,
            }
        }
        got.len() >= n
    });
    got
}

fn wait_closed(w: &mut World) {
    w.client.close_consumer(w.now);
    w.run_until(Duration::from_secs(10), |w| {
        w.events
            .iter()
            .any(|e| matches!(e, Event::Consumer(ConsumerEvent::Closed)))
    });
}

#[test]
fn auto_commit_and_close_commit_only_the_marked_mid_blob_position() {
    let mut cfg = consumer_config("broker-1:9092", Some("marks"));
    cfg.consumer.commit_marked_only = true;
    cfg.consumer.auto_commit_interval = Duration::from_secs(1);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg.clone());
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 10, 8);
    let tp = TopicPartition::new("t", 0);
    let all = &exp[&tp];
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();

    // Everything delivered, nothing marked: the auto-commit timer commits nothing.
    let records = take_n(&mut w, all.len());
    assert_eq!(records.len(), all.len());
    w.run_until(Duration::from_secs(5), |_| false);
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::CommitCompleted { .. })),
        "a commit without marks: {ev:?}"
    );
    assert_eq!(w.client.committed(&tp), None);

    // Mark a record in the middle of a blob of several records: auto-commit takes it.
    let stop = (records.iter())
        .position(|r| r.index == 2 && !r.last_in_blob)
        .expect("a blob of more than 3 records");
    w.client.mark_processed(&records[stop]).unwrap();
    let mark = Position::new(records[stop].offset, 3);
    assert_eq!(w.client.marked(&tp), Some(mark));
    w.run_until(Duration::from_secs(5), |w| {
        w.client.committed(&tp).is_some()
    });
    let ev = consumer_events(&mut w);
    assert!(ev.iter().any(|e| matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Auto, result: Ok(p), .. } if p == &vec![(tp.clone(), mark)])), "{ev:?}");

    // An earlier record marked after it changes nothing; close commits nothing more.
    w.client.mark_processed(&records[0]).unwrap();
    assert_eq!(w.client.marked(&tp), Some(mark));
    wait_closed(&mut w);
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::CommitCompleted {
                kind: CommitKind::Close,
                ..
            }
        )),
        "{ev:?}"
    );

    // A fresh consumer of the group reads exactly the records after the mark.
    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let rest = take_n(&mut w, all.len() - stop - 1);
    let got: Vec<_> = rest.iter().map(|r| (r.offset, r.index)).collect();
    let want: Vec<_> = all[stop + 1..].iter().map(|(p, _)| *p).collect();
    assert_eq!(got, want);
}

#[test]
fn close_and_commit_take_the_marks_not_the_deliveries() {
    let mut cfg = consumer_config("broker-1:9092", Some("marks2"));
    cfg.consumer.commit_marked_only = true;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg.clone());
    w.sim.create_topic("t", 2, 1).unwrap();
    let exp = fill(&mut w, "t", 2, 4, 8);
    let tps: Vec<_> = (0..2).map(|p| TopicPartition::new("t", p)).collect();
    let n: usize = exp.values().map(Vec::len).sum();
    w.bootstrap();
    w.client.assign(w.now, &tps).unwrap();
    let records = take_n(&mut w, n);
    assert_eq!(records.len(), n);

    // `commit` with one partition marked commits that partition only, at its mark.
    let first0 = records.iter().find(|r| r.partition == 0).unwrap();
    w.client.mark_processed(first0).unwrap();
    let id = w.client.commit(w.now).unwrap();
    w.run_until(Duration::from_secs(10), |w| {
        w.events.iter().any(|e| matches!(e, Event::Consumer(ConsumerEvent::CommitCompleted { id: i, .. }) if *i == id))
    });
    let ev = consumer_events(&mut w);
    let want = vec![(tps[0].clone(), first0.next_position())];
    assert!(ev.iter().any(|e| matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Sync, result: Ok(p), .. } if *p == want)), "{ev:?}");

    // The last record of partition 1 marked: close commits its blob end, partition 0 stays.
    let last1 = records.iter().rfind(|r| r.partition == 1).unwrap();
    assert!(last1.last_in_blob);
    w.client
        .mark_position(&last1.topic_partition(), last1.next_position())
        .unwrap();
    wait_closed(&mut w);
    let ev = consumer_events(&mut w);
    let want = vec![(tps[1].clone(), Position::blob(last1.offset + 1))];
    assert!(ev.iter().any(|e| matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Close, result: Ok(p), .. } if *p == want)), "{ev:?}");

    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, &tps).unwrap();
    w.run_until(Duration::from_secs(5), |w| {
        tps.iter().all(|tp| w.client.position(tp).is_some())
    });
    assert_eq!(w.client.position(&tps[0]), Some(first0.next_position()));
    assert_eq!(w.client.position(&tps[1]), Some(Position::blob(4)));
}

#[test]
fn marking_needs_the_mode_an_assigned_partition_and_a_seek_forgets() {
    // Without commit_marked_only a mark would be ignored: refused, naming the setting.
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", Some("marks3")),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    fill(&mut w, "t", 1, 2, 8);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let r = take_n(&mut w, 1).remove(0);
    let e = w.client.mark_processed(&r).unwrap_err();
    assert_eq!(e, ConsumerError::MarkingOff);
    assert!(e.to_string().contains("commit_marked_only"), "{e}");

    let mut cfg = consumer_config("broker-1:9092", Some("marks3"));
    cfg.consumer.commit_marked_only = true;
    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let r = take_n(&mut w, 2).remove(1);
    w.client.mark_processed(&r).unwrap();
    assert_eq!(w.client.marked(&tp), Some(r.next_position()));
    // A seek forgets the mark (the partition starts over from the sought position).
    w.client
        .seek(w.now, &tp, SeekTo::Position(Position::blob(0)))
        .unwrap();
    assert_eq!(w.client.marked(&tp), None);
    // A partition not assigned any more cannot be marked.
    w.client.assign(w.now, &[]).unwrap();
    assert_eq!(
        w.client.mark_processed(&r),
        Err(ConsumerError::NotAssigned(tp.clone()))
    );
    assert_eq!(w.client.marked(&tp), None);
}
