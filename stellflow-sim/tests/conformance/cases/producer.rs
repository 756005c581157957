//! InitProducerId, SRFB validation, idempotence and transactions (PROTOCOL.md §3.12, §3.3.2,
//! §3.13, §4.2).

use super::super::client::{Conn, Hdr};
use super::super::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "init_producer_id_per_key_epoch_0",
            section: "3.12",
            run: init_pid_per_key,
        },
        Case {
            name: "produce_allocates_producer_id_for_its_key",
            section: "3.12",
            run: produce_allocates_pid,
        },
        Case {
            name: "srfb_malformed_batches_rejected_14",
            section: "4.2, 3.3",
            run: srfb_malformed,
        },
        Case {
            name: "srfb_valid_gzip_and_unchecked_count_accepted",
            section: "4.2, 4.4",
            run: srfb_valid,
        },
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
        Case {
            name: "begin_end_transaction_rules_and_failed_bodies",
            section: "3.13",
            run: txn_rules,
        },
        Case {
            name: "transaction_flag_set_by_idempotent_append",
            section: "3.13, 3.3.2",
            run: txn_flag_from_produce,
        },
        Case {
            name: "abort_hides_nothing",
            section: "3.13, 8 item 3",
            run: abort_hides_nothing,
        },
    ]
}

fn init_pid_per_key(ctx: &Ctx) -> CaseResult {
    let (k1, k2, k3) = (ctx.name("k1"), ctx.name("k2"), ctx.name("k3"));
    let mut c2 = ctx.conn()?.with_client_id(Some(&k2));
    let mut c3 = ctx.conn()?.with_client_id(Some(&k3));
    let id1 = init_pid(&mut c2, Some(&k1))?;
    ensure!(id1 >= 1, "producerId {id1} (counter starts at 1)");
    ensure_eq!(
        init_pid(&mut c2, Some(&k1))?,
        id1,
        "same transactionalId again"
    );
    ensure_eq!(
        init_pid(&mut c3, Some(&k1))?,
        id1,
        "same transactionalId from another clientId"
    );
    let id2 = init_pid(&mut c2, None)?;
    ensure!(
        id2 != id1,
        "null transactionalId falls back to the clientId key"
    );
    ensure_eq!(
        init_pid(&mut c2, Some(""))?,
        id2,
        "empty transactionalId falls back to clientId"
    );
    ensure_eq!(
        init_pid(&mut c2, Some("  "))?,
        id2,
        "blank transactionalId falls back to clientId"
    );
    ensure_eq!(
        init_pid(&mut c3, Some(&k2))?,
        id2,
        "transactionalId equal to another's clientId"
    );
    let id3 = init_pid(&mut c3, None)?;
    ensure!(id3 != id1 && id3 != id2, "distinct keys get distinct ids");
    // A blank clientId shares the id of the literal key "anonymous".
    let mut blank = ctx.conn()?.with_client_id(Some(" "));
    let anon = init_pid(&mut blank, None)?;
    ensure_eq!(
        init_pid(&mut c2, Some("anonymous"))?,
        anon,
        "blank clientId ⇒ \"anonymous\""
    );
    Ok(())
}

fn produce_allocates_pid(ctx: &Ctx) -> CaseResult {
    let (p, q) = (ctx.name("p"), ctx.name("q"));
    let mut cp = ctx.conn()?.with_client_id(Some(&p));
    produce_ok(&mut cp, &ctx.name("t"), 0, b"opaque")?;
    let mut cq = ctx.conn()?.with_client_id(Some(&q));
    let idq = init_pid(&mut cq, None)?;
    let idp = init_pid(&mut cp, None)?;
    ensure!(
        idp < idq,
        "the Produce under clientId P allocated P's id first: id(P) {idp} < id(Q) {idq}"
    );
    // A transactionalId on Produce is the key too.
    let tx = ctx.name("tx");
    let body = produce_req(
        Some(&tx),
        1,
        1000,
        &[(&ctx.name("t"), vec![(0, Some(&b"y"[..]))])],
    );
    parse_produce_one(&cq.call(PRODUCE, &body)?)?;
    let q2 = ctx.name("q2");
    let idq2 = init_pid(&mut cq, Some(&q2))?;
    let idtx = init_pid(&mut cq, Some(&tx))?;
    ensure!(
        idtx < idq2,
        "Produce with transactionalId allocated its id first"
    );
    Ok(())
}

