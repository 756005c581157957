//! Fetch (PROTOCOL.md §3.4).

use super::super::client::Conn;
use super::super::*;
use std::time::{Duration, Instant};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "fetch_returns_at_once_ignoring_max_wait_min_bytes",
            section: "3.4, 0.6",
            run: never_waits,
        },
        Case {
            name: "fetch_negative_offset_reads_from_log_start",
            section: "3.4",
            run: negative_offset_from_start,
        },
        Case {
            name: "fetch_beyond_end_empty_with_real_high_watermark",
            section: "3.4, 7 D12",
            run: beyond_end,
        },
        Case {
            name: "fetch_partition_max_bytes_le_0_is_empty",
            section: "3.4",
            run: max_bytes_le_zero,
        },
        Case {
            name: "fetch_soft_budget_first_blob_always_returned",
            section: "3.4",
            run: soft_budget,
        },
        Case {
            name: "fetch_repeated_entries_one_blob_each",
            section: "3.4, 9",
            run: repeated_entries,
        },
        Case {
            name: "fetch_past_log_end_of_recreated_topic_is_empty_no_error",
            section: "3.4, 3.14",
            run: past_end_of_recreated,
        },
        Case {
            name: "fetch_answer_is_never_capped_by_a_budget",
            section: "3.4",
            run: answer_not_capped,
        },
        Case {
            name: "fetch_unknown_partition_10_session_echo",
            section: "3.4",
            run: unknown_and_session,
        },
    ]
}

/// Produces `blobs` to a fresh topic's partition 0.
fn fill(c: &mut Conn, t: &str, blobs: &[&[u8]]) -> CaseResult {
    for (i, b) in blobs.iter().enumerate() {
        ensure_eq!(produce_ok(c, t, 0, b)?, i as i64, "offset of blob {i}");
    }
    Ok(())
}

fn expect_empty(p: &FetchPartResp, hw: i64, what: &str) -> CaseResult {
    ensure_eq!(
        (
            p.error,
            p.high_watermark,
            p.last_stable,
            p.log_start,
            p.aborted.len()
        ),
        (0, hw, hw, 0, 0),
        "{what}: (errorCode, highWatermark, lastStableOffset, logStartOffset, aborted)"
    );
    ensure_eq!(records(p)?.len(), 0, "{what}: records length");
    Ok(())
}

fn never_waits(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"only"])?;
    let opts = FetchOpts {
        max_wait_ms: 3000,
        min_bytes: 1000,
        ..FetchOpts::default()
    };
    let part = FetchPart {
        partition: 0,
        fetch_offset: 1,
        partition_max_bytes: 1 << 20,
    };
    let start = Instant::now();
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, vec![part])]))?;
    let took = start.elapsed();
    ensure!(
        took < Duration::from_millis(1500),
        "Fetch at the log end with maxWaitMs 3000 took {took:?} (no long poll expected)"
    );
    let v = parse_fetch_parts(&r)?;
    expect_empty(&v[0], 1, "Fetch at the log end")?;
    // minBytes not met by available data either: answered at once with what there is.
    let start = Instant::now();
    let part = FetchPart {
        fetch_offset: 0,
        ..part
    };
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, vec![part])]))?;
    ensure!(
        start.elapsed() < Duration::from_millis(1500),
        "Fetch waited for minBytes"
    );
    let v = parse_fetch_parts(&r)?;
    ensure_eq!(records(&v[0])?, b"only".to_vec(), "records below minBytes");
    Ok(())
}

fn negative_offset_from_start(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"zero", b"one", b"two"])?;
    for off in [-1i64, -2, -100, i64::MIN] {
        let f = fetch(&mut c, &t, 0, off, 1)?;
        ensure_eq!(
            (f.error, f.high_watermark, f.log_start),
            (0, 3, 0),
            "fetchOffset {off}: (errorCode, highWatermark, logStartOffset)"
        );
        ensure_eq!(
            records(&f)?,
            b"zero".to_vec(),
            "fetchOffset {off} reads the blob at the log start, not the latest"
        );
    }
    Ok(())
}

