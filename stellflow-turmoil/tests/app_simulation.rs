//! The at-least-once transformer (`stellflow-tokio`'s `transform_tokio` example, its
//! `service` function unchanged) in seeded worlds: a 3-broker simulated cluster, two or three
//! instances, faults drawn from the seed (instance crash and restart, broker crash and
//! restart, partitions, latency, leader moves). Each world checks that every input's output
//! appears, each key's outputs keep its inputs' order, and inputs are processed again only
//! across a handover or a crash, never from before the group's last commit.
//!
//! `cargo test -p stellflow-turmoil --test app_simulation -- --nocapture` runs the CI set
//! and prints `RESULT app-dst-seeds N`. `STELLFLOW_APP_SIM_SEED=<seed>` replays one world and
//! prints its `trace hash`; `STELLFLOW_APP_SIM_SEED_START=<u64> STELLFLOW_APP_SIM_SEEDS=<n>`
//! runs a soak (use `--release`). `STELLFLOW_APP_SIM_BUG=commit-early` plants the example's
//! bug: the run then fails, naming a seed that replays the failure.

#[allow(dead_code)]
#[path = "../../runtime-tokio/examples/transform_tokio.rs"]
mod transform_tokio;

mod app_world;

use std::time::Instant;
use transform_tokio::Planted;

/// Worlds of the CI set.
const CI_SEEDS: u64 = 200;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a u64")),
    )
}

#[test]
fn the_transformer_loses_nothing_keeps_key_order_and_repeats_only_after_a_handover() {
    let planted = Planted::from_env();
    if let Some(seed) = env_u64("STELLFLOW_APP_SIM_SEED") {
        if let Ok(level) = std::env::var("STELLFLOW_APP_SIM_LOG") {
            let level: tracing_subscriber::filter::LevelFilter = level
                .parse()
                .expect("STELLFLOW_APP_SIM_LOG: error, warn, info, debug or trace");
            tracing_subscriber::fmt().with_max_level(level).init();
        }
        match app_world::run(seed, planted) {
            Ok(r) => println!(
                "seed {seed}: {} processed, {} again, {:?} virtual, {} events\ntrace hash {:016x}",
                r.processed, r.duplicates, r.virtual_time, r.trace_events, r.trace_hash
            ),
            Err(e) => panic!("seed {seed} failed: {e}"),
        }
        return;
    }
    let start = env_u64("STELLFLOW_APP_SIM_SEED_START").unwrap_or(0);
    let count = env_u64("STELLFLOW_APP_SIM_SEEDS").unwrap_or(CI_SEEDS);
    let began = Instant::now();
    let (mut processed, mut again, mut first_hash) = (0, 0, None);
    for seed in start..start + count {
        match app_world::run(seed, planted) {
            Ok(r) => {
                println!("seed {seed} trace hash {:016x}", r.trace_hash);
                first_hash.get_or_insert(r.trace_hash);
                (processed, again) = (processed + r.processed, again + r.duplicates);
            }
            Err(e) => panic!(
                "seed {seed} failed (replay: STELLFLOW_APP_SIM_SEED={seed}{}): {e}",
                if planted == Planted::CommitEarly {
                    " STELLFLOW_APP_SIM_BUG=commit-early"
                } else {
                    ""
                }
            ),
        }
    }
    let secs = began.elapsed().as_secs_f64();
    if let Some(hash) = first_hash {
        let replay = app_world::run(start, planted).expect("the replay of a passing world");
        assert_eq!(
            replay.trace_hash, hash,
            "seed {start} replayed to another trace hash: the world is not deterministic"
        );
    }
    println!("{count} worlds from seed {start}: {processed} inputs processed, {again} again");
    println!("RESULT app-dst-seeds {count}");
    println!(
        "RESULT app-dst-worlds-per-second {:.1} worlds/s",
        count as f64 / secs
    );
}
