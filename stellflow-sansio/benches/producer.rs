//! Producer throughput: records per second through `produce`, batch building and request
//! encoding, with no IO. The simulated broker answers ApiVersions and Metadata; Produce
//! requests are answered by a minimal in-bench responder (decode the request, acknowledge
//! every blob with the next offset), so the figure is the client's cost plus a cheap decode.
//!
//! The measurement runs `PRODUCER_BENCH_REPS` times (default 5) and prints each repetition,
//! then the median. Two rates are printed, both for one thread on one core:
//!
//! * `RESULT producer-records-per-sec N` — wall clock. Honest on an idle machine; on a busy
//!   one it includes time other processes had the CPU (the load average is printed).
//! * `RESULT producer-records-per-cpu-sec N` — per second of this thread's on-CPU time
//!   (Linux `schedstat`), which a busy machine distorts much less; and its inverse,
//!   `RESULT producer-cpu-ns-per-record N`, the core's CPU time per record that the end-to-end
//!   `perf produce` figure (`ns CPU/record`) is compared with.
//!
//! A same-run baseline, `RESULT producer-baseline-memcpy-MBps X`, copies the same record
//! bytes (key and value) into a batch-sized buffer — the floor any producer pays — so figures
//! from different machines or loads can be compared.
//!
//! Each figure is printed for four clients run in alternate rounds: without a hook (no
//! suffix), with one hook (`-hooked`), and reporting outcomes a batch at a time
//! (`-batched`: `DriverExt::set_batch_outcomes`, the mode the adapters run the core in). These
//! three are answered every 4 096 records, so their batches reuse a few warm buffers. The
//! fourth (`-batched-full`) is `-batched` answered only when the buffer refuses a record: its
//! records go into every buffer of `buffer_memory` in turn, each written long before, as in
//! a run whose broker is slower than its producer (a full buffer, the end-to-end
//! `perf produce` case).
//!
//! Two more clients run keyed records the way a service with many keys does: 100 000 distinct
//! keys, the virtual clock moving on by the linger (5 ms) every 4 096 records, so batches
//! leave when their linger passes, holding what arrived meanwhile. `-keyed-1p` sends them
//! to a topic of one partition, `-keyed-1024p` to one of 1 024 partitions (four records a
//! batch): the cost of many small batches and of finding the ready ones among many
//! partitions, printed beside the one-partition figure of the same run.
//!
//! Run: `cargo bench -p stellflow-sansio --bench producer`. Also prints
//! `RESULT producer-allocs-per-record X` (heap allocations per record in the measured loops,
//! counted per thread by the `alloc-counter` global allocator).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Buf, Bytes, BytesMut};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_proto::frame;
use stellflow_proto::header::ResponseHeader;
use stellflow_proto::messages::{
    ProducePartitionResponse, ProduceRequest, ProduceResponse, ProduceTopicResponse,
};
use stellflow_proto::{ApiKey, ErrorCode, Reader, Wire};
use stellflow_sansio::DriverExt;
use stellflow_sansio::{Client, ClientConfig, ConnId, Event, Output};
use stellflow_sansio::{ProduceError, ProducerRecord};
use stellflow_sim::SimCluster;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const TOPIC: &str = "bench";
const PARTITIONS: i32 = 16;
/// The partitions of the many-partitions keyed case.
const MANY_PARTITIONS: i32 = 1024;
/// Distinct keys of the keyed cases.
const SPREAD_KEYS: u64 = 100_000;

/// Moves bytes between the client, the sim (bootstrap) and the Produce responder.
struct Driver {
    client: Client,
    sim: SimCluster,
    now: Instant,
    links: HashMap<ConnId, stellflow_sim::ConnId>,
    back: HashMap<stellflow_sim::ConnId, ConnId>,
    tx: BytesMut,
    rx: BytesMut,
    /// The front of a frame whose record blobs come shared (`Output::TransmitBytes`).
    partial: BytesMut,
    /// How many blobs came shared.
    shared_blobs: u64,
    offsets: Vec<i64>,
    delivered: u64,
    failed: u64,
    flushed: bool,
}

