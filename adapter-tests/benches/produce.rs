//! The adapters' producer paths side by side: one `enqueue` (one `Delivery`) per record
//! against `enqueue_all` batches of 1024, 100-byte records, acks=1, one partition, against
//! the loopback sim broker.
//!
//! The client runs on a current-thread tokio runtime, so the caller's and the driver's work
//! are on one thread: its CPU time (`CLOCK_THREAD_CPUTIME_ID`) is the client's whole cost,
//! apart from the sim broker (threads of its own) and the kernel's share of the sockets on
//! the broker's side. The two paths alternate (single, batch, single, ...) for
//! `ADAPTER_BENCH_REPS` rounds (default 5) of `ADAPTER_BENCH_RECORDS` records (default
//! 1 000 000); medians and min/max are printed with allocations per record:
//!
//! `RESULT adapter-produce-{single,batch}-records-per-sec N`,
//! `RESULT adapter-produce-{single,batch}-cpu-ns-per-record N`,
//! `RESULT adapter-produce-{single,batch}-allocs-per-record X`.
//!
//! Run: `cargo bench -p stellflow-adapter-tests --bench produce`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};
use stellflow_tokio::{Acks, Client, ClientConfig, Record, Target};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const BATCH: usize = 1024;

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One outcome queue reaped after every call, as `perf produce` does.
async fn single(client: &Client, record: &Record, n: usize) {
    let producer = client.producer();
    let mut pending = VecDeque::new();
    for _ in 0..n {
        pending.push_back(producer.enqueue(record.clone()).await.unwrap());
        while let Some(d) = pending.front_mut() {
            let Some(outcome) = d.try_wait() else { break };
            outcome.unwrap();
            pending.pop_front();
        }
    }
    producer.flush().await.unwrap();
    for d in pending {
        d.await.unwrap();
    }
}

async fn batch(client: &Client, record: &Record, n: usize) {
    let producer = client.producer();
    let mut pending = VecDeque::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(BATCH);
        left -= k;
        let records = std::iter::repeat_n(record, k);
        pending.push_back(producer.enqueue_all(records).await.unwrap());
        while let Some(d) = pending.front_mut() {
            let Some(outcome) = d.try_wait() else { break };
            assert_eq!(outcome.first_error().map(|(i, e)| (i, e.to_string())), None);
            pending.pop_front();
        }
    }
    producer.flush().await.unwrap();
    for d in pending {
        let outcome = d.await;
        assert_eq!(outcome.first_error().map(|(i, e)| (i, e.to_string())), None);
    }
}

#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    cpu_ns: Vec<f64>,
    allocs: Vec<f64>,
}

impl Figures {
    fn print(&mut self, label: &str) {
        let line = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let m = v[v.len() / 2];
            (
                m,
                format!("{m:.3} (min {:.3}, max {:.3})", v[0], v[v.len() - 1]),
            )
        };
        let (rate, rates) = line(&mut self.rates);
        let (cpu, cpus) = line(&mut self.cpu_ns);
        let (allocs, alloc_line) = line(&mut self.allocs);
        eprintln!(
            "{label}: records/s {rates}; CPU ns/record {cpus}; allocations/record {alloc_line}"
        );
        println!("RESULT adapter-produce-{label}-records-per-sec {rate:.0}");
        println!("RESULT adapter-produce-{label}-cpu-ns-per-record {cpu:.0}");
        println!("RESULT adapter-produce-{label}-allocs-per-record {allocs:.4}");
    }
}

fn main() {
    let n = env("ADAPTER_BENCH_RECORDS", 1_000_000);
    let reps = env("ADAPTER_BENCH_REPS", 5).max(1);
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let mut config = ClientConfig::new(&server.local_addr().to_string()).unwrap();
    config.producer.acks = Acks::Leader;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = Client::connect(config).await.unwrap();
        let created = client.admin().create_topic("bench", 1, Target::Any).await;
        assert!(created.unwrap().is_ok());
        let record = Record::new("bench", vec![b'v'; 100]);
        single(&client, &record, n / 10).await; // warm-up
        batch(&client, &record, n / 10).await;
        let (mut s, mut b) = (Figures::default(), Figures::default());
        for _ in 0..reps {
            for (figures, is_batch) in [(&mut s, false), (&mut b, true)] {
                let (cpu, allocs, t) = (thread_cpu(), alloc_counter::allocations(), Instant::now());
                match is_batch {
                    false => single(&client, &record, n).await,
                    true => batch(&client, &record, n).await,
                }
                let secs = t.elapsed().as_secs_f64();
                figures.rates.push(n as f64 / secs);
                figures
                    .cpu_ns
                    .push((thread_cpu() - cpu).as_nanos() as f64 / n as f64);
                figures
                    .allocs
                    .push((alloc_counter::allocations() - allocs) as f64 / n as f64);
            }
        }
        eprintln!("{reps} rounds of {n} records of 100 B each, single then batch");
        s.print("single");
        b.print("batch");
        client.close().await.unwrap();
    });
}
