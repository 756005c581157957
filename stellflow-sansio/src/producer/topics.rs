//! The topics the producer has records for: each topic's partitions (their batches, leader
//! and sequence numbers) and partitioner state, found by name once per record.

use super::batch::{Batch, BatchStage};
use super::idempotence::PartitionSequence;
use super::{DeliveryError, ProduceError};
use crate::metadata::ClusterMetadata;
use crate::topic::validate_topic_name;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;
use stellflow_proto::StrBytes;

/// One partition: its batches, what the metadata says of it, and its sequence numbers.
#[derive(Debug)]
pub(crate) struct PartitionState {
    /// The batch being filled.
    pub open: Option<Batch>,
    /// Closed batches waiting to be sent (retries first, in serial order).
    pub queue: VecDeque<Batch>,
    /// Produce requests in flight for this partition (counted by the sender).
    pub in_flight: usize,
    /// The leader, from the latest metadata.
    pub leader: Option<i32>,
    /// Whether the latest metadata names more than one replica (an `acks = -1` Produce may
    /// then wait for followers at the broker, up to its ack timeout).
    pub replicated: bool,
    /// Why the metadata names no usable leader (reported when records time out waiting).
    pub leaderless: Option<crate::metadata::LeaderlessReason>,
    /// Sequence numbers (idempotence) and the records in closed, unanswered batches.
    pub seq: PartitionSequence,
    /// The encoded size of its last closed batch (`usize::MAX` before the first): the
    /// buffer its next batch starts with.
    pub last_batch: usize,
    /// Listed among the candidates of the sender's next pass (the readiness module's list).
    pub candidate: bool,
}

impl Default for PartitionState {
    fn default() -> Self {
        PartitionState {
            open: None,
            queue: VecDeque::new(),
            in_flight: 0,
            leader: None,
            replicated: false,
            leaderless: None,
            seq: PartitionSequence::default(),
            last_batch: usize::MAX,
            candidate: false,
        }
    }
}

impl PartitionState {
    /// Applies the leader the metadata names; returns whether it moved. A retry that only
    /// waited for a new leader is due at once when one is named.
    fn follow_leader(&mut self, leader: Option<i32>) -> bool {
        if leader == self.leader {
            return false;
        }
        self.leader = leader;
        if leader.is_some() {
            for b in &mut self.queue {
                if std::mem::take(&mut b.awaits_leader) {
                    b.retry_at = None;
                }
            }
        }
        true
    }
}

/// One topic's partitions and partitioner state.
#[derive(Debug)]
pub(crate) struct TopicState {
    pub name: Arc<str>,
    pub wire_name: StrBytes,
    pub parts: Vec<PartitionState>,
    /// Partition count from metadata; 0 while unknown.
    pub count: i32,
    /// Sticky partitioner: the partition and the serial of the batch it sticks to.
    pub sticky: Option<(i32, Option<u64>)>,
    pub rr: u32,
    /// Records of this topic waiting for metadata.
    pub waiting: usize,
    /// Since when every broker has confirmed the topic unknown (while records wait for it).
    pub unknown_since: Option<Instant>,
    /// A creation was asked for (`create_missing_topics`).
    pub create_asked: bool,
}

impl TopicState {
    fn new(name: &str) -> Self {
        TopicState {
            name: Arc::from(name),
            wire_name: StrBytes::from(name),
            parts: Vec::new(),
            count: 0,
            sticky: None,
            rr: 0,
            waiting: 0,
            unknown_since: None,
            create_asked: false,
        }
    }
}

/// Every topic the producer was given a record for, by index (`ti`); partitions by index
/// (`pi`) inside their topic.
#[derive(Debug)]
pub(crate) struct Topics {
    list: Vec<TopicState>,
    by_name: HashMap<String, usize>,
    /// The topic of the last record: the next one is most likely the same.
    last: usize,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            list: Vec::new(),
            by_name: HashMap::new(),
            last: usize::MAX,
        }
    }
}

impl Topics {
    /// Finds or registers a topic (validating its name once); `Ok((index, true))` when it is
    /// new.
    #[inline]
    pub(crate) fn index(&mut self, name: &str) -> Result<(usize, bool), ProduceError> {
        if let Some(t) = self.list.get(self.last)
            && same_name(&t.name, name)
        {
            return Ok((self.last, false));
        }
        self.index_slow(name)
    }

    fn index_slow(&mut self, name: &str) -> Result<(usize, bool), ProduceError> {
        let found = match self.by_name.get(name) {
            Some(i) => (*i, false),
            None => {
                validate_topic_name(name)?;
                let i = self.list.len();
                self.list.push(TopicState::new(name));
                self.by_name.insert(name.to_owned(), i);
                (i, true)
            }
        };
        self.last = found.0;
        Ok(found)
    }

    pub(crate) fn get(&self, ti: usize) -> Option<&TopicState> {
        self.list.get(ti)
    }

    pub(crate) fn get_mut(&mut self, ti: usize) -> Option<&mut TopicState> {
        self.list.get_mut(ti)
    }

    /// How many topics there are.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// How many partitions topic `ti` has (0 when unknown).
    pub(crate) fn parts(&self, ti: usize) -> usize {
        self.list.get(ti).map_or(0, |t| t.parts.len())
    }

