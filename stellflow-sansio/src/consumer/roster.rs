//! One member's view of the registry's slots, judged on its own clock: which members are
//! live, which are gone, which partitions another member still lists, which slots to free,
//! and, for static members (`consumer.group_instance_id`), which registration of an instance
//! is its current member and whether an older one has stopped delivering.

use super::TopicPartition;
use super::registry::{FreeReason, Registration, Slot, encode_free};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What this member knows of another, all on its own clock.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The registration with the highest counter ever read.
    pub reg: Registration,
    /// The slot it was read in.
    pub slot: i32,
    /// When that counter was first read (this member's clock).
    pub changed_at: Instant,
    /// A registration of it was in a slot at the last read.
    pub present: bool,
    /// Gone: freed by a slot naming this counter or a later one, or unchanged for a whole
    /// session timeout. Its partitions are free; a registration with a higher counter would
    /// bring it back.
    pub gone: bool,
    /// A newer member of the same static instance is registered: this one is not the
    /// instance any more (it is fenced) and counts in no assignment.
    pub superseded: bool,
    /// It delivers nothing any more although it is not gone: a static member that closed,
    /// or one superseded whose registration has not changed for its `stops_within`.
    pub stopped: bool,
}

impl Seen {
    fn new(reg: &Registration, slot: i32, now: Instant) -> Seen {
        Seen {
            reg: reg.clone(),
            slot,
            changed_at: now,
            present: true,
            gone: false,
            superseded: false,
            stopped: false,
        }
    }

    /// Whether what it lists (held or claimed) is still its own to deliver.
    fn holds_back(&self) -> bool {
        !self.gone && !self.stopped
    }
}

/// One member's view of the registry.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Every slot at the last read.
    pub slots: Vec<Slot>,
    /// Members by id.
    pub members: BTreeMap<String, Seen>,
}

impl View {
    /// Takes in a read made at `now`: counters that moved count as signs of life, members
    /// unchanged for `session` (or freed) are gone, and of the members of one static
    /// instance the newest is the instance.
    pub(super) fn update(&mut self, now: Instant, slots: Vec<Slot>, session: Duration) {
        for m in self.members.values_mut() {
            m.present = false;
        }
        for (i, slot) in slots.iter().enumerate() {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            match slot {
                Slot::Member(r) => match self.members.get_mut(&r.member) {
                    Some(m) if r.counter > m.reg.counter => *m = Seen::new(r, i, now),
                    Some(m) => m.present = true,
                    None => {
                        self.members.insert(r.member.clone(), Seen::new(r, i, now));
                    }
                },
                Slot::Freed {
                    member, counter, ..
                } => {
                    if let Some(m) = self.members.get_mut(member)
                        && *counter >= m.reg.counter
                    {
                        m.gone = true;
                    }
                }
                Slot::Empty | Slot::Foreign => {}
            }
        }
        for m in self.members.values_mut() {
            if now >= m.changed_at + session {
                m.gone = true;
            }
        }
        self.judge_instances(now);
        // Forget members that are gone and in no slot any more.
        self.members.retain(|_, m| !m.gone || m.present);
        self.slots = slots;
    }

    /// Marks the members that a newer member of their static instance superseded, and the
    /// static members that deliver nothing any more: closed, or superseded and unchanged
    /// for the time they said they stop within (`Instance::stops_within`: their lease after
    /// their last refresh, so a later refresh would have landed before now).
    fn judge_instances(&mut self, now: Instant) {
        let newest: Vec<Registration> = (self.members.values())
            .filter(|m| m.present && !m.gone && m.reg.instance.is_some())
            .map(|m| m.reg.clone())
            .collect();
        for m in self.members.values_mut() {
            let Some(instance) = &m.reg.instance else {
                continue;
            };
            m.superseded = newest.iter().any(|n| n.supersedes(&m.reg));
            let quiet = now >= m.changed_at + instance.stops_within;
            m.stopped = instance.closed || (m.superseded && quiet);
        }
    }

    /// Members in a slot and not gone, one per static instance: the members the assignment
    /// is computed for.
    pub(super) fn live(&self) -> impl Iterator<Item = &Seen> {
        (self.members.values()).filter(|m| m.present && !m.gone && !m.superseded)
    }

