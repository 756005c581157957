//! The member registry's requests: a member's rounds (read every slot, write its own, read
//! again), the release of its slot on close or on a manual `assign`, and the answers of
//! those requests, which extend the lease and hand a read to `rebalance.rs`. The state they
//! work on is `membership.rs`'s.

use super::membership::{AfterRead, InFlight, Leave, Membership, SlotWrite, Written, lease_margin};
use super::registry::{FreeReason, REGISTRY_TOPIC, Registration, Slot, encode_free};
use super::{Consumer, Op, RevocationId};
use crate::address::BrokerAddress;
use crate::error::RequestError;
use crate::net::{Origin, Reply};
use crate::request::{RequestOptions, Target};
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Instant;
use stellflow_proto::messages::{
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
    OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic, RequestBody,
};
use stellflow_proto::{ErrorCode, Reader, Wire};

impl Consumer {
    /// One membership pass: lease, revocations past their bound, and the next round.
    pub(crate) fn drive_membership(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let due: Vec<RevocationId> = (self.group.reg.revocations.iter())
            .filter(|(_, r)| !r.answered && r.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.proceed_revocation(now, id, sh);
        }
        let m = &self.group.reg;
        if m.in_flight.is_some() || !(m.dirty || m.next_round.is_none_or(|t| t <= now)) {
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Write, sh);
        true
    }

    /// On close: frees this member's slot (its partitions are released at once) before the
    /// consumer reports `Closed`.
    pub(crate) fn drive_leave(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let Leave::Wanted { deadline } = self.group.reg.leave else {
            return false;
        };
        if now >= deadline {
            self.group.reg.leave = Leave::Done;
            self.finish_close(sh);
            return false;
        }
        if self.group.reg.in_flight.is_some() {
            return false;
        }
        if self.group.reg.slot.is_none() {
            self.registry_left(sh);
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Leave, sh);
        true
    }

    /// After a manual `assign` replaced the subscription: frees this member's slot once the
    /// commits of what it gave up are answered (so that the partitions' new owners start
    /// from them), at most `rebalance_timeout` after the `assign`. Afterwards the member is
    /// out of the registry; a later `subscribe` joins again.
    pub(crate) fn drive_part(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        sh: &mut Shared,
    ) -> bool {
        let m = &self.group.reg;
        if m.in_flight.is_some() {
            return false;
        }
        let deadline = m.parting_since.map(|t| t + self.config.rebalance_timeout);
        if m.slot.is_none() || deadline.is_some_and(|d| now >= d) {
            self.registry_left(sh);
            return false;
        }
        if !self.group.pending.is_empty() || !self.group.in_flight.is_empty() {
            return false;
        }
        self.send_registry_read(now, group_id, coordinator, AfterRead::Leave, sh);
        true
    }

    /// A manual `assign` while registered: the member stops taking part (no rounds, no
    /// lease, no claims, no revocations of its own); `drive_part` frees its slot.
    pub(crate) fn part_registry(&mut self, now: Instant) {
        let m = &mut self.group.reg;
        if !m.active {
            return;
        }
        m.parting_since = Some(now);
        m.lease_until = None;
        m.claims.clear();
        m.published.clear();
        m.revocations.clear();
        m.dirty = false;
    }

    /// The slot is freed (or given up): a closing consumer may finish, one that parted
    /// after `assign` is out of the registry and joins again on a later `subscribe`.
    fn registry_left(&mut self, sh: &mut Shared) {
        if self.closing {
            self.group.reg.leave = Leave::Done;
            self.finish_close(sh);
            return;
        }
        let listening = self.group.reg.listening;
        self.group.reg = Membership::new();
        self.group.reg.listening = listening;
        self.group.member = super::member::Member::Idle;
    }

    fn registry_options(&self) -> RequestOptions {
        RequestOptions {
            timeout: Some(super::member::heartbeat_timeout(&self.config)),
            ..RequestOptions::default()
        }
    }

