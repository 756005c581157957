//! `perf produce` and `perf consume`, in the style of Kafka's perf-test tools.

use crate::cpu::{cpu_per_record, cpu_since, process_cpu_time};
use crate::data::reap;
use crate::progress::Progress;
use crate::{CliError, CliResult, Env, Global, ProducerOpts, fail, perf_raw};
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use stellflow_blocking::{
    Acks, BatchDelivery, BatchFormat, BatchOutcome, ClientConfig, OffsetReset, Record,
    TopicPartition,
};
use stellflow_proto::record::Envelope;

/// `stellflow perf …`
#[derive(Subcommand, Debug)]
pub enum PerfCmd {
    /// Produce fixed-size records as fast as allowed; report throughput and ack latency.
    Produce(PerfProduce),
    /// Consume records from the log start; report throughput and end-to-end latency. On the
    /// embedded broker the topic is filled first.
    ///
    /// End-to-end latency is each record's receive time minus its timestamp (set by the
    /// producer, in whole ms), in ms: it needs the producer's and this machine's clocks to
    /// agree (same machine, or NTP), and on a topic filled before the run it measures the
    /// records' age, not latency (run `perf produce` alongside for latency).
    Consume(PerfConsume),
    /// The scale matrix: for each partition count (1, 16, 256, 1024, 4096 by default), keyed
    /// produce beside `perf produce --raw`, then consume beside `perf consume --raw`, each run
    /// as a child process; prints records/s, the raw ceiling of the same round, CPU per record
    /// and the client's peak RSS. Without `-b`, against a sim broker in this process.
    Scale(crate::perf_scale::PerfScale),
}

/// `stellflow perf produce`
#[derive(Args, Debug)]
pub struct PerfProduce {
    /// Topic (created on the embedded broker).
    #[arg(long, default_value = "perf")]
    topic: String,
    /// Records to send.
    #[arg(long, default_value_t = 100_000)]
    num_records: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Records per second at most (-1: unlimited).
    #[arg(long, default_value_t = -1.0, allow_hyphen_values = true)]
    throughput: f64,
    /// Partitions of the topic when the embedded broker creates it.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Keyed records: each carries one of this many distinct keys (`key-0`, `key-1`, … in
    /// turn), so the default partitioner spreads them over every partition by key hash, as
    /// an application keying by customer or device does (0: no key, the sticky partitioner).
    /// With `--raw`: the ceiling of the same keyed records (see `--raw`).
    #[arg(long, default_value_t = 0)]
    keys: u32,
    /// Measure the broker's ceiling instead: prebuilt blobs of `--batch-size` bytes sent through
    /// the core's raw request path, one Produce in flight per partition (no producer). With
    /// `--keys N`, the ceiling of the keyed run: the same records spread over the partitions as
    /// their keys hash, each partition's records in blobs of up to `--batch-size` (the fullest
    /// batches a producer could build, whatever its linger), one blob a request.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    producer: ProducerOpts,
}

/// `stellflow perf consume`
#[derive(Args, Debug)]
pub struct PerfConsume {
    /// Topic (created and filled on the embedded broker).
    #[arg(long, default_value = "perf")]
    topic: String,
    /// Records to consume.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Value size of the records written first on the embedded broker.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Partitions of the topic when the embedded broker creates it.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Measure the broker's ceiling instead: Fetches of single-blob entries through the core's
    /// raw request path, several in flight, records counted from blob headers (no consumer).
    #[arg(long)]
    raw: bool,
    /// How the records are read: `views` (the default and the fastest: whole blobs from
    /// `Consumer::poll_blobs`, each record borrowed from its blob by `FetchedBlob::next_view`),
    /// `blobs` (the same blobs iterated as owned `BlobRecord`s) or `records` (`Consumer::poll`,
    /// one `ConsumerRecord` per record). The run prints the path it took.
    #[arg(long, value_enum, default_value_t = ConsumePath::Views, conflicts_with = "raw")]
    path: ConsumePath,
    /// The same as `--path blobs` (kept for earlier scripts).
    #[arg(long, conflicts_with_all = ["raw", "path"])]
    blobs: bool,
    /// With `--raw`: single-blob entries per Fetch request.
    #[arg(long, default_value_t = 16, requires = "raw")]
    raw_entries: usize,
    /// With `--raw`: Fetch requests in flight at once.
    #[arg(long, default_value_t = 4, requires = "raw")]
    raw_in_flight: usize,
}

