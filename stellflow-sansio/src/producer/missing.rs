//! Sends to a topic no broker knows: they fail once every broker has confirmed the topic
//! unknown for `producer.metadata_max_wait` (not after the delivery timeout), or, with
//! `producer.create_missing_topics`, the producer creates the topic and sends once the
//! metadata names it.

use super::accumulator::Accumulator;
use super::outcomes::Outcomes;
use super::topics::Topics;
use crate::metadata::MetadataCache;
use crate::request::RequestId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The producer's topic creations in flight and its wait for unknown topics.
#[derive(Debug)]
pub(crate) struct MissingTopics {
    /// `producer.metadata_max_wait`.
    max_wait: Duration,
    /// `producer.create_missing_topics`: the partition count to create a topic with.
    create: Option<i32>,
    /// Topic creations started, by admin id.
    creating: Vec<RequestId>,
    /// The metadata generation last looked at.
    confirmed_gen: u64,
    /// Topics whose wait runs (`unknown_since` set), or more: with none, a poll's deadline
    /// and a timeout's check do not look at every topic the producer knows.
    waiting_topics: usize,
}

impl MissingTopics {
    pub(crate) fn new(max_wait: Duration, create: Option<i32>) -> Self {
        MissingTopics {
            max_wait,
            create,
            creating: Vec::new(),
            confirmed_gen: 0,
            waiting_topics: 0,
        }
    }

    /// After new metadata (once per metadata generation): starts the wait for topics every
    /// broker confirmed unknown, and returns them with the partition count to create them
    /// with when `producer.create_missing_topics` says so.
    pub(crate) fn after_metadata(
        &mut self,
        now: Instant,
        topics: &mut Topics,
        meta: &MetadataCache,
    ) -> Option<(Vec<Arc<str>>, i32)> {
        if self.confirmed_gen == meta.generation() {
            return None;
        }
        self.confirmed_gen = meta.generation();
        let found = self.confirm_unknown(now, topics, meta);
        let partitions = self.create?;
        Some((found, partitions))
    }

    /// Notes `id`, a topic creation the producer started: its answer is the producer's.
    pub(crate) fn creating_topic(&mut self, id: RequestId) {
        self.creating.push(id);
    }

    /// Whether `id` is a topic creation the producer started (then forgets it).
    pub(crate) fn owns_creation(&mut self, id: RequestId) -> bool {
        let Some(pos) = self.creating.iter().position(|c| *c == id) else {
            return false;
        };
        self.creating.swap_remove(pos);
        true
    }

    /// A metadata round ended: every topic with records waiting that no broker knows starts
    /// its wait (kept while it stays unknown, dropped once known); returns the topics to
    /// create now.
    fn confirm_unknown(
        &mut self,
        now: Instant,
        topics: &mut Topics,
        meta: &MetadataCache,
    ) -> Vec<Arc<str>> {
        let cluster = meta.cluster();
        let every_broker_answered = !cluster.brokers.is_empty()
            && (cluster.brokers.values()).all(|b| meta.view(&b.address).is_some());
        let create = self.create.is_some();
        let (mut out, mut waiting) = (Vec::new(), 0);
        for t in topics.iter_mut() {
            if t.count > 0 || t.waiting == 0 || cluster.topics.contains_key(&*t.name) {
                t.unknown_since = None;
                continue;
            }
            if !every_broker_answered {
                waiting += usize::from(t.unknown_since.is_some());
                continue;
            }
            t.unknown_since.get_or_insert(now);
            waiting += 1;
            if create && !t.create_asked {
                t.create_asked = true;
                out.push(t.name.clone());
            }
        }
        self.waiting_topics = waiting;
        out
    }

    /// When the first topic still unknown everywhere runs out of `metadata_max_wait`.
    pub(crate) fn deadline(&self, topics: &Topics) -> Option<Instant> {
        if self.waiting_topics == 0 {
            return None;
        }
        let wait = self.max_wait;
        (topics.iter())
            .filter(|t| t.waiting > 0 && t.count == 0)
            .filter_map(|t| Some(t.unknown_since? + wait))
            .min()
    }

    /// Fails the waiting records of every topic unknown everywhere for `metadata_max_wait`.
    pub(crate) fn fail_due(&mut self, now: Instant, acc: &mut Accumulator, out: &mut Outcomes) {
        if self.waiting_topics == 0 {
            return;
        }
        let wait = self.max_wait;
        let due: Vec<usize> = (acc.topics.iter().enumerate())
            .filter(|(_, t)| t.waiting > 0 && t.count == 0)
            .filter(|(_, t)| t.unknown_since.is_some_and(|s| s + wait <= now))
            .map(|(i, _)| i)
            .collect();
        if due.is_empty() {
            return;
        }
        acc.fail_waiting_of(&due, out);
        self.waiting_topics = self.waiting_topics.saturating_sub(due.len());
        for i in due {
            if let Some(t) = acc.topics.get_mut(i) {
                t.unknown_since = None;
                t.create_asked = false;
            }
        }
    }
}
