//! The throughput benchmark behind the adapters' `perf` examples (acks=1): one body for every
//! [`Runtime`], so the tokio and smol numbers measure the same thing, shaped like
//! `stellflow perf produce` / `perf consume` (the blocking adapter) so that the three compare.
//!
//! Not published: it reads `std::env::args()` and serves only the examples, so it is not part
//! of `stellflow-async`'s API.

// The CLI's CPU-time helpers, by path (this crate is never packaged).
#[path = "../../stellflow-cli/src/cpu.rs"]
mod cpu;

use bytes::Bytes;
use cpu::{cpu_per_record, cpu_since, process_cpu_time};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use stellflow_async::{
    Acks, Client, ClientConfig, OffsetReset, Record, Runtime, Target, TopicPartition,
};

/// Produces then consumes `n` records (first argument, default 200 000) against the broker
/// named by the second argument, or `sim` (a loopback broker's address) when there is none
/// (or it is `sim`); the third argument is the value size (default 1024 bytes), the fourth the
/// topic's partitions (default 6); a fifth, an existing topic, skips producing and reads
/// `n` records of it (as `perf consume --topic` does), or with a sixth, `produce`, only
/// sends `n` records to it (as `perf produce --topic` does, without a new topic's first
/// metadata round in the timed part); a sixth argument `views` (the default), `blobs` or
/// `records` picks the consumer's path, as `perf consume --path` does. Prints
/// `RESULT <label>-produce-MBps X`, `RESULT <label>-consume-MBps X` and the records/s of each.
///
/// Like `stellflow perf produce`, the producer sends batches of [`BATCH`] records
/// (`Producer::enqueue_all`), keeps their outcomes in a queue and takes the ones already
/// known after every batch; like `perf consume`, the consumer reads every partition from its
/// start, by default through the fastest path: whole blobs (`Consumer::poll_blobs`), each
/// record a borrowed view (`FetchedBlob::next_view`). Each result line also gives the process's CPU time per record
/// (`process_cpu_time`: user + system, every thread, the sim broker's included when it runs
/// in the process).
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
    let path = match arg(6).as_deref() {
        None | Some("views") => Path::Views,
        Some("blobs") => Path::Blobs,
        Some("records") => Path::Records,
        Some("produce") => Path::Views, // handled below
        Some(other) => return Err(format!("unknown mode {other:?}").into()),
    };
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
    consume(&client, &topic, n, size, partitions, label, path).await?;
    Ok(client.close().await?)
}

/// The consumer path a consume run reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// `poll_blobs`, each record a borrowed view (`FetchedBlob::next_view`).
    Views,
    /// `poll_blobs`, each record an owned `BlobRecord`.
    Blobs,
    /// `poll`, one `ConsumerRecord` per record.
    Records,
}

/// Sends `n` records of `size` bytes to `topic`, reaping outcomes as they come.
async fn produce<R: Runtime>(
    client: &Client<R>,
    topic: &str,
    n: usize,
    size: usize,
    label: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    // The topic's metadata first, outside the timed part, as `stellflow perf produce` has it
    // (its `describe_topics`): otherwise the first records wait in the core for the topic's
    // first metadata round, copied one by one, up to `buffer_memory` of them (page faults
    // that are not the client's steady cost).
    client.admin().describe_topics(&[topic]).await?;
    let producer = client.producer();
    let record = Record::new(topic, Bytes::from(vec![b'v'; size]));
    let cpu = process_cpu_time();
    let start = Instant::now();
    let mut pending = VecDeque::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(BATCH);
        left -= k;
        pending.push_back(
            producer
                .enqueue_all(std::iter::repeat_n(&record, k))
                .await?,
        );
        while let Some(d) = pending.front_mut() {
            let Some(outcome) = d.try_wait() else { break };
            if let Some((_, e)) = outcome.first_error() {
                return Err(e.clone().into());
            }
            pending.pop_front();
        }
    }
    producer.flush().await?;
    for d in pending {
        if let Some((_, e)) = d.await.first_error() {
            return Err(e.clone().into());
        }
    }
    let cpu = cpu_since(cpu);
    report(&format!("{label}-produce"), n, size, start.elapsed(), cpu);
    Ok(())
}

/// Reads `n` records from the start of `topic`'s partitions through `path`: whole blobs
/// (`poll_blobs`, every blob ready), read as views or owned records, or `poll` by `poll` (at
/// most `consumer.max_poll_records` each). Every record's value length is summed, so that
/// each path touches what an application would.
async fn consume<R: Runtime>(
    client: &Client<R>,
    topic: &str,
    n: usize,
    size: usize,
    partitions: i32,
    label: &str,
    path: Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let consumer = client.consumer();
    let tps: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&tps)?;
    println!("{label}-consume path: {path:?}");
    let cpu = process_cpu_time();
    let start = Instant::now();
    let (mut got, mut bytes) = (0, 0usize);
    let wait = Duration::from_secs(10);
    while got < n {
        // Nothing at all within `wait` (not even a blob without records) is a stall.
        let came = match path {
            Path::Views => {
                let blobs = consumer.poll_blobs(wait).await?;
                let came = blobs.len();
                for mut blob in blobs {
                    while let Some(r) = blob.next_view() {
                        bytes += r?.value.map_or(0, <[u8]>::len);
                        got += 1;
                    }
                }
                came
            }
            Path::Blobs => {
                let blobs = consumer.poll_blobs(wait).await?;
                let came = blobs.len();
                for blob in blobs {
                    for r in blob {
                        bytes += r?.record.value.map_or(0, |v| v.len());
                        got += 1;
                    }
                }
                came
            }
            Path::Records => {
                let records = consumer.poll(wait).await?;
                let came = records.len();
                for r in records {
                    bytes += r.value.map_or(0, |v| v.len());
                    got += 1;
                }
                came
            }
        };
        if came == 0 {
            return Err(format!("stalled after {got} records").into());
        }
    }
    let (took, cpu) = (start.elapsed(), cpu_since(cpu));
    std::hint::black_box(bytes);
    report(&format!("{label}-consume"), got, size, took, cpu);
    Ok(())
}

/// Records a produce run sends with one `Producer::enqueue_all`.
pub const BATCH: usize = 1024;

fn report(what: &str, records: usize, size: usize, took: Duration, cpu: Option<Duration>) {
    let secs = took.as_secs_f64();
    let mb = (records * size) as f64 / 1e6;
    println!(
        "{what}: {records} records in {secs:.3} s, {:.0} records/s{}",
        records as f64 / secs,
        cpu_per_record(cpu, records as u64)
    );
    if let Some(cpu) = cpu {
        let ns = cpu.as_nanos() as f64 / records.max(1) as f64;
        println!("RESULT {what}-cpu-ns-per-record {ns:.0}");
    }
    println!("RESULT {what}-MBps {:.1}", mb / secs);
    println!("RESULT {what}-records-per-sec {:.0}", records as f64 / secs);
}
