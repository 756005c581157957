//! The coordinator's answers to the group protocol: FindCoordinator (its address), JoinGroup
//! (the member id and generation), SyncGroup (the server's assignment, or the member
//! registry when it assigns nothing) and Heartbeat, each in its own step; commits' answers
//! go to `commit.rs`. What is sent when, and why, is `group.rs`'s.

use super::group::Rejoin;
use super::member::Member;
use super::{Consumer, ConsumerEvent, Op, TopicPartition, emit};
use crate::address::BrokerAddress;
use crate::error::RequestError;
use crate::net::Reply;
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Instant;
use stellflow_proto::messages::{
    FindCoordinatorResponse, HeartbeatResponse, JoinGroupResponse, SyncGroupResponse,
};
use stellflow_proto::{ErrorCode, Reader, Wire};

impl Consumer {
    /// A group or commit request answered: each request kind has its own step.
    pub(crate) fn on_group(
        &mut self,
        now: Instant,
        op: Op,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let transport = result.as_ref().err().cloned();
        let body = result.ok().and_then(|r| r.body);
        match op {
            Op::FindCoordinator => self.on_find_coordinator(now, body),
            Op::Join => self.on_join(now, seq, body, transport, sh),
            Op::Sync => self.on_sync(now, seq, body, transport, sh),
            Op::Heartbeat => self.on_heartbeat(now, seq, body, transport, sh),
            Op::Commit(_) => self.on_commit(now, seq, body, transport, sh),
            _ => {}
        }
    }

