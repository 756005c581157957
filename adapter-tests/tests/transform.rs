//! The consume–transform–produce examples of the three adapters
//! (`examples/transform_{tokio,smol,blocking}.rs`),
//! run against the simulated broker — and killed with SIGKILL between an output's
//! acknowledgement and its input's mark: a fresh consumer of the group then reads that input
//! again, so every input has its output (one of them twice) and nothing is lost.
//!
//! The killed service runs in a child process: this test binary again, running only the
//! ignored `child_service` entry (`STELLFLOW_TRANSFORM_CHILD` says which adapter and broker).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use stellflow_adapter_tests::{R, Watchdog, check, sim};
use stellflow_blocking as blocking;

#[allow(dead_code)]
#[path = "../../runtime-tokio/examples/transform_tokio.rs"]
mod tokio_service;

#[allow(dead_code)]
#[path = "../../runtime-smol/examples/transform_smol.rs"]
mod smol_service;

#[allow(dead_code)]
#[path = "../../runtime-blocking/examples/transform_blocking.rs"]
mod blocking_service;

const INPUTS: usize = 60;
const KILL_AT: usize = 23;
const GROUP: &str = "transformers";
const CHILD: &str = "STELLFLOW_TRANSFORM_CHILD";

fn tp(topic: &str) -> blocking::TopicPartition {
    blocking::TopicPartition::new(topic, 0)
}

/// Creates `in` and `out` and writes the inputs (in a few blobs of many records, so the kill
/// lands inside a blob).
fn setup(bootstrap: &str) -> R<()> {
    let client = blocking::Client::connect(blocking::ClientConfig::new(bootstrap)?)?;
    client
        .admin()
        .create_topic("in", 1, blocking::Target::Any)?;
    client
        .admin()
        .create_topic("out", 1, blocking::Target::Any)?;
    let producer = client.producer();
    let mut pending = Vec::new();
    for i in 0..INPUTS {
        let record = blocking::Record::new("in", format!("value-{i}")).with_key(format!("k{i}"));
        pending.push(producer.enqueue(record)?);
        if i % 20 == 19 {
            producer.flush()?;
        }
    }
    producer.flush()?;
    for d in pending {
        d.wait()?;
    }
    client.close()?;
    Ok(())
}

/// The service's configuration in these tests: the example's, committing every 50 ms.
fn service_config(bootstrap: &str) -> R<blocking::ClientConfig> {
    let mut config = blocking_service::config(bootstrap, GROUP)?;
    config.consumer.auto_commit_interval = Duration::from_millis(50);
    config.consumer.fetch_backoff_max = Duration::from_millis(50);
    Ok(config)
}

/// How long the killed service waits for its marks to be committed before giving up.
const COMMIT_WAIT: Duration = Duration::from_secs(30);

/// The hook of the killed service: at input `KILL_AT`, once its output is acknowledged and
/// before it is marked, waits until everything marked so far is committed, reports it, and
/// blocks until the parent kills the process. If the commit does not come within
/// `COMMIT_WAIT`, it says so and exits: the child never waits without a bound.
fn kill_point(
    marked: impl Fn() -> Option<blocking::Position>,
    committed: impl Fn() -> Option<blocking::Position>,
) -> impl FnMut(&blocking::ConsumerRecord) {
    let mut done = 0;
    move |input| {
        if done == KILL_AT {
            let deadline = std::time::Instant::now() + COMMIT_WAIT;
            while marked().is_none() || committed() != marked() {
                if std::time::Instant::now() > deadline {
                    println!(
                        "\nFAILED marked {:?} but committed {:?} after {COMMIT_WAIT:?}",
                        marked(),
                        committed()
                    );
                    std::process::exit(2);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let m = marked().unwrap_or_default();
            // On a line of its own: libtest has already printed "test child_service ... "
            // without a newline.
            println!(
                "\nACKED {} {} COMMITTED {} {}",
                input.offset, input.index, m.offset, m.index
            );
            // Waits for the SIGKILL; `exit_when_parent_goes` ends the process if the parent
            // dies first, the child's watchdog if nothing does.
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        done += 1;
    }
}

/// In the child: exits the process as soon as the parent goes away (its end of our stdin
/// closes, however the parent ended: a failed check, its watchdog's abort, a kill), so a
/// child is never left behind.
fn exit_when_parent_goes() {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(3);
    });
}

/// Not a test of its own: the service that `killed_*` runs in a child process and kills.
#[test]
#[ignore = "the child process of the killed_* tests"]
fn child_service() -> R<()> {
    let spec = std::env::var(CHILD)?;
    exit_when_parent_goes();
    let _watchdog = Watchdog::new("transform child", 90);
    let (runtime, bootstrap) = spec.split_once(' ').ok_or("bad child spec")?;
    let config = service_config(bootstrap)?;
    let input = tp("in");
    match runtime {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = stellflow_tokio::Client::connect(config).await?;
                let consumer = client.consumer();
                consumer.subscribe(&["in"])?;
                let hook = kill_point(|| consumer.marked(&input), || consumer.committed(&input));
                tokio_service::run(&consumer, &client.producer(), "out", None, hook).await?;
                Ok::<_, stellflow_tokio::Error>(())
            })?;
        }
        "smol" => smol::block_on(async {
            let client = stellflow_smol::Client::connect(config).await?;
            let consumer = client.consumer();
            consumer.subscribe(&["in"])?;
            let hook = kill_point(|| consumer.marked(&input), || consumer.committed(&input));
            smol_service::run(&consumer, &client.producer(), "out", None, hook).await?;
            Ok::<_, stellflow_smol::Error>(())
        })?,
        _ => {
            let client = blocking::Client::connect(config)?;
            let consumer = client.consumer();
            consumer.subscribe(&["in"])?;
            let hook = kill_point(|| consumer.marked(&input), || consumer.committed(&input));
            blocking_service::run(&consumer, &client.producer(), "out", None, hook)?;
        }
    }
    Err("the child service ended instead of waiting to be killed".into())
}

