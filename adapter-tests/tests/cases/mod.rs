//! The suite's cases, written once against the one adapter API. The including file names its
//! adapter crate `sf` and defines `aw!`, `delivered!`, `block_on` and `sleep` (see the crate
//! docs); each case becomes a `#[test]` at the bottom.

use super::{block_on, sf, sleep};
use bytes::Bytes;
use sf::{
    AdminCall, Client, ClientConfig, ConsumerError, ConsumerEvent, Error, Events, OffsetSpec,
    Options, Position, Record, SeekTo, Target, TopicPartition,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use stellflow_adapter_tests::{R, Watchdog, check, config, exactly_once, index_of, payload, sim};
use stellflow_sim::{Fault, FaultRule, SimServer};

/// A client with test-friendly adapter options.
async fn client(mut config: ClientConfig, max_block: Duration) -> R<Client> {
    config.producer.max_block = max_block;
    let mut o = Options::default();
    o.close_timeout = Duration::from_secs(5);
    Ok(aw!(Client::connect_with(config, o))?)
}

fn record(topic: &str, i: u32) -> Record {
    let (k, v) = payload(i);
    Record::new(topic, v).with_key(k)
}

/// Produces records `0..n` of [`record`] to `topic`, flushes, and returns where each landed.
async fn produce_keyed(client: &Client, topic: &str, n: u32) -> R<Vec<sf::RecordMetadata>> {
    produce_all(client, (0..n).map(|i| record(topic, i))).await
}

/// Produces records `lo..hi` of [`record`] to `topic` and flushes.
async fn produce_keyed_range(client: &Client, topic: &str, lo: u32, hi: u32) -> R<()> {
    produce_all(client, (lo..hi).map(|i| record(topic, i))).await?;
    Ok(())
}

/// Enqueues every record, flushes, and returns where each landed.
async fn produce_all(
    client: &Client,
    records: impl IntoIterator<Item = Record>,
) -> R<Vec<sf::RecordMetadata>> {
    let producer = client.producer();
    let mut pending = Vec::new();
    for r in records {
        pending.push(aw!(producer.enqueue(r))?);
    }
    aw!(producer.flush())?;
    let mut written = Vec::with_capacity(pending.len());
    for d in pending {
        written.push(delivered!(d)?);
    }
    Ok(written)
}

/// Polls until `n` records came or `limit` passed.
async fn poll_n(c: &sf::Consumer, n: usize, limit: Duration) -> R<Vec<sf::ConsumerRecord>> {
    let end = Instant::now() + limit;
    let mut got = Vec::with_capacity(n);
    while got.len() < n && Instant::now() < end {
        got.extend(aw!(c.poll_max(Duration::from_millis(200), 500))?);
    }
    Ok(got)
}

async fn create_topic(a: &sf::Admin, topic: &str, partitions: i32) -> R<()> {
    let r = aw!(a.create_topic(topic, partitions, Target::Any))?;
    check(r.is_ok(), || format!("create {topic}: {r:?}"))
}

fn silence(server: &SimServer) -> R<()> {
    let rule = FaultRule {
        broker: None,
        api_key: None,
        fault: Fault::DropResponse,
        probability: 1.0,
        remaining: None,
    };
    Ok(server.with_cluster(|c, _| c.inject_fault(rule))?)
}

/// Waits until the consumer has a position for `tp`.
async fn positioned(c: &sf::Consumer, tp: &TopicPartition) -> R<Position> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = c.position(tp) {
            return Ok(p);
        }
        check(Instant::now() < end, || {
            format!("no start position for {tp}")
        })?;
        aw!(sleep(Duration::from_millis(20)));
    }
}

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

/// The consumer path a commit case reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadPath {
    /// `poll`: one `ConsumerRecord` per record.
    Records,
    /// `poll_blobs`, each blob iterated as owned records.
    Blobs,
    /// `poll_blobs`, each record a borrowed view (`FetchedBlob::next_view`).
    Views,
}

/// How a commit case commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CommitMode {
    /// `commit_sync` of what was delivered.
    Sync,
    /// `commit_marked_only`: marks after processing (`mark_processed` per record on the
    /// record path, `mark_position(next_position)` per blob on the blob paths), then
    /// `commit_sync`.
    Marked,
    /// Auto-commit every 50 ms, read back from the coordinator.
    Auto,
}

/// Reads through `path` until `c` has `total` records; returns the record indices read.
/// With `mark`, marks each record (or blob) processed once it is read.
async fn read_through(
    c: &sf::Consumer,
    path: ReadPath,
    total: usize,
    mut got: usize,
    mark: bool,
) -> R<Vec<u32>> {
    let end = Instant::now() + Duration::from_secs(30);
    let wait = Duration::from_millis(200);
    let mut seen = Vec::new();
    let index = |v: Option<&[u8]>| -> R<u32> {
        let s = std::str::from_utf8(v.ok_or("record without value")?)?;
        Ok(s.get(6..14).ok_or("short value")?.parse()?)
    };
    while got < total && Instant::now() < end {
        match path {
            ReadPath::Records => {
                for r in aw!(c.poll_max(wait, total - got))? {
                    seen.push(index_of(&r)?);
                    got += 1;
                    if mark {
                        c.mark_processed(&r)?;
                    }
                }
            }
            ReadPath::Blobs | ReadPath::Views => {
                for mut blob in aw!(c.poll_blobs(wait))? {
                    let tp = TopicPartition::new(blob.topic(), blob.partition());
                    let next = blob.next_position();
                    if path == ReadPath::Views {
                        while let Some(r) = blob.next_view() {
                            seen.push(index(r?.value)?);
                            got += 1;
                        }
                    } else {
                        for r in blob {
                            seen.push(index(r?.record.value.as_deref())?);
                            got += 1;
                        }
                    }
                    if mark {
                        c.mark_position(&tp, next)?;
                    }
                }
            }
        }
    }
    check(got == total, || {
        format!("{path:?}: read {got} of {total} records")
    })?;
    Ok(seen)
}

