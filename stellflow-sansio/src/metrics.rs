//! Counters for the metrics of DESIGN §6, readable without any metrics dependency.
//!
//! The core only counts; runtime crates read [`Counters`] (from [`crate::Client::counters`]) and
//! bridge them to a metrics facade. Labels stay low-cardinality: per API key at most.

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
pub const DURATION_BUCKETS_MICROS: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 500_000, 2_000_000, 10_000_000,
];

/// A fixed-bucket histogram of request durations (`stellflow.client.request.duration`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// Counts per bucket of [`DURATION_BUCKETS_MICROS`], plus the overflow bucket last.
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
    /// Producer records that failed (any [`crate::producer::DeliveryError`] after sending).
    pub producer_record_errors: u64,
    /// Batches (blobs) the producer sent, retries included.
    pub producer_batches: u64,
    /// Batch retries.
    pub producer_retries: u64,
    /// Idempotent-producer epoch bumps (recoveries from lost broker state).
    pub producer_epoch_bumps: u64,
    /// `stellflow.consumer.records` (maintained by the consumer).
    pub consumer_records: u64,
    /// `stellflow.consumer.offset.commits` (maintained by the consumer).
    pub offset_commits: u64,
    /// `stellflow.consumer.group.operations` (maintained by the consumer).
    pub group_operations: u64,
    per_api: [ApiCounters; 20],
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
