//! CreateTopic / DeleteTopic / AlterPartition, DescribeCluster / HealthCheck, DecommissionBroker
//! (PROTOCOL.md §3.14–§3.16), and the replication quirks reachable through AlterPartition on a
//! single node (§3.3 `acks=-1`, §3.4 reads past the high watermark). Every topic re-routed here
//! is a throwaway topic of the case, deleted at the end.

use super::super::client::Conn;
use super::super::*;
use std::time::{Duration, Instant};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "create_topic_count_le_0_is_3",
            section: "3.14",
            run: create_count_le_zero,
        },
        Case {
            name: "create_topic_routable_at_once_for_metadata_and_list_offsets",
            section: "3.14, 3.2, 3.5",
            run: create_then_route,
        },
        Case {
            name: "create_topic_existing_answered_like_new",
            section: "3.14",
            run: create_existing,
        },
        Case {
            name: "delete_topic_unknown_is_minus1_10",
            section: "3.14",
            run: delete_topic_rules,
        },
        Case {
            name: "alter_partition_other_leader_9_list_offsets_answers",
            section: "3.14, 3.5, 8 item 22",
            run: alter_other_leader,
        },
        Case {
            name: "alter_partition_lower_epoch_fails_but_applies",
            section: "3.14",
            run: alter_lower_epoch,
        },
        Case {
            name: "alter_partition_creates_missing_log",
            section: "3.14",
            run: alter_creates_log,
        },
        Case {
            name: "acks_all_timeout_7_with_real_offset_reads_past_hw",
            section: "3.3, 3.4, 8 item 12",
            run: acks_all_timeout,
        },
        Case {
            name: "acks_all_timeout_not_recorded_for_idempotence",
            section: "3.3.2, 8 item 12",
            run: acks_all_timeout_idempotent,
        },
        Case {
            name: "fetch_with_replica_id_is_follower_path_moves_hw",
            section: "4.7, 8 item 24",
            run: replica_fetch,
        },
        Case {
            name: "create_topic_over_higher_epoch_header_only_1_partial",
            section: "3.14",
            run: create_over_higher_epoch,
        },
        Case {
            name: "describe_cluster_health_check_need_api_versions_body",
            section: "3.15",
            run: describe_cluster,
        },
        Case {
            name: "decommission_broker_stub_message",
            section: "3.16",
            run: decommission,
        },
    ]
}

fn admin(c: &mut Conn, key: i16, body: &[u8]) -> Result<TopicAdminResp, String> {
    let r = c.call(key, body)?;
    parse_topic_admin(&r)
}

fn alter(
    c: &mut Conn,
    t: &str,
    p: i32,
    leader: i32,
    epoch: i32,
    replicas: &[i32],
    isr: &[i32],
) -> Result<client::Resp, String> {
    c.call(
        ALTER_PARTITION,
        &topic_admin_req(t, 0, p, leader, epoch, replicas, isr),
    )
}

fn create_count_le_zero(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    for n in [0, -3, i32::MIN] {
        let a = admin(&mut c, CREATE_TOPIC, &create_topic_req(&t, n))?;
        ensure_eq!(a.topic.as_deref(), Some(t.as_str()), "topic echoed");
        ensure_eq!(
            a.results,
            vec![(-1, 3, 0)],
            "CreateTopic partitionCount {n}"
        );
    }
    assert_topic_unknown(&mut c, &t)?;
    Ok(())
}

fn partitions_of(c: &mut Conn, t: &str) -> Result<Vec<i32>, String> {
    let md = metadata(c, &[t])?;
    Ok(md
        .topic(t)
        .map(|x| x.partitions.iter().map(|p| p.partition).collect())
        .unwrap_or_default())
}