/// The consumer path `perf consume` reads records through.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumePath {
    /// `Consumer::poll_blobs`, each record a borrowed view (`FetchedBlob::next_view`).
    Views,
    /// `Consumer::poll_blobs`, each record an owned `BlobRecord` (iterating the blob).
    Blobs,
    /// `Consumer::poll`, one `ConsumerRecord` per record.
    Records,
}

impl ConsumePath {
    /// What the run prints about the path.
    fn describe(self) -> &'static str {
        match self {
            ConsumePath::Views => "views (poll_blobs + FetchedBlob::next_view)",
            ConsumePath::Blobs => "blobs (poll_blobs, owned BlobRecord per record)",
            ConsumePath::Records => "records (poll, one ConsumerRecord per record)",
        }
    }
}

/// Runs a perf command.
pub fn run(g: &Global, cmd: PerfCmd) -> CliResult {
    match cmd {
        PerfCmd::Produce(a) => produce(g, &a),
        PerfCmd::Consume(a) => consume(g, &a),
        PerfCmd::Scale(a) => crate::perf_scale::run(g, &a),
    }
}

pub(crate) fn payload(size: usize) -> Vec<u8> {
    // Printable pseudo-random bytes, like the Kafka tool's random payload (fixed seed: every
    // run sends the same bytes).
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9);
    (0..size).map(|_| rng.u8(b'A'..=b'Z')).collect()
}

/// Latencies in µs from 1 µs to one hour at 3 significant digits (a fixed ~200 KiB, whatever
/// the run's length); longer values count as one hour.
pub(crate) fn latencies() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Records sent with one `enqueue_all` (unless throttled): they share one enqueue-time clock
/// read, so a latency is at most the time to enqueue this many records (tens of
/// microseconds at 100 B) too long, and the progress bar is updated once per batch.
const BATCH: u64 = 1024;

