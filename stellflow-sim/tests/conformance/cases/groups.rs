//! OffsetCommit / OffsetFetch and the group coordinator (PROTOCOL.md §3.6–§3.11).

use super::super::client::Conn;
use super::super::*;
use std::time::Duration;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "offset_commit_accepts_anything",
            section: "3.6, 7 D20",
            run: commit_accepts_anything,
        },
        Case {
            name: "offset_fetch_never_committed_and_error_code_last",
            section: "3.7",
            run: offset_fetch,
        },
        Case {
            name: "committed_offsets_survive_delete_topic",
            section: "3.6, 3.14",
            run: offsets_survive_delete,
        },
        Case {
            name: "join_group_bumps_generation_generated_member_ids",
            section: "3.9",
            run: join_generations,
        },
        Case {
            name: "sync_group_6_byte_body_errors_mirrored",
            section: "3.10, 7 D9",
            run: sync_group,
        },
        Case {
            name: "heartbeat_19_after_another_join_1_unknown",
            section: "3.11",
            run: heartbeat,
        },
        Case {
            name: "session_timeout_clamped_lazy_expiry_19_then_1",
            section: "3.9, 3.10, 3.11",
            run: lazy_expiry,
        },
        Case {
            name: "heartbeat_refreshes_liveness_sync_group_does_not",
            section: "3.10, 3.11",
            run: liveness,
        },
        Case {
            name: "join_evicting_expired_leader_moves_leadership",
            section: "3.9",
            run: eviction_leadership,
        },
        Case {
            name: "membership_outlives_its_connection",
            section: "3.10, 3.11",
            run: membership_outlives_connection,
        },
        Case {
            name: "expiry_of_another_member_fences_a_live_member_once",
            section: "3.9, 3.11",
            run: foreign_expiry_fences,
        },
    ]
}

fn commit_accepts_anything(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let (t1, t2) = (ctx.name("nonexistent"), ctx.name("other"));
    let r = c.call(
        OFFSET_COMMIT,
        &offset_commit_req(
            &g,
            &[
                (
                    &t1,
                    vec![(0, 5, Some("m")), (3, -7, None), (0, i64::MAX, Some(""))],
                ),
                (&t2, vec![(-1, 0, Some("neg partition"))]),
            ],
        ),
    )?;
    r.expect_ok_body(0)?;
    let v = parse_offset_commit(&r)?;
    ensure_eq!(
        v,
        vec![
            (Some(t1.clone()), vec![(0, 0), (3, 0), (0, 0)]),
            (Some(t2.clone()), vec![(-1, 0)]),
        ],
        "OffsetCommit answers (request order, all 0)"
    );
    // Commit does not create the topic.
    assert_topic_unknown(&mut c, &t1)?;
    // An empty topics array gives an empty response.
    let r = c.call(OFFSET_COMMIT, &offset_commit_req(&g, &[]))?;
    ensure_eq!(r.error_code, 0, "header errorCode");
    ensure_eq!(
        r.body.to_vec(),
        vec![0u8, 0, 0, 0],
        "empty OffsetCommit body"
    );
    Ok(())
}