/// The blob paths (`poll_blobs` read as owned records or as borrowed views) commit exactly
/// what `poll` commits for the same records: after each of three produced rounds (several
/// blobs a partition), nine consumers — each path under `commit_sync`, marks
/// (`commit_marked_only`) and auto-commit, each its own group — read everything produced so
/// far, and every mode's committed positions must be the same for all three paths (and, for
/// the delivered modes, the consumer's own position). A difference in what counts as
/// delivered or processed on any path fails it.
pub async fn blob_paths_commit_as_poll_does() -> R<()> {
    const ROUND: u32 = 600;
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(30)).await?;
    let admin = client.admin();
    create_topic(&admin, "vc", 2).await?;
    let tps: Vec<TopicPartition> = (0..2).map(|p| TopicPartition::new("vc", p)).collect();
    let paths = [ReadPath::Records, ReadPath::Blobs, ReadPath::Views];
    let mut members = Vec::new();
    for mode in [CommitMode::Sync, CommitMode::Marked, CommitMode::Auto] {
        for path in paths {
            let mut cfg = config(&server)?;
            let group = format!("vc-{mode:?}-{path:?}");
            cfg.consumer.group_id = Some(group.clone());
            cfg.consumer.enable_auto_commit = mode == CommitMode::Auto;
            cfg.consumer.auto_commit_interval = Duration::from_millis(50);
            cfg.consumer.commit_marked_only = mode == CommitMode::Marked;
            let c = aw!(sf::Consumer::connect(cfg))?;
            c.assign(&tps)?;
            members.push((mode, path, group, c));
        }
    }
    let mut read = vec![Vec::new(); members.len()];
    for round in 0..3 {
        // Two flushes a round: at least two blobs a partition each round.
        let lo = round * ROUND;
        produce_keyed_range(&client, "vc", lo, lo + ROUND / 2).await?;
        produce_keyed_range(&client, "vc", lo + ROUND / 2, lo + ROUND).await?;
        let total = ((round + 1) * ROUND) as usize;
        let mut committed: Vec<(CommitMode, ReadPath, sf::Committed)> = Vec::new();
        for (i, (mode, path, group, c)) in members.iter().enumerate() {
            let mark = *mode == CommitMode::Marked;
            let seen = read_through(c, *path, total, read[i].len(), mark).await?;
            read[i].extend(seen);
            let mut got = match mode {
                CommitMode::Sync | CommitMode::Marked => aw!(c.commit_sync())?,
                CommitMode::Auto => {
                    // The coordinator's copy, once auto-commit has reached the position.
                    let want: sf::Committed = tps
                        .iter()
                        .filter_map(|tp| Some((tp.clone(), c.position(tp)?)))
                        .collect();
                    let end = Instant::now() + Duration::from_secs(10);
                    loop {
                        let ask = [("vc", 0), ("vc", 1)];
                        let stored: sf::Committed = aw!(admin.committed_offsets(group, &ask))?
                            .into_iter()
                            .filter_map(|r| {
                                let p = r.result.ok()??;
                                Some((TopicPartition::new(r.topic.as_str(), r.partition), p))
                            })
                            .collect();
                        if stored == want || Instant::now() > end {
                            break stored;
                        }
                        aw!(sleep(Duration::from_millis(20)));
                    }
                }
            };
            got.sort();
            if *mode != CommitMode::Marked {
                let position: sf::Committed = tps
                    .iter()
                    .filter_map(|tp| Some((tp.clone(), c.position(tp)?)))
                    .collect();
                check(got == position, || {
                    format!("round {round}, {mode:?} {path:?}: committed {got:?}, at {position:?}")
                })?;
            }
            committed.push((*mode, *path, got));
        }
        for (mode, path, got) in &committed {
            let records = committed
                .iter()
                .find(|(m, p, _)| m == mode && *p == ReadPath::Records)
                .map(|(_, _, c)| c);
            check(records == Some(got), || {
                format!(
                    "round {round}, {mode:?}: {path:?} committed {got:?}, poll committed {records:?}"
                )
            })?;
            check(got.len() == 2, || {
                format!("round {round}, {mode:?} {path:?}: committed {got:?}")
            })?;
        }
    }
    for (i, (mode, path, _, c)) in members.iter().enumerate() {
        let mut seen = read[i].clone();
        seen.sort_unstable();
        check(seen == (0..3 * ROUND).collect::<Vec<_>>(), || {
            format!("{mode:?} {path:?}: not every record exactly once")
        })?;
        aw!(c.close())?;
    }
    aw!(client.close())?;
    Ok(())
}