fn produce(g: &Global, a: &PerfProduce) -> CliResult {
    if a.record_size == 0 || a.num_records == 0 {
        return fail("--num-records and --record-size must be positive");
    }
    let env = g.connect(|c| a.producer.apply(c))?;
    env.topic_partitions(&a.topic, a.partitions)?;
    if a.raw {
        return raw_produce(g, &env, a);
    }
    let producer = env.client.producer();
    let value = stellflow_blocking::bytes::Bytes::from(payload(a.record_size));
    // The records sent in turn: one without a key, or one per key (built once: the run
    // measures the client, not building records).
    let records: Vec<Record> = match a.keys {
        0 => vec![Record::new(a.topic.as_str(), value)],
        n => (0..n)
            .map(|k| Record::new(a.topic.as_str(), value.clone()).with_key(format!("key-{k}")))
            .collect(),
    };
    // Unthrottled, records go in batches (one `enqueue_all`, one enqueue-time clock read and
    // one outcome a batch); throttled, one at a time on their due time.
    let batch = if a.throughput > 0.0 { 1 } else { BATCH };
    let mut queue: VecDeque<(Instant, BatchDelivery)> = VecDeque::new();
    let mut lat_us = latencies();
    let mut progress = Progress::new("perf produce", Some(a.num_records));
    let cpu = process_cpu_time();
    let start = Instant::now();
    let mut window = (Instant::now(), 0u64, 0u64, 0u64); // start, count, latency sum, max
    // A batch's records share its enqueue time and the time its outcome is seen.
    let mut take = |t: Instant, now: Instant, outcome: BatchOutcome, lat: &mut Histogram<u64>| {
        let n = outcome.len() as u64;
        // The first error only: no record's metadata is built.
        if let Some((_, e)) = outcome.first_error() {
            return Err(CliError(format!("record not delivered: {e}")));
        }
        let us = u64::try_from(now.saturating_duration_since(t).as_micros()).unwrap_or(u64::MAX);
        lat.saturating_record_n(us, n);
        window.1 += n;
        window.2 += us * n;
        window.3 = window.3.max(us);
        let secs = now.saturating_duration_since(window.0).as_secs_f64();
        if secs >= 5.0 {
            progress_line(window.1, secs, a.record_size, window.2, window.3);
            window = (now, 0, 0, 0);
        }
        Ok::<_, CliError>(())
    };
    let mut sent = 0u64;
    while sent < a.num_records {
        if a.throughput > 0.0 {
            let due = start + Duration::from_secs_f64(sent as f64 / a.throughput);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let k = batch.min(a.num_records - sent);
        let first = usize::try_from(sent % records.len() as u64).unwrap_or(0);
        let rest = records.get(first..).unwrap_or_default();
        let batch_records = (rest.iter().chain(records.iter().cycle()))
            .take(usize::try_from(k).unwrap_or(usize::MAX));
        queue.push_back((Instant::now(), producer.enqueue_all(batch_records)?));
        sent += k;
        let mut seen = None;
        while let Some((t, p)) = queue.front_mut() {
            let Some(results) = p.try_wait() else { break };
            let now = *seen.get_or_insert_with(Instant::now);
            take(*t, now, results, &mut lat_us)?;
            queue.pop_front();
        }
        progress.add(k, k * a.record_size as u64);
    }
    producer.flush()?;
    // Every outcome is in after the flush: seen now.
    let now = Instant::now();
    while let Some((t, p)) = queue.pop_front() {
        take(t, now, p.wait(), &mut lat_us)?;
    }
    progress.finish();
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_since(cpu));
    let n = lat_us.len() as f64;
    println!(
        "{} records sent, {:.1} records/sec ({:.2} MB/sec){}, {}.",
        lat_us.len(),
        n / secs,
        n * a.record_size as f64 / secs / 1e6,
        cpu_per_record(cpu, lat_us.len()),
        latency_summary(&lat_us)
    );
    Ok(())
}

/// `perf produce --raw`: the producer's settings shape the blob (batch size, format, acks).
fn raw_produce(g: &Global, env: &Env, a: &PerfProduce) -> CliResult {
    if a.producer.idempotence {
        return fail("--raw sends the same prebuilt blob again and again: no --idempotence");
    }
    let config = raw_config(g, env, |c| a.producer.apply(c))?;
    let envelope = match config.producer.format {
        BatchFormat::Native(c) => Envelope::Srfb(c),
        _ => Envelope::V1,
    };
    let acks = match config.producer.acks {
        Acks::None => 0,
        Acks::Leader => 1,
        _ => -1,
    };
    let value = payload(a.record_size);
    let raw = perf_raw::RawProduce {
        topic: &a.topic,
        records: a.num_records,
        value: &value,
        blob_bytes: config.producer.batch_size,
        envelope,
        acks,
        keyed: (a.keys > 0).then_some(perf_raw::KeyedSpread {
            keys: a.keys,
            partitioner: config.producer.keyed,
        }),
    };
    perf_raw::produce(config, &raw)
}

/// The settings of the raw ceiling's own client: the run's bootstrap (or the embedded
/// broker), timeout and client id, then `tune`.
fn raw_config(
    g: &Global,
    env: &Env,
    tune: impl FnOnce(&mut ClientConfig),
) -> CliResult<ClientConfig> {
    let bootstrap = match (&g.bootstrap, &env.embedded) {
        (Some(b), _) => b.clone(),
        (None, Some(sim)) => sim.local_addr().to_string(),
        (None, None) => return fail("no broker to measure"),
    };
    let mut config = ClientConfig::new(&bootstrap)?;
    config.request_timeout = env.timeout;
    config.header.client_id.clone_from(&g.client_id);
    tune(&mut config);
    Ok(config)
}

fn progress_line(n: u64, secs: f64, size: usize, lat_sum_us: u64, max_us: u64) {
    let rate = n as f64 / secs;
    eprintln!(
        "{n} records sent, {rate:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
        rate * size as f64 / 1e6,
        lat_sum_us as f64 / n.max(1) as f64 / 1e3,
        max_us as f64 / 1e3
    );
}

