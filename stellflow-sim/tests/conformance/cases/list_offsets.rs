//! ListOffsets (PROTOCOL.md §3.5).

use super::super::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "list_offsets_latest_is_log_end_single_offset",
            section: "3.5",
            run: latest,
        },
        Case {
            name: "list_offsets_earliest_is_log_start",
            section: "3.5",
            run: earliest,
        },
        Case {
            name: "list_offsets_by_time_future_is_11_with_log_end",
            section: "3.5, 9",
            run: by_time,
        },
        Case {
            name: "list_offsets_empty_log_time_search_is_11",
            section: "3.5",
            run: empty_log,
        },
        Case {
            name: "list_offsets_max_num_offsets_le_0_is_3",
            section: "3.5",
            run: max_num_le_zero,
        },
        Case {
            name: "list_offsets_epoch_mismatch_9_and_check_order",
            section: "3.5",
            run: epoch_check,
        },
    ]
}

fn filled(ctx: &Ctx, n: i64) -> Result<(client::Conn, String), String> {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    for i in 0..n {
        ensure_eq!(
            produce_ok(&mut c, &t, 0, format!("b{i}").as_bytes())?,
            i,
            "offset"
        );
    }
    Ok((c, t))
}

fn latest(ctx: &Ctx) -> CaseResult {
    let (mut c, t) = filled(ctx, 3)?;
    let before = now_ms();
    for max_num in [1, 5, 1000] {
        let p = list_offsets(&mut c, &t, 0, -1, max_num)?;
        ensure_eq!(
            (p.error, p.leader_epoch, p.offset, p.offsets.clone()),
            (0, 0, 3, vec![3]),
            "LATEST with maxNumOffsets {max_num}: (errorCode, leaderEpoch, offset, offsets)"
        );
        // The timestamp is the broker's current time.
        ensure!(
            (p.timestamp - before).abs() < 10 * 60 * 1000,
            "LATEST timestamp {} is not the broker's current time (local {before})",
            p.timestamp
        );
    }
    let e = ctx.name("empty");
    create_topic(&mut c, &e, 1)?;
    let p = list_offsets(&mut c, &e, 0, -1, 3)?;
    ensure_eq!(
        (p.error, p.offset, p.offsets),
        (0, 0, vec![0]),
        "LATEST on an empty log"
    );
    Ok(())
}

fn earliest(ctx: &Ctx) -> CaseResult {
    let (mut c, t) = filled(ctx, 3)?;
    for (max_num, want) in [(1, vec![0]), (2, vec![0, 1]), (10, vec![0, 1, 2])] {
        let p = list_offsets(&mut c, &t, 0, -2, max_num)?;
        ensure_eq!(
            (p.error, p.leader_epoch, p.timestamp, p.offset, p.offsets),
            (0, 0, 0, 0, want),
            "EARLIEST with maxNumOffsets {max_num}: (errorCode, leaderEpoch, timestamp, offset, offsets)"
        );
    }
    let e = ctx.name("empty");
    create_topic(&mut c, &e, 1)?;
    let p = list_offsets(&mut c, &e, 0, -2, 3)?;
    ensure_eq!(
        (p.error, p.timestamp, p.offset, p.offsets),
        (0, 0, 0, vec![]),
        "EARLIEST on an empty log"
    );
    Ok(())
}

fn by_time(ctx: &Ctx) -> CaseResult {
    let before = now_ms();
    let (mut c, t) = filled(ctx, 3)?;
    let p = list_offsets(&mut c, &t, 0, 0, 2)?;
    ensure_eq!(
        (p.error, p.offset, p.offsets.clone()),
        (0, 0, vec![0, 1]),
        "timestamp 0"
    );
    ensure!(
        (p.timestamp - before).abs() < 10 * 60 * 1000,
        "timestamp 0 answer carries the blob's append time, got {}",
        p.timestamp
    );
    let append0 = p.timestamp;
    // Negative values other than -1/-2 behave like "first existing blob".
    let p = list_offsets(&mut c, &t, 0, -5, 1)?;
    ensure_eq!(
        (p.error, p.offset, p.offsets, p.timestamp),
        (0, 0, vec![0], append0),
        "timestamp -5 on a non-empty log"
    );
    // The blob's own append time finds it.
    let p = list_offsets(&mut c, &t, 0, append0, 1)?;
    ensure_eq!((p.error, p.offset), (0, 0), "timestamp = first append time");
    // A future timestamp: 11, offset = log end, timestamp echoed, no offsets.
    let future = now_ms() + 3_600_000;
    let p = list_offsets(&mut c, &t, 0, future, 5)?;
    ensure_eq!(
        (p.error, p.offset, p.timestamp, p.offsets),
        (11, 3, future, vec![]),
        "future timestamp: (errorCode, offset, timestamp, offsets)"
    );
    Ok(())
}

fn empty_log(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let e = ctx.name("empty");
    create_topic(&mut c, &e, 1)?;
    for ts in [0i64, -5, 1, now_ms()] {
        let p = list_offsets(&mut c, &e, 0, ts, 1)?;
        ensure_eq!(
            (p.error, p.offset, p.timestamp, p.offsets),
            (11, 0, ts, vec![]),
            "timestamp {ts} on an empty log"
        );
    }
    Ok(())
}

fn max_num_le_zero(ctx: &Ctx) -> CaseResult {
    let (mut c, t) = filled(ctx, 1)?;
    for ts in [-1i64, -2, 0] {
        for max_num in [0, -1, i32::MIN] {
            let p = list_offsets(&mut c, &t, 0, ts, max_num)?;
            ensure_eq!(p.error, 3, "maxNumOffsets {max_num} with timestamp {ts}");
        }
    }
    Ok(())
}

fn epoch_check(ctx: &Ctx) -> CaseResult {
    let (mut c, t) = filled(ctx, 2)?;
    let missing = ctx.name("missing");
    let part = |partition, epoch, max_num| LoPart {
        partition,
        current_leader_epoch: epoch,
        timestamp: -1,
        max_num_offsets: max_num,
    };
    let r = c.call(
        LIST_OFFSETS,
        &list_offsets_req(&[
            (
                &t,
                vec![
                    part(0, 0, 1),
                    part(0, 3, 1),
                    part(0, 3, -1),
                    part(0, -1, 1),
                    part(9, 3, 0),
                ],
            ),
            (&missing, vec![part(0, 5, 0)]),
        ]),
    )?;
    let v = parse_list_offsets(&r)?;
    let got: Vec<(i32, i16, i32, i64, i64, Vec<i64>)> = v
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .map(|p| {
            let ts = if p.error == 0 { 0 } else { p.timestamp };
            (
                p.partition,
                p.error,
                p.leader_epoch,
                ts,
                p.offset,
                p.offsets.clone(),
            )
        })
        .collect();
    ensure_eq!(
        got,
        vec![
            (0, 0, 0, 0, 2, vec![2]), // epoch 0 matches
            (0, 9, 0, 0, 0, vec![]),  // wrong epoch: 9, actual epoch, rest zero
            (0, 9, 0, 0, 0, vec![]),  // wrong epoch checked before maxNumOffsets
            (0, 0, 0, 0, 2, vec![2]), // -1 = don't check
            (9, 10, 0, 0, 0, vec![]), // unknown partition checked first
            (0, 10, 0, 0, 0, vec![]), // unknown topic
        ],
        "(partition, errorCode, leaderEpoch, timestamp, offset, offsets) per entry"
    );
    ensure_eq!(v.len(), 2, "topic answers");
    ensure_eq!(v[1].0.as_deref(), Some(missing.as_str()), "topic order");
    Ok(())
}
