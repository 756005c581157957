//! Runs the built `stellflow` binary against an embedded broker and a loopback sim broker.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn stellflow(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(args)
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run stellflow");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = stellflow(args, stdin);
    assert!(
        out.status.success(),
        "stellflow {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The exit code and the single stderr line of a failing run.
fn err(args: &[&str]) -> (i32, String) {
    let out = stellflow(args, None);
    assert!(!out.status.success(), "stellflow {args:?} should fail");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with('(')).collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    (out.status.code().unwrap(), lines[0].to_owned())
}

#[test]
fn demo_runs_end_to_end_on_an_embedded_broker() {
    let out = ok(&["demo"], None);
    assert!(out.contains("every record came back exactly once"), "{out}");
}

#[test]
fn topics_produce_consume_offsets_against_a_broker() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr().to_string();
    let b = ["--bootstrap", addr.as_str()];
    let with =
        |rest: &[&str]| -> Vec<String> { b.iter().chain(rest).map(|s| (*s).to_owned()).collect() };
    let run = |rest: &[&str], stdin: Option<&str>| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args, stdin)
    };
    let fails = |rest: &[&str]| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        err(&args)
    };

    let out = run(&["topics", "create", "lines", "--partitions", "3"], None);
    assert!(
        out.contains("created topic lines with 3 partition(s)"),
        "{out}"
    );
    assert!(run(&["topics", "list"], None).contains("lines\t3 partition(s)"));
    assert!(run(&["topics", "describe", "lines"], None).contains("partition   2  leader 1"));

    let n = 5000;
    let input: String = (0..n)
        .map(|i| format!("key{}:value {i}\n", i % 7))
        .collect();
    run(
        &["produce", "lines", "--key-separator", ":", "--acks", "1"],
        Some(&input),
    );

    let out = run(
        &["consume", "lines", "--count", &n.to_string(), "--print-key"],
        None,
    );
    let mut got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), n);
    // Per key, the order is the produced order.
    for k in 0..7 {
        let key = format!("key{k}\t");
        let seq: Vec<&str> = got
            .iter()
            .copied()
            .filter(|l| l.starts_with(&key))
            .collect();
        let want: Vec<String> = (0..n)
            .filter(|i| i % 7 == k)
            .map(|i| format!("key{k}\tvalue {i}"))
            .collect();
        assert_eq!(seq, want);
    }
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), n);

    let json = run(
        &["consume", "lines", "-p", "0", "--count", "1", "--json"],
        None,
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["partition"], 0);
    assert!(v["value"].as_str().unwrap().starts_with("value "));

    // A group commits what it printed; offsets shows it.
    run(
        &["consume", "lines", "-g", "g1", "-p", "1", "--count", "3"],
        None,
    );
    let out = run(&["offsets", "lines", "--group", "g1"], None);
    let row = out.lines().find(|l| l.starts_with("lines-1")).unwrap();
    assert!(row.ends_with("0#3"), "{out}");
    let row = out.lines().find(|l| l.starts_with("lines-0")).unwrap();
    assert!(row.trim_end().ends_with('-'), "{out}");
    assert!(
        row.split_whitespace()
            .nth(2)
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );

    let (code, line) = fails(&["consume", "nope", "--count", "1"]);
    assert_eq!(code, 1);
    assert!(
        line.contains("topic nope is unknown to every broker"),
        "{line}"
    );
    let (code, line) = fails(&["consume", "nope", "-g", "g1"]);
    assert_eq!(code, 1);
    assert!(
        line.contains("topic nope is unknown to every broker"),
        "{line}"
    );
    let (_, line) = fails(&["produce", "nope"]);
    assert!(line.contains("unknown topic"), "{line}");
    assert!(run(&["api-versions"], None).contains("Produce"));
    assert!(run(&["cluster"], None).contains("broker   1"));
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let (code, line) = err(&["topics", "create"]);
    assert_eq!(code, 2);
    assert!(line.contains("required"), "{line}");
    let (code, line) = err(&["produce", "t", "--acks", "7"]);
    assert_eq!(code, 2);
    assert!(line.contains("--acks"), "{line}");
    let (code, line) = err(&["topics", "create", "../escape"]);
    assert_eq!(code, 1);
    assert!(line.contains("topic name"), "{line}");
}

#[test]
fn unreachable_broker_fails_fast_with_one_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let started = std::time::Instant::now();
    let (code, line) = err(&["--bootstrap", &addr, "cluster"]);
    assert_eq!(code, 1);
    assert!(
        line.contains("unreachable") && line.contains(&addr),
        "{line}"
    );
    // Below the default 10 s request timeout: it did not wait for one.
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
}

#[test]
fn perf_reports_throughput_and_latency() {
    let out = ok(
        &[
            "perf",
            "produce",
            "--num-records",
            "3000",
            "--record-size",
            "100",
            "--acks",
            "1",
        ],
        None,
    );
    assert!(
        out.contains("3000 records sent") && out.contains("ms 99.9th"),
        "{out}"
    );
    let out = ok(
        &[
            "perf",
            "consume",
            "--messages",
            "3000",
            "--record-size",
            "100",
        ],
        None,
    );
    assert!(
        out.contains("3000 records consumed") && out.contains("MB/sec"),
        "{out}"
    );
    let latency = out.lines().find(|l| l.starts_with("end-to-end latency"));
    assert!(
        latency.is_some_and(|l| l.contains("ms avg latency") && l.contains("ms 99.9th")),
        "{out}"
    );
}

