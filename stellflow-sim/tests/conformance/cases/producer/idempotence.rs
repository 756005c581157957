//! Idempotent produce: duplicates answered with the original offset, sequence gaps and
//! mismatches (21), stale epochs (19) and producer-key binding (18) (PROTOCOL.md §3.3.2).

use super::support::{idem, ok_at, rejected};
use crate::conformance::client::Hdr;
use crate::conformance::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "idempotent_duplicate_returns_original_offset",
            section: "3.3.2",
            run: idem_duplicate,
        },
        Case {
            name: "idempotent_original_of_a_closed_connection_runs_and_its_resend_is_a_duplicate",
            section: "3.3.2",
            run: idem_resend_after_cut,
        },
        Case {
            name: "idempotent_sequence_gaps_and_mismatches_21",
            section: "3.3.2",
            run: idem_sequence,
        },
        Case {
            name: "idempotent_stale_epoch_19_higher_epoch_resets",
            section: "3.3.2",
            run: idem_epoch,
        },
        Case {
            name: "idempotent_producer_key_binding_18",
            section: "3.3.2",
            run: idem_key_binding,
        },
    ]
}

fn idem_duplicate(ctx: &Ctx) -> CaseResult {
    let (mut c, pid) = keyed_producer(ctx, "k")?;
    let t = ctx.name("t");
    ok_at(&idem(&mut c, &t, 0, (pid, 0), 0, 2, b"first")?, 0, "seq 0")?;
    expect_appended(
        &idem(&mut c, &t, 0, (pid, 0), 0, 2, b"first")?,
        0,
        "duplicate of seq 0: success with the original offset",
    )?;
    ok_at(&idem(&mut c, &t, 0, (pid, 0), 2, 1, b"second")?, 1, "seq 2")?;
    for i in 0..20 {
        ok_at(
            &idem(&mut c, &t, 0, (pid, 0), 3 + i, 1, b"more")?,
            2 + i64::from(i),
            "seq 3+",
        )?;
    }
    // The window is unbounded: the very first batch is still recognised.
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), 0, 2, b"first")?,
        0,
        "seq 0 after 21 more batches",
    )?;
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), 2, 1, b"second")?,
        1,
        "seq 2 again",
    )?;
    ensure_eq!(log_end(&mut c, &t, 0)?, 22, "duplicates were not appended");
    // Sequences are per partition.
    ok_at(
        &idem(&mut c, &t, 1, (pid, 0), 0, 1, b"p1")?,
        0,
        "seq 0 on partition 1",
    )?;
    Ok(())
}

/// What an idempotent producer relies on after a cut connection (ARCHITECTURE decision 4):
/// a Produce whose connection closed right after it was written, its answer never read, is
/// still executed; once its sequence is recorded, the same batch (same producer id, epoch and
/// sequence) re-sent on a fresh connection of the same key is a duplicate answered with the
/// original offset, nothing appended; a batch that never arrived is appended normally.
///
/// The server checks a batch's sequence, appends it, and only then records the sequence, with
/// nothing held across the three: the append is visible (log end) before the record, and a copy
/// checked in between passes too and is appended a second time. The one observable mark of the
/// record is the next sequence being accepted: until then it is out of order (21) and appends
/// nothing. So the case re-sends after that mark, which is what the server guarantees.
fn idem_resend_after_cut(ctx: &Ctx) -> CaseResult {
    let key = ctx.name("k");
    let t = ctx.name("t");
    let mut c1 = ctx.conn()?.with_client_id(Some(&key));
    let pid = init_pid(&mut c1, None)?;
    let batch = Srfb::new(pid, 0, 0, 2, b"lost answer").encode();
    let corr = c1.corr();
    c1.send(
        &Hdr::new(PRODUCE, corr, Some(&key)),
        &produce_one(&t, 0, 1, &batch),
    )?;
    drop(c1); // the answer is never read
    let mut c2 = ctx.conn()?.with_client_id(Some(&key));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    // The topic exists once the original ran (auto-creation), so a lookup before that may
    // answer an error: keep asking.
    while log_end(&mut c2, &t, 0).unwrap_or(0) != 1 {
        ensure!(
            std::time::Instant::now() < deadline,
            "the original of the closed connection was not written within 5 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut refused = 0u32;
    loop {
        let next = idem(&mut c2, &t, 0, (pid, 0), 2, 1, b"next")?;
        if next.error != 21 {
            ok_at(
                &next,
                1,
                "the next sequence once the original's is recorded",
            )?;
            break;
        }
        rejected(
            &next,
            21,
            "the next sequence before the original's is recorded",
        )?;
        refused += 1;
        ensure!(
            std::time::Instant::now() < deadline,
            "the original's sequence was not recorded within 5 s of its append"
        );
    }
    if refused > 0 {
        ctx.note(format!(
            "next sequence refused {refused}x before the original's was recorded"
        ));
    }
    let resent = produce_raw(&mut c2, &t, 0, &batch)?;
    ensure_eq!(
        (resent.error, resent.base_offset, resent.log_start),
        (0, 0, 0),
        "the re-sent batch on the fresh connection: a duplicate at the original offset"
    );
    ensure_eq!(
        log_end(&mut c2, &t, 0)?,
        2,
        "the duplicate was not appended"
    );
    // A batch sent on a connection that closed before writing it never arrived: sent on the
    // fresh connection it is new, appended at the next offset.
    ok_at(
        &idem(&mut c2, &t, 0, (pid, 0), 3, 1, b"never arrived")?,
        2,
        "a batch that never reached the broker",
    )?;
    Ok(())
}

fn idem_sequence(ctx: &Ctx) -> CaseResult {
    let (mut c, pid) = keyed_producer(ctx, "k")?;
    let t = ctx.name("t");
    // First sequence must be 0; the rejection auto-creates nothing.
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 5, 1, b"x")?,
        21,
        "first batch at seq 5",
    )?;
    assert_topic_unknown(&mut c, &t)?;
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), 0, 2, b"ab")?,
        0,
        "seq 0 count 2",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 3, 1, b"x")?,
        21,
        "gap: seq 3, expected 2",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 1, 1, b"x")?,
        21,
        "seq 1 (inside batch 0)",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 0, 2, b"AB")?,
        21,
        "seq 0, other payload",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 0, 3, b"ab")?,
        21,
        "seq 0, other count",
    )?;
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), 2, 1, b"c")?,
        1,
        "seq 2 after rejections",
    )?;
    ensure_eq!(log_end(&mut c, &t, 0)?, 2, "log end");
    // Non-idempotent batches (sequence -1) bypass the checks.
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), -1, 1, b"free")?,
        2,
        "baseSequence -1",
    )?;
    Ok(())
}

