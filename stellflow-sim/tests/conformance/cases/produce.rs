//! Produce (PROTOCOL.md §3.3, §4.1, §4.5).

use super::super::client::Hdr;
use super::super::*;
use bytes::{BufMut, BytesMut};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "produce_one_offset_per_blob",
            section: "3.3, 4.1",
            run: one_offset_per_blob,
        },
        Case {
            name: "produce_repeated_partition_gets_consecutive_offsets",
            section: "3.3",
            run: repeated_partitions,
        },
        Case {
            name: "produce_acks_0_is_answered_like_acks_1",
            section: "3.3, 0.7",
            run: acks_zero_answered,
        },
        Case {
            name: "produce_acks_outside_set_is_3_without_append",
            section: "3.3",
            run: invalid_acks,
        },
        Case {
            name: "produce_empty_or_null_records_is_14",
            section: "3.3, 1.4",
            run: empty_records,
        },
        Case {
            name: "produce_auto_creates_only_the_partition_written",
            section: "3.3, 8 item 21",
            run: auto_create_single_partition,
        },
        Case {
            name: "produce_opaque_and_plain_srfb_never_deduplicated",
            section: "3.3.2, 4.3",
            run: no_dedupe_for_opaque,
        },
        Case {
            name: "produce_response_bytes_match_example_c",
            section: "4.5",
            run: example_c_bytes,
        },
    ]
}

fn one_offset_per_blob(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let mut two_batches = v1_batch(b"first record");
    two_batches.extend_from_slice(&v1_batch(b"second record"));
    let blobs: Vec<Vec<u8>> = vec![
        two_batches,
        b"abc".to_vec(),
        Srfb {
            record_count: 99,
            ..Srfb::plain(b"one record, count 99")
        }
        .encode(),
        vec![7u8; 10_000],
    ];
    for (i, blob) in blobs.iter().enumerate() {
        let p = produce_raw(&mut c, &t, 0, blob)?;
        expect_appended(&p, i as i64, &format!("blob {i}"))?;
    }
    ensure_eq!(
        log_end(&mut c, &t, 0)?,
        blobs.len() as i64,
        "log end offset"
    );
    for (i, blob) in blobs.iter().enumerate() {
        let f = fetch(&mut c, &t, 0, i as i64, 1)?;
        ensure_eq!(f.error, 0, "Fetch errorCode");
        ensure!(
            records(&f)? == *blob,
            "blob {i} not returned byte-identical"
        );
    }
    Ok(())
}

/// `(topic, [(partition, errorCode, baseOffset)])` per response entry.
type Summary = Vec<(Option<String>, Vec<(i32, i16, i64)>)>;

fn repeated_partitions(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let (t, u) = (ctx.name("t"), ctx.name("u"));
    let body = produce_req(
        None,
        1,
        30_000,
        &[
            (
                &t,
                vec![
                    (0, Some(&b"a"[..])),
                    (0, Some(&b"b"[..])),
                    (1, Some(&b"c"[..])),
                ],
            ),
            (&u, vec![(0, Some(&b"e"[..]))]),
            (&t, vec![(0, Some(&b"d"[..]))]),
        ],
    );
    let r = c.call(PRODUCE, &body)?;
    r.expect_ok_body(0)?;
    let v = parse_produce(&r)?;
    let got: Summary = v
        .into_iter()
        .map(|(n, ps)| {
            (
                n,
                ps.iter()
                    .map(|p| (p.partition, p.error, p.base_offset))
                    .collect(),
            )
        })
        .collect();
    ensure_eq!(
        got,
        vec![
            (Some(t.clone()), vec![(0, 0, 0), (0, 0, 1), (1, 0, 0)]),
            (Some(u.clone()), vec![(0, 0, 0)]),
            (Some(t.clone()), vec![(0, 0, 2)]),
        ],
        "responses in request order and multiplicity"
    );
    let f = fetch(&mut c, &t, 0, 0, 1 << 20)?;
    ensure_eq!(
        records(&f)?,
        b"abd".to_vec(),
        "partition 0 holds a, b, d in order"
    );
    Ok(())
}

