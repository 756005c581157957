//! Produce (PROTOCOL.md §3.3): per-partition checks in the server's order, auto-create of the
//! single partition written to, one offset per blob, and the `acks = -1` wait.
//!
//! Partitions are processed in request order. When an `acks = -1` append finds the high
//! watermark behind and `timeoutMs > 0`, the request suspends as a [`ProduceJob`] (the server
//! blocks a handler thread the same way) and later partitions are not processed until it
//! resumes: on success when the high watermark catches up, or with `7` and the real offset at
//! the deadline.

use super::{Broker, Ctx, Reply, ok};
use crate::metadata::{PartitionMeta, TopicName};
use crate::producer_ids::producer_key;
use crate::producer_state::SequenceCheck;
use crate::srfb::{self, BlobView, SrfbInfo};
use bytes::Bytes;
use std::time::{Duration, Instant};
use stellflow_proto::ErrorCode;
use stellflow_proto::messages::*;

#[derive(Debug, Clone)]
struct Wait {
    key: (TopicName, i32),
    offset: i64,
    deadline: Instant,
    idempotent: Option<SrfbInfo>,
    /// An append whose sequence is recorded (and answered) at the deadline
    /// (`Knobs::record_lag`), not an `acks = -1` wait for the followers.
    record_only: bool,
}

/// A Produce request in progress (possibly suspended on an `acks = -1` wait).
#[derive(Debug, Clone)]
pub struct ProduceJob {
    /// Correlation id of the request.
    pub correlation_id: i32,
    client_id: Option<String>,
    request: ProduceRequest,
    topic_index: usize,
    partition_index: usize,
    responses: Vec<ProduceTopicResponse>,
    started: bool,
    wait: Option<Wait>,
}

impl ProduceJob {
    /// A job for a decoded request.
    pub fn new(correlation_id: i32, client_id: Option<&str>, request: ProduceRequest) -> Self {
        ProduceJob {
            correlation_id,
            client_id: client_id.map(str::to_owned),
            request,
            topic_index: 0,
            partition_index: 0,
            responses: Vec::new(),
            started: false,
            wait: None,
        }
    }

    /// How far the job got: the topic and partition index it is at (or waits on).
    pub(crate) fn position(&self) -> (usize, usize) {
        (self.topic_index, self.partition_index)
    }

    /// When a suspended job times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.wait.as_ref().map(|w| w.deadline)
    }
}

fn result(
    partition: i32,
    code: ErrorCode,
    base_offset: i64,
    epoch: i32,
    log_start: i64,
) -> ProducePartitionResponse {
    ProducePartitionResponse {
        partition,
        error_code: code,
        base_offset,
        current_leader_epoch: epoch,
        log_append_time_ms: -1,
        log_start_offset: log_start,
    }
}

enum Step {
    Done(ProducePartitionResponse),
    Wait(Wait),
    Exception,
}

impl Broker {
    /// Runs (or resumes) a Produce job until it completes or suspends again.
    pub fn resume_produce(&mut self, ctx: &mut Ctx<'_>, job: Box<ProduceJob>) -> Reply {
        self.run_produce(ctx, job)
    }

    pub(super) fn run_produce(&mut self, ctx: &mut Ctx<'_>, mut job: Box<ProduceJob>) -> Reply {
        if !job.started {
            job.started = true;
            let tid = job
                .request
                .transactional_id
                .as_ref()
                .map(|s| s.as_str().to_owned());
            self.pids.id_for(tid.as_deref(), job.client_id.as_deref());
        }
        if let Some(w) = job.wait.take() {
            match self.check_wait(ctx.now, &w) {
                Some(resp) => job_push(&mut job, resp),
                None => {
                    job.wait = Some(w);
                    return Reply::Pending(job);
                }
            }
        }
        while let Some(t) = job.request.topic_data.get(job.topic_index) {
            if job.partition_index == 0 && job.responses.len() == job.topic_index {
                job.responses.push(ProduceTopicResponse {
                    topic: t.topic.clone(),
                    partitions: Vec::with_capacity(t.partitions.len()),
                });
            }
            let Some(p) = t.partitions.get(job.partition_index) else {
                job.topic_index += 1;
                job.partition_index = 0;
                continue;
            };
            let topic: TopicName = t.topic.as_ref().map(|s| s.as_str().to_owned());
            let tid = job
                .request
                .transactional_id
                .as_ref()
                .map(|s| s.as_str().to_owned());
            let key = producer_key(tid.as_deref(), job.client_id.as_deref()).map(str::to_owned);
            let step = self.produce_partition(
                ctx,
                &job.request,
                key.as_deref(),
                topic,
                p.partition,
                p.records.as_ref(),
            );
            match step {
                Step::Done(resp) => job_push(&mut job, resp),
                Step::Exception => return Reply::HeaderOnly(ErrorCode::UNKNOWN_SERVER_ERROR),
                Step::Wait(w) => {
                    job.wait = Some(w);
                    return Reply::Pending(job);
                }
            }
        }
        ok(ResponseBody::Produce(ProduceResponse {
            responses: std::mem::take(&mut job.responses),
        }))
    }

