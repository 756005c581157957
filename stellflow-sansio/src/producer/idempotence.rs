//! Idempotent-producer state (PROTOCOL.md §3.3.2, §3.12).
//!
//! The server de-duplicates only SRFB blobs with `producerId ≥ 0` and `baseSequence ≥ 0`, keeps
//! its state per broker in memory, and forgets it on restart or leader change. The client:
//!
//! * obtains a producer id with InitProducerId before the first idempotent batch;
//! * gives each batch the partition's next sequence when it is sent (one request in flight per
//!   partition), and advances that sequence only when the broker confirms the batch — a
//!   duplicate is confirmed with its original offset;
//! * resends a retried batch byte for byte (same sequence, count and CRC), so the broker
//!   recognises it if the first attempt was written;
//! * recovers from lost broker state (error 21) by bumping its epoch — the server accepts any
//!   higher epoch and clears the producer's history — and restarting every partition at
//!   sequence 0. A batch whose stamp no longer matches is re-encoded ([`restamp`]).

use bytes::{Bytes, BytesMut};
use stellflow_proto::record::srfb::{self, SrfbBatch, SrfbParams};
use stellflow_proto::record::v1::V1BatchFields;
use stellflow_proto::record::{BatchError, V1Batch};

/// The producer identity and sequence written into an idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// `producerId` (−1 = none).
    pub producer_id: i64,
    /// `producerEpoch` (−1 = none).
    pub epoch: i16,
    /// `baseSequence` (−1 = none).
    pub sequence: i32,
}

impl Stamp {
    /// Not idempotent.
    pub(crate) const NONE: Stamp = Stamp {
        producer_id: -1,
        epoch: -1,
        sequence: -1,
    };
}

/// Where the producer id stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PidState {
    /// Not asked yet (or the last attempt failed and its retry is due at the instant).
    Needed(Option<std::time::Instant>),
    /// InitProducerId in flight.
    Requested,
    /// Known.
    Ready {
        /// The producer id.
        producer_id: i64,
        /// The current epoch (bumped locally to recover lost broker state).
        epoch: i16,
    },
    /// Fenced by the broker: no more idempotent batches.
    Fenced,
}

/// The producer-wide idempotence state.
#[derive(Debug, Clone)]
pub(crate) struct Idempotence {
    /// The producer id state.
    pub pid: PidState,
    /// Failed InitProducerId attempts in a row.
    pub init_failures: u32,
    /// Epoch bumps made.
    pub bumps: u64,
}

impl Default for Idempotence {
    fn default() -> Self {
        Idempotence {
            pid: PidState::Needed(None),
            init_failures: 0,
            bumps: 0,
        }
    }
}

impl Idempotence {
    /// The current producer id and epoch, if known.
    pub(crate) fn current(&self) -> Option<(i64, i16)> {
        match self.pid {
            PidState::Ready { producer_id, epoch } => Some((producer_id, epoch)),
            _ => None,
        }
    }

    /// Bumps the epoch after the broker lost our state, unless a batch from an older epoch is
    /// reporting (then the bump already happened). Returns whether it bumped.
    pub(crate) fn bump_from(&mut self, seen_epoch: i16) -> bool {
        if let PidState::Ready { producer_id, epoch } = self.pid
            && seen_epoch >= epoch
        {
            match epoch.checked_add(1) {
                Some(e) => {
                    self.pid = PidState::Ready {
                        producer_id,
                        epoch: e,
                    };
                    self.bumps += 1;
                    return true;
                }
                None => self.pid = PidState::Fenced,
            }
        }
        false
    }
}

/// What the accumulator needs to know of the producer id: how to stamp a new batch, and
/// whether batches may be sent at all. The sender keeps it in step with [`Idempotence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Not idempotent: batches carry no producer id and go out at once.
    Plain,
    /// Idempotent, with no usable producer id (asked for, to be asked for, or fenced):
    /// nothing is sent.
    Unknown,
    /// Idempotent with this producer id and epoch.
    Known {
        /// The producer id.
        producer_id: i64,
        /// The current epoch.
        epoch: i16,
    },
}

impl Identity {
    /// The identity `idem` stands for (`None`: not idempotent).
    pub(crate) fn of(idem: Option<&Idempotence>) -> Identity {
        match idem.map(|i| i.pid) {
            None => Identity::Plain,
            Some(PidState::Ready { producer_id, epoch }) => Identity::Known { producer_id, epoch },
            Some(_) => Identity::Unknown,
        }
    }

    /// Whether batches may be sent (no producer id is awaited).
    pub(crate) fn sending(self) -> bool {
        !matches!(self, Identity::Unknown)
    }
}

