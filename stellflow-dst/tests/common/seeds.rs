//! What the seeded simulation targets share: which seeds a run covers (the CI set plus a fresh
//! window that moves with every commit, or a soak from the environment), spreading them over
//! threads, and the rule that a plan must pass and replay to the same trace hash.

use std::io::Write;

/// A number from the environment, when it is set and parses.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// SplitMix64's finaliser: spreads any 64-bit value over the whole range.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The start of the fresh window and what it was derived from: the commit being tested
/// (`git rev-parse HEAD`), else the UTC day. A new commit (or day) explores new seeds; the
/// same commit replays the same ones. `salt` keeps targets from exploring the same seeds.
fn fresh_start(salt: u64) -> (u64, String) {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| s.len() >= 16);
    match head.and_then(|h| u64::from_str_radix(&h[..16], 16).ok().map(|v| (v, h))) {
        Some((v, h)) => (mix(v ^ salt), format!("commit {h}")),
        None => {
            // Wall clock for choosing seeds only, never inside a world.
            let day = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() / 86_400);
            (
                mix(day ^ (salt << 16 | 0xda7e)),
                format!("UTC day {day} since 1970"),
            )
        }
    }
}

/// The seeds a target runs, as `(start, count)` ranges.
pub struct SeedWindow {
    /// The ranges, in the order they run.
    pub ranges: Vec<(u64, u64)>,
}

impl SeedWindow {
    /// `STELLFLOW_SIM_SEED_START` / `STELLFLOW_SIM_SEEDS` when either is set (a soak); else the
    /// CI set `0..ci` and `fresh` seeds from a start derived from the commit, printed under
    /// `label` as the variables that replay it.
    pub fn from_env(label: &str, ci: u64, fresh: u64, salt: u64) -> SeedWindow {
        let start = env_u64("STELLFLOW_SIM_SEED_START");
        let count = env_u64("STELLFLOW_SIM_SEEDS");
        if start.is_some() || count.is_some() {
            let ranges = vec![(start.unwrap_or(0), count.unwrap_or(ci))];
            return SeedWindow { ranges };
        }
        let (fresh_from, from) = fresh_start(salt);
        let _ = writeln!(
            std::io::stdout(),
            "{label}: fresh window from {from}: STELLFLOW_SIM_SEED_START={fresh_from} STELLFLOW_SIM_SEEDS={fresh} replays it"
        );
        SeedWindow {
            ranges: vec![(0, ci), (fresh_from, fresh)],
        }
    }

    /// Every seed of the window, in order.
    pub fn seeds(&self) -> Vec<u64> {
        self.ranges
            .iter()
            .flat_map(|&(start, n)| (0..n).map(move |i| start.wrapping_add(i)))
            .collect()
    }

    /// The ranges as a reader wants them: `400 from 0 + 200 from 123…`.
    pub fn describe(&self) -> String {
        self.ranges
            .iter()
            .map(|(s, n)| format!("{n} from {s}"))
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// What the threads of a run found together: seeds run, failure texts, and each thread's tally.
pub struct Outcome<T> {
    /// Seeds run.
    pub ran: u64,
    /// One text a failing seed (plan, violation, shrunk plan).
    pub failures: Vec<String>,
    /// Each thread's own tally, to be summed by the caller.
    pub tallies: Vec<T>,
}

impl<T> Outcome<T> {
    /// Panics with every failure text when a seed failed.
    pub fn assert_passed(&self, what: &str) {
        assert!(
            self.failures.is_empty(),
            "{} of {} {what} failed:\n{}",
            self.failures.len(),
            self.ran,
            self.failures.join("\n")
        );
    }
}

/// Runs `one` for every seed, the seeds dealt round-robin to `threads` threads; `one` adds to
/// its thread's tally and returns a failure text for a failing seed (also printed at once).
pub fn run_seeds<T: Default + Send>(
    seeds: &[u64],
    threads: u64,
    one: impl Fn(u64, &mut T) -> Option<String> + Sync,
) -> Outcome<T> {
    let one = &one;
    let results: Vec<(u64, Vec<String>, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut failures = Vec::new();
                    let mut tally = T::default();
                    let mut ran = 0u64;
                    for &seed in seeds.iter().skip(t as usize).step_by(threads as usize) {
                        if let Some(text) = one(seed, &mut tally) {
                            eprintln!("{text}");
                            failures.push(text);
                        }
                        ran += 1;
                    }
                    (ran, failures, tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("simulation thread panicked"))
            .collect()
    });
    let mut outcome = Outcome {
        ran: 0,
        failures: Vec::new(),
        tallies: Vec::new(),
    };
    for (ran, failures, tally) in results {
        outcome.ran += ran;
        outcome.failures.extend(failures);
        outcome.tallies.push(tally);
    }
    outcome
}

/// Runs a plan twice with `run`: the first report, and an error text when it broke an
/// invariant (`first_violation`) or the second run's trace hash differs.
pub fn check_twice<R>(
    run: impl Fn() -> R,
    first_violation: impl Fn(&R) -> Option<String>,
    trace_hash: impl Fn(&R) -> u64,
) -> (R, Option<String>) {
    let a = run();
    if let Some(v) = first_violation(&a) {
        return (a, Some(v));
    }
    let b = run();
    if trace_hash(&a) != trace_hash(&b) {
        let msg = format!(
            "nondeterminism: trace hash {:#x} then {:#x} for the same plan",
            trace_hash(&a),
            trace_hash(&b)
        );
        return (a, Some(msg));
    }
    (a, None)
}
