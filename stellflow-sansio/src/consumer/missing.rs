//! Topics the consumer was asked for (`subscribe`, `assign`) that no broker knows: a
//! [`ConsumerEvent::TopicUnknown`] as soon as every broker answered metadata without one, and,
//! when a fresh answer still lacks it `consumer.missing_topic_wait` later, one
//! [`ConsumerError::UnknownTopic`] for the next poll (rdkafka: "Subscribed topic not
//! available"). Nothing else changes: a topic created later is picked up as any other.

use super::{Consumer, ConsumerError, ConsumerEvent, emit};
use crate::refresh::Urgency;
use crate::shared::Shared;
use std::collections::VecDeque;
use std::time::Instant;

/// The topics watched since the last `subscribe`/`assign`, and the errors not taken yet.
#[derive(Debug, Default)]
pub(crate) struct MissingTopics {
    watched: Vec<Watched>,
    /// Errors for the next polls, oldest first.
    errors: VecDeque<ConsumerError>,
}

/// One topic not in the metadata when it was asked for.
#[derive(Debug)]
struct Watched {
    topic: String,
    /// The metadata generation when it was asked for: only a later answer can confirm it
    /// unknown.
    asked_gen: u64,
    /// When every broker was first seen without it (the event).
    unknown_since: Option<Instant>,
    /// The generation when the wait ran out and a fresh round was asked for: the error
    /// needs an answer after it.
    confirm_gen: Option<u64>,
}

impl Consumer {
    /// A `subscribe` or `assign` asked for `topics`: watches those the metadata does not
    /// name (replacing the previous watch) and asks for a metadata round now.
    pub(crate) fn watch_topics<'a>(
        &mut self,
        topics: impl IntoIterator<Item = &'a str>,
        sh: &mut Shared,
    ) {
        let known = &sh.metadata.cluster().topics;
        let asked_gen = sh.metadata.generation();
        let m = &mut self.missing;
        m.watched.clear();
        m.errors.clear();
        for topic in topics {
            if known.contains_key(topic) || m.watched.iter().any(|w| w.topic == topic) {
                continue;
            }
            m.watched.push(Watched {
                topic: topic.to_owned(),
                asked_gen,
                unknown_since: None,
                confirm_gen: None,
            });
        }
        if !m.watched.is_empty() {
            sh.refresher.request(Urgency::Now);
        }
    }

    /// Looks at the metadata for the watched topics: a topic named now is dropped from the
    /// watch; one every broker answered without (after it was asked for) raises the event,
    /// and once `missing_topic_wait` passed since, asks for a fresh round whose answer, still
    /// without it, makes the poll error. Returns whether a round was asked for.
    pub(crate) fn check_missing(&mut self, now: Instant, sh: &mut Shared) -> bool {
        if self.missing.watched.is_empty() {
            return false;
        }
        let meta = &sh.metadata;
        let (cluster, generation) = (meta.cluster(), meta.generation());
        let every_broker_answered = !cluster.brokers.is_empty()
            && (cluster.brokers.values()).all(|b| meta.view(&b.address).is_some());
        let wait = self.config.missing_topic_wait;
        let (mut refresh, mut events) = (false, Vec::new());
        let errors = &mut self.missing.errors;
        self.missing.watched.retain_mut(|w| {
            if cluster.topics.contains_key(&w.topic) {
                return false;
            }
            if !every_broker_answered || generation == w.asked_gen {
                return true;
            }
            let Some(since) = w.unknown_since else {
                w.unknown_since = Some(now);
                events.push(ConsumerEvent::TopicUnknown {
                    topic: w.topic.clone(),
                    error_after: wait,
                });
                return true;
            };
            if now < since + wait {
                return true;
            }
            match w.confirm_gen {
                None => {
                    w.confirm_gen = Some(generation);
                    refresh = true;
                    true
                }
                Some(asked) if generation > asked => {
                    errors.push_back(ConsumerError::UnknownTopic {
                        topic: std::mem::take(&mut w.topic),
                        waited: now.saturating_duration_since(since),
                    });
                    false
                }
                Some(_) => true,
            }
        });
        for e in events {
            emit(sh, e);
        }
        if refresh {
            sh.refresher.request(Urgency::Now);
        }
        refresh
    }

    /// When the first watched topic's wait runs out (then a fresh round is asked for).
    pub(crate) fn missing_deadline(&self) -> Option<Instant> {
        let wait = self.config.missing_topic_wait;
        (self.missing.watched.iter())
            .filter(|w| w.confirm_gen.is_none())
            .filter_map(|w| Some(w.unknown_since? + wait))
            .min()
    }

    /// The oldest missing-topic error no poll returned yet.
    pub(crate) fn take_missing_error(&mut self) -> Option<ConsumerError> {
        self.missing.errors.pop_front()
    }
}