impl Driver {
    fn pump(&mut self) {
        loop {
            let mut progress = false;
            let wake_at = loop {
                self.tx.clear();
                let output = self.client.poll_output(self.now, &mut self.tx);
                progress |= !matches!(output, Output::Timeout(_));
                match output {
                    Output::Connect(cr) => {
                        let sc = self
                            .sim
                            .connect_addr(&cr.address.to_string(), self.now)
                            .unwrap();
                        self.links.insert(cr.conn, sc);
                        self.back.insert(sc, cr.conn);
                        self.client.handle_connected(cr.conn, self.now);
                    }
                    Output::Transmit(conn) => self.route(conn),
                    Output::TransmitBytes(conn, blob) => {
                        self.shared_blobs += 1;
                        self.shared(conn, &blob);
                    }
                    Output::Event(e) => self.on_event(e),
                    Output::Close(_) => {}
                    Output::Timeout(t) => break t,
                }
            };
            while let Some((sc, bytes)) = self.sim.poll_transmit() {
                progress = true;
                let conn = self.back[&sc];
                self.rx.clear();
                self.rx.extend_from_slice(&bytes);
                self.client.handle_input(conn, self.now, &mut self.rx);
            }
            if !progress {
                std::hint::black_box(wake_at);
                return;
            }
        }
    }

    /// Counts a produce outcome.
    fn on_event(&mut self, e: Event) {
        match e {
            Event::Produced { result: Ok(_), .. } => self.delivered += 1,
            Event::Produced { result: Err(_), .. } => self.failed += 1,
            Event::ProducedBatch(b) => match b.result() {
                Ok(_) => self.delivered += b.len() as u64,
                Err(_) => self.failed += b.len() as u64,
            },
            Event::Flushed { .. } => self.flushed = true,
            _ => {}
        }
    }

    /// Answers Produce frames itself; forwards everything else to the sim.
    fn route(&mut self, conn: ConnId) {
        if !self.partial.is_empty() {
            self.partial.extend_from_slice(&self.tx);
            self.answer_partial(conn);
            return;
        }
        self.rx.clear();
        // Take the whole buffer (not `split`): once every slice of it is dropped it comes
        // back unique, so the client encodes into the same memory next time, as it does
        // with an adapter that writes its buffer out and clears it.
        let all = std::mem::take(&mut self.tx).freeze();
        let rest = self.answer(conn, all.clone());
        self.partial.extend_from_slice(&rest);
        drop(rest);
        self.tx = all
            .try_into_mut()
            .unwrap_or_else(|_| BytesMut::with_capacity(32 << 20));
        self.tx.clear();
        self.hand_answers(conn);
    }

    /// A record blob handed over shared (`Output::TransmitBytes`): the responder needs only
    /// the partitions, so the frame it ends the front of is read as if the blob were empty
    /// (its length field and the frame's length are patched), and the blob is not copied.
    /// A blob can end its frame, so the frame is answered here once it is whole.
    fn shared(&mut self, conn: ConnId, blob: &[u8]) {
        let n = self.partial.len();
        self.partial[n - 4..].copy_from_slice(&0i32.to_be_bytes());
        let total = (&self.partial[..4]).get_u32() - blob.len() as u32;
        self.partial[..4].copy_from_slice(&total.to_be_bytes());
        self.answer_partial(conn);
    }

    /// Answers the whole frames held in `partial`, keeping the incomplete rest there.
    fn answer_partial(&mut self, conn: ConnId) {
        self.rx.clear();
        let frames = std::mem::take(&mut self.partial).freeze();
        let rest = self.answer(conn, frames);
        self.partial.extend_from_slice(&rest);
        self.hand_answers(conn);
    }

    /// Gives the client the answers `answer` wrote into `rx`.
    fn hand_answers(&mut self, conn: ConnId) {
        if !self.rx.is_empty() {
            self.client.handle_input(conn, self.now, &mut self.rx);
        }
    }

