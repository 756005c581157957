//! Deterministic test knobs: fault injection, response delays and reordering.
//!
//! Every random decision uses the cluster's seeded generator, so a seed replays exactly.

use std::time::Duration;
use stellflow_proto::messages::*;
use stellflow_proto::{ApiKey, ErrorCode};

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Do not execute; answer a 12-byte header-only response with this code.
    HeaderOnly(ErrorCode),
    /// Do not execute; answer every partition of a Produce, Fetch or ListOffsets request with
    /// this code (other APIs fall back to [`Fault::HeaderOnly`]).
    PartitionError(ErrorCode),
    /// Do not execute; close the connection without a response.
    CloseConnection,
    /// Execute, but never send the response.
    DropResponse,
}

/// A fault rule: which requests it matches, what it does, how often.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// Only requests to this broker (`None` = any broker).
    pub broker: Option<i32>,
    /// Only this API (`None` = any API).
    pub api_key: Option<ApiKey>,
    /// What happens.
    pub fault: Fault,
    /// Probability that a matching request is hit (1.0 = always).
    pub probability: f64,
    /// How many more requests it may hit (`None` = unlimited). The rule is removed at 0.
    pub remaining: Option<u32>,
}

impl FaultRule {
    /// A rule hitting the next `count` requests of `api_key` on any broker.
    pub fn next(api_key: ApiKey, count: u32, fault: Fault) -> Self {
        FaultRule {
            broker: None,
            api_key: Some(api_key),
            fault,
            probability: 1.0,
            remaining: Some(count),
        }
    }

    /// A rule hitting each request of `api_key` with probability `p`, forever.
    pub fn random(api_key: ApiKey, p: f64, fault: Fault) -> Self {
        FaultRule {
            broker: None,
            api_key: Some(api_key),
            fault,
            probability: p,
            remaining: None,
        }
    }

    /// Restricts the rule to one broker.
    pub fn on_broker(mut self, broker: i32) -> Self {
        self.broker = Some(broker);
        self
    }

    fn matches(&self, broker: i32, key: ApiKey) -> bool {
        self.broker.is_none_or(|b| b == broker) && self.api_key.is_none_or(|k| k == key)
    }
}

/// A response delay for matching requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayRule {
    /// Only requests to this broker (`None` = any broker).
    pub broker: Option<i32>,
    /// Only this API (`None` = any API).
    pub api_key: Option<ApiKey>,
    /// How long the response is held back after the request was executed.
    pub delay: Duration,
}

/// All knobs of a cluster.
#[derive(Debug, Clone, Default)]
pub struct Knobs {
    /// Active fault rules, first match wins.
    pub faults: Vec<FaultRule>,
    /// Delay rules; the longest matching delay applies.
    pub delays: Vec<DelayRule>,
    /// Probability that a response is queued before the previous still-unsent response of
    /// the same connection (the real server answers in completion order).
    pub reorder_responses: f64,
    /// Probability that two requests decoded from one input on one connection execute in
    /// swapped order (the real server runs two handler threads).
    pub reorder_execution: f64,
    /// How long an idempotent batch's sequence stays unrecorded after an append that needs
    /// no followers (zero: recorded with the append). The real server checks a sequence, appends (with a
    /// flush) and records it with nothing held across the three, so a copy checked in between
    /// is appended too; under load that took over 100 ms. The answer waits for the record.
    pub record_lag: Duration,
}

impl Knobs {
    /// The fault to apply to a request, consuming one use of the rule (`rng_hit` decides a
    /// probabilistic rule).
    pub fn take_fault(
        &mut self,
        broker: i32,
        key: ApiKey,
        mut rng_hit: impl FnMut(f64) -> bool,
    ) -> Option<Fault> {
        let idx = self
            .faults
            .iter()
            .position(|r| r.matches(broker, key) && r.remaining != Some(0))?;
        let rule = self.faults.get_mut(idx)?;
        if !rng_hit(rule.probability) {
            return None;
        }
        let fault = rule.fault.clone();
        if let Some(n) = rule.remaining.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.faults.remove(idx);
            }
        }
        Some(fault)
    }

    /// The delay for a response.
    pub fn delay(&self, broker: i32, key: ApiKey) -> Duration {
        self.delays
            .iter()
            .filter(|d| d.broker.is_none_or(|b| b == broker) && d.api_key.is_none_or(|k| k == key))
            .map(|d| d.delay)
            .max()
            .unwrap_or_default()
    }
}

/// A response answering every partition of `body` with `code` (Produce, Fetch, ListOffsets),
/// or `None` for other APIs.
pub fn partition_error_body(body: &RequestBody, code: ErrorCode) -> Option<ResponseBody> {
    match body {
        RequestBody::Produce(r) => Some(ResponseBody::Produce(ProduceResponse {
            responses: r
                .topic_data
                .iter()
                .map(|t| ProduceTopicResponse {
                    topic: t.topic.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| ProducePartitionResponse {
                            partition: p.partition,
                            error_code: code,
                            base_offset: -1,
                            current_leader_epoch: 0,
                            log_append_time_ms: -1,
                            log_start_offset: 0,
                        })
                        .collect(),
                })
                .collect(),
        })),
        RequestBody::Fetch(r) => Some(ResponseBody::Fetch(FetchResponse {
            session_id: r.session_id,
            responses: r
                .topic_partitions
                .iter()
                .map(|t| FetchTopicResponse {
                    topic: t.topic.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| FetchPartitionResponse {
                            partition: p.partition,
                            error_code: code,
                            high_watermark: 0,
                            log_start_offset: 0,
                            last_stable_offset: 0,
                            aborted_transactions: Vec::new(),
                            records: Some(bytes::Bytes::new()),
                        })
                        .collect(),
                })
                .collect(),
        })),
        RequestBody::ListOffsets(r) => Some(ResponseBody::ListOffsets(ListOffsetsResponse {
            topics: r
                .topics
                .iter()
                .map(|t| ListOffsetsTopicResponse {
                    topic: t.topic.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| ListOffsetsPartitionResponse {
                            partition: p.partition,
                            error_code: code,
                            leader_epoch: 0,
                            timestamp: 0,
                            offset: 0,
                            offsets: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_rules_expire() {
        let mut k = Knobs::default();
        k.faults
            .push(FaultRule::next(ApiKey::PRODUCE, 2, Fault::CloseConnection));
        assert_eq!(k.take_fault(1, ApiKey::FETCH, |_| true), None);
        assert!(k.take_fault(1, ApiKey::PRODUCE, |_| true).is_some());
        assert!(k.take_fault(1, ApiKey::PRODUCE, |_| true).is_some());
        assert_eq!(k.take_fault(1, ApiKey::PRODUCE, |_| true), None);
        assert!(k.faults.is_empty());
    }

    #[test]
    fn broker_filter_and_delay() {
        let mut k = Knobs::default();
        k.faults
            .push(FaultRule::random(ApiKey::FETCH, 1.0, Fault::DropResponse).on_broker(2));
        assert_eq!(k.take_fault(1, ApiKey::FETCH, |_| true), None);
        assert_eq!(
            k.take_fault(2, ApiKey::FETCH, |_| true),
            Some(Fault::DropResponse)
        );
        k.delays.push(DelayRule {
            broker: None,
            api_key: Some(ApiKey::FETCH),
            delay: Duration::from_millis(5),
        });
        assert_eq!(k.delay(1, ApiKey::FETCH), Duration::from_millis(5));
        assert_eq!(k.delay(1, ApiKey::PRODUCE), Duration::ZERO);
    }
}
