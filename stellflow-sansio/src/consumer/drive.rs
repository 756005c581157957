//! The consumer's part of the client's loop: one pass (`drive`), its earliest deadline
//! (`deadline`) and the routing of its requests' outcomes (`on_completion`).

use super::membership::Leave;
use super::partition::Start;
use super::{Consumer, Op};
use crate::health::HealthState;
use crate::net::{Completion, OwnerTag};
use crate::shared::Shared;
use std::time::Instant;

impl Consumer {
    /// One consumer pass inside the client's loop; whether it sent anything.
    pub(crate) fn drive(&mut self, now: Instant, sh: &mut Shared) -> bool {
        if !self.active() {
            return false;
        }
        if sh.closed {
            self.fail_commits(sh);
            return false;
        }
        if self.closing
            && matches!(sh.health.state, HealthState::Unreachable { .. })
            && matches!(self.group.reg.leave, Leave::Wanted { .. })
        {
            // Closing while no broker answers: freeing the registry slot cannot succeed, so
            // the close does not wait for it (the others count the member gone a session
            // after its last refresh, as after a crash).
            self.group.reg.leave = Leave::Done;
            self.finish_close(sh);
        }
        let mut sent = self.check_missing(now, sh);
        sent |= self.drive_group(now, sh);
        sent |= self.resolve_starts(now, sh);
        sent |= self.send_fetches(now, sh);
        sent
    }

    /// The consumer's earliest deadline, for the drain's [`crate::Output::Timeout`].
    pub(crate) fn deadline(&self, sh: &Shared) -> Option<Instant> {
        if sh.closed || !self.active() {
            return None;
        }
        let last_now = sh.last_now;
        if self.fetch_wake && !self.closing && self.buffered < self.config.max_buffered_bytes {
            // Buffer space was freed outside a pass (poll_record, resume): fetch at once.
            return Some(last_now);
        }
        let mut d = self.group.deadline(
            &self.config,
            self.config.group_id.is_some(),
            self.closing,
            last_now,
        );
        // Past instants were acted on by the pass at `last_now` or wait for another deadline
        // (see `Group::deadline`); only the fetch wake-up above asks for "now".
        let mut take = |t: Option<Instant>| {
            if let Some(t) = t.filter(|t| *t > last_now) {
                d = Some(d.map_or(t, |x: Instant| x.min(t)));
            }
        };
        // A write unanswered for the lease margin is withdrawn then (see `drive_group`).
        take(self.withdraw_deadline());
        // A topic no broker knows: a fresh metadata round before the poll error.
        take(self.missing_deadline());
        for p in self.parts.values() {
            match p.start {
                Start::Ready
                    if !p.paused
                        && p.in_flight == 0
                        && !self.closing
                        && self.buffered < self.config.max_buffered_bytes =>
                {
                    take(p.not_before);
                }
                Start::Unknown | Start::NeedsReset(_) | Start::NeedsTime(_) | Start::CheckEnd => {
                    take(p.retry_at)
                }
                _ => {}
            }
        }
        d
    }

    /// Routes a consumer request's outcome, by the tag the request carried (see [`Op::tag`]).
    pub(crate) fn on_completion(
        &mut self,
        now: Instant,
        tag: OwnerTag,
        c: Completion,
        sh: &mut Shared,
    ) {
        let Some(op) = Op::from_tag(tag) else {
            return; // not a tag the consumer made: nothing of it to apply
        };
        // A member back from a pause learns first that its partitions are no longer its own,
        // before any answer (a fetch, a commit) is applied to them.
        self.check_lease(now, sh);
        match op {
            Op::Fetch => self.on_fetch(now, c.seq, c.result, sh),
            Op::ListOffsets => self.on_list_offsets(now, c.seq, c.result, sh),
            Op::OffsetFetch => self.on_offset_fetch(now, c.seq, c.result, sh),
            Op::RegistryRead | Op::RegistryWrite => self.on_registry(now, c.seq, c.result, sh),
            _ => self.on_group(now, op, c.seq, c.result, sh),
        }
    }
}
