//! Static membership (`consumer.group_instance_id`, Kafka's `group.instance.id`) on top of
//! the member registry: a static member's registration names its instance and its
//! incarnation (the how-many-th member of the instance it is); of two registrations of one
//! instance the newer is the instance and the older is fenced.
//!
//! * A member that starts under an instance already registered takes the next incarnation.
//!   Every member computes the assignment for the instance once, keeping what its older
//!   registrations list with the newest one, so a restart moves nobody else's partitions.
//! * The older member, once it reads the newer registration, drops its partitions without
//!   committing them and stops for good ([`crate::ConsumerError::FencedInstanceId`]).
//! * The newer member starts the older one's partitions only when the older one has
//!   stopped delivering: its registration closed (it committed and stopped on close), or
//!   unchanged for the time it said it stops within. A static member's lease lasts
//!   [`static_lease`] (not the session) after the sending of its last refresh, less the
//!   margin, and it publishes that length: any later refresh would have landed before the
//!   newer member reads the registration unchanged for that long, so it has stopped by then
//!   whether it is dead, paused or cut off (the argument of decision 19 (c), ARCHITECTURE.md,
//!   with this length instead of the session).
//! * A static member that closes commits, then writes its registration marked closed
//!   instead of freeing its slot: its partitions wait for the instance for the session (no
//!   LeaveGroup for static members, as in Kafka), taken by nobody else.

use super::membership::Membership;
use super::registry::Instance;
use super::{Consumer, ConsumerConfig, ConsumerEvent, emit};
use crate::shared::Shared;
use std::time::{Duration, Instant};

/// How long a static member may go without a refresh answered in time before it stops
/// delivering (its lease, margin included): five heartbeat intervals, at most the session, so
/// that it rides out three refreshes in a row answered late (a coordinator stalled for a
/// moment) without dropping its partitions.
/// A restarted member of the instance waits this long after first reading the old
/// registration before it starts the old member's partitions.
pub(crate) fn static_lease(config: &ConsumerConfig) -> Duration {
    config
        .session_timeout
        .min(config.heartbeat_interval.saturating_mul(5))
}

impl Consumer {
    /// The static part of this member's registration; `None` for a dynamic member.
    pub(super) fn instance_part(&self, closed: bool) -> Option<Instance> {
        let id = self.config.group_instance_id.clone()?;
        Some(Instance {
            id,
            incarnation: self.group.reg.incarnation,
            stops_within: static_lease(&self.config),
            closed,
        })
    }

    /// How long after the sending of a refresh answered in time the lease lasts (the
    /// margin still comes off): the session for a dynamic member, [`static_lease`] for a
    /// static one.
    pub(super) fn lease_length(&self) -> Duration {
        match self.config.group_instance_id {
            Some(_) => static_lease(&self.config),
            None => self.config.session_timeout,
        }
    }

    /// Picks this member's incarnation when it first takes a slot: one above every
    /// registration of its instance it has read (its own earlier ones included), so that it
    /// is the instance's newest member.
    pub(super) fn choose_incarnation(&mut self) {
        let Some(id) = self.config.group_instance_id.as_deref() else {
            return;
        };
        let m = &mut self.group.reg;
        if m.incarnation != 0 {
            return;
        }
        let highest = (m.view.members.values())
            .filter_map(|s| s.reg.instance.as_ref())
            .filter(|i| i.id == id)
            .map(|i| i.incarnation)
            .max()
            .unwrap_or(0);
        m.incarnation = highest.saturating_add(1);
    }

    /// A newer member of this member's instance registered: drops every partition without
    /// committing it (the newer member starts them once this one has stopped), leaves the
    /// group for good and says so; `poll` fails with
    /// [`crate::ConsumerError::FencedInstanceId`] from now on.
    pub(super) fn fence(&mut self, now: Instant, sh: &mut Shared) {
        let instance_id = self.config.group_instance_id.clone().unwrap_or_default();
        tracing::error!(
            %instance_id,
            "fenced: another consumer joined the group with the same group.instance.id"
        );
        let lost = self.drop_uncommitted(now, sh);
        let listening = self.group.reg.listening;
        self.group.reg = Membership::new();
        self.group.reg.listening = listening;
        self.group.subscription.clear();
        self.group.member = super::member::Member::Idle;
        self.group.fenced = Some(instance_id.clone());
        if !lost.is_empty() {
            emit(sh, ConsumerEvent::PartitionsLost(lost));
        }
        emit(sh, ConsumerEvent::Fenced { instance_id });
        if self.closing {
            self.finish_close(sh);
        }
    }
}
