//! The throughput benchmark behind the adapters' `perf` examples (acks=1): one body for every
//! [`Runtime`], so the tokio and smol numbers measure the same thing, shaped like
//! `stellflow perf produce` / `perf consume` (the blocking adapter) so that the three compare.

use crate::{Acks, Client, ClientConfig, OffsetReset, Record, Runtime, Target, TopicPartition};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Produces then consumes `n` records (first argument, default 200 000) against the broker
/// named by the second argument, or `sim` (a loopback broker's address) when there is none
/// (or it is `sim`); the third argument is the value size (default 1024 bytes), the fourth the
/// topic's partitions (default 6); a fifth, an existing topic, skips producing and reads
/// `n` records of it (as `perf consume --topic` does), or with a sixth, `produce`, only
/// sends `n` records to it (as `perf produce --topic` does, without a new topic's first
/// metadata round in the timed part). Prints `RESULT <label>-produce-MBps X`,
/// `RESULT <label>-consume-MBps X` and the records/s of each.
///
/// Like `stellflow perf produce`, the producer keeps the outcomes in a queue and takes the
/// ones already known after every record (one `Delivery` per record, as a user would);
/// like `perf consume`, the consumer reads every partition from its start.
pub async fn run<R: Runtime>(label: &str, sim: &str) -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize| std::env::args().nth(i);
    let n: usize = arg(1).map_or(Ok(200_000), |a| a.parse())?;
    let bootstrap = arg(2)
        .filter(|b| b != "sim")
        .unwrap_or_else(|| sim.to_owned());
    let size: usize = arg(3).map_or(Ok(1024), |a| a.parse())?;
    let partitions: i32 = arg(4).map_or(Ok(6), |a| a.parse())?;
    let mut config = ClientConfig::new(&bootstrap)?;
    config.producer.acks = Acks::Leader;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let client = Client::<R>::connect(config).await?;
    let topic = match (arg(5), arg(6).as_deref()) {
        (Some(existing), Some("produce")) => {
            produce(&client, &existing, n, size, label).await?;
            return Ok(client.close().await?);
        }
        (Some(existing), _) => existing,
        (None, _) => {
            let topic = format!("perf-{}", std::process::id());
            let admin = client.admin();
            admin.create_topic(&topic, partitions, Target::Any).await?;
            produce(&client, &topic, n, size, label).await?;
            topic
        }
    };
    consume(&client, &topic, n, size, partitions, label).await?;
    Ok(client.close().await?)
}

/// Sends `n` records of `size` bytes to `topic`, reaping outcomes as they come.
async fn produce<R: Runtime>(
    client: &Client<R>,
    topic: &str,
    n: usize,
    size: usize,
    label: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let producer = client.producer();
    let value = Bytes::from(vec![b'v'; size]);
    let start = Instant::now();
    let mut pending = VecDeque::new();
    for _ in 0..n {
        let record = Record::new(topic, value.clone());
        pending.push_back(producer.enqueue(record).await?);
        while let Some(d) = pending.front_mut() {
            let Some(outcome) = d.try_wait() else { break };
            outcome?;
            pending.pop_front();
        }
    }
    producer.flush().await?;
    for d in pending {
        d.await?;
    }
    report(&format!("{label}-produce"), n, size, start.elapsed());
    Ok(())
}

/// Reads `n` records from the start of `topic`'s partitions, `poll` by `poll` (at most
/// `Options::max_poll_records` each, as `perf consume` polls).
async fn consume<R: Runtime>(
    client: &Client<R>,
    topic: &str,
    n: usize,
    size: usize,
    partitions: i32,
    label: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let consumer = client.consumer();
    let tps: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&tps)?;
    let start = Instant::now();
    let mut got = 0;
    while got < n {
        let records = consumer.poll(Duration::from_secs(10)).await?;
        if records.is_empty() {
            return Err(format!("stalled after {got} records").into());
        }
        got += records.len();
    }
    report(&format!("{label}-consume"), got, size, start.elapsed());
    Ok(())
}

fn report(what: &str, records: usize, size: usize, took: Duration) {
    let secs = took.as_secs_f64();
    let mb = (records * size) as f64 / 1e6;
    println!(
        "{what}: {records} records in {secs:.3} s, {:.0} records/s",
        records as f64 / secs
    );
    println!("RESULT {what}-MBps {:.1}", mb / secs);
    println!("RESULT {what}-records-per-sec {:.0}", records as f64 / secs);
}
