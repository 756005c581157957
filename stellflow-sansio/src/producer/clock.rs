//! Record timestamps from the wall clock the driver gives (the core reads no clock): the
//! time in ms at an anchor instant, advanced by the `now` of each produce.

use std::time::Instant;

/// The wall clock anchor, and the last timestamp computed (reused for the same `now`).
#[derive(Debug, Default)]
pub(crate) struct RecordClock {
    /// `unix_ms` at an instant.
    wall: Option<(Instant, i64)>,
    /// The last `now` a record's timestamp was taken at and that timestamp: the records of
    /// one batch send share their `now`, so the clock arithmetic runs once for all of them.
    last: Option<(Instant, i64)>,
}

impl RecordClock {
    /// Anchors the wall clock: `unix_ms` is the time at `now`.
    pub(crate) fn set(&mut self, now: Instant, unix_ms: i64) {
        self.wall = Some((now, unix_ms));
        self.last = None;
    }

    /// The timestamp of a record produced at `now` without one of its own (ms; −1 without
    /// a wall clock), computed once per distinct `now`.
    #[inline]
    pub(crate) fn at(&mut self, now: Instant) -> i64 {
        if let Some((at, ms)) = self.last
            && at == now
        {
            return ms;
        }
        let ms = match self.wall {
            Some((at, ms)) => {
                let d = now.saturating_duration_since(at).as_millis();
                ms.saturating_add(i64::try_from(d).unwrap_or(i64::MAX))
            }
            None => -1,
        };
        self.last = Some((now, ms));
        ms
    }
}
