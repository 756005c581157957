//! Throughput (under smol's executor) against the loopback sim broker (or a real one): 1 KiB
//! values by default, acks=1.
//!
//! ```sh
//! cargo run --release -p stellflow-smol --example perf_smol               # sim broker
//! cargo run --release -p stellflow-smol --example perf_smol -- 200000 127.0.0.1:9092
//! # N, broker (or `sim`), value size, partitions; then an existing topic to read N records
//! # of, or to send N records to with `produce` (as `stellflow perf consume/produce` do); a
//! # consume run reads whole blobs as borrowed views (`poll_blobs` + `next_view`, the fastest
//! # path) unless the sixth argument is `blobs` (owned records of the blobs) or `records` (`poll`)
//! cargo run --release -p stellflow-smol --example perf_smol -- 1000000 127.0.0.1:9092 100 1 t produce
//! cargo run --release -p stellflow-smol --example perf_smol -- 1000000 127.0.0.1:9092 100 1 t
//! ```
//!
//! Prints `RESULT smol-produce-MBps X`, `RESULT smol-consume-MBps X` and records/s (the body is
//! `stellflow-perf-harness`, a crate of the workspace, shared with stellflow-tokio).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = stellflow_sim::serve("127.0.0.1:0")?; // unused when a broker is named
    smol::block_on(stellflow_perf_harness::run::<stellflow_smol::Smol>(
        "smol",
        &sim.local_addr().to_string(),
    ))
}
