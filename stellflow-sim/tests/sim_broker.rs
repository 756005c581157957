//! Broker behaviours through the sans-IO byte interface (PROTOCOL.md §2–§4, §8).

mod support;

use bytes::Bytes;
use stellflow_proto::messages::*;
use stellflow_proto::{ApiKey, ErrorCode};
use stellflow_sim::srfb;
use support::{Harness, s};

fn produce(topic: &str, partition: i32, blob: &[u8], acks: i16) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks,
        timeout_ms: 1000,
        topic_data: vec![ProduceTopicData {
            topic: s(topic),
            partitions: vec![ProducePartitionData {
                partition,
                records: Some(Bytes::copy_from_slice(blob)),
            }],
        }],
    }
}

fn fetch(topic: &str, partition: i32, offset: i64, max: i32) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level: 0,
        session_id: 0,
        topic_partitions: vec![FetchTopic {
            topic: s(topic),
            partitions: vec![FetchPartition {
                partition,
                current_leader_epoch: -1,
                fetch_offset: offset,
                log_start_offset: -1,
                partition_max_bytes: max,
            }],
        }],
    }
}

fn part(r: &ProduceResponse) -> &ProducePartitionResponse {
    &r.responses[0].partitions[0]
}

#[test]
fn produce_then_fetch_one_offset_per_blob() {
    let mut h = Harness::single();
    let (hd, r) = h.call(&produce("t", 0, b"abc", 1));
    assert_eq!(hd.error_code, ErrorCode::NONE);
    assert_eq!(part(&r.unwrap()).base_offset, 0);
    let (_, r) = h.call(&produce("t", 0, b"defgh", 0));
    let r = r.unwrap();
    assert_eq!(part(&r).base_offset, 1);
    assert_eq!(part(&r).log_append_time_ms, -1);
    let (_, f) = h.call(&fetch("t", 0, -1, 1 << 20));
    let p = &f.unwrap().responses[0].partitions[0];
    assert_eq!(p.records.as_deref(), Some(&b"abcdefgh"[..]));
    assert_eq!(
        (p.high_watermark, p.last_stable_offset, p.log_start_offset),
        (2, 2, 0)
    );
    // Unknown partition: 10 with zeros; auto-create makes only the partition written to.
    let (_, f) = h.call(&fetch("t", 1, 0, 100));
    assert_eq!(
        f.unwrap().responses[0].partitions[0].error_code,
        ErrorCode(10)
    );
}

#[test]
fn produce_checks_in_order() {
    let mut h = Harness::single();
    let (_, r) = h.call(&produce("t", 0, b"", 5));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(14));
    let (_, r) = h.call(&produce("t", 0, b"x", 5));
    let r = r.unwrap();
    assert_eq!(
        (part(&r).error_code, part(&r).base_offset),
        (ErrorCode(3), -1)
    );
    let mut bad = srfb::build(1, 0, 0, 1, b"x");
    bad[37] ^= 1;
    let (_, r) = h.call(&produce("new", 0, &bad, 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(14));
    // A rejected blob never auto-creates the topic.
    let (_, m) = h.call(&MetadataRequest::default());
    assert_eq!(m.unwrap().topics[0].topic.as_deref(), Some("__empty__"));
}

