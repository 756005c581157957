//! Reading through the adapter's consumer: keyed records at their reported positions,
//! large records, concurrent pollers, whole blobs, seeking by time, calls after close and
//! the bounded event queue.

use super::*;

/// 100,000 keyed records over 6 partitions through one client, consumed back exactly at the
/// positions their deliveries reported; `max_poll_records` bounds each poll; lag ends at 0.
pub async fn produce_consume_100k() -> R<()> {
    const N: u32 = 100_000;
    let server = sim()?;
    let mut c = config(&server)?;
    c.set("max.poll.records", "777")?;
    let client = aw!(Client::connect(c))?;
    create_topic(&client.admin(), "bulk", 6).await?;
    let written = produce_keyed(&client, "bulk", N).await?;
    let parts: std::collections::BTreeSet<i32> = written.iter().map(|m| m.partition).collect();
    check(parts.len() == 6, || {
        format!("keyed records hit only {parts:?}")
    })?;

    let consumer = client.consumer();
    let tps: Vec<TopicPartition> = (0..6).map(|p| TopicPartition::new("bulk", p)).collect();
    consumer.assign(&tps)?;
    let end = Instant::now() + Duration::from_secs(120);
    let mut got = Vec::with_capacity(N as usize);
    while got.len() < N as usize && Instant::now() < end {
        let batch = aw!(consumer.poll(Duration::from_millis(200)))?;
        check(batch.len() <= 777, || {
            format!("poll returned {}", batch.len())
        })?;
        got.extend(batch);
    }
    check(got.len() == N as usize, || {
        format!("consumed {} of {N}", got.len())
    })?;
    exactly_once(&got, N)?;
    for r in &got {
        let i = index_of(r)?;
        let m = &written[i as usize];
        check(
            m.partition == r.partition && m.offset == Some(r.offset) && m.index == r.index,
            || {
                format!(
                    "record {i}: delivered at {m:?}, consumed at {}#{}",
                    r.offset, r.index
                )
            },
        )?;
    }
    let extra = aw!(consumer.poll(Duration::from_millis(300)))?;
    check(extra.is_empty(), || {
        format!("{} records past the end", extra.len())
    })?;
    for tp in &tps {
        check(consumer.lag(tp) == Some(0), || {
            format!("{tp} lag {:?}", consumer.lag(tp))
        })?;
    }
    aw!(client.close())?;
    Ok(())
}

/// Records of 100 KiB to 1.5 MiB, one partition, read back whole and in order: their answers
/// are frames from a few hundred KiB to several MiB, which a runtime that reads frames into
/// vectors of their own (smol) reads that way, interleaved with small frames.
pub async fn large_records_exactly_once() -> R<()> {
    const N: usize = 24;
    let server = sim()?;
    let client = aw!(Client::connect_with(config(&server)?, Options::default()))?;
    create_topic(&client.admin(), "large", 1).await?;
    let value = |i: usize| -> Vec<u8> {
        let len = 100 * 1024 + (i * 61 * 1024) % (1400 * 1024);
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    };
    produce_all(&client, (0..N).map(|i| Record::new("large", value(i)))).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("large", 0)])?;
    let got = poll_n(&consumer, N, Duration::from_secs(60)).await?;
    check(got.len() == N, || format!("consumed {} of {N}", got.len()))?;
    for (i, r) in got.iter().enumerate() {
        check(r.value.as_deref() == Some(&value(i)[..]), || {
            format!("record {i} differs (offset {}#{})", r.offset, r.index)
        })?;
    }
    Ok(())
}