fn beyond_end(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"a", b"b"])?;
    for off in [2i64, 3, 1_000_000_000_000, i64::MAX] {
        let f = fetch(&mut c, &t, 0, off, 1 << 20)?;
        expect_empty(&f, 2, &format!("fetchOffset {off}"))?;
    }
    // An existing partition with an empty log.
    let e = ctx.name("empty");
    create_topic(&mut c, &e, 1)?;
    expect_empty(&fetch(&mut c, &e, 0, 0, 1000)?, 0, "empty log")?;
    expect_empty(&fetch(&mut c, &e, 0, 5, 1000)?, 0, "empty log, offset 5")?;
    Ok(())
}

fn max_bytes_le_zero(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"a", b"b", b"c"])?;
    for budget in [0, -1, i32::MIN] {
        for off in [0i64, -1] {
            let f = fetch(&mut c, &t, 0, off, budget)?;
            expect_empty(&f, 3, &format!("partitionMaxBytes {budget} at {off}"))?;
        }
    }
    Ok(())
}

fn soft_budget(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"blob-0", b"blob-1", b"blob-2"])?;
    for (budget, want) in [
        (1, "blob-0"),
        (5, "blob-0"),
        (6, "blob-0"),
        (11, "blob-0"),
        (12, "blob-0blob-1"),
        (13, "blob-0blob-1"),
        (17, "blob-0blob-1"),
        (18, "blob-0blob-1blob-2"),
        (i32::MAX, "blob-0blob-1blob-2"),
    ] {
        let f = fetch(&mut c, &t, 0, 0, budget)?;
        ensure_eq!(f.error, 0, "errorCode");
        ensure_eq!(
            String::from_utf8_lossy(&records(&f)?).into_owned(),
            want,
            "records with partitionMaxBytes {budget} (concatenated, no framing)"
        );
    }
    // The first blob is returned even when it alone exceeds the budget.
    let big = ctx.name("big");
    fill(&mut c, &big, &[&[1u8; 100], &[2u8; 10]])?;
    let f = fetch(&mut c, &big, 0, 0, 10)?;
    ensure_eq!(records(&f)?, vec![1u8; 100], "first blob over budget");
    // The request-level maxBytes is ignored.
    let opts = FetchOpts {
        max_bytes: 1,
        ..FetchOpts::default()
    };
    let part = FetchPart {
        partition: 0,
        fetch_offset: 0,
        partition_max_bytes: 1000,
    };
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, vec![part])]))?;
    let v = parse_fetch_parts(&r)?;
    ensure_eq!(
        String::from_utf8_lossy(&records(&v[0])?).into_owned(),
        "blob-0blob-1blob-2",
        "maxBytes 1 ignored"
    );
    Ok(())
}

fn repeated_entries(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"b0", b"b1", b"b2"])?;
    let entries: Vec<FetchPart> = [0i64, 1, 2, 3, 1, -1]
        .iter()
        .map(|&o| FetchPart {
            partition: 0,
            fetch_offset: o,
            partition_max_bytes: 1,
        })
        .collect();
    let r = c.call(FETCH, &fetch_req(FetchOpts::default(), &[(&t, entries)]))?;
    let f = parse_fetch(&r)?;
    ensure_eq!(f.topics.len(), 1, "topics");
    let got: Vec<(i32, i16, i64, Vec<u8>)> = f.topics[0]
        .1
        .iter()
        .map(|p| {
            (
                p.partition,
                p.error,
                p.high_watermark,
                p.records.clone().map(|b| b.to_vec()).unwrap_or_default(),
            )
        })
        .collect();
    // Headers are per entry, but the records bytes are handed out in the order of the entries
    // that read something: the empty entry at offset 3 takes entry 1@4's blob, and every later
    // entry shifts by one (PROTOCOL.md §3.4, `removeFirstMatching`).
    let want: Vec<(i32, i16, i64, Vec<u8>)> = ["b0", "b1", "b2", "b1", "b0", ""]
        .iter()
        .map(|s| (0, 0, 3, s.as_bytes().to_vec()))
        .collect();
    ensure_eq!(
        got,
        want,
        "records of a repeated partition, in order of the entries that read something"
    );
    // Ascending consecutive offsets (what the consumer sends) keep every blob at its entry.
    let entries: Vec<FetchPart> = [1i64, 2, 3, 4]
        .iter()
        .map(|&o| FetchPart {
            partition: 0,
            fetch_offset: o,
            partition_max_bytes: 1,
        })
        .collect();
    let r = c.call(FETCH, &fetch_req(FetchOpts::default(), &[(&t, entries)]))?;
    let got: Vec<Vec<u8>> = parse_fetch_parts(&r)?
        .iter()
        .map(|p| p.records.clone().map(|b| b.to_vec()).unwrap_or_default())
        .collect();
    ensure_eq!(
        got,
        vec![b"b1".to_vec(), b"b2".to_vec(), Vec::new(), Vec::new()],
        "ascending consecutive entries: each blob at its own entry, empties last"
    );
    Ok(())
}