#[test]
fn idempotent_duplicate_and_out_of_order() {
    let mut h = Harness::single();
    h.client_id = Some("c1".into());
    let b0 = srfb::build(1, 0, 0, 1, b"hello");
    let (_, r) = h.call(&produce("t", 0, &b0, 1));
    assert_eq!(part(&r.unwrap()).base_offset, 0);
    let (_, r) = h.call(&produce("t", 0, b"opaque", 1));
    assert_eq!(part(&r.unwrap()).base_offset, 1);
    let (_, r) = h.call(&produce("t", 0, &b0, 1));
    let r = r.unwrap();
    assert_eq!(
        (part(&r).error_code, part(&r).base_offset),
        (ErrorCode::NONE, 0)
    );
    let (_, r) = h.call(&produce("t", 0, &srfb::build(1, 0, 5, 1, b"x"), 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(21));
    // Another key for the same producer id: 18.
    h.client_id = Some("c2".into());
    let (_, r) = h.call(&produce("t", 0, &srfb::build(1, 0, 1, 1, b"x"), 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(18));
    // Produce advances the id counter: c1 got 1 (first Produce), c2 got 2, so a new key gets 3.
    let (_, r) = h.call(&InitProducerIdRequest {
        transactional_id: s("fresh"),
    });
    assert_eq!(r.unwrap().producer_id, 3);
}

#[test]
fn acks_all_waits_for_isr_then_answers_7_with_offset() {
    let mut h = Harness::single();
    h.call(&produce("t", 0, b"a", 1));
    let (_, r) = h.call(&AlterPartitionRequest {
        topic: s("t"),
        partition_count: 0,
        partition: 0,
        leader_id: 1,
        leader_epoch: 0,
        replica_nodes: vec![1, 2],
        isr_nodes: vec![1, 2],
    });
    assert_eq!(r.unwrap().partitions[0].error_code, ErrorCode::NONE);
    let corr = h.send(&produce("t", 0, b"b", -1));
    assert!(h.cluster.poll_timeout().is_some());
    h.advance(999);
    assert!(h.take(h.conn).is_empty());
    h.advance(1);
    let frames = h.take(h.conn);
    assert_eq!(frames.len(), 1);
    let (hd, r) = support::decode::<ProduceRequest>(frames[0].clone());
    assert_eq!(hd.correlation_id, corr);
    let r = r.unwrap();
    assert_eq!(
        (part(&r).error_code, part(&r).base_offset),
        (ErrorCode(7), 1)
    );
    // Fetch reads past the high watermark.
    let (_, f) = h.call(&fetch("t", 0, 0, 100));
    let p = &f.unwrap().responses[0].partitions[0];
    assert_eq!(
        (p.high_watermark, p.records.as_deref()),
        (0, Some(&b"ab"[..]))
    );
    // timeoutMs <= 0 fails at once.
    let mut req = produce("t", 0, b"c", -1);
    req.timeout_ms = 0;
    let (_, r) = h.call(&req);
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(7));
}

#[test]
fn version_and_key_rules() {
    let mut h = Harness::single();
    let (corr, mut buf) = h.frame(&ApiVersionsRequest::default());
    buf[6] = 0;
    buf[7] = 1; // apiVersion 1
    let frames = h.send_raw_on(h.conn, &buf);
    let (hd, body) = support::decode::<ApiVersionsRequest>(frames[0].clone());
    assert_eq!(
        (hd.correlation_id, hd.error_code, body.is_none()),
        (corr, ErrorCode(2), true)
    );
    // Unknown key 99: header-only 20.
    let (_, mut buf) = h.frame(&ApiVersionsRequest::default());
    buf[4] = 0;
    buf[5] = 99;
    let frames = h.send_raw_on(h.conn, &buf);
    assert_eq!(frames[0].len(), 12);
    assert_eq!(&frames[0][6..8], &[0, 20]);
    // Heartbeat v1: header-only 1. FindCoordinator v3 with an empty body: normal answer.
    let (_, mut buf) = h.frame(&HeartbeatRequest::default());
    buf[7] = 1;
    let frames = h.send_raw_on(h.conn, &buf);
    assert_eq!((frames[0].len(), frames[0][7]), (12, 1));
    h.client_id = None;
    let mut raw = h.frame(&FindCoordinatorRequest::default()).1;
    raw.truncate(4 + 28);
    raw[3] = 28;
    raw[7] = 3;
    let frames = h.send_raw_on(h.conn, &raw);
    let (_, fc) = support::decode::<FindCoordinatorRequest>(frames[0].clone());
    let fc = fc.unwrap();
    assert_eq!(
        (fc.node_id, fc.host.as_deref(), fc.port),
        (0, Some("broker-1"), 9092)
    );
    assert_eq!(h.cluster.poll_closed(), None);
}

#[test]
fn malformed_body_closes_without_response() {
    let mut h = Harness::single();
    let conn = h.conn;
    let (_, mut good) = h.frame(&produce("t", 0, b"x", 1));
    // Append a Metadata frame whose body is truncated (no booleans).
    let (_, md) = h.frame(&MetadataRequest::default());
    let mut md = md.to_vec();
    md.truncate(md.len() - 3);
    let len = (md.len() - 4) as u32;
    md[..4].copy_from_slice(&len.to_be_bytes());
    good.extend_from_slice(&md);
    let frames = h.send_raw_on(conn, &good);
    assert!(frames.is_empty());
    assert_eq!(h.cluster.poll_closed(), Some(conn));
    // The Produce was still appended.
    let c2 = h.connect(1);
    let (_, f) = h.call_on(c2, &fetch("t", 0, 0, 10));
    assert_eq!(
        f.unwrap().responses[0].partitions[0].records.as_deref(),
        Some(&b"x"[..])
    );
    // Frame limit: 67 108 861 closes at once.
    let frames = h.send_raw_on(c2, &[0x04, 0x00, 0x00, 0x01]);
    assert!(frames.is_empty());
    assert_eq!(h.cluster.poll_closed(), Some(c2));
}

#[test]
fn metadata_placeholder_and_named_order() {
    let mut h = Harness::single();
    let (_, m) = h.call(&MetadataRequest::default());
    let m = m.unwrap();
    assert_eq!(m.cluster_id.as_deref(), Some("stellflow-dev-cluster"));
    assert_eq!(m.brokers.len(), 1);
    let t = &m.topics[0];
    assert_eq!(
        (t.topic.as_deref(), t.is_internal, t.partitions[0].leader_id),
        (Some("__empty__"), true, 0)
    );
    h.call(&CreateTopicRequest {
        topic: s("b"),
        partition_count: 2,
        ..Default::default()
    });
    h.call(&produce("a", 7, b"x", 1));
    let (_, m) = h.call(&MetadataRequest {
        topics: vec![
            MetadataRequestTopic { topic: s("b") },
            MetadataRequestTopic {
                topic: s("__empty__"),
            },
            MetadataRequestTopic { topic: s("b") },
        ],
        ..Default::default()
    });
    let m = m.unwrap();
    let codes: Vec<i16> = m.topics.iter().map(|t| t.error_code.0).collect();
    assert_eq!(codes, vec![0, 10, 0]);
    let (_, m) = h.call(&MetadataRequest::default());
    let names: Vec<_> = m
        .unwrap()
        .topics
        .iter()
        .map(|t| (t.topic.clone().unwrap().to_string(), t.partitions.len()))
        .collect();
    assert_eq!(names, vec![("a".to_string(), 1), ("b".to_string(), 2)]);
}

#[test]
fn list_offsets_rules() {
    let mut h = Harness::single();
    h.call(&produce("t", 0, b"a", 1));
    h.advance(10);
    h.call(&produce("t", 0, b"b", 1));
    let lo = |ts: i64, max: i32, epoch: i32| ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            topic: s("t"),
            partitions: vec![ListOffsetsPartition {
                partition: 0,
                current_leader_epoch: epoch,
                timestamp: ts,
                max_num_offsets: max,
            }],
        }],
    };
    let ask = |h: &mut Harness, ts, max, epoch| {
        let (_, r) = h.call(&lo(ts, max, epoch));
        r.unwrap().topics[0].partitions[0].clone()
    };
    let p = ask(&mut h, -1, 5, -1);
    assert_eq!((p.offset, p.offsets.clone()), (2, vec![2]));
    let p = ask(&mut h, -2, 5, -1);
    assert_eq!(
        (p.offset, p.timestamp, p.offsets.clone()),
        (0, 0, vec![0, 1])
    );
    let p = ask(&mut h, 0, 1, -1);
    assert_eq!((p.offset, p.offsets.clone()), (0, vec![0]));
    let t1 = h.cluster.wall_clock_ms();
    let p = ask(&mut h, t1, 5, -1);
    assert_eq!((p.offset, p.timestamp), (1, t1));
    let p = ask(&mut h, t1 + 3_600_000, 5, -1);
    assert_eq!(
        (p.error_code, p.offset, p.timestamp),
        (ErrorCode(11), 2, t1 + 3_600_000)
    );
    assert_eq!(ask(&mut h, -1, 0, -1).error_code, ErrorCode(3));
    assert_eq!(ask(&mut h, -1, 0, 4).error_code, ErrorCode(9));
}