fn idem_epoch(ctx: &Ctx) -> CaseResult {
    let key = ctx.name("k");
    let mut c = ctx.conn()?.with_client_id(Some(&key));
    let t = ctx.name("t");
    // An id never handed out, first seen with epoch 7: accepted.
    let pid = unused_pid(ctx, 1);
    ok_at(
        &idem(&mut c, &t, 0, (pid, 7), 0, 1, b"a")?,
        0,
        "unknown pid, epoch 7, seq 0",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 6), 1, 1, b"b")?,
        19,
        "epoch 6 < 7",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, -1), 1, 1, b"b")?,
        19,
        "epoch -1 with pid >= 0",
    )?;
    ok_at(
        &idem(&mut c, &t, 0, (pid, 7), 1, 1, b"b")?,
        1,
        "epoch 7 seq 1",
    )?;
    ok_at(
        &idem(&mut c, &t, 1, (pid, 7), 0, 1, b"p1")?,
        0,
        "partition 1 seq 0",
    )?;
    // A higher epoch resets every partition's history.
    ok_at(
        &idem(&mut c, &t, 0, (pid, 8), 0, 1, b"a")?,
        2,
        "epoch 8 seq 0 (new, not a duplicate)",
    )?;
    ok_at(
        &idem(&mut c, &t, 1, (pid, 8), 0, 1, b"p1")?,
        1,
        "partition 1 restarts at 0 too",
    )?;
    rejected(
        &idem(&mut c, &t, 0, (pid, 7), 2, 1, b"c")?,
        19,
        "old epoch after the bump",
    )?;
    ok_at(
        &idem(&mut c, &t, 0, (pid, 8), 1, 1, b"c")?,
        3,
        "epoch 8 seq 1",
    )?;
    Ok(())
}

fn idem_key_binding(ctx: &Ctx) -> CaseResult {
    let (mut a, pid) = keyed_producer(ctx, "a")?;
    let t = ctx.name("t");
    ok_at(
        &idem(&mut a, &t, 0, (pid, 0), 0, 1, b"a")?,
        0,
        "key A seq 0",
    )?;
    let b_key = ctx.name("b");
    let mut b = ctx.conn()?.with_client_id(Some(&b_key));
    rejected(
        &idem(&mut b, &t, 0, (pid, 0), 1, 1, b"b")?,
        18,
        "same pid under clientId B",
    )?;
    // transactionalId overrides the clientId as the key.
    let a_key = ctx.name("a");
    let body = produce_req(
        Some(&a_key),
        1,
        1000,
        &[(
            &t,
            vec![(0, Some(&Srfb::new(pid, 0, 1, 1, b"b").encode()[..]))],
        )],
    );
    let p = parse_produce_one(&b.call(PRODUCE, &body)?)?;
    ok_at(&p, 1, "clientId B with transactionalId A")?;
    // A null key skips binding.
    let mut anon = ctx.conn()?.with_client_id(None);
    ok_at(
        &idem(&mut anon, &t, 0, (pid, 0), 2, 1, b"c")?,
        2,
        "null clientId skips binding",
    )?;
    Ok(())
}
