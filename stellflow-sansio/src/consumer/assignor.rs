//! The sticky assignment every group member computes from the same registry view: balanced
//! per topic, moving as few partitions as possible, and a function of its inputs only (member
//! ids, subscriptions, what each holds, the topic's partitions), so that members that see the
//! same membership compute the same owners.

use super::TopicPartition;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// One live member as the assignment sees it.
#[derive(Debug)]
pub(crate) struct MemberInput<'a> {
    /// The member id (the order that breaks every tie).
    pub id: &'a str,
    /// Subscribed topics.
    pub topics: &'a BTreeSet<String>,
    /// Partitions it holds or claims now (what stickiness keeps).
    pub current: BTreeSet<&'a TopicPartition>,
}

/// The partitions of `topic` (`partitions`, sorted) for each member, given every live
/// member.
///
/// Per topic: the `n` partitions go to the `m` subscribed members, `n / m` each and one more
/// to `n % m` of them — those that hold the most of the topic now (then the smallest ids).
/// Each member keeps what it holds up to its share (a partition listed by two keeps the
/// smaller id); the rest go, smallest partition first, to the members below their share in
/// id order. An assignment that every member already holds is its own result, so a stable
/// group moves nothing.
pub(crate) fn assign_topic(
    topic: &str,
    partitions: &[TopicPartition],
    members: &[MemberInput<'_>],
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut eligible: Vec<&MemberInput<'_>> = members
        .iter()
        .filter(|m| m.topics.contains(topic))
        .collect();
    eligible.sort_by(|a, b| a.id.cmp(b.id));
    let mut out: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
    if eligible.is_empty() || partitions.is_empty() {
        return out;
    }
    // What each member holds of this topic, in partition order: the work is the members'
    // holdings and the partitions once each, whatever the number of members.
    let kept: Vec<Vec<&TopicPartition>> = (eligible.iter())
        .map(|m| {
            (m.current.iter().copied())
                .filter(|tp| &*tp.topic == topic && partitions.binary_search(tp).is_ok())
                .collect()
        })
        .collect();
    let (n, count) = (partitions.len(), eligible.len());
    let (base, extra) = (n / count, n % count);
    let mut by_holding: Vec<usize> = (0..count).collect();
    by_holding.sort_by(|a, b| {
        (kept[*b].len())
            .cmp(&kept[*a].len())
            .then(eligible[*a].id.cmp(eligible[*b].id))
    });
    let mut quota = vec![base; count];
    for i in by_holding.iter().take(extra) {
        quota[*i] += 1;
    }
    let mut taken: HashSet<&TopicPartition> = HashSet::with_capacity(n);
    let mut owned: Vec<Vec<TopicPartition>> = vec![Vec::new(); count];
    for (i, held) in kept.iter().enumerate() {
        for tp in held {
            if owned[i].len() >= quota[i] {
                break;
            }
            if taken.insert(tp) {
                owned[i].push((*tp).clone());
            }
        }
    }
    let mut next = 0;
    for tp in partitions {
        if taken.contains(tp) {
            continue;
        }
        while next < count && owned[next].len() >= quota[next] {
            next += 1;
        }
        let Some(list) = owned.get_mut(next) else {
            break;
        };
        list.push(tp.clone());
    }
    for (i, list) in owned.into_iter().enumerate() {
        out.insert(eligible[i].id.to_owned(), list);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(n: i32) -> Vec<TopicPartition> {
        (0..n).map(|p| TopicPartition::new("t", p)).collect()
    }

    fn run(n: i32, members: &[(&str, Vec<i32>)]) -> BTreeMap<String, Vec<i32>> {
        let topics: BTreeSet<String> = ["t".to_owned()].into();
        let all = parts(n);
        let inputs: Vec<MemberInput<'_>> = members
            .iter()
            .map(|(id, held)| MemberInput {
                id,
                topics: &topics,
                current: all
                    .iter()
                    .filter(|tp| held.contains(&tp.partition))
                    .collect(),
            })
            .collect();
        assign_topic("t", &all, &inputs)
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().map(|tp| tp.partition).collect()))
            .collect()
    }

    #[test]
    fn fresh_group_is_balanced_and_complete() {
        let a = run(6, &[("c", vec![]), ("a", vec![]), ("b", vec![])]);
        assert_eq!(a["a"], [0, 1]);
        assert_eq!(a["b"], [2, 3]);
        assert_eq!(a["c"], [4, 5]);
        let a = run(7, &[("a", vec![]), ("b", vec![]), ("c", vec![])]);
        let sizes: Vec<usize> = a.values().map(Vec::len).collect();
        assert_eq!(sizes, [3, 2, 2]);
    }

    #[test]
    fn a_held_assignment_is_its_own_result() {
        let held = [("a", vec![4, 5, 6]), ("b", vec![0, 1]), ("c", vec![2, 3])];
        let members: Vec<(&str, Vec<i32>)> = held.iter().map(|(k, v)| (*k, v.clone())).collect();
        let a = run(7, &members);
        for (id, v) in held {
            assert_eq!(a[id], v, "{id} keeps what it holds");
        }
    }

    #[test]
    fn a_member_that_leaves_or_joins_moves_only_its_share() {
        // 12 partitions over a, b, c; c dies: a and b keep theirs and split c's.
        let a = run(12, &[("a", vec![0, 1, 2, 3]), ("b", vec![4, 5, 6, 7])]);
        assert_eq!(a["a"], [0, 1, 2, 3, 8, 9]);
        assert_eq!(a["b"], [4, 5, 6, 7, 10, 11]);
        // d joins: a and b give two each, nothing else moves.
        let a = run(
            12,
            &[
                ("a", vec![0, 1, 2, 3, 8, 9]),
                ("b", vec![4, 5, 6, 7, 10, 11]),
                ("d", vec![]),
            ],
        );
        assert_eq!(a["a"], [0, 1, 2, 3]);
        assert_eq!(a["b"], [4, 5, 6, 7]);
        assert_eq!(a["d"], [8, 9, 10, 11]);
    }

    #[test]
    fn a_partition_listed_twice_goes_to_one() {
        let a = run(2, &[("a", vec![0]), ("b", vec![0])]);
        assert_eq!(a["a"], [0]);
        assert_eq!(a["b"], [1]);
    }

    #[test]
    fn only_subscribed_members_get_a_topic() {
        let t: BTreeSet<String> = ["t".to_owned()].into();
        let u: BTreeSet<String> = ["u".to_owned()].into();
        let all = parts(4);
        let inputs = [
            MemberInput {
                id: "a",
                topics: &u,
                current: BTreeSet::new(),
            },
            MemberInput {
                id: "b",
                topics: &t,
                current: BTreeSet::new(),
            },
        ];
        let a = assign_topic("t", &all, &inputs);
        assert_eq!(a.len(), 1);
        assert_eq!(a["b"].len(), 4);
    }
}
