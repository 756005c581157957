//! Idempotent-producer and transaction state of one broker (PROTOCOL.md §3.3.2, §3.13).
//!
//! Per producer id: the current epoch, the bound producer key, an "in transaction" flag, and per
//! `topic:partition` the next expected sequence plus an unbounded history
//! `baseSequence → (recordCount, payload CRC-32, baseOffset)`. In memory only: a broker restart
//! starts with an empty manager.

use crate::srfb::SrfbInfo;
use std::collections::HashMap;

/// Error codes this module produces (the server's table).
pub mod codes {
    /// `UNKNOWN_SERVER_ERROR`.
    pub const UNKNOWN: i16 = 1;
    /// `INVALID_REQUEST`.
    pub const INVALID_REQUEST: i16 = 3;
    /// `CONCURRENT_TRANSACTIONS`.
    pub const CONCURRENT_TRANSACTIONS: i16 = 18;
    /// `FENCED_INSTANCE_ID`.
    pub const FENCED: i16 = 19;
    /// `OUT_OF_ORDER_SEQUENCE`.
    pub const OUT_OF_ORDER: i16 = 21;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchRecord {
    record_count: i32,
    crc: u32,
    base_offset: i64,
}

#[derive(Debug, Clone, Default)]
struct PartitionSeq {
    next_sequence: i32,
    history: HashMap<i32, BatchRecord>,
}

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    bound_key: Option<String>,
    in_transaction: bool,
    partitions: HashMap<(Option<String>, i32), PartitionSeq>,
}

/// The outcome of checking an idempotent batch before the append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it, then call [`ProducerStateManager::record_append`] if the append succeeded.
    Append,
    /// A recognised duplicate: answer success with this original offset, append nothing.
    Duplicate(i64),
}

/// Result of a Begin/EndTransaction call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutcome {
    /// The error code (also mirrored in the response header).
    pub error_code: i16,
    /// `"ONGOING"`, `"COMMITTED"`, `"ABORTED"` or `"FAILED"`.
    pub state: &'static str,
}

/// Per-broker producer state.
#[derive(Debug, Clone, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    /// An empty manager.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks an idempotent SRFB batch for `(topic, partition)` sent under producer `key`
    /// (already reduced to "non-blank or `None`"). Mutates state like the server: epoch bumps
    /// clear histories, the key gets bound and the transaction flag set.
    pub fn check(
        &mut self,
        info: &SrfbInfo,
        key: Option<&str>,
        topic: Option<&str>,
        partition: i32,
    ) -> Result<SequenceCheck, i16> {
        let entry = self
            .producers
            .entry(info.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: info.producer_epoch,
                ..ProducerEntry::default()
            });
        if info.producer_epoch < entry.epoch {
            return Err(codes::FENCED);
        }
        if info.producer_epoch > entry.epoch {
            entry.epoch = info.producer_epoch;
            entry.partitions.clear();
            entry.in_transaction = false;
        }
        if let Some(k) = key {
            if entry.bound_key.as_deref().is_some_and(|b| b != k) {
                return Err(codes::CONCURRENT_TRANSACTIONS);
            }
            entry.bound_key = Some(k.to_owned());
            entry.in_transaction = true;
        }
        let seq = entry
            .partitions
            .entry((topic.map(str::to_owned), partition))
            .or_default();
        if let Some(prev) = seq.history.get(&info.base_sequence) {
            if prev.record_count == info.record_count && prev.crc == info.crc {
                return Ok(SequenceCheck::Duplicate(prev.base_offset));
            }
            return Err(codes::OUT_OF_ORDER);
        }
        if info.base_sequence != seq.next_sequence {
            return Err(codes::OUT_OF_ORDER);
        }
        Ok(SequenceCheck::Append)
    }

    /// Records a successfully appended idempotent batch (append result 0 only).
    pub fn record_append(
        &mut self,
        info: &SrfbInfo,
        topic: Option<&str>,
        partition: i32,
        base_offset: i64,
    ) {
        let Some(entry) = self.producers.get_mut(&info.producer_id) else {
            return;
        };
        if entry.epoch != info.producer_epoch {
            return;
        }
        let seq = entry
            .partitions
            .entry((topic.map(str::to_owned), partition))
            .or_default();
        seq.next_sequence = info.base_sequence.wrapping_add(info.record_count);
        seq.history.insert(
            info.base_sequence,
            BatchRecord {
                record_count: info.record_count,
                crc: info.crc,
                base_offset,
            },
        );
    }

    /// BeginTransaction (§3.13).
    pub fn begin(
        &mut self,
        transactional_id: Option<&str>,
        producer_id: i64,
        epoch: i16,
    ) -> TxnOutcome {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch,
                ..ProducerEntry::default()
            });
        if epoch < entry.epoch {
            return failed(codes::FENCED);
        }
        if entry.in_transaction
            && !(transactional_id.is_some() && entry.bound_key.as_deref() == transactional_id)
        {
            return failed(codes::CONCURRENT_TRANSACTIONS);
        }
        entry.epoch = epoch;
        entry.in_transaction = true;
        entry.bound_key = transactional_id.map(str::to_owned);
        TxnOutcome {
            error_code: 0,
            state: "ONGOING",
        }
    }

    /// EndTransaction (§3.13); the transactionalId is not examined.
    pub fn end(&mut self, producer_id: i64, epoch: i16, commit: bool) -> TxnOutcome {
        let Some(entry) = self.producers.get_mut(&producer_id) else {
            return failed(codes::UNKNOWN);
        };
        if epoch != entry.epoch {
            return failed(codes::FENCED);
        }
        if !entry.in_transaction {
            return failed(codes::INVALID_REQUEST);
        }
        entry.in_transaction = false;
        TxnOutcome {
            error_code: 0,
            state: if commit { "COMMITTED" } else { "ABORTED" },
        }
    }
}

