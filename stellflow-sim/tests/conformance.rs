//! Broker conformance suite: scripted raw-protocol exchanges taken from `PROTOCOL.md` (the real
//! stellflow-service's observed behaviour, quirks included).
//!
//! Every case talks to the broker over plain TCP with hand-built v0 frames (only the
//! `stellflow-proto` wire primitives and `std::net`; no client crate is involved) and asserts what
//! the real server does — including where it departs from its own docs — so a faithful broker
//! passes and a broker that follows the docs fails. Each case names the `PROTOCOL.md` section it
//! checks; failures are listed with it.
//!
//! # Running
//!
//! Against the in-process simulated broker (the default; a fresh `stellflow_sim::serve` on
//! loopback per run):
//!
//! ```text
//! cargo test -p stellflow-sim --test conformance -- --nocapture
//! ```
//!
//! Against a real broker (e.g. stellflow-service at commit 0c64d3a, single node, broker id 1):
//!
//! ```text
//! STELLFLOW_BROKER=127.0.0.1:9092 cargo test -p stellflow-sim --test conformance -- --nocapture
//! ```
//!
//! Optionally `STELLFLOW_CONFORMANCE_FILTER=<substring>` runs only the cases whose name contains
//! the substring.
//!
//! Against a live broker the suite is safe to run repeatedly: every case creates its own topics
//! and groups named `conf-<pid>-<nanos>-<case>-…`, never sends null or path-like topic names,
//! deletes the throwaway topics it re-routes with AlterPartition, and checks broker-wide facts
//! (the `__empty__` placeholder, cluster counts) conditionally: exactly on a fresh broker, and the
//! part that still holds on a broker that already has topics otherwise (the case says which
//! branch ran). Every read has a timeout, so a hang is reported as a failure.
//!
//! The test prints `RESULT conformance-cases N` where N is the number of cases that ran and
//! passed, and fails if any case failed.

#[path = "conformance/mod.rs"]
mod conformance;

use conformance::{Ctx, Target, all_cases};
use std::net::{SocketAddr, ToSocketAddrs};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn resolve(s: &str) -> SocketAddr {
    match s.to_socket_addrs().ok().and_then(|mut a| a.next()) {
        Some(a) => a,
        None => panic!("STELLFLOW_BROKER={s:?} is not a resolvable host:port"),
    }
}

#[test]
fn conformance() {
    let external = std::env::var("STELLFLOW_BROKER")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let mut sim = None;
    let (addr, target) = match &external {
        Some(s) => (resolve(s.trim()), Target::External),
        None => {
            let server = match stellflow_sim::serve("127.0.0.1:0") {
                Ok(s) => s,
                Err(e) => panic!("cannot start the simulated broker: {e}"),
            };
            let addr = server.local_addr();
            sim = Some(server);
            (addr, Target::Sim)
        }
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let run_prefix = format!("conf-{}-{}", std::process::id(), nanos);
    let filter = std::env::var("STELLFLOW_CONFORMANCE_FILTER").ok();

    println!("conformance: target {target:?} at {addr}, names prefixed {run_prefix}");
    let started = Instant::now();
    let mut passed = 0usize;
    let mut failures: Vec<String> = Vec::new();
    for case in all_cases() {
        if filter
            .as_ref()
            .is_some_and(|f| !case.name.contains(f.as_str()))
        {
            continue;
        }
        let ctx = Ctx {
            addr,
            target,
            run_prefix: run_prefix.clone(),
            case: case.name,
            notes: Default::default(),
        };
        let t0 = Instant::now();
        let outcome = match catch_unwind(AssertUnwindSafe(|| (case.run)(&ctx))) {
            Ok(r) => r,
            Err(p) => Err(format!(
                "panicked: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(non-string panic)")
            )),
        };
        let ms = t0.elapsed().as_millis();
        let notes = ctx.notes.borrow().join("; ");
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({notes})")
        };
        match outcome {
            Ok(()) => {
                passed += 1;
                println!(
                    "  ok    {:<52} §{:<14} {ms:>5} ms{notes}",
                    case.name, case.section
                );
            }
            Err(e) => {
                println!(
                    "  FAIL  {:<52} §{:<14} {ms:>5} ms{notes}",
                    case.name, case.section
                );
                println!("        {e}");
                failures.push(format!(
                    "{} (PROTOCOL.md §{}): {e}",
                    case.name, case.section
                ));
            }
        }
    }
    println!(
        "conformance: {passed} passed, {} failed in {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    println!("RESULT conformance-cases {passed}");
    if let Some(server) = sim {
        server.shutdown();
    }
    if !failures.is_empty() {
        panic!(
            "{} conformance case(s) failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        );
    }
}