fn acks_zero_answered(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    // acks 0 gets a full response, then acks 1, then acks -1 with timeouts 0 and negative
    // (single replica: the high watermark advances at once).
    for (i, (acks, timeout)) in [(0i16, 30_000), (1, 30_000), (-1, 0), (-1, -5), (0, 0)]
        .into_iter()
        .enumerate()
    {
        let r = c.call(
            PRODUCE,
            &produce_req(None, acks, timeout, &[(&t, vec![(0, Some(&b"x"[..]))])]),
        )?;
        let p = parse_produce_one(&r)?;
        expect_appended(&p, i as i64, &format!("acks {acks} timeoutMs {timeout}"))?;
    }
    Ok(())
}

fn invalid_acks(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let fresh = ctx.name("fresh");
    for acks in [2i16, -2, 100, i16::MIN] {
        let r = c.call(PRODUCE, &produce_one(&fresh, 0, acks, b"x"))?;
        ensure_eq!(
            r.error_code,
            0,
            "header errorCode (errors are per partition)"
        );
        expect_rejected(&parse_produce_one(&r)?, 3, &format!("acks {acks}"))?;
    }
    // Rejected before the partition lookup: nothing auto-created.
    assert_topic_unknown(&mut c, &fresh)?;
    // On an existing partition nothing is appended either.
    let t = ctx.name("t");
    produce_ok(&mut c, &t, 0, b"x")?;
    let p = parse_produce_one(&c.call(PRODUCE, &produce_one(&t, 0, 5, b"y"))?)?;
    expect_rejected(&p, 3, "acks 5 on an existing partition")?;
    ensure_eq!(log_end(&mut c, &t, 0)?, 1, "log end after rejected acks");
    Ok(())
}

fn empty_records(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let fresh = ctx.name("fresh");
    let cases: Vec<(i16, Option<&[u8]>, &str)> = vec![
        (1, Some(&[][..]), "empty records"),
        (1, None, "null records"),
        (-1, Some(&[][..]), "empty records, acks -1"),
        (7, None, "null records with invalid acks (14 wins over 3)"),
        (
            7,
            Some(&[][..]),
            "empty records with invalid acks (14 wins over 3)",
        ),
    ];
    for (acks, rec, what) in cases {
        let r = c.call(
            PRODUCE,
            &produce_req(None, acks, 1000, &[(&fresh, vec![(0, rec)])]),
        )?;
        ensure_eq!(r.error_code, 0, "header errorCode");
        expect_rejected(&parse_produce_one(&r)?, 14, what)?;
    }
    // records length −5 reads as null.
    let mut body = BytesMut::new();
    stellflow_proto::wire::put_nstring(&mut body, None);
    body.put_i16(1);
    body.put_i32(1000);
    body.put_i32(1);
    stellflow_proto::wire::put_nstring(&mut body, Some(&fresh));
    body.put_i32(1);
    body.put_i32(0);
    body.put_i32(-5);
    let r = c.call(PRODUCE, &body)?;
    expect_rejected(&parse_produce_one(&r)?, 14, "records length -5")?;
    assert_topic_unknown(&mut c, &fresh)?;
    Ok(())
}

