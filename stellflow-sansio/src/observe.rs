//! The core's log lines: what it tells through `tracing`, at which level, and why from here.
//!
//! The core emits through [`tracing`], a facade: no I/O, no clock, no global state of its own,
//! and nothing at all happens until the host installs a subscriber. The lines live in the core,
//! not in the adapters, because only the core knows the reasons — why a request is retried, why
//! a partition has no leader, why a consumer reset its position — while an adapter sees only
//! outcomes; and every runtime (and a DST world) then logs the same lines.
//!
//! Every line is inside the client's span `stellflow{client_id=…}` (entered on each input,
//! output and command), and lines about one broker carry `broker` (its address) and, when
//! known, `broker_id`.
//!
//! Levels: `info` stays quiet on a healthy client (it says what changed: a reconnect, a leader
//! that moved, a broker that joined, a group joined); `warn` always means a user should look (a
//! lost or refused connection, a request timeout, a leaderless partition, a failed delivery, a
//! consumer reset, a group that thrashes); `debug` follows the normal life of connections,
//! metadata rounds, retries and rebalances; `trace` is not used.

use crate::consumer_event::ConsumerEvent;
use crate::event::Event;
use crate::metadata::ClusterMetadata;

/// What the client keeps to log changes rather than states.
#[derive(Debug)]
pub(crate) struct Observe {
    /// The client's span (client id).
    pub span: tracing::Span,
    /// The merged metadata at the end of the last round (only kept while logging is on).
    seen: Option<ClusterMetadata>,
    /// The last delivery failure logged at `warn`: the same failure for the next records of
    /// a batch or a burst goes to `debug`, so one cause is one warning.
    last_delivery_warning: Option<String>,
    /// What the `metrics` feature published last.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub metrics: crate::metrics::emit::Publisher,
}

impl Default for Observe {
    fn default() -> Self {
        Observe {
            span: tracing::Span::none(),
            seen: None,
            last_delivery_warning: None,
            metrics: Default::default(),
        }
    }
}

impl Observe {
    /// Logs what a finished metadata round changed: brokers that joined or left, leaders that
    /// moved, partitions that became leaderless (with the reason) or got a leader back.
    pub(crate) fn metadata_round(&mut self, now: &ClusterMetadata) {
        if !tracing::enabled!(tracing::Level::WARN) {
            self.seen = None;
            return;
        }
        let leaderless = now.leaderless().count();
        tracing::debug!(
            brokers = now.brokers.len(),
            topics = now.topics.len(),
            leaderless,
            "metadata updated"
        );
        let before = self.seen.take().unwrap_or_default();
        for (id, b) in &now.brokers {
            match before.brokers.get(id) {
                None if before.brokers.is_empty() => {
                    tracing::debug!(broker_id = id, broker = %b.address, "broker known")
                }
                None => tracing::info!(broker_id = id, broker = %b.address, "broker joined"),
                Some(old) if old.address != b.address => tracing::info!(broker_id = id,
                    broker = %b.address, "broker moved from {}", old.address),
                Some(_) => {}
            }
        }
        for (id, b) in &before.brokers {
            if !now.brokers.contains_key(id) {
                tracing::info!(broker_id = id, broker = %b.address, "broker no longer in metadata");
            }
        }
        for (topic, t) in &now.topics {
            for (p, info) in &t.partitions {
                let old = before.partition(topic, *p);
                let old_leader = old.map(|o| o.leader().map_err(Clone::clone));
                let new_leader = info.leader();
                match (old_leader, new_leader) {
                    (Some(Ok(a)), Ok(b)) if a != b => {
                        tracing::info!(topic, partition = p, from = a, to = b, "leader moved")
                    }
                    (Some(Err(_)), Ok(b)) => {
                        tracing::info!(topic, partition = p, leader = b, "leader available again")
                    }
                    (Some(Err(old)), Err(reason)) if old == *reason => {}
                    (_, Err(reason)) => {
                        tracing::warn!(topic, partition = p, "partition has no leader: {reason}")
                    }
                    _ => {}
                }
            }
        }
        self.seen = Some(now.clone());
    }

