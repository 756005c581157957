//! Metadata (PROTOCOL.md §3.2) and FindCoordinator (§3.8).

use super::super::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "metadata_unknown_topic_10_in_request_order",
            section: "3.2",
            run: unknown_topics,
        },
        Case {
            name: "metadata_never_auto_creates",
            section: "3.2, 7 D17",
            run: never_auto_creates,
        },
        Case {
            name: "metadata_created_topic_shape",
            section: "3.2, 3.14",
            run: created_topic_shape,
        },
        Case {
            name: "metadata_all_topics_sorted_negative_count_is_all",
            section: "3.2, 1.4",
            run: all_topics_sorted,
        },
        Case {
            name: "find_coordinator_self_with_node_id_0",
            section: "3.8",
            run: find_coordinator,
        },
    ]
}

fn unknown_topics(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let (a, b) = (ctx.name("a"), ctx.name("b"));
    let md = metadata(&mut c, &[&b, &a, &b])?;
    let names: Vec<_> = md.topics.iter().map(|t| t.name.clone()).collect();
    ensure_eq!(
        names,
        vec![Some(b.clone()), Some(a.clone()), Some(b.clone())],
        "named answer in request order, duplicates repeated"
    );
    for t in &md.topics {
        ensure_eq!(
            (t.error, t.internal, t.partitions.len(), t.auth_ops),
            (10, 0, 0, 0),
            "unknown topic entry (errorCode, isInternal, partitions, authorizedOperations)"
        );
    }
    ensure_eq!(
        md.cluster_id.as_deref(),
        Some("stellflow-dev-cluster"),
        "clusterId"
    );
    ensure_eq!(md.controller_id, 0, "controllerId (hard-coded 0)");
    ensure_eq!(md.cluster_auth_ops, 0, "clusterAuthorizedOperations");
    Ok(())
}

fn never_auto_creates(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    // allowAutoTopicCreation = 1 is ignored.
    let mut body = bytes::BytesMut::new();
    body.extend_from_slice(&metadata_req(&[&t])[..]);
    let n = body.len();
    body[n - 1] = 1;
    for _ in 0..2 {
        let r = c.call(METADATA, &body)?;
        r.expect_ok_body(0)?;
        let md = parse_metadata(&r)?;
        ensure_eq!(md.topics.len(), 1, "topics");
        ensure_eq!(
            md.topics[0].error,
            10,
            "named unknown topic with allowAutoTopicCreation=1"
        );
    }
    // Not listed among all topics, unknown to ListOffsets and Fetch.
    let all = metadata(&mut c, &[])?;
    ensure!(all.topic(&t).is_none(), "topic {t} was created by Metadata");
    let lo = list_offsets(&mut c, &t, 0, -1, 1)?;
    ensure_eq!(lo.error, 10, "ListOffsets errorCode after Metadata");
    let f = fetch(&mut c, &t, 0, 0, 1000)?;
    ensure_eq!(f.error, 10, "Fetch errorCode after Metadata");
    Ok(())
}

fn created_topic_shape(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    create_topic(&mut c, &t, 3)?;
    let md = metadata(&mut c, &[&t])?;
    ensure_eq!(md.brokers.len(), 1, "brokers on a single node");
    let b = &md.brokers[0];
    ensure_eq!(b.rack, None, "rack (always null)");
    ensure!(b.port > 0, "broker port {}", b.port);
    ensure_eq!(md.controller_id, 0, "controllerId");
    let id = b.id;
    let topic = md.topic(&t).ok_or("created topic missing")?;
    ensure_eq!(
        (topic.error, topic.internal, topic.auth_ops),
        (0, 0, 0),
        "topic entry"
    );
    let expected: Vec<PartMd> = (0..3)
        .map(|p| PartMd {
            error: 0,
            partition: p,
            leader: id,
            epoch: 0,
            replicas: vec![id],
            isr: vec![id],
            offline: vec![],
        })
        .collect();
    ensure_eq!(
        topic.partitions,
        expected,
        "partitions of a created 3-partition topic"
    );
    if ctx.target == Target::External {
        ctx.note(format!("brokerId {id}"));
    }
    Ok(())
}

fn all_topics_sorted(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let (tb, ta) = (ctx.name("b"), ctx.name("a"));
    produce_ok(&mut c, &tb, 0, b"x")?;
    produce_ok(&mut c, &ta, 1, b"x")?;
    let md = metadata(&mut c, &[])?;
    let names: Vec<String> = md
        .topics
        .iter()
        .map(|t| t.name.clone().unwrap_or_default())
        .collect();
    ensure!(
        names.contains(&ta) && names.contains(&tb),
        "created topics listed"
    );
    let mut sorted = names.clone();
    sorted.sort_by(|x, y| x.encode_utf16().cmp(y.encode_utf16()));
    ensure_eq!(names, sorted, "all-topics answer sorted by name");
    ensure!(
        md.topics.iter().all(|t| t
            .partitions
            .windows(2)
            .all(|w| w[0].partition < w[1].partition)),
        "partitions sorted ascending"
    );
    // A negative count reads as an empty array, i.e. all topics.
    let r = c.call(METADATA, &metadata_req_count(-7, 0))?;
    let neg = parse_metadata(&r)?;
    ensure!(
        neg.topic(&ta).is_some() && neg.topic(&tb).is_some(),
        "negative topic count did not return all topics"
    );
    Ok(())
}

fn find_coordinator(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let me = self_broker(&mut c, &ctx.name("probe"))?;
    for (key, key_type) in [
        (Some(ctx.name("g")), 0i8),
        (None, 0),
        (Some("x".into()), 1),
        (Some("".into()), 99),
    ] {
        let r = c.call(
            FIND_COORDINATOR,
            &find_coordinator_req(key.as_deref(), key_type),
        )?;
        r.expect_ok_body(0)?;
        let f = parse_find_coordinator(&r)?;
        ensure_eq!(
            f,
            FindCoordinatorResp {
                error: 0,
                node_id: 0,
                host: me.host.clone(),
                port: me.port,
            },
            "FindCoordinator for key {key:?} type {key_type} (nodeId 0, own host/port)"
        );
    }
    ensure!(
        me.id != 0,
        "Metadata brokerId is 0; the nodeId quirk is invisible (expected id 1)"
    );
    Ok(())
}
