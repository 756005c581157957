//! InitProducerId: one producer id per key, and a Produce allocating its key's id first
//! (PROTOCOL.md §3.12).

use crate::conformance::*;

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
