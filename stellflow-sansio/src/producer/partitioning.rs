//! Choosing a record's partition once its topic's partition count is known: the explicit
//! one, a custom partitioner, the keyed hash, or the keyless rule (sticky or round robin).

use super::partitioner::{KeyedPartitioner, KeylessPartitioner, Partitioner};
use super::topics::TopicState;
use super::{ProduceError, ProducerConfig};
use stellflow_proto::rng::Rng;

/// The partitioning settings and the custom partitioner, if one was installed.
#[derive(Debug)]
pub(crate) struct Partitioning {
    keyed: KeyedPartitioner,
    keyless: KeylessPartitioner,
    batch_size: usize,
    custom: Option<Box<dyn Partitioner>>,
}

impl Partitioning {
    pub(crate) fn new(cfg: &ProducerConfig) -> Self {
        Partitioning {
            keyed: cfg.keyed,
            keyless: cfg.keyless,
            batch_size: cfg.batch_size,
            custom: None,
        }
    }

    /// Installs a custom partitioner.
    pub(crate) fn set_custom(&mut self, p: Box<dyn Partitioner>) {
        self.custom = Some(p);
    }

    /// The partition of a record of `size` bytes for topic `t` (its count known).
    pub(crate) fn choose(
        &mut self,
        t: &mut TopicState,
        explicit: Option<i32>,
        key: Option<&[u8]>,
        size: usize,
        rng: &mut Rng,
    ) -> Result<i32, ProduceError> {
        let n = t.count.max(1);
        if let Some(p) = explicit {
            if p < 0 || p >= t.count {
                return Err(invalid_partition(t, p));
            }
            return Ok(p);
        }
        let key = key.filter(|k| !k.is_empty());
        if let Some(c) = &mut self.custom {
            return Ok(c.partition(&t.name, key, n).rem_euclid(n));
        }
        if let Some(k) = key {
            return Ok(self.keyed.partition(k, n));
        }
        match self.keyless {
            KeylessPartitioner::RoundRobin => {
                let p = (t.rr % n as u32) as i32;
                t.rr = t.rr.wrapping_add(1);
                Ok(p)
            }
            _ => Ok(sticky(t, size, self.batch_size, rng)),
        }
    }
}

/// The error for `partition` of topic `t`, which does not have it.
pub(crate) fn invalid_partition(t: &TopicState, partition: i32) -> ProduceError {
    ProduceError::InvalidPartition {
        topic: t.name.to_string(),
        partition,
        count: t.count,
    }
}

/// The sticky partitioner: the partition of the topic's open batch while the record fits in
/// it, else a new one — random, preferring one with a leader and not the previous one.
fn sticky(t: &mut TopicState, size: usize, batch_size: usize, rng: &mut Rng) -> i32 {
    let n = t.count.max(1);
    if let Some((p, serial)) = t.sticky
        && let Some(ps) = usize::try_from(p).ok().and_then(|i| t.parts.get(i))
    {
        let keep = match (&ps.open, serial) {
            (Some(b), s) => {
                s.is_none_or(|s| s == b.serial)
                    && (b.records.is_empty() || b.size() + size <= batch_size)
            }
            (None, None) => true,
            (None, Some(_)) => false,
        };
        if keep {
            return p;
        }
    }
    let prev = t.sticky.map(|(p, _)| p);
    let start = rng.below(n as u64) as i32;
    let mut choice = start;
    for k in 0..n {
        let p = (start + k) % n;
        let has_leader = usize::try_from(p)
            .ok()
            .and_then(|i| t.parts.get(i))
            .is_some_and(|ps| ps.leader.is_some());
        if has_leader && (Some(p) != prev || n == 1) {
            choice = p;
            break;
        }
    }
    t.sticky = Some((choice, None));
    choice
}