fn auto_create_single_partition(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let p = produce_raw(&mut c, &t, 7, b"seven")?;
    expect_appended(&p, 0, "first Produce to partition 7 of a new topic")?;
    let md = metadata(&mut c, &[&t])?;
    let me = md.brokers.first().ok_or("no brokers")?.id;
    let topic = md
        .topic(&t)
        .ok_or("auto-created topic missing from Metadata")?;
    ensure_eq!(topic.error, 0, "topic errorCode");
    ensure_eq!(
        topic.partitions,
        vec![PartMd {
            error: 0,
            partition: 7,
            leader: me,
            epoch: 0,
            replicas: vec![me],
            isr: vec![me],
            offline: vec![],
        }],
        "only partition 7 exists, led by this broker"
    );
    let f = fetch(&mut c, &t, 0, 0, 1000)?;
    ensure_eq!(
        (
            f.error,
            f.high_watermark,
            f.log_start,
            f.last_stable,
            records(&f)?.len()
        ),
        (10, 0, 0, 0, 0),
        "Fetch of partition 0 (never written)"
    );
    let lo = list_offsets(&mut c, &t, 0, -1, 1)?;
    ensure_eq!(
        (
            lo.error,
            lo.leader_epoch,
            lo.timestamp,
            lo.offset,
            lo.offsets.len()
        ),
        (10, 0, 0, 0, 0),
        "ListOffsets of partition 0"
    );
    Ok(())
}

fn no_dedupe_for_opaque(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let v1 = v1_batch(b"same");
    let plain = Srfb::plain(b"same").encode();
    // A v1 batch that carries producer fields is still opaque to the server.
    let mut v1_idem = v1_batch(b"idem");
    v1_idem[39..47].copy_from_slice(&5i64.to_be_bytes());
    v1_idem[47..49].copy_from_slice(&0i16.to_be_bytes());
    v1_idem[49..53].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c(&v1_idem[17..]);
    v1_idem[13..17].copy_from_slice(&crc.to_be_bytes());
    let blobs = [&v1, &v1, &plain, &plain, &v1_idem, &v1_idem];
    for (expected, blob) in blobs.into_iter().enumerate() {
        ensure_eq!(
            produce_ok(&mut c, &t, 0, blob)?,
            expected as i64,
            "offset of a re-sent blob"
        );
    }
    Ok(())
}

fn example_c_bytes(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    // Example A with producerId -1 (an idempotent id could collide on a live broker).
    let blob = Srfb::plain(b"hello").encode();
    ensure_eq!(blob.len(), 42, "SRFB blob size");
    ensure_eq!(
        &blob[33..37],
        &[0x36, 0x10, 0xa6, 0x86][..],
        "CRC-32(\"hello\")"
    );
    let body = produce_req(None, 1, 30_000, &[(&t, vec![(0, Some(&blob[..]))])]);
    let h = Hdr::new(PRODUCE, 7, Some("c1"));
    c.send(&h, &body)?;
    let mut expected = BytesMut::new();
    let mut resp = BytesMut::new();
    resp.put_i32(7);
    resp.put_i16(2);
    resp.put_i16(0);
    resp.put_i32(0);
    resp.put_i32(1);
    stellflow_proto::wire::put_nstring(&mut resp, Some(&t));
    resp.put_i32(1);
    resp.put_i32(0);
    resp.put_i16(0);
    resp.put_i64(0);
    resp.put_i32(0);
    resp.put_i64(-1);
    resp.put_i64(0);
    expected.put_u32(resp.len() as u32);
    expected.put_slice(&resp);
    let r = c.recv()?;
    let mut got = BytesMut::new();
    got.put_u32(r.frame_length);
    got.put_i32(r.correlation_id);
    got.put_i16(r.header_version);
    got.put_i16(r.error_code);
    got.put_i32(r.throttle_time_ms);
    got.put_slice(&r.body);
    ensure_eq!(
        got.to_vec(),
        expected.to_vec(),
        "Produce response frame bytes"
    );
    let f = fetch(&mut c, &t, 0, 0, 1 << 20)?;
    ensure_eq!(
        (f.error, f.high_watermark, f.last_stable, f.log_start),
        (0, 1, 1, 0),
        "Fetch after the append"
    );
    ensure!(records(&f)? == blob, "Fetch returns exactly the 42 bytes");
    ensure_eq!(
        produce_ok(&mut c, &t, 0, &blob)?,
        1,
        "second Produce baseOffset"
    );
    Ok(())
}