    /// `Some(response)` once the wait is over (success or timeout).
    fn check_wait(&mut self, now: Instant, w: &Wait) -> Option<ProducePartitionResponse> {
        let hw = self.high_watermark(&w.key);
        let (epoch, start) = self
            .logs
            .get(&w.key)
            .map_or((0, 0), |l| (l.leader_epoch(), l.log_start()));
        if w.record_only && now < w.deadline {
            return None;
        }
        if w.record_only || hw.is_none_or(|hw| hw > w.offset) {
            if let Some(info) = &w.idempotent {
                self.producers
                    .record_append(info, w.key.0.as_deref(), w.key.1, w.offset);
            }
            return Some(result(w.key.1, ErrorCode::NONE, w.offset, epoch, start));
        }
        if now >= w.deadline {
            return Some(result(
                w.key.1,
                ErrorCode::BROKER_NOT_AVAILABLE,
                w.offset,
                epoch,
                start,
            ));
        }
        None
    }

    fn produce_partition(
        &mut self,
        ctx: &mut Ctx<'_>,
        req: &ProduceRequest,
        producer_key: Option<&str>,
        topic: TopicName,
        partition: i32,
        records: Option<&Bytes>,
    ) -> Step {
        let blob = match records {
            Some(b) if !b.is_empty() => b,
            _ => return Step::Done(result(partition, ErrorCode::INVALID_RECORD, -1, 0, 0)),
        };
        if !matches!(req.acks, -1..=1) {
            return Step::Done(result(partition, ErrorCode::INVALID_REQUEST, -1, 0, 0));
        }
        let idempotent = match srfb::inspect(blob) {
            Err(_) => return Step::Done(result(partition, ErrorCode::INVALID_RECORD, -1, 0, 0)),
            Ok(BlobView::Srfb(info)) if info.is_idempotent() => {
                match self
                    .producers
                    .check(&info, producer_key, topic.as_deref(), partition)
                {
                    Err(code) => return Step::Done(result(partition, ErrorCode(code), -1, 0, 0)),
                    Ok(SequenceCheck::Duplicate(off)) => {
                        return Step::Done(result(partition, ErrorCode::NONE, off, 0, 0));
                    }
                    Ok(SequenceCheck::Append) => Some(info),
                }
            }
            Ok(_) => None,
        };
        let me = self.id();
        let key = (topic.clone(), partition);
        match self.metadata.get(&topic, partition) {
            None => {
                self.metadata
                    .set(topic.clone(), partition, PartitionMeta::solo(me));
                if topic.as_deref().is_some_and(|t| t.contains('\0')) {
                    // The server registers the metadata, then fails creating the log.
                    return Step::Exception;
                }
            }
            Some(m) if m.leader != me => {
                let epoch = m.leader_epoch;
                let start = self.logs.get(&key).map_or(0, |l| l.log_start());
                return Step::Done(result(
                    partition,
                    ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    -1,
                    epoch,
                    start,
                ));
            }
            Some(_) => {}
        }
        let isr = self
            .metadata
            .get(&topic, partition)
            .map(|m| m.isr.clone())
            .unwrap_or_default();
        let log = self.ensure_log(&key);
        let offset = log.append(Bytes::copy_from_slice(blob), ctx.now_ms);
        let (epoch, start) = (log.leader_epoch(), log.log_start());
        let replicated = log.high_watermark(me, &isr) > offset;
        if (req.acks != -1 || replicated) && idempotent.is_some() && !ctx.record_lag.is_zero() {
            return Step::Wait(Wait {
                key,
                offset,
                deadline: ctx.now + ctx.record_lag,
                idempotent,
                record_only: true,
            });
        }
        if req.acks != -1 || replicated {
            if let Some(info) = &idempotent {
                self.producers
                    .record_append(info, topic.as_deref(), partition, offset);
            }
            return Step::Done(result(partition, ErrorCode::NONE, offset, epoch, start));
        }
        if req.timeout_ms <= 0 {
            return Step::Done(result(
                partition,
                ErrorCode::BROKER_NOT_AVAILABLE,
                offset,
                epoch,
                start,
            ));
        }
        let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
        Step::Wait(Wait {
            key,
            offset,
            deadline: ctx.now + timeout,
            idempotent,
            record_only: false,
        })
    }
}

fn job_push(job: &mut ProduceJob, resp: ProducePartitionResponse) {
    if let Some(t) = job.responses.get_mut(job.topic_index) {
        t.partitions.push(resp);
    }
    job.partition_index += 1;
}