    /// Logs an event on its way to the driver (what the core did not log where it happened).
    pub(crate) fn trace(&mut self, event: &Event) {
        if !tracing::enabled!(tracing::Level::WARN) {
            return; // nothing listens: not even the message is formatted
        }
        match event {
            Event::Produced { result: Err(e), .. } => {
                let text = e.to_string();
                if self.last_delivery_warning.as_deref() == Some(text.as_str()) {
                    tracing::debug!("record not delivered: {text}");
                } else {
                    tracing::warn!("record not delivered: {text}");
                    self.last_delivery_warning = Some(text);
                }
            }
            Event::Produced { result: Ok(_), .. } => self.last_delivery_warning = None,
            Event::ProducedBatch(batch) => match batch.result() {
                Err(e) => {
                    let text = e.to_string();
                    if self.last_delivery_warning.as_deref() == Some(text.as_str()) {
                        tracing::debug!(records = batch.len(), "records not delivered: {text}");
                    } else {
                        tracing::warn!(records = batch.len(), "records not delivered: {text}");
                        self.last_delivery_warning = Some(text);
                    }
                }
                Ok(_) => self.last_delivery_warning = None,
            },
            Event::Admin { result: Err(e), .. } => tracing::debug!("admin command failed: {e}"),
            Event::Response { result: Err(e), .. } => tracing::debug!("raw request failed: {e}"),
            Event::ProducerClosed { failed } if *failed > 0 => {
                tracing::warn!(failed, "producer closed with records undelivered")
            }
            Event::Consumer(c) => consumer(c),
            _ => {}
        }
    }
}

fn consumer(event: &ConsumerEvent) {
    match event {
        ConsumerEvent::PartitionsAssigned(p) => tracing::debug!("partitions assigned: {p:?}"),
        ConsumerEvent::PartitionsRevoked(p) => tracing::debug!("partitions revoked: {p:?}"),
        ConsumerEvent::PositionResolved {
            partition,
            position,
            committed,
        } => tracing::debug!(%partition, ?position, committed, "position resolved"),
        ConsumerEvent::NoPosition(p) => tracing::warn!(partition = %p,
            "no position (nothing committed and auto_offset_reset is none): seek to consume"),
        ConsumerEvent::LogStartMoved {
            partition,
            position,
            log_start,
            action,
        } => tracing::warn!(%partition, position, log_start, ?action,
            "position below the log start (retention deleted it); reset by policy"),
        ConsumerEvent::CorruptBlob {
            partition,
            offset,
            error,
        } => tracing::warn!(%partition, offset, "corrupt blob skipped: {error}"),
        ConsumerEvent::FetchError { partition, code } => {
            tracing::debug!(%partition, "fetch answered {code}; retrying")
        }
        ConsumerEvent::TopicUnknown { topic, error_after } => tracing::warn!(
            topic,
            ?error_after,
            "no broker knows the topic asked for; waiting for it (a poll error follows if it stays unknown)"
        ),
        ConsumerEvent::CommitCompleted { result: Err(e), .. } => {
            tracing::warn!("commit failed: {e}")
        }
        ConsumerEvent::GroupJoined {
            generation,
            member_id,
            leader,
            server_assignment,
        } => tracing::info!(
            generation,
            member_id,
            leader,
            server_assignment,
            "joined the group"
        ),
        ConsumerEvent::GroupRejoining { reason, retry_in } => {
            tracing::info!(?retry_in, "rejoining the group: {reason}")
        }
        ConsumerEvent::GroupThrashing { rejoins, window } => tracing::warn!(
            rejoins,
            ?window,
            "group members keep fencing each other; use manual assignment on this server"
        ),
        _ => {}
    }
}