fn create_existing(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    create_topic(&mut c, &t, 3)?;
    produce_ok(&mut c, &t, 0, b"kept")?;
    // No "already exists": answered like a new topic, extra partitions stay.
    let a = admin(&mut c, CREATE_TOPIC, &create_topic_req(&t, 1))?;
    ensure_eq!(a.results, vec![(0, 0, 0)], "re-create with count 1");
    ensure_eq!(
        partitions_of(&mut c, &t)?,
        vec![0, 1, 2],
        "partitions after re-create"
    );
    ensure_eq!(log_end(&mut c, &t, 0)?, 1, "data kept across re-create");
    create_topic(&mut c, &t, 5)?;
    ensure_eq!(
        partitions_of(&mut c, &t)?,
        vec![0, 1, 2, 3, 4],
        "partitions after growing"
    );
    // The ignored fields of the shared layout may hold anything.
    let a = admin(
        &mut c,
        CREATE_TOPIC,
        &topic_admin_req(&t, 2, 99, 42, 7, &[1, 2, 3], &[9]),
    )?;
    ensure_eq!(
        a.results,
        vec![(0, 0, 0), (1, 0, 0)],
        "CreateTopic ignores partition/leader/epoch/replicas/isr"
    );
    Ok(())
}

fn delete_topic_rules(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let a = admin(&mut c, DELETE_TOPIC, &delete_topic_req(&t))?;
    ensure_eq!(a.topic.as_deref(), Some(t.as_str()), "topic echoed");
    ensure_eq!(
        a.results,
        vec![(-1, 10, 0)],
        "DeleteTopic of an unknown topic"
    );
    create_topic(&mut c, &t, 2)?;
    produce_ok(&mut c, &t, 1, b"x")?;
    let a = admin(&mut c, DELETE_TOPIC, &delete_topic_req(&t))?;
    ensure_eq!(
        a.results,
        vec![(0, 0, 0), (1, 0, 0)],
        "DeleteTopic of a 2-partition topic"
    );
    assert_topic_unknown(&mut c, &t)?;
    let f = fetch(&mut c, &t, 1, 0, 1000)?;
    ensure_eq!(f.error, 10, "Fetch after DeleteTopic");
    let a = admin(&mut c, DELETE_TOPIC, &delete_topic_req(&t))?;
    ensure_eq!(a.results, vec![(-1, 10, 0)], "second DeleteTopic");
    // The next Produce re-creates only the partition written, from offset 0.
    ensure_eq!(
        produce_ok(&mut c, &t, 1, b"again")?,
        0,
        "offset after re-creation"
    );
    ensure_eq!(
        partitions_of(&mut c, &t)?,
        vec![1],
        "partitions after re-creation"
    );
    let a = admin(&mut c, DELETE_TOPIC, &delete_topic_req(&t))?;
    ensure_eq!(
        a.results,
        vec![(1, 0, 0)],
        "DeleteTopic lists the local partitions"
    );
    Ok(())
}

