//! Consumer throughput: fetched response bytes → delivered `ConsumerRecord`s (1 KiB values,
//! or `CONSUMER_BENCH_VALUE` bytes; keys and values not copied). Only the client's side is timed — `handle_input` of the Fetch
//! answers and `poll_record` until empty; the simulated broker that builds the answers is not.
//!
//! Run: `cargo bench -p stellflow-sansio --bench consumer`. Prints
//! `RESULT consumer-records-per-sec N` for v1 blobs (the default format) and, as a second
//! figure, `RESULT consumer-records-per-sec-srfb N` for the same records in SRFB envelopes
//! (uncompressed: CRC-32 over the envelope, then the v1 batch inside), and
//! `RESULT consumer-records-per-sec-leased N` for the v1 blobs taken through leases of 500
//! records (`lease_records`, `RecordLease::decode`, `redeem_lease`: how the adapters take
//! records), beside the `poll_record` figure of the same run, and
//! `RESULT consumer-records-per-sec-views N` for whole blobs (`poll_blob`) read as borrowed
//! views (`FetchedBlob::next_view`, the path `perf consume` takes). Each also prints the
//! spread over its rounds, and `RESULT consumer-cpu-ns-per-record N` (and `-leased`,
//! `-views`): the client's time per record, the core's figure for `perf consume`'s CPU per
//! record.

use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::{
    ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData, Request,
};
use stellflow_proto::record::{BatchBuilder, BatchParams, Compression, Envelope};
use stellflow_proto::wire::Wire;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{
    Client, ClientConfig, DisconnectReason, Hooks, OffsetReset, Output, Position, SeekTo,
    TopicPartition,
};
use stellflow_sim::{ClusterConfig, LogConfig, SimCluster};

/// How the records of a round lie: partitions, blobs per partition, records per blob.
#[derive(Clone, Copy)]
struct Shape {
    partitions: i32,
    blobs: usize,
    records: usize,
}

/// The default figures' shape: 4 partitions of 16 blobs of 1000 records.
const FOUR: Shape = Shape {
    partitions: 4,
    blobs: 16,
    records: 1000,
};
/// The scale pair: the same 65 536 records a round on one partition (64 blobs of 1024) and
/// spread over 1024 partitions (one blob of 64 on each).
const ONE: Shape = Shape {
    partitions: 1,
    blobs: 64,
    records: 1024,
};
const MANY: Shape = Shape {
    partitions: 1024,
    blobs: 1,
    records: 64,
};
/// The value size: `CONSUMER_BENCH_VALUE` bytes (default 1024; 100 for the figure `perf
/// consume` at 100 B compares with).
fn value_size() -> usize {
    std::env::var("CONSUMER_BENCH_VALUE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024)
}
const ROUNDS: usize = 8;

fn produce(sim: &mut SimCluster, now: Instant, partition: i32, blob: Bytes) {
    let conn = sim.connect(1, now).expect("broker");
    let req = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 1000,
        topic_data: vec![ProduceTopicData {
            topic: Some("bench".into()),
            partitions: vec![ProducePartitionData {
                partition,
                records: Some(blob),
            }],
        }],
    };
    let mut buf = BytesMut::new();
    encode_request(
        &mut buf,
        &RequestHeader::new(ProduceRequest::API_KEY, 1, Some("bench")),
        &req,
    );
    sim.handle_input(conn, now, &mut buf);
    let mut out = BytesMut::new();
    sim.take_replies(conn, &mut out);
    sim.disconnect(conn);
    let frame = FrameDecoder::new()
        .decode(&mut out)
        .ok()
        .flatten()
        .expect("answer");
    let (_, body) = split_response(frame).expect("header");
    let r = ProduceResponse::from_bytes(body.expect("body")).expect("decodes");
    assert_eq!(r.responses[0].partitions[0].error_code.0, 0);
}

/// How the bench takes records.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    /// `poll_record` until `None`.
    Records,
    /// Leases of 500 records, decoded, then redeemed.
    Leases,
    /// Whole blobs (`poll_blob`), each record a borrowed view (`FetchedBlob::next_view`): the
    /// path `perf consume` and the adapters' perf examples read through.
    Views,
}

/// A consumer hook that does what a cheap real one does: counts records and commits.
#[derive(Default)]
struct CountHook(std::sync::atomic::AtomicU64);

