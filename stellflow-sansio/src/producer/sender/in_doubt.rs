//! The in-doubt rule (idempotence): a retry never runs while the request it replaces may
//! still be executing on the broker, because the server checks sequences racily
//! (PROTOCOL.md §3.3.2) and a retry overlapping its original can be appended twice.
//!
//! A timed-out Produce keeps waiting for its late answer on its connection (up to
//! [`crate::net::LATE_TIMEOUTS_TO_CLOSE`] request timeouts); if the connection is lost or
//! given up, its batches stay *in doubt* until the broker has answered on a newer
//! connection (a probe asks for that round trip) and [`DOUBT_SETTLE`] has passed — the
//! broker takes requests of all connections from one FIFO queue, so a late original that
//! reached it was taken before (or, read on another I/O thread after a freeze, about when)
//! the fresh connection's first request; the settle covers its check, flushed append and
//! sequence record, which nothing on the broker orders before a later request; an
//! `acks = -1` batch of a replicated partition waits the ack timeout longer, the time the
//! broker may hold its original for the followers before recording its sequence — and only
//! then are they re-sent, in order, with the same sequence numbers, which the broker answers as a
//! duplicate with the original offset if the first attempt was written.

use super::{InFlight, Sender};
use crate::net::{Net, Origin};
use crate::producer::Acks;
use crate::producer::accumulator::Accumulator;
use crate::request::{ConnId, RequestOptions};
use std::time::{Duration, Instant};
use stellflow_proto::messages::RequestBody;

/// How long after the broker's first answer on a fresh connection a batch in doubt (its
/// request was written on a connection that was lost or given up, and never answered) is
/// re-sent: the margin by which a late original, already taken from the broker's request
/// queue, has recorded its sequence. The broker checks the sequence, appends with a flush
/// and only then records it, holding nothing across the three, so a copy checked in
/// between is appended too; on a loaded machine originals finished up to about 150 ms after
/// that first answer (ARCHITECTURE decision 4).
pub(crate) const DOUBT_SETTLE: Duration = Duration::from_secs(1);

impl Sender {
    /// Clears the doubt of every queued batch whose broker answered on a newer connection
    /// since the one its unanswered request was written on; it is re-sent [`DOUBT_SETTLE`]
    /// after that answer (plus the ack timeout for an `acks = -1` batch of a replicated
    /// partition).
    pub(super) fn resolve_doubts(&self, net: &Net, acc: &mut Accumulator) {
        let mut cleared = Vec::new();
        let all = self.cfg.acks == Acks::All;
        let ack_timeout = self.cfg.ack_timeout;
        acc.prune_suspects();
        for &(ti, pi) in acc.suspects() {
            let Some(ps) = acc.topics.part(ti, pi) else {
                continue;
            };
            let settle = if all && ps.replicated {
                DOUBT_SETTLE + ack_timeout
            } else {
                DOUBT_SETTLE
            };
            if (ps.queue.iter()).any(|b| {
                b.in_doubt
                    .is_some_and(|(s, c)| net.answered_since(s, c).is_some())
            }) {
                cleared.push((ti, pi, settle));
            }
        }
        for &(ti, pi, settle) in &cleared {
            let Some(ps) = acc.topics.part_mut(ti, pi) else {
                continue;
            };
            for b in &mut ps.queue {
                if let Some((slot, conn)) = b.in_doubt
                    && let Some(at) = net.answered_since(slot, conn)
                {
                    b.in_doubt = None;
                    b.awaits_leader = false;
                    b.retry_at = Some(b.retry_at.map_or(at + settle, |r| r.max(at + settle)));
                }
            }
        }
        for (ti, pi, _) in cleared {
            acc.touch(ti, pi);
        }
    }

    /// Asks `slot` for a round trip on a fresh connection (one probe per slot at a time)
    /// unless it answered on one already: the batches in doubt there wait for it.
    pub(super) fn probe(&mut self, now: Instant, net: &mut Net, slot: usize, conn: ConnId) {
        if net.answered_since(slot, conn).is_some()
            || (self.inflight.values())
                .any(|f| matches!(f, InFlight::Probe { slot: s } if *s == slot))
        {
            return;
        }
        let Some(target) = net.slot_target(slot) else {
            return;
        };
        let seq = net.submit(
            now,
            target,
            RequestBody::ApiVersions(stellflow_proto::messages::ApiVersionsRequest::default()),
            Some(0),
            Origin::Producer,
            &RequestOptions::default(),
        );
        self.inflight.insert(seq, InFlight::Probe { slot });
    }

    /// The connection a queued batch still waits in doubt on at `slot`, if any.
    pub(super) fn doubt_on(acc: &Accumulator, slot: usize) -> Option<ConnId> {
        (acc.suspects().iter())
            .filter_map(|&(ti, pi)| acc.topics.part(ti, pi))
            .flat_map(|ps| ps.queue.iter())
            .filter_map(|b| b.in_doubt)
            .find(|(s, _)| *s == slot)
            .map(|(_, c)| c)
    }
}
