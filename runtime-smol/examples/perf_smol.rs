//! Throughput (under smol's executor) against the loopback sim broker (or a real one): 1 KiB
//! values, acks=1.
//!
//! ```sh
//! cargo run --release -p stellflow-smol --example perf_smol               # sim broker
//! cargo run --release -p stellflow-smol --example perf_smol -- 200000 127.0.0.1:9092
//! ```
//!
//! Prints `RESULT smol-produce-MBps X` and `RESULT smol-consume-MBps X` (the body is
//! `stellflow_async::perf`, shared with stellflow-tokio).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = stellflow_sim::serve("127.0.0.1:0")?; // unused when a broker is named
    smol::block_on(stellflow_async::perf::run::<stellflow_smol::Smol>(
        "smol",
        &sim.local_addr().to_string(),
    ))
}
