//! The partition log: one offset per produced blob, segments, retention and reads
//! (PROTOCOL.md §3.3, §3.4, §4.1).
//!
//! * Every appended blob is one entry with one offset and the broker's append time.
//! * Entries live in segments of `segment_bytes`; each entry costs its blob plus the server's
//!   32-byte entry header. A segment rolls when the next entry does not fit, so a blob larger
//!   than a whole segment still goes into its own (empty) segment.
//! * Retention runs after every append: oldest segments are deleted while there are more than
//!   `retention_segments`, more than `retention_bytes`, or the oldest segment's newest entry is
//!   older than `retention_age`. The active segment is never deleted. The log start offset is the
//!   base offset of the first remaining segment.
//! * [`PartitionLog::read`] reproduces the server's soft per-partition budget and its segment skip.
//! * The high watermark comes from the progress of the in-sync followers
//!   ([`PartitionLog::high_watermark`]).

use crate::config::LogConfig;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

/// Bytes of the server's internal per-entry header (`STFL` magic, offset, append time, leader
/// epoch, length, CRC), counted against the segment size but never sent to clients.
pub const ENTRY_HEADER_BYTES: u64 = 32;

/// One stored blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The blob's offset.
    pub offset: i64,
    /// Broker wall-clock time of the append, ms since the Unix epoch.
    pub append_time_ms: i64,
    /// Leader epoch of the log when the blob was appended.
    pub leader_epoch: i32,
    /// The blob bytes, exactly as produced.
    pub blob: Bytes,
}

impl Entry {
    fn stored_size(&self) -> u64 {
        ENTRY_HEADER_BYTES + self.blob.len() as u64
    }
}

#[derive(Debug, Clone, Default)]
struct Segment {
    /// Offset of `entries[0]` (or of the next entry when empty).
    base_offset: i64,
    entries: VecDeque<Entry>,
    bytes: u64,
}

impl Segment {
    fn new(base_offset: i64) -> Self {
        Segment {
            base_offset,
            entries: VecDeque::new(),
            bytes: 0,
        }
    }

    fn end_offset(&self) -> i64 {
        self.base_offset + self.entries.len() as i64
    }

    fn newest_time(&self) -> Option<i64> {
        self.entries.back().map(|e| e.append_time_ms)
    }
}

/// The log of one partition on one broker.
#[derive(Debug, Clone)]
pub struct PartitionLog {
    config: LogConfig,
    segments: VecDeque<Segment>,
    log_start: i64,
    leader_epoch: i32,
    /// Follower id → offset just after the last entry that follower fetched.
    follower_progress: BTreeMap<i32, i64>,
}

impl PartitionLog {
    /// An empty log starting at offset 0 with leader epoch 0.
    pub fn new(config: LogConfig) -> Self {
        PartitionLog {
            config,
            segments: VecDeque::from([Segment::new(0)]),
            log_start: 0,
            leader_epoch: 0,
            follower_progress: BTreeMap::new(),
        }
    }

    /// The first offset still stored.
    pub fn log_start(&self) -> i64 {
        self.log_start
    }

    /// The next offset to be written.
    pub fn log_end(&self) -> i64 {
        self.segments
            .back()
            .map(Segment::end_offset)
            .unwrap_or(self.log_start)
    }

    /// The log's leader epoch (stamped on new entries; reported by Produce).
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Sets the log's leader epoch. The caller enforces "never lower" where the server does.
    pub fn set_leader_epoch(&mut self, epoch: i32) {
        self.leader_epoch = epoch;
    }

    /// Number of segments (the active one included).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Stored bytes, entry headers included.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Appends one blob at the log end, rolls the segment if needed, runs retention, and returns
    /// the blob's offset.
    pub fn append(&mut self, blob: Bytes, append_time_ms: i64) -> i64 {
        let offset = self.log_end();
        let entry = Entry {
            offset,
            append_time_ms,
            leader_epoch: self.leader_epoch,
            blob,
        };
        let size = entry.stored_size();
        let needs_roll = match self.segments.back() {
            Some(active) => {
                !active.entries.is_empty()
                    && active.bytes.saturating_add(size) > self.config.segment_bytes
            }
            None => true,
        };
        if needs_roll {
            self.segments.push_back(Segment::new(offset));
        }
        if let Some(active) = self.segments.back_mut() {
            active.bytes += size;
            active.entries.push_back(entry);
        }
        self.enforce_retention(append_time_ms);
        offset
    }

