//! Framing, headers, error paths and connection handling (PROTOCOL.md §1, §2, §3.1).

use super::super::client::{Conn, Hdr, put_request_header, request_frame};
use super::super::*;
use bytes::{BufMut, BytesMut};
use std::collections::BTreeMap;
use std::time::Duration;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "trace_fields_accepted",
            section: "2.1",
            run: trace_fields_accepted,
        },
        Case {
            name: "frame_length_excludes_itself",
            section: "1.2",
            run: frame_length_excludes_itself,
        },
        Case {
            name: "api_versions_lists_20_keys_and_software",
            section: "3.1, 6",
            run: api_versions_body,
        },
        Case {
            name: "response_header_version_always_2",
            section: "2.2, 2.3",
            run: header_version_always_2,
        },
        Case {
            name: "correlation_ids_echoed_including_negative",
            section: "1.1, 2.2",
            run: correlation_ids_echoed,
        },
        Case {
            name: "pipelined_requests_matched_by_correlation_id",
            section: "1.1, 0.4",
            run: pipelined_requests,
        },
        Case {
            name: "minimal_28_byte_header_accepted",
            section: "2.1",
            run: minimal_header_accepted,
        },
        Case {
            name: "short_frames_close_without_response",
            section: "1.2, 2.1",
            run: short_frames_close,
        },
        Case {
            name: "oversize_and_negative_frame_lengths_close",
            section: "1.2, 2.3",
            run: oversize_frames_close,
        },
        Case {
            name: "largest_frame_67108860_accepted",
            section: "1.2",
            run: largest_frame_accepted,
        },
        Case {
            name: "truncated_header_string_closes",
            section: "2.3",
            run: truncated_header_closes,
        },
        Case {
            name: "truncated_bodies_close_without_response",
            section: "1.4, 2.3",
            run: truncated_bodies_close,
        },
        Case {
            name: "unknown_api_key_header_only_20",
            section: "2.1, 2.3",
            run: unknown_api_key,
        },
        Case {
            name: "nonzero_version_keys_0_to_4_header_only_2",
            section: "2.3, 6",
            run: version_keys_0_4,
        },
        Case {
            name: "nonzero_version_other_keys_header_only_1",
            section: "2.3",
            run: version_other_keys,
        },
        Case {
            name: "nonzero_version_keys_7_53_54_answered_normally",
            section: "2.3, 3.8, 3.15",
            run: version_keys_7_53_54,
        },
        Case {
            name: "trailing_request_bytes_ignored",
            section: "1.4",
            run: trailing_bytes_ignored,
        },
        Case {
            name: "negative_string_length_is_null",
            section: "1.4, 3.12",
            run: negative_string_length,
        },
        Case {
            name: "invalid_utf8_name_echoed_with_replacement",
            section: "1.4, 3.2",
            run: invalid_utf8_replaced,
        },
    ]
}

fn api_versions_call(c: &mut Conn) -> Result<client::Resp, String> {
    c.call(
        API_VERSIONS,
        &api_versions_req(Some("stellflow-conformance"), Some("0"), &[]),
    )
}

fn check_api_versions(r: &client::Resp) -> CaseResult {
    r.expect_ok_body(0)?;
    let v = parse_api_versions(r)?;
    let keys: Vec<i16> = (0..=13).chain(50..=55).collect();
    let expected: Vec<(i16, i16, i16)> = keys.iter().map(|&k| (k, 0, 0)).collect();
    ensure_eq!(
        v.apis,
        expected,
        "ApiVersions ranges (20 keys in order, all [0, 0])"
    );
    ensure_eq!(
        v.name.as_deref(),
        Some("stellflow-broker"),
        "brokerSoftwareName"
    );
    ensure_eq!(
        v.version.as_deref(),
        Some("0.0.1-SNAPSHOT"),
        "brokerSoftwareVersion"
    );
    ensure_eq!(
        v.features,
        vec![
            Some("fetch.long_poll".to_owned()),
            Some("compression.none".to_owned())
        ],
        "supportedFeatures"
    );
    Ok(())
}

fn frame_length_excludes_itself(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    // The request's length excludes itself: a broker expecting 4 more bytes would stall (timeout).
    let r = api_versions_call(&mut c)?;
    // ...and so does the response's: the 197-byte body + 12-byte header give 209.
    ensure_eq!(r.frame_length, 209, "ApiVersions response frameLength");
    ensure_eq!(r.body.len(), 197, "ApiVersions response body size");
    // A header-only answer has frameLength 12 (`00 00 00 0c`).
    let r = c.call(99, &[])?;
    ensure_eq!(r.frame_length, 12, "header-only response frameLength");
    Ok(())
}

