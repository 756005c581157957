//! What the client's group registry relies on (ARCHITECTURE.md, decision 19): the offset store
//! as a shared table of member slots (PROTOCOL.md §3.6, §3.7), and what JoinGroup/SyncGroup do
//! with several members that never heartbeat (§3.9–§3.11).

use super::super::client::{Conn, Hdr};
use super::super::*;
use std::time::Duration;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "registry_slots_reserved_topic_one_fetch_verbatim",
            section: "3.6, 3.7",
            run: registry_slots,
        },
        Case {
            name: "registry_of_1024_slots_with_static_registrations_in_one_fetch",
            section: "3.6, 3.7",
            run: large_registry,
        },
        Case {
            name: "offset_metadata_of_32767_bytes_stored_verbatim",
            section: "3.6, 3.7",
            run: long_metadata,
        },
        Case {
            name: "offset_commit_last_writer_wins_read_after_ack",
            section: "3.6, 3.7",
            run: last_writer_wins,
        },
        Case {
            name: "offset_commits_unanswered_at_a_reset_never_land_after_a_later_commit",
            section: "3.6, 3.7",
            run: aborted_commits,
        },
        Case {
            name: "several_joined_members_sync_empty_no_heartbeat_needed",
            section: "3.9, 3.10",
            run: several_members,
        },
    ]
}

/// The registry's topic name: a character no real topic may have, so it never meets one.
const REGISTRY: &str = "stellflow:members";

fn registry_slots(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let slots: Vec<i32> = (0..64).collect();
    let metas: Vec<String> = slots
        .iter()
        .map(|s| format!("sfm1 member-{s} t:0,1,2;u-v.w:7 ; |"))
        .collect();
    let parts: Vec<CommitPart<'_>> = slots
        .iter()
        .map(|s| {
            (
                *s,
                i64::from(*s) * 1000 + 1,
                Some(metas[*s as usize].as_str()),
            )
        })
        .collect();
    let r = c.call(OFFSET_COMMIT, &offset_commit_req(&g, &[(REGISTRY, parts)]))?;
    let v = parse_offset_commit(&r)?;
    ensure_eq!(v.len(), 1, "one topic answered");
    ensure!(
        v[0].1.iter().all(|(_, e)| *e == 0),
        "every slot accepted: {:?}",
        v[0].1
    );
    // A real partition of the same group beside it is untouched by the registry.
    let t = ctx.name("t");
    c.call(
        OFFSET_COMMIT,
        &offset_commit_req(&g, &[(&t, vec![(0, 5, Some("pos"))])]),
    )?;
    // All 64 slots (and one never written) in one OffsetFetch, in request order.
    let mut ask = slots.clone();
    ask.push(64);
    let r = c.call(
        OFFSET_FETCH,
        &offset_fetch_req(&g, &[(REGISTRY, ask), (&t, vec![0])]),
    )?;
    let v = parse_offset_fetch(&r)?;
    ensure_eq!(v.len(), 2, "two topics answered");
    ensure_eq!(
        v[0].0.as_deref(),
        Some(REGISTRY),
        "registry topic name verbatim"
    );
    ensure_eq!(v[0].1.len(), 65, "65 slots answered");
    for s in &slots {
        let p = &v[0].1[*s as usize];
        ensure_eq!(p.partition, *s, "slot order");
        ensure_eq!(p.offset, i64::from(*s) * 1000 + 1, "slot {s} offset");
        ensure_eq!(
            p.metadata.as_deref(),
            Some(metas[*s as usize].as_str()),
            "slot {s} metadata verbatim"
        );
    }
    ensure_eq!(v[0].1[64].offset, -1, "a never-written slot reads -1");
    ensure_eq!(
        v[0].1[64].metadata.as_deref(),
        Some(""),
        "and empty metadata"
    );
    ensure_eq!(
        v[1].1[0].offset,
        5,
        "the group's real commit beside the registry"
    );
    // The registry's name made no topic.
    assert_topic_unknown(&mut c, &t)?;
    Ok(())
}