fn alter_other_leader(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let me = self_broker(&mut c, &t)?.id;
    let other = if me == 2 { 3 } else { 2 };
    produce_ok(&mut c, &t, 0, b"before")?;
    let r = alter(&mut c, &t, 0, other, 1, &[other], &[other])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 1)],
        "AlterPartition result"
    );
    let md = metadata(&mut c, &[&t])?;
    let p = &md.topic(&t).ok_or("topic missing")?.partitions[0];
    ensure_eq!(
        (p.leader, p.epoch, p.replicas.clone(), p.isr.clone()),
        (other, 1, vec![other], vec![other]),
        "Metadata after AlterPartition"
    );
    ensure!(
        md.brokers.iter().all(|b| b.id != other),
        "naming another leader must not add it to brokers"
    );
    let pr = produce_raw(&mut c, &t, 0, b"refused")?;
    ensure_eq!(
        (
            pr.error,
            pr.base_offset,
            pr.leader_epoch,
            pr.log_append_time,
            pr.log_start
        ),
        (9, -1, 1, -1, 0),
        "Produce to a partition led elsewhere"
    );
    let f = fetch(&mut c, &t, 0, 0, 1000)?;
    ensure_eq!(
        (
            f.error,
            f.high_watermark,
            f.log_start,
            f.last_stable,
            records(&f)?.len()
        ),
        (9, 0, 0, 0, 0),
        "Fetch from a partition led elsewhere"
    );
    let lo = list_offsets(&mut c, &t, 0, -1, 1)?;
    ensure_eq!(
        (lo.error, lo.leader_epoch, lo.offset),
        (0, 1, 1),
        "ListOffsets still answers (no leader check)"
    );
    let r = c.call(
        LIST_OFFSETS,
        &list_offsets_req(&[(
            &t,
            vec![
                LoPart {
                    partition: 0,
                    current_leader_epoch: 1,
                    timestamp: -2,
                    max_num_offsets: 1,
                },
                LoPart {
                    partition: 0,
                    current_leader_epoch: 0,
                    timestamp: -2,
                    max_num_offsets: 1,
                },
            ],
        )]),
    )?;
    let v = parse_list_offsets_parts(&r)?;
    ensure_eq!(
        (v[0].error, v[1].error, v[1].leader_epoch),
        (0, 9, 1),
        "epoch check uses the new epoch"
    );
    // Re-assert leadership (same epoch is fine) and the partition is writable again.
    let r = alter(&mut c, &t, 0, me, 1, &[me], &[me])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 1)],
        "restoring AlterPartition"
    );
    let pr = produce_raw(&mut c, &t, 0, b"after")?;
    ensure_eq!(
        (pr.error, pr.base_offset, pr.leader_epoch),
        (0, 1, 1),
        "Produce after leadership is back (log epoch 1)"
    );
    let f = fetch(&mut c, &t, 0, 1, 1)?;
    ensure_eq!(
        records(&f)?,
        b"after".to_vec(),
        "Fetch after leadership is back"
    );
    delete_topic(&mut c, &t)
}

fn alter_lower_epoch(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let me = self_broker(&mut c, &t)?.id;
    let other = if me == 2 { 3 } else { 2 };
    produce_ok(&mut c, &t, 0, b"x")?;
    let r = alter(&mut c, &t, 0, me, 2, &[me], &[me])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 2)],
        "raise epoch to 2"
    );
    // Lower epoch: header-only 1...
    alter(&mut c, &t, 0, other, 1, &[other], &[other])?.expect_header_only(1)?;
    // ...but the metadata was overwritten before the check.
    let md = metadata(&mut c, &[&t])?;
    let p = &md.topic(&t).ok_or("topic missing")?.partitions[0];
    ensure_eq!(
        (p.leader, p.epoch),
        (other, 1),
        "Metadata after the rejected AlterPartition"
    );
    ensure_eq!(
        produce_raw(&mut c, &t, 0, b"y")?.error,
        9,
        "Produce after the rejected call"
    );
    // Restore with the log's epoch.
    let r = alter(&mut c, &t, 0, me, 2, &[me], &[me])?;
    ensure_eq!(parse_topic_admin(&r)?.results, vec![(0, 0, 2)], "restore");
    ensure_eq!(produce_ok(&mut c, &t, 0, b"z")?, 1, "Produce after restore");
    delete_topic(&mut c, &t)
}

fn alter_creates_log(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let me = self_broker(&mut c, &t)?.id;
    let r = alter(&mut c, &t, 2, me, 0, &[me], &[me])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(2, 0, 0)],
        "AlterPartition on an unknown topic"
    );
    ensure_eq!(
        partitions_of(&mut c, &t)?,
        vec![2],
        "only the altered partition exists"
    );
    ensure_eq!(log_end(&mut c, &t, 2)?, 0, "its log exists and is empty");
    ensure_eq!(produce_ok(&mut c, &t, 2, b"x")?, 0, "writable");
    // Empty replica/ISR lists are echoed as given and the partition still accepts writes.
    let r = alter(&mut c, &t, 2, me, 0, &[], &[])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(2, 0, 0)],
        "AlterPartition with empty lists"
    );
    let md = metadata(&mut c, &[&t])?;
    let p = &md.topic(&t).ok_or("topic missing")?.partitions[0];
    ensure_eq!(
        (p.replicas.len(), p.isr.len()),
        (0, 0),
        "empty replicas/ISR echoed"
    );
    ensure_eq!(produce_ok(&mut c, &t, 2, b"y")?, 1, "still writable");
    delete_topic(&mut c, &t)
}