    /// FindCoordinator answered: the coordinator's address (host and port, never the node
    /// id), else a lookup again after the backoff.
    fn on_find_coordinator(&mut self, now: Instant, body: Option<Bytes>) {
        self.group.find_in_flight = false;
        let resp = body.and_then(|b| FindCoordinatorResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let host = r.host.map(|h| h.to_string()).unwrap_or_default();
                match u16::try_from(r.port) {
                    Ok(port) if !host.is_empty() && port != 0 => {
                        self.group.coordinator = Some(BrokerAddress::new(host, port));
                        self.group.backoff.reset();
                    }
                    _ => self.group.lost_coordinator(now),
                }
            }
            _ => self.group.lost_coordinator(now),
        }
    }

    /// JoinGroup answered: the member id and generation, then a SyncGroup; else a rejoin.
    fn on_join(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.join_seq != Some(seq) {
            return;
        }
        self.group.join_seq = None;
        let resp = body.and_then(|b| JoinGroupResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let g = &mut self.group;
                g.member_id = r.member_id.map(|m| m.to_string());
                g.generation = r.generation_id;
                let leader = r.leader_id.map(|l| l.to_string());
                g.is_leader = leader.is_some() && leader == g.member_id;
                // Heartbeats keep the session alive while the SyncGroup is out.
                g.last_ok = None;
                g.next_heartbeat = Some(now + self.config.heartbeat_interval);
                g.sync_attempts = 0;
                g.resync = false;
                if !self.send_sync(now, sh) {
                    self.rejoin(now, "coordinator lost during the join", Rejoin::Failed, sh);
                }
            }
            Some(r) => {
                let reason = format!("JoinGroup answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::answered(r.error_code), sh);
            }
            None => {
                if transport.is_some() {
                    self.group.lost_coordinator(now);
                }
                self.rejoin(now, "JoinGroup failed", Rejoin::Failed, sh);
            }
        }
    }

    /// SyncGroup answered: the member is stable (with the server's assignment, or the
    /// registry's); a generation that moved on keeps the registry going; a lost answer is
    /// asked again while the session can be alive; anything else rejoins.
    fn on_sync(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.sync_seq != Some(seq) {
            return;
        }
        self.group.sync_seq = None;
        let resp = body.and_then(|b| SyncGroupResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => self.synced(now, &r, sh),
            // Another member joined between this member's JoinGroup and SyncGroup: the
            // generation moved on, which on this server says nothing about the
            // assignment (there is none). Joining again would fence that member in
            // turn; the registry needs no generation, so it goes on from here.
            Some(r) if r.error_code == ErrorCode(19) && self.group.member_id.is_some() => {
                let g = &mut self.group;
                g.retry_backoff.reset();
                g.member = Member::Stable;
                g.server_assignment = false;
                g.stable_since = Some(now);
                let member_id = g.member_id.clone().unwrap_or_default();
                emit(
                    sh,
                    ConsumerEvent::GroupJoined {
                        generation: g.generation,
                        member_id,
                        leader: g.is_leader,
                        server_assignment: false,
                    },
                );
                self.group.reg.start();
            }
            Some(r) => {
                let reason = format!("SyncGroup answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::answered(r.error_code), sh);
            }
            // A timed-out SyncGroup does not mean the generation is gone: only its
            // answer may have been lost. SyncGroup is a pure check on this server
            // (PROTOCOL.md §3.10), so ask again with the same generation and member id
            // while the session (opened by the JoinGroup, refreshed by heartbeats)
            // can still be alive, up to `MAX_SYNC_ATTEMPTS` times; a JoinGroup
            // instead would bump the generation and fence every other member
            // (§3.11). A 19 or 1 in the answer then rejoins as usual. A SyncGroup
            // lost with its connection (or timed out while the coordinator is being
            // looked up again) is asked again once the coordinator is known.
            None if transport.is_some() && self.sync_may_retry(now) => {
                let timeout = matches!(transport, Some(RequestError::Timeout { .. }));
                if !timeout {
                    self.group.lost_coordinator(now);
                }
                if !(timeout && self.send_sync(now, sh)) {
                    self.group.resync = true;
                }
            }
            None => {
                if transport.is_some() {
                    self.group.lost_coordinator(now);
                }
                self.rejoin(now, "SyncGroup failed", Rejoin::Failed, sh);
            }
        }
    }

    /// A successful SyncGroup: the member is stable and says so with
    /// [`ConsumerEvent::GroupJoined`]; a non-empty assignment from the server is applied, an
    /// empty one (always, on today's server) starts the member registry.
    fn synced(&mut self, now: Instant, r: &SyncGroupResponse, sh: &mut Shared) {
        let server: Vec<TopicPartition> = r
            .assignments
            .iter()
            .filter_map(|a| {
                a.topic
                    .as_ref()
                    .map(|t| TopicPartition::new(&**t, a.partition))
            })
            .collect();
        self.group.server_assignment = !server.is_empty();
        let registry = server.is_empty();
        let g = &mut self.group;
        g.retry_backoff.reset();
        g.member = Member::Stable;
        g.last_ok = Some(now);
        g.stable_since = Some(now);
        g.next_heartbeat = Some(now + self.config.heartbeat_interval);
        let member_id = g.member_id.clone().unwrap_or_default();
        emit(
            sh,
            ConsumerEvent::GroupJoined {
                generation: g.generation,
                member_id,
                leader: g.is_leader,
                server_assignment: g.server_assignment,
            },
        );
        if registry {
            // Today's server: the members share the partitions through the
            // registry in the group's offset store (`membership.rs`).
            self.group.reg.start();
        } else {
            self.apply_assignment(now, server, sh);
        }
    }

    /// Heartbeat answered: the session is alive; a fence (19) or an unknown member (1)
    /// rejoins; a lost answer or connection only waits for the next heartbeat.
    fn on_heartbeat(
        &mut self,
        now: Instant,
        seq: u64,
        body: Option<Bytes>,
        transport: Option<RequestError>,
        sh: &mut Shared,
    ) {
        if self.group.hb_seq != Some(seq) {
            return;
        }
        self.group.hb_seq = None;
        let resp = body.and_then(|b| HeartbeatResponse::decode(&mut Reader::new(b)).ok());
        match resp {
            Some(r) if r.error_code == ErrorCode::NONE => {
                let g = &mut self.group;
                g.last_ok = Some(now);
                if g.stable_since
                    .is_some_and(|t| t + self.config.thrash_window <= now)
                {
                    g.backoff.reset();
                }
            }
            Some(r) if r.error_code == ErrorCode(19) => {
                self.rejoin(
                    now,
                    "fenced (19): the generation moved",
                    Rejoin::Membership,
                    sh,
                );
            }
            Some(r) if r.error_code == ErrorCode(1) => {
                self.rejoin(
                    now,
                    "unknown member (1): the session expired",
                    Rejoin::UnknownMember,
                    sh,
                );
            }
            Some(r) => {
                let reason = format!("Heartbeat answered {:?}", r.error_code);
                self.rejoin(now, &reason, Rejoin::Membership, sh);
            }
            // A timed-out heartbeat is not a lost session: only its answer may have
            // been lost (the broker may have counted it). The next heartbeat is due at
            // once; the session-timeout check rejoins when none succeeds in time.
            None if matches!(transport, Some(RequestError::Timeout { .. })) => {}
            // The connection to the coordinator was lost (or could not be made): the
            // session lives on the server, not in the connection. Look the
            // coordinator up again and heartbeat the same generation at once; the
            // session-timeout check rejoins when none succeeds in time, and a
            // coordinator that lost the group (a restart) answers 1.
            None if transport.is_some() => {
                self.group.lost_coordinator(now);
                self.group.next_heartbeat = Some(now);
            }
            None => {
                self.rejoin(now, "Heartbeat answer undecodable", Rejoin::Failed, sh);
            }
        }
    }
}
