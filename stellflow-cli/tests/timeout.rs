//! `--timeout` bounds a command end to end, delivery included, and a produce that waits on a
//! leaderless partition says so on stderr at once.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn produce_to_a_leaderless_partition_says_why_at_once_and_ends_within_the_timeout() {
    let (server, addr) = common::sim_with_topic("led");
    // Restarted on its data: leader 0, Produce refused until leadership is re-asserted.
    server
        .with_cluster(|c, now| c.restart(1, now))
        .unwrap()
        .unwrap();

    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(["--bootstrap", &addr, "--timeout", "5", "produce", "led"])
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let mut lines = Vec::new();
    let mut first_note = None;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if first_note.is_none() && line.contains("has no leader") {
            first_note = Some(start.elapsed());
        }
        lines.push(line);
    }
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let text = lines.join("\n");
    assert_eq!(status.code(), Some(1), "{text}");
    // Said within a second or two, long before the timeout (generous for a loaded machine).
    let noted = first_note.unwrap_or_else(|| panic!("no leaderless note: {text}"));
    assert!(noted < Duration::from_secs(4), "noted after {noted:?}");
    assert!(
        lines[0].contains("led-0 has no leader") && lines[0].contains("restarted on its data"),
        "{text}"
    );
    // One line of error, with the reason.
    let errors: Vec<&String> = lines.iter().filter(|l| !l.starts_with('(')).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(
        errors[0].starts_with("stellflow: error:")
            && errors[0].contains("not delivered within 5s")
            && errors[0].contains("led-0 has no leader"),
        "{text}"
    );
    // Ends with the 5 s timeout, not the library's 120 s delivery timeout.
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(20),
        "took {took:?}"
    );
}

/// An explicit `--timeout` bounds a whole `produce` run, however healthy: with an
/// endless input it stops reading and ends within the timeout plus a second, non-zero, saying
/// how many records it read and that the timeout ended it. Without the bound it would read
/// forever.
#[test]
fn an_explicit_timeout_bounds_a_long_healthy_produce() {
    let (_server, addr) = common::sim_with_topic("endless");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(["--bootstrap", &addr, "--timeout", "2", "produce", "endless"])
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // An endless, healthy input: a line every 100 µs or so, until the command stops reading
    // (or for 10 s).
    let writer = std::thread::spawn(move || {
        let mut i = 0u64;
        while stdin.write_all(format!("line {i}\n").as_bytes()).is_ok() {
            i += 1;
            if i.is_multiple_of(16) {
                std::thread::sleep(Duration::from_millis(1));
            }
            if start.elapsed() > Duration::from_secs(10) {
                break; // a command the timeout did not stop then ends with its input
            }
        }
    });
    let text: Vec<String> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let text = text.join("\n");
    writer.join().unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "took {took:?}: {text}"
    );
    assert!(
        text.contains("--timeout 2s reached") && text.contains("produced "),
        "{text}"
    );
}

/// The wait of an `enqueue_all` for buffer room is capped by what is left of an
/// explicit `--timeout`. The broker executes Produce requests but never answers them, the
/// records' delivery timeout is raised past the command's (`-X`), so a full buffer never
/// drains: without the cap, the call waits its whole `max_block` (30 s) and the command runs
/// far past its timeout; with it, the command ends within the timeout plus a second, non-zero,
/// counting every record it read and did not produce.
#[test]
fn a_produce_blocked_on_a_full_buffer_ends_within_the_timeout() {
    let (server, addr) = common::sim_with_topic("full");
    server
        .with_cluster(|c, _| {
            c.inject_fault(stellflow_sim::FaultRule::random(
                stellflow_sansio::stellflow_proto::ApiKey::PRODUCE,
                1.0,
                stellflow_sim::Fault::DropResponse,
            ))
        })
        .unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args([
            "--bootstrap",
            &addr,
            "--timeout",
            "2",
            "-X",
            "buffer.memory=1048576",
            "-X",
            "delivery.timeout.ms=60000",
            "produce",
            "full",
        ])
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Far more than 1 MiB of records, as fast as the command reads them (or for 20 s).
    let writer = std::thread::spawn(move || {
        let line = [b'x'; 200];
        let mut n = 0u64;
        while stdin.write_all(&line).is_ok() && stdin.write_all(b"\n").is_ok() {
            n += 1;
            if n.is_multiple_of(4096) && start.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
    });
    let text: Vec<String> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let text = text.join("\n");
    writer.join().unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    // Timeout plus a second (the bound of the help text), plus room for a loaded machine;
    // without the cap it is 30 s.
    assert!(took < Duration::from_secs(5), "took {took:?}: {text}");
    assert!(
        text.contains("record(s) not produced to full") && text.contains("--timeout 2s reached"),
        "{text}"
    );
}

/// A broker frozen before the command starts (a listener that accepts and never
/// answers, as a SIGSTOPped broker does) ends `produce --timeout` within the timeout plus a
/// second, non-zero, and the message says that no record was produced and why.
#[test]
fn a_produce_to_a_frozen_broker_says_nothing_was_produced() {
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = frozen.local_addr().unwrap().to_string();
    // Accepted connections are kept open and never read from.
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in frozen.incoming().take(8) {
            held.push(conn);
        }
    });
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(["--bootstrap", &addr, "--timeout", "2", "produce", "cold"])
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"one\ntwo\n");
    let text: Vec<String> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let text = text.join("\n");
    drop(stdin);
    drop(held);
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(took < Duration::from_secs(4), "took {took:?}: {text}");
    assert!(
        text.contains("0 record(s) produced to cold (the input was not read)"),
        "{text}"
    );
}
