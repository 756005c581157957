//! Consumer against the simulated cluster in-process: exact delivery over blobs of both
//! formats and several batches, segments, mid-blob commits, log-start jumps, groups.

mod common;
mod consumer_support;

use common::World;
use consumer_support::*;
use std::time::{Duration, Instant};
use stellflow_proto::messages::JoinGroupRequest;
use stellflow_sansio::{
    CommitKind, ConsumerEvent, Event, LogStartAction, OffsetReset, Position, SeekTo, TopicPartition,
};
use stellflow_sim::{ClusterConfig, LogConfig};

#[test]
fn consumes_exactly_n_in_order_over_brokers_and_formats() {
    let mut w = World::with(
        ClusterConfig::with_brokers(3),
        consumer_config("broker-1:9092,broker-2:9092,broker-3:9092", None),
    );
    w.sim.create_topic("orders", 3, 1).unwrap();
    let exp = fill(&mut w, "orders", 3, 40, 20);
    let n: usize = exp.values().map(Vec::len).sum();
    w.bootstrap();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("orders", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let got = drain(&mut w, Duration::from_secs(60), |g| count(g) >= n);
    if count(&got) != n {
        let per: Vec<_> = got.iter().map(|(k, v)| (k.to_string(), v.len())).collect();
        let tail: Vec<_> = w.events.iter().rev().take(15).collect();
        panic!(
            "{per:?} {:?} {:?} {tail:?}",
            w.client.metadata().topics.get("orders"),
            (0..3)
                .map(|p| w.client.position(&TopicPartition::new("orders", p)))
                .collect::<Vec<_>>()
        );
    }
    assert_exact(&exp, &got);
    // Both formats seen in one partition.
    let formats: std::collections::HashSet<_> = got[&tps[0]].iter().map(|(_, _, f)| *f).collect();
    assert_eq!(formats.len(), 2);
    // Nothing more arrives; positions are past the last blob; lag is zero.
    let more = drain(&mut w, Duration::from_secs(2), |_| false);
    assert_eq!(count(&more), 0);
    for tp in &tps {
        assert_eq!(w.client.position(tp), Some(Position::blob(40)));
        assert_eq!(w.client.lag(tp), Some(0));
    }
    assert_eq!(w.client.counters().consumer_records, n as u64);
}

#[test]
fn poll_records_delivers_the_same_records_as_poll_record_in_batches() {
    let (mut w, exp, tps) = two_partitions_of_30_blobs();
    let n: usize = exp.values().map(Vec::len).sum();
    let mut got = Got::new();
    let mut batch = Vec::new();
    let mut blob_ends = 0;
    w.run_until(Duration::from_secs(60), |w| {
        loop {
            assert_eq!(w.client.poll_records(&mut batch, 0), 0);
            let before = batch.len();
            let k = w.client.poll_records(&mut batch, 7);
            assert_eq!(batch.len(), before + k);
            assert!(k <= 7, "{k} records for a batch of 7");
            for r in batch.drain(..) {
                blob_ends += usize::from(r.last_in_blob);
                got.entry(TopicPartition::new(&r.topic, r.partition))
                    .or_default()
                    .push(((r.offset, r.index), r.value.unwrap().to_vec(), r.format));
            }
            if k == 0 {
                return count(&got) >= n;
            }
        }
    });
    assert_exact(&exp, &got);
    assert_eq!(blob_ends, 60, "one last_in_blob record per blob");
    assert_eq!(w.client.counters().consumer_records, n as u64);
    for tp in &tps {
        assert_eq!(w.client.position(tp), Some(Position::blob(30)));
    }
}

/// `poll_blob` hands over whole blobs whose records are exactly the ones `poll_record` would
/// give, in order, over both formats and multi-batch blobs; a blob partly taken as records
/// yields only the rest; taking a blob moves the position past it and counts its records.
#[test]
fn poll_blob_delivers_whole_blobs_with_the_same_records_and_positions() {
    let (mut w, exp, tps) = two_partitions_of_30_blobs();
    let n: usize = exp.values().map(Vec::len).sum();
    let mut got = Got::new();
    let (mut blobs, mut partly_taken) = (0, 0);
    w.run_until(Duration::from_secs(60), |w| {
        loop {
            // Every third blob: take its first record alone, then the blob.
            if blobs % 3 == 1
                && let Some(r) = w.client.poll_record()
            {
                partly_taken += usize::from(!r.last_in_blob);
                got.entry(TopicPartition::new(&r.topic, r.partition))
                    .or_default()
                    .push(((r.offset, r.index), r.value.unwrap().to_vec(), r.format));
                if r.last_in_blob {
                    blobs += 1;
                    continue;
                }
            }
            let Some(blob) = w.client.poll_blob() else {
                return count(&got) >= n;
            };
            blobs += 1;
            let tp = TopicPartition::new(blob.topic(), blob.partition());
            let (offset, format, next) = (blob.offset(), blob.format(), blob.next_position());
            assert_eq!(next, Position::blob(offset + 1));
            assert_eq!(
                w.client.position(&tp),
                Some(next),
                "taking a blob delivers it"
            );
            for r in blob {
                let r = r.unwrap();
                assert_eq!(r.format, format);
                got.entry(tp.clone()).or_default().push((
                    (offset, r.index_in_blob),
                    r.record.value.unwrap().to_vec(),
                    r.format,
                ));
            }
        }
    });
    assert_exact(&exp, &got);
    assert_eq!(blobs, 60, "every blob once");
    assert!(
        partly_taken > 5,
        "only {partly_taken} blobs taken partly as records"
    );
    assert_eq!(w.client.counters().consumer_records, n as u64);
    assert_eq!(w.client.buffered_bytes(), 0);
    for tp in &tps {
        assert_eq!(w.client.position(tp), Some(Position::blob(30)));
    }
}

#[test]
fn partition_over_many_small_segments_reads_back_exactly() {
    let log = LogConfig {
        segment_bytes: 4096,
        retention_segments: 100_000,
        ..LogConfig::default()
    };
    let mut w = World::with(
        ClusterConfig::with_brokers(1).log_config(log),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("seg", 1, 1).unwrap();
    let exp = fill(&mut w, "seg", 1, 120, 60);
    let n: usize = exp.values().map(Vec::len).sum();
    w.bootstrap();
    w.client
        .assign(w.now, &[TopicPartition::new("seg", 0)])
        .unwrap();
    let got = drain(&mut w, Duration::from_secs(60), |g| count(g) >= n);
    assert_exact(&exp, &got);
    let more = drain(&mut w, Duration::from_secs(1), |_| false);
    assert_eq!(count(&more), 0, "no blob repeated");
}

#[test]
fn mid_blob_commit_resumes_at_the_next_record() {
    let mut cfg = consumer_config("broker-1:9092", Some("g1"));
    cfg.consumer.enable_auto_commit = false;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg.clone());
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 10, 8);
    let all = &exp[&TopicPartition::new("t", 0)];
    w.bootstrap();
    let tp = TopicPartition::new("t", 0);
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    // Stop in the middle of a blob that holds several records.
    let stop = all
        .iter()
        .position(|((o, i), _)| *i == 2 && all.iter().filter(|((o2, _), _)| o2 == o).count() > 4)
        .expect("a big blob");
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) > stop);
    let last = got[&tp].last().unwrap().0;
    assert_eq!(last, all[stop].0);
    let pos = w.client.position(&tp).unwrap();
    assert_eq!(pos, Position::new(last.0, last.1 + 1));
    let id = w.client.commit(w.now).unwrap();
    w.run_until(Duration::from_secs(10), |w| {
        w.events.iter().any(|e| matches!(e, Event::Consumer(ConsumerEvent::CommitCompleted { id: i, .. }) if *i == id))
    });
    let ev = consumer_events(&mut w);
    assert!(ev.iter().any(|e| matches!(e, ConsumerEvent::CommitCompleted { result: Ok(p), kind: CommitKind::Sync, .. } if p == &vec![(tp.clone(), pos)])), "{ev:?}");
    assert_eq!(w.client.committed(&tp), Some(pos));
    assert_eq!(w.client.counters().offset_commits, 1);

    // A new consumer of the group gets exactly the rest.
    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    let rest = all.len() - stop - 1;
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= rest);
    let got_pos: Vec<_> = got[&tp].iter().map(|(p, _, _)| *p).collect();
    let want: Vec<_> = all[stop + 1..].iter().map(|(p, _)| *p).collect();
    assert_eq!(got_pos, want);
    let more = drain(&mut w, Duration::from_secs(1), |_| false);
    assert_eq!(count(&more), 0);
}