/// Four threads poll one consumer at once, each with its own small `poll_max`, so that their
/// takes race for the same records (and hold the client's lock while the driver reads): every
/// record arrives exactly once, each thread sees each partition's records in order, and every
/// thread gets some.
pub async fn concurrent_pollers_exactly_once() -> R<()> {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    const N: u32 = 30_000;
    // Values of about 1 KiB: Fetch answers of several MiB, each read in many pieces.
    let value = |i: u32| format!("{i:08}{}", "v".repeat(1000 + (i % 50) as usize));
    let server = sim()?;
    let client = aw!(Client::connect_with(config(&server)?, Options::default()))?;
    create_topic(&client.admin(), "shared", 3).await?;
    produce_all(&client, (0..N).map(|i| Record::new("shared", value(i)))).await?;
    let consumer = client.consumer();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("shared", p)).collect();
    consumer.assign(&tps)?;
    let taken = AtomicUsize::new(0);
    let end = Instant::now() + Duration::from_secs(120);
    let poller = |t: usize| {
        let (consumer, taken) = (consumer.clone(), &taken);
        move || -> R<Vec<sf::ConsumerRecord>> {
            block_on(async move {
                let mut got = Vec::new();
                while taken.load(SeqCst) < N as usize && Instant::now() < end {
                    let batch = aw!(consumer.poll_max(Duration::from_millis(50), 3 + 4 * t))?;
                    taken.fetch_add(batch.len(), SeqCst);
                    got.extend(batch);
                }
                Ok(got)
            })
        }
    };
    let per_thread = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4).map(|t| s.spawn(poller(t))).collect();
        let joined = threads.into_iter().map(|h| h.join());
        joined
            .map(|r| r.unwrap_or_else(|_| Err("a poller panicked".into())))
            .collect::<R<Vec<_>>>()
    })?;
    let mut seen = vec![0u32; N as usize];
    for (t, got) in per_thread.iter().enumerate() {
        check(!got.is_empty(), || format!("poller {t} got nothing"))?;
        let mut last: std::collections::HashMap<i32, Position> = Default::default();
        for r in got {
            let v = std::str::from_utf8(r.value.as_deref().unwrap_or_default())?;
            let i: u32 = v.get(..8).ok_or("short value")?.parse()?;
            check(v == value(i), || format!("record {i} has the wrong value"))?;
            seen[i as usize] += 1;
            let at = Position::new(r.offset, r.index);
            if let Some(before) = last.insert(r.partition, at) {
                check(before < at, || {
                    format!(
                        "poller {t}: partition {} went from {before} to {at}",
                        r.partition
                    )
                })?;
            }
        }
    }
    let wrong: Vec<_> = (seen.iter().enumerate())
        .filter(|(_, n)| **n != 1)
        .take(5)
        .collect();
    check(wrong.is_empty(), || {
        format!("records not consumed exactly once (index, times): {wrong:?}")
    })?;
    aw!(client.close())?;
    Ok(())
}

/// 20,000 keyed records over 3 partitions read back as whole blobs (`poll_blobs`): the same
/// records at the positions their deliveries reported, each once; a blob taken moves the
/// position past it, to the log end once all are taken.
pub async fn poll_blobs_exactly_once() -> R<()> {
    const N: u32 = 20_000;
    let server = sim()?;
    let client = aw!(Client::connect_with(config(&server)?, Options::default()))?;
    create_topic(&client.admin(), "blobs", 3).await?;
    let written = produce_keyed(&client, "blobs", N).await?;
    let consumer = client.consumer();
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("blobs", p)).collect();
    consumer.assign(&tps)?;
    let end = Instant::now() + Duration::from_secs(120);
    let mut got = Vec::with_capacity(N as usize);
    while got.len() < N as usize && Instant::now() < end {
        for blob in aw!(consumer.poll_blobs(Duration::from_millis(200)))? {
            let tp = TopicPartition::new(blob.topic(), blob.partition());
            let (offset, format, next) = (blob.offset(), blob.format(), blob.next_position());
            check(consumer.position(&tp) >= Some(next), || {
                format!(
                    "{tp} at {:?} after taking blob {offset}",
                    consumer.position(&tp)
                )
            })?;
            for r in blob {
                let r = r?;
                got.push(sf::ConsumerRecord {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset,
                    index: r.index_in_blob,
                    timestamp: r.record.timestamp,
                    key: r.record.key,
                    value: r.record.value,
                    headers: r.record.headers,
                    format,
                    last_in_blob: false,
                });
            }
        }
    }
    check(got.len() == N as usize, || {
        format!("consumed {} of {N}", got.len())
    })?;
    exactly_once(&got, N)?;
    for r in &got {
        let m = &written[index_of(r)? as usize];
        check(
            m.partition == r.partition && m.offset == Some(r.offset) && m.index == r.index,
            || {
                format!(
                    "delivered at {m:?}, read from blob {}#{}",
                    r.offset, r.index
                )
            },
        )?;
    }
    check(
        aw!(consumer.poll_blobs(Duration::from_millis(300)))?.is_empty(),
        || "blobs past the end".to_owned(),
    )?;
    for tp in &tps {
        let last = written.iter().filter(|m| m.partition == tp.partition);
        let end = last
            .filter_map(|m| m.offset)
            .max()
            .map(|o| Position::blob(o + 1));
        check(consumer.position(tp) == end, || {
            format!("{tp}: at {:?}, log ends at {end:?}", consumer.position(tp))
        })?;
    }
    aw!(client.close())?;
    Ok(())
}

