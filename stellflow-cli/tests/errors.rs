//! Every command fails with one clear line on stderr (no backtrace), a non-zero exit code and
//! within its timeout: against an unknown topic, an unreachable or silent broker, and bad
//! arguments.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// "At once": well under the `--timeout 60` the commands get, so a failure that waited for
/// the timeout is told apart from one that did not, with room for a loaded CI machine.
const AT_ONCE: Duration = Duration::from_secs(20);

/// Runs `stellflow args` with empty stdin; the exit code, the one stderr line (notes in
/// parentheses aside) and how long it took. Panics when it succeeds or prints more lines.
fn fails(args: &[&str]) -> (i32, String, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(args)
        .env_remove("STELLFLOW_BOOTSTRAP")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .output()
        .expect("run stellflow");
    let took = start.elapsed();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "stellflow {args:?} should fail");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with('(')).collect();
    assert_eq!(
        lines.len(),
        1,
        "stellflow {args:?}: one line expected: {stderr}"
    );
    assert!(lines[0].starts_with("stellflow: "), "{stderr}");
    (out.status.code().unwrap_or(-1), lines[0].to_owned(), took)
}

/// Runs each command (after `prefix`) on its own thread and checks it with `check`.
fn each(
    prefix: &[&str],
    commands: &[&[&str]],
    check: impl Fn(&[&str], i32, &str, Duration) + Sync,
) {
    std::thread::scope(|s| {
        for cmd in commands {
            let check = &check;
            s.spawn(move || {
                let args: Vec<&str> = prefix.iter().chain(cmd.iter()).copied().collect();
                let (code, line, took) = fails(&args);
                check(&args, code, &line, took);
            });
        }
    });
}

/// The data commands, each naming the topic "nope".
const ON_NOPE: &[&[&str]] = &[
    &["produce", "nope"],
    &["consume", "nope", "--count", "1"],
    &["topics", "describe", "nope"],
    &["offsets", "nope"],
    &["offsets", "nope", "--group", "g"],
    &["perf", "produce", "--topic", "nope", "--num-records", "10"],
    &["perf", "consume", "--topic", "nope", "--messages", "10"],
    &[
        "perf",
        "produce",
        "--raw",
        "--topic",
        "nope",
        "--num-records",
        "10",
    ],
    &[
        "perf",
        "consume",
        "--raw",
        "--topic",
        "nope",
        "--messages",
        "10",
    ],
];

#[test]
fn unknown_topic_fails_at_once_for_every_command() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr().to_string();
    let mut commands = ON_NOPE.to_vec();
    commands.push(&["topics", "delete", "nope"]);
    each(
        &["--bootstrap", &addr, "--timeout", "60"],
        &commands,
        |args, code, line, took| {
            assert_eq!(code, 1, "{args:?}: {line}");
            if args.contains(&"consume") && !args.contains(&"perf") {
                // The client's rule: its poll error names the topic and the remedy.
                assert!(
                    line.contains("topic nope is unknown to every broker")
                        && line.contains("stellflow topics create nope"),
                    "{args:?}: {line}"
                );
            } else {
                assert!(line.contains("unknown topic \"nope\""), "{args:?}: {line}");
            }
            assert!(took < AT_ONCE, "{args:?} took {took:?}");
        },
    );
}

#[test]
fn unreachable_broker_fails_fast_for_every_command() {
    let mut commands = ON_NOPE.to_vec();
    commands.extend([&["api-versions"][..], &["cluster"], &["topics", "list"]]);
    each(
        &["--bootstrap", "127.0.0.1:1", "--timeout", "60"],
        &commands,
        |args, code, line, took| {
            assert_eq!(code, 1, "{args:?}: {line}");
            assert!(
                line.contains("broker unreachable") && line.contains("127.0.0.1:1"),
                "{args:?}: {line}"
            );
            assert!(took < AT_ONCE, "{args:?} took {took:?}");
        },
    );
}

#[test]
fn silent_broker_fails_within_the_timeout() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let commands: &[&[&str]] = &[
        &["produce", "nope"],
        &["consume", "nope"],
        &["offsets", "nope", "--group", "g"],
        &["perf", "consume", "--topic", "nope"],
    ];
    each(
        &["--bootstrap", &addr, "--timeout", "1"],
        commands,
        |args, code, line, took| {
            assert_eq!(code, 1, "{args:?}: {line}");
            // Either bound may fire first: the command's own timeout, or the new connection's
            // setup timeout (`connection_setup_timeout`, capped by `--timeout`); both name the
            // address and the second.
            assert!(
                line.contains(&format!("no broker at {addr} answered within 1s"))
                    || (line.contains(&addr)
                        && line.contains("did not answer ApiVersions within 1s")),
                "{args:?}: {line}"
            );
            // Bounded by the 1 s timeout, not a hang (generous for a loaded machine).
            assert!(took < AT_ONCE, "{args:?} took {took:?}");
        },
    );
}

#[test]
fn bad_arguments_fail_at_once() {
    let (_server, addr) = common::sim_with_topic("one");
    let cases: &[(&[&str], i32, &str)] = &[
        (&["api-versions", "--broker", "7"], 1, "unknown broker id 7"),
        (
            &["topics", "reassert-leaders", "--broker", "7"],
            1,
            "unknown broker id 7",
        ),
        (
            &["produce", "one", "--partition", "4"],
            1,
            "partition 4 does not exist",
        ),
        (
            &["consume", "one", "--partition", "4"],
            1,
            "partition 4 does not exist",
        ),
        (
            &["perf", "consume", "--messages", "0"],
            1,
            "must be positive",
        ),
        (
            &["perf", "produce", "--record-size", "0"],
            1,
            "must be positive",
        ),
        (&["consume", "one", "--from", "soon"], 2, "--from"),
        (&["--timeout", "0", "cluster"], 1, "--timeout"),
        (&["offsets"], 2, "required"),
        (
            &["-X", "lingr.ms=5", "cluster"],
            1,
            "unknown configuration key \"lingr.ms\"",
        ),
        (
            &["-X", "linger.ms=soon", "cluster"],
            1,
            "bad value \"soon\" for linger.ms",
        ),
        (&["-X", "acks", "topics", "list"], 1, "KEY=VALUE"),
        (&["frobnicate"], 2, "frobnicate"),
    ];
    let commands: Vec<&[&str]> = cases.iter().map(|c| c.0).collect();
    each(
        &["--bootstrap", &addr],
        &commands,
        |args, code, line, took| {
            let case = cases.iter().find(|c| args.ends_with(c.0)).unwrap();
            assert_eq!(code, case.1, "{args:?}: {line}");
            assert!(line.contains(case.2), "{args:?}: {line}");
            // Below the default 10 s request timeout: nothing waited for a broker.
            assert!(took < Duration::from_secs(8), "{args:?} took {took:?}");
        },
    );
}