fn acks_all_timeout(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let me = self_broker(&mut c, &t)?.id;
    let laggard = if me == 2 { 3 } else { 2 };
    create_topic(&mut c, &t, 1)?;
    let r = alter(&mut c, &t, 0, me, 0, &[me, laggard], &[me, laggard])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 0)],
        "add a never-fetching ISR member"
    );
    let start = Instant::now();
    let r = c.call(
        PRODUCE,
        &produce_req(None, -1, 200, &[(&t, vec![(0, Some(&b"w0"[..]))])]),
    )?;
    let took = start.elapsed();
    let p = parse_produce_one(&r)?;
    ensure_eq!(
        (p.error, p.base_offset, p.log_append_time, p.log_start),
        (7, 0, -1, 0),
        "acks=-1 timeout: 7 with the real offset"
    );
    ensure!(
        took >= Duration::from_millis(150),
        "acks=-1 with timeoutMs 200 answered after {took:?} (expected to wait ~200 ms)"
    );
    let p = parse_produce_one(&c.call(
        PRODUCE,
        &produce_req(None, -1, 0, &[(&t, vec![(0, Some(&b"w1"[..]))])]),
    )?)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (7, 1),
        "acks=-1 timeoutMs 0 fails at once, data written"
    );
    ensure_eq!(produce_ok(&mut c, &t, 0, b"w2")?, 2, "acks=1 unaffected");
    let f = fetch(&mut c, &t, 0, 0, 1 << 20)?;
    ensure_eq!(
        (f.error, f.high_watermark, f.last_stable),
        (0, 0, 0),
        "HW (and LSO) held at the log start by the laggard"
    );
    ensure_eq!(
        records(&f)?,
        b"w0w1w2".to_vec(),
        "Fetch reads up to the log end, past the HW"
    );
    ensure_eq!(
        log_end(&mut c, &t, 0)?,
        3,
        "ListOffsets LATEST is the log end, not the HW"
    );
    // Remove the laggard: acks=-1 works again.
    let r = alter(&mut c, &t, 0, me, 0, &[me], &[me])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 0)],
        "remove the laggard"
    );
    let p = parse_produce_one(&c.call(
        PRODUCE,
        &produce_req(None, -1, 5000, &[(&t, vec![(0, Some(&b"w3"[..]))])]),
    )?)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (0, 3),
        "acks=-1 with a single ISR member"
    );
    delete_topic(&mut c, &t)
}

/// A throwaway topic whose only partition has a never-fetching second ISR member.
fn with_laggard(ctx: &Ctx, c: &mut Conn) -> Result<(String, i32, i32), String> {
    let t = ctx.name("t");
    let me = self_broker(c, &t)?.id;
    let laggard = if me == 2 { 3 } else { 2 };
    create_topic(c, &t, 1)?;
    let r = alter(c, &t, 0, me, 0, &[me, laggard], &[me, laggard])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 0)],
        "add a never-fetching ISR member"
    );
    Ok((t, me, laggard))
}

fn acks_all_timeout_idempotent(ctx: &Ctx) -> CaseResult {
    let (mut c, pid) = keyed_producer(ctx, "k")?;
    let (t, _, _) = with_laggard(ctx, &mut c)?;
    let batch = Srfb::new(pid, 0, 0, 1, b"idempotent").encode();
    let send = |c: &mut Conn, acks: i16| -> Result<ProducePartResp, String> {
        let body = produce_req(None, acks, 0, &[(&t, vec![(0, Some(&batch[..]))])]);
        parse_produce_one(&c.call(PRODUCE, &body)?)
    };
    let p = send(&mut c, -1)?;
    ensure_eq!((p.error, p.base_offset), (7, 0), "acks=-1 timeout");
    // The 7 was not recorded: the same sequence is appended again.
    let p = send(&mut c, -1)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (7, 1),
        "retry after 7 appends a second copy"
    );
    let p = send(&mut c, 1)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (0, 2),
        "acks=1: appended and recorded"
    );
    let p = send(&mut c, 1)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (0, 2),
        "now a recognised duplicate"
    );
    ensure_eq!(log_end(&mut c, &t, 0)?, 3, "log end");
    delete_topic(&mut c, &t)
}

