//! Throughput against the loopback sim broker (or a real one): 1 KiB values, acks=1.
//!
//! ```sh
//! cargo run --release -p stellflow-tokio --example perf               # sim broker
//! cargo run --release -p stellflow-tokio --example perf -- 200000 127.0.0.1:9092
//! ```
//!
//! Prints `RESULT tokio-produce-MBps X` and `RESULT tokio-consume-MBps X`.

use bytes::Bytes;
use std::time::{Duration, Instant};
use stellflow_tokio::{
    Acks, Admin, ClientConfig, Consumer, OffsetReset, Producer, Record, Target, TopicPartition,
};

const PARTITIONS: i32 = 6;
const VALUE: usize = 1024;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(200_000), |a| a.parse())?;
    let server = match std::env::args().nth(2) {
        Some(_) => None,
        None => Some(stellflow_sim::serve("127.0.0.1:0")?),
    };
    let bootstrap = match (&server, std::env::args().nth(2)) {
        (Some(s), _) => s.local_addr().to_string(),
        (None, a) => a.unwrap_or_default(),
    };
    let mut config = ClientConfig::new(&bootstrap)?;
    config.producer.acks = Acks::Leader;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let topic = format!("perf-{}", std::process::id());
    Admin::connect(config.clone())
        .await?
        .create_topic(&topic, PARTITIONS, Target::Any)
        .await?;

    let producer = Producer::connect(config.clone()).await?;
    let value = Bytes::from(vec![b'v'; VALUE]);
    let start = Instant::now();
    let mut pending = Vec::with_capacity(n);
    for _ in 0..n {
        pending.push(
            producer
                .enqueue(Record::new(topic.as_str(), value.clone()))
                .await?,
        );
    }
    producer.flush().await?;
    for d in pending {
        d.await?;
    }
    report("tokio-produce", n, start.elapsed());

    let consumer = Consumer::connect(config).await?;
    let tps = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    consumer.assign(tps).await?;
    let start = Instant::now();
    let mut got = 0;
    while got < n {
        let records = consumer.poll_max(Duration::from_secs(10), 10_000).await?;
        if records.is_empty() {
            return Err(format!("stalled after {got} records").into());
        }
        got += records.len();
    }
    report("tokio-consume", got, start.elapsed());
    Ok(())
}

fn report(what: &str, records: usize, took: Duration) {
    let secs = took.as_secs_f64();
    let mb = (records * VALUE) as f64 / 1e6;
    println!(
        "{what}: {records} records in {secs:.3} s, {:.0} records/s",
        records as f64 / secs
    );
    println!("RESULT {what}-MBps {:.1}", mb / secs);
}
