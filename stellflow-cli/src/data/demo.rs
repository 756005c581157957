//! `stellflow demo`: a produce, consume and commit round trip against the embedded simulated
//! broker (or a given bootstrap).

use crate::{CliResult, Global, fail};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use stellflow_blocking::{Acks, OffsetReset, OffsetSpec, Position, Record, SeekTo, TopicPartition};

/// `stellflow demo`
pub fn demo(g: &Global, records: usize) -> CliResult {
    let t0 = Instant::now();
    let topic = "demo";
    let group = "demo-group";
    println!("==> stellflow demo: produce {records} records, consume them back exactly");
    let env = g.connect(|c| {
        c.producer.acks = Acks::All;
        c.consumer.group_id = Some(group.into());
        c.consumer.auto_offset_reset = OffsetReset::Earliest;
        c.consumer.enable_auto_commit = false;
    })?;
    match &env.embedded {
        Some(s) => println!("1. started an embedded sim broker on {}", s.local_addr()),
        None => println!("1. connected to {}", g.bootstrap.as_deref().unwrap_or("?")),
    }
    let admin = env.client.admin();
    let (topics, _) = admin.describe_topics(&[topic])?;
    let partitions = match topics.first() {
        Some(t) => t.partitions.len() as i32,
        None => {
            admin.create_topic(topic, 3, stellflow_blocking::Target::Any)?;
            let _ = admin.describe_topics(&[topic])?;
            3
        }
    };
    println!("2. topic {topic:?} has {partitions} partition(s)");
    let before = admin.list_offsets(
        &(0..partitions)
            .map(|p| (topic, p, OffsetSpec::Latest))
            .collect::<Vec<_>>(),
    )?;
    let producer = env.client.producer();
    let run = format!("{:x}", t0.elapsed().as_nanos());
    let sent: Vec<String> = (0..records).map(|i| format!("demo-{run}-{i}")).collect();
    let mut pending = Vec::with_capacity(records);
    for (i, v) in sent.iter().enumerate() {
        let key = format!("user-{}", i % 10);
        pending.push(producer.enqueue(Record::new(topic, v.clone()).with_key(key))?);
    }
    producer.flush()?;
    let mut per_part: BTreeMap<i32, (u64, Option<i64>)> = BTreeMap::new();
    for p in pending {
        let m = p.wait()?;
        let e = per_part.entry(m.partition).or_default();
        e.0 += 1;
        e.1 = e.1.max(m.offset);
    }
    println!(
        "3. produced {records} keyed records (acks=all) in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    for (p, (n, last)) in &per_part {
        println!(
            "     partition {p}: {n} record(s), last blob at offset {}",
            last.unwrap_or(-1)
        );
    }
    let consumer = env.client.consumer();
    let parts: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&parts)?;
    for (tp, b) in parts.iter().zip(&before) {
        if let Ok(o) = &b.result {
            consumer.seek(tp, SeekTo::Position(Position::blob(o.offset)))?;
        }
    }
    let mut got: Vec<String> = Vec::with_capacity(records);
    let mut last_seq: BTreeMap<i32, usize> = BTreeMap::new();
    let mut in_order = true;
    let deadline = Instant::now() + env.timeout.max(Duration::from_secs(10));
    while got.len() < records && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(100))? {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            let seq = v
                .rsplit('-')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if last_seq
                .insert(r.partition, seq)
                .is_some_and(|prev| prev >= seq)
            {
                in_order = false;
            }
            got.push(v);
        }
    }
    let committed = consumer.commit_sync()?;
    println!(
        "4. consumed {} record(s) and committed {} partition position(s) for group {group:?}",
        got.len(),
        committed.len()
    );
    let mut a = got.clone();
    let mut b = sent.clone();
    a.sort();
    b.sort();
    if a != b || !in_order {
        return fail(format!(
            "consumed records differ from those produced ({} of {records}, in order: {in_order})",
            got.len()
        ));
    }
    println!("5. every record came back exactly once, in order within its partition");
    let offs = admin.list_offsets(
        &(0..partitions)
            .map(|p| (topic, p, OffsetSpec::Latest))
            .collect::<Vec<_>>(),
    )?;
    let ends: Vec<String> = offs
        .iter()
        .map(|o| {
            format!(
                "{}-{}: {}",
                o.topic,
                o.partition,
                o.result.as_ref().map_or(-1, |i| i.offset)
            )
        })
        .collect();
    println!(
        "6. log end offsets (one offset per produced blob): {}",
        ends.join(", ")
    );
    consumer.close()?;
    producer.close()?;
    println!("==> done in {:.0} ms", t0.elapsed().as_secs_f64() * 1e3);
    Ok(())
}