fn api_versions_body(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    check_api_versions(&api_versions_call(&mut c)?)?;
    // The request's client fields are ignored: null name and version, odd features.
    let r = c.call(
        API_VERSIONS,
        &api_versions_req(None, None, &["x", "compression.zstd"]),
    )?;
    check_api_versions(&r)?;
    Ok(())
}

fn header_version_always_2(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let body = api_versions_req(None, None, &[]);
    for (hv, flags) in [(0i16, 0i16), (1, 0), (99, 0), (-1, 0), (2, 0x7fff), (2, -1)] {
        let corr = c.corr();
        let mut h = Hdr::new(API_VERSIONS, corr, Some("hv"));
        h.header_version = hv;
        h.flags = flags;
        let r = c.call_with(&h, &body)?;
        ensure_eq!(
            r.header_version,
            2,
            "response headerVersion for request headerVersion {hv}"
        );
        check_api_versions(&r).map_err(|e| format!("headerVersion {hv} flags {flags}: {e}"))?;
    }
    // Also on a header-only error response.
    let corr = c.corr();
    let mut h = Hdr::new(77, corr, None);
    h.header_version = 0;
    c.call_with(&h, &[])?.expect_header_only(20)?;
    Ok(())
}

fn correlation_ids_echoed(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let body = find_coordinator_req(Some("g"), 0);
    for corr in [-1, i32::MIN, i32::MAX, 0, 42, 42, -7] {
        let h = Hdr::new(FIND_COORDINATOR, corr, Some("corr"));
        let r = c.call_with(&h, &body)?;
        ensure_eq!(r.correlation_id, corr, "echoed correlationId");
        r.expect_ok_body(0)?;
    }
    // Header-only error responses echo it too.
    let r = c.call_with(&Hdr::new(15, -12345, None), &[])?;
    ensure_eq!(
        r.correlation_id,
        -12345,
        "echoed correlationId on a header-only answer"
    );
    r.expect_header_only(20)?;
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Versions,
    Coordinator,
    Metadata,
    Unknown,
    Produce,
}

fn pipelined_requests(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let topic = ctx.name("t");
    let missing = ctx.name("missing");
    // Create the partition first, so the pipelined appends do not race its auto-creation.
    ensure_eq!(produce_ok(&mut c, &topic, 0, b"first")?, 0, "first offset");
    let mut expected: BTreeMap<i32, Kind> = BTreeMap::new();
    let mut wire = BytesMut::new();
    for i in 0..40i32 {
        let corr = 1000 + i * 7 - 100; // includes negative ids
        let (kind, key, body) = match i % 5 {
            0 => (
                Kind::Versions,
                API_VERSIONS,
                api_versions_req(None, None, &[]),
            ),
            1 => (
                Kind::Coordinator,
                FIND_COORDINATOR,
                find_coordinator_req(Some("g"), 0),
            ),
            2 => (Kind::Metadata, METADATA, metadata_req(&[&missing])),
            3 => (Kind::Unknown, 42, bytes::Bytes::new()),
            _ => (
                Kind::Produce,
                PRODUCE,
                produce_one(&topic, 0, 1, b"pipelined"),
            ),
        };
        expected.insert(corr, kind);
        wire.put_slice(&request_frame(&Hdr::new(key, corr, Some("pipe")), &body));
    }
    c.send_raw(&wire)?;
    let mut offsets = Vec::new();
    for _ in 0..expected.len() {
        let r = c.recv()?;
        let Some(kind) = expected.remove(&r.correlation_id) else {
            return Err(format!(
                "response with unexpected or repeated correlationId {}",
                r.correlation_id
            ));
        };
        match kind {
            Kind::Versions => check_api_versions(&r)?,
            Kind::Coordinator => {
                r.expect_ok_body(0)?;
                parse_find_coordinator(&r)?;
            }
            Kind::Metadata => {
                r.expect_ok_body(0)?;
                let md = parse_metadata(&r)?;
                ensure_eq!(md.topics.len(), 1, "pipelined Metadata topics");
                ensure_eq!(md.topics[0].error, 10, "pipelined Metadata unknown topic");
            }
            Kind::Unknown => r.expect_header_only(20)?,
            Kind::Produce => {
                let p = parse_produce_one(&r)?;
                ensure_eq!(p.error, 0, "pipelined Produce errorCode");
                offsets.push(p.base_offset);
            }
        }
    }
    offsets.sort_unstable();
    ensure_eq!(
        offsets,
        (1..=8).collect::<Vec<i64>>(),
        "offsets of 8 pipelined Produce requests"
    );
    Ok(())
}

