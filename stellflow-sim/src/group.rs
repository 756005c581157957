//! The group coordinator of one broker (PROTOCOL.md §3.9–§3.11).
//!
//! Every JoinGroup bumps the generation; expiry is lazy (evaluated only when a JoinGroup,
//! SyncGroup or Heartbeat for the group arrives) and an eviction pass that removes anyone bumps
//! the generation once and, if the leader left, makes the smallest remaining member id leader.
//! SyncGroup never hands out assignments and does not refresh liveness; Heartbeat does.
//! State is in memory only.

use crate::rng::SimRng;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// `UNKNOWN_SERVER_ERROR`: unknown group or member.
pub const UNKNOWN_MEMBER: i16 = 1;
/// `FENCED_INSTANCE_ID`: evicted now, or wrong generation.
pub const FENCED: i16 = 19;

#[derive(Debug, Clone)]
struct Member {
    session_timeout: Duration,
    last_seen: Instant,
}

#[derive(Debug, Clone, Default)]
struct Group {
    generation: i32,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
}

impl Group {
    /// Evicts expired members; returns the evicted ids.
    fn evict_expired(&mut self, now: Instant) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now.saturating_duration_since(m.last_seen) > m.session_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        if expired.is_empty() {
            return expired;
        }
        for id in &expired {
            self.members.remove(id);
        }
        self.generation = self.generation.wrapping_add(1);
        if self
            .leader
            .as_ref()
            .is_none_or(|l| !self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        expired
    }
}

/// Result of a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOutcome {
    /// The new generation.
    pub generation_id: i32,
    /// The member id to use from now on (generated if none was given).
    pub member_id: String,
    /// The leader's member id.
    pub leader_id: String,
}

/// One eviction pass that removed expired members (and bumped the generation once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// When the pass ran (a JoinGroup, SyncGroup or Heartbeat of the group arrived).
    pub at: Instant,
    /// The group.
    pub group_id: Option<String>,
    /// The members it removed.
    pub members: Vec<String>,
}

/// All groups of one broker.
#[derive(Debug, Clone, Default)]
pub struct GroupCoordinator {
    groups: HashMap<Option<String>, Group>,
    /// Every eviction pass so far, oldest first (what the DST harness reads to tell a rejoin
    /// the server forced on a live member from one the client caused).
    evictions: Vec<Eviction>,
}

impl GroupCoordinator {
    /// No groups.
    pub fn new() -> Self {
        Self::default()
    }

    /// JoinGroup: evict, add or refresh the member, bump the generation.
    pub fn join(
        &mut self,
        now: Instant,
        rng: &mut SimRng,
        group_id: Option<&str>,
        member_id: Option<&str>,
        session_timeout_ms: i32,
    ) -> JoinOutcome {
        let member_id = match member_id {
            Some(m) if !crate::producer_ids::is_blank(m) => m.to_owned(),
            _ => format!("stellflow-member-{}", rng.uuid()),
        };
        let group = self.groups.entry(group_id.map(str::to_owned)).or_default();
        let evicted = group.evict_expired(now);
        if !evicted.is_empty() {
            self.evictions.push(Eviction {
                at: now,
                group_id: group_id.map(str::to_owned),
                members: evicted,
            });
        }
        let timeout = Duration::from_millis(u64::try_from(session_timeout_ms.max(1)).unwrap_or(1));
        group.members.insert(
            member_id.clone(),
            Member {
                session_timeout: timeout,
                last_seen: now,
            },
        );
        group.generation = group.generation.wrapping_add(1);
        let leader = match &group.leader {
            Some(l) if group.members.contains_key(l) => l.clone(),
            _ => member_id.clone(),
        };
        group.leader = Some(leader.clone());
        JoinOutcome {
            generation_id: group.generation,
            member_id,
            leader_id: leader,
        }
    }

    fn check(
        &mut self,
        now: Instant,
        group_id: Option<&str>,
        generation_id: i32,
        member_id: Option<&str>,
        refresh: bool,
    ) -> i16 {
        let Some(group) = self.groups.get_mut(&group_id.map(str::to_owned)) else {
            return UNKNOWN_MEMBER;
        };
        let Some(member_id) = member_id else {
            return UNKNOWN_MEMBER;
        };
        if !group.members.contains_key(member_id) {
            return UNKNOWN_MEMBER;
        }
        let evicted = group.evict_expired(now);
        let fenced = evicted.iter().any(|m| m == member_id);
        if !evicted.is_empty() {
            self.evictions.push(Eviction {
                at: now,
                group_id: group_id.map(str::to_owned),
                members: evicted,
            });
        }
        if fenced {
            return FENCED;
        }
        if generation_id != group.generation {
            return FENCED;
        }
        if refresh && let Some(m) = group.members.get_mut(member_id) {
            m.last_seen = now;
        }
        0
    }

