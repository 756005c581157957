//! The group's member registry: the slots each member writes in the coordinator's offset
//! store, their text form, and one member's view of everyone's slots judged on its own clock.
//!
//! Today's server hands out no assignment and lists no members (PROTOCOL.md §3.10–§3.11), but
//! its offset store takes any topic name, keeps `offset` and `metadata` verbatim (32767 bytes
//! of metadata, checked), answers many partitions in one OffsetFetch and makes a commit visible
//! to every connection once it is answered. A group's registry is the partitions
//! `0..max_group_members` of [`REGISTRY_TOPIC`] in the group's own offsets: one slot a member.
//! A slot holds a registration (the member id, its subscription, the partitions it holds and
//! those it claims; the `offset` is a counter that grows with every write) or says that it is
//! free and whose registration it replaced. ARCHITECTURE.md (decision 15) has the protocol
//! and its safety argument.

use super::TopicPartition;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The topic name of every group's member registry in the group's offset store. Its `:` is a
/// character no real topic name may have, so the registry never meets a real topic's
/// committed offsets.
pub const REGISTRY_TOPIC: &str = "stellflow:members";

const TAG: &str = "sfm1";
const FREE_TAG: &str = "sfm1-free";
/// Stands for an empty list in the text form (no topic may be named `.`).
const NONE: &str = ".";

/// One member's registration as written in its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The member id (the coordinator's, from JoinGroup).
    pub member: String,
    /// Grows with every write of this member (the slot's `offset`).
    pub counter: i64,
    /// The subscribed topics.
    pub topics: BTreeSet<String>,
    /// Partitions the member has started and not yet released.
    pub holds: BTreeSet<TopicPartition>,
    /// Partitions the member asks for (not started yet).
    pub claims: BTreeSet<TopicPartition>,
}

/// Why a slot was freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreeReason {
    /// Another member saw the registration unchanged for a whole session timeout.
    Expired,
    /// The member closed and released everything.
    Left,
    /// An older copy of a registration that lives on in another slot.
    Moved,
}

impl FreeReason {
    fn as_str(self) -> &'static str {
        match self {
            FreeReason::Expired => "expired",
            FreeReason::Left => "left",
            FreeReason::Moved => "moved",
        }
    }
}

/// What one slot holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Never written (`offset -1`, metadata `""`).
    Empty,
    /// A member's registration.
    Member(Registration),
    /// Freed: the registration of `member` with this counter (or an older one) is gone.
    Freed {
        /// Whose registration the slot held.
        member: String,
        /// Its counter then.
        counter: i64,
        /// Why.
        reason: FreeReason,
    },
    /// Something this client did not write: never claimed, never freed.
    Foreign,
}

impl Slot {
    /// Whether a member may claim the slot.
    pub fn claimable(&self) -> bool {
        matches!(self, Slot::Empty | Slot::Freed { .. })
    }

    /// The slot's text form from an OffsetFetch answer.
    pub fn decode(offset: i64, metadata: Option<&str>) -> Slot {
        let md = metadata.unwrap_or("");
        if let Some(rest) = md.strip_prefix(FREE_TAG).and_then(|r| r.strip_prefix(' ')) {
            let mut it = rest.split(' ');
            let (Some(member), Some(counter), Some(reason)) = (it.next(), it.next(), it.next())
            else {
                return Slot::Foreign;
            };
            let reason = match reason {
                "expired" => FreeReason::Expired,
                "left" => FreeReason::Left,
                "moved" => FreeReason::Moved,
                _ => return Slot::Foreign,
            };
            return match counter.parse() {
                Ok(counter) => Slot::Freed {
                    member: member.to_owned(),
                    counter,
                    reason,
                },
                Err(_) => Slot::Foreign,
            };
        }
        if let Some(rest) = md.strip_prefix(TAG).and_then(|r| r.strip_prefix(' ')) {
            return decode_registration(offset, rest).map_or(Slot::Foreign, Slot::Member);
        }
        if offset == -1 && md.is_empty() {
            return Slot::Empty;
        }
        Slot::Foreign
    }
}