/// A request whose header carries a W3C trace id, span id and flags (what a client sends for
/// a call made inside a span) is answered like any other: the server reads the fields (and
/// only logs them) and echoes nothing of them.
fn trace_fields_accepted(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let mut header = stellflow_proto::header::RequestHeader::new(
        stellflow_proto::ApiKey(API_VERSIONS),
        41,
        Some("stellflow-conformance"),
    );
    header.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    header.span_id = Some("00f067aa0ba902b7".into());
    header.trace_flags = 1;
    let mut payload = BytesMut::new();
    stellflow_proto::Wire::encode(&header, &mut payload);
    payload.put_slice(&api_versions_req(
        Some("stellflow-conformance"),
        Some("0"),
        &[],
    ));
    c.send_raw(&super::super::client::frame(&payload))?;
    let r = c.recv()?;
    ensure_eq!(r.correlation_id, 41, "correlation id");
    check_api_versions(&r)
}

fn minimal_header_accepted(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let h = Hdr::new(API_VERSIONS, 5, None);
    let mut payload = BytesMut::new();
    put_request_header(&mut payload, &h);
    ensure_eq!(
        payload.len(),
        28,
        "size of a header with every nstring null"
    );
    let r = c.call_with(&h, &api_versions_req(None, None, &[]))?;
    check_api_versions(&r)?;
    // 28 bytes of header and nothing else: FindCoordinator v1 needs no body (§2.3).
    let mut h = Hdr::new(FIND_COORDINATOR, 6, None);
    h.api_version = 1;
    let r = c.call_with(&h, &[])?;
    r.expect_ok_body(0)?;
    ensure_eq!(
        parse_find_coordinator(&r)?.node_id,
        0,
        "FindCoordinator nodeId"
    );
    Ok(())
}

fn short_frames_close(ctx: &Ctx) -> CaseResult {
    let mut full = BytesMut::new();
    put_request_header(&mut full, &Hdr::new(API_VERSIONS, 9, None));
    for len in [0usize, 10, 27] {
        let mut c = ctx.conn()?;
        let mut f = BytesMut::new();
        f.put_u32(len as u32);
        f.put_slice(&full[..len]);
        c.send_raw(&f)?;
        c.expect_closed()
            .map_err(|e| format!("frameLength {len}: {e}"))?;
    }
    Ok(())
}

fn oversize_frames_close(ctx: &Ctx) -> CaseResult {
    for len in [
        67_108_861u32,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
        (-5i32) as u32,
        0x8000_0000,
    ] {
        let mut c = ctx.conn()?;
        let mut f = BytesMut::new();
        f.put_u32(len);
        // A plausible header after the length; the broker must not wait for the rest.
        put_request_header(&mut f, &Hdr::new(API_VERSIONS, 1, None));
        c.send_raw(&f)?;
        c.expect_closed()
            .map_err(|e| format!("frameLength {len:#x}: {e}"))?;
    }
    Ok(())
}

fn largest_frame_accepted(ctx: &Ctx) -> CaseResult {
    const MAX: usize = 67_108_860;
    let topic = ctx.name("big");
    let mut c = ctx.conn()?;
    c.set_read_timeout(Duration::from_secs(60))?;
    let h = Hdr::new(PRODUCE, 77, Some("big"));
    let mut header = BytesMut::new();
    put_request_header(&mut header, &h);
    // body = txn(2) acks(2) timeout(4) count(4) topic(2+n) count(4) partition(4) len(4) blob
    let overhead = header.len() + 2 + 2 + 4 + 4 + 2 + topic.len() + 4 + 4 + 4;
    let blob = vec![0x5a; MAX - overhead];
    let body = produce_one(&topic, 0, 1, &blob);
    ensure_eq!(header.len() + body.len(), MAX, "constructed payload size");
    let r = c.call_with(&h, &body)?;
    let p = parse_produce_one(&r)?;
    ensure_eq!(p.error, 0, "Produce in a frame of length 67108860");
    ensure_eq!(p.base_offset, 0, "baseOffset");
    ensure_eq!(
        log_end(&mut c, &topic, 0)?,
        1,
        "log end after the big append"
    );
    delete_topic(&mut c, &topic)?;
    Ok(())
}

