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
//! free and whose registration it replaced. A static member's registration also names its
//! instance (`consumer.group_instance_id`). ARCHITECTURE.md (decision 19) has the protocol
//! and its safety argument; `roster.rs` judges the slots.

use super::TopicPartition;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// The topic name of every group's member registry in the group's offset store. Its `:` is a
/// character no real topic name may have, so the registry never meets a real topic's
/// committed offsets.
pub const REGISTRY_TOPIC: &str = "stellflow:members";

const TAG: &str = "sfm1";
const FREE_TAG: &str = "sfm1-free";
/// Stands for an empty list in the text form (no topic may be named `.`).
const NONE: &str = ".";
/// Opens the static part of a registration (after the claims; older readers ignore it).
const STATIC_TAG: &str = "static";

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
    /// A static member's instance (`consumer.group_instance_id`); `None` for a dynamic one.
    pub instance: Option<Instance>,
}

/// The static part of a registration: which instance the member is, which of its members
/// in a row, and how soon it stops delivering once it cannot refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// `consumer.group_instance_id` (no whitespace).
    pub id: String,
    /// Grows with every member that takes the instance over: of two registrations of one
    /// instance the higher `(incarnation, member id)` is the instance, the other is fenced.
    pub incarnation: u64,
    /// The member stops delivering this long after the sending of its last refresh that
    /// was answered in time: a successor may start its partitions once the registration has
    /// not changed for this long on the successor's clock.
    pub stops_within: Duration,
    /// The member closed: it committed, delivers nothing more, and its partitions wait for
    /// the instance's next member (for the session; nobody else takes them before).
    pub closed: bool,
}

impl Registration {
    /// Whether this registration and `other` belong to one instance and this one is the
    /// newer member of it.
    pub(super) fn supersedes(&self, other: &Registration) -> bool {
        match (&self.instance, &other.instance) {
            (Some(a), Some(b)) if a.id == b.id => {
                (a.incarnation, &self.member) > (b.incarnation, &other.member)
            }
            _ => false,
        }
    }
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
    pub(super) fn claimable(&self) -> bool {
        matches!(self, Slot::Empty | Slot::Freed { .. })
    }

    /// The slot's text form from an OffsetFetch answer.
    pub(super) fn decode(offset: i64, metadata: Option<&str>) -> Slot {
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
    let instance = match it.next() {
        None => None,
        Some(STATIC_TAG) => Some(decode_instance(&mut it)?),
        // A later form's fields: not this client's to judge.
        Some(_) => None,
    };
    Some(Registration {
        member,
        counter,
        topics,
        holds,
        claims,
        instance,
    })
}

/// `<incarnation> <stops_within ms> <open|closed> <id>`.
fn decode_instance<'a>(it: &mut impl Iterator<Item = &'a str>) -> Option<Instance> {
    let incarnation = it.next()?.parse().ok()?;
    let stops_within = Duration::from_millis(it.next()?.parse().ok()?);
    let closed = match it.next()? {
        "open" => false,
        "closed" => true,
        _ => return None,
    };
    let id = it.next().filter(|id| !id.is_empty())?.to_owned();
    Some(Instance {
        id,
        incarnation,
        stops_within,
        closed,
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
    pub(super) fn encode(&self) -> String {
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
        if let Some(i) = &self.instance {
            let state = if i.closed { "closed" } else { "open" };
            let ms = i.stops_within.as_millis();
            let _ = write!(out, " {STATIC_TAG} {} {ms} {state} {}", i.incarnation, i.id);
        }
        out
    }
}

/// The metadata of a freed slot.
pub(crate) fn encode_free(member: &str, counter: i64, reason: FreeReason) -> String {
    format!("{FREE_TAG} {member} {counter} {}", reason.as_str())
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
            instance: None,
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
            instance: None,
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

    #[test]
    fn a_static_registration_round_trips_and_older_readers_ignore_its_tail() {
        let r = Registration {
            member: "m-2".into(),
            counter: 9,
            topics: ["t".to_owned()].into(),
            holds: tps(&[("t", 0), ("t", 1)]),
            claims: BTreeSet::new(),
            instance: Some(Instance {
                id: "billing-a:1".into(),
                incarnation: 3,
                stops_within: Duration::from_millis(1500),
                closed: true,
            }),
        };
        let text = r.encode();
        assert_eq!(text, "sfm1 m-2 t t:0-1 . static 3 1500 closed billing-a:1");
        assert_eq!(Slot::decode(9, Some(&text)), Slot::Member(r.clone()));
        // A reader that stops after the claims sees a dynamic member.
        let Slot::Member(mut plain) = Slot::decode(9, Some("sfm1 m-2 t t:0-1 . later 1 2")) else {
            panic!("an unknown tail must not make the slot foreign");
        };
        assert_eq!(plain.instance, None);
        plain.instance = r.instance.clone();
        assert_eq!(plain, r);
        assert_eq!(
            Slot::decode(9, Some("sfm1 m-2 t t:0-1 . static 3 x open a")),
            Slot::Foreign
        );
        let mut newer = r.clone();
        newer.member = "m-1".into();
        newer.instance.as_mut().unwrap().incarnation = 4;
        assert!(newer.supersedes(&r) && !r.supersedes(&newer));
        newer.instance.as_mut().unwrap().id = "other".into();
        assert!(!newer.supersedes(&r));
    }
}
