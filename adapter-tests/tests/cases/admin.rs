//! Admin calls through the adapter: every read-only and topic operation, and a group's
//! committed offsets.

use super::*;

/// Admin round trip over every read-only and topic operation, metadata and counters on the
/// admin handle and on the client.
pub async fn admin_round_trip() -> R<()> {
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(5)).await?;
    let admin = client.admin();
    let v = aw!(admin.api_versions(Target::Any))?;
    check(!v.apis.is_empty(), || format!("no APIs: {v:?}"))?;
    let c = aw!(admin.describe_cluster(Target::Any))?;
    check(c.broker_count == 1, || format!("cluster: {c:?}"))?;
    let h = aw!(admin.health_check(Target::Any))?;
    check(h.error_code.is_ok(), || format!("health: {h:?}"))?;
    create_topic(&admin, "admin-rt", 3).await?;
    let (topics, missing) = aw!(admin.describe_topics(&["admin-rt", "nope"]))?;
    check(topics.len() == 1 && topics[0].partitions.len() == 3, || {
        format!("describe: {topics:?}")
    })?;
    check(missing == ["nope"], || format!("missing: {missing:?}"))?;
    admin.refresh_metadata()?;
    check(admin.metadata().topics.contains_key("admin-rt"), || {
        "metadata lacks the topic".into()
    })?;
    check(client.metadata().brokers.len() == 1, || {
        "client metadata".into()
    })?;
    let m = aw!(client.producer().send(record("admin-rt", 1)))?;
    let offsets = aw!(admin.list_offsets(&[
        ("admin-rt", m.partition, OffsetSpec::Earliest),
        ("admin-rt", m.partition, OffsetSpec::Latest),
    ]))?;
    let got: Vec<i64> = (offsets.iter())
        .map(|o| o.result.as_ref().map(|i| i.offset).unwrap_or(-99))
        .collect();
    check(got == [0, 1], || format!("offsets {offsets:?}"))?;
    let call = AdminCall::describe_cluster(Target::Any);
    let r = aw!(admin.call(call, Default::default()))?;
    check(r.broker_count >= 1, || format!("{r:?}"))?;
    let d = aw!(admin.delete_topic("admin-rt", Target::Any))?;
    check(d.is_ok(), || format!("delete: {d:?}"))?;
    let (topics, _) = aw!(admin.describe_topics(&["admin-rt"]))?;
    check(topics.is_empty(), || format!("still there: {topics:?}"))?;
    let bad = aw!(admin.create_topic("../escape", 1, Target::Any));
    check(bad.is_err(), || "an invalid topic name was accepted".into())?;
    check(admin.counters().requests > 0, || {
        "no requests counted".into()
    })?;
    check(client.counters().requests > 0, || "client counters".into())?;
    aw!(client.close())?;
    Ok(())
}

/// `Admin::committed_offsets` reads back what a group member committed (mid-blob positions
/// included), in request order; a group that never committed has `None` everywhere.
pub async fn admin_committed_offsets() -> R<()> {
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "cmt", 2).await?;
    // One blob per partition (the flush sends them), so 30 records end inside a blob.
    let mut pcfg = config(&server)?;
    pcfg.producer.linger = Duration::from_secs(10);
    let producer = aw!(sf::Producer::connect(pcfg))?;
    for i in 0..200 {
        drop(aw!(producer.enqueue(record("cmt", i)))?);
    }
    aw!(producer.flush())?;
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("cmt-g".into());
    cfg.consumer.enable_auto_commit = false;
    let consumer = aw!(sf::Consumer::connect(cfg))?;
    consumer.subscribe(&["cmt"])?;
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < 30 && Instant::now() < end {
        got.extend(aw!(
            consumer.poll_max(Duration::from_millis(200), 30 - got.len())
        )?);
    }
    check(got.len() == 30, || format!("consumed {}", got.len()))?;
    let committed = aw!(consumer.commit_sync())?;
    check(committed.iter().any(|(_, p)| p.index > 0), || {
        format!("no mid-blob position committed: {committed:?}")
    })?;
    let ask = [("cmt", 1), ("cmt", 0)];
    let read = aw!(admin.committed_offsets("cmt-g", &ask))?;
    check(read.len() == 2, || format!("read {read:?}"))?;
    for (r, (topic, partition)) in read.iter().zip(ask) {
        check(r.topic == topic && r.partition == partition, || {
            format!("answer out of request order: {read:?}")
        })?;
        let tp = TopicPartition::new(topic, partition);
        let want = committed.iter().find(|(t, _)| *t == tp).map(|(_, p)| *p);
        check(r.result == Ok(want), || {
            format!("{tp}: committed {want:?}, read {:?}", r.result)
        })?;
    }
    let none = aw!(admin.committed_offsets("cmt-nobody", &ask))?;
    check(
        none.len() == 2 && none.iter().all(|r| r.result == Ok(None)),
        || format!("a group that never committed: {none:?}"),
    )?;
    aw!(consumer.close())?;
    aw!(producer.close())?;
    Ok(())
}