    /// Answers (into `rx`) or forwards the whole frames at the front of `frames`; returns
    /// the incomplete rest (the front of a frame whose blobs are still to come).
    fn answer(&mut self, conn: ConnId, mut frames: Bytes) -> Bytes {
        while frames.len() >= 4 {
            let len = (&frames[..4]).get_u32() as usize;
            if frames.len() < 4 + len {
                break;
            }
            let whole = frames.split_to(4 + len);
            let payload = whole.slice(4..);
            let (header, body) = frame::split_request(payload).unwrap();
            if header.api_key == ApiKey::PRODUCE {
                let req = ProduceRequest::decode(&mut Reader::new(body)).unwrap();
                let resp = ProduceResponse {
                    responses: req
                        .topic_data
                        .iter()
                        .map(|t| ProduceTopicResponse {
                            topic: t.topic.clone(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|p| {
                                    let o = &mut self.offsets[p.partition as usize];
                                    *o += 1;
                                    ProducePartitionResponse {
                                        partition: p.partition,
                                        error_code: ErrorCode::NONE,
                                        base_offset: *o - 1,
                                        current_leader_epoch: 0,
                                        log_append_time_ms: -1,
                                        log_start_offset: 0,
                                    }
                                })
                                .collect(),
                        })
                        .collect(),
                };
                let h = ResponseHeader::new(header.correlation_id, ErrorCode::NONE);
                frame::encode_response(&mut self.rx, &h, Some(&resp));
            } else {
                let mut b = BytesMut::from(&whole[..]);
                self.sim.handle_input(self.links[&conn], self.now, &mut b);
            }
        }
        frames
    }
}

/// On-CPU time of this thread (Linux `schedstat`), if available.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// A driver with a client connected to its own simulated broker, metadata known, for a
/// topic of `partitions`.
fn new_driver(hooks: stellflow_sansio::Hooks, batched: bool, partitions: i32) -> Driver {
    let now = Instant::now();
    let mut sim = SimCluster::single(now, 1);
    sim.create_topic(TOPIC, partitions, 1).unwrap();
    let mut config = ClientConfig::new("broker-1:9092").unwrap();
    config.request_timeout = Duration::from_secs(3600);
    config.hooks = hooks;
    let mut client = Client::new(config, now, 7).unwrap();
    client.set_batch_outcomes(batched);
    let mut d = Driver {
        client,
        sim,
        now,
        links: HashMap::new(),
        back: HashMap::new(),
        tx: BytesMut::with_capacity(32 << 20),
        rx: BytesMut::with_capacity(1 << 20),
        partial: BytesMut::new(),
        shared_blobs: 0,
        offsets: vec![0; partitions as usize],
        delivered: 0,
        failed: 0,
        flushed: false,
    };
    // Bootstrap: connect, negotiate, learn the topic.
    for _ in 0..100 {
        d.pump();
        if d.client.metadata().topics.contains_key(TOPIC) {
            break;
        }
        d.now += Duration::from_millis(10);
        d.client.handle_timeout(d.now);
    }
    assert!(
        d.client.metadata().topics.contains_key(TOPIC),
        "no metadata"
    );
    d
}

/// A producer hook that does what a cheap real one does: counts sends and outcomes.
#[derive(Default)]
struct CountHook(std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64);