    /// Every eviction pass of this broker's groups since it (re)started, oldest first.
    pub fn evictions(&self) -> &[Eviction] {
        &self.evictions
    }

    /// SyncGroup: the error code (assignments are always empty). Does not refresh liveness.
    pub fn sync(
        &mut self,
        now: Instant,
        group_id: Option<&str>,
        generation_id: i32,
        member_id: Option<&str>,
    ) -> i16 {
        self.check(now, group_id, generation_id, member_id, false)
    }

    /// Heartbeat: the error code; refreshes liveness on success.
    pub fn heartbeat(
        &mut self,
        now: Instant,
        group_id: Option<&str>,
        generation_id: i32,
        member_id: Option<&str>,
    ) -> i16 {
        self.check(now, group_id, generation_id, member_id, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_join_bumps_and_first_is_leader() {
        let t = Instant::now();
        let mut rng = SimRng::new(1);
        let mut g = GroupCoordinator::new();
        let a = g.join(t, &mut rng, Some("g"), Some("a"), 10_000);
        assert_eq!((a.generation_id, a.leader_id.as_str()), (1, "a"));
        let b = g.join(t, &mut rng, Some("g"), Some("b"), 10_000);
        assert_eq!((b.generation_id, b.leader_id.as_str()), (2, "a"));
        assert_eq!(g.heartbeat(t, Some("g"), 1, Some("a")), FENCED);
        assert_eq!(g.heartbeat(t, Some("g"), 2, Some("a")), 0);
        assert_eq!(g.sync(t, Some("g"), 2, Some("zz")), UNKNOWN_MEMBER);
        assert_eq!(g.sync(t, Some("nope"), 2, Some("a")), UNKNOWN_MEMBER);
        assert_eq!(g.sync(t, Some("g"), 2, None), UNKNOWN_MEMBER);
        let n = g.join(t, &mut rng, Some("g"), None, 1);
        assert!(n.member_id.starts_with("stellflow-member-"));
        assert_eq!(n.member_id.len(), "stellflow-member-".len() + 36);
    }

    #[test]
    fn lazy_expiry_and_leader_move() {
        let t = Instant::now();
        let mut rng = SimRng::new(1);
        let mut g = GroupCoordinator::new();
        g.join(t, &mut rng, Some("g"), Some("zz"), 100);
        g.join(t, &mut rng, Some("g"), Some("mm"), 10_000);
        let r = g.join(t, &mut rng, Some("g"), Some("aa"), 10_000);
        assert_eq!((r.generation_id, r.leader_id.as_str()), (3, "zz"));
        let later = t + Duration::from_millis(500);
        let r = g.join(later, &mut rng, Some("g"), Some("mm"), 10_000);
        assert_eq!((r.generation_id, r.leader_id.as_str()), (5, "aa"));
        // An expired member: 19 on the evicting call, 1 afterwards.
        let mut g = GroupCoordinator::new();
        g.join(t, &mut rng, Some("g"), Some("x"), 100);
        assert_eq!(g.heartbeat(later, Some("g"), 1, Some("x")), FENCED);
        assert_eq!(g.heartbeat(later, Some("g"), 2, Some("x")), UNKNOWN_MEMBER);
    }

    #[test]
    fn sync_does_not_refresh() {
        let t = Instant::now();
        let mut rng = SimRng::new(1);
        let mut g = GroupCoordinator::new();
        g.join(t, &mut rng, Some("g"), Some("m"), 700);
        let ms = |n| t + Duration::from_millis(n);
        assert_eq!(g.sync(ms(300), Some("g"), 1, Some("m")), 0);
        assert_eq!(g.sync(ms(600), Some("g"), 1, Some("m")), 0);
        assert_eq!(g.sync(ms(900), Some("g"), 1, Some("m")), FENCED);
        assert_eq!(g.sync(ms(1200), Some("g"), 1, Some("m")), UNKNOWN_MEMBER);
        // Heartbeats keep a member alive.
        g.join(t, &mut rng, Some("h"), Some("m"), 700);
        for i in 1..5 {
            assert_eq!(g.heartbeat(ms(300 * i), Some("h"), 1, Some("m")), 0);
        }
        // Zero/negative session timeouts are clamped to 1 ms.
        g.join(t, &mut rng, Some("z"), Some("m"), -5);
        assert_eq!(g.heartbeat(ms(50), Some("z"), 1, Some("m")), FENCED);
    }
}