fn consume(g: &Global, a: &PerfConsume) -> CliResult {
    if a.record_size == 0 || a.messages == 0 {
        return fail("--messages and --record-size must be positive");
    }
    let env = g.connect(|c| {
        c.consumer.auto_offset_reset = OffsetReset::Earliest;
        c.producer.acks = stellflow_blocking::Acks::Leader;
    })?;
    let partitions = env.topic_partitions(&a.topic, a.partitions)?;
    if env.is_embedded() {
        let t = Instant::now();
        let producer = env.client.producer();
        let value = stellflow_blocking::bytes::Bytes::from(payload(a.record_size));
        let mut queue = VecDeque::new();
        for _ in 0..a.messages {
            queue.push_back(producer.enqueue(Record::new(a.topic.as_str(), value.clone()))?);
            reap(&mut queue, false)?;
        }
        producer.flush()?;
        reap(&mut queue, true)?;
        eprintln!(
            "(filled {} with {} records of {} bytes in {:.2} s)",
            a.topic,
            a.messages,
            a.record_size,
            t.elapsed().as_secs_f64()
        );
    }
    if a.raw {
        let raw = perf_raw::RawConsume {
            topic: &a.topic,
            records: a.messages,
            entries: a.raw_entries,
            in_flight: a.raw_in_flight,
        };
        return perf_raw::consume(raw_config(g, &env, |_| {})?, &raw);
    }
    let path = if a.blobs { ConsumePath::Blobs } else { a.path };
    println!("perf consume path: {}", path.describe());
    let consumer = env.client.consumer();
    let parts: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(&a.topic, p))
        .collect();
    consumer.assign(&parts)?;
    let mut progress = Progress::new("perf consume", Some(a.messages));
    // End-to-end latency of each record in µs (receive time − record timestamp).
    let mut lat_us = latencies();
    let cpu = process_cpu_time();
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut last = Instant::now();
    while n < a.messages {
        let remaining = a.messages - n;
        // Ages count from the moment the poll returned.
        let (take, b) = match path {
            ConsumePath::Views => {
                let blobs = consumer.poll_blobs(Duration::from_millis(200))?;
                let mut tally = Tally::new(&mut lat_us, remaining);
                for mut blob in blobs {
                    while let Some(r) = blob.next_view() {
                        match r {
                            Ok(r) => tally.add(r.timestamp, r.value),
                            Err(e) => eprintln!("warning: a corrupt blob was skipped: {e}"),
                        }
                    }
                }
                tally.finish()
            }
            ConsumePath::Blobs => {
                let blobs = consumer.poll_blobs(Duration::from_millis(200))?;
                let mut tally = Tally::new(&mut lat_us, remaining);
                for blob in blobs {
                    for r in blob {
                        match r {
                            Ok(r) => tally.add(r.record.timestamp, r.record.value.as_deref()),
                            Err(e) => eprintln!("warning: a corrupt blob was skipped: {e}"),
                        }
                    }
                }
                tally.finish()
            }
            ConsumePath::Records => {
                let batch = consumer.poll(Duration::from_millis(200))?;
                let mut tally = Tally::new(&mut lat_us, remaining);
                for r in &batch {
                    tally.add(r.timestamp, r.value.as_deref());
                }
                tally.finish()
            }
        };
        if take == 0 {
            if last.elapsed() > env.timeout {
                return fail(format!(
                    "only {n} of {} records arrived within {:?}",
                    a.messages, env.timeout
                ));
            }
            continue;
        }
        last = Instant::now();
        first.get_or_insert(last);
        n += take;
        bytes += b;
        progress.add(take, b);
    }
    progress.finish();
    let (total, cpu) = (start.elapsed().as_secs_f64(), cpu_since(cpu));
    let fetch = first.map_or(total, |f| f.elapsed().as_secs_f64()).max(1e-9);
    println!(
        "{n} records consumed, {:.2} MB, {:.1} records/sec ({:.2} MB/sec){}; first record after {:.1} ms, then {:.1} records/sec ({:.2} MB/sec).",
        bytes as f64 / 1e6,
        n as f64 / total,
        bytes as f64 / total / 1e6,
        cpu_per_record(cpu, n),
        (total - fetch).max(0.0) * 1e3,
        n as f64 / fetch,
        bytes as f64 / fetch / 1e6
    );
    println!(
        "end-to-end latency (receive time - record timestamp): {}.",
        latency_summary(&lat_us)
    );
    Ok(())
}

