//! Counters for the metrics of DESIGN §6, readable without any metrics dependency, and — with
//! the `metrics` cargo feature — the same figures emitted through the `metrics` facade.
//!
//! The core always counts ([`Counters`], from [`crate::Client::counters`]). With the feature on,
//! it also emits through the `metrics` crate, the facade Rust services use (Prometheus,
//! OpenTelemetry, StatsD exporters plug in as its recorders); without a recorder installed every
//! call is a no-op. This deviates from DESIGN §6's first sketch (the runtime crates bridging the
//! counters to a facade): emitting from the core, where the figures change, gives exact
//! histograms and per-topic/per-partition figures that a snapshot bridge cannot rebuild, and one
//! implementation serves every runtime and a host's own driver. The adapters re-export the
//! feature (`stellflow-tokio/metrics`, …). The facade does no I/O and reads no clock: durations
//! come from the `now` the driver passes.
//!
//! The users' copy of this table is `docs/observability.md` (Metrics); the adapter suite's
//! `observability_doc` test fails when its names and the names emitted here differ.
//!
//! | name | kind | labels | meaning |
//! | --- | --- | --- | --- |
//! | `stellflow.client.requests` | counter | `api` | requests written to a connection |
//! | `stellflow.client.request.errors` | counter | `api` | requests that ended in an error |
//! | `stellflow.client.request.duration` | histogram (seconds) | `api` | command-to-answer time |
//! | `stellflow.client.requests.inflight` | gauge | — | sent and not yet answered |
//! | `stellflow.client.connections` | gauge | — | connections open |
//! | `stellflow.producer.records` | counter | — | records acknowledged (or sent, with acks=0) |
//! | `stellflow.consumer.records` | counter | — | records delivered to the application |
//! | `stellflow.consumer.offset.commits` | counter | — | commits of consumed positions that succeeded (auto, `commit_sync`/`commit_async`/`commit_positions`, before a revocation, on close), one per commit; not the group's registry writes |
//! | `stellflow.consumer.group.operations` | counter | — | group requests sent: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, and the membership registry's reads (OffsetFetch) and writes (OffsetCommit) |
//! | `stellflow.producer.topic.records`, `.topic.bytes` | counter | `topic` | per topic |
//! | `stellflow.consumer.topic.records`, `.topic.bytes` | counter | `topic` | per topic |
//! | `stellflow.producer.record.errors` | counter | — | records that failed |
//! | `stellflow.producer.retries` | counter | — | batch retries |
//! | `stellflow.producer.buffer.bytes` | gauge | — | bytes held against `buffer_memory` |
//! | `stellflow.consumer.lag` | gauge | `topic`, `partition` | blobs between the position and the high watermark, per assigned partition |
//!
//! Labels stay low-cardinality: API names, topic names and the partitions a consumer is
//! assigned; never client ids, offsets or addresses. Gauges are moved by differences, so the
//! clients of one process add up.

use std::time::Duration;
use stellflow_proto::ApiKey;

/// Request counts of one API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiCounters {
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (transport, timeout or request-level error code).
    pub errors: u64,
}

/// Upper bounds (in microseconds) of the request-duration histogram buckets; a last bucket
/// catches everything above.
pub(crate) const DURATION_BUCKETS_MICROS: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 500_000, 2_000_000, 10_000_000,
];

/// A fixed-bucket histogram of request durations (`stellflow.client.request.duration`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// Counts per bucket of `DURATION_BUCKETS_MICROS`, plus the overflow bucket last.
    pub buckets: [u64; 13],
    /// Sum of all durations, in microseconds.
    pub sum_micros: u64,
    /// Number of samples.
    pub count: u64,
}

impl DurationHistogram {
    /// Adds one sample.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let idx = DURATION_BUCKETS_MICROS
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(DURATION_BUCKETS_MICROS.len());
        if let Some(b) = self.buckets.get_mut(idx) {
            *b += 1;
        }
        self.sum_micros = self.sum_micros.saturating_add(us);
        self.count += 1;
    }

    /// Mean duration, if any sample was taken.
    pub fn mean(&self) -> Option<Duration> {
        (self.count > 0).then(|| Duration::from_micros(self.sum_micros / self.count))
    }
}