#[test]
fn commit_on_close_and_fully_consumed_blob_commits_next_offset() {
    let cfg = consumer_config("broker-1:9092", Some("g2"));
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg.clone());
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 5, 8);
    let tp = TopicPartition::new("t", 0);
    let n = exp[&tp].len();
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    drain(&mut w, Duration::from_secs(30), |g| count(g) >= n);
    w.client.close_consumer(w.now);
    w.run_until(Duration::from_secs(10), |w| {
        w.events
            .iter()
            .any(|e| matches!(e, Event::Consumer(ConsumerEvent::Closed)))
    });
    let ev = consumer_events(&mut w);
    assert!(ev.iter().any(|e| matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Close, result: Ok(p), .. } if p == &vec![(tp.clone(), Position::blob(5))])), "{ev:?}");
    replace_client(&mut w, cfg);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.run_until(Duration::from_secs(5), |w| w.client.position(&tp).is_some());
    assert_eq!(w.client.position(&tp), Some(Position::blob(5)));
}

#[test]
fn log_start_jump_moves_to_the_log_start() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 10, 4);
    let tp = TopicPartition::new("t", 0);
    w.sim.advance_log_start("t", 0, 6).unwrap();
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.client
        .seek(w.now, &tp, SeekTo::Position(Position::new(2, 1)))
        .unwrap();
    let want: Vec<_> = exp[&tp]
        .iter()
        .filter(|((o, _), _)| *o >= 6)
        .map(|(p, _)| *p)
        .collect();
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= want.len());
    let got_pos: Vec<_> = got[&tp].iter().map(|(p, _, _)| *p).collect();
    assert_eq!(got_pos, want);
    let ev = consumer_events(&mut w);
    assert!(
        ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::LogStartMoved {
                position: 2,
                log_start: 6,
                action: LogStartAction::MovedToLogStart,
                ..
            }
        )),
        "{ev:?}"
    );
}