fn truncated_header_closes(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let mut payload = BytesMut::new();
    payload.put_i16(API_VERSIONS);
    payload.put_i16(0);
    payload.put_i16(2);
    payload.put_i32(3);
    payload.put_i16(100); // clientId claims 100 bytes...
    payload.put_slice(&[b'x'; 30]); // ...but the frame ends after 30
    c.send_raw(&client::frame(&payload))?;
    c.expect_closed()
}

fn truncated_bodies_close(ctx: &Ctx) -> CaseResult {
    // Metadata with one topic announced and none present.
    let mut md = BytesMut::new();
    md.put_i32(1);
    // Produce cut in the middle of its records.
    let full = produce_one(&ctx.name("t"), 0, 1, b"0123456789");
    let produce_cut = full.slice(..full.len() - 4);
    // ApiVersions with an empty body (a v0 body must be complete).
    let bodies: Vec<(i16, bytes::Bytes)> = vec![
        (METADATA, md.freeze()),
        (PRODUCE, produce_cut),
        (API_VERSIONS, bytes::Bytes::new()),
        (JOIN_GROUP, join_group_req("g", None, 1000).slice(..5)),
        (DESCRIBE_CLUSTER, bytes::Bytes::new()),
        (HEALTH_CHECK, bytes::Bytes::new()),
    ];
    for (key, body) in bodies {
        let mut c = ctx.conn()?;
        c.send(&Hdr::new(key, 11, Some("trunc")), &body)?;
        c.expect_closed()
            .map_err(|e| format!("apiKey {key} with a truncated body: {e}"))?;
    }
    // The truncated Produce must not have created anything.
    let mut c = ctx.conn()?;
    assert_topic_unknown(&mut c, &ctx.name("t"))?;
    Ok(())
}

fn unknown_api_key(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    for key in [14i16, 15, 49, 56, 99, 100, -1, 32767, -32768] {
        for (version, body) in [
            (0i16, &[][..]),
            (3, &[1u8, 2, 3][..]),
            (-1, &[0xffu8; 40][..]),
        ] {
            let corr = c.corr();
            let mut h = Hdr::new(key, corr, Some("unknown"));
            h.api_version = version;
            let r = c.call_with(&h, body)?;
            r.expect_header_only(20)
                .map_err(|e| format!("apiKey {key} v{version}: {e}"))?;
        }
    }
    // The connection stays usable.
    check_api_versions(&api_versions_call(&mut c)?)
}

fn version_keys_0_4(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let bodies: Vec<(i16, bytes::Bytes)> = vec![
        (API_VERSIONS, api_versions_req(None, None, &[])),
        (METADATA, metadata_req(&[])),
        (PRODUCE, produce_one(&t, 0, 1, b"x")),
        (FETCH, fetch_one(&t, 0, 0, 1000)),
        (LIST_OFFSETS, list_offsets_one(&t, 0, -1, 1)),
    ];
    for (key, body) in &bodies {
        for version in [1i16, -1, 7] {
            let r = c.call_v(*key, version, body)?;
            r.expect_header_only(2)
                .map_err(|e| format!("apiKey {key} v{version}: {e}"))?;
            // Garbage bodies too: the body is not decoded.
            let r = c.call_v(*key, version, &[0xee; 3])?;
            r.expect_header_only(2)
                .map_err(|e| format!("apiKey {key} v{version} garbage body: {e}"))?;
        }
    }
    // The v1 Produce was not executed.
    assert_topic_unknown(&mut c, &t)?;
    check_api_versions(&api_versions_call(&mut c)?)
}

fn version_other_keys(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    for key in [5i16, 6, 8, 9, 10, 11, 12, 13, 50, 51, 52, 55] {
        for version in [1i16, -1] {
            let r = c.call_v(key, version, &[])?;
            r.expect_header_only(1)
                .map_err(|e| format!("apiKey {key} v{version}: {e}"))?;
        }
    }
    check_api_versions(&api_versions_call(&mut c)?)
}

fn version_keys_7_53_54(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let fc0 =
        parse_find_coordinator(&c.call(FIND_COORDINATOR, &find_coordinator_req(Some("g"), 0))?)?;
    for version in [1i16, -1, 9] {
        let r = c.call_v(FIND_COORDINATOR, version, &[])?;
        r.expect_ok_body(0)?;
        ensure_eq!(
            parse_find_coordinator(&r)?,
            fc0,
            "FindCoordinator v{version} with an empty body"
        );
    }
    let dc0 = parse_cluster(&c.call(DESCRIBE_CLUSTER, &minimal_api_versions_req())?)?;
    for key in [DESCRIBE_CLUSTER, HEALTH_CHECK] {
        for version in [1i16, -1] {
            let r = c.call_v(key, version, &[])?;
            r.expect_ok_body(0)?;
            let d = parse_cluster(&r)?;
            ensure_eq!(d.error, 0, "apiKey {key} v{version} errorCode");
            ensure_eq!(
                d.cluster_id,
                dc0.cluster_id,
                "apiKey {key} v{version} clusterId"
            );
            ensure_eq!(
                d.brokers,
                dc0.brokers,
                "apiKey {key} v{version} brokerCount"
            );
        }
    }
    Ok(())
}