fn srfb_malformed(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let good = Srfb::plain(b"payload!");
    let gz = Srfb::gzip(b"gzip payload");
    let mut two = good.encode();
    two.extend_from_slice(&good.encode());
    let mut srfb_zeros = b"SRFB".to_vec();
    srfb_zeros.extend_from_slice(&[0; 32]);
    let mut thirty_six = good.encode();
    thirty_six.truncate(36);
    let mut flipped = good.clone();
    flipped.crc ^= 1;
    let crc32c_instead = Srfb {
        crc: crc32c(&good.payload),
        ..good.clone()
    };
    let not_gzip = Srfb {
        compression: 1,
        ..good.clone()
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("4-byte blob \"SRFB\"", b"SRFB".to_vec()),
        ("36-byte blob", thirty_six),
        ("SRFB + 32 zero bytes", srfb_zeros),
        (
            "version 0",
            Srfb {
                version: 0,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "version 2",
            Srfb {
                version: 2,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "compression 2",
            Srfb {
                compression: 2,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "compression -1",
            Srfb {
                compression: -1,
                ..good.clone()
            }
            .encode(),
        ),
        ("gzip flag over a non-gzip payload", not_gzip.encode()),
        (
            "recordCount 0",
            Srfb {
                record_count: 0,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "recordCount -1",
            Srfb {
                record_count: -1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "uncompressedLength + 1",
            Srfb {
                uncompressed_length: good.uncompressed_length + 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "gzip uncompressedLength - 1",
            Srfb {
                uncompressed_length: gz.uncompressed_length - 1,
                ..gz.clone()
            }
            .encode(),
        ),
        (
            "uncompressedLength -1",
            Srfb {
                uncompressed_length: -1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength + 1",
            Srfb {
                payload_length: good.payload_length + 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength - 1",
            Srfb {
                payload_length: good.payload_length - 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength -1",
            Srfb {
                payload_length: -1,
                ..good.clone()
            }
            .encode(),
        ),
        ("two SRFB batches in one blob", two),
        ("flipped CRC bit", flipped.encode()),
        ("CRC-32C instead of CRC-32", crc32c_instead.encode()),
    ];
    for (what, blob) in &cases {
        let p = produce_raw(&mut c, &t, 0, blob)?;
        ensure_eq!(
            (
                p.error,
                p.base_offset,
                p.leader_epoch,
                p.log_append_time,
                p.log_start
            ),
            (14, -1, 0, -1, 0),
            "{what}: (errorCode, baseOffset, currentLeaderEpoch, logAppendTimeMs, logStartOffset)"
        );
    }
    // Rejected before the partition lookup: the topic was never created.
    assert_topic_unknown(&mut c, &t)?;
    Ok(())
}

fn srfb_valid(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let gz = Srfb::gzip(b"hello gzip, hello gzip, hello gzip").encode();
    let big_gz = Srfb::gzip(&vec![b'z'; 70_000]).encode(); // two stored blocks
    let counted = Srfb {
        record_count: 99,
        ..Srfb::plain(b"one record")
    }
    .encode();
    let empty_payload = Srfb::plain(b"").encode();
    for (i, blob) in [&gz, &big_gz, &counted, &empty_payload].iter().enumerate() {
        ensure_eq!(
            produce_ok(&mut c, &t, 0, blob)?,
            i as i64,
            "valid SRFB blob {i}"
        );
    }
    // Stored and served as sent: the gzip payload is not decompressed for consumers.
    let f = fetch(&mut c, &t, 0, 0, 1)?;
    ensure!(records(&f)? == gz, "gzip blob returned verbatim");
    let f = fetch(&mut c, &t, 0, 3, 1)?;
    ensure!(
        records(&f)? == empty_payload,
        "37-byte SRFB blob returned verbatim"
    );
    Ok(())
}

/// Sends one idempotent SRFB batch; returns the partition answer.
fn idem(
    c: &mut Conn,
    topic: &str,
    partition: i32,
    (pid, epoch): (i64, i16),
    seq: i32,
    count: i32,
    payload: &[u8],
) -> Result<ProducePartResp, String> {
    produce_raw(
        c,
        topic,
        partition,
        &Srfb::new(pid, epoch, seq, count, payload).encode(),
    )
}

fn rejected(p: &ProducePartResp, error: i16, what: &str) -> CaseResult {
    ensure_eq!(
        (p.error, p.base_offset, p.leader_epoch, p.log_start),
        (error, -1, 0, 0),
        "{what}: (errorCode, baseOffset, currentLeaderEpoch, logStartOffset)"
    );
    Ok(())
}

fn ok_at(p: &ProducePartResp, offset: i64, what: &str) -> CaseResult {
    ensure_eq!(
        (p.error, p.base_offset),
        (0, offset),
        "{what}: (errorCode, baseOffset)"
    );
    Ok(())
}

/// A connection whose clientId is a fresh key, and a producer id allocated for that key.
fn producer(ctx: &Ctx, suffix: &str) -> Result<(Conn, i64), String> {
    let key = ctx.name(suffix);
    let mut c = ctx.conn()?.with_client_id(Some(&key));
    let pid = init_pid(&mut c, None)?;
    Ok((c, pid))
}

fn idem_duplicate(ctx: &Ctx) -> CaseResult {
    let (mut c, pid) = producer(ctx, "k")?;
    let t = ctx.name("t");
    ok_at(&idem(&mut c, &t, 0, (pid, 0), 0, 2, b"first")?, 0, "seq 0")?;
    let dup = idem(&mut c, &t, 0, (pid, 0), 0, 2, b"first")?;
    ensure_eq!(
        (
            dup.error,
            dup.base_offset,
            dup.leader_epoch,
            dup.log_append_time,
            dup.log_start
        ),
        (0, 0, 0, -1, 0),
        "duplicate of seq 0: success with the original offset"
    );
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
/// still executed; the same batch (same producer id, epoch and sequence) re-sent on a fresh
/// connection of the same key is a duplicate answered with the original offset, nothing
/// appended; the next sequence follows it; a batch that never arrived is appended normally.
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
    loop {
        // The topic exists once the original ran (auto-creation), so a lookup before that
        // may answer an error: keep asking.
        if log_end(&mut c2, &t, 0).unwrap_or(0) == 1 {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the original of the closed connection was not written within 5 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let resent = produce_raw(&mut c2, &t, 0, &batch)?;
    ensure_eq!(
        (resent.error, resent.base_offset, resent.log_start),
        (0, 0, 0),
        "the re-sent batch on the fresh connection: a duplicate at the original offset"
    );
    ok_at(
        &idem(&mut c2, &t, 0, (pid, 0), 2, 1, b"next")?,
        1,
        "the next sequence on the fresh connection",
    )?;
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
    let (mut c, pid) = producer(ctx, "k")?;
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
    let (mut a, pid) = producer(ctx, "a")?;
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

fn txn(
    c: &mut Conn,
    begin: bool,
    txn_id: Option<&str>,
    pid: i64,
    epoch: i16,
    commit: u8,
) -> Result<TxnResp, String> {
    let r = if begin {
        c.call(BEGIN_TRANSACTION, &begin_txn_req(txn_id, pid, epoch))?
    } else {
        c.call(END_TRANSACTION, &end_txn_req(txn_id, pid, epoch, commit))?
    };
    let v = parse_txn(&r)?;
    ensure_eq!(r.error_code, v.error, "header errorCode mirrors the body");
    ensure_eq!(
        (v.producer_id, v.epoch),
        (pid, epoch),
        "producerId/epoch echoed"
    );
    Ok(v)
}

fn expect_txn(v: &TxnResp, error: i16, state: &str, what: &str) -> CaseResult {
    ensure_eq!(
        (v.error, v.state.as_deref()),
        (error, Some(state)),
        "{what}: (errorCode, transactionState)"
    );
    Ok(())
}

fn txn_rules(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let pid = unused_pid(ctx, 2);
    let (t1, t2) = (ctx.name("tx1"), ctx.name("tx2"));
    let (t1, t2) = (Some(t1.as_str()), Some(t2.as_str()));
    expect_txn(
        &txn(&mut c, false, t1, pid, 0, 1)?,
        1,
        "FAILED",
        "End for an unknown producerId",
    )?;
    expect_txn(
        &txn(&mut c, true, t1, pid, 0, 0)?,
        0,
        "ONGOING",
        "Begin (any pid)",
    )?;
    expect_txn(
        &txn(&mut c, true, t1, pid, 0, 0)?,
        0,
        "ONGOING",
        "Begin again, same txn id",
    )?;
    expect_txn(
        &txn(&mut c, true, t2, pid, 0, 0)?,
        18,
        "FAILED",
        "Begin under another txn id",
    )?;
    expect_txn(
        &txn(&mut c, true, None, pid, 0, 0)?,
        18,
        "FAILED",
        "Begin with a null txn id",
    )?;
    expect_txn(
        &txn(&mut c, false, t2, pid, 0, 1)?,
        0,
        "COMMITTED",
        "End (txn id not examined)",
    )?;
    expect_txn(
        &txn(&mut c, false, t1, pid, 0, 1)?,
        3,
        "FAILED",
        "End outside a transaction",
    )?;
    expect_txn(
        &txn(&mut c, true, t2, pid, 0, 0)?,
        0,
        "ONGOING",
        "Begin under t2 after End",
    )?;
    expect_txn(
        &txn(&mut c, false, t2, pid, 0, 0)?,
        0,
        "ABORTED",
        "End with commit 0",
    )?;
    for byte in [2u8, 0xff] {
        expect_txn(&txn(&mut c, true, t1, pid, 0, 0)?, 0, "ONGOING", "Begin")?;
        expect_txn(
            &txn(&mut c, false, t1, pid, 0, byte)?,
            0,
            "COMMITTED",
            &format!("commit byte {byte:#x}"),
        )?;
    }
    // Epochs: Begin adopts a higher one; lower is fenced; End needs the exact one.
    expect_txn(
        &txn(&mut c, true, t1, pid, 3, 0)?,
        0,
        "ONGOING",
        "Begin with epoch 3",
    )?;
    expect_txn(
        &txn(&mut c, true, t1, pid, 2, 0)?,
        19,
        "FAILED",
        "Begin with epoch 2 < 3",
    )?;
    expect_txn(
        &txn(&mut c, false, t1, pid, 2, 1)?,
        19,
        "FAILED",
        "End with lower epoch",
    )?;
    expect_txn(
        &txn(&mut c, false, t1, pid, 4, 1)?,
        19,
        "FAILED",
        "End with higher epoch",
    )?;
    expect_txn(
        &txn(&mut c, false, t1, pid, 3, 1)?,
        0,
        "COMMITTED",
        "End with the epoch",
    )?;
    Ok(())
}

fn txn_flag_from_produce(ctx: &Ctx) -> CaseResult {
    let (mut c, pid) = producer(ctx, "k")?;
    let t = ctx.name("t");
    ok_at(
        &idem(&mut c, &t, 0, (pid, 0), 0, 1, b"a")?,
        0,
        "idempotent append",
    )?;
    // No BeginTransaction: the idempotent append set the flag.
    expect_txn(
        &txn(&mut c, false, None, pid, 0, 1)?,
        0,
        "COMMITTED",
        "End after idempotent append",
    )?;
    expect_txn(
        &txn(&mut c, false, None, pid, 0, 1)?,
        3,
        "FAILED",
        "End again",
    )?;
    // Begin under another transactionalId rebinds the producer key...
    let other = ctx.name("other");
    expect_txn(
        &txn(&mut c, true, Some(&other), pid, 0, 0)?,
        0,
        "ONGOING",
        "Begin under another id",
    )?;
    expect_txn(&txn(&mut c, false, None, pid, 0, 0)?, 0, "ABORTED", "End")?;
    // ...so the old key (clientId) now conflicts.
    rejected(
        &idem(&mut c, &t, 0, (pid, 0), 1, 1, b"b")?,
        18,
        "idempotent append under the old key",
    )?;
    Ok(())
}

fn abort_hides_nothing(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let pid = unused_pid(ctx, 3);
    let tx = ctx.name("tx");
    expect_txn(
        &txn(&mut c, true, Some(&tx), pid, 0, 0)?,
        0,
        "ONGOING",
        "Begin",
    )?;
    let body = produce_req(Some(&tx), 1, 1000, &[(&t, vec![(0, Some(&b"in-txn"[..]))])]);
    ok_at(
        &parse_produce_one(&c.call(PRODUCE, &body)?)?,
        0,
        "Produce inside the transaction",
    )?;
    expect_txn(
        &txn(&mut c, false, Some(&tx), pid, 0, 0)?,
        0,
        "ABORTED",
        "abort",
    )?;
    let opts = FetchOpts {
        isolation_level: 1,
        ..FetchOpts::default()
    };
    let part = FetchPart {
        partition: 0,
        fetch_offset: 0,
        partition_max_bytes: 1 << 20,
    };
    let r = c.call(FETCH, &fetch_req(opts, &[(&t, vec![part])]))?;
    let f = &parse_fetch_parts(&r)?[0];
    ensure_eq!(
        records(f)?,
        b"in-txn".to_vec(),
        "aborted data still returned (read_committed)"
    );
    ensure_eq!(
        (f.high_watermark, f.last_stable, f.aborted.len()),
        (1, 1, 0),
        "(highWatermark, lastStableOffset, abortedTransactions) after an abort"
    );
    ensure_eq!(log_end(&mut c, &t, 0)?, 1, "no control records written");
    Ok(())
}