#[test]
fn groups_over_the_wire() {
    let mut h = Harness::single();
    let join = |m: Option<&str>| JoinGroupRequest {
        group_id: s("g"),
        member_id: m.map(Into::into),
        session_timeout_ms: 10_000,
    };
    let (_, a) = h.call(&join(None));
    let a = a.unwrap();
    assert_eq!(a.generation_id, 1);
    let (_, b) = h.call(&join(Some("b")));
    assert_eq!(b.unwrap().generation_id, 2);
    let (hd, sy) = h.call(&SyncGroupRequest {
        group_id: s("g"),
        generation_id: 1,
        member_id: a.member_id.clone(),
    });
    assert_eq!(
        (hd.error_code, sy.unwrap().error_code),
        (ErrorCode(19), ErrorCode(19))
    );
    let (hd, _) = h.call(&HeartbeatRequest {
        group_id: s("g"),
        generation_id: 2,
        member_id: a.member_id.clone(),
    });
    assert_eq!(hd.error_code, ErrorCode::NONE);
}

#[test]
fn restart_recovers_logs_with_leader_zero() {
    let mut h = Harness::single();
    h.call(&produce("t", 0, b"a", 1));
    h.call(&OffsetCommitRequest {
        group_id: s("g"),
        topics: vec![OffsetCommitTopic {
            topic: s("t"),
            partitions: vec![OffsetCommitPartition {
                partition: 0,
                offset: 1,
                metadata: None,
            }],
        }],
    });
    let conn = h.conn;
    h.cluster.restart(1, h.now).unwrap();
    assert_eq!(h.cluster.poll_closed(), Some(conn));
    h.conn = h.connect(1);
    let (_, r) = h.call(&produce("t", 0, b"b", 1));
    let r = r.unwrap();
    assert_eq!(
        (part(&r).error_code, part(&r).base_offset),
        (ErrorCode(9), -1)
    );
    let (_, f) = h.call(&fetch("t", 0, 0, 10));
    assert_eq!(
        f.unwrap().responses[0].partitions[0].error_code,
        ErrorCode(9)
    );
    let (_, m) = h.call(&MetadataRequest::default());
    assert_eq!(m.unwrap().topics[0].partitions[0].leader_id, 0);
    let (_, of) = h.call(&OffsetFetchRequest {
        group_id: s("g"),
        topics: vec![OffsetFetchTopic {
            topic: s("t"),
            partitions: vec![OffsetFetchPartition { partition: 0 }],
        }],
    });
    let p = &of.unwrap().topics[0].partitions[0];
    assert_eq!((p.offset, p.metadata.as_deref()), (1, Some("")));
    // The workaround: AlterPartition with our id and the current epoch.
    h.cluster.reassert_leadership(1).unwrap();
    let (_, r) = h.call(&produce("t", 0, b"b", 1));
    assert_eq!(part(&r.unwrap()).base_offset, 1);
}