fn offset_fetch(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let t = ctx.name("t");
    let other = ctx.name("never");
    let r = c.call(
        OFFSET_COMMIT,
        &offset_commit_req(
            &g,
            &[(
                &t,
                vec![(0, 42, Some("meta")), (1, -7, None), (2, 3, Some(""))],
            )],
        ),
    )?;
    ensure_eq!(r.error_code, 0, "OffsetCommit header errorCode");
    let r = c.call(
        OFFSET_FETCH,
        &offset_fetch_req(&g, &[(&t, vec![0, 1, 2, 5]), (&other, vec![0])]),
    )?;
    r.expect_ok_body(0)?;
    let v = parse_offset_fetch(&r)?;
    let part = |partition, offset, metadata: Option<&str>| OffsetFetchPart {
        partition,
        offset,
        metadata: metadata.map(str::to_owned),
        error: 0,
    };
    ensure_eq!(
        v,
        vec![
            (
                Some(t.clone()),
                vec![
                    part(0, 42, Some("meta")),
                    part(1, -7, None), // null metadata reads back as null (no restart)
                    part(2, 3, Some("")),
                    part(5, -1, Some("")), // never committed
                ]
            ),
            (Some(other.clone()), vec![part(0, -1, Some(""))]),
        ],
        "OffsetFetch answers (partition, offset, metadata, errorCode last)"
    );
    // Unknown group.
    let r = c.call(
        OFFSET_FETCH,
        &offset_fetch_req(&ctx.name("nogroup"), &[(&t, vec![0])]),
    )?;
    ensure_eq!(
        parse_offset_fetch(&r)?,
        vec![(Some(t.clone()), vec![part(0, -1, Some(""))])],
        "unknown group"
    );
    // No "all partitions" mode.
    let r = c.call(OFFSET_FETCH, &offset_fetch_req(&g, &[]))?;
    ensure_eq!(r.error_code, 0, "header errorCode");
    ensure_eq!(
        r.body.to_vec(),
        vec![0u8, 0, 0, 0],
        "empty OffsetFetch body"
    );
    // A re-commit overwrites.
    c.call(
        OFFSET_COMMIT,
        &offset_commit_req(&g, &[(&t, vec![(0, 43, Some("n"))])]),
    )?;
    let r = c.call(OFFSET_FETCH, &offset_fetch_req(&g, &[(&t, vec![0])]))?;
    ensure_eq!(
        parse_offset_fetch(&r)?,
        vec![(Some(t.clone()), vec![part(0, 43, Some("n"))])],
        "re-committed offset"
    );
    Ok(())
}

fn offsets_survive_delete(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let t = ctx.name("t");
    produce_ok(&mut c, &t, 0, b"x")?;
    let r = c.call(
        OFFSET_COMMIT,
        &offset_commit_req(&g, &[(&t, vec![(0, 1, Some("done"))])]),
    )?;
    ensure_eq!(
        parse_offset_commit(&r)?,
        vec![(Some(t.clone()), vec![(0, 0)])],
        "commit"
    );
    let d = parse_topic_admin(&c.call(DELETE_TOPIC, &delete_topic_req(&t))?)?;
    ensure_eq!(d.results, vec![(0, 0, 0)], "DeleteTopic results");
    let r = c.call(OFFSET_FETCH, &offset_fetch_req(&g, &[(&t, vec![0])]))?;
    let v = parse_offset_fetch(&r)?;
    ensure_eq!(v[0].1[0].offset, 1, "committed offset after DeleteTopic");
    ensure_eq!(
        v[0].1[0].metadata.as_deref(),
        Some("done"),
        "metadata after DeleteTopic"
    );
    Ok(())
}

fn join(
    c: &mut Conn,
    g: &str,
    member: Option<&str>,
    session: i32,
) -> Result<JoinGroupResp, String> {
    let r = c.call(JOIN_GROUP, &join_group_req(g, member, session))?;
    r.expect_ok_body(0)?;
    let j = parse_join_group(&r)?;
    ensure_eq!(j.error, 0, "JoinGroup errorCode");
    Ok(j)
}

fn check_generated(id: &Option<String>) -> CaseResult {
    let id = id.as_deref().ok_or("generated memberId is null")?;
    let uuid = id
        .strip_prefix("stellflow-member-")
        .ok_or_else(|| format!("generated memberId {id:?} lacks the stellflow-member- prefix"))?;
    let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
    ensure!(
        groups == [8, 4, 4, 4, 12] && uuid.chars().all(|ch| ch == '-' || ch.is_ascii_hexdigit()),
        "generated memberId {id:?} is not stellflow-member-<uuid>"
    );
    Ok(())
}

fn join_generations(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let a = join(&mut c, &g, Some(""), 30_000)?;
    ensure_eq!(a.generation, 1, "first join of a fresh group");
    check_generated(&a.member_id)?;
    ensure_eq!(a.leader_id, a.member_id, "first member leads");
    let b = join(&mut c, &g, None, 30_000)?;
    ensure_eq!(b.generation, 2, "second join");
    check_generated(&b.member_id)?;
    ensure!(b.member_id != a.member_id, "generated ids must differ");
    ensure_eq!(b.leader_id, a.member_id, "leader unchanged");
    let a2 = join(&mut c, &g, a.member_id.as_deref(), 30_000)?;
    ensure_eq!(
        (a2.generation, a2.member_id.clone(), a2.leader_id.clone()),
        (3, a.member_id.clone(), a.member_id.clone()),
        "rejoin with own id just bumps the generation"
    );
    let m = join(&mut c, &g, Some("mm"), 30_000)?;
    ensure_eq!(
        (m.generation, m.member_id.as_deref(), m.leader_id.clone()),
        (4, Some("mm"), a.member_id.clone()),
        "explicit member id used verbatim"
    );
    let blank = join(&mut c, &g, Some("   "), 30_000)?;
    ensure_eq!(blank.generation, 5, "blank member id join");
    check_generated(&blank.member_id)?;
    Ok(())
}

