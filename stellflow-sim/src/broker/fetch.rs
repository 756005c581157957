//! Fetch and ListOffsets (PROTOCOL.md §3.4, §3.5, §4.7).

use super::{Broker, Ctx, Reply, ok};
use crate::metadata::TopicName;
use bytes::{BufMut, BytesMut};
use stellflow_proto::ErrorCode;
use stellflow_proto::messages::*;

fn empty_fetch(partition: i32, code: ErrorCode) -> FetchPartitionResponse {
    FetchPartitionResponse {
        partition,
        error_code: code,
        high_watermark: 0,
        log_start_offset: 0,
        last_stable_offset: 0,
        aborted_transactions: Vec::new(),
        records: Some(bytes::Bytes::new()),
    }
}

/// Gives each entry the records the real server's encoder gives it (PROTOCOL.md §3.4,
/// `ResponseEncoder.removeFirstMatching`): every entry of a (topic, partition) takes the first
/// not-yet-used region that an entry of the same partition read, in request order, and an
/// entry that read nothing leaves no region. So an empty entry before a non-empty one of the
/// same partition takes that entry's bytes, and every later entry shifts by one: offsets
/// `[0,1,2,3,1,-1]` over three blobs answer `[b0,b1,b2,b1,b0,∅]`. Headers (error, watermarks)
/// stay each entry's own.
fn hand_out_regions(responses: &mut [FetchTopicResponse]) {
    type Key = (Option<String>, i32);
    let mut regions: Vec<(Key, std::collections::VecDeque<bytes::Bytes>)> = Vec::new();
    for t in responses.iter() {
        for p in &t.partitions {
            let key = (t.topic.as_ref().map(|s| s.as_str().to_owned()), p.partition);
            let read = p.records.clone().filter(|b| !b.is_empty());
            match regions.iter_mut().find(|(k, _)| *k == key) {
                Some((_, q)) => q.extend(read),
                None => regions.push((key, read.into_iter().collect())),
            }
        }
    }
    for t in responses.iter_mut() {
        let topic = t.topic.as_ref().map(|s| s.as_str().to_owned());
        for p in &mut t.partitions {
            let next = regions
                .iter_mut()
                .find(|((name, part), _)| *name == topic && *part == p.partition)
                .and_then(|(_, q)| q.pop_front());
            p.records = Some(next.unwrap_or_default());
        }
    }
}

