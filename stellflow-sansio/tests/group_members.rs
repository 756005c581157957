//! Several group members on one simulated broker, in virtual time: they converge on disjoint
//! partitions, hand a partition over only after its old owner committed and released it,
//! take over from a member that died within the session timeout and a few heartbeat
//! intervals, drop what a member paused past its session held without committing it, release
//! at once on close, and run the rebalance listener before the revocation.

mod common;

use bytes::BytesMut;
use common::group::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use stellflow_sansio::{
    Client, ClientConfig, CommitKind, ConsumerEvent, Output, Position, TopicPartition,
};

#[test]
fn three_members_converge_on_disjoint_partitions_and_deliver_each_blob_once() {
    let mut f = Fleet::new(6);
    let blobs = fill(&mut f, 6, 20);
    for _ in 0..3 {
        f.join(false, |_| {});
    }
    let ok = f.run_until(Duration::from_secs(30), |f| {
        f.settled(6, &[2, 2, 2]) && f.deliveries().len() == blobs
    });
    assert!(
        ok,
        "no convergence: {:?}",
        (0..3).map(|i| f.assignment(i)).collect::<Vec<_>>()
    );
    f.advance_disjoint(Duration::from_secs(20));
    // Every blob (3 records each) once: no blob delivered by two members, none twice.
    let d = f.deliveries();
    assert_eq!(d.len(), blobs);
    for ((tp, off), who) in &d {
        assert_eq!(who.len(), 3, "{tp}@{off} delivered by {who:?}");
        assert!(who.iter().all(|w| *w == who[0]), "{tp}@{off} by {who:?}");
    }
    // Every member saw the same three members.
    for i in 0..3 {
        let last = f.members[i]
            .events
            .iter()
            .rev()
            .find_map(|(_, _, e)| match e {
                ConsumerEvent::GroupMembers(m) => Some(m.clone()),
                _ => None,
            })
            .expect("a membership event");
        assert_eq!(last.len(), 3, "member {i} sees {last:?}");
    }
}

#[test]
fn a_handover_commits_and_releases_before_the_new_owner_starts() {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 10);
    let a = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    assert_eq!(f.assignment(a).len(), 4);
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.settled(4, &[2, 2])));
    f.advance_disjoint(Duration::from_secs(5));
    let moved = f.assignment(b);
    // A revoked, committed, released; only then did B start them.
    let (revoked_at, _) = f
        .first_event(a, |e| matches!(e, ConsumerEvent::PartitionsRevoked(p) if p.iter().all(|tp| moved.contains(tp))))
        .expect("a revoked the moved partitions");
    let (committed_at, _) = f
        .first_event(a, |e| {
            matches!(e, ConsumerEvent::CommitCompleted { kind: CommitKind::Revocation, result: Ok(p), .. }
                if p.iter().any(|(tp, _)| moved.contains(tp)))
        })
        .expect("a committed them first");
    let (assigned_at, _) = f
        .first_event(b, |e| matches!(e, ConsumerEvent::PartitionsAssigned(p) if p.iter().any(|tp| moved.contains(tp))))
        .expect("b was assigned them");
    assert!(committed_at < revoked_at && revoked_at < assigned_at);
    // B starts where A stopped: nothing delivered twice, nothing lost.
    for tp in &moved {
        assert_eq!(f.members[b].client.committed(tp), Some(Position::blob(10)));
    }
    let d = f.deliveries();
    assert_eq!(d.len(), blobs);
    assert!(
        d.values()
            .all(|w| w.len() == 3 && w.iter().all(|x| *x == a))
    );
}