/// The child process, killed with SIGKILL when this is dropped (on every path out of the
/// test, also an early error).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the service of `runtime` in a child process until it reports the kill point, then
/// kills it with SIGKILL. Returns the input it was killed on and the position committed.
fn run_child_and_kill(
    runtime: &str,
    bootstrap: &str,
) -> R<(blocking::Position, blocking::Position)> {
    let mut child = Child(
        Command::new(std::env::current_exe()?)
            .args(["--exact", "child_service", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD, format!("{runtime} {bootstrap}"))
            .stdin(Stdio::piped()) // the child exits when this closes (we are gone)
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let stdout = child.0.stdout.take().ok_or("no child stdout")?;
    let mut report = None;
    let mut last = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if let Some((_, rest)) = line.split_once("ACKED ") {
            report = Some(rest.to_owned());
            break;
        }
        if let Some((_, why)) = line.split_once("FAILED ") {
            return Err(format!("the {runtime} child service failed: {why}").into());
        }
        last.push(line);
    }
    child.0.kill()?; // SIGKILL: between the output's acknowledgement and the input's mark
    let status = child.0.wait()?;
    let report = report.ok_or_else(|| {
        format!(
            "the child ended without reaching the kill point ({status}); its output: {:?}",
            last
        )
    })?;
    let n: Vec<i64> = report
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [o, i, co, ci] = n[..] else {
        return Err(format!("bad report {report:?}").into());
    };
    Ok((
        blocking::Position::new(o, i as u32),
        blocking::Position::new(co, ci as u32),
    ))
}

/// Reads back `out` and checks: every input has its output, and the only one written twice
/// is `killed` (the input whose output was acknowledged but which was never marked).
fn check_outputs(
    bootstrap: &str,
    inputs: &[blocking::ConsumerRecord],
    killed: blocking::Position,
) -> R<()> {
    let mut config = blocking::ClientConfig::new(bootstrap)?;
    config.consumer.auto_offset_reset = blocking::OffsetReset::Earliest;
    let client = blocking::Client::connect(config)?;
    let consumer = client.consumer();
    consumer.assign(&[tp("out")])?;
    let mut outputs = Vec::new();
    while outputs.len() < INPUTS + 1 {
        let got = consumer.poll(Duration::from_secs(10))?;
        check(!got.is_empty(), || {
            format!("only {} outputs", outputs.len())
        })?;
        outputs.extend(got);
    }
    check(
        consumer.poll(Duration::from_millis(300))?.is_empty(),
        || "more outputs than inputs + 1".into(),
    )?;
    let mut seen = std::collections::HashMap::<Vec<u8>, usize>::new();
    for o in &outputs {
        *seen
            .entry(o.value.clone().unwrap_or_default().to_vec())
            .or_default() += 1;
    }
    for input in inputs {
        let want = input
            .value
            .as_deref()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let n = seen.get(&want).copied().unwrap_or(0);
        let twice = blocking::Position::new(input.offset, input.index) == killed;
        check(n == if twice { 2 } else { 1 }, || {
            format!("input {}#{} has {n} outputs", input.offset, input.index)
        })?;
    }
    client.close()?;
    Ok(())
}

/// The inputs as written, for checking.
fn read_inputs(bootstrap: &str) -> R<Vec<blocking::ConsumerRecord>> {
    let mut config = blocking::ClientConfig::new(bootstrap)?;
    config.consumer.auto_offset_reset = blocking::OffsetReset::Earliest;
    let client = blocking::Client::connect(config)?;
    let consumer = client.consumer();
    consumer.assign(&[tp("in")])?;
    let mut inputs = Vec::new();
    while inputs.len() < INPUTS {
        let got = consumer.poll(Duration::from_secs(10))?;
        check(!got.is_empty(), || format!("only {} inputs", inputs.len()))?;
        inputs.extend(got);
    }
    client.close()?;
    Ok(inputs)
}

/// The whole scenario for `runtime`; `resume` runs the service in this process (a fresh
/// consumer of the group) for `n` inputs and closes it.
fn killed_then_resumed(
    runtime: &str,
    resume: impl FnOnce(blocking::ClientConfig, usize) -> R<Vec<blocking::Position>>,
) -> R<()> {
    // One scenario at a time: run side by side they stalled (to look into), and each is
    // under a second alone.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _watchdog = Watchdog::new("transform", 120);
    let server = sim()?;
    let bootstrap = server.local_addr().to_string();
    setup(&bootstrap)?;
    let inputs = read_inputs(&bootstrap)?;
    let (killed, committed) = run_child_and_kill(runtime, &bootstrap)?;
    let at = |p: blocking::Position| {
        inputs
            .iter()
            .position(|r| blocking::Position::new(r.offset, r.index) == p)
    };
    check(at(killed) == Some(KILL_AT), || {
        format!("killed at {killed}, not input {KILL_AT}")
    })?;
    // Everything before the killed input was marked and committed, the killed one was not.
    let before = inputs.get(KILL_AT - 1).ok_or("too few inputs")?;
    check(committed == before.next_position(), || {
        format!("committed {committed}, want {}", before.next_position())
    })?;
    // A fresh consumer of the group starts at the killed input and processes the rest.
    let processed = resume(service_config(&bootstrap)?, INPUTS - KILL_AT)?;
    check(processed.first() == Some(&killed), || {
        format!("resumed at {:?}, not at {killed}", processed.first())
    })?;
    check_outputs(&bootstrap, &inputs, killed)
}

#[test]
fn tokio_service_killed_between_ack_and_mark_loses_nothing() -> R<()> {
    killed_then_resumed("tokio", |config, n| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let client = stellflow_tokio::Client::connect(config).await?;
            let consumer = client.consumer();
            consumer.subscribe(&["in"])?;
            let mut seen = Vec::new();
            let keep = |r: &blocking::ConsumerRecord| {
                seen.push(blocking::Position::new(r.offset, r.index))
            };
            tokio_service::run(&consumer, &client.producer(), "out", Some(n), keep).await?;
            client.close().await?;
            Ok(seen)
        })
    })
}

#[test]
fn smol_service_killed_between_ack_and_mark_loses_nothing() -> R<()> {
    killed_then_resumed("smol", |config, n| {
        smol::block_on(async {
            let client = stellflow_smol::Client::connect(config).await?;
            let consumer = client.consumer();
            consumer.subscribe(&["in"])?;
            let mut seen = Vec::new();
            let keep = |r: &blocking::ConsumerRecord| {
                seen.push(blocking::Position::new(r.offset, r.index))
            };
            smol_service::run(&consumer, &client.producer(), "out", Some(n), keep).await?;
            client.close().await?;
            Ok(seen)
        })
    })
}

#[test]
fn blocking_service_killed_between_ack_and_mark_loses_nothing() -> R<()> {
    killed_then_resumed("blocking", |config, n| {
        let client = blocking::Client::connect(config)?;
        let consumer = client.consumer();
        consumer.subscribe(&["in"])?;
        let mut seen = Vec::new();
        let keep =
            |r: &blocking::ConsumerRecord| seen.push(blocking::Position::new(r.offset, r.index));
        blocking_service::run(&consumer, &client.producer(), "out", Some(n), keep)?;
        client.close()?;
        Ok(seen)
    })
}
