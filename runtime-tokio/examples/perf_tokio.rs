//! Throughput against the loopback sim broker (or a real one): 1 KiB values by
//! default, acks=1.
//!
//! ```sh
//! cargo run --release -p stellflow-tokio --example perf_tokio               # sim broker
//! cargo run --release -p stellflow-tokio --example perf_tokio -- 200000 127.0.0.1:9092
//! # N, broker (or `sim`), value size, partitions; then an existing topic to read N records
//! # of, or to send N records to with `produce` (as `stellflow perf consume/produce` do); a
//! # consume run reads whole blobs as borrowed views (`poll_blobs` + `next_view`, the fastest
//! # path) unless the sixth argument is `blobs` (owned records of the blobs) or `records` (`poll`)
//! cargo run --release -p stellflow-tokio --example perf_tokio -- 1000000 127.0.0.1:9092 100 1 t produce
//! cargo run --release -p stellflow-tokio --example perf_tokio -- 1000000 127.0.0.1:9092 100 1 t
//! ```
//!
//! Prints `RESULT tokio-produce-MBps X`, `RESULT tokio-consume-MBps X` and records/s (the body is
//! `stellflow-perf-harness`, a crate of the workspace, shared with stellflow-smol).

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = stellflow_sim::serve("127.0.0.1:0")?; // unused when a broker is named
    let sim = sim.local_addr().to_string();
    stellflow_perf_harness::run::<stellflow_tokio::Tokio>("tokio", &sim).await
}