    /// How many partitions all topics have.
    pub(crate) fn total_parts(&self) -> usize {
        self.list.iter().map(|t| t.parts.len()).sum()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, TopicState> {
        self.list.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> std::slice::IterMut<'_, TopicState> {
        self.list.iter_mut()
    }

    pub(crate) fn part(&self, ti: usize, pi: usize) -> Option<&PartitionState> {
        self.list.get(ti).and_then(|t| t.parts.get(pi))
    }

    pub(crate) fn part_mut(&mut self, ti: usize, pi: usize) -> Option<&mut PartitionState> {
        self.list.get_mut(ti).and_then(|t| t.parts.get_mut(pi))
    }

    /// Applies new metadata: partition counts (which only grow), leaders, replication and
    /// why a partition has no leader. Returns whether a leader moved.
    pub(crate) fn apply_metadata(&mut self, cluster: &ClusterMetadata) -> bool {
        let mut moved = false;
        for t in &mut self.list {
            let Some(info) = cluster.topics.get(&*t.name) else {
                for p in &mut t.parts {
                    moved |= p.leader.take().is_some();
                }
                continue;
            };
            let count = info
                .partitions
                .keys()
                .next_back()
                .map_or(0, |p| p.saturating_add(1).max(0));
            if count > t.count {
                t.count = count;
                t.parts
                    .resize_with(usize::try_from(count).unwrap_or(0), PartitionState::default);
            }
            for (i, p) in t.parts.iter_mut().enumerate() {
                let part = i32::try_from(i).ok().and_then(|i| info.partitions.get(&i));
                moved |= p.follow_leader(part.and_then(|pi| pi.leader().ok()));
                p.replicated = part.is_some_and(|pi| pi.replicas.len() > 1);
                p.leaderless = part.and_then(|pi| pi.leaderless.clone());
            }
        }
        moved
    }

    /// The size of the next batch partition `(ti, pi)` would send: its first queued one's,
    /// else its open one's.
    pub(crate) fn ready_size(&self, ti: usize, pi: usize) -> usize {
        self.part(ti, pi).map_or(0, |ps| match ps.queue.front() {
            Some(b) => b.size(),
            None => ps.open.as_ref().map_or(0, Batch::size),
        })
    }

    /// A delivery timeout with no failure attached gets the reason the partition has no
    /// leader, when the metadata gave one (a broker restarted on its data, a leader that is
    /// not a known broker).
    pub(crate) fn with_leaderless_cause(
        &self,
        ti: usize,
        pi: usize,
        error: DeliveryError,
    ) -> DeliveryError {
        match error {
            DeliveryError::Timeout { after, last: None } => {
                let last = self.list.get(ti).and_then(|t| {
                    let reason = t.parts.get(pi)?.leaderless.clone()?;
                    Some(Box::new(DeliveryError::Leaderless {
                        topic: t.name.to_string(),
                        partition: i32::try_from(pi).unwrap_or(i32::MAX),
                        reason,
                    }))
                });
                DeliveryError::Timeout { after, last }
            }
            e => e,
        }
    }

    /// Takes every batch out, open and queued, with its stage (in-flight counts back to 0),
    /// for the producer's abort.
    pub(crate) fn take_all_batches(&mut self, into: &mut Vec<(usize, usize, Batch, BatchStage)>) {
        for (ti, t) in self.list.iter_mut().enumerate() {
            for (pi, ps) in t.parts.iter_mut().enumerate() {
                ps.in_flight = 0;
                let open = ps.open.take();
                into.extend(ps.queue.drain(..).map(|b| (ti, pi, b, BatchStage::Closed)));
                into.extend(open.map(|b| (ti, pi, b, BatchStage::Open)));
            }
        }
    }

    /// Every partition of every topic, as `(ti, pi)`.
    pub(crate) fn all_parts(&self) -> impl Iterator<Item = (usize, usize)> + use<'_> {
        (0..self.list.len()).flat_map(|ti| (0..self.parts(ti)).map(move |pi| (ti, pi)))
    }
}

/// Whether two topic names are equal, compared in place for names of up to 16 bytes (every
/// record compares its topic with the last one's, and a `memcmp` call each time shows in a
/// produce profile).
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // The first and the last `W` bytes cover a name of `W..=2W` bytes (one load each).
    #[inline]
    fn ends<const W: usize>(a: &[u8], b: &[u8]) -> bool {
        a.first_chunk::<W>() == b.first_chunk::<W>() && a.last_chunk::<W>() == b.last_chunk::<W>()
    }
    match n {
        8..=16 => ends::<8>(a, b),
        4..=7 => ends::<4>(a, b),
        2..=3 => ends::<2>(a, b),
        1 => ends::<1>(a, b),
        0 => true,
        _ => a == b,
    }
}

#[cfg(test)]
mod same_name_tests {
    use super::same_name;

    /// Names of every length up to 40 bytes equal themselves and differ from a copy with any
    /// one byte changed or with another length.
    #[test]
    fn compares_every_byte_at_every_length() {
        for n in 0..=40usize {
            let name: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same_name(&name, &name.clone()), "length {n}");
            for i in 0..n {
                let mut other = name.clone().into_bytes();
                other[i] = b'Z';
                let other = String::from_utf8(other).unwrap();
                assert!(!same_name(&name, &other), "length {n}, byte {i}");
            }
            assert!(!same_name(&name, &format!("{name}x")), "length {n}");
        }
    }
}