fn decode_registration(counter: i64, rest: &str) -> Option<Registration> {
    let mut it = rest.split(' ');
    let member = it.next().filter(|m| !m.is_empty())?.to_owned();
    let topics = match it.next()? {
        NONE => BTreeSet::new(),
        t => t.split(',').map(str::to_owned).collect(),
    };
    let holds = decode_partitions(it.next()?)?;
    let claims = decode_partitions(it.next()?)?;
    Some(Registration {
        member,
        counter,
        topics,
        holds,
        claims,
    })
}

/// `topic:0-3,7;other:1` → the partitions; `.` → none.
fn decode_partitions(s: &str) -> Option<BTreeSet<TopicPartition>> {
    let mut out = BTreeSet::new();
    if s == NONE {
        return Some(out);
    }
    for group in s.split(';') {
        let (topic, list) = group.split_once(':')?;
        let topic: Arc<str> = Arc::from(topic);
        for item in list.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (a.parse::<i32>().ok()?, b.parse::<i32>().ok()?),
                None => {
                    let p = item.parse::<i32>().ok()?;
                    (p, p)
                }
            };
            // A range is at most what one member can hold; a wild one is not trusted.
            if hi < lo || hi - lo > 100_000 {
                return None;
            }
            for partition in lo..=hi {
                out.insert(TopicPartition {
                    topic: topic.clone(),
                    partition,
                });
            }
        }
    }
    Some(out)
}

fn encode_partitions(out: &mut String, parts: &BTreeSet<TopicPartition>) {
    if parts.is_empty() {
        out.push_str(NONE);
        return;
    }
    let mut topic: Option<&str> = None;
    let mut run: Option<(i32, i32)> = None;
    let flush = |out: &mut String, run: Option<(i32, i32)>| {
        if let Some((lo, hi)) = run {
            if lo == hi {
                let _ = write!(out, "{lo}");
            } else {
                let _ = write!(out, "{lo}-{hi}");
            }
        }
    };
    for tp in parts {
        if topic != Some(&tp.topic) {
            flush(out, run.take());
            if topic.is_some() {
                out.push(';');
            }
            out.push_str(&tp.topic);
            out.push(':');
            topic = Some(&tp.topic);
        }
        run = match run {
            Some((lo, hi)) if tp.partition == hi.wrapping_add(1) => Some((lo, tp.partition)),
            Some(r) => {
                flush(out, Some(r));
                out.push(',');
                Some((tp.partition, tp.partition))
            }
            None => Some((tp.partition, tp.partition)),
        };
    }
    flush(out, run);
}

impl Registration {
    /// The slot's metadata (the counter goes in its `offset`).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(64);
        out.push_str(TAG);
        out.push(' ');
        out.push_str(&self.member);
        out.push(' ');
        if self.topics.is_empty() {
            out.push_str(NONE);
        } else {
            let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
            out.push_str(&topics.join(","));
        }
        out.push(' ');
        encode_partitions(&mut out, &self.holds);
        out.push(' ');
        encode_partitions(&mut out, &self.claims);
        out
    }
}

