//! Item 7: where a golden request vector and a golden response vector correspond, the sim's
//! answer encodes to exactly the golden response bytes.
//!
//! The vectors are read from `tests/golden/` of this package: a copy of the few cases used here,
//! taken unchanged from the full set in stellflow-proto (`stellflow-proto/tests/golden/data`),
//! so this test also runs from the sim's published tarball. Inside the repository,
//! `vendored_vectors_equal_the_proto_copy` keeps the two copies identical.

mod support;

use bytes::{Bytes, BytesMut};
use std::path::{Path, PathBuf};
use stellflow_proto::messages::*;
use stellflow_proto::wire::Wire;
use stellflow_sim::{ClusterConfig, SimCluster};
use support::{Harness, s};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Every vector file under `dir`, as paths relative to it (sorted).
fn vector_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for area in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let area = area.expect("dir entry").path();
        if !area.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&area).expect("read area") {
            let case = case.expect("dir entry").path();
            if case.extension().is_some_and(|e| e == "json") {
                files.push(case.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    files.sort();
    files
}

#[test]
fn vendored_vectors_equal_the_proto_copy() {
    let ours = vector_files(&golden_dir());
    assert_eq!(ours.len(), 27, "the vectors this test file reads");
    // The full set lives in stellflow-proto; it is beside this package only in the repository
    // (a published tarball has nothing to compare with, and its copy is the one checked here).
    let full =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../stellflow-proto/tests/golden/data");
    if !full.join("INDEX.json").exists() {
        eprintln!("golden copy check: no stellflow-proto beside this package, nothing to compare");
        return;
    }
    for file in &ours {
        let a = std::fs::read(golden_dir().join(file)).expect("read our copy");
        let b = std::fs::read(full.join(file))
            .unwrap_or_else(|e| panic!("{} is not in stellflow-proto's set: {e}", file.display()));
        assert!(
            a == b,
            "{} differs from stellflow-proto's copy",
            file.display()
        );
    }
}

fn hex(case: &str) -> Vec<u8> {
    let path = golden_dir().join(case);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    unhex(v["hex"].as_str().unwrap())
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Sends a golden request *body* as a v0 request and returns the response body bytes.
fn answer_body<R: Request>(h: &mut Harness, request_case: &str) -> Bytes {
    let body = R::from_bytes(Bytes::from(hex(request_case))).unwrap();
    let (corr, buf) = h.frame(&body);
    let frames = h.send_raw_on(h.conn, &buf);
    let f = frames.into_iter().next().expect("a response");
    assert_eq!(&f[..4], &corr.to_be_bytes());
    f.slice(12..)
}

#[test]
fn api_versions_frame_matches_golden_frame() {
    let mut h = Harness::single();
    let request = hex("frame/request_api_versions_sdk_style.json");
    let frames = h.send_raw_on(h.conn, &request);
    let mut got = (frames[0].len() as u32).to_be_bytes().to_vec();
    got.extend_from_slice(&frames[0]);
    assert_eq!(got, hex("frame/response_api_versions_full.json"));
    assert_eq!(
        &frames[0][12..],
        &hex("api_versions/response_server_default.json")[..]
    );
}

#[test]
fn produce_example_b_gives_example_c() {
    let example_b = unhex(
        "00000063 00020000 0002 00000007 00026331 ffffffff00 ffffffffffff00 ffff0000
         ffff 0001 00007530 00000001 000174 00000001 00000000 0000002a
         53524642 0001 00 0000000000000001 0000 00000000 00000001 00000005 00000005 3610a686
         68656c6c6f",
    );
    assert_eq!(example_b.len(), 103);
    let example_c = unhex(
        "00000039 00000007 0002 0000 00000000
         00000001 000174 00000001
         00000000 0000 0000000000000000 00000000
         ffffffffffffffff 0000000000000000",
    );
    let mut h = Harness::single();
    let mut buf = BytesMut::from(&example_b[..]);
    h.cluster.handle_input(h.conn, h.now, &mut buf);
    let mut out = BytesMut::new();
    assert!(h.cluster.take_replies(h.conn, &mut out));
    assert_eq!(&out[..], &example_c[..]);
}

#[test]
fn decommission_matches_golden() {
    let mut h = Harness::single();
    let got =
        answer_body::<DecommissionBrokerRequest>(&mut h, "broker_admin/request_decommission.json");
    assert_eq!(&got[..], &hex("broker_admin/response_accepted.json")[..]);
}

#[test]
fn health_check_on_fresh_broker_matches_golden() {
    let mut h = Harness::single();
    let got = answer_body::<HealthCheckRequest>(&mut h, "cluster_status/request_health_check.json");
    assert_eq!(
        &got[..],
        &hex("cluster_status/response_health_check.json")[..]
    );
}

#[test]
fn describe_cluster_with_three_brokers_matches_golden() {
    let now = std::time::Instant::now();
    let mut c = SimCluster::new(ClusterConfig::with_brokers(3), now, 1);
    c.create_topic("a", 3, 3).unwrap();
    c.create_topic("b", 3, 3).unwrap();
    let mut h = Harness::new(c, now);
    let got = answer_body::<DescribeClusterRequest>(
        &mut h,
        "cluster_status/request_describe_cluster.json",
    );
    assert_eq!(
        &got[..],
        &hex("cluster_status/response_describe_cluster.json")[..]
    );
}

#[test]
fn topic_admin_matches_golden() {
    let mut h = Harness::single();
    let got = answer_body::<CreateTopicRequest>(&mut h, "topic_admin/request_create.json");
    assert_eq!(&got[..], &hex("topic_admin/response_create.json")[..]);
    let got =
        answer_body::<AlterPartitionRequest>(&mut h, "topic_admin/request_alter_partition.json");
    assert_eq!(&got[..], &hex("topic_admin/response_alter.json")[..]);
}

#[test]
fn transactions_match_golden() {
    let mut h = Harness::single();
    let got = answer_body::<BeginTransactionRequest>(&mut h, "transaction/request_begin.json");
    assert_eq!(
        &got[..],
        &hex("transaction/response_begin_ongoing.json")[..]
    );
    let got = answer_body::<EndTransactionRequest>(&mut h, "transaction/request_end_commit.json");
    assert_eq!(
        &got[..],
        &hex("transaction/response_end_committed.json")[..]
    );
}

#[test]
fn group_answers_match_golden() {
    let mut h = Harness::single();
    let (_, j) = h.call(&JoinGroupRequest {
        group_id: s("g"),
        member_id: s("m"),
        session_timeout_ms: 10_000,
    });
    let generation_id = j.unwrap().generation_id;
    let hb = |generation_id| HeartbeatRequest {
        group_id: s("g"),
        generation_id,
        member_id: s("m"),
    };
    let (_, r) = h.call(&hb(generation_id));
    assert_eq!(
        r.unwrap().to_bytes(),
        Bytes::from(hex("heartbeat/response_ok.json"))
    );
    let (_, r) = h.call(&hb(generation_id + 1));
    assert_eq!(
        r.unwrap().to_bytes(),
        Bytes::from(hex("heartbeat/response_fenced.json"))
    );
    let (_, r) = h.call(&SyncGroupRequest {
        group_id: s("g"),
        generation_id,
        member_id: s("m"),
    });
    assert_eq!(
        r.unwrap().to_bytes(),
        Bytes::from(hex("sync_group/response_empty_assignments.json"))
    );
}

#[test]
fn golden_request_frames_are_all_answered_without_closing() {
    // Each complete golden request frame is served (the sim never closes on them).
    for case in [
        "frame/request_api_versions_sdk_style.json",
        "frame/request_produce_full.json",
        "frame/request_sync_group.json",
        "frame/request_two_pipelined_heartbeats.json",
    ] {
        let mut h = Harness::single();
        let frames = h.send_raw_on(h.conn, &hex(case));
        assert!(!frames.is_empty(), "{case}");
        assert_eq!(h.cluster.poll_closed(), None, "{case}");
    }
    // And the invalid-frame vectors close the connection without an answer.
    for case in [
        "invalid/frame_length_0xffffffff.json",
        "invalid/frame_too_long.json",
        "invalid/request_header_empty.json",
        "invalid/request_header_truncated_in_client_id.json",
    ] {
        let mut h = Harness::single();
        let bytes = hex(case);
        let framed = if case.contains("frame_") {
            bytes
        } else {
            let mut f = (bytes.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(&bytes);
            f
        };
        let frames = h.send_raw_on(h.conn, &framed);
        assert!(frames.is_empty(), "{case}");
        assert_eq!(h.cluster.poll_closed(), Some(h.conn), "{case}");
    }
}