/// The most slots a group's registry may have (`consumer.max_group_members` = 1024), each a
/// static member's registration (its instance tail: spaces, a colon in the id), written
/// 128 at a time and read back in one OffsetFetch, in request order and verbatim; a slot
/// rewritten in between reads its last value.
fn large_registry(ctx: &Ctx) -> CaseResult {
    const SLOTS: i32 = 1024;
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let meta = |s: i32, round: i64| {
        format!(
            "sfm1 stellflow-member-{s:08} orders orders:{s} . static {round} 3000 open host-{s}:a"
        )
    };
    for chunk in (0..SLOTS).collect::<Vec<_>>().chunks(128) {
        let metas: Vec<String> = chunk.iter().map(|s| meta(*s, 1)).collect();
        let parts: Vec<CommitPart<'_>> = (chunk.iter().zip(&metas))
            .map(|(s, m)| (*s, i64::from(*s) + 1, Some(m.as_str())))
            .collect();
        let r = c.call(OFFSET_COMMIT, &offset_commit_req(&g, &[(REGISTRY, parts)]))?;
        let v = parse_offset_commit(&r)?;
        ensure!(
            v.first()
                .is_some_and(|t| t.1.len() == chunk.len() && t.1.iter().all(|(_, e)| *e == 0)),
            "every slot of the chunk accepted: {v:?}"
        );
    }
    let again = meta(700, 2);
    c.call(
        OFFSET_COMMIT,
        &offset_commit_req(&g, &[(REGISTRY, vec![(700, 9_999, Some(again.as_str()))])]),
    )?;
    let r = c.call(
        OFFSET_FETCH,
        &offset_fetch_req(&g, &[(REGISTRY, (0..SLOTS).collect())]),
    )?;
    let v = parse_offset_fetch(&r)?;
    ensure_eq!(v.len(), 1, "one topic answered");
    ensure_eq!(v[0].1.len(), SLOTS as usize, "every slot answered");
    for (i, p) in v[0].1.iter().enumerate() {
        let s = i as i32;
        ensure_eq!(p.partition, s, "slot order");
        let (offset, want) = match s {
            700 => (9_999, again.clone()),
            _ => (i64::from(s) + 1, meta(s, 1)),
        };
        ensure_eq!(p.offset, offset, "slot {s} offset");
        ensure_eq!(
            p.metadata.as_deref(),
            Some(want.as_str()),
            "slot {s} verbatim"
        );
    }
    Ok(())
}

fn long_metadata(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let long: String = (0..32767)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let mid = "m".repeat(4096);
    let r = c.call(
        OFFSET_COMMIT,
        &offset_commit_req(
            &g,
            &[(
                REGISTRY,
                vec![(0, 1, Some(long.as_str())), (1, 2, Some(mid.as_str()))],
            )],
        ),
    )?;
    let v = parse_offset_commit(&r)?;
    ensure_eq!(v[0].1, vec![(0, 0), (1, 0)], "long metadata accepted");
    let r = c.call(
        OFFSET_FETCH,
        &offset_fetch_req(&g, &[(REGISTRY, vec![0, 1])]),
    )?;
    let v = parse_offset_fetch(&r)?;
    ensure_eq!(
        v[0].1[0].metadata.as_ref().map(String::len),
        Some(32767),
        "32767-byte metadata length"
    );
    ensure!(
        v[0].1[0].metadata.as_deref() == Some(long.as_str()),
        "32767-byte metadata verbatim"
    );
    ensure!(
        v[0].1[1].metadata.as_deref() == Some(mid.as_str()),
        "4096-byte metadata verbatim"
    );
    Ok(())
}

fn last_writer_wins(ctx: &Ctx) -> CaseResult {
    let (mut a, mut b) = (ctx.conn()?, ctx.conn()?);
    let g = ctx.name("g");
    for round in 0..20i64 {
        let (w, r) = if round % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let meta = format!("writer-{}-{round}", round % 2);
        w.call(
            OFFSET_COMMIT,
            &offset_commit_req(&g, &[(REGISTRY, vec![(3, round, Some(meta.as_str()))])]),
        )?;
        // Read on the other connection right after the answer: the write is visible.
        let v = parse_offset_fetch(
            &r.call(OFFSET_FETCH, &offset_fetch_req(&g, &[(REGISTRY, vec![3])]))?,
        )?;
        ensure_eq!(
            v[0].1[0].offset,
            round,
            "round {round}: the last write's offset"
        );
        ensure_eq!(
            v[0].1[0].metadata.as_deref(),
            Some(meta.as_str()),
            "round {round}: the last write's metadata"
        );
    }
    // Offsets may go down: the store keeps the last write, not the largest.
    a.call(
        OFFSET_COMMIT,
        &offset_commit_req(&g, &[(REGISTRY, vec![(3, -1, Some(""))])]),
    )?;
    let v =
        parse_offset_fetch(&b.call(OFFSET_FETCH, &offset_fetch_req(&g, &[(REGISTRY, vec![3])]))?)?;
    ensure_eq!(v[0].1[0].offset, -1, "an offset written lower than before");
    Ok(())
}

