//! A topic and partition ([`TopicPartition`]), the key of everything the consumer tracks,
//! and the topic names it takes ([`IntoTopic`]).

use std::sync::Arc;

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic (shared, cheap to clone).
    pub topic: Arc<str>,
    /// The partition id.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic partition. The topic may be a `&str`, a `String`, or the `Arc<str>` a record
    /// carries (shared, not copied):
    ///
    /// ```
    /// use std::sync::Arc;
    /// # use stellflow_sansio::TopicPartition;
    /// let name: Arc<str> = Arc::from("orders");
    /// let a = TopicPartition::new("orders", 0);
    /// let b = TopicPartition::new(String::from("orders"), 0);
    /// let c = TopicPartition::new(&name, 0); // shares `name`'s allocation
    /// assert!(a == b && b == c && Arc::ptr_eq(&c.topic, &name));
    /// ```
    pub fn new(topic: impl IntoTopic, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into_topic(),
            partition,
        }
    }
}

/// A topic name [`TopicPartition::new`] takes: `&str`, `String` and `&String` are copied
/// into a new `Arc<str>`, an `Arc<str>` (or a reference to one, such as
/// [`ConsumerRecord::topic`](crate::ConsumerRecord::topic)) is shared.
pub trait IntoTopic {
    /// The name as a shared string.
    fn into_topic(self) -> Arc<str>;
}

impl IntoTopic for &str {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for &String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self.as_str())
    }
}

impl IntoTopic for Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self
    }
}

impl IntoTopic for &Arc<str> {
    fn into_topic(self) -> Arc<str> {
        Arc::clone(self)
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