/// Everything the core counts. Monotonic counters only grow; gauges say "now".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// `stellflow.client.requests`: requests written to a connection.
    pub requests: u64,
    /// `stellflow.client.request.errors`: requests that ended in an error.
    pub request_errors: u64,
    /// `stellflow.client.request.duration`: command-to-answer time of answered requests.
    pub request_duration: DurationHistogram,
    /// `stellflow.client.requests.inflight` (gauge): sent and not yet answered.
    pub requests_in_flight: u64,
    /// `stellflow.client.connections` (gauge): connections currently open.
    pub connections: u64,
    /// Connection attempts handed to the driver.
    pub connection_attempts: u64,
    /// Connections that failed or closed.
    pub disconnects: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Responses whose correlation id matched nothing in flight (late or bogus); dropped.
    pub unknown_correlation_ids: u64,
    /// Metadata refresh rounds started.
    pub metadata_refreshes: u64,
    /// Bytes handed to the driver for sending.
    pub bytes_sent: u64,
    /// Bytes received from the driver.
    pub bytes_received: u64,
    /// `stellflow.producer.records` (maintained by the producer).
    pub producer_records: u64,
    /// Producer records that failed (any [`crate::DeliveryError`] after sending).
    pub producer_record_errors: u64,
    /// Batches (blobs) the producer sent, retries included.
    pub producer_batches: u64,
    /// Batch retries.
    pub producer_retries: u64,
    /// Idempotent-producer epoch bumps (recoveries from lost broker state).
    pub producer_epoch_bumps: u64,
    /// `stellflow.consumer.records` (maintained by the consumer).
    pub consumer_records: u64,
    /// `stellflow.consumer.offset.commits`: commits of consumed positions that succeeded
    /// (automatic, `commit`/`commit_positions`, before a revocation, on close), one per commit
    /// however many partitions it holds and however often it was retried. The OffsetCommit
    /// requests with which a group member keeps its membership registry are not commits: they
    /// count in `group_operations` (every OffsetCommit request counts in
    /// [`Counters::api`]`(ApiKey::OFFSET_COMMIT)`).
    pub offset_commits: u64,
    /// `stellflow.consumer.group.operations`: group requests sent — FindCoordinator,
    /// JoinGroup, SyncGroup, Heartbeat, and the membership registry's reads (OffsetFetch) and
    /// writes (OffsetCommit).
    pub group_operations: u64,
    per_api: [ApiCounters; 20],
    /// Per topic: producer records and bytes, consumer records and bytes (only counted for
    /// the `metrics` feature).
    #[cfg(feature = "metrics")]
    pub(crate) topics: std::collections::HashMap<std::sync::Arc<str>, [u64; 4]>,
}

impl Counters {
    /// Counts of one API (zeros for a key the server does not register).
    pub fn api(&self, key: ApiKey) -> ApiCounters {
        index(key)
            .and_then(|i| self.per_api.get(i).copied())
            .unwrap_or_default()
    }

    pub(crate) fn api_mut(&mut self, key: ApiKey) -> Option<&mut ApiCounters> {
        index(key).and_then(|i| self.per_api.get_mut(i))
    }
}

fn index(key: ApiKey) -> Option<usize> {
    ApiKey::ALL.iter().position(|k| *k == key)
}

/// Emits the figures through the `metrics` facade (feature `metrics`); no-ops otherwise.
pub(crate) mod emit {
    #[cfg(feature = "metrics")]
    use super::Counters;
    use std::sync::Arc;
    use std::time::Duration;
    use stellflow_proto::ApiKey;