#[test]
fn cluster_spreads_leaders_and_non_leaders_answer_9() {
    let now = std::time::Instant::now();
    let mut c =
        stellflow_sim::SimCluster::new(stellflow_sim::ClusterConfig::with_brokers(3), now, 7);
    c.create_topic("t", 3, 2).unwrap();
    let mut h = Harness::new(c, now);
    let (_, m) = h.call(&MetadataRequest::default());
    let m = m.unwrap();
    // Broker 1 holds partitions 0 (leader) and 2 (follower of 3); it lists itself and broker 3.
    let leaders: Vec<(i32, i32)> = m.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.leader_id))
        .collect();
    assert_eq!(leaders, vec![(0, 1), (2, 3)]);
    let ids: Vec<i32> = m.brokers.iter().map(|b| b.broker_id).collect();
    assert_eq!(ids, vec![1, 3]);
    let (_, r) = h.call(&produce("t", 2, b"x", 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(9));
    // acks=-1 on partition 0 (replicas 1, 2) completes once broker 2 replicates.
    let (_, r) = h.call(&produce("t", 0, b"x", -1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode::NONE);
    h.cluster.pause_replication(2, true).unwrap();
    h.send(&produce("t", 0, b"y", -1));
    h.cluster.pause_replication(2, false).unwrap();
    let frames = h.take(h.conn);
    assert_eq!(frames.len(), 1);
    // Move the leader of partition 0 to broker 2.
    h.cluster.move_leader("t", 0, 2).unwrap();
    let (_, r) = h.call(&produce("t", 0, b"z", 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(9));
    let c2 = h.connect(2);
    let (_, r) = h.call_on(c2, &produce("t", 0, b"z", 1));
    let r = r.unwrap();
    assert_eq!(
        (part(&r).base_offset, part(&r).current_leader_epoch),
        (2, 1)
    );
    // Cluster-wide view lists everything.
    h.cluster
        .set_metadata_view(stellflow_sim::MetadataView::ClusterWide);
    let (_, m) = h.call(&MetadataRequest::default());
    let m = m.unwrap();
    assert_eq!((m.brokers.len(), m.topics[0].partitions.len()), (3, 3));
}

/// A multi-partition `acks = -1` Produce waits for each partition in turn; followers copy
/// every append at once (the server's replica fetchers poll continuously), so the whole
/// request is answered without any later event, not at the next unrelated request or at the
/// request's timeout. Regression for the resume bound's leader-move worlds.
#[test]
fn acks_all_on_several_partitions_completes_without_another_event() {
    let now = std::time::Instant::now();
    let mut c =
        stellflow_sim::SimCluster::new(stellflow_sim::ClusterConfig::with_brokers(2), now, 7);
    c.create_topic("t", 3, 2).unwrap();
    c.move_leader("t", 1, 1).unwrap();
    let mut h = Harness::new(c, now);
    let mut req = produce("t", 0, b"a", -1);
    for p in 1..3 {
        let more = produce("t", p, b"b", -1);
        req.topic_data[0]
            .partitions
            .extend(more.topic_data[0].partitions.iter().cloned());
    }
    let (hd, r) = h.call(&req);
    assert_eq!(hd.error_code, ErrorCode::NONE);
    let r = r.unwrap();
    let answers: Vec<(i32, ErrorCode, i64)> = r.responses[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.error_code, p.base_offset))
        .collect();
    assert_eq!(
        answers,
        vec![
            (0, ErrorCode::NONE, 0),
            (1, ErrorCode::NONE, 0),
            (2, ErrorCode::NONE, 0)
        ]
    );
}

#[test]
fn fault_injection_and_delays() {
    let mut h = Harness::single();
    h.cluster.fail_next(ApiKey::METADATA, 1, ErrorCode(7));
    let (hd, b) = h.call(&MetadataRequest::default());
    assert_eq!((hd.error_code, b.is_none()), (ErrorCode(7), true));
    let (hd, _) = h.call(&MetadataRequest::default());
    assert_eq!(hd.error_code, ErrorCode::NONE);
    h.cluster.inject_fault(stellflow_sim::FaultRule::next(
        ApiKey::PRODUCE,
        1,
        stellflow_sim::Fault::PartitionError(ErrorCode(9)),
    ));
    let (_, r) = h.call(&produce("t", 0, b"x", 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(9));
    h.cluster.add_delay(stellflow_sim::DelayRule {
        broker: None,
        api_key: Some(ApiKey::FETCH),
        delay: std::time::Duration::from_millis(50),
    });
    h.send(&fetch("t", 0, 0, 1));
    h.advance(50);
    assert_eq!(h.take(h.conn).len(), 1);
}

#[test]
fn reordering_is_seeded() {
    let run = |seed: u64| {
        let now = std::time::Instant::now();
        let mut h = Harness::new(stellflow_sim::SimCluster::single(now, seed), now);
        h.cluster.set_reordering(0.5, 0.0);
        let mut all = bytes::BytesMut::new();
        for _ in 0..20 {
            all.extend_from_slice(&h.frame(&ApiVersionsRequest::default()).1);
        }
        let frames = h.send_raw_on(h.conn, &all);
        frames
            .iter()
            .map(|f| i32::from_be_bytes([f[0], f[1], f[2], f[3]]))
            .collect::<Vec<_>>()
    };
    let a = run(3);
    assert_eq!(a, run(3));
    assert_eq!(a.len(), 20);
    assert_ne!(a, (1..=20).collect::<Vec<_>>());
}

#[test]
fn replica_fetch_moves_the_high_watermark() {
    let mut h = Harness::single();
    for b in [b"a", b"b", b"c", b"d", b"e", b"f", b"g"] {
        h.call(&produce("t", 0, b, 1));
    }
    h.call(&AlterPartitionRequest {
        topic: s("t"),
        partition_count: 0,
        partition: 0,
        leader_id: 1,
        leader_epoch: 0,
        replica_nodes: vec![1, 2],
        isr_nodes: vec![1, 2],
    });
    let (_, f) = h.call(&fetch("t", 0, 0, 1));
    assert_eq!(f.unwrap().responses[0].partitions[0].high_watermark, 0);
    let mut req = fetch("t", 0, 3, 1 << 20);
    req.replica_id = 2;
    let (_, f) = h.call(&req);
    let p = &f.unwrap().responses[0].partitions[0];
    assert_eq!(p.high_watermark, 7);
    let recs = p.records.clone().unwrap();
    // count, then per entry offset, appendTime, epoch, length, blob.
    assert_eq!(&recs[..4], &4i32.to_be_bytes());
    assert_eq!(&recs[4..12], &3i64.to_be_bytes());
    assert_eq!(recs.len(), 4 + 4 * (8 + 8 + 4 + 4 + 1));
}

#[test]
fn multi_broker_restart_and_reassert() {
    let now = std::time::Instant::now();
    let mut c =
        stellflow_sim::SimCluster::new(stellflow_sim::ClusterConfig::with_brokers(2), now, 7);
    c.create_topic("t", 1, 2).unwrap();
    let mut h = Harness::new(c, now);
    h.call(&produce("t", 0, b"a", -1));
    h.cluster.restart(1, h.now).unwrap();
    h.conn = h.connect(1);
    let (_, r) = h.call(&produce("t", 0, b"b", 1));
    assert_eq!(part(&r.unwrap()).error_code, ErrorCode(9));
    h.cluster.reassert_leadership(1).unwrap();
    let (_, r) = h.call(&produce("t", 0, b"b", -1));
    let r = r.unwrap();
    assert_eq!(
        (part(&r).error_code, part(&r).base_offset),
        (ErrorCode::NONE, 1)
    );
    let (_, m) = h.call(&MetadataRequest::default());
    let m = m.unwrap();
    assert_eq!(m.topics[0].partitions[0].replica_nodes, vec![1, 2]);
}

#[test]
fn crash_refuses_connects_and_log_start_knob() {
    let mut h = Harness::single();
    for b in [b"a", b"b", b"c"] {
        h.call(&produce("t", 0, b, 1));
    }
    h.cluster.advance_log_start("t", 0, 2).unwrap();
    let (_, f) = h.call(&fetch("t", 0, 0, 1));
    let p = &f.unwrap().responses[0].partitions[0];
    assert_eq!(
        (p.log_start_offset, p.records.as_deref()),
        (2, Some(&b"c"[..]))
    );
    h.cluster.crash(1, h.now).unwrap();
    assert!(matches!(
        h.cluster.connect(1, h.now),
        Err(stellflow_sim::SimError::BrokerDown(1))
    ));
}