fn failed(code: i16) -> TxnOutcome {
    TxnOutcome {
        error_code: code,
        state: "FAILED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, count: i32, crc: u32) -> SrfbInfo {
        SrfbInfo {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
            crc,
        }
    }

    fn append(
        m: &mut ProducerStateManager,
        b: &SrfbInfo,
        key: Option<&str>,
        off: i64,
    ) -> Result<SequenceCheck, i16> {
        let r = m.check(b, key, Some("t"), 0);
        if r == Ok(SequenceCheck::Append) {
            m.record_append(b, Some("t"), 0, off);
        }
        r
    }

    #[test]
    fn sequences_duplicates_and_gaps() {
        let mut m = ProducerStateManager::new();
        assert_eq!(append(&mut m, &batch(9, 7, 5, 1, 1), None, 0), Err(21));
        assert_eq!(
            append(&mut m, &batch(9, 7, 0, 2, 1), None, 0),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            append(&mut m, &batch(9, 7, 2, 1, 2), None, 1),
            Ok(SequenceCheck::Append)
        );
        // Duplicate of the first batch (unbounded window): original offset.
        assert_eq!(
            append(&mut m, &batch(9, 7, 0, 2, 1), None, 9),
            Ok(SequenceCheck::Duplicate(0))
        );
        // Same sequence, other content: 21. Inside a batch, never a start: 21. Gap: 21.
        assert_eq!(append(&mut m, &batch(9, 7, 0, 2, 5), None, 9), Err(21));
        assert_eq!(append(&mut m, &batch(9, 7, 1, 1, 5), None, 9), Err(21));
        assert_eq!(append(&mut m, &batch(9, 7, 9, 1, 5), None, 9), Err(21));
        // Lower epoch: 19. Higher epoch: reset, sequence 0 again.
        assert_eq!(append(&mut m, &batch(9, 6, 3, 1, 5), None, 9), Err(19));
        assert_eq!(append(&mut m, &batch(9, 8, 3, 1, 5), None, 9), Err(21));
        assert_eq!(
            append(&mut m, &batch(9, 8, 0, 2, 1), None, 4),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn key_binding() {
        let mut m = ProducerStateManager::new();
        assert_eq!(
            append(&mut m, &batch(1, 0, 0, 1, 1), Some("a"), 0),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(append(&mut m, &batch(1, 0, 1, 1, 1), Some("b"), 1), Err(18));
        // No key: binding skipped.
        assert_eq!(
            append(&mut m, &batch(1, 0, 1, 1, 1), None, 1),
            Ok(SequenceCheck::Append)
        );
        // Every keyed idempotent append sets the flag, so End succeeds.
        assert_eq!(m.end(1, 0, true).error_code, 0);
        assert_eq!(m.end(1, 0, true).error_code, 3);
    }

    #[test]
    fn transactions() {
        let mut m = ProducerStateManager::new();
        assert_eq!(m.end(5, 0, true), failed(1));
        assert_eq!(m.begin(Some("tx"), 5, 2).state, "ONGOING");
        assert_eq!(m.begin(Some("tx"), 5, 2).error_code, 0);
        assert_eq!(m.begin(Some("other"), 5, 2).error_code, 18);
        assert_eq!(m.begin(None, 5, 2).error_code, 18);
        assert_eq!(m.begin(Some("tx"), 5, 1).error_code, 19);
        assert_eq!(m.end(5, 3, true).error_code, 19);
        assert_eq!(m.end(5, 2, false).state, "ABORTED");
        // Begin rebinds the key: idempotent produce under the old key now gets 18.
        assert_eq!(m.begin(Some("new"), 5, 2).error_code, 0);
        assert_eq!(
            m.check(&batch(5, 2, 0, 1, 1), Some("tx"), Some("t"), 0),
            Err(18)
        );
    }
}
