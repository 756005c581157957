//! Group members and their commits through the adapter: the read paths commit alike,
//! a member resumes where another committed, commits survive a lost answer, and the
//! rebalance listener runs before the revocation.

use super::*;

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