#[test]
fn seek_mid_blob_pause_resume_and_lag() {
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("t", 2, 1).unwrap();
    let exp = fill(&mut w, "t", 2, 6, 4);
    let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
    w.bootstrap();
    w.client.assign(w.now, &[a.clone(), b.clone()]).unwrap();
    w.run_until(Duration::from_secs(5), |w| w.client.position(&a).is_some());
    w.client.pause(&b).unwrap();
    w.client
        .seek(w.now, &a, SeekTo::Position(Position::new(3, 2)))
        .unwrap();
    let want: Vec<_> = exp[&a]
        .iter()
        .filter(|(p, _)| *p >= (3, 2))
        .map(|(p, _)| *p)
        .collect();
    let got = drain(&mut w, Duration::from_secs(10), |g| count(g) >= want.len());
    assert_eq!(got[&a].iter().map(|(p, _, _)| *p).collect::<Vec<_>>(), want);
    assert!(!got.contains_key(&b), "paused partition delivered nothing");
    let more = drain(&mut w, Duration::from_secs(1), |_| false);
    assert_eq!(count(&more), 0);
    w.client.resume(&b).unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| {
        count(g) >= exp[&b].len()
    });
    assert_eq!(got[&b].len(), exp[&b].len());
    assert_eq!(w.client.lag(&b), Some(0));
    assert!(w.client.pause(&TopicPartition::new("zz", 0)).is_err());
}