/// `poll`, `recv` after `close` fail with `Closed`; a closed client fails with `Shutdown`.
pub async fn calls_after_close() -> R<()> {
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "closed", 1).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("closed", 0)])?;
    aw!(consumer.close())?;
    let closed = |r: &Result<(), Error>| matches!(r, Err(Error::Consumer(ConsumerError::Closed)));
    let r = aw!(consumer.poll(Duration::from_millis(100))).map(drop);
    check(closed(&r), || format!("poll after close: {r:?}"))?;
    let r = aw!(consumer.recv()).map(drop);
    check(closed(&r), || format!("recv after close: {r:?}"))?;
    aw!(client.close())?;
    let r = aw!(client.producer().send(record("closed", 0)));
    check(matches!(r, Err(Error::Shutdown)), || {
        format!("send after client close: {r:?}")
    })?;
    Ok(())
}

/// Events are bounded, and an overflow is reported with the number of dropped events.
pub async fn events_overflow_reported() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("ev".into());
    cfg.consumer.enable_auto_commit = false;
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "ev", 1).await?;
    let consumer = client.consumer();
    let tp = TopicPartition::new("ev", 0);
    consumer.assign(std::slice::from_ref(&tp))?;
    positioned(&consumer, &tp).await?;
    consumer.events();
    let n = Events::CAP as u64 + 100;
    for _ in 0..n {
        consumer.commit_async()?;
    }
    aw!(consumer.commit_sync())?; // behind every async commit on the coordinator
    let end = Instant::now() + Duration::from_secs(20);
    let (mut kept, mut dropped) = (0, 0);
    while (kept as u64) + dropped < n && Instant::now() < end {
        aw!(sleep(Duration::from_millis(50)));
        let e = consumer.events();
        let commits = e
            .events
            .iter()
            .filter(|e| matches!(e, ConsumerEvent::CommitCompleted { .. }));
        kept = kept.max(commits.count());
        dropped += e.dropped;
    }
    check(dropped > 0 && kept <= Events::CAP, || {
        format!("kept {kept}, dropped {dropped}")
    })?;
    check(kept as u64 + dropped >= n, || {
        format!("{n} commits, kept {kept}, dropped {dropped}")
    })?;
    aw!(client.close())?;
    Ok(())
}

/// `SeekTo::Timestamp` and `offsets_for_times` find the first blob appended at or after a time.
pub async fn seek_by_timestamp() -> R<()> {
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "ts", 1).await?;
    let producer = client.producer();
    for i in 0..10 {
        aw!(producer.send(record("ts", i)))?;
    }
    aw!(sleep(Duration::from_millis(30)));
    let ms = now_ms()?;
    aw!(sleep(Duration::from_millis(30)));
    let later = aw!(producer.send(record("ts", 10)))?;
    let tp = TopicPartition::new("ts", 0);
    let found = aw!(client.consumer().offsets_for_times(&[(tp.clone(), ms)]))?;
    let info = found[0].result.clone()?;
    check(Some(info.offset) == later.offset && !info.no_match, || {
        format!("offsets_for_times {info:?}, the record after that time is at {later:?}")
    })?;
    let consumer = client.consumer();
    consumer.assign(std::slice::from_ref(&tp))?;
    seek_and_check(&consumer, &tp, ms, 10).await?;
    seek_and_check(&consumer, &tp, 0, 0).await?;
    let future = ms + 3_600_000;
    let none = aw!(consumer.offsets_for_times(&[(tp.clone(), future)]))?;
    check(none[0].result.as_ref().is_ok_and(|i| i.no_match), || {
        format!("{none:?}")
    })?;
    aw!(client.close())?;
    Ok(())
}
