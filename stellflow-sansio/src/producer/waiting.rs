//! Records whose topic's partitions are not known yet: an owned copy of each (a cold path),
//! kept in produce order until metadata names the partitions, or until they fail.

use super::DeliveryError;
use super::outcomes::Outcomes;
use super::pool::BufferPool;
use super::topics::Topics;
use crate::trace::TraceIds;
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A record waiting for its topic's metadata (its id is already handed out).
#[derive(Debug)]
pub(crate) struct WaitingRecord {
    pub id: u64,
    /// The topic's index in the producer's topics.
    pub topic: usize,
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    pub timestamp: i64,
    /// Its size, as counted against the buffer.
    pub size: usize,
    /// When it fails if metadata never names its partitions (the delivery timeout).
    pub deadline: Instant,
    pub trace: Option<TraceIds>,
}

/// The waiting records, oldest first. Each is counted in its topic's `waiting` and its
/// bytes in the buffer until it is placed in a batch or fails.
#[derive(Debug, Default)]
pub(crate) struct WaitingRecords {
    list: VecDeque<WaitingRecord>,
}

impl WaitingRecords {
    /// Keeps `r` (its topic's count and the buffer already include it).
    pub(crate) fn push(&mut self, r: WaitingRecord) {
        self.list.push_back(r);
    }

    /// Every waiting record, oldest first, taken out (to be placed).
    pub(crate) fn take_all(&mut self) -> Option<VecDeque<WaitingRecord>> {
        (!self.list.is_empty()).then(|| std::mem::take(&mut self.list))
    }

    /// When the oldest fails (its delivery timeout).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.list.front().map(|w| w.deadline)
    }

    /// The oldest one's id (`u64::MAX` if none).
    pub(crate) fn min_id(&self) -> u64 {
        self.list.front().map_or(u64::MAX, |w| w.id)
    }

    /// Fails every record whose delivery timeout (`after`) passed: a timeout when its topic
    /// is known by now, else an unknown topic.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        after: Duration,
        (topics, pool, out): (&mut Topics, &mut BufferPool, &mut Outcomes),
    ) {
        while let Some(p) = self.list.pop_front_if(|p| p.deadline <= now) {
            pool.free(p.size);
            let topic = (topics.get_mut(p.topic))
                .map(|t| {
                    t.waiting = t.waiting.saturating_sub(1);
                    t.name.to_string()
                })
                .unwrap_or_default();
            let known = topics.get(p.topic).is_some_and(|t| t.count > 0);
            let err = if known {
                DeliveryError::Timeout { after, last: None }
            } else {
                DeliveryError::UnknownTopic { topic }
            };
            out.fail_record(p.id, err);
        }
    }

    /// Fails the records of the topics `due` with [`DeliveryError::UnknownTopic`].
    pub(crate) fn fail_topics(
        &mut self,
        due: &[usize],
        (topics, pool, out): (&mut Topics, &mut BufferPool, &mut Outcomes),
    ) {
        let (fail, keep) = std::mem::take(&mut self.list)
            .into_iter()
            .partition(|p| due.contains(&p.topic));
        self.list = keep;
        for p in Vec::from(fail) {
            pool.free(p.size);
            let topic = match topics.get_mut(p.topic) {
                Some(t) => {
                    t.waiting = t.waiting.saturating_sub(1);
                    t.name.to_string()
                }
                None => String::new(),
            };
            out.fail_record(p.id, DeliveryError::UnknownTopic { topic });
        }
    }

    /// Fails every record with `error`; returns how many. With `pool`, each record's topic
    /// count and bytes are given back; without, the caller drops all counts (an abort).
    pub(crate) fn fail_all(
        &mut self,
        error: &DeliveryError,
        mut counts: Option<(&mut Topics, &mut BufferPool)>,
        out: &mut Outcomes,
    ) -> u64 {
        let mut failed = 0;
        while let Some(p) = self.list.pop_front() {
            if let Some((topics, pool)) = &mut counts {
                pool.free(p.size);
                if let Some(t) = topics.get_mut(p.topic) {
                    t.waiting = t.waiting.saturating_sub(1);
                }
            }
            failed += 1;
            out.fail_record(p.id, error.clone());
        }
        failed
    }
}