    /// Deletes oldest segments by count, size and age (never the active segment).
    pub fn enforce_retention(&mut self, now_ms: i64) {
        let max_age = i64::try_from(self.config.retention_age.as_millis()).unwrap_or(i64::MAX);
        loop {
            if self.segments.len() <= 1 {
                break;
            }
            let too_many = self.segments.len() > self.config.retention_segments;
            let too_big = self.size_bytes() > self.config.retention_bytes;
            let too_old = self
                .segments
                .front()
                .and_then(Segment::newest_time)
                .is_some_and(|t| now_ms.saturating_sub(t) > max_age);
            if !(too_many || too_big || too_old) {
                break;
            }
            self.segments.pop_front();
        }
        if let Some(first) = self.segments.front() {
            self.log_start = first.base_offset;
        }
    }

    /// Moves the log start forward to `offset` (clamped to the log end), dropping every entry
    /// below it. A test knob: the real server only deletes whole segments.
    pub fn advance_log_start(&mut self, offset: i64) {
        let target = offset.min(self.log_end());
        if target <= self.log_start {
            return;
        }
        while self.segments.len() > 1
            && self
                .segments
                .get(1)
                .is_some_and(|s| s.base_offset <= target)
        {
            self.segments.pop_front();
        }
        if let Some(first) = self.segments.front_mut() {
            while first.base_offset < target {
                match first.entries.pop_front() {
                    Some(e) => {
                        first.bytes -= e.stored_size();
                        first.base_offset += 1;
                    }
                    None => {
                        first.base_offset = target;
                        break;
                    }
                }
            }
        }
        self.log_start = target;
    }

    /// Where a follower must start copying from a leader whose log spans
    /// `[leader_start, leader_end)`: its own log end, or the leader's log start if it diverged
    /// (ahead of the leader, or behind its log start).
    pub fn replica_fetch_offset(&self, leader_start: i64, leader_end: i64) -> i64 {
        let end = self.log_end();
        if end > leader_end || end < leader_start {
            leader_start
        } else {
            end
        }
    }

    /// Applies a replica fetch: `entries` are the leader's entries from
    /// [`replica_fetch_offset`](Self::replica_fetch_offset) on. Offsets, append times and epochs
    /// are kept. Returns the new log end.
    pub fn apply_replica_fetch(
        &mut self,
        leader_start: i64,
        leader_end: i64,
        entries: Vec<Entry>,
    ) -> i64 {
        if self.replica_fetch_offset(leader_start, leader_end) != self.log_end() {
            self.segments = VecDeque::from([Segment::new(leader_start)]);
            self.log_start = leader_start;
        }
        for e in entries {
            if e.offset != self.log_end() {
                continue;
            }
            let own = self.leader_epoch;
            self.leader_epoch = e.leader_epoch;
            self.append(e.blob, e.append_time_ms);
            self.leader_epoch = own.max(self.leader_epoch);
        }
        if leader_start > self.log_start {
            self.advance_log_start(leader_start);
        }
        self.log_end()
    }

    fn segment_index(&self, offset: i64) -> Option<usize> {
        if offset < self.log_start || offset >= self.log_end() {
            return None;
        }
        let idx = self.segments.partition_point(|s| s.base_offset <= offset);
        idx.checked_sub(1)
    }

    /// The entry at `offset`, if stored.
    pub fn entry(&self, offset: i64) -> Option<&Entry> {
        let seg = self.segments.get(self.segment_index(offset)?)?;
        seg.entries
            .get(usize::try_from(offset - seg.base_offset).ok()?)
    }

    /// Entries from `offset` (inclusive) to the log end, in offset order.
    pub fn entries_from(&self, offset: i64) -> impl Iterator<Item = &Entry> {
        let start = offset.max(self.log_start);
        self.segments
            .iter()
            .flat_map(|s| s.entries.iter())
            .skip_while(move |e| e.offset < start)
    }