#[test]
fn perf_consume_reads_through_views_by_default_and_names_its_path() {
    // Every path reads the same 3000 records of 100 B (the embedded broker fills the topic).
    for (args, path) in [
        (
            &[][..],
            "perf consume path: views (poll_blobs + FetchedBlob::next_view)",
        ),
        (&["--path", "blobs"][..], "perf consume path: blobs"),
        (&["--blobs"][..], "perf consume path: blobs"),
        (
            &["--path", "records"][..],
            "perf consume path: records (poll",
        ),
    ] {
        let mut all = vec![
            "perf",
            "consume",
            "--messages",
            "3000",
            "--record-size",
            "100",
        ];
        all.extend_from_slice(args);
        let out = ok(&all, None);
        assert!(out.contains(path), "{args:?}: {out}");
        assert!(
            out.contains("3000 records consumed, 0.30 MB"),
            "{args:?}: {out}"
        );
    }
}

#[test]
fn perf_raw_ceiling_sends_whole_prebuilt_blobs_and_reads_them_back() {
    // 100-byte values in 4 KiB blobs: a few dozen records a blob, the count rounded up to
    // whole blobs.
    let out = ok(
        &[
            "perf",
            "produce",
            "--raw",
            "--num-records",
            "3000",
            "--record-size",
            "100",
            "--batch-size",
            "4096",
            "--acks",
            "1",
        ],
        None,
    );
    let sent: u64 = out
        .split(" records sent")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no record count: {out}"));
    assert!((3000..3040).contains(&sent), "{out}");
    assert!(out.contains("MB/sec") && out.contains("ms 99.9th"), "{out}");
    // The embedded broker is filled by the producer; the raw reader counts every record of
    // its blobs from their headers, up to the high watermark.
    let out = ok(
        &[
            "perf",
            "consume",
            "--raw",
            "--raw-entries",
            "3",
            "--raw-in-flight",
            "2",
            "--messages",
            "3000",
            "--record-size",
            "100",
            "--partitions",
            "2",
        ],
        None,
    );
    assert!(
        out.contains("3000 records consumed, 0.30 MB") && out.contains("records/sec"),
        "{out}"
    );
}

/// Decodes standard base64 with padding (the test's own decoder, to check the CLI's encoder).
fn unbase64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64 digit");
        bits = bits << 6 | v as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

#[test]
fn consume_json_is_lossless_for_binary_keys_and_values() {
    use stellflow_blocking::{Client, ClientConfig, Record, Target};
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr().to_string();
    let client = Client::connect(ClientConfig::new(&addr).unwrap()).unwrap();
    client.admin().create_topic("bin", 1, Target::Any).unwrap();
    let binary_key: &[u8] = &[0xff, 0x00, b'k'];
    let binary_value: &[u8] = &[0x00, 0x9f, 0x92, 0x96, 0xff, b'\n', b'"'];
    let producer = client.producer();
    let records = [
        Record::new("bin", binary_value.to_vec()).with_key(binary_key.to_vec()),
        Record::new("bin", "plain \"text\" é\n"),
        Record {
            value: None,
            ..Record::new("bin", "").with_key("gone")
        },
    ];
    for r in records {
        producer.send(r).unwrap();
    }
    drop(producer);
    drop(client);

    let out = ok(
        &[
            "--bootstrap",
            &addr,
            "consume",
            "bin",
            "--count",
            "3",
            "--json",
        ],
        None,
    );
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    let (first, second, third) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!(unbase64(first["key_base64"].as_str().unwrap()), binary_key);
    assert_eq!(
        unbase64(first["value_base64"].as_str().unwrap()),
        binary_value
    );
    assert!(
        first.get("value").is_none() && first.get("key").is_none(),
        "{first}"
    );
    assert_eq!(second["value"], "plain \"text\" é\n");
    assert_eq!(second["key"], serde_json::Value::Null);
    assert!(second.get("value_base64").is_none(), "{second}");
    assert_eq!(third["key"], "gone");
    assert_eq!(third["value"], serde_json::Value::Null);
    assert_eq!(
        (first["offset"].as_i64(), third["offset"].as_i64()),
        (Some(0), Some(2))
    );

    // Plain output with --print-key writes the raw bytes.
    let out = stellflow(
        &[
            "--bootstrap",
            &addr,
            "consume",
            "bin",
            "--count",
            "1",
            "--print-key",
        ],
        None,
    );
    assert!(out.status.success());
    let want: Vec<u8> = [binary_key, b"\t", binary_value, b"\n"].concat();
    assert_eq!(out.stdout, want);
}

/// `consume` writes what it printed whenever a poll comes back empty: a program reading its
/// pipe sees a live topic's records at once, not when the output buffer fills or the command
/// ends (the consumer here is killed, so nothing would be flushed at its exit).
#[test]
fn consume_flushes_its_output_when_a_poll_comes_back_empty() {
    use std::io::BufRead;
    let (_server, addr) = common::sim_with_topic("live");
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args([
            "--bootstrap",
            &addr,
            "consume",
            "live",
            "--idle-timeout",
            "0",
        ])
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run stellflow");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let config = stellflow_blocking::ClientConfig::new(&addr).unwrap();
    let producer = stellflow_blocking::Producer::connect(config).unwrap();
    for value in ["one", "two", "three"] {
        producer
            .send(stellflow_blocking::Record::new("live", value))
            .unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 3 {
        // Generous for a loaded machine: without the flush nothing ever comes.
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(Ok(line)) => got.push(line),
            _ => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got, ["one", "two", "three"]);
}