/// One partition's sequence numbers: what the broker expects next, and how many records
/// are in closed batches not yet settled (to guess the sequence of the next batch).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PartitionSequence {
    /// The next sequence the broker expects (advances on success only).
    next: i32,
    /// The epoch `next` belongs to.
    epoch: i16,
    /// Records in closed, unsettled batches.
    pipeline: i64,
}

impl PartitionSequence {
    /// The sequence a batch closed now will most likely be sent with under `epoch`.
    pub(crate) fn guess(&self, epoch: i16) -> i32 {
        if self.epoch == epoch {
            i32::try_from(i64::from(self.next) + self.pipeline).unwrap_or(0)
        } else {
            0
        }
    }

    /// The sequence of the batch sent now under `epoch` (a new epoch starts again at 0).
    pub(crate) fn for_epoch(&mut self, epoch: i16) -> i32 {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.next = 0;
        }
        self.next
    }

    /// The broker wrote a batch of `count` records stamped `stamp`: the next sequence moves
    /// past it (a stamp of an older epoch moves nothing).
    pub(crate) fn written(&mut self, stamp: Stamp, count: i32) {
        if stamp.sequence >= 0 && stamp.epoch == self.epoch {
            self.next = stamp.sequence.wrapping_add(count);
        }
    }

    /// A batch of `count` records was closed.
    pub(crate) fn closed(&mut self, count: i64) {
        self.pipeline += count;
    }

    /// A closed batch of `count` records settled (written or failed).
    pub(crate) fn settled(&mut self, count: i64) {
        self.pipeline = (self.pipeline - count).max(0);
    }
}

/// Re-encodes a finished SRFB blob with another producer id, epoch and base sequence (the
/// inner v1 batch carries the same fields and its CRC-32C is recomputed; the envelope keeps
/// its compression). Only needed when a batch was stamped with a guess that turned out wrong
/// or after an epoch bump — never on the hot path.
pub(crate) fn restamp(blob: &Bytes, stamp: Stamp, gzip_level: u32) -> Result<Bytes, BatchError> {
    let batch = SrfbBatch::validate(blob.clone())?;
    let header = *batch.header();
    let compression = header.compression().unwrap_or_default();
    let inner = V1Batch::parse(batch.content().clone())?;
    let mut fields = V1BatchFields::from_batch(&inner)?;
    fields.producer_id = stamp.producer_id;
    fields.producer_epoch = stamp.epoch;
    fields.base_sequence = stamp.sequence;
    let mut content = BytesMut::with_capacity(batch.content().len());
    fields.encode(&mut content)?;
    let params = SrfbParams {
        producer_id: stamp.producer_id,
        producer_epoch: stamp.epoch,
        base_sequence: stamp.sequence,
        record_count: header.record_count,
    };
    let mut out = BytesMut::with_capacity(blob.len() + 64);
    srfb::encode_with_level(&params, compression, gzip_level, &content, &mut out)?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stellflow_proto::record::{
        BatchBuilder, BatchParams, Compression, Envelope, SrfbHeader, blob_records,
    };

    fn blob(compression: Compression) -> Bytes {
        let params = BatchParams {
            base_timestamp: 5,
            producer_id: 3,
            producer_epoch: 0,
            base_sequence: 10,
            ..BatchParams::default()
        };
        let mut b = BatchBuilder::with_capacity(params, Envelope::Srfb(compression), 256);
        b.append(5, Some(b"k"), Some(b"v1")).unwrap();
        b.append(6, None, Some(b"v2")).unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn restamp_rewrites_envelope_and_inner_batch() {
        for c in [Compression::None, Compression::Gzip] {
            let stamp = Stamp {
                producer_id: 3,
                epoch: 1,
                sequence: 0,
            };
            let out = restamp(&blob(c), stamp, 1).unwrap();
            let checked = SrfbBatch::validate(out.clone()).unwrap();
            let h: SrfbHeader = *checked.header();
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (3, 1, 0)
            );
            assert_eq!(h.record_count, 2);
            assert_eq!(h.compression, c.code());
            let inner = V1Batch::parse(checked.content().clone()).unwrap();
            assert_eq!(inner.header().producer_epoch, 1);
            assert_eq!(inner.header().base_sequence, 0);
            let values: Vec<_> = blob_records(out).map(|r| r.unwrap().record.value).collect();
            assert_eq!(values.len(), 2);
            assert_eq!(values[1].as_deref(), Some(&b"v2"[..]));
        }
    }

    #[test]
    fn bump_only_once_per_epoch() {
        let mut i = Idempotence {
            pid: PidState::Ready {
                producer_id: 1,
                epoch: 0,
            },
            ..Idempotence::default()
        };
        assert!(i.bump_from(0));
        assert!(!i.bump_from(0));
        assert_eq!(i.current(), Some((1, 1)));
    }
}