#[test]
fn subscribe_assigns_all_partitions_and_registry_rounds_keep_the_membership_for_hours() {
    let mut w = subscribed_world("hb");
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );
    let ev = consumer_events(&mut w);
    assert!(
        ev.iter()
            .any(|e| matches!(e, ConsumerEvent::PartitionsAssigned(p) if p.len() == 2)),
        "{ev:?}"
    );
    let (_, generation) = w
        .client
        .group_member()
        .map(|(m, g)| (m.to_owned(), g))
        .unwrap();
    let ops = w.client.counters().group_operations;
    w.advance(Duration::from_secs(2 * 3600));
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, ConsumerEvent::GroupRejoining { .. })),
        "{ev:?}"
    );
    assert_eq!(w.client.group_member().unwrap().1, generation);
    // One round (a read, a registry write, then a read) every heartbeat interval of 3 s.
    let ops = w.client.counters().group_operations - ops;
    assert!(
        (7100..7300).contains(&ops),
        "{ops} registry requests in 2 h"
    );
    // Data produced now still arrives.
    let off = produce(&mut w, "s", 1, blob(Kind::V1, &[b"late".to_vec()]));
    let got = drain(&mut w, Duration::from_secs(5), |g| count(g) >= 1);
    assert_eq!(got[&TopicPartition::new("s", 1)][0].0, (off, 0));
}

#[test]
fn another_client_joining_fences_nobody_and_consumption_goes_on() {
    let mut w = subscribed_world("fence");
    assert!(
        w.run_until(Duration::from_secs(10), |w| w.client.assignment().len()
            == 2)
    );
    consumer_events(&mut w);
    // Another client joins (the generation moves) and rejoins every 500 ms, like a naive
    // client fenced by its own heartbeats: on today's server every JoinGroup fences the
    // others. A registry member does not heartbeat, so none of this reaches it.
    let start = w.now;
    let mut intruder_gen = 0;
    while w.now < start + Duration::from_secs(120) {
        let r = raw_call(
            &mut w,
            1,
            &JoinGroupRequest {
                group_id: Some("fence".into()),
                member_id: Some("naive".into()),
                session_timeout_ms: 30_000,
            },
        );
        intruder_gen = r.generation_id;
        w.advance(Duration::from_millis(500));
    }
    assert!(intruder_gen > 200);
    let ev = consumer_events(&mut w);
    assert!(
        !ev.iter().any(|e| matches!(
            e,
            ConsumerEvent::GroupRejoining { .. }
                | ConsumerEvent::GroupThrashing { .. }
                | ConsumerEvent::PartitionsRevoking { .. }
                | ConsumerEvent::PartitionsLost(_)
        )),
        "{ev:?}"
    );
    let off = produce(&mut w, "s", 0, blob(Kind::Srfb, &[b"after".to_vec()]));
    let got = drain(&mut w, Duration::from_secs(5), |g| count(g) >= 1);
    assert_eq!(got[&TopicPartition::new("s", 0)][0].0, (off, 0));
}

#[test]
fn no_position_policy_waits_for_a_seek() {
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.auto_offset_reset = OffsetReset::None;
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("t", 1, 1).unwrap();
    let exp = fill(&mut w, "t", 1, 3, 4);
    let tp = TopicPartition::new("t", 0);
    w.bootstrap();
    w.client.assign(w.now, std::slice::from_ref(&tp)).unwrap();
    w.advance(Duration::from_secs(1));
    assert!(
        consumer_events(&mut w)
            .iter()
            .any(|e| matches!(e, ConsumerEvent::NoPosition(_)))
    );
    assert_eq!(w.client.position(&tp), None);
    w.client.seek(w.now, &tp, SeekTo::Beginning).unwrap();
    let got = drain(&mut w, Duration::from_secs(10), |g| {
        count(g) >= exp[&tp].len()
    });
    assert_eq!(got[&tp].len(), exp[&tp].len());
    let _ = Instant::now;
}