    /// A consumer read (Fetch, `replicaId < 0`) exactly as the server does it (PROTOCOL.md §3.4):
    /// `start = max(fetch_offset, log start)`; nothing when `start ≥ log end` or
    /// `max_bytes ≤ 0`; otherwise, segment by segment from the one holding `start`, each segment
    /// read returns its first blob unconditionally and further blobs while they fit in what is
    /// left of the budget, and the next segment is read while budget is left. A read that stops
    /// inside a segment therefore continues at the next segment's first blob (the segment skip).
    pub fn read(&self, fetch_offset: i64, max_bytes: i32) -> Vec<&Entry> {
        let mut out = Vec::new();
        let start = fetch_offset.max(self.log_start);
        if max_bytes <= 0 {
            return out;
        }
        let Some(first_seg) = self.segment_index(start) else {
            return out;
        };
        let mut remaining = i64::from(max_bytes);
        let mut pos = start;
        for seg in self.segments.iter().skip(first_seg) {
            if remaining <= 0 {
                break;
            }
            let skip = usize::try_from((pos - seg.base_offset).max(0)).unwrap_or(usize::MAX);
            for (taken_here, e) in seg.entries.iter().skip(skip).enumerate() {
                let size = e.blob.len() as i64;
                if taken_here > 0 && size > remaining {
                    break;
                }
                remaining -= size;
                out.push(e);
            }
            pos = seg.end_offset();
        }
        out
    }

    /// The first entry at or after `offset` whose append time is `≥ timestamp_ms`.
    pub fn find_by_time(&self, timestamp_ms: i64) -> Option<&Entry> {
        self.entries_from(self.log_start)
            .find(|e| e.append_time_ms >= timestamp_ms)
    }

    /// Records a follower fetch: the follower has everything below `next_offset` (clamped into
    /// `[log start, log end]`).
    pub fn record_follower_progress(&mut self, follower: i32, next_offset: i64) {
        let clamped = next_offset.clamp(self.log_start, self.log_end());
        self.follower_progress.insert(follower, clamped);
    }

    /// Forgets all follower progress (leadership changed hands).
    pub fn reset_follower_progress(&mut self) {
        self.follower_progress.clear();
    }

