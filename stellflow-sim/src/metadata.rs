//! A broker's metadata cache: which partitions it knows, with leader, epoch, replicas and ISR
//! (PROTOCOL.md §3.2, §3.14).
//!
//! Topic names are nullable because the server stores whatever the client sent, a null name
//! included (§1.4). Listing order is Java `String` order (UTF-16 code units).

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A topic name as the server stores it (null included).
pub type TopicName = Option<String>;

/// The topic the server invents when it knows no topics at all.
pub const EMPTY_PLACEHOLDER: &str = "__empty__";

/// A Metadata view built by the cluster (the cluster-wide [`crate::MetadataView`]).
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// Every partition of the cluster.
    pub cache: MetadataCache,
    /// Every live broker: `(id, host, port)`, ascending.
    pub brokers: Vec<(i32, String, i32)>,
}

/// Metadata of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    /// Leader broker id (0 after a restart, which is nobody).
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Replica broker ids, as last set.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids, as last set.
    pub isr: Vec<i32>,
}

impl PartitionMeta {
    /// A partition led by `broker` alone at epoch 0 (CreateTopic, Produce auto-create).
    pub fn solo(broker: i32) -> Self {
        PartitionMeta {
            leader: broker,
            leader_epoch: 0,
            replicas: vec![broker],
            isr: vec![broker],
        }
    }
}

/// Compares two strings the way Java's `String.compareTo` does (UTF-16 code units).
pub fn java_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Topic → partition → metadata.
#[derive(Debug, Clone, Default)]
pub struct MetadataCache {
    topics: BTreeMap<TopicName, BTreeMap<i32, PartitionMeta>>,
}

impl MetadataCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The metadata of one partition.
    pub fn get(&self, topic: &TopicName, partition: i32) -> Option<&PartitionMeta> {
        self.topics.get(topic)?.get(&partition)
    }

    /// The partitions of a topic, ascending, if the topic is known.
    pub fn topic(&self, topic: &TopicName) -> Option<&BTreeMap<i32, PartitionMeta>> {
        self.topics.get(topic)
    }

    /// Sets (overwrites) one partition's metadata.
    pub fn set(&mut self, topic: TopicName, partition: i32, meta: PartitionMeta) {
        self.topics
            .entry(topic)
            .or_default()
            .insert(partition, meta);
    }

    /// Removes a topic; returns whether it was known.
    pub fn remove_topic(&mut self, topic: &TopicName) -> bool {
        self.topics.remove(topic).is_some()
    }

    /// Known topic names in Java `String` order (a null name first).
    pub fn topic_names(&self) -> Vec<TopicName> {
        let mut names: Vec<TopicName> = self.topics.keys().cloned().collect();
        names.sort_by(|a, b| match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => java_order(a, b),
        });
        names
    }

    /// Whether a null topic name is cached (every Metadata request then fails, §1.4).
    pub fn has_null_topic(&self) -> bool {
        self.topics.contains_key(&None)
    }

    /// Number of topics.
    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// Number of partitions over all topics.
    pub fn partition_count(&self) -> usize {
        self.topics.values().map(BTreeMap::len).sum()
    }

    /// Every `(topic, partition, meta)`.
    pub fn iter(&self) -> impl Iterator<Item = (&TopicName, i32, &PartitionMeta)> {
        self.topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |(p, m)| (t, *p, m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_order() {
        // U+FF21 sorts before U+1F600 in UTF-16 (0xFF21 < 0xD83D is false!) — check both ways.
        assert_eq!(java_order("a", "b"), Ordering::Less);
        assert_eq!(java_order("\u{FF21}", "\u{1F600}"), Ordering::Greater);
        assert_eq!("\u{FF21}".cmp("\u{1F600}"), Ordering::Less);
    }

    #[test]
    fn cache_basics() {
        let mut c = MetadataCache::new();
        c.set(Some("b".into()), 1, PartitionMeta::solo(1));
        c.set(Some("a".into()), 0, PartitionMeta::solo(1));
        c.set(Some("b".into()), 0, PartitionMeta::solo(1));
        assert_eq!(c.topic_names(), vec![Some("a".into()), Some("b".into())]);
        assert_eq!(c.partition_count(), 3);
        assert!(!c.has_null_topic());
        assert!(c.remove_topic(&Some("b".into())));
        assert_eq!(c.topic_count(), 1);
    }
}
