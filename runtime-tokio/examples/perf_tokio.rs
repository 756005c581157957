//! Throughput against the loopback sim broker (or a real one): 1 KiB values, acks=1.
//!
//! ```sh
//! cargo run --release -p stellflow-tokio --example perf_tokio               # sim broker
//! cargo run --release -p stellflow-tokio --example perf_tokio -- 200000 127.0.0.1:9092
//! ```
//!
//! Prints `RESULT tokio-produce-MBps X` and `RESULT tokio-consume-MBps X` (the body is
//! `stellflow_async::perf`, shared with stellflow-smol).

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = stellflow_sim::serve("127.0.0.1:0")?; // unused when a broker is named
    let sim = sim.local_addr().to_string();
    stellflow_async::perf::run::<stellflow_tokio::Tokio>("tokio", &sim).await
}