impl stellflow_sansio::ConsumerHook for CountHook {
    fn on_consume(&self, records: &[stellflow_sansio::ConsumerRecord]) {
        (self.0).fetch_add(records.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Client time and records of one run over blobs built with `envelope`.
fn run(envelope: Envelope, label: &str, take: Take) -> f64 {
    run_with(envelope, label, take, Hooks::default(), FOUR)
}

/// Client time and records of one run over blobs built with `envelope`, with `hooks`.
fn run_with(envelope: Envelope, label: &str, take: Take, hooks: Hooks, shape: Shape) -> f64 {
    let Shape {
        partitions,
        blobs,
        records,
    } = shape;
    let value_len = value_size();
    let mut now = Instant::now();
    let log = LogConfig {
        retention_segments: 1_000,
        ..LogConfig::default()
    };
    let mut sim = SimCluster::new(ClusterConfig::with_brokers(1).log_config(log), now, 1);
    sim.create_topic("bench", partitions, 1).expect("topic");
    let value = vec![b'v'; value_len];
    for p in 0..partitions {
        for _ in 0..blobs {
            let mut b = BatchBuilder::with_capacity(
                BatchParams::default(),
                envelope,
                records * (value_len + 40),
            );
            for i in 0..records {
                let key = (i as u64).to_be_bytes();
                b.append(1_700_000_000_000, Some(&key), Some(&value))
                    .expect("append");
            }
            produce(&mut sim, now, p, b.finish().expect("blob"));
        }
    }
    let mut config = ClientConfig::new("broker-1:9092").expect("config");
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.hooks = hooks;
    let mut client = Client::new(config, now, 1).expect("client");
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new("bench", p))
        .collect();
    let mut links: HashMap<stellflow_sansio::ConnId, stellflow_sim::ConnId> = HashMap::new();
    let mut rev: HashMap<stellflow_sim::ConnId, stellflow_sansio::ConnId> = HashMap::new();
    let mut buf = BytesMut::new();
    let per_round = partitions as usize * blobs * records;
    let mut timed = Duration::ZERO;
    let mut input_time = Duration::ZERO;
    let mut delivered = 0usize;
    let mut value_bytes = 0usize;
    let mut assigned = false;
    let mut round = 0;
    let mut in_round = 0usize;
    let mut round_time = Duration::ZERO;
    let mut round_rates = Vec::with_capacity(ROUNDS);
    while round < ROUNDS {
        if !assigned && !client.metadata().topics.is_empty() {
            client.assign(now, &tps).expect("assign");
            assigned = true;
        }
        let mut progress = false;
        let wake_at = loop {
            buf.clear();
            let output = client.poll_output(now, &mut buf);
            progress |= !matches!(output, Output::Timeout(_));
            match output {
                Output::Connect(cr) => match sim.connect_addr(&cr.address.to_string(), now) {
                    Ok(sc) => {
                        links.insert(cr.conn, sc);
                        rev.insert(sc, cr.conn);
                        client.handle_connected(cr.conn, now);
                    }
                    Err(e) => client.handle_disconnected(
                        cr.conn,
                        now,
                        DisconnectReason::ConnectFailed(stellflow_sansio::IoFailure::new(
                            std::io::ErrorKind::ConnectionRefused,
                            e.to_string(),
                        )),
                    ),
                },
                Output::Transmit(c) => {
                    if let Some(sc) = links.get(&c) {
                        sim.handle_input(*sc, now, &mut buf);
                    }
                }
                // (Only produce requests share blobs; this client only fetches.)
                Output::TransmitBytes(c, bytes) => {
                    if let Some(sc) = links.get(&c) {
                        sim.handle_input(*sc, now, &mut BytesMut::from(&bytes[..]));
                    }
                }
                Output::Close(_) | Output::Event(_) => {}
                Output::Timeout(t) => break t,
            }
        };
        while let Some((sc, bytes)) = sim.poll_transmit() {
            progress = true;
            let Some(c) = rev.get(&sc).copied() else {
                continue;
            };
            let mut input = BytesMut::from(&bytes[..]);
            let t = Instant::now();
            client.handle_input(c, now, &mut input);
            input_time += t.elapsed();
            let mut count = |r: &stellflow_sansio::ConsumerRecord| {
                value_bytes += r.value.as_ref().map_or(0, |v| v.len());
                delivered += 1;
                in_round += 1;
            };
            match take {
                Take::Records => {
                    while let Some(r) = client.poll_record() {
                        count(&r);
                    }
                }
                Take::Leases => {
                    while let Some(mut lease) = client.lease_records(500) {
                        lease.decode();
                        let records = client.redeem_lease(lease).expect("nothing else takes");
                        records.iter().for_each(&mut count);
                    }
                }
                Take::Views => {
                    while let Some(mut blob) = client.poll_blob() {
                        while let Some(r) = blob.next_view() {
                            let r = r.expect("valid record");
                            value_bytes += r.value.map_or(0, <[u8]>::len);
                            delivered += 1;
                            in_round += 1;
                        }
                    }
                }
            }
            let spent = t.elapsed();
            timed += spent;
            round_time += spent;
        }
        if in_round >= per_round {
            round += 1;
            round_rates.push(in_round as f64 / round_time.as_secs_f64());
            in_round = 0;
            round_time = Duration::ZERO;
            for tp in &tps {
                client
                    .seek(now, tp, SeekTo::Position(Position::blob(0)))
                    .expect("seek");
            }
            continue;
        }
        if !progress {
            now = wake_at.unwrap_or(now + Duration::from_millis(1)).max(now);
            client.handle_timeout(now);
        }
    }
    assert_eq!(delivered, per_round * ROUNDS);
    assert_eq!(value_bytes, delivered * value_len);
    let rate = delivered as f64 / timed.as_secs_f64();
    round_rates.sort_by(f64::total_cmp);
    println!(
        "consumer ({label}): {delivered} records ({} MiB of values) in {:.3} s of client time, \
         of which handle_input {:.3} s",
        value_bytes >> 20,
        timed.as_secs_f64(),
        input_time.as_secs_f64()
    );
    println!(
        "  per round: min {:.0} median {:.0} max {:.0} records/s",
        round_rates.first().copied().unwrap_or(0.0),
        round_rates
            .get(round_rates.len() / 2)
            .copied()
            .unwrap_or(0.0),
        round_rates.last().copied().unwrap_or(0.0)
    );
    rate
}

fn main() {
    let v1 = run(Envelope::V1, "v1", Take::Records);
    let srfb = run(Envelope::Srfb(Compression::None), "srfb", Take::Records);
    let leased = run(Envelope::V1, "v1, leases of 500", Take::Leases);
    let views = run(Envelope::V1, "v1, whole blobs as views", Take::Views);
    println!("RESULT consumer-records-per-sec {}", v1 as u64);
    println!("RESULT consumer-records-per-sec-srfb {}", srfb as u64);
    println!("RESULT consumer-records-per-sec-leased {}", leased as u64);
    // The client's time per record (one thread, inside the client's calls only): the core's
    // CPU per record that `perf consume`'s end-to-end `ns CPU/record` is compared with.
    println!("RESULT consumer-cpu-ns-per-record {:.0}", 1e9 / v1);
    println!(
        "RESULT consumer-cpu-ns-per-record-leased {:.0}",
        1e9 / leased
    );
    println!("RESULT consumer-records-per-sec-views {}", views as u64);
    println!("RESULT consumer-cpu-ns-per-record-views {:.0}", 1e9 / views);
    // Paired runs without and with one registered hook (A B A B), leases as the adapters
    // take records: the cost of the hook call sites.
    let (mut plain, mut hooked) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        plain.push(run(Envelope::V1, "v1, leases, no hook", Take::Leases));
        let mut hooks = Hooks::default();
        hooks.consumer(CountHook::default());
        hooked.push(run_with(
            Envelope::V1,
            "v1, leases, one hook",
            Take::Leases,
            hooks,
            FOUR,
        ));
    }
    let ratios: Vec<String> = (plain.iter().zip(&hooked))
        .map(|(a, b)| format!("{:.3}", b / a))
        .collect();
    println!("hooked/plain per pair: {}", ratios.join(" "));
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    println!(
        "RESULT consumer-records-per-sec-leased-nohook {}",
        median(&mut plain) as u64
    );
    println!(
        "RESULT consumer-records-per-sec-leased-hooked {}",
        median(&mut hooked) as u64
    );
    scale_pair(&median);
}

/// One partition beside 1024 partitions, the same records a round, whole blobs as views
/// (`perf consume`'s path), in paired rounds (A B A B A B): the core's cost per record must
/// not grow with the partitions it is assigned.
fn scale_pair(median: &dyn Fn(&mut Vec<f64>) -> f64) {
    let (mut one, mut many) = (Vec::new(), Vec::new());
    let run = |shape, label| run_with(Envelope::V1, label, Take::Views, Hooks::default(), shape);
    for _ in 0..3 {
        one.push(run(ONE, "v1, views, 1 partition"));
        many.push(run(MANY, "v1, views, 1024 partitions"));
    }
    let ratios: Vec<String> = (one.iter().zip(&many))
        .map(|(a, b)| format!("{:.3}", b / a))
        .collect();
    println!(
        "1024 partitions / 1 partition per pair: {}",
        ratios.join(" ")
    );
    let (one, many) = (median(&mut one), median(&mut many));
    println!(
        "RESULT consumer-records-per-sec-views-1-partition {}",
        one as u64
    );
    println!(
        "RESULT consumer-records-per-sec-views-1024-partitions {}",
        many as u64
    );
    println!(
        "RESULT consumer-cpu-ns-per-record-views-1-partition {:.0}",
        1e9 / one
    );
    println!(
        "RESULT consumer-cpu-ns-per-record-views-1024-partitions {:.0}",
        1e9 / many
    );
}
