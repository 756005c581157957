//! Helpers the idempotence and transaction cases share: one idempotent SRFB batch per call, and
//! the checks of its answer.

use crate::conformance::client::Conn;
use crate::conformance::*;

/// Sends one idempotent SRFB batch; returns the partition answer.
pub fn idem(
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

/// Checks a batch was rejected with `error` and nothing appended (errorCode, baseOffset,
/// currentLeaderEpoch and logStartOffset; `expect_rejected` also checks logAppendTimeMs).
pub fn rejected(p: &ProducePartResp, error: i16, what: &str) -> CaseResult {
    ensure_eq!(
        (p.error, p.base_offset, p.leader_epoch, p.log_start),
        (error, -1, 0, 0),
        "{what}: (errorCode, baseOffset, currentLeaderEpoch, logStartOffset)"
    );
    Ok(())
}

/// Checks a batch was accepted at `offset` (errorCode and baseOffset only; `expect_appended`
/// checks every field).
pub fn ok_at(p: &ProducePartResp, offset: i64, what: &str) -> CaseResult {
    ensure_eq!(
        (p.error, p.base_offset),
        (0, offset),
        "{what}: (errorCode, baseOffset)"
    );
    Ok(())
}