fn replica_fetch(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let (t, _, laggard) = with_laggard(ctx, &mut c)?;
    let blobs: [&[u8]; 3] = [b"r0", b"r-one", b"r-two!"];
    for (i, b) in blobs.iter().enumerate() {
        ensure_eq!(produce_ok(&mut c, &t, 0, b)?, i as i64, "offset");
    }
    ensure_eq!(
        fetch(&mut c, &t, 0, 0, 1000)?.high_watermark,
        0,
        "HW held by the laggard"
    );
    let opts = FetchOpts {
        replica_id: laggard,
        ..FetchOpts::default()
    };
    let part = FetchPart {
        partition: 0,
        fetch_offset: 1,
        partition_max_bytes: 1 << 20,
    };
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, vec![part])]))?;
    let v = parse_fetch_parts(&r)?;
    ensure_eq!(v[0].error, 0, "replica Fetch errorCode");
    // Replica payload: count, then {offset, appendTime, leaderEpoch, length, blob} per entry.
    let rec = records(&v[0])?;
    let mut rd = stellflow_proto::Reader::new(bytes::Bytes::from(rec));
    let e = |e: stellflow_proto::DecodeError| format!("replica payload: {e}");
    ensure_eq!(rd.i32().map_err(e)?, 2, "replica payload entry count");
    for (off, blob) in [(1i64, blobs[1]), (2, blobs[2])] {
        ensure_eq!(rd.i64().map_err(e)?, off, "entry offset");
        let append = rd.i64().map_err(e)?;
        ensure!(append > 1_600_000_000_000, "entry appendTime {append}");
        ensure_eq!(rd.i32().map_err(e)?, 0, "entry leaderEpoch");
        let len = rd.i32().map_err(e)?;
        ensure_eq!(len as usize, blob.len(), "entry length");
        ensure_eq!(
            rd.take("blob", blob.len()).map_err(e)?.to_vec(),
            blob.to_vec(),
            "entry blob"
        );
    }
    ensure_eq!(rd.remaining(), 0, "bytes after the replica entries");
    // The follower's position (just after the last entry) moved the HW to the log end.
    let f = fetch(&mut c, &t, 0, 0, 1)?;
    ensure_eq!(
        (f.high_watermark, f.last_stable),
        (3, 3),
        "HW after the replica Fetch"
    );
    delete_topic(&mut c, &t)
}

fn create_over_higher_epoch(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let me = self_broker(&mut c, &t)?.id;
    create_topic(&mut c, &t, 1)?;
    let r = alter(&mut c, &t, 0, me, 3, &[me], &[me])?;
    ensure_eq!(
        parse_topic_admin(&r)?.results,
        vec![(0, 0, 3)],
        "raise epoch to 3"
    );
    c.call(CREATE_TOPIC, &create_topic_req(&t, 1))?
        .expect_header_only(1)?;
    // Partly applied: metadata back at epoch 0, the log keeps epoch 3.
    let md = metadata(&mut c, &[&t])?;
    let p = &md.topic(&t).ok_or("topic missing")?.partitions[0];
    ensure_eq!(
        (p.leader, p.epoch),
        (me, 0),
        "Metadata after the failed CreateTopic"
    );
    let r = c.call(
        LIST_OFFSETS,
        &list_offsets_req(&[(
            &t,
            vec![
                LoPart {
                    partition: 0,
                    current_leader_epoch: 0,
                    timestamp: -1,
                    max_num_offsets: 1,
                },
                LoPart {
                    partition: 0,
                    current_leader_epoch: 3,
                    timestamp: -1,
                    max_num_offsets: 1,
                },
            ],
        )]),
    )?;
    let v = parse_list_offsets_parts(&r)?;
    ensure_eq!(
        (v[0].error, v[1].error),
        (0, 9),
        "ListOffsets epoch check uses the metadata epoch 0"
    );
    let p = produce_raw(&mut c, &t, 0, b"x")?;
    ensure_eq!(
        (p.error, p.base_offset, p.leader_epoch),
        (0, 0, 3),
        "Produce reports the log's epoch"
    );
    delete_topic(&mut c, &t)
}

