//! `--timeout` bounds a command end to end, delivery included, and a produce that waits on a
//! leaderless partition says so on stderr at once (issue 15).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn produce_to_a_leaderless_partition_says_why_at_once_and_ends_within_the_timeout() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr().to_string();
    let admin =
        stellflow_blocking::Admin::connect(stellflow_blocking::ClientConfig::new(&addr).unwrap())
            .unwrap();
    admin
        .create_topic("led", 1, stellflow_blocking::Target::Any)
        .unwrap();
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
