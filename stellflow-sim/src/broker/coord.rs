//! Offsets, groups, FindCoordinator, InitProducerId and transactions
//! (PROTOCOL.md §3.6–§3.13).

use super::{Broker, Ctx, Reply, ok};
use stellflow_proto::ErrorCode;
use stellflow_proto::messages::*;

fn s(x: &Option<stellflow_proto::StrBytes>) -> Option<&str> {
    x.as_ref().map(|v| v.as_str())
}

impl Broker {
    pub(super) fn offset_commit(&mut self, r: &OffsetCommitRequest) -> Reply {
        let group = s(&r.group_id);
        let topics = r
            .topics
            .iter()
            .map(|t| OffsetCommitTopicResponse {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        self.offsets.commit(
                            group,
                            s(&t.topic),
                            p.partition,
                            p.offset,
                            s(&p.metadata),
                        );
                        OffsetCommitPartitionResponse {
                            partition: p.partition,
                            error_code: ErrorCode::NONE,
                        }
                    })
                    .collect(),
            })
            .collect();
        ok(ResponseBody::OffsetCommit(OffsetCommitResponse { topics }))
    }

    pub(super) fn offset_fetch(&self, r: &OffsetFetchRequest) -> Reply {
        let group = s(&r.group_id);
        let topics = r
            .topics
            .iter()
            .map(|t| OffsetFetchTopicResponse {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let c = self.offsets.fetch(group, s(&t.topic), p.partition);
                        OffsetFetchPartitionResponse {
                            partition: p.partition,
                            offset: c.offset,
                            metadata: c.metadata.map(Into::into),
                            error_code: ErrorCode::NONE,
                        }
                    })
                    .collect(),
            })
            .collect();
        ok(ResponseBody::OffsetFetch(OffsetFetchResponse { topics }))
    }

    pub(super) fn find_coordinator(&self) -> Reply {
        ok(ResponseBody::FindCoordinator(FindCoordinatorResponse {
            error_code: ErrorCode::NONE,
            node_id: 0,
            host: Some(self.config.host.as_str().into()),
            port: self.config.port,
        }))
    }

    pub(super) fn join_group(&mut self, ctx: &mut Ctx<'_>, r: &JoinGroupRequest) -> Reply {
        let out = self.groups.join(
            ctx.now,
            ctx.rng,
            s(&r.group_id),
            s(&r.member_id),
            r.session_timeout_ms,
        );
        ok(ResponseBody::JoinGroup(JoinGroupResponse {
            error_code: ErrorCode::NONE,
            generation_id: out.generation_id,
            member_id: Some(out.member_id.into()),
            leader_id: Some(out.leader_id.into()),
        }))
    }

    pub(super) fn sync_group(&mut self, ctx: &mut Ctx<'_>, r: &SyncGroupRequest) -> Reply {
        let code =
            ErrorCode(
                self.groups
                    .sync(ctx.now, s(&r.group_id), r.generation_id, s(&r.member_id)),
            );
        Reply::Body(
            code,
            ResponseBody::SyncGroup(SyncGroupResponse {
                error_code: code,
                assignments: Vec::new(),
            }),
        )
    }

    pub(super) fn heartbeat(&mut self, ctx: &mut Ctx<'_>, r: &HeartbeatRequest) -> Reply {
        let code = ErrorCode(self.groups.heartbeat(
            ctx.now,
            s(&r.group_id),
            r.generation_id,
            s(&r.member_id),
        ));
        Reply::Body(
            code,
            ResponseBody::Heartbeat(HeartbeatResponse { error_code: code }),
        )
    }

    pub(super) fn init_producer_id(
        &mut self,
        client_id: Option<&str>,
        r: &InitProducerIdRequest,
    ) -> Reply {
        let id = self.pids.id_for(s(&r.transactional_id), client_id);
        ok(ResponseBody::InitProducerId(InitProducerIdResponse {
            error_code: ErrorCode::NONE,
            producer_id: id,
            producer_epoch: 0,
        }))
    }

    fn txn_reply(code: i16, pid: i64, epoch: i16, state: &'static str, end: bool) -> Reply {
        let body = TransactionResponse {
            error_code: ErrorCode(code),
            producer_id: pid,
            producer_epoch: epoch,
            transaction_state: Some(state.into()),
        };
        let body = if end {
            ResponseBody::EndTransaction(body)
        } else {
            ResponseBody::BeginTransaction(body)
        };
        Reply::Body(ErrorCode(code), body)
    }

    pub(super) fn begin_transaction(&mut self, r: &BeginTransactionRequest) -> Reply {
        let o = self
            .producers
            .begin(s(&r.transactional_id), r.producer_id, r.producer_epoch);
        Self::txn_reply(
            o.error_code,
            r.producer_id,
            r.producer_epoch,
            o.state,
            false,
        )
    }

    pub(super) fn end_transaction(&mut self, r: &EndTransactionRequest) -> Reply {
        let o = self
            .producers
            .end(r.producer_id, r.producer_epoch, r.commit);
        Self::txn_reply(o.error_code, r.producer_id, r.producer_epoch, o.state, true)
    }
}