/// The metadata of a freed slot.
pub(crate) fn encode_free(member: &str, counter: i64, reason: FreeReason) -> String {
    format!("{FREE_TAG} {member} {counter} {}", reason.as_str())
}

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
    /// unchanged for `session` (or freed) are gone.
    pub fn update(&mut self, now: Instant, slots: Vec<Slot>, session: Duration) {
        for m in self.members.values_mut() {
            m.present = false;
        }
        for (i, slot) in slots.iter().enumerate() {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            match slot {
                Slot::Member(r) => match self.members.get_mut(&r.member) {
                    Some(m) if r.counter > m.reg.counter => {
                        *m = Seen {
                            reg: r.clone(),
                            slot: i,
                            changed_at: now,
                            present: true,
                            gone: false,
                        };
                    }
                    Some(m) => m.present = true,
                    None => {
                        self.members.insert(
                            r.member.clone(),
                            Seen {
                                reg: r.clone(),
                                slot: i,
                                changed_at: now,
                                present: true,
                                gone: false,
                            },
                        );
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
        // Forget members that are gone and in no slot any more.
        self.members.retain(|_, m| !m.gone || m.present);
        self.slots = slots;
    }

    /// Members in a slot and not gone: the members the assignment is computed for.
    pub fn live(&self) -> impl Iterator<Item = &Seen> {
        self.members.values().filter(|m| m.present && !m.gone)
    }

    /// Whether a member other than `me` that is not gone lists `tp` (held or claimed): a
    /// member that vanished from the slots without being freed keeps its partitions until it
    /// is gone.
    pub fn taken_by_other(&self, me: &str, tp: &TopicPartition) -> bool {
        self.members.iter().any(|(id, m)| {
            id != me && !m.gone && (m.reg.holds.contains(tp) || m.reg.claims.contains(tp))
        })
    }

    /// Slots to free: registrations of gone members, and older copies of a member's
    /// registration that lives on in another slot.
    pub fn to_free(&self, me: &str) -> Vec<(i32, String)> {
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
            } else if m.slot != i && r.counter < m.reg.counter {
                out.push((i, encode_free(&r.member, r.counter, FreeReason::Moved)));
            }
        }
        out
    }

    /// When the next present member would be gone if it stays unchanged.
    pub fn next_expiry(&self, me: &str, session: Duration) -> Option<Instant> {
        self.members
            .iter()
            .filter(|(id, m)| *id != me && m.present && !m.gone)
            .map(|(_, m)| m.changed_at + session)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    #[test]
    fn registration_round_trips_with_ranges() {
        let r = Registration {
            member: "stellflow-member-1".into(),
            counter: 42,
            topics: ["a".to_owned(), "b.c-d_e".to_owned()].into(),
            holds: tps(&[("a", 0), ("a", 1), ("a", 2), ("a", 5), ("b.c-d_e", 9)]),
            claims: tps(&[("a", 7)]),
        };
        let text = r.encode();
        assert_eq!(
            text,
            "sfm1 stellflow-member-1 a,b.c-d_e a:0-2,5;b.c-d_e:9 a:7"
        );
        assert_eq!(Slot::decode(42, Some(&text)), Slot::Member(r));
        let empty = Registration {
            member: "m".into(),
            counter: 1,
            topics: BTreeSet::new(),
            holds: BTreeSet::new(),
            claims: BTreeSet::new(),
        };
        assert_eq!(empty.encode(), "sfm1 m . . .");
        assert_eq!(Slot::decode(1, Some("sfm1 m . . .")), Slot::Member(empty));
    }

    #[test]
    fn free_empty_and_foreign_slots() {
        assert_eq!(Slot::decode(-1, Some("")), Slot::Empty);
        assert_eq!(Slot::decode(-1, None), Slot::Empty);
        assert_eq!(
            Slot::decode(-1, Some(&encode_free("m", 7, FreeReason::Left))),
            Slot::Freed {
                member: "m".into(),
                counter: 7,
                reason: FreeReason::Left
            }
        );
        for junk in [
            "x",
            "sfm1",
            "sfm1 m a",
            "sfm1 m . a:x .",
            "sfm1-free m x left",
        ] {
            assert_eq!(Slot::decode(3, Some(junk)), Slot::Foreign, "{junk}");
        }
        assert!(!Slot::Foreign.claimable());
        assert!(Slot::Empty.claimable());
    }

    fn reg(member: &str, counter: i64, holds: &[(&str, i32)]) -> Slot {
        Slot::Member(Registration {
            member: member.into(),
            counter,
            topics: ["t".to_owned()].into(),
            holds: tps(holds),
            claims: BTreeSet::new(),
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
}