/// Group subscribe, consume part, commit mid-stream, resume exactly in a new member; seek,
/// position, committed, pause and resume by reference; `commit_async`'s outcome in `events`.
pub async fn group_commit_resume() -> R<()> {
    const N: u32 = 1_000;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "grp", 3).await?;
    let producer = aw!(sf::Producer::connect(config(&server)?))?;
    for i in 0..N {
        drop(aw!(producer.enqueue(record("grp", i)))?);
    }
    aw!(producer.flush())?;

    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("grp-g".into());
    cfg.consumer.enable_auto_commit = false;
    let first = aw!(sf::Consumer::connect(cfg.clone()))?;
    first.subscribe(&["grp"])?;
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < 300 && Instant::now() < end {
        got.extend(aw!(first.poll_max(Duration::from_millis(200), 100))?);
    }
    check((300..N as usize).contains(&got.len()), || {
        format!("first member got {}", got.len())
    })?;
    let committed = aw!(first.commit_sync())?;
    for (tp, pos) in &committed {
        if let Some(last) = got.iter().rfind(|r| r.partition == tp.partition) {
            // Right after the last record, or at the next blob when that record ended its blob.
            let next_blob = Position::blob(last.offset + 1);
            check(*pos == last.next_position() || *pos == next_blob, || {
                format!(
                    "{tp} committed {pos}, last record {}#{}",
                    last.offset, last.index
                )
            })?;
        }
        check(first.position(tp) == Some(*pos), || {
            format!("{tp}: position != {pos}")
        })?;
        check(first.committed(tp) == Some(*pos), || {
            format!("{tp}: committed != {pos}")
        })?;
    }
    check(committed.len() == 3, || format!("committed {committed:?}"))?;
    aw!(first.close())?;

    let second = aw!(sf::Consumer::connect(cfg))?;
    second.subscribe(&["grp"])?;
    got.extend(poll_n(&second, N as usize - got.len(), Duration::from_secs(60)).await?);
    exactly_once(&got, N)?;

    let tp = TopicPartition::new("grp", 0);
    second.pause(&tp)?;
    aw!(second.seek(&tp, SeekTo::Beginning))?;
    let paused = aw!(second.poll(Duration::from_millis(300)))?;
    check(paused.is_empty(), || "a paused partition delivered".into())?;
    second.resume(&tp)?;
    let again = poll_n(&second, 1, Duration::from_secs(10)).await?;
    check(
        again.first().is_some_and(|r| r.offset == 0 && r.index == 0),
        || {
            format!(
                "seek to beginning gave {:?}",
                again.first().map(|r| (r.offset, r.index))
            )
        },
    )?;
    second.events(); // forget the rebalance events
    second.commit_async()?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let events = second.events();
        let done = events
            .into_iter()
            .any(|e| matches!(e, ConsumerEvent::CommitCompleted { .. }));
        if done {
            break;
        }
        check(Instant::now() < end, || {
            "commit_async's outcome never showed".into()
        })?;
        aw!(sleep(Duration::from_millis(20)));
    }
    aw!(second.close())?;
    aw!(producer.close())?;
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

/// A broker restart between two halves of a stream, with leadership re-asserted via Admin.
pub async fn broker_restart_mid_stream() -> R<()> {
    const HALF: u32 = 5_000;
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(30)).await?;
    let (admin, producer, consumer) = (client.admin(), client.producer(), client.consumer());
    create_topic(&admin, "restart", 3).await?;
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("restart", p)).collect();
    consumer.assign(&tps)?;
    let mut pending = Vec::new();
    for i in 0..HALF {
        pending.push(aw!(producer.enqueue(record("restart", i)))?);
    }
    aw!(producer.flush())?;
    let mut got = poll_n(&consumer, HALF as usize, Duration::from_secs(60)).await?;
    check(got.len() == HALF as usize, || {
        format!("before restart: {}", got.len())
    })?;

    server.with_cluster(|c, now| c.restart(1, now))??;
    for i in HALF..2 * HALF {
        pending.push(aw!(producer.enqueue(record("restart", i)))?);
    }
    // Until leadership is re-asserted the broker refuses Produce and Fetch (error 9).
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        match aw!(admin.reassert_leadership(1)) {
            Ok(r) if !r.is_empty() && r.iter().all(|p| p.result.is_ok()) => break,
            other if Instant::now() > end => return Err(format!("reassert: {other:?}").into()),
            _ => aw!(sleep(Duration::from_millis(100))),
        }
    }
    aw!(producer.flush())?;
    for d in pending {
        delivered!(d)?;
    }
    got.extend(poll_n(&consumer, HALF as usize, Duration::from_secs(60)).await?);
    exactly_once(&got, 2 * HALF)?;
    aw!(client.close())?;
    Ok(())
}