/// What one poll of `perf consume` delivered: records and value bytes up to the records still
/// wanted, and their ages. Records of one poll mostly share their (millisecond) timestamp, so
/// the latency histogram is updated once per run of equal timestamps, not once per record.
struct Tally<'a> {
    lat_us: &'a mut Histogram<u64>,
    now_us: i64,
    wanted: u64,
    records: u64,
    bytes: u64,
    run: Option<(i64, u64)>,
}

impl<'a> Tally<'a> {
    fn new(lat_us: &'a mut Histogram<u64>, wanted: u64) -> Self {
        Tally {
            lat_us,
            now_us: wall_clock_us(),
            wanted,
            records: 0,
            bytes: 0,
            run: None,
        }
    }

    /// Counts one record (beyond the records wanted, nothing).
    fn add(&mut self, timestamp: i64, value: Option<&[u8]>) {
        if self.records == self.wanted {
            return;
        }
        self.records += 1;
        self.bytes += value.map_or(0, |v| v.len() as u64);
        match &mut self.run {
            Some((ts, count)) if *ts == timestamp => *count += 1,
            _ => {
                if let Some(done) = self.run.replace((timestamp, 1)) {
                    self.record_age(done);
                }
            }
        }
    }

    fn record_age(&mut self, (ts, count): (i64, u64)) {
        let age = self.now_us.saturating_sub(ts.saturating_mul(1000)).max(0);
        self.lat_us
            .saturating_record_n(u64::try_from(age).unwrap_or(0), count);
    }

    /// Records the last run's age and returns (records, value bytes).
    fn finish(mut self) -> (u64, u64) {
        if let Some(done) = self.run.take() {
            self.record_age(done);
        }
        (self.records, self.bytes)
    }
}

/// Microseconds since the Unix epoch by the wall clock (what record timestamps count in ms).
pub(crate) fn wall_clock_us() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// `avg, max, 50th, 95th, 99th, 99.9th` of latencies in µs, printed in ms.
pub(crate) fn latency_summary(us: &Histogram<u64>) -> String {
    let ms = |v: u64| v as f64 / 1e3;
    format!(
        "{:.2} ms avg latency, {:.2} ms max latency, {:.2} ms 50th, {:.2} ms 95th, {:.2} ms 99th, {:.2} ms 99.9th",
        us.mean() / 1e3,
        ms(us.max()),
        ms(us.value_at_quantile(0.5)),
        ms(us.value_at_quantile(0.95)),
        ms(us.value_at_quantile(0.99)),
        ms(us.value_at_quantile(0.999)),
    )
}

#[cfg(test)]
mod tests {
    use super::{latencies, latency_summary};

    #[test]
    fn summary_reads_percentiles_from_the_histogram() {
        let mut h = latencies();
        for us in 1..=1000 {
            h.saturating_record(us * 1000); // 1..=1000 ms
        }
        // Within the histogram's 3 significant digits of the exact figures.
        assert_eq!(
            latency_summary(&h),
            "500.50 ms avg latency, 1000.45 ms max latency, 500.22 ms 50th, 950.27 ms 95th, \
             990.21 ms 99th, 999.42 ms 99.9th"
        );
    }

    #[test]
    fn an_empty_run_prints_zeros() {
        let s = latency_summary(&latencies());
        assert!(
            s.starts_with("0.00 ms avg latency, 0.00 ms max latency"),
            "{s}"
        );
    }

    #[test]
    fn values_past_an_hour_count_as_an_hour() {
        let mut h = latencies();
        h.saturating_record(u64::MAX);
        assert!(
            h.max() >= 3_599_000_000 && h.max() <= 3_601_000_000,
            "{}",
            h.max()
        );
    }
}