fn several_members(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    produce_ok(&mut c, &ctx.name("t"), 0, b"x")?;
    let mut members = Vec::new();
    for i in 0..3 {
        let r = c.call(JOIN_GROUP, &join_group_req(&g, None, 30_000))?;
        let j = parse_join_group(&r)?;
        ensure_eq!(j.error, 0, "JoinGroup {i}");
        ensure_eq!(j.generation, i + 1, "JoinGroup {i} generation");
        // Right after its own join, each member's SyncGroup succeeds and assigns nothing,
        // whether or not the members before it ever heartbeat.
        let s = parse_sync_group(&c.call(
            SYNC_GROUP,
            &sync_group_req(&g, j.generation, j.member_id.as_deref()),
        )?)?;
        ensure_eq!(s.error, 0, "SyncGroup {i} right after its join");
        ensure!(s.assignments.is_empty(), "SyncGroup {i} assigns nothing");
        members.push(j);
    }
    // The earlier members are fenced for the moved generation; the last is current.
    let fenced = c.call(
        HEARTBEAT,
        &heartbeat_req(&g, members[0].generation, members[0].member_id.as_deref()),
    )?;
    ensure_eq!(
        parse_heartbeat(&fenced)?,
        19,
        "first member's heartbeat after later joins"
    );
    let last = &members[2];
    let ok = c.call(
        HEARTBEAT,
        &heartbeat_req(&g, last.generation, last.member_id.as_deref()),
    )?;
    ensure_eq!(parse_heartbeat(&ok)?, 0, "last member's heartbeat");
    ensure!(
        members
            .iter()
            .map(|m| m.member_id.clone())
            .collect::<std::collections::HashSet<_>>()
            .len()
            == 3,
        "three distinct generated member ids"
    );
    Ok(())
}

/// Decision 19 (d): a member withdraws commits still unanswered by resetting its coordinator
/// connection. What the broker's host had not received is discarded; what it had received
/// is applied — on the real broker possibly after it answered requests of fresh connections
/// (seen: up to ~650 ms later for 50 commits pipelined on one connection, each an fsync'd
/// append, on a loaded host) and, for pipelined requests, in any order (seen: 50 applied,
/// then 48). A member has one commit on its way at a time: the case resets one such commit
/// first, then a pipelined burst. Either way the broker keeps serving, the position settles
/// within a second on one of the reset commits (or none), and a commit made on a fresh
/// connection after that wins and stays.
fn aborted_commits(ctx: &Ctx) -> CaseResult {
    let g = ctx.name("g");
    let t = ctx.name("t");
    let read = |c: &mut Conn, partition: i32| -> Result<(i64, Option<String>), String> {
        let v = parse_offset_fetch(&c.call(
            OFFSET_FETCH,
            &offset_fetch_req(&g, &[(t.as_str(), vec![partition])]),
        )?)?;
        let p = v
            .first()
            .and_then(|(_, ps)| ps.first())
            .ok_or("no partition answered")?;
        Ok((p.offset, p.metadata.clone()))
    };
    let mut b = ctx.conn()?;
    for (partition, commits) in [(1, 1i64), (0, 50)] {
        let mut a = ctx.conn()?;
        for offset in 1..=commits {
            let meta = format!("old-{offset}");
            let body = offset_commit_req(
                &g,
                &[(t.as_str(), vec![(partition, offset, Some(meta.as_str()))])],
            );
            let corr = a.corr();
            let client_id = a.client_id.clone();
            a.send(&Hdr::new(OFFSET_COMMIT, corr, client_id.as_deref()), &body)?;
        }
        a.abort()?;
        let reset = std::time::Instant::now();
        // Watch the position for a second after the reset: when did it last change?
        let first = read(&mut b, partition)?.0;
        let (mut last, mut changed, mut changes) = (first, Duration::ZERO, 0);
        while reset.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(10));
            let now = read(&mut b, partition)?.0;
            if now != last {
                (last, changed, changes) = (now, reset.elapsed(), changes + 1);
            }
        }
        ensure!(
            last == -1 || (1..=commits).contains(&last),
            "after the reset the position is unset or one of the reset commits: {last}"
        );
        ctx.note(format!(
            "{commits} commit(s) reset unanswered: first answer on a fresh connection \
             {first}, {changes} change(s) after, the last {} ms after the reset, settled at \
             {last}",
            changed.as_millis()
        ));
        let v = parse_offset_commit(&b.call(
            OFFSET_COMMIT,
            &offset_commit_req(&g, &[(t.as_str(), vec![(partition, 1000, Some("new"))])]),
        )?)?;
        ensure_eq!(
            v[0].1,
            vec![(partition, 0)],
            "the fresh connection's commit accepted"
        );
        std::thread::sleep(Duration::from_millis(300));
        let mut c = ctx.conn()?;
        ensure_eq!(
            read(&mut c, partition)?,
            (1000, Some("new".to_owned())),
            "the later commit stays the group's position"
        );
        ensure_eq!(
            read(&mut b, partition)?.0,
            1000,
            "on the committing connection too"
        );
    }
    Ok(())
}