impl stellflow_sansio::ProducerHook for CountHook {
    fn on_send(&self, _: &stellflow_sansio::SentRecord<'_>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn on_acknowledgement(&self, _: &stellflow_sansio::Acknowledgement<'_>) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How a case's records are made and answered.
#[derive(Clone, Copy)]
struct Mode {
    /// Answer the requests every 4 096 records (else only when the buffer is full).
    answer_every: bool,
    /// Keyed over `SPREAD_KEYS` keys with the clock moving on by the linger every 4 096
    /// records (else the 1 024 keys of `keys`, the clock standing still).
    keyed: bool,
}

/// One client of the bench and what it is printed as.
struct Case {
    label: &'static str,
    suffix: &'static str,
    driver: Driver,
    mode: Mode,
}

fn main() {
    let records: u64 = std::env::var("PRODUCER_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6_000_000);
    // The clients, each with its own broker, run in alternate rounds (A B C D E F A B ...):
    // without a hook, with one cheap hook registered (counting sends and acknowledgements),
    // without a hook reporting outcomes a batch at a time (`set_batch_outcomes`, as the
    // adapters run the core), the same answered only when the buffer is full, and keyed
    // over many keys to one partition and to 1 024.
    let mut hooks = stellflow_sansio::Hooks::default();
    hooks.producer(CountHook::default());
    let every = Mode {
        answer_every: true,
        keyed: false,
    };
    let keyed = Mode {
        answer_every: true,
        keyed: true,
    };
    let case = |label, suffix, driver, mode| Case {
        label,
        suffix,
        driver,
        mode,
    };
    let mut cases = [
        case(
            "no hook",
            "",
            new_driver(Default::default(), false, PARTITIONS),
            every,
        ),
        case(
            "one hook",
            "-hooked",
            new_driver(hooks, false, PARTITIONS),
            every,
        ),
        case(
            "batch outcomes",
            "-batched",
            new_driver(Default::default(), true, PARTITIONS),
            every,
        ),
        case(
            "batch outcomes, full buffer",
            "-batched-full",
            new_driver(Default::default(), true, PARTITIONS),
            Mode {
                answer_every: false,
                keyed: false,
            },
        ),
        case(
            "keyed, 1 partition",
            "-keyed-1p",
            new_driver(Default::default(), true, 1),
            keyed,
        ),
        case(
            "keyed, 1 024 partitions",
            "-keyed-1024p",
            new_driver(Default::default(), true, MANY_PARTITIONS),
            keyed,
        ),
    ];
    let n_cases = cases.len();

    let value = [0x5au8; 100];
    let mut keys = [[0u8; 8]; 1024];
    for (i, k) in keys.iter_mut().enumerate() {
        *k = (i as u64).to_be_bytes();
    }
    let linger = stellflow_sansio::ProducerConfig::default().linger;
    let run = |d: &mut Driver, n: u64, mode: Mode| {
        for i in 0..n {
            let spread = (i % SPREAD_KEYS).to_be_bytes();
            let key = if mode.keyed {
                &spread
            } else {
                &keys[(i % 1024) as usize]
            };
            let rec = ProducerRecord::new(TOPIC, &value).with_key(key);
            loop {
                match d.client.produce(d.now, &rec) {
                    Ok(_) => break,
                    Err(ProduceError::BufferFull { .. }) => d.pump(),
                    Err(e) => panic!("{e}"),
                }
            }
            if mode.answer_every && i % 4096 == 4095 {
                if mode.keyed {
                    d.now += linger;
                    d.client.handle_timeout(d.now);
                }
                d.pump();
            }
        }
        d.client.flush(d.now);
        d.flushed = false;
        while !d.flushed {
            d.pump();
        }
    };
    // Warm-up (pools, buffers, maps reach their steady size).
    for c in cases.iter_mut() {
        run(&mut c.driver, records / 10, c.mode);
    }
    let reps: usize = std::env::var("PRODUCER_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut walls: Vec<Vec<f64>> = (0..n_cases).map(|_| Vec::with_capacity(reps)).collect();
    let mut cpus: Vec<Vec<f64>> = (0..n_cases).map(|_| Vec::with_capacity(reps)).collect();
    let mut copies = Vec::with_capacity(reps);
    let mut allocs = vec![0u64; n_cases];
    let mut elapsed_total = Duration::ZERO;
    let mut sink = vec![0u8; 1 << 20];
    for rep in 0..reps {
        // Baseline: copy the same key and value bytes into a batch-sized buffer.
        let (copy_rate, copy_cpu) = memcpy_baseline(&keys, &value, records, &mut sink);
        copies.push(copy_rate);
        for (k, c) in cases.iter_mut().enumerate() {
            let d = &mut c.driver;
            let delivered_before = d.delivered;
            let allocs_before = alloc_counter::allocations() as u64;
            let cpu_before = cpu_time();
            let t = Instant::now();
            run(d, records, c.mode);
            let elapsed = t.elapsed();
            let cpu = cpu_before.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
            allocs[k] += alloc_counter::allocations() as u64 - allocs_before;
            elapsed_total += elapsed;
            assert_eq!(d.failed, 0);
            assert_eq!(
                d.delivered - delivered_before,
                records,
                "every record acknowledged"
            );
            let wall = records as f64 / elapsed.as_secs_f64();
            let per_cpu = cpu.map(|c| records as f64 / c.as_secs_f64());
            eprintln!(
                "rep {rep} ({}): wall {wall:.0} records/s, on-CPU {} records/s; memcpy baseline wall {copy_rate:.0} MB/s, on-CPU {} MB/s; load {}",
                c.label,
                per_cpu.map_or("n/a".to_owned(), |r| format!("{r:.0}")),
                copy_cpu.map_or("n/a".to_owned(), |r| format!("{r:.0}")),
                load_average()
            );
            walls[k].push(wall);
            if let Some(r) = per_cpu {
                cpus[k].push(r);
            }
        }
    }
    for c in &cases {
        let counters = c.driver.client.counters();
        eprintln!(
            "{}: {} blobs, {} requests",
            c.label,
            counters.producer_batches,
            counters.api(ApiKey::PRODUCE).requests
        );
    }
    eprintln!(
        "{reps} x {n_cases} x {records} records of 100 B (8 B keys) to {PARTITIONS} partitions (keyed cases: 1 and {MANY_PARTITIONS}) in {elapsed_total:?}; size_of::<Event>() = {} B",
        std::mem::size_of::<Event>()
    );
    let ratios: Vec<String> = (walls[0].iter().zip(&walls[1]))
        .map(|(a, b)| format!("{:.3}", b / a))
        .collect();
    eprintln!("one hook / no hook, wall, per pair: {}", ratios.join(" "));
    for (k, c) in cases.iter().enumerate() {
        eprintln!(
            "{}: wall records/s: {}; on-CPU records/s: {}",
            c.label,
            spread(&mut walls[k]),
            spread(&mut cpus[k]),
        );
    }
    eprintln!("memcpy MB/s: {}", spread(&mut copies));
    for (k, c) in cases.iter().enumerate() {
        let sfx = c.suffix;
        println!(
            "RESULT producer-records-per-sec{sfx} {:.0}",
            median(&mut walls[k])
        );
        if !cpus[k].is_empty() {
            let per_cpu_sec = median(&mut cpus[k]);
            println!("RESULT producer-records-per-cpu-sec{sfx} {per_cpu_sec:.0}");
            println!(
                "RESULT producer-cpu-ns-per-record{sfx} {:.0}",
                1e9 / per_cpu_sec
            );
        }
        println!(
            "RESULT producer-allocs-per-record{sfx} {:.5}",
            allocs[k] as f64 / (records * reps as u64) as f64
        );
    }
    println!(
        "RESULT producer-baseline-memcpy-MBps {:.0}",
        median(&mut copies)
    );
}

/// Copies every record's key and value into `sink` (a batch-sized buffer, restarted when
/// full), as a producer at least must, `BASELINE_PASSES` times over (so it runs long enough
/// to time); returns MB/s of record bytes copied, by the wall clock and by on-CPU time.
fn memcpy_baseline(
    keys: &[[u8; 8]; 1024],
    value: &[u8; 100],
    records: u64,
    sink: &mut [u8],
) -> (f64, Option<f64>) {
    const BASELINE_PASSES: u64 = 8;
    let per = keys[0].len() + value.len();
    let cpu_before = cpu_time();
    let t = Instant::now();
    let mut at = 0usize;
    for i in 0..records * BASELINE_PASSES {
        if at + per > sink.len() {
            std::hint::black_box(&mut *sink);
            at = 0;
        }
        let key = std::hint::black_box(&keys[(i % 1024) as usize]);
        let (k, rest) = sink[at..at + per].split_at_mut(key.len());
        k.copy_from_slice(key);
        rest.copy_from_slice(std::hint::black_box(value));
        at += per;
    }
    std::hint::black_box(&mut *sink);
    let elapsed = t.elapsed();
    let cpu = cpu_before.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
    let mb = (records * BASELINE_PASSES * per as u64) as f64 / 1e6;
    (
        mb / elapsed.as_secs_f64(),
        cpu.map(|c| mb / c.as_secs_f64()),
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// "median M (min A, max B, spread S %)" with S = (max − min) / median.
fn spread(v: &mut [f64]) -> String {
    if v.is_empty() {
        return "n/a".to_owned();
    }
    let m = median(v);
    let (lo, hi) = (v[0], v[v.len() - 1]);
    format!(
        "median {m:.0} (min {lo:.0}, max {hi:.0}, spread {:.1} %)",
        (hi - lo) / m * 100.0
    )
}

/// The 1-minute load average (Linux), to judge whether the wall-clock rate is honest.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".to_owned())
}