fn sync(
    c: &mut Conn,
    g: &str,
    generation: i32,
    member: Option<&str>,
) -> Result<client::Resp, String> {
    c.call(SYNC_GROUP, &sync_group_req(g, generation, member))
}

fn expect_sync(r: &client::Resp, error: i16, what: &str) -> CaseResult {
    ensure_eq!(
        r.error_code,
        error,
        "{what}: header errorCode mirrors the body"
    );
    ensure_eq!(r.header_version, 2, "{what}: headerVersion");
    let mut body = error.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 0, 0, 0]);
    ensure_eq!(
        r.body.to_vec(),
        body,
        "{what}: 6-byte body {{errorCode, empty assignments}}"
    );
    ensure_eq!(
        parse_sync_group(r)?,
        SyncGroupResp {
            error,
            assignments: vec![],
        },
        "{what}: decoded body"
    );
    Ok(())
}

fn sync_group(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    // A real topic exists: assignments stay empty anyway.
    produce_ok(&mut c, &ctx.name("t"), 0, b"x")?;
    let a = join(&mut c, &g, None, 30_000)?;
    let b = join(&mut c, &g, None, 30_000)?;
    let (ma, mb) = (a.member_id.as_deref(), b.member_id.as_deref());
    expect_sync(&sync(&mut c, &g, 2, ma)?, 0, "leader, current generation")?;
    expect_sync(&sync(&mut c, &g, 2, mb)?, 0, "follower, current generation")?;
    expect_sync(&sync(&mut c, &g, 1, ma)?, 19, "old generation")?;
    expect_sync(&sync(&mut c, &g, 7, mb)?, 19, "future generation")?;
    expect_sync(&sync(&mut c, &g, 2, Some("nobody"))?, 1, "unknown member")?;
    expect_sync(&sync(&mut c, &g, 2, None)?, 1, "null member id")?;
    expect_sync(
        &sync(&mut c, &ctx.name("nogroup"), 1, ma)?,
        1,
        "unknown group",
    )?;
    Ok(())
}

fn hb(c: &mut Conn, g: &str, generation: i32, member: Option<&str>) -> Result<i16, String> {
    let r = c.call(HEARTBEAT, &heartbeat_req(g, generation, member))?;
    ensure_eq!(r.body.len(), 2, "Heartbeat body is the 2-byte errorCode");
    let body = parse_heartbeat(&r)?;
    ensure_eq!(
        r.error_code,
        body,
        "Heartbeat header errorCode mirrors the body"
    );
    Ok(body)
}

fn heartbeat(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let a = join(&mut c, &g, None, 30_000)?;
    let ma = a.member_id.as_deref();
    ensure_eq!(hb(&mut c, &g, 1, ma)?, 0, "Heartbeat of the only member");
    let b = join(&mut c, &g, None, 30_000)?;
    ensure_eq!(b.generation, 2, "generation after the second join");
    ensure_eq!(
        hb(&mut c, &g, 1, ma)?,
        19,
        "Heartbeat after another member joined"
    );
    ensure_eq!(
        hb(&mut c, &g, 2, ma)?,
        0,
        "Heartbeat with the new generation"
    );
    ensure_eq!(hb(&mut c, &g, 2, Some("nobody"))?, 1, "unknown member");
    ensure_eq!(hb(&mut c, &ctx.name("nogroup"), 1, ma)?, 1, "unknown group");
    Ok(())
}

fn lazy_expiry(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    for (i, session) in [0, -5].into_iter().enumerate() {
        let g = ctx.name(&format!("hb{i}"));
        let a = join(&mut c, &g, None, session)?;
        std::thread::sleep(Duration::from_millis(50));
        let m = a.member_id.as_deref();
        ensure_eq!(
            hb(&mut c, &g, a.generation, m)?,
            19,
            "first Heartbeat after expiry (sessionTimeoutMs {session} clamped to 1 ms)"
        );
        ensure_eq!(
            hb(&mut c, &g, a.generation, m)?,
            1,
            "second Heartbeat: member gone"
        );
    }
    let g = ctx.name("sync");
    let a = join(&mut c, &g, None, 0)?;
    std::thread::sleep(Duration::from_millis(50));
    let m = a.member_id.as_deref();
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        19,
        "SyncGroup evicting the member",
    )?;
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        1,
        "SyncGroup after eviction",
    )?;
    Ok(())
}