#[test]
fn a_fresh_consumer_fetches_as_soon_as_metadata_names_the_leader() {
    // Assigned before the first metadata round: the partitions wait for a leader, and that
    // wait ends with the metadata, not after `fetch_backoff_max`.
    let mut cfg = consumer_config("broker-1:9092", None);
    cfg.consumer.fetch_backoff_max = Duration::from_secs(30);
    let mut w = World::with(ClusterConfig::with_brokers(1), cfg);
    w.sim.create_topic("fresh", 2, 1).unwrap();
    let exp = fill(&mut w, "fresh", 2, 3, 10);
    let n: usize = exp.values().map(Vec::len).sum();
    let tps: Vec<_> = (0..2).map(|p| TopicPartition::new("fresh", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let start = w.now;
    let got = drain(&mut w, Duration::from_secs(60), |g| count(g) >= n);
    assert_exact(&exp, &got);
    let took = w.now - start;
    assert!(
        took < Duration::from_secs(1),
        "first records after {took:?}"
    );
}

#[test]
fn a_new_assignment_drops_the_buffered_blobs_of_every_revoked_partition_at_once() {
    // Six partitions buffered, then an assignment that keeps two of them: none of the four
    // revoked partitions delivers a record afterwards, and the kept ones deliver exactly.
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("many", 6, 1).unwrap();
    let exp = fill(&mut w, "many", 6, 8, 10);
    w.bootstrap();
    let tps: Vec<_> = (0..6).map(|p| TopicPartition::new("many", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    // Buffered but not taken: every partition's first blob has been fetched.
    w.run_until(Duration::from_secs(10), |w| {
        tps.iter().all(|tp| w.client.lag(tp).is_some())
    });
    let kept = [tps[1].clone(), tps[4].clone()];
    let _ = consumer_events(&mut w);
    w.client.assign(w.now, &kept).unwrap();
    w.step();
    let ev = consumer_events(&mut w);
    let revoked: Vec<TopicPartition> = ev
        .iter()
        .find_map(|e| match e {
            ConsumerEvent::PartitionsRevoked(p) => Some(p.clone()),
            _ => None,
        })
        .expect("a revocation event");
    let gone: Vec<TopicPartition> = [0, 2, 3, 5].iter().map(|&p| tps[p].clone()).collect();
    assert_eq!(revoked, gone);
    let want: usize = kept.iter().map(|tp| exp[tp].len()).sum();
    let got = drain(&mut w, Duration::from_secs(30), |g| count(g) >= want);
    let kept_exp = kept
        .iter()
        .map(|tp| (tp.clone(), exp[tp].clone()))
        .collect();
    assert_exact(&kept_exp, &got);
    assert_eq!(w.client.assignment(), kept.to_vec());
}

#[test]
fn a_consumer_of_many_partitions_keeps_each_fetch_to_a_few_dozen_entries() {
    // The server's time to answer a Fetch grows faster than its entries: 200 partitions of
    // small blobs are read in many requests of at most 64 entries, not a few of thousands.
    let mut w = World::with(
        ClusterConfig::with_brokers(1),
        consumer_config("broker-1:9092", None),
    );
    w.sim.create_topic("wide", 200, 1).unwrap();
    let exp = fill(&mut w, "wide", 200, 6, 10);
    let n: usize = exp.values().map(Vec::len).sum();
    w.bootstrap();
    w.watch_fetches = true;
    let tps: Vec<_> = (0..200).map(|p| TopicPartition::new("wide", p)).collect();
    w.client.assign(w.now, &tps).unwrap();
    let got = drain(&mut w, Duration::from_secs(60), |g| count(g) >= n);
    assert_exact(&exp, &got);
    let most = w.fetch_entries.iter().copied().max().unwrap_or(0);
    assert!(most > 1, "several entries a request: {:?}", w.fetch_entries);
    assert!(
        most <= 64,
        "a Fetch of {most} entries: {:?}",
        w.fetch_entries
    );
}