fn trailing_bytes_ignored(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let mut body = BytesMut::from(&api_versions_req(None, None, &[])[..]);
    body.put_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]);
    check_api_versions(&c.call(API_VERSIONS, &body)?)?;
    let mut body = BytesMut::from(&find_coordinator_req(Some("g"), 0)[..]);
    body.put_slice(&[0; 16]);
    let r = c.call(FIND_COORDINATOR, &body)?;
    r.expect_ok_body(0)?;
    ensure_eq!(
        parse_find_coordinator(&r)?.node_id,
        0,
        "FindCoordinator nodeId"
    );
    let t = ctx.name("t");
    let mut body = BytesMut::from(&produce_one(&t, 0, 1, b"abc")[..]);
    body.put_slice(&[9; 5]);
    let p = parse_produce_one(&c.call(PRODUCE, &body)?)?;
    ensure_eq!(
        (p.error, p.base_offset),
        (0, 0),
        "Produce with trailing bytes"
    );
    let f = fetch(&mut c, &t, 0, 0, 1000)?;
    ensure_eq!(
        records(&f)?,
        b"abc".to_vec(),
        "stored blob excludes the trailing bytes"
    );
    Ok(())
}

fn negative_string_length(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    // Null clientId and null transactionalId ⇒ key "anonymous" (§3.12).
    let anon = {
        let corr = c.corr();
        let r = c.call_with(
            &Hdr::new(INIT_PRODUCER_ID, corr, None),
            &init_producer_id_req(None),
        )?;
        parse_init_pid(&r)?.producer_id
    };
    ensure_eq!(
        init_pid(&mut c, Some("anonymous"))?,
        anon,
        "transactionalId \"anonymous\" vs null clientId"
    );
    // A clientId of length −5 is null as well; so is a transactionalId of length −3.
    let mut payload = BytesMut::new();
    payload.put_i16(INIT_PRODUCER_ID);
    payload.put_i16(0);
    payload.put_i16(2);
    payload.put_i32(4242);
    payload.put_i16(-5); // clientId
    for _ in 0..2 {
        payload.put_i16(-1);
    }
    payload.put_i8(0);
    for _ in 0..3 {
        payload.put_i16(-1);
    }
    payload.put_i8(0);
    payload.put_i16(-1);
    payload.put_i16(0);
    payload.put_i16(-3); // transactionalId
    c.send_raw(&client::frame(&payload))?;
    let r = c.recv()?;
    ensure_eq!(r.correlation_id, 4242, "correlationId");
    let v = parse_init_pid(&r)?;
    ensure_eq!(
        v.producer_id,
        anon,
        "producerId for clientId length -5 (null ⇒ \"anonymous\")"
    );
    Ok(())
}

fn invalid_utf8_replaced(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let base = ctx.name("u");
    let mut body = BytesMut::new();
    body.put_i32(1);
    body.put_i16((base.len() + 2) as i16);
    body.put_slice(base.as_bytes());
    body.put_slice(&[0xff, 0xfe]);
    body.put_slice(&[0, 0, 0]);
    let r = c.call(METADATA, &body)?;
    r.expect_ok_body(0)?;
    let md = parse_metadata(&r)?;
    ensure_eq!(md.topics.len(), 1, "topics");
    ensure_eq!(
        md.topics[0].error,
        10,
        "errorCode for an unknown (invalid UTF-8) topic"
    );
    // Check the raw bytes: the echo is the decoded name re-encoded, `ef bf bd` twice.
    let mut want = Vec::new();
    want.extend_from_slice(&((base.len() + 6) as i16).to_be_bytes());
    want.extend_from_slice(base.as_bytes());
    want.extend_from_slice(&[0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd]);
    ensure!(
        r.body.windows(want.len()).any(|w| w == want.as_slice()),
        "echoed topic name is not the U+FFFD-replaced UTF-8 ({:?})",
        md.topics[0].name
    );
    Ok(())
}