#[test]
fn a_dead_members_partitions_are_taken_over_within_the_session_and_two_heartbeats() {
    let mut f = Fleet::new(6);
    for _ in 0..3 {
        f.join(false, |_| {});
    }
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(6, &[2, 2, 2])));
    fill(&mut f, 6, 5);
    f.advance(Duration::from_secs(3));
    let dead = f.assignment(2);
    let killed_at = f.now;
    f.kill(2);
    let ok = f.run_until(Duration::from_secs(30), |f| f.settled(6, &[3, 3]));
    assert!(ok, "no takeover");
    let took = f.now - killed_at;
    assert!(took <= SESSION + 2 * HEARTBEAT, "takeover after {took:?}");
    assert!(took >= SESSION - 2 * HEARTBEAT, "too early: {took:?}");
    // Records produced after the takeover reach the new owners; none lost.
    fill(&mut f, 6, 2);
    f.advance_disjoint(Duration::from_secs(10));
    let d = f.deliveries();
    assert_eq!(d.len(), 6 * 7, "every blob delivered");
    for ((tp, _), who) in &d {
        if !dead.contains(tp) {
            assert_eq!(
                who.len(),
                3,
                "{tp}: no duplicates outside the moved partitions"
            );
        }
    }
}

#[test]
fn a_member_paused_past_its_session_loses_its_partitions_and_commits_nothing_for_them() {
    let (mut f, a, b) = two_members_share_four_partitions_and_deliver();
    let b_parts = f.assignment(b);
    let old_id = f.members[b]
        .client
        .group_member()
        .map(|(m, _)| m.to_owned());
    f.pause(b);
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(5));
    let events_before = f.members[b].events.len();
    f.resume(b);
    // On its own clock, b knows its lease lapsed: it lost the partitions, committed nothing.
    let after: Vec<ConsumerEvent> = f.members[b].events[events_before..]
        .iter()
        .map(|(_, _, e)| e.clone())
        .collect();
    assert!(
        matches!(after.first(), Some(ConsumerEvent::PartitionsLost(p)) if p.iter().cloned().collect::<BTreeSet<_>>() == b_parts),
        "{after:?}"
    );
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    f.advance_disjoint(Duration::from_secs(5));
    for (_, _, e) in &f.members[b].events[events_before..] {
        if let ConsumerEvent::CommitCompleted { result: Ok(p), .. } = e {
            for (tp, pos) in p {
                assert!(
                    !b_parts.contains(tp) || f.assignment(b).contains(tp),
                    "b committed {tp} at {pos:?} after losing it"
                );
            }
        }
    }
    // It came back as a new member.
    let new_id = f.members[b]
        .client
        .group_member()
        .map(|(m, _)| m.to_owned());
    assert_ne!(old_id, new_id);
    assert_eq!(f.deliveries().len(), 4 * 10, "nothing lost");
}

#[test]
fn close_releases_the_partitions_at_once() {
    let mut f = Fleet::new(4);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[2, 2])));
    let closed_at = f.now;
    let now = f.now;
    f.members[b].client.close_consumer(now);
    assert!(f.run_until(Duration::from_secs(5), |f| {
        f.members[b]
            .events
            .iter()
            .any(|(_, _, e)| matches!(e, ConsumerEvent::Closed))
    }));
    f.members[b].alive = false;
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    let took = f.now - closed_at;
    assert!(
        took < 2 * HEARTBEAT,
        "took {took:?}, not the session timeout"
    );
}