    /// The high watermark for a leader with id `leader` and in-sync replicas `isr`: the log end,
    /// lowered to the progress of every other ISR member (a member that never fetched counts as
    /// being at the log start).
    pub fn high_watermark(&self, leader: i32, isr: &[i32]) -> i64 {
        let mut hw = self.log_end();
        for &r in isr {
            if r == leader {
                continue;
            }
            let p = self
                .follower_progress
                .get(&r)
                .copied()
                .unwrap_or(self.log_start)
                .clamp(self.log_start, self.log_end());
            hw = hw.min(p);
        }
        hw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(segment_bytes: u64) -> LogConfig {
        LogConfig {
            segment_bytes,
            ..LogConfig::default()
        }
    }

    fn blob(n: usize, tag: u8) -> Bytes {
        Bytes::from(vec![tag; n])
    }

    #[test]
    fn one_offset_per_blob() {
        let mut log = PartitionLog::new(LogConfig::default());
        assert_eq!(log.append(blob(3, 1), 10), 0);
        assert_eq!(log.append(blob(100, 2), 11), 1);
        assert_eq!(log.log_end(), 2);
        assert_eq!(log.entry(1).map(|e| e.blob.len()), Some(100));
    }

    #[test]
    fn budget_is_soft_and_counts_blob_bytes() {
        let mut log = PartitionLog::new(LogConfig::default());
        for i in 0..5 {
            log.append(blob(6, i), 0);
        }
        let n = |b| log.read(0, b).len();
        assert_eq!(n(1), 1);
        assert_eq!(n(6), 1);
        assert_eq!(n(12), 2);
        assert_eq!(n(13), 2);
        assert_eq!(n(0), 0);
        assert_eq!(n(-1), 0);
        assert_eq!(log.read(5, 100).len(), 0);
        assert_eq!(log.read(1_000_000_000_000, 100).len(), 0);
        // fetchOffset below the log start (even negative) reads from the start.
        assert_eq!(log.read(-1, 1)[0].offset, 0);
    }

    #[test]
    fn segment_skip_like_the_server() {
        // 40 blobs, 32 per segment; budget of one blob: offsets 0 and 32 come back.
        let size = 1000u64;
        let mut log = PartitionLog::new(cfg(32 * (size + ENTRY_HEADER_BYTES)));
        for i in 0..40 {
            log.append(blob(size as usize, i), 0);
        }
        assert_eq!(log.segment_count(), 2);
        let got: Vec<i64> = log.read(0, 1500).iter().map(|e| e.offset).collect();
        assert_eq!(got, vec![0, 32]);
        // An exact budget stops at one blob; one byte more takes the next segment's first blob.
        let got: Vec<i64> = log.read(31, 1000).iter().map(|e| e.offset).collect();
        assert_eq!(got, vec![31]);
        let got: Vec<i64> = log.read(31, 1001).iter().map(|e| e.offset).collect();
        assert_eq!(got, vec![31, 32]);
        // partitionMaxBytes = 1 always yields exactly the blob asked for.
        for o in 0..40 {
            let got = log.read(o, 1);
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].offset, o);
        }
    }

    #[test]
    fn rolling_and_count_retention() {
        // Blobs over half a segment each get their own segment; the 9th moves the start to 1.
        let mut log = PartitionLog::new(cfg(100));
        for i in 0..8 {
            log.append(blob(60, i), 0);
        }
        assert_eq!(log.segment_count(), 8);
        assert_eq!(log.log_start(), 0);
        log.append(blob(60, 8), 0);
        assert_eq!(log.log_start(), 1);
        assert_eq!(log.read(0, 1)[0].offset, 1);
        // A blob larger than a whole segment is accepted.
        let o = log.append(blob(500, 9), 0);
        assert_eq!(log.entry(o).map(|e| e.blob.len()), Some(500));
    }

    #[test]
    fn byte_and_age_retention() {
        let mut log = PartitionLog::new(LogConfig {
            segment_bytes: 100,
            retention_segments: 100,
            retention_bytes: 250,
            retention_age: std::time::Duration::from_millis(1000),
        });
        for i in 0..4 {
            log.append(blob(60, i), 0);
        }
        assert!(log.size_bytes() <= 250);
        assert_eq!(log.log_start(), 2);
        log.append(blob(10, 9), 5000);
        // Everything but the active segment is older than 1 s.
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start(), 4);
    }

    #[test]
    fn advance_log_start_mid_segment() {
        let mut log = PartitionLog::new(LogConfig::default());
        for i in 0..10 {
            log.append(blob(5, i), 0);
        }
        log.advance_log_start(4);
        assert_eq!(log.log_start(), 4);
        assert_eq!(log.read(0, 1)[0].offset, 4);
        assert_eq!(log.entry(3), None);
        log.advance_log_start(100);
        assert_eq!(log.log_start(), 10);
        assert_eq!(log.append(blob(1, 1), 0), 10);
    }

    #[test]
    fn replication_copies_and_resets() {
        let mut leader = PartitionLog::new(LogConfig::default());
        let mut follower = PartitionLog::new(LogConfig::default());
        for i in 0..3 {
            leader.append(blob(2, i), i64::from(i));
        }
        let sync = |f: &mut PartitionLog, l: &PartitionLog| {
            let from = f.replica_fetch_offset(l.log_start(), l.log_end());
            let entries = l.entries_from(from).cloned().collect();
            f.apply_replica_fetch(l.log_start(), l.log_end(), entries)
        };
        assert_eq!(sync(&mut follower, &leader), 3);
        assert_eq!(follower.entry(2), leader.entry(2));
        follower.append(blob(1, 9), 0);
        follower.append(blob(1, 9), 0);
        assert_eq!(sync(&mut follower, &leader), 3);
        assert_eq!(follower.entry(2), leader.entry(2));
    }

    #[test]
    fn time_search() {
        let mut log = PartitionLog::new(LogConfig::default());
        log.append(blob(1, 0), 100);
        log.append(blob(1, 1), 200);
        assert_eq!(log.find_by_time(150).map(|e| e.offset), Some(1));
        assert_eq!(log.find_by_time(0).map(|e| e.offset), Some(0));
        assert_eq!(log.find_by_time(201), None);
    }

    #[test]
    fn high_watermark_follows_isr() {
        let mut log = PartitionLog::new(LogConfig::default());
        for i in 0..7 {
            log.append(blob(1, i), 0);
        }
        assert_eq!(log.high_watermark(1, &[1]), 7);
        assert_eq!(log.high_watermark(1, &[]), 7);
        assert_eq!(log.high_watermark(1, &[1, 2]), 0);
        log.record_follower_progress(2, 7);
        assert_eq!(log.high_watermark(1, &[1, 2]), 7);
        log.record_follower_progress(2, 100);
        assert_eq!(log.high_watermark(1, &[1, 2]), 7);
    }
}
