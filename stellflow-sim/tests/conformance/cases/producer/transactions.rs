//! Transactions: Begin/EndTransaction rules, the flag an idempotent append sets, and an abort
//! that hides nothing (PROTOCOL.md §3.13, §3.3.2, §8 item 3).

use super::support::{idem, ok_at, rejected};
use crate::conformance::client::Conn;
use crate::conformance::*;

pub fn cases() -> Vec<Case> {
    vec![
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
    let (mut c, pid) = keyed_producer(ctx, "k")?;
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