impl Broker {
    fn fetch_partition(
        &mut self,
        replica_id: i32,
        topic: &TopicName,
        p: &FetchPartition,
    ) -> FetchPartitionResponse {
        let key = (topic.clone(), p.partition);
        let me = self.id();
        let meta = self.metadata.get(topic, p.partition).cloned();
        if meta.as_ref().is_some_and(|m| m.leader != me) {
            return empty_fetch(p.partition, ErrorCode::NOT_LEADER_OR_FOLLOWER);
        }
        let isr = meta.map(|m| m.isr).unwrap_or_default();
        let Some(log) = self.logs.get_mut(&key) else {
            return empty_fetch(p.partition, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        };
        let records = if replica_id >= 0 {
            let entries = log.read(p.fetch_offset, p.partition_max_bytes);
            let next = entries
                .last()
                .map_or(p.fetch_offset, |e| e.offset.saturating_add(1));
            let mut buf = BytesMut::new();
            buf.put_i32(i32::try_from(entries.len()).unwrap_or(i32::MAX));
            for e in &entries {
                buf.put_i64(e.offset);
                buf.put_i64(e.append_time_ms);
                buf.put_i32(e.leader_epoch);
                buf.put_i32(i32::try_from(e.blob.len()).unwrap_or(i32::MAX));
                buf.put_slice(&e.blob);
            }
            log.record_follower_progress(replica_id, next);
            buf.freeze()
        } else {
            let entries = log.read(p.fetch_offset, p.partition_max_bytes);
            let total: usize = entries.iter().map(|e| e.blob.len()).sum();
            if let [only] = entries.as_slice() {
                only.blob.clone()
            } else {
                let mut buf = BytesMut::with_capacity(total);
                for e in &entries {
                    buf.put_slice(&e.blob);
                }
                buf.freeze()
            }
        };
        let hw = log.high_watermark(me, &isr);
        FetchPartitionResponse {
            partition: p.partition,
            error_code: ErrorCode::NONE,
            high_watermark: hw,
            log_start_offset: log.log_start(),
            last_stable_offset: hw,
            aborted_transactions: Vec::new(),
            records: Some(records),
        }
    }

    pub(super) fn fetch(&mut self, r: &FetchRequest) -> Reply {
        let mut responses = Vec::with_capacity(r.topic_partitions.len());
        for t in &r.topic_partitions {
            let topic: TopicName = t.topic.as_ref().map(|s| s.as_str().to_owned());
            let partitions = t
                .partitions
                .iter()
                .map(|p| self.fetch_partition(r.replica_id, &topic, p))
                .collect();
            responses.push(FetchTopicResponse {
                topic: t.topic.clone(),
                partitions,
            });
        }
        if r.replica_id < 0 {
            hand_out_regions(&mut responses);
        }
        ok(ResponseBody::Fetch(FetchResponse {
            session_id: r.session_id,
            responses,
        }))
    }

    fn list_partition(
        &self,
        now_ms: i64,
        topic: &TopicName,
        p: &ListOffsetsPartition,
    ) -> ListOffsetsPartitionResponse {
        let out = |code: ErrorCode, epoch: i32, ts: i64, offset: i64, offsets: Vec<i64>| {
            ListOffsetsPartitionResponse {
                partition: p.partition,
                error_code: code,
                leader_epoch: epoch,
                timestamp: ts,
                offset,
                offsets,
            }
        };
        let key = (topic.clone(), p.partition);
        let meta = self.metadata.get(topic, p.partition);
        let log = self.logs.get(&key);
        if meta.is_none() && log.is_none() {
            return out(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, 0, 0, 0, Vec::new());
        }
        let epoch = meta
            .map(|m| m.leader_epoch)
            .or(log.map(|l| l.leader_epoch()))
            .unwrap_or(0);
        if p.current_leader_epoch >= 0 && p.current_leader_epoch != epoch {
            return out(ErrorCode::NOT_LEADER_OR_FOLLOWER, epoch, 0, 0, Vec::new());
        }
        if p.max_num_offsets <= 0 {
            return out(ErrorCode::INVALID_REQUEST, epoch, 0, 0, Vec::new());
        }
        let (start, end) = log.map_or((0, 0), |l| (l.log_start(), l.log_end()));
        let run = |from: i64| -> Vec<i64> {
            let n = i64::from(p.max_num_offsets);
            (from..end.min(from.saturating_add(n))).collect()
        };
        match p.timestamp {
            -1 => out(ErrorCode::NONE, epoch, now_ms, end, vec![end]),
            -2 => out(ErrorCode::NONE, epoch, 0, start, run(start)),
            ts => match log.and_then(|l| l.find_by_time(ts)) {
                Some(e) => out(
                    ErrorCode::NONE,
                    epoch,
                    e.append_time_ms,
                    e.offset,
                    run(e.offset),
                ),
                None => out(ErrorCode::OFFSET_OUT_OF_RANGE, epoch, ts, end, Vec::new()),
            },
        }
    }

    pub(super) fn list_offsets(&self, ctx: &mut Ctx<'_>, r: &ListOffsetsRequest) -> Reply {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let topic: TopicName = t.topic.as_ref().map(|s| s.as_str().to_owned());
                ListOffsetsTopicResponse {
                    topic: t.topic.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| self.list_partition(ctx.now_ms, &topic, p))
                        .collect(),
                }
            })
            .collect();
        ok(ResponseBody::ListOffsets(ListOffsetsResponse { topics }))
    }
}
