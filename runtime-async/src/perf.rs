//! The throughput benchmark behind the adapters' `perf` examples (1 KiB values, acks=1): one
//! body for every [`Runtime`], so the tokio and smol numbers measure the same thing.

use crate::{Acks, Client, ClientConfig, OffsetReset, Record, Runtime, Target, TopicPartition};
use bytes::Bytes;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 6;
const VALUE: usize = 1024;

/// Produces then consumes `n` records (first argument, default 200 000) against the broker
/// named by the second argument, or `sim` (a loopback broker's address) when there is none.
/// Prints `RESULT <label>-produce-MBps X` and `RESULT <label>-consume-MBps X`.
pub async fn run<R: Runtime>(label: &str, sim: &str) -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(200_000), |a| a.parse())?;
    let bootstrap = std::env::args().nth(2).unwrap_or_else(|| sim.to_owned());
    let mut config = ClientConfig::new(&bootstrap)?;
    config.producer.acks = Acks::Leader;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let topic = format!("perf-{}", std::process::id());
    let client = Client::<R>::connect(config).await?;
    client
        .admin()
        .create_topic(&topic, PARTITIONS, Target::Any)
        .await?;

    let producer = client.producer();
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
    report(&format!("{label}-produce"), n, start.elapsed());

    let consumer = client.consumer();
    let tps: Vec<_> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    consumer.assign(&tps)?;
    let start = Instant::now();
    let mut got = 0;
    while got < n {
        let records = consumer.poll_max(Duration::from_secs(10), 10_000).await?;
        if records.is_empty() {
            return Err(format!("stalled after {got} records").into());
        }
        got += records.len();
    }
    report(&format!("{label}-consume"), got, start.elapsed());
    Ok(client.close().await?)
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