    /// What the older members of `newest`'s static instance list (held or claimed): the
    /// instance's partitions, which the assignment keeps with its newest member.
    pub(super) fn inherited<'a>(
        &'a self,
        newest: &'a Registration,
    ) -> impl Iterator<Item = &'a TopicPartition> {
        (self.members.values())
            .filter(move |m| !m.gone && newest.supersedes(&m.reg))
            .flat_map(|m| m.reg.holds.iter().chain(m.reg.claims.iter()))
    }

    /// Whether the member `me` is superseded by a newer member of its static instance.
    pub(super) fn superseded(&self, me: &str) -> bool {
        self.members
            .get(me)
            .is_some_and(|m| m.superseded && !m.gone)
    }

    /// Whether a member other than `me` that may still deliver lists `tp` (held or
    /// claimed): a member that vanished from the slots without being freed keeps its
    /// partitions until it is gone; a superseded static member until it stopped.
    pub(super) fn taken_by_other(&self, me: &str, tp: &TopicPartition) -> bool {
        self.members.iter().any(|(id, m)| {
            id != me && m.holds_back() && (m.reg.holds.contains(tp) || m.reg.claims.contains(tp))
        })
    }

    /// Slots to free: registrations of gone members, older copies of a member's
    /// registration that lives on in another slot, and static members superseded that
    /// stopped.
    pub(super) fn to_free(&self, me: &str) -> Vec<(i32, String)> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let Slot::Member(r) = slot else { continue };
            if r.member == me {
                continue;
            }
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            let Some(m) = self.members.get(&r.member) else {
                continue;
            };
            if m.gone {
                out.push((i, encode_free(&r.member, r.counter, FreeReason::Expired)));
            } else if (m.slot != i && r.counter < m.reg.counter)
                || (m.superseded && m.stopped && r.counter == m.reg.counter)
            {
                // An older copy of a registration that lives on elsewhere, or a static
                // member's registration that a newer member of its instance replaced.
                out.push((i, encode_free(&r.member, r.counter, FreeReason::Moved)));
            }
        }
        out
    }

    /// When the next present member would be gone if it stays unchanged, or a superseded
    /// one would have stopped.
    pub(super) fn next_expiry(&self, me: &str, session: Duration) -> Option<Instant> {
        let stops = (self.members.values())
            .filter(|m| m.superseded && !m.stopped && !m.gone)
            .filter_map(|m| Some(m.changed_at + m.reg.instance.as_ref()?.stops_within));
        self.members
            .iter()
            .filter(|(id, m)| *id != me && m.present && !m.gone)
            .map(|(_, m)| m.changed_at + session)
            .chain(stops)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::Instance;
    use super::*;
    use std::collections::BTreeSet;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    fn reg(member: &str, counter: i64, holds: &[(&str, i32)]) -> Slot {
        Slot::Member(Registration {
            member: member.into(),
            counter,
            topics: ["t".to_owned()].into(),
            holds: tps(holds),
            claims: BTreeSet::new(),
            instance: None,
        })
    }

    #[test]
    fn liveness_is_a_counter_that_moves_within_the_session_on_the_readers_clock() {
        let t0 = Instant::now();
        let s = Duration::from_secs(10);
        let mut v = View::default();
        v.update(t0, vec![reg("a", 1, &[("t", 0)]), reg("b", 5, &[])], s);
        assert_eq!(v.live().count(), 2);
        // a keeps writing, b does not.
        v.update(
            t0 + Duration::from_secs(6),
            vec![reg("a", 2, &[("t", 0)]), reg("b", 5, &[])],
            s,
        );
        v.update(
            t0 + Duration::from_secs(9),
            vec![reg("a", 3, &[("t", 0)]), reg("b", 5, &[])],
            s,
        );
        assert!(v.taken_by_other("b", &TopicPartition::new("t", 0)));
        v.update(
            t0 + Duration::from_secs(10),
            vec![reg("a", 4, &[("t", 0)]), reg("b", 5, &[])],
            s,
        );
        let live: Vec<&str> = v.live().map(|m| m.reg.member.as_str()).collect();
        assert_eq!(live, ["a"]);
        assert_eq!(v.to_free("a").len(), 1, "b's slot is freed");
        // a vanishes without being freed: its partition stays taken until it is gone.
        v.update(
            t0 + Duration::from_secs(12),
            vec![Slot::Empty, Slot::Empty],
            s,
        );
        assert!(v.taken_by_other("c", &TopicPartition::new("t", 0)));
        assert_eq!(v.live().count(), 0);
        v.update(
            t0 + Duration::from_secs(20),
            vec![Slot::Empty, Slot::Empty],
            s,
        );
        assert!(!v.taken_by_other("c", &TopicPartition::new("t", 0)));
    }

    #[test]
    fn a_freed_slot_naming_the_counter_releases_at_once_an_older_one_does_not() {
        let t0 = Instant::now();
        let s = Duration::from_secs(10);
        let mut v = View::default();
        v.update(t0, vec![reg("a", 3, &[("t", 0)])], s);
        let older = Slot::Freed {
            member: "a".into(),
            counter: 2,
            reason: FreeReason::Moved,
        };
        v.update(t0, vec![older], s);
        assert!(v.taken_by_other("b", &TopicPartition::new("t", 0)));
        let left = Slot::Freed {
            member: "a".into(),
            counter: 4,
            reason: FreeReason::Left,
        };
        v.update(t0, vec![left], s);
        assert!(!v.taken_by_other("b", &TopicPartition::new("t", 0)));
    }

    fn static_reg(
        member: &str,
        counter: i64,
        incarnation: u64,
        closed: bool,
        holds: &[(&str, i32)],
    ) -> Slot {
        let Slot::Member(mut r) = reg(member, counter, holds) else {
            unreachable!()
        };
        r.instance = Some(Instance {
            id: "billing-a".into(),
            incarnation,
            stops_within: Duration::from_secs(3),
            closed,
        });
        Slot::Member(r)
    }

    #[test]
    fn a_newer_member_of_an_instance_supersedes_the_older_which_holds_back_until_it_stopped() {
        let t0 = Instant::now();
        let s = Duration::from_secs(45);
        let at = |ms| t0 + Duration::from_millis(ms);
        let tp = TopicPartition::new("t", 0);
        let mut v = View::default();
        v.update(
            t0,
            vec![
                static_reg("old", 4, 1, false, &[("t", 0)]),
                reg("b", 1, &[]),
            ],
            s,
        );
        assert!(!v.superseded("old"));
        v.update(
            at(500),
            vec![
                static_reg("old", 4, 1, false, &[("t", 0)]),
                reg("b", 2, &[]),
                static_reg("new", 1, 2, false, &[]),
            ],
            s,
        );
        assert!(v.superseded("old"));
        let live: Vec<&str> = v.live().map(|m| m.reg.member.as_str()).collect();
        assert_eq!(live, ["b", "new"], "one member per instance");
        let Some(new) = v.members.get("new") else {
            panic!()
        };
        let inherited: Vec<&TopicPartition> = v.inherited(&new.reg).collect();
        assert_eq!(inherited, [&tp]);
        assert!(v.taken_by_other("new", &tp), "not stopped yet");
        assert_eq!(v.next_expiry("new", s), Some(t0 + Duration::from_secs(3)));
        // A refresh of the old member (it had not read the newer one yet) is a sign of life.
        v.update(
            at(2_000),
            vec![
                static_reg("old", 5, 1, false, &[("t", 0)]),
                reg("b", 3, &[]),
                static_reg("new", 2, 2, false, &[]),
            ],
            s,
        );
        v.update(
            at(4_000),
            vec![
                static_reg("old", 5, 1, false, &[("t", 0)]),
                reg("b", 4, &[]),
                static_reg("new", 3, 2, false, &[]),
            ],
            s,
        );
        assert!(
            v.taken_by_other("new", &tp),
            "3 s after its last change only"
        );
        assert!(v.to_free("new").is_empty());
        v.update(
            at(5_000),
            vec![
                static_reg("old", 5, 1, false, &[("t", 0)]),
                reg("b", 5, &[]),
                static_reg("new", 4, 2, false, &[]),
            ],
            s,
        );
        assert!(!v.taken_by_other("new", &tp));
        assert_eq!(
            v.to_free("b").len(),
            1,
            "the stopped member's slot is freed"
        );
    }

    #[test]
    fn a_closed_static_member_holds_nothing_back_but_stays_in_the_assignment() {
        let t0 = Instant::now();
        let s = Duration::from_secs(45);
        let mut v = View::default();
        v.update(
            t0,
            vec![static_reg("old", 4, 1, true, &[("t", 0)]), reg("b", 1, &[])],
            s,
        );
        assert_eq!(v.live().count(), 2);
        assert!(!v.taken_by_other("b", &TopicPartition::new("t", 0)));
        assert!(v.to_free("b").is_empty());
    }
}