    pub(super) fn send_registry_read(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        after: AfterRead,
        sh: &mut Shared,
    ) {
        let slots = i32::try_from(self.config.max_group_members).unwrap_or(i32::MAX);
        let body = RequestBody::OffsetFetch(OffsetFetchRequest {
            group_id: Some(group_id.into()),
            topics: vec![OffsetFetchTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions: (0..slots)
                    .map(|partition| OffsetFetchPartition { partition })
                    .collect(),
            }],
        });
        let options = self.registry_options();
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            body,
            None,
            Origin::Consumer(Op::RegistryRead.tag()),
            &options,
        );
        sh.net.counters.group_operations += 1;
        self.group.reg.in_flight = Some((seq, InFlight::Read(after)));
    }

    /// This member's registration as the next write publishes it.
    fn registration(&self, counter: i64) -> Registration {
        let m = &self.group.reg;
        Registration {
            member: self.group.member_id().unwrap_or("").replace(' ', "_"),
            counter,
            topics: self.group.subscription.iter().cloned().collect(),
            holds: self.parts.keys().cloned().collect(),
            claims: m.claims.clone(),
            instance: self.instance_part(false),
        }
    }

    pub(super) fn send_registry_write(
        &mut self,
        now: Instant,
        group_id: &str,
        coordinator: &BrokerAddress,
        kind: SlotWrite,
        sh: &mut Shared,
    ) {
        let leave = kind == SlotWrite::Free;
        let park = kind == SlotWrite::Park;
        let counter = self.group.reg.counter + 1;
        let Some(slot) = self.group.reg.slot else {
            // Nothing to free: the close (or the parting) may finish.
            if leave {
                self.registry_left(sh);
            }
            return;
        };
        let member = self.group.member_id().unwrap_or("").replace(' ', "_");
        let mine = if leave {
            encode_free(&member, counter, FreeReason::Left)
        } else if park {
            let mut r = self.registration(counter);
            r.claims.clear();
            r.instance = self.instance_part(true);
            // Closed: nothing is delivered from here on, whatever the write's fate.
            self.set_assignment(&[]);
            r.encode()
        } else {
            self.registration(counter).encode()
        };
        let mut partitions = vec![OffsetCommitPartition {
            partition: slot,
            offset: if leave { -1 } else { counter },
            metadata: Some(mine.as_str().into()),
        }];
        let frees = std::mem::take(&mut self.group.reg.frees);
        partitions.extend(frees.iter().filter(|(s, _)| *s != slot).map(|(s, md)| {
            OffsetCommitPartition {
                partition: *s,
                offset: -1,
                metadata: Some(md.as_str().into()),
            }
        }));
        let body = RequestBody::OffsetCommit(OffsetCommitRequest {
            group_id: Some(group_id.into()),
            topics: vec![OffsetCommitTopic {
                topic: Some(REGISTRY_TOPIC.into()),
                partitions,
            }],
        });
        let options = self.registry_options();
        let seq = sh.net.submit(
            now,
            Target::Address(coordinator.clone()),
            body,
            None,
            Origin::Consumer(Op::RegistryWrite.tag()),
            &options,
        );
        sh.net.counters.group_operations += 1;
        let m = &mut self.group.reg;
        m.dirty = false;
        m.in_flight = Some((
            seq,
            InFlight::Write(Written {
                sent: now,
                counter,
                holds_empty: self.parts.is_empty(),
                claims: m.claims.clone(),
                kind,
            }),
        ));
    }

    /// A registry request answered (or failed).
    pub(crate) fn on_registry(
        &mut self,
        now: Instant,
        seq: u64,
        result: Result<Reply, RequestError>,
        sh: &mut Shared,
    ) {
        let Some((want, _)) = &self.group.reg.in_flight else {
            return;
        };
        if *want != seq {
            return;
        }
        let Some((_, what)) = self.group.reg.in_flight.take() else {
            return;
        };
        let transport = result.as_ref().err().cloned();
        let body = result.ok().and_then(|r| r.body);
        if matches!(transport, Some(ref e) if !matches!(e, RequestError::Timeout { .. })) {
            self.group.lost_coordinator(now);
        }
        let leaving = matches!(
            what,
            InFlight::Read(AfterRead::Leave)
                | InFlight::Write(Written {
                    kind: SlotWrite::Free | SlotWrite::Park,
                    ..
                })
        );
        if (self.closing || self.group.reg.parting_since.is_some()) && !leaving {
            // A round answered after the close (or an `assign`) began: the member takes no
            // part any more; the slot is freed next.
            return;
        }
        match what {
            InFlight::Read(AfterRead::Leave) => self.on_leave_read(now, body, sh),
            InFlight::Read(after) => {
                let slots = body
                    .and_then(|b| OffsetFetchResponse::decode(&mut Reader::new(b)).ok())
                    .and_then(|r| self.slots_of(r));
                match slots {
                    Some(slots) => self.on_registry_read(now, slots, after, sh),
                    None => {
                        self.group.reg.next_round = Some(now + self.config.heartbeat_interval / 4)
                    }
                }
            }
            InFlight::Write(w) => self.on_registry_written(now, body, w, sh),
        }
    }

    /// The read before freeing the slot answered: the slot is freed if it is still this
    /// member's; unread or no longer its own, there is nothing to free (the others count it
    /// gone a session after its last refresh) and the member has left.
    fn on_leave_read(&mut self, now: Instant, body: Option<Bytes>, sh: &mut Shared) {
        let me = self.group.member_id().unwrap_or("").replace(' ', "_");
        let slots = body
            .and_then(|b| OffsetFetchResponse::decode(&mut Reader::new(b)).ok())
            .and_then(|r| self.slots_of(r));
        let m = &self.group.reg;
        let mine = m.slot.is_some_and(|slot| {
            slots.as_ref().is_some_and(
                |s| matches!(s.get(slot as usize), Some(Slot::Member(r)) if r.member == me),
            )
        });
        match (mine, self.group.coordinator.clone()) {
            (true, Some(coordinator)) => {
                let group_id = self.config.group_id.clone().unwrap_or_default();
                // A static member that closes keeps its partitions for its instance (Kafka:
                // no LeaveGroup); one that switches to `assign` leaves.
                let kind = if self.closing && self.config.group_instance_id.is_some() {
                    SlotWrite::Park
                } else {
                    SlotWrite::Free
                };
                self.send_registry_write(now, &group_id, &coordinator, kind, sh);
            }
            _ => self.registry_left(sh),
        }
    }

    /// A registry write answered. Freeing the slot ends the member's part, answered or not
    /// (unanswered, the others count it gone a session after its last refresh). A refresh
    /// that failed is retried a quarter interval later; one that succeeded extends the lease
    /// (when it was sent while the lease held, or held nothing, and was answered within the
    /// margin), publishes its claims, and is read back at once to confirm the slot.
    fn on_registry_written(
        &mut self,
        now: Instant,
        body: Option<Bytes>,
        w: Written,
        sh: &mut Shared,
    ) {
        let ok = body
            .and_then(|b| OffsetCommitResponse::decode(&mut Reader::new(b)).ok())
            .is_some_and(|r| {
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .all(|p| p.error_code == ErrorCode::NONE)
            });
        if w.kind != SlotWrite::Refresh {
            self.registry_left(sh);
            return;
        }
        if !ok {
            self.group.reg.next_round = Some(now + self.config.heartbeat_interval / 4);
            self.group.reg.dirty = true;
            return;
        }
        let margin = lease_margin(self.config.session_timeout, self.config.heartbeat_interval);
        let lease = self.lease_length();
        let m = &mut self.group.reg;
        m.counter = w.counter;
        let valid_at_send = m.lease_until.is_some_and(|t| w.sent < t);
        if (valid_at_send || w.holds_empty) && now.saturating_duration_since(w.sent) <= margin {
            m.lease_until = Some(w.sent + lease - margin);
        }
        m.published = w.claims;
        // Read at once: it confirms the slot and may start the claims.
        if let Some(coordinator) = self.group.coordinator.clone() {
            let group_id = self.config.group_id.clone().unwrap_or_default();
            self.send_registry_read(now, &group_id, &coordinator, AfterRead::Confirm, sh);
        } else {
            self.group.reg.next_round = Some(now);
        }
    }

    /// The registry's slots from an OffsetFetch answer; `None` when it is not the answer
    /// asked for.
    fn slots_of(&self, r: OffsetFetchResponse) -> Option<Vec<Slot>> {
        let t = r
            .topics
            .into_iter()
            .find(|t| t.topic.as_deref() == Some(REGISTRY_TOPIC))?;
        let mut slots = vec![Slot::Empty; self.config.max_group_members];
        for p in t.partitions {
            let i = usize::try_from(p.partition).ok()?;
            *slots.get_mut(i)? = Slot::decode(p.offset, p.metadata.as_deref());
        }
        Some(slots)
    }
}