    /// One answered request's duration.
    #[inline]
    pub(crate) fn request_duration(api: ApiKey, d: Duration) {
        #[cfg(feature = "metrics")]
        metrics::histogram!("stellflow.client.request.duration", "api" => api_label(api))
            .record(d.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = (api, d);
    }

    /// Records of `topic` acknowledged by the broker (or sent, with acks=0): counted per
    /// topic, emitted by the next [`Publisher::publish`].
    #[inline]
    pub(crate) fn produced(
        c: &mut super::Counters,
        topic: &Arc<str>,
        records: usize,
        bytes: usize,
    ) {
        #[cfg(feature = "metrics")]
        {
            let t = c.topics.entry(topic.clone()).or_default();
            t[0] += records as u64;
            t[1] += bytes as u64;
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (c, topic, records, bytes);
    }

    /// `records` records of `topic` delivered to the application: the consumed-records
    /// counter, and per topic as [`produced`] counts.
    #[inline]
    pub(crate) fn consumed(c: &mut super::Counters, topic: &Arc<str>, records: u64, bytes: usize) {
        c.consumer_records += records;
        #[cfg(feature = "metrics")]
        {
            let t = c.topics.entry(topic.clone()).or_default();
            t[2] += records;
            t[3] += bytes as u64;
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (c, topic, records, bytes);
    }

    /// An API's name as a label.
    #[cfg(feature = "metrics")]
    fn api_label(api: ApiKey) -> &'static str {
        api.name().unwrap_or("unknown")
    }

    /// What was published last, to emit differences.
    #[derive(Debug, Default)]
    pub(crate) struct Publisher {
        #[cfg(feature = "metrics")]
        last: Counters,
        #[cfg(feature = "metrics")]
        buffered: u64,
        #[cfg(feature = "metrics")]
        lags: std::collections::HashMap<crate::topic_partition::TopicPartition, i64>,
    }

    impl Publisher {
        /// Emits what changed since the last call: counter increments, gauge moves, the
        /// producer's buffer and the lag of every assigned partition (a partition no longer
        /// assigned drops to 0).
        // Long by design: one independent counter or gauge per figure, in order (a list).
        #[cfg(feature = "metrics")]
        pub(crate) fn publish(
            &mut self,
            now: &Counters,
            buffered: usize,
            lags: impl Iterator<Item = (crate::topic_partition::TopicPartition, i64)>,
        ) {
            use metrics::{counter, gauge};
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let last = &self.last;
            if now.requests != last.requests || now.request_errors != last.request_errors {
                for key in ApiKey::ALL {
                    let (a, b) = (now.api(key), last.api(key));
                    if a.requests > b.requests {
                        counter!("stellflow.client.requests", "api" => api_label(key))
                            .increment(a.requests - b.requests);
                    }
                    if a.errors > b.errors {
                        counter!("stellflow.client.request.errors", "api" => api_label(key))
                            .increment(a.errors - b.errors);
                    }
                }
            }
            let moved = |name: &'static str, new: u64, old: u64| {
                if new > old {
                    gauge!(name).increment((new - old) as f64);
                } else if old > new {
                    gauge!(name).decrement((old - new) as f64);
                }
            };
            moved(
                "stellflow.client.requests.inflight",
                now.requests_in_flight,
                last.requests_in_flight,
            );
            moved(
                "stellflow.client.connections",
                now.connections,
                last.connections,
            );
            let buffered = buffered as u64;
            moved("stellflow.producer.buffer.bytes", buffered, self.buffered);
            self.buffered = buffered;
            for (name, new, old) in [
                (
                    "stellflow.producer.records",
                    now.producer_records,
                    last.producer_records,
                ),
                (
                    "stellflow.producer.record.errors",
                    now.producer_record_errors,
                    last.producer_record_errors,
                ),
                (
                    "stellflow.producer.retries",
                    now.producer_retries,
                    last.producer_retries,
                ),
                (
                    "stellflow.consumer.records",
                    now.consumer_records,
                    last.consumer_records,
                ),
                (
                    "stellflow.consumer.offset.commits",
                    now.offset_commits,
                    last.offset_commits,
                ),
                (
                    "stellflow.consumer.group.operations",
                    now.group_operations,
                    last.group_operations,
                ),
            ] {
                if new > old {
                    counter!(name).increment(d(new, old));
                }
            }
            const TOPIC: [&str; 4] = [
                "stellflow.producer.topic.records",
                "stellflow.producer.topic.bytes",
                "stellflow.consumer.topic.records",
                "stellflow.consumer.topic.bytes",
            ];
            for (topic, figures) in &now.topics {
                let before = last.topics.get(topic).copied().unwrap_or_default();
                for ((name, new), old) in TOPIC.iter().zip(figures).zip(before) {
                    if *new > old {
                        counter!(*name, "topic" => topic.to_string()).increment(new - old);
                    }
                }
            }
            self.last = now.clone();
            let mut seen = std::collections::HashMap::with_capacity(self.lags.len());
            for (tp, lag) in lags {
                if self.lags.get(&tp) != Some(&lag) {
                    gauge!("stellflow.consumer.lag", "topic" => tp.topic.to_string(),
                        "partition" => tp.partition.to_string())
                    .set(lag as f64);
                }
                seen.insert(tp, lag);
            }
            for tp in self.lags.keys().filter(|tp| !seen.contains_key(*tp)) {
                gauge!("stellflow.consumer.lag", "topic" => tp.topic.to_string(),
                    "partition" => tp.partition.to_string())
                .set(0.0);
            }
            self.lags = seen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets() {
        let mut h = DurationHistogram::default();
        h.record(Duration::from_micros(50));
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(60));
        assert_eq!(h.buckets[0], 1);
        assert_eq!(h.buckets[5], 1);
        assert_eq!(h.buckets[12], 1);
        assert_eq!(h.count, 3);
        assert!(h.mean().unwrap() > Duration::from_secs(19));
    }

    #[test]
    fn per_api_counts() {
        let mut c = Counters::default();
        if let Some(a) = c.api_mut(ApiKey::HEALTH_CHECK) {
            a.requests += 2;
        }
        assert_eq!(c.api(ApiKey::HEALTH_CHECK).requests, 2);
        assert_eq!(c.api(ApiKey(77)), ApiCounters::default());
        assert!(c.api_mut(ApiKey(77)).is_none());
    }
}