fn describe_cluster(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let before = parse_cluster(&c.call(DESCRIBE_CLUSTER, &minimal_api_versions_req())?)?;
    ensure_eq!(
        (before.error, before.cluster_id.as_deref(), before.brokers),
        (0, Some("stellflow-dev-cluster"), 1),
        "DescribeCluster (errorCode, clusterId, brokerCount)"
    );
    let t = ctx.name("t");
    create_topic(&mut c, &t, 3)?;
    let after = parse_cluster(&c.call(DESCRIBE_CLUSTER, &minimal_api_versions_req())?)?;
    ensure_eq!(
        (
            after.topics - before.topics,
            after.partitions - before.partitions
        ),
        (1, 3),
        "topicCount/partitionCount deltas after creating a 3-partition topic"
    );
    let r = c.call(
        HEALTH_CHECK,
        &api_versions_req(Some("anything"), Some("1"), &["f"]),
    )?;
    r.expect_ok_body(0)?;
    ensure_eq!(
        parse_cluster(&r)?,
        after,
        "HealthCheck body equals DescribeCluster's"
    );
    // The body is required for v0: an empty one closes the connection.
    for key in [DESCRIBE_CLUSTER, HEALTH_CHECK] {
        let mut c2 = ctx.conn()?;
        c2.send(&client::Hdr::new(key, 3, None), &[])?;
        c2.expect_closed()
            .map_err(|e| format!("apiKey {key} v0 with an empty body: {e}"))?;
    }
    delete_topic(&mut c, &t)
}

fn decommission(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    for id in [1, -9, 12345] {
        let r = c.call(DECOMMISSION_BROKER, &decommission_req(id))?;
        r.expect_ok_body(0)?;
        let (err, msg) = parse_decommission(&r)?;
        ensure_eq!(
            (err, msg),
            (
                0,
                Some(format!("decommission plan accepted for brokerId={id}"))
            ),
            "DecommissionBroker {id}"
        );
    }
    // Nothing happened: the broker still serves.
    let t = ctx.name("t");
    ensure_eq!(
        produce_ok(&mut c, &t, 0, b"x")?,
        0,
        "Produce after DecommissionBroker"
    );
    Ok(())
}

/// A topic just created, the broker's side: right after CreateTopic answers, Metadata names this
/// broker leader of every partition and ListOffsets answers — so a client that fails there
/// only lacks a metadata refresh.
fn create_then_route(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    create_topic(&mut c, &t, 2)?;
    let me = self_broker(&mut c, &t)?.id;
    let md = metadata(&mut c, &[&t])?;
    let topic = md.topic(&t).ok_or("created topic missing from Metadata")?;
    let leaders: Vec<(i32, i16, i32)> = topic
        .partitions
        .iter()
        .map(|p| (p.partition, p.error, p.leader))
        .collect();
    ensure_eq!(
        leaders,
        vec![(0, 0, me), (1, 0, me)],
        "partitions, errors, leaders"
    );
    for p in 0..2 {
        ensure_eq!(log_end(&mut c, &t, p)?, 0, "ListOffsets LATEST of {p}");
    }
    delete_topic(&mut c, &t)?;
    assert_topic_unknown(&mut c, &t)
}