fn unknown_and_session(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let missing = ctx.name("missing");
    fill(&mut c, &t, &[b"data"])?;
    let opts = FetchOpts {
        session_id: 777,
        isolation_level: 1,
        ..FetchOpts::default()
    };
    let part = |o| FetchPart {
        partition: 0,
        fetch_offset: o,
        partition_max_bytes: 1000,
    };
    let r = c.call(
        FETCH,
        &fetch_req(
            opts,
            &[
                (&missing, vec![part(0)]),
                (&t, vec![part(0)]),
                (
                    &t,
                    vec![FetchPart {
                        partition: 3,
                        ..part(0)
                    }],
                ),
            ],
        ),
    )?;
    ensure_eq!(r.error_code, 0, "header errorCode");
    let f = parse_fetch(&r)?;
    ensure_eq!(f.session_id, 777, "sessionId echoed");
    ensure_eq!(f.topics.len(), 3, "topic answers");
    ensure_eq!(
        f.topics[0].0.as_deref(),
        Some(missing.as_str()),
        "topic order"
    );
    let unknown = &f.topics[0].1[0];
    ensure_eq!(
        (
            unknown.error,
            unknown.high_watermark,
            unknown.log_start,
            unknown.last_stable
        ),
        (10, 0, 0, 0),
        "unknown topic"
    );
    ensure_eq!(
        records(unknown)?.len(),
        0,
        "unknown topic records (empty, not null)"
    );
    let known = &f.topics[1].1[0];
    ensure_eq!(
        records(known)?,
        b"data".to_vec(),
        "isolationLevel 1 changes nothing"
    );
    ensure_eq!(
        (known.high_watermark, known.last_stable),
        (1, 1),
        "HW and LSO"
    );
    ensure_eq!(
        f.topics[2].1[0].error,
        10,
        "unknown partition of a known topic"
    );
    Ok(())
}

/// A position past the log end, the broker's side: such a fetch (the topic was deleted and
/// re-created) is answered with no error, nothing, and a high watermark below it — the client
/// must detect it itself. ListOffsets LATEST confirms the log end.
fn past_end_of_recreated(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    fill(&mut c, &t, &[b"0", b"1", b"2", b"3", b"4"])?;
    delete_topic(&mut c, &t)?;
    create_topic(&mut c, &t, 1)?;
    fill(&mut c, &t, &[b"a", b"b"])?;
    for off in [2i64, 5] {
        expect_empty(
            &fetch(&mut c, &t, 0, off, 1)?,
            2,
            &format!("fetchOffset {off}"),
        )?;
    }
    ensure_eq!(
        log_end(&mut c, &t, 0)?,
        2,
        "ListOffsets LATEST after re-creation"
    );
    delete_topic(&mut c, &t)
}

/// Fetch budgets, the broker's side: every entry returns its first blob whole whatever its
/// budget, and neither `maxBytes` nor anything else caps the answer — three partitions with
/// one 1 MiB blob each answer 3 MiB to budgets of 1 byte. A client must bound its requests by
/// the blob sizes it knows.
fn answer_not_capped(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    create_topic(&mut c, &t, 3)?;
    let blob = v1_batch(&vec![b'x'; 1 << 20]);
    for p in 0..3 {
        ensure_eq!(
            produce_ok(&mut c, &t, p, &blob)?,
            0,
            "offset of the blob in {p}"
        );
    }
    let opts = FetchOpts {
        max_bytes: 1,
        ..FetchOpts::default()
    };
    let parts = (0..3)
        .map(|partition| FetchPart {
            partition,
            fetch_offset: 0,
            partition_max_bytes: 1,
        })
        .collect();
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, parts)]))?;
    ensure!(
        r.frame_length as usize > 3 * blob.len(),
        "answer frame of {} bytes holds all three {}-byte blobs",
        r.frame_length,
        blob.len()
    );
    let v = parse_fetch_parts(&r)?;
    for (p, e) in v.iter().enumerate() {
        ensure_eq!(records(e)?.len(), blob.len(), "records of partition {p}");
    }
    delete_topic(&mut c, &t)
}
