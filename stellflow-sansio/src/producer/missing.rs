//! Sends to a topic no broker knows: they fail once every broker has confirmed the topic
//! unknown for `producer.metadata_max_wait` (not after the delivery timeout), or, with
//! `producer.create_missing_topics`, the producer creates the topic and sends once the
//! metadata names it.

use super::{DeliveryError, Producer};
use crate::metadata::MetadataCache;
use crate::request::RequestId;
use std::sync::Arc;
use std::time::Instant;

impl Producer {
    /// After new metadata (once per metadata generation): starts the wait for topics every
    /// broker confirmed unknown, and returns them with the partition count to create them
    /// with when `producer.create_missing_topics` says so.
    pub(crate) fn after_metadata(
        &mut self,
        now: Instant,
        meta: &MetadataCache,
    ) -> Option<(Vec<Arc<str>>, i32)> {
        if self.confirmed_gen == meta.generation() {
            return None;
        }
        self.confirmed_gen = meta.generation();
        let topics = self.confirm_unknown(now, meta);
        let partitions = self.cfg.create_missing_topics?;
        Some((topics, partitions))
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
    pub(crate) fn confirm_unknown(&mut self, now: Instant, meta: &MetadataCache) -> Vec<Arc<str>> {
        let cluster = meta.cluster();
        let every_broker_answered = !cluster.brokers.is_empty()
            && (cluster.brokers.values()).all(|b| meta.view(&b.address).is_some());
        let create = self.cfg.create_missing_topics.is_some();
        let mut out = Vec::new();
        for t in &mut self.topics {
            if t.count > 0 || t.pending == 0 || cluster.topics.contains_key(&*t.name) {
                t.unknown_since = None;
                continue;
            }
            if !every_broker_answered {
                continue;
            }
            t.unknown_since.get_or_insert(now);
            if create && !t.create_asked {
                t.create_asked = true;
                out.push(t.name.clone());
            }
        }
        out
    }

    /// When the first topic still unknown everywhere runs out of `metadata_max_wait`.
    pub(crate) fn missing_deadline(&self) -> Option<Instant> {
        let wait = self.cfg.metadata_max_wait;
        (self.topics.iter())
            .filter(|t| t.pending > 0 && t.count == 0)
            .filter_map(|t| Some(t.unknown_since? + wait))
            .min()
    }

    /// Fails the waiting records of every topic unknown everywhere for `metadata_max_wait`.
    pub(crate) fn fail_missing(&mut self, now: Instant) {
        let wait = self.cfg.metadata_max_wait;
        let due: Vec<usize> = (self.topics.iter().enumerate())
            .filter(|(_, t)| t.pending > 0 && t.count == 0)
            .filter(|(_, t)| t.unknown_since.is_some_and(|s| s + wait <= now))
            .map(|(i, _)| i)
            .collect();
        if due.is_empty() {
            return;
        }
        let (fail, keep) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| due.contains(&p.topic));
        self.pending = keep;
        for p in Vec::from(fail) {
            self.buffered = self.buffered.saturating_sub(p.size);
            let topic = match self.topics.get_mut(p.topic) {
                Some(t) => {
                    t.pending = t.pending.saturating_sub(1);
                    t.name.to_string()
                }
                None => String::new(),
            };
            self.emit_failure(p.id, DeliveryError::UnknownTopic { topic });
        }
        for i in due {
            if let Some(t) = self.topics.get_mut(i) {
                t.unknown_since = None;
                t.create_asked = false;
            }
        }
    }
}