#[test]
fn the_listener_runs_before_the_revocation_and_bounds_an_application_that_never_answers() {
    // The application commits for itself (auto-commit off): what it commits in the listener
    // is what the next owner starts from.
    let (mut f, a, b) = second_member_joins_one_that_commits_itself(true);
    assert!(f.run_until(Duration::from_secs(10), |f| {
        f.first_event(a, |e| matches!(e, ConsumerEvent::PartitionsRevoking { .. }))
            .is_some()
    }));
    let (id, parts) = f.members[a]
        .events
        .iter()
        .find_map(|(_, _, e)| match e {
            ConsumerEvent::PartitionsRevoking { id, partitions } => Some((*id, partitions.clone())),
            _ => None,
        })
        .unwrap();
    // While the application has not answered, the partitions stay a's: b does not start them.
    f.advance_disjoint(Duration::from_secs(3));
    assert!(f.assignment(b).is_empty());
    assert!(parts.iter().all(|tp| f.assignment(a).contains(tp)));
    // The application commits its own positions for them, then lets the handover go on.
    let now = f.now;
    let mine: Vec<(TopicPartition, Position)> = parts
        .iter()
        .map(|tp| (tp.clone(), Position::new(4, 1)))
        .collect();
    f.members[a].client.commit_positions(now, mine).unwrap();
    f.step();
    f.advance(Duration::from_millis(50));
    let now = f.now;
    f.members[a].client.revocation_done(now, id);
    assert!(f.run_until(Duration::from_secs(10), |f| f.settled(4, &[2, 2])));
    for tp in &parts {
        assert_eq!(
            f.members[b].client.committed(tp),
            Some(Position::new(4, 1)),
            "{tp}"
        );
    }
    // Two more members: a must give one of its two up, never answers, and the bound lets
    // the handover go on.
    f.join(false, |_| {});
    f.join(false, |_| {});
    let started = f.now;
    assert!(f.run_until(Duration::from_secs(30), |f| f.settled(4, &[1, 1, 1, 1])));
    let took = f.now - started;
    let bound = config().consumer.revocation_timeout;
    assert!(took >= bound, "a's revocation was not waited for: {took:?}");
    assert!(took <= bound + 3 * HEARTBEAT, "{took:?}");
}

/// DST finding F2: two members that write the same registry slot one after the other each
/// read their own write back and never see each other. A member must read before it writes:
/// when another member's registration sits in its slot it drops its partitions without
/// committing them (a member that never saw it may have taken them) and registers elsewhere,
/// and it never writes over the other's registration.
#[test]
fn a_member_whose_slot_another_overwrote_drops_its_partitions_and_registers_elsewhere() {
    let mut f = Fleet::new(4);
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| f.deliveries().len() == blobs));
    assert_eq!(f.assignment(a).len(), 4);
    let slots = f.registry();
    assert_eq!(slots.len(), 1, "{slots:?}");
    let (slot, _, _) = slots[0].clone();
    // Another member (one that picked the same free slot) overwrites it.
    let intruder = "sfm1 intruder t . .";
    f.write_slot(slot, 1, intruder);
    f.advance(HEARTBEAT * 2);
    let lost = f.first_event(
        a,
        |e| matches!(e, ConsumerEvent::PartitionsLost(p) if p.len() == 4),
    );
    assert!(
        lost.is_some(),
        "no PartitionsLost: {:?}",
        f.members[a].events
    );
    let slots = f.registry();
    let there = slots.iter().find(|(s, _, _)| *s == slot).cloned();
    assert_eq!(
        there,
        Some((slot, 1, intruder.to_owned())),
        "the member wrote over the other's registration: {slots:?}"
    );
    assert!(
        slots
            .iter()
            .any(|(s, _, md)| *s != slot && md.starts_with("sfm1 stellflow-member")),
        "the member did not register elsewhere: {slots:?}"
    );
    // Nothing was committed for the lost partitions between the loss and their restart.
    let (lost_seq, _) = lost.unwrap();
    let assigned_again = f.members[a]
        .events
        .iter()
        .find(|(seq, _, e)| *seq > lost_seq && matches!(e, ConsumerEvent::PartitionsAssigned(_)))
        .map(|(seq, _, _)| *seq)
        .unwrap_or(u64::MAX);
    let between = f.members[a].events.iter().filter(|(seq, _, e)| {
        *seq > lost_seq
            && *seq < assigned_again
            && matches!(e, ConsumerEvent::CommitCompleted { result: Ok(l), .. } if !l.is_empty())
    });
    assert_eq!(between.count(), 0, "committed after the loss");
    // The intruder counts as a live member of `t` until its session runs out (it never
    // refreshes): the member takes its share again at once, the rest when the intruder is
    // gone.
    assert!(f.run_until(Duration::from_secs(3), |f| f.assignment(a).len() == 2));
    assert!(f.run_until(SESSION + HEARTBEAT * 3, |f| f.assignment(a).len() == 4));
}