/// The broker crashes and refuses connections: `recv` returns the unreachable error (naming
/// the broker) within `unreachable_timeout` + 2 s, once per outage, `cluster_health` says
/// unreachable, and consumption goes on by itself once the broker is back.
pub async fn cluster_unreachable_then_back() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "gone", 1).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("gone", 0)])?;
    aw!(client.producer().send(record("gone", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;
    check(
        client.cluster_health().state == sf::HealthState::Healthy,
        || format!("before the crash: {:?}", client.cluster_health()),
    )?;

    server.with_cluster(|c, now| c.crash(1, now))??;
    let crashed = Instant::now();
    let r = aw!(consumer.recv());
    let took = crashed.elapsed();
    let address = server.local_addr().to_string();
    match &r {
        Err(Error::Consumer(ConsumerError::Unreachable(e))) => {
            check(e.to_string().contains(&address), || format!("{e}"))?
        }
        other => return Err(format!("recv after the crash: {other:?}").into()),
    }
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    check(r.as_ref().is_err_and(Error::is_retriable), || {
        "the unreachable error is retriable".into()
    })?;
    let health = client.cluster_health();
    check(
        matches!(health.state, sf::HealthState::Unreachable { .. }),
        || format!("{health:?}"),
    )?;
    // Once per outage: the next poll waits and comes back empty.
    let again = aw!(consumer.poll(Duration::from_millis(500)))?;
    check(again.is_empty(), || format!("{again:?}"))?;

    server.with_cluster(|c, now| {
        c.restart(1, now)?;
        c.reassert_leadership(1)
    })??;
    aw!(client.producer().send(record("gone", 1)))?;
    let next = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(next.len() == 1 && index_of(&next[0])? == 1, || {
        format!("after the restart: {next:?}")
    })?;
    let health = client.cluster_health();
    check(
        !matches!(health.state, sf::HealthState::Unreachable { .. }),
        || format!("{health:?}"),
    )?;
    aw!(client.close())?;
    Ok(())
}

/// The cluster dies under a group member: its `recv` returns the unreachable error within
/// `unreachable_timeout` + 2 s, and an admin call made during the outage fails with the same
/// cause within the same bound instead of waiting out its request timeout.
pub async fn dead_cluster_reaches_group_member_and_admin() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    cfg.request_timeout = Duration::from_secs(30);
    cfg.consumer.group_id = Some("dead-g".into());
    // A close commit is retried until rebalance_timeout (Kafka's close waits for it too).
    cfg.consumer.enable_auto_commit = false;
    cfg.consumer.session_timeout = Duration::from_secs(30);
    cfg.consumer.heartbeat_interval = Duration::from_secs(1);
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "dead", 2).await?;
    let consumer = client.consumer();
    consumer.subscribe(&["dead"])?;
    aw!(client.producer().send(record("dead", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;

    server.with_cluster(|c, now| c.crash(1, now))??;
    let crashed = Instant::now();
    let r = aw!(consumer.recv());
    let took = crashed.elapsed();
    check(
        matches!(&r, Err(Error::Consumer(ConsumerError::Unreachable(_)))),
        || format!("recv after the crash: {r:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    let asked = Instant::now();
    let d = aw!(client.admin().describe_cluster(Target::Any));
    let took = asked.elapsed();
    check(
        d.as_ref()
            .is_err_and(|e| e.is_retriable() && e.to_string().contains("unreachable")),
        || format!("describe_cluster during the outage: {d:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    // Closing does not wait to free the member's registry slot, which nothing can write.
    let asked = Instant::now();
    aw!(client.close())?;
    let took = asked.elapsed();
    check(took <= Duration::from_secs(4), || {
        format!("close took {took:?}")
    })?;
    Ok(())
}

/// Nothing listens at the bootstrap address from the start: a consumer's first `poll`, and
/// an admin call, fail with the unreachable error within `unreachable_timeout` + 2 s.
pub async fn dead_cluster_before_the_first_poll() -> R<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut cfg = ClientConfig::new(&format!("127.0.0.1:{port}"))?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    cfg.request_timeout = Duration::from_secs(30);
    let start = Instant::now();
    let client = client(cfg, Duration::from_secs(5)).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("t", 0)])?;
    let admin = client.admin();
    let d = aw!(admin.describe_cluster(Target::Any));
    check(
        d.as_ref()
            .is_err_and(|e| e.to_string().contains("Connection refused")),
        || format!("describe_cluster: {d:?}"),
    )?;
    let end = Instant::now() + Duration::from_secs(10);
    let error = loop {
        match aw!(consumer.poll(Duration::from_millis(200))) {
            Err(e) => break e,
            Ok(r) => check(r.is_empty() && Instant::now() < end, || {
                format!("no unreachable error: {r:?}")
            })?,
        }
    };
    let took = start.elapsed();
    check(
        matches!(&error, Error::Consumer(ConsumerError::Unreachable(_))),
        || format!("{error:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    aw!(client.close())?;
    Ok(())
}

/// Assigning a topic no broker knows: a `TopicUnknown` event, then a poll error naming the
/// topic after `consumer.missing_topic_wait` (+ a metadata round), and the topic, once
/// created, is consumed without any call.
pub async fn missing_topic_reported_then_picked_up() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.consumer.missing_topic_wait = Duration::from_secs(1);
    let client = client(cfg, Duration::from_secs(5)).await?;
    let consumer = client.consumer();
    let asked = Instant::now();
    consumer.assign(&[TopicPartition::new("later", 0)])?;
    let r = aw!(consumer.recv());
    let took = asked.elapsed();
    check(
        matches!(&r, Err(Error::Consumer(ConsumerError::UnknownTopic { topic, .. })) if topic == "later"),
        || format!("recv on a missing topic: {r:?}"),
    )?;
    check(took <= Duration::from_secs(5), || format!("took {took:?}"))?;
    let events = consumer.events();
    check(
        (events.events.iter())
            .any(|e| matches!(e, ConsumerEvent::TopicUnknown { topic, .. } if topic == "later")),
        || format!("no TopicUnknown event: {:?}", events.events),
    )?;
    create_topic(&client.admin(), "later", 1).await?;
    aw!(client.producer().send(record("later", 0)))?;
    let got = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(got.len() == 1, || {
        "the topic created later was not consumed".into()
    })?;
    aw!(client.close())?;
    Ok(())
}

/// A host name that does not resolve is reported as such, not as a refused connection.
pub async fn unresolvable_host_says_so() -> R<()> {
    let client = client(
        ClientConfig::new("no-such-host.invalid:9092")?,
        Duration::from_secs(5),
    )
    .await?;
    let end = Instant::now() + Duration::from_secs(20);
    let error = loop {
        if let Some(e) = client.connect_error() {
            break e;
        }
        check(Instant::now() < end, || "no connect error".into())?;
        aw!(sleep(Duration::from_millis(20)));
    };
    check(
        error.contains("\"no-such-host.invalid\" did not resolve"),
        || error.clone(),
    )?;
    let health = client.cluster_health();
    let cause = health.brokers.first().and_then(|b| b.last_cause.clone());
    check(cause.is_some_and(|c| c.contains("did not resolve")), || {
        format!("{health:?}")
    })?;
    aw!(client.close())?;
    Ok(())
}

/// The broker executes requests but never answers: admin calls, sends and commits fail in
/// bounded time, polls return empty, the buffer stays bounded, and the client recovers.
pub async fn broker_stops_answering() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.request_timeout = Duration::from_millis(800);
    cfg.producer.delivery_timeout = Duration::from_secs(2);
    cfg.producer.ack_timeout = Duration::from_millis(500);
    cfg.producer.batch_size = 16 * 1024;
    cfg.producer.buffer_memory = 64 * 1024;
    cfg.consumer.group_id = Some("stall".into());
    cfg.consumer.rebalance_timeout = Duration::from_secs(2);
    let client = client(cfg, Duration::from_millis(300)).await?;
    let (admin, producer, consumer) = (client.admin(), client.producer(), client.consumer());
    create_topic(&admin, "stall", 1).await?;
    consumer.assign(&[TopicPartition::new("stall", 0)])?;
    aw!(producer.send(record("stall", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;

    silence(&server)?;
    let bounded = |t: Instant, limit: u64, what: &str| {
        check(t.elapsed() < Duration::from_secs(limit), || {
            format!("{what} took {:?}", t.elapsed())
        })
    };
    let t = Instant::now();
    let r = aw!(admin.describe_cluster(Target::Any));
    check(r.as_ref().is_err_and(Error::is_retriable), || {
        format!("describe_cluster: {r:?}")
    })?;
    bounded(t, 10, "describe_cluster")?;
    let t = Instant::now();
    let r = aw!(producer.send(record("stall", 1)));
    check(r.is_err(), || format!("send answered: {r:?}"))?;
    bounded(t, 15, "send")?;
    let t = Instant::now();
    let polled = aw!(consumer.poll(Duration::from_millis(300)))?;
    check(polled.is_empty(), || "records from a silent broker".into())?;
    bounded(t, 5, "poll")?;

    // Beyond `buffer_memory` records wait at most `max_block`, then fail with buffer-full;
    // every record gets an error outcome in bounded time.
    let t = Instant::now();
    let (mut outcomes, mut pending) = (Vec::new(), Vec::new());
    for i in 0..2_000u32 {
        let r = Record::new("stall", vec![b'x'; 1024]).with_key(i.to_string());
        match aw!(producer.enqueue(r)) {
            Ok(d) => pending.push(d),
            Err(e) => outcomes.push(Err(e)),
        }
    }
    for d in pending {
        outcomes.push(delivered!(d).map(drop));
    }
    let full = outcomes
        .iter()
        .filter(|r| matches!(r, Err(Error::BufferFull(_))));
    let full = full.count();
    check(outcomes.iter().all(Result::is_err), || {
        "delivered to a silent broker".into()
    })?;
    check(full > 0, || {
        format!("no buffer-full outcome among {:?}", outcomes.first())
    })?;
    bounded(t, 60, "filling the buffer")?;
    // A batch meets the same full buffer: it waits for room up to `max_block` for the whole
    // call, then every record not queued fails with buffer-full at its index.
    let t = Instant::now();
    let batch = (0..500u32).map(|i| Record::new("stall", vec![b'y'; 1024]).with_key(i.to_string()));
    let outcomes = aw!(producer.send_all(batch))?;
    check(outcomes.len() == 500, || {
        format!("{} outcomes", outcomes.len())
    })?;
    let full = outcomes
        .errors()
        .filter(|(_, e)| matches!(e, Error::BufferFull(_)));
    let full = full.count();
    check(full > 0 && outcomes.delivered() == 0, || {
        format!(
            "batch to a silent broker: {full} buffer-full of {:?}",
            outcomes.get(0)
        )
    })?;
    check(outcomes.failed() == 500, || {
        format!("{} failed of 500", outcomes.failed())
    })?;
    bounded(t, 30, "the batch")?;
    let c = admin.counters();
    check(c.requests_in_flight <= 64, || {
        format!("in flight: {}", c.requests_in_flight)
    })?;

    server.with_cluster(|c, _| c.clear_faults())?;
    let end = Instant::now() + Duration::from_secs(30);
    while aw!(admin.describe_cluster(Target::Any)).is_err() {
        check(Instant::now() < end, || {
            "no recovery after the broker came back".into()
        })?;
        aw!(sleep(Duration::from_millis(100)));
    }
    Ok(())
}

/// `send_all` / `enqueue_all`: a batch of keyed records over three partitions, between single
/// sends, with one record refused at once (a bad topic name), through a producer buffer of a
/// fraction of the batch (the call waits for room many times). Every outcome comes back at its
/// record's index, the refused one as its error; each partition's records are in the log in
/// call order (singles before the batch, then the batch, then the single after it); an empty
/// batch completes at once.
pub async fn batch_send_in_order() -> R<()> {
    const N: u32 = 5_000;
    let server = sim()?;
    // A buffer far smaller than the batch: the call waits for room again and again.
    let mut cfg = config(&server)?;
    cfg.producer.buffer_memory = 32 * 1024;
    cfg.producer.batch_size = 8 * 1024;
    let client = client(cfg, Duration::from_secs(20)).await?;
    create_topic(&client.admin(), "batch", 3).await?;
    let producer = client.producer();
    let before = aw!(producer.enqueue(record("batch", 0)))?;
    let mut records: Vec<Record> = (1..N).map(|i| record("batch", i)).collect();
    records.insert(100, Record::new("bad topic!", "refused"));
    let batch = aw!(producer.enqueue_all(records.iter()))?;
    check(batch.len() == N as usize, || {
        format!("batch of {}", batch.len())
    })?;
    let after = aw!(producer.enqueue(record("batch", N)))?;
    let empty = aw!(producer.send_all(Vec::<Record>::new()))?;
    check(empty.is_empty(), || format!("empty batch: {empty:?}"))?;
    let outcomes = delivered!(batch);
    let (first, last) = (delivered!(before)?, delivered!(after)?);
    check(outcomes.len() == N as usize, || {
        format!("{} outcomes", outcomes.len())
    })?;
    check(
        matches!(outcomes.get(100), Some(Err(Error::Produce(_)))),
        || format!("the bad topic's outcome: {:?}", outcomes.get(100)),
    )?;
    check(
        outcomes.failed() == 1 && matches!(outcomes.first_error(), Some((100, _))),
        || format!("failed: {:?}", outcomes.first_error()),
    )?;
    // Where each record 0..=N landed, in call order.
    let mut written = vec![first];
    for (i, o) in outcomes.into_iter().enumerate() {
        if i != 100 {
            written.push(o.map_err(|e| format!("record {i}: {e}"))?);
        }
    }
    written.push(last);
    let consumer = client.consumer();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("batch", p)).collect();
    consumer.assign(&tps)?;
    let got = poll_n(&consumer, N as usize + 1, Duration::from_secs(60)).await?;
    exactly_once(&got, N + 1)?;
    let mut last_seen = std::collections::HashMap::new();
    for r in &got {
        let i = index_of(r)?;
        let m = &written[i as usize];
        check(
            m.partition == r.partition && m.offset == Some(r.offset) && m.index == r.index,
            || {
                format!(
                    "record {i}: outcome {m:?}, consumed at {}#{}",
                    r.offset, r.index
                )
            },
        )?;
        if let Some(prev) = last_seen.insert(r.partition, i) {
            check(prev < i, || {
                format!("partition {}: record {i} after {prev}", r.partition)
            })?;
        }
    }
    aw!(client.close())?;
    Ok(())
}

/// A group commit while the broker is silent fails in bounded time; one lost OffsetCommit
/// answer is retried by `commit_sync` and the commit succeeds.
pub async fn commit_retries_and_outage() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.request_timeout = Duration::from_millis(800);
    cfg.consumer.group_id = Some("outage".into());
    cfg.consumer.rebalance_timeout = Duration::from_secs(2);
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "outage", 1).await?;
    let consumer = client.consumer();
    let tp = TopicPartition::new("outage", 0);
    consumer.assign(std::slice::from_ref(&tp))?;
    positioned(&consumer, &tp).await?;
    let once = FaultRule::next(sf::ApiKey::OFFSET_COMMIT, 1, Fault::DropResponse);
    server.with_cluster(|c, _| c.inject_fault(once))?;
    let r = aw!(consumer.commit_sync());
    check(r.is_ok(), || {
        format!("a commit with one lost answer was not retried: {r:?}")
    })?;

    silence(&server)?;
    let t = Instant::now();
    let r = aw!(consumer.commit_sync());
    check(r.is_err(), || format!("commit answered: {r:?}"))?;
    check(t.elapsed() < Duration::from_secs(15), || {
        format!("commit took {:?}", t.elapsed())
    })
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

async fn seek_and_check(c: &sf::Consumer, tp: &TopicPartition, ms: i64, want: u32) -> R<()> {
    aw!(c.seek(tp, SeekTo::Timestamp(ms)))?;
    let got = poll_n(c, 1, Duration::from_secs(10)).await?;
    let first = got.first().map(index_of).transpose()?;
    check(first == Some(want), || {
        format!("seek to {ms} gave record {first:?}, not {want}")
    })
}

/// `close` flushes and waits: every enqueued record (outcomes never awaited) is in the log
/// afterwards, read back by another client.
pub async fn close_loses_nothing() -> R<()> {
    const N: u32 = 20_000;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "close", 2).await?;
    let client = client(config(&server)?, Duration::from_secs(30)).await?;
    let producer = client.producer();
    for i in 0..N {
        drop(aw!(producer.enqueue(record("close", i)))?);
    }
    aw!(client.close())?;
    read_back(&server, "close", N).await
}

/// Dropping every handle delivers the buffered records in the background (blocking: the drop
/// waits for it).
pub async fn drop_delivers() -> R<()> {
    const N: u32 = 5_000;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "dropped", 1).await?;
    let producer = aw!(sf::Producer::connect(config(&server)?))?;
    for i in 0..N {
        drop(aw!(producer.enqueue(record("dropped", i)))?);
    }
    drop(producer);
    read_back(&server, "dropped", N).await
}

/// Reads `topic` from the start with a new client and checks records `0..n` exactly once.
async fn read_back(server: &SimServer, topic: &str, n: u32) -> R<()> {
    let client = client(config(server)?, Duration::from_secs(5)).await?;
    let (topics, _) = aw!(client.admin().describe_topics(&[topic]))?;
    let tps: Vec<_> = (0..topics[0].partitions.len() as i32)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let consumer = client.consumer();
    consumer.assign(&tps)?;
    let got = poll_n(&consumer, n as usize, Duration::from_secs(60)).await?;
    exactly_once(&got, n)?;
    aw!(client.close())?;
    Ok(())
}

/// Against the real broker named by `STELLFLOW_BROKER` (skipped when unset): seek by time
/// and `offsets_for_times` find the first blob after a time, and `close` leaves every
/// enqueued record in the log.
pub async fn real_broker_seek_and_close() -> R<()> {
    let Ok(bootstrap) = std::env::var("STELLFLOW_BROKER") else {
        return Ok(());
    };
    let mut cfg = ClientConfig::new(&bootstrap)?;
    cfg.consumer.auto_offset_reset = sf::OffsetReset::Earliest;
    let topic = format!("adapters-{}-{}", std::process::id(), now_ms()?);
    let client = client(cfg.clone(), Duration::from_secs(30)).await?;
    create_topic(&client.admin(), &topic, 1).await?;
    for i in 0..10 {
        aw!(client.producer().send(record(&topic, i)))?;
    }
    aw!(sleep(Duration::from_millis(50)));
    let ms = now_ms()?;
    aw!(sleep(Duration::from_millis(50)));
    let later = aw!(client.producer().send(record(&topic, 10)))?;
    let tp = TopicPartition::new(&topic, 0);
    let found = aw!(client.consumer().offsets_for_times(&[(tp.clone(), ms)]))?;
    let info = found[0].result.clone()?;
    check(Some(info.offset) == later.offset && !info.no_match, || {
        format!("offsets_for_times {info:?}, the record after that time is at {later:?}")
    })?;
    let consumer = client.consumer();
    consumer.assign(std::slice::from_ref(&tp))?;
    seek_and_check(&consumer, &tp, ms, 10).await?;
    for i in 11..2_011 {
        drop(aw!(client.producer().enqueue(record(&topic, i)))?);
    }
    aw!(client.close())?;
    let reader = self::client(cfg, Duration::from_secs(30)).await?;
    let consumer = reader.consumer();
    consumer.assign(std::slice::from_ref(&tp))?;
    let got = poll_n(&consumer, 2_011, Duration::from_secs(60)).await?;
    exactly_once(&got, 2_011)?;
    aw!(reader.close())?;
    Ok(())
}

fn now_ms() -> R<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

/// Producer and consumer hooks are called exactly once per record sent, per outcome (a
/// failed delivery reaching `on_acknowledgement` as an error), per record consumed and per
/// commit.
pub async fn hooks_called_once() -> R<()> {
    use std::sync::Arc;
    use stellflow_adapter_tests::Tally;
    const N: usize = 500;
    let server = sim()?;
    let tally = Arc::new(Tally::default());
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("hooks-g".into());
    cfg.consumer.enable_auto_commit = false;
    cfg.hooks
        .producer_shared(tally.clone())
        .consumer_shared(tally.clone());
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "hooks", 2).await?;
    let written = produce_keyed(&client, "hooks", N as u32).await?;
    check(written.len() == N, || format!("{} written", written.len()))?;
    // One delivery fails: the broker answers its Produce with a header-only error 1.
    let rule = FaultRule {
        broker: None,
        api_key: Some(sf::ApiKey::PRODUCE),
        fault: Fault::HeaderOnly(sf::ErrorCode::UNKNOWN_SERVER_ERROR),
        probability: 1.0,
        remaining: Some(1),
    };
    server.with_cluster(|c, _| c.inject_fault(rule))?;
    let failed = aw!(client.producer().send(record("hooks", 9_999)));
    check(failed.is_err(), || format!("the faulted send: {failed:?}"))?;
    let consumer = client.consumer();
    consumer.assign(&[
        TopicPartition::new("hooks", 0),
        TopicPartition::new("hooks", 1),
    ])?;
    let got = poll_n(&consumer, N, Duration::from_secs(30)).await?;
    check(got.len() == N, || format!("consumed {}", got.len()))?;
    aw!(consumer.commit_sync())?;
    aw!(consumer.commit_sync())?;
    aw!(client.close())?;

    let sends = tally.sends.lock().map_err(|e| e.to_string())?.clone();
    let acks = tally.acks.lock().map_err(|e| e.to_string())?.clone();
    check(
        sends.len() == N + 1 && sends.values().all(|n| *n == 1),
        || format!("on_send: {} ids, counts {:?}", sends.len(), counts(&sends)),
    )?;
    check(
        acks.len() == N + 1 && acks.values().all(|(n, _)| *n == 1),
        || format!("on_acknowledgement: {} ids", acks.len()),
    )?;
    check(sends.keys().all(|id| acks.contains_key(id)), || {
        "an acknowledgement for another id than sent".into()
    })?;
    let errors: u32 = acks.values().map(|(_, e)| e).sum();
    check(errors == 1, || {
        format!("{errors} acknowledgements were errors")
    })?;
    let consumed = tally.consumed.lock().map_err(|e| e.to_string())?.clone();
    check(
        consumed.len() == N && consumed.values().all(|n| *n == 1),
        || format!("on_consume: {} records", consumed.len()),
    )?;
    for r in &got {
        check(
            consumed.contains_key(&(r.partition, r.offset, r.index)),
            || format!("record {}/{}#{} not seen", r.partition, r.offset, r.index),
        )?;
    }
    let commits = tally.commits.lock().map_err(|e| e.to_string())?.clone();
    check(
        commits.len() == 2 && commits.values().all(|c| *c == (1, 0)),
        || format!("on_commit: {commits:?}"),
    )?;
    Ok(())
}

fn counts(m: &std::collections::HashMap<u64, u32>) -> Vec<u32> {
    let mut v: Vec<u32> = m.values().copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Generic over nothing: makes the `Bytes` and `Record` conversions part of the API checked
/// here (a `Vec`, `String`, `&'static str` or `Bytes` value converts without copying).
#[test]
fn record_conversions() {
    let r = Record::new("t", Bytes::from_static(b"v")).with_key("k");
    assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
}

/// The rebalance listener runs before the revocation: a member subscribed with a listener
/// gets `Rebalance::Revoking` when a second member joins, the partitions stay its own (the
/// new member does not start them) until it has committed its own positions for them and
/// answered with `revocation_done`; the new member then starts exactly there.
pub async fn listener_commits_before_revocation() -> R<()> {
    const N: u32 = 200;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "lsn", 2).await?;
    let producer = aw!(sf::Producer::connect(config(&server)?))?;
    produce_keyed(producer.client(), "lsn", N).await?;
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("lsn-g".into());
    cfg.consumer.enable_auto_commit = false;
    cfg.consumer.session_timeout = Duration::from_secs(6);
    cfg.consumer.heartbeat_interval = Duration::from_millis(300);
    let first = aw!(sf::Consumer::connect(cfg.clone()))?;
    first.subscribe_with_listener(&["lsn"])?;
    let got = poll_n(&first, N as usize, Duration::from_secs(30)).await?;
    exactly_once(&got, N)?;
    // The application's own state: the position after the last record it processed, per
    // partition (here, everything it got).
    let mut state: Vec<(TopicPartition, Position)> = Vec::new();
    for p in 0..2 {
        if let Some(last) = got.iter().rfind(|r| r.partition == p) {
            state.push((TopicPartition::new("lsn", p), last.next_position()));
        }
    }
    let second = aw!(sf::Consumer::connect(cfg))?;
    second.subscribe(&["lsn"])?;
    let end = Instant::now() + Duration::from_secs(20);
    let (id, partitions) = loop {
        check(Instant::now() < end, || "no revocation".into())?;
        match aw!(first.rebalance(Duration::from_millis(200)))? {
            Some(sf::Rebalance::Revoking { id, partitions }) => break (id, partitions),
            _ => continue,
        }
    };
    check(partitions.len() == 1, || format!("revoking {partitions:?}"))?;
    // Unanswered, the handover waits: the new member does not start the partition.
    aw!(sleep(Duration::from_secs(1)));
    check(second.assignment().is_empty(), || {
        format!(
            "started before the listener answered: {:?}",
            second.assignment()
        )
    })?;
    let mine: Vec<(TopicPartition, Position)> = (state.iter())
        .filter(|(tp, _)| partitions.contains(tp))
        .cloned()
        .collect();
    aw!(first.commit_positions(mine.clone()))?;
    first.revocation_done(id)?;
    let end = Instant::now() + Duration::from_secs(20);
    let revoked = loop {
        check(Instant::now() < end, || "no Revoked".into())?;
        if let Some(sf::Rebalance::Revoked(p)) = aw!(first.rebalance(Duration::from_millis(200)))? {
            break p;
        }
    };
    check(revoked == partitions, || format!("revoked {revoked:?}"))?;
    for (tp, pos) in &mine {
        let end = Instant::now() + Duration::from_secs(20);
        while !second.assignment().contains(tp) {
            check(Instant::now() < end, || {
                format!("{tp} never reached the new member")
            })?;
            aw!(sleep(Duration::from_millis(20)));
        }
        let start = positioned(&second, tp).await?;
        check(start == *pos, || {
            format!("{tp}: new member starts at {start}, committed {pos}")
        })?;
    }
    check(first.assignment().len() == 1, || {
        format!("{:?}", first.assignment())
    })?;
    aw!(second.close())?;
    aw!(first.close())?;
    Ok(())
}

macro_rules! cases {
    ($($case:ident),*) => {
        mod run {
            use super::{Watchdog, block_on};
            $(
                #[test]
                fn $case() {
                    let _dog = Watchdog::new(stringify!($case), 240);
                    block_on(super::$case()).expect(stringify!($case));
                }
            )*
        }
    };
}

cases!(
    admin_round_trip,
    produce_consume_100k,
    poll_blobs_exactly_once,
    blob_paths_commit_as_poll_does,
    large_records_exactly_once,
    concurrent_pollers_exactly_once,
    group_commit_resume,
    listener_commits_before_revocation,
    admin_committed_offsets,
    broker_restart_mid_stream,
    broker_stops_answering,
    cluster_unreachable_then_back,
    dead_cluster_reaches_group_member_and_admin,
    dead_cluster_before_the_first_poll,
    missing_topic_reported_then_picked_up,
    unresolvable_host_says_so,
    batch_send_in_order,
    commit_retries_and_outage,
    calls_after_close,
    events_overflow_reported,
    seek_by_timestamp,
    close_loses_nothing,
    drop_delivers,
    real_broker_seek_and_close,
    hooks_called_once
);
