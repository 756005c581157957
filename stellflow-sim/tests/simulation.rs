//! Deterministic simulation testing in CI: a fixed set of seeds, each run twice (same seed →
//! same trace hash), covering every fault kind.
//!
//! * `cargo test -p stellflow-sim --test simulation` — the CI set (prints `RESULT dst-seeds N`).
//! * `STELLFLOW_SIM_SEEDS=100000` — a longer soak (seeds `0..N`).
//! * `STELLFLOW_SIM_SEED=<seed>` — replays one seed and prints its plan and trace hash.
//! * `STELLFLOW_SIM_PLAN='<code>'` — replays one (e.g. shrunk) plan.
//! * `STELLFLOW_SIM_ALL=1` — also runs the seeds skipped as known failures.
//! * `STELLFLOW_SIM_TRACE=1` — with a replay, also prints the run's readable trace (faults,
//!   connections, request/response frames, client events, violations, by virtual time).
//!
//! A failing seed prints its plan, the violation and a shrunk plan that still fails.

#[path = "simulation/regressions.rs"]
mod regressions;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;
use stellflow_sim::dst::{FaultKind, FaultPlan, RunReport, run_plan, run_plan_logged, shrink};

/// Seeds the CI set runs by default.
const CI_SEEDS: u64 = 500;
/// Threads the set is spread over (the harness itself is single-threaded per world).
const THREADS: u64 = 2;

/// Seeds of the CI range that fail on open bugs, each kept as an ignored test in
/// `simulation/regressions.rs`; the CI set skips them (the soak with `STELLFLOW_SIM_ALL=1`
/// runs them too). Remove a seed here when its regression test is un-ignored.
const KNOWN_FAILING: [u64; 0] = [];

/// What one thread of the CI set found: seeds run, failure texts, planned faults per kind,
/// commands completed, batches held to the linger upper bound.
type ThreadResult = (u64, Vec<String>, BTreeMap<FaultKind, u64>, u64, u64);

fn run_all() -> bool {
    std::env::var("STELLFLOW_SIM_ALL").as_deref() == Ok("1")
}

/// The plan of a seed (every workload: raw requests, producer, consumer).
fn ci_plan(seed: u64) -> FaultPlan {
    FaultPlan::from_seed(seed)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Runs a plan twice; returns the first report and an error text on failure.
fn check_plan(plan: &FaultPlan) -> (RunReport, Option<String>) {
    let a = run_plan(plan);
    if let Some(v) = a.violations.first() {
        return (a.clone(), Some(format!("{v}")));
    }
    let b = run_plan(plan);
    if a.trace_hash != b.trace_hash {
        let msg = format!(
            "nondeterminism: trace hash {:#x} then {:#x} for the same plan",
            a.trace_hash, b.trace_hash
        );
        return (a, Some(msg));
    }
    (a, None)
}

fn report_failure(plan: &FaultPlan, report: &RunReport, msg: &str) -> String {
    let mut out = format!("FAILED {plan}\n  {msg}\n");
    for v in report.violations.iter().skip(1).take(3) {
        out.push_str(&format!("  also: {v}\n"));
    }
    if let Some(v) = report.violations.first() {
        let small = shrink(plan, v.invariant, 60);
        out.push_str(&format!("  shrunk to: {small}\n"));
    }
    out
}

#[test]
fn simulation_seeds() {
    if let Ok(code) = std::env::var("STELLFLOW_SIM_PLAN") {
        let plan = FaultPlan::parse(&code).expect("STELLFLOW_SIM_PLAN does not parse");
        replay(&plan);
        return;
    }
    if let Some(seed) = env_u64("STELLFLOW_SIM_SEED") {
        replay(&ci_plan(seed));
        return;
    }
    let count = env_u64("STELLFLOW_SIM_SEEDS").unwrap_or(CI_SEEDS);
    let started = Instant::now(); // wall clock for the seeds/s report only, never in a world
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut failures = Vec::new();
                    let mut kinds = BTreeMap::new();
                    let mut commands = 0u64;
                    let mut linger_checks = 0u64;
                    let mut ran = 0u64;
                    let mut seed = t;
                    while seed < count {
                        if KNOWN_FAILING.contains(&seed) && !run_all() {
                            seed += THREADS;
                            continue;
                        }
                        let plan = ci_plan(seed);
                        for k in plan.kinds() {
                            *kinds.entry(k).or_insert(0u64) += 1;
                        }
                        let (report, failure) = check_plan(&plan);
                        commands += report.commands as u64;
                        linger_checks += report.linger_bound_checks;
                        if let Some(msg) = failure {
                            let text = report_failure(&plan, &report, &msg);
                            eprintln!("{text}");
                            failures.push(text);
                        }
                        ran += 1;
                        seed += THREADS;
                    }
                    (ran, failures, kinds, commands, linger_checks)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("simulation thread panicked"))
            .collect()
    });
    let secs = started.elapsed().as_secs_f64();
    let ran: u64 = results.iter().map(|r| r.0).sum();
    let commands: u64 = results.iter().map(|r| r.3).sum();
    let failures: Vec<&String> = results.iter().flat_map(|r| &r.1).collect();
    let linger_checks: u64 = results.iter().map(|r| r.4).sum();
    let mut kinds: BTreeMap<FaultKind, u64> = BTreeMap::new();
    for (k, n) in results.iter().flat_map(|r| r.2.iter()) {
        *kinds.entry(*k).or_insert(0) += n;
    }
    // Written to the stdout handle directly: libtest captures `println!` of passing tests.
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "dst: {ran} seeds x2 runs, {commands} commands, {secs:.1} s wall, {:.1} seeds/s ({THREADS} threads)",
        ran as f64 / secs.max(1e-9)
    );
    let per_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k:?}={n}")).collect();
    let _ = writeln!(
        out,
        "dst: planned faults per kind: {}; {linger_checks} producer batches held to the linger upper bound",
        per_kind.join(" ")
    );
    let missing: Vec<&FaultKind> = FaultKind::ALL
        .iter()
        .filter(|k| !kinds.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "fault kinds never planned: {missing:?}");
    assert!(
        failures.is_empty(),
        "{} of {ran} seeds failed:\n{}",
        failures.len(),
        failures
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = writeln!(out, "RESULT dst-seeds {ran}");
    let _ = writeln!(out, "RESULT dst-fault-kinds {}", kinds.len());
}

fn replay(plan: &FaultPlan) {
    println!("{plan}");
    if std::env::var("STELLFLOW_SIM_TRACE").as_deref() == Ok("1") {
        let (_, log) = run_plan_logged(plan);
        for line in log {
            println!("{line}");
        }
    }
    let (report, failure) = check_plan(plan);
    println!(
        "trace hash {:#x}, {} commands, {:?} virtual, stats {:?}",
        report.trace_hash, report.commands, report.elapsed, report.stats
    );
    if let Some(msg) = failure {
        panic!("{}", report_failure(plan, &report, &msg));
    }
}