/// `assign` while registered frees the member's registry slot (after committing what it
/// gives up), so that the others take its partitions at once, not after its session.
#[test]
fn assign_while_registered_frees_the_slot_at_once() {
    let mut f = Fleet::new(4);
    f.sim.create_topic("u", 1, 1).unwrap();
    let blobs = fill(&mut f, 4, 5);
    let a = f.join(false, |_| {});
    let b = f.join(false, |_| {});
    assert!(f.run_until(Duration::from_secs(20), |f| {
        f.settled(4, &[2, 2]) && f.deliveries().len() == blobs
    }));
    let start = f.now;
    let now = f.now;
    f.members[a]
        .client
        .assign(now, &[TopicPartition::new("u", 0)])
        .unwrap();
    f.step();
    // Well within the session timeout (6 s): the slot's free marker releases them.
    let ok = f.run_until(HEARTBEAT * 3, |f| f.assignment(b).len() == 4);
    assert!(
        ok,
        "b holds {:?} {:?} after assign; registry {:?}",
        f.assignment(b),
        f.now - start,
        f.registry()
    );
    assert_eq!(f.assignment(a), [TopicPartition::new("u", 0)].into());
    let slots = f.registry();
    assert!(
        slots
            .iter()
            .any(|(_, _, md)| md.starts_with("sfm1-free") && md.ends_with("left")),
        "{slots:?}"
    );
    // No record delivered twice: a committed what it gave up before freeing the slot.
    for ((tp, off), who) in f.deliveries() {
        assert_eq!(who.len(), 3, "{tp}@{off} delivered by {who:?}");
    }
}

/// Was a bug (DST group seeds 1000223 and 1000784, `group-commit-monotonic`): a member closed
/// while it could not reach the coordinator kept its close commit queued past its lease, and
/// when it reached the coordinator again it wrote its stale positions over the commits of
/// the member that had taken its partitions over. A lapsed lease now ends a close too: the
/// close finishes without committing, and a commit the member made but had not written yet
/// is withdrawn.
#[test]
fn a_member_closed_and_paused_past_its_session_commits_nothing_on_its_return() {
    let (mut f, a, b) = two_members_share_four_partitions_and_deliver();
    let b_parts = f.assignment(b);
    assert_eq!(b_parts.len(), 2);
    // The application commits, then closes, and the process stops (SIGSTOP) before the
    // driver wrote anything: the commit waits in the client, the close commit behind it.
    let now = f.now;
    f.members[b].client.commit(now).unwrap();
    f.members[b].client.close_consumer(now);
    f.pause(b);
    // a takes b's partitions over once b's session is over, delivers and commits more.
    assert!(f.run_until(Duration::from_secs(30), |f| f.assignment(a).len() == 4));
    fill(&mut f, 4, 5);
    f.advance(Duration::from_secs(5));
    let a_commits: Vec<(TopicPartition, i64)> = b_parts
        .iter()
        .map(|tp| (tp.clone(), f.stored_offset(tp)))
        .collect();
    for (tp, off) in &a_commits {
        assert_eq!(*off, 10, "a committed {tp} after delivering all of it");
    }
    let events_before = f.members[b].events.len();
    f.resume(b);
    f.advance(Duration::from_secs(2));
    for (tp, off) in &a_commits {
        assert_eq!(
            f.stored_offset(tp),
            *off,
            "{tp}: b wrote over a's commit on its return"
        );
    }
    let after: Vec<&ConsumerEvent> = f.members[b].events[events_before..]
        .iter()
        .map(|(_, _, e)| e)
        .collect();
    assert!(
        after
            .iter()
            .any(|e| matches!(e, ConsumerEvent::PartitionsLost(p)
            if p.iter().cloned().collect::<BTreeSet<_>>() == b_parts)),
        "{after:?}"
    );
    assert!(
        after.iter().any(|e| matches!(e, ConsumerEvent::Closed)),
        "the close finished: {after:?}"
    );
    assert!(
        !after.iter().any(
            |e| matches!(e, ConsumerEvent::CommitCompleted { result: Ok(p), .. }
            if p.iter().any(|(tp, _)| b_parts.contains(tp)))
        ),
        "b committed a partition it had lost: {after:?}"
    );
}