fn liveness(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    // Heartbeats every 150 ms keep a 400 ms session alive well past 400 ms.
    let g = ctx.name("hb");
    let a = join(&mut c, &g, None, 400)?;
    for i in 0..5 {
        std::thread::sleep(Duration::from_millis(150));
        ensure_eq!(
            hb(&mut c, &g, a.generation, a.member_id.as_deref())?,
            0,
            "Heartbeat {i} within the session"
        );
    }
    // SyncGroup does not refresh: 0 at ~200 ms, then 19 once expired (~500 ms), then 1.
    let g = ctx.name("sync");
    let a = join(&mut c, &g, None, 400)?;
    let m = a.member_id.as_deref();
    std::thread::sleep(Duration::from_millis(200));
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        0,
        "SyncGroup at ~200 ms",
    )?;
    std::thread::sleep(Duration::from_millis(300));
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        19,
        "SyncGroup at ~500 ms (session 400 ms, not refreshed by SyncGroup)",
    )?;
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        1,
        "SyncGroup after eviction",
    )?;
    Ok(())
}

fn eviction_leadership(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    let z = join(&mut c, &g, Some("zz"), 300)?;
    ensure_eq!(
        (z.generation, z.leader_id.as_deref()),
        (1, Some("zz")),
        "zz leads"
    );
    let m = join(&mut c, &g, Some("mm"), 60_000)?;
    ensure_eq!(
        (m.generation, m.leader_id.as_deref()),
        (2, Some("zz")),
        "mm joins"
    );
    let a = join(&mut c, &g, Some("aa"), 60_000)?;
    ensure_eq!(
        (a.generation, a.leader_id.as_deref()),
        (3, Some("zz")),
        "aa joins"
    );
    std::thread::sleep(Duration::from_millis(450));
    let m2 = join(&mut c, &g, Some("mm"), 60_000)?;
    ensure_eq!(
        (m2.generation, m2.leader_id.as_deref()),
        (5, Some("aa")),
        "eviction bumps once, the join once; smallest remaining id leads"
    );
    Ok(())
}

/// The session lives on the server, not in the connection: a member whose connection is gone
/// heartbeats and syncs its generation on a new one (what lets the client keep its membership
/// when the coordinator's connection dies).
fn membership_outlives_connection(ctx: &Ctx) -> CaseResult {
    let g = ctx.name("g");
    let a = {
        let mut c = ctx.conn()?;
        join(&mut c, &g, None, 30_000)?
    };
    let mut c = ctx.conn()?;
    let m = a.member_id.as_deref();
    ensure_eq!(
        hb(&mut c, &g, a.generation, m)?,
        0,
        "Heartbeat on a new connection"
    );
    expect_sync(
        &sync(&mut c, &g, a.generation, m)?,
        0,
        "SyncGroup on a new connection",
    )?;
    Ok(())
}

/// A member the live one never heard of (an earlier incarnation's, or the one a JoinGroup
/// whose answer was lost created) expires, and the eviction bumps the generation: the live,
/// heartbeating member gets 19 once although its own session never lapsed. No client can
/// avoid that rejoin, which is why the simulation's `group-session-alive` excuses it.
fn foreign_expiry_fences(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let g = ctx.name("g");
    join(&mut c, &g, Some("gg"), 300)?;
    let a = join(&mut c, &g, Some("aa"), 60_000)?;
    ensure_eq!(a.generation, 2, "live member joins");
    ensure_eq!(hb(&mut c, &g, 2, Some("aa"))?, 0, "Heartbeat before expiry");
    std::thread::sleep(Duration::from_millis(450));
    ensure_eq!(
        hb(&mut c, &g, 2, Some("aa"))?,
        19,
        "Heartbeat of the live member once the other expired"
    );
    ensure_eq!(
        hb(&mut c, &g, 3, Some("aa"))?,
        0,
        "still a member: only the generation moved (by one, for the eviction)"
    );
    Ok(())
}