/// A partition is released only once every commit of it made before the release finished: a
/// commit still queued or unanswered when the release went out could land after the new
/// owner started and overwrite its commits (a zombie commit; the server checks no
/// membership on OffsetCommit, and may execute two requests of one connection in either
/// order).
#[test]
fn a_release_waits_for_the_commits_of_the_partition_made_before_it() {
    let (mut f, a, b) = second_member_joins_one_that_commits_itself(false);
    // The application commits eagerly: two commits after every step (the second waits for
    // the first), until its partitions move.
    let mut issued: Vec<(u64, stellflow_sansio::CommitId)> = Vec::new();
    let deadline = f.now + Duration::from_secs(20);
    while f.now < deadline && !f.settled(4, &[2, 2]) {
        let now = f.now;
        for _ in 0..2 {
            let id = f.members[a].client.commit(now).unwrap();
            issued.push((f.seq, id));
        }
        f.tick(Duration::from_millis(100));
    }
    assert!(f.settled(4, &[2, 2]), "no handover");
    let moved = f.assignment(b);
    let events = &f.members[a].events;
    let (revoking, revoked) = {
        let at = |pred: &dyn Fn(&ConsumerEvent) -> bool| {
            events
                .iter()
                .find(|(_, _, e)| pred(e))
                .map(|(s, _, _)| *s)
                .expect("a revoked the moved partitions")
        };
        (
            at(&|e| {
                matches!(e, ConsumerEvent::PartitionsRevoking { partitions, .. }
                if partitions.iter().any(|tp| moved.contains(tp)))
            }),
            at(&|e| {
                matches!(e, ConsumerEvent::PartitionsRevoked(p)
                if p.iter().any(|tp| moved.contains(tp)))
            }),
        )
    };
    let completed: BTreeMap<stellflow_sansio::CommitId, u64> = events
        .iter()
        .filter_map(|(s, _, e)| match e {
            ConsumerEvent::CommitCompleted { id, .. } => Some((*id, *s)),
            _ => None,
        })
        .collect();
    let before: Vec<_> = issued.iter().filter(|(s, _)| *s < revoking).collect();
    assert!(!before.is_empty());
    for (_, id) in before {
        let done = completed.get(id).copied();
        assert!(
            done.is_some_and(|d| d < revoked),
            "commit {id:?} (made before the revocation) finished at {done:?}, after the release at {revoked}"
        );
    }
}

/// The first connect of a client, from its first drain.
fn first_connect(config: ClientConfig) -> stellflow_sansio::ConnectRequest {
    let now = Instant::now();
    let mut client = Client::new(config, now, 1).unwrap();
    let mut buf = BytesMut::new();
    loop {
        match client.poll_output(now, &mut buf) {
            Output::Connect(cr) => return cr,
            Output::Timeout(_) => panic!("no connect in the first drain"),
            _ => {}
        }
    }
}

/// Decision 19 (d): every connection of a client with a group bounds how long its host may
/// keep written bytes unacknowledged to the lease margin (`TCP_USER_TIMEOUT`), so a commit
/// of a member paused while cut off leaves the host within the margin or never; a client
/// without a group leaves the host's default.
#[test]
fn a_group_clients_connections_bound_unacknowledged_bytes_to_the_lease_margin() {
    // min(heartbeat 1 s, session 6 s / 4).
    assert_eq!(
        first_connect(config()).unacked_timeout,
        Some(Duration::from_secs(1))
    );
    let mut c = config();
    c.consumer.session_timeout = Duration::from_secs(3);
    assert_eq!(
        first_connect(c).unacked_timeout,
        Some(Duration::from_millis(750)),
        "min(heartbeat 1 s, session 3 s / 4)"
    );
    let mut c = config();
    c.consumer.group_id = None;
    assert_eq!(first_connect(c).unacked_timeout, None);
}
