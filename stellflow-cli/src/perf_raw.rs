//! `perf produce --raw` and `perf consume --raw`: the broker's own ceiling, measured through the
//! sans-IO core's raw request path with prebuilt blobs, to print beside the client's figures.
//!
//! Produce sends one prebuilt blob (records of the run's size, up to the batch size) per
//! Produce request, with one request in flight per partition: the ordering guarantee the
//! producer keeps, and nothing else — no accumulation, no per-record work. Consume reads each
//! partition from its log start with Fetches of consecutive single-blob entries
//! (`partitionMaxBytes = 1`, the exact method of PROTOCOL.md §3.4), several requests pipelined,
//! and counts records from the blob headers without decoding a record (the value bytes are
//! the first blob's share of values times the bytes read). What is left between
//! these figures and `perf produce` / `perf consume` is the client's cost.
//!
//! One file: both ceilings run on one small driver (the connection threads and the core's raw
//! request path, the first half of the file); the produce and the consume halves are each only
//! a loop over that driver.

mod keyed;

pub(crate) use keyed::KeyedSpread;

use crate::cpu::{cpu_per_record, cpu_since, process_cpu_time};
use crate::perf::{latencies, latency_summary};
use crate::{CliError, CliResult, fail};
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};
use stellflow_proto::messages::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ProducePartitionData, ProduceRequest,
    ProduceResponse, ProduceTopicData,
};
use stellflow_proto::record::{
    BatchBuilder, BatchParams, Envelope, blob_records, declared_record_count,
};
use stellflow_proto::{ApiKey, ErrorCode, Reader, StrBytes, Wire};
use stellflow_sansio::{
    Client, ClientConfig, ConnId, ConnectRequest, DisconnectReason, Event, IoFailure, Output,
    RawResponse, RequestId, RequestOptions, Target,
};

/// Frames larger than this are handed to the core unread (it rejects them: the client's
/// response frame limit is lower).
const MAX_FRAME: u32 = 1 << 30;

/// What the produce ceiling sends.
pub struct RawProduce<'a> {
    /// Topic (must exist).
    pub topic: &'a str,
    /// Records to send at least (rounded up to whole blobs).
    pub records: u64,
    /// Value bytes per record.
    pub value: &'a [u8],
    /// Largest blob, in bytes (the producer's `batch_size`).
    pub blob_bytes: usize,
    /// The blob's envelope (the producer's batch format).
    pub envelope: Envelope,
    /// 0, 1 or -1.
    pub acks: i16,
    /// Keyed records spread over the partitions as their keys hash (`--keys`); `None`: one
    /// full blob per request, each partition in turn.
    pub keyed: Option<KeyedSpread>,
}

/// What the consume ceiling reads.
pub struct RawConsume<'a> {
    /// Topic (must exist).
    pub topic: &'a str,
    /// Records to read at least (whole blobs).
    pub records: u64,
    /// Single-blob entries per Fetch request.
    pub entries: usize,
    /// Fetch requests in flight at once.
    pub in_flight: usize,
}

/// Messages from the reader threads to the loop.
enum Msg {
    Up(ConnId, TcpStream),
    Input(ConnId, BytesMut),
    Down(ConnId, DisconnectReason),
}

/// A sans-IO client driven by one thread, with a reader thread per connection.
struct Driver {
    client: Client,
    conns: HashMap<ConnId, TcpStream>,
    out: BytesMut,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    /// Raw answers not yet taken.
    answers: VecDeque<(RequestId, Result<RawResponse, String>)>,
    timeout: Duration,
    /// The `Timeout` the last drain ended with: when the core must be woken.
    deadline: Option<Instant>,
}

impl Driver {
    fn connect(config: ClientConfig) -> CliResult<Driver> {
        let timeout = config.request_timeout;
        let seed = u64::from(std::process::id());
        let client = Client::new(config, Instant::now(), seed)
            .map_err(|e| CliError(format!("invalid client settings: {e}")))?;
        let (tx, rx) = channel();
        let mut d = Driver {
            client,
            conns: HashMap::new(),
            out: BytesMut::with_capacity(64 * 1024),
            tx,
            rx,
            answers: VecDeque::new(),
            timeout,
            deadline: None,
        };
        d.client.refresh_metadata(Instant::now());
        d.drain();
        let start = Instant::now();
        while d.client.metadata().brokers.is_empty() {
            if start.elapsed() > timeout {
                return fail(format!("no broker answered metadata within {timeout:?}"));
            }
            d.step(Duration::from_millis(50))?;
        }
        Ok(d)
    }

    /// The leader of every partition of `topic`, by partition, after one metadata round.
    fn leaders(&mut self, topic: &str) -> CliResult<Vec<(i32, i32)>> {
        let start = Instant::now();
        self.client.refresh_metadata(Instant::now());
        loop {
            if let Some(t) = self.client.metadata().topics.get(topic) {
                let leaders: Result<Vec<_>, _> = t
                    .partitions
                    .values()
                    .map(|p| p.leader().map(|l| (p.partition, l)))
                    .collect();
                match leaders {
                    Ok(l) if !l.is_empty() => return Ok(l),
                    Ok(_) => {}
                    Err(why) if start.elapsed() > self.timeout => {
                        return fail(format!(
                            "topic {topic:?} has a leaderless partition: {why:?}"
                        ));
                    }
                    Err(_) => {}
                }
            }
            if start.elapsed() > self.timeout {
                return fail(format!(
                    "unknown topic {topic:?}: create it with `stellflow topics create {topic}`"
                ));
            }
            self.step(Duration::from_millis(50))?;
        }
    }

    fn request(&mut self, target: Target, key: ApiKey, body: Bytes) -> RequestId {
        let now = Instant::now();
        let opts = RequestOptions::default();
        let id = self.client.request(now, target, key, None, body, &opts);
        self.drain();
        id
    }

    /// The next raw answer, waiting for it.
    fn answer(&mut self) -> CliResult<(RequestId, RawResponse)> {
        loop {
            if let Some((id, r)) = self.answers.pop_front() {
                return r
                    .map(|r| (id, r))
                    .map_err(|e| CliError(format!("request failed: {e}")));
            }
            self.step(self.timeout)?;
        }
    }

    /// Waits for one message (or the core's next deadline, or `max`), applies it, drains.
    fn step(&mut self, max: Duration) -> CliResult {
        let now = Instant::now();
        let wait = (self.deadline).map_or(max, |t| t.saturating_duration_since(now).min(max));
        match self.rx.recv_timeout(wait) {
            Ok(msg) => {
                self.apply(msg);
                // Take everything already queued before draining once.
                while let Ok(msg) = self.rx.try_recv() {
                    self.apply(msg);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return fail("the driver's channel closed"),
        }
        self.client.handle_timeout(Instant::now());
        self.drain();
        Ok(())
    }

    fn apply(&mut self, msg: Msg) {
        let now = Instant::now();
        match msg {
            Msg::Up(conn, stream) => {
                self.conns.insert(conn, stream);
                self.client.handle_connected(conn, now);
            }
            Msg::Input(conn, mut chunk) => self.client.handle_input(conn, now, &mut chunk),
            Msg::Down(conn, reason) => {
                if let Some(s) = self.conns.remove(&conn) {
                    let _ = s.shutdown(Shutdown::Both);
                }
                self.client.handle_disconnected(conn, now, reason);
            }
        }
    }

    /// The drain (see `Client::poll_output`): every output of the core until its `Timeout`,
    /// which is kept as the next deadline.
    fn drain(&mut self) {
        self.deadline = loop {
            match self.client.poll_output(Instant::now(), &mut self.out) {
                Output::Connect(req) => self.open(req),
                Output::Close(close) => {
                    if let Some(s) = self.conns.remove(&close.conn) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
                Output::Transmit(conn) => {
                    let bytes = self.out.split();
                    self.write(conn, &bytes);
                }
                Output::TransmitBytes(conn, bytes) => self.write(conn, &bytes),
                Output::Event(Event::Response { id, result }) => {
                    self.answers
                        .push_back((id, result.map_err(|e| e.to_string())));
                }
                Output::Event(_) => {}
                Output::Timeout(t) => break t,
            }
        };
    }

    /// Writes `bytes` to `conn` (the reader thread keeps reading while this write blocks).
    fn write(&mut self, conn: ConnId, bytes: &[u8]) {
        let failed = match self.conns.get_mut(&conn) {
            Some(s) => s.write_all(bytes).err(),
            None => None,
        };
        if let Some(e) = failed {
            self.apply(Msg::Down(conn, DisconnectReason::io(&e)));
        }
    }

    /// Connects on a thread of its own, which then reads the socket.
    fn open(&mut self, req: ConnectRequest) {
        let tx = self.tx.clone();
        let (conn, host, port) = (req.conn, req.address.host.clone(), req.address.port);
        let spawned = std::thread::Builder::new()
            .name(format!("raw-conn-{}", conn.0))
            .spawn(move || read_conn(conn, &host, port, &tx));
        if let Err(e) = spawned {
            let reason = DisconnectReason::ConnectFailed(IoFailure::new(
                e.kind(),
                format!("cannot spawn a thread: {e}"),
            ));
            self.client
                .handle_disconnected(conn, Instant::now(), reason);
        }
    }

    fn close(mut self) {
        self.client.close(Instant::now());
        self.drain();
        for (_, s) in self.conns.drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn read_conn(conn: ConnId, host: &str, port: u16, tx: &Sender<Msg>) {
    let setup = TcpStream::connect((host, port)).and_then(|s| {
        s.set_nodelay(true)?;
        Ok((s.try_clone()?, s))
    });
    let (mut reader, kept) = match setup {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Msg::Down(conn, DisconnectReason::connect_failed(&e)));
            return;
        }
    };
    if tx.send(Msg::Up(conn, kept)).is_err() {
        return;
    }
    // Frame by frame: each frame is read into an allocation of its own size and handed over
    // whole, so the core takes it without a copy, and `read_to_end` fills it without zeroing
    // it first (two reads a frame; a reader in 256 KiB chunks copies every frame that spans
    // two chunks once, and zeroes each chunk).
    let reason = loop {
        let mut prefix = [0u8; 4];
        if let Err(e) = reader.read_exact(&mut prefix) {
            break match e.kind() {
                ErrorKind::UnexpectedEof => DisconnectReason::PeerClosed,
                _ => DisconnectReason::io(&e),
            };
        }
        let size = u32::from_be_bytes(prefix);
        let mut frame = Vec::with_capacity(4 + size.min(MAX_FRAME) as usize);
        frame.extend_from_slice(&prefix);
        if size > MAX_FRAME {
            // The core rejects it and closes the connection.
            let _ = tx.send(Msg::Input(conn, BytesMut::from(&frame[..])));
            return;
        }
        match (&mut reader).take(u64::from(size)).read_to_end(&mut frame) {
            Ok(n) if n == size as usize => {}
            Ok(_) => break DisconnectReason::PeerClosed,
            Err(e) => break DisconnectReason::io(&e),
        }
        if tx
            .send(Msg::Input(conn, BytesMut::from(Bytes::from(frame))))
            .is_err()
        {
            return;
        }
    };
    let _ = tx.send(Msg::Down(conn, reason));
}

/// One blob of as many records of `value` (with `key`) as fit in `blob_bytes` (at least
/// one), and its record count.
fn build_blob(
    value: &[u8],
    key: Option<&[u8]>,
    blob_bytes: usize,
    envelope: Envelope,
) -> CliResult<(Bytes, u64)> {
    let ts = crate::perf::wall_clock_us() / 1000;
    let params = BatchParams {
        base_timestamp: ts,
        ..BatchParams::default()
    };
    let mut b = BatchBuilder::with_capacity(params, envelope, blob_bytes + 4096);
    let bad = |e| CliError(format!("cannot build the blob: {e}"));
    loop {
        let before = b.encoded_size();
        b.append(ts, key, Some(value)).map_err(bad)?;
        let per = b.encoded_size() - before;
        if b.encoded_size() + per > blob_bytes {
            break;
        }
    }
    let n = u64::from(b.record_count());
    Ok((b.finish().map_err(bad)?, n))
}

/// One blob of exactly `count` records of `value` with `key`.
fn blob_of_count(value: &[u8], key: &[u8], count: u64, envelope: Envelope) -> CliResult<Bytes> {
    let ts = crate::perf::wall_clock_us() / 1000;
    let params = BatchParams {
        base_timestamp: ts,
        ..BatchParams::default()
    };
    let size = usize::try_from(count).unwrap_or(usize::MAX);
    let per = value.len() + key.len() + 16;
    let mut b = BatchBuilder::with_capacity(params, envelope, size.saturating_mul(per) + 4096);
    let bad = |e| CliError(format!("cannot build the blob: {e}"));
    for _ in 0..count {
        b.append(ts, Some(key), Some(value)).map_err(bad)?;
    }
    b.finish().map_err(bad)
}

fn topic_name(topic: &str) -> Option<StrBytes> {
    Some(StrBytes::from(topic))
}

/// The encoded body of a Produce request carrying one blob to one partition of the run's topic.
fn one_blob_request(a: &RawProduce, timeout_ms: i32, partition: i32, blob: Bytes) -> Bytes {
    ProduceRequest {
        transactional_id: None,
        acks: a.acks,
        timeout_ms,
        topic_data: vec![ProduceTopicData {
            topic: topic_name(a.topic),
            partitions: vec![ProducePartitionData {
                partition,
                records: Some(blob),
            }],
        }],
    }
    .to_bytes()
}

/// `perf produce --raw`.
pub fn produce(config: ClientConfig, a: &RawProduce) -> CliResult {
    let mut d = Driver::connect(config)?;
    if let Some(spread) = &a.keyed {
        return keyed::produce(d, a, spread);
    }
    let leaders = d.leaders(a.topic)?;
    let (blob, per_blob) = build_blob(a.value, None, a.blob_bytes, a.envelope)?;
    let timeout_ms = i32::try_from(d.timeout.as_millis()).unwrap_or(i32::MAX);
    // One prebuilt request body per partition: a send is a `Bytes` clone.
    let bodies: Vec<(i32, Target, Bytes)> = leaders
        .iter()
        .map(|&(p, leader)| {
            let body = one_blob_request(a, timeout_ms, p, blob.clone());
            (p, Target::Broker(leader), body)
        })
        .collect();
    let blobs = a.records.div_ceil(per_blob);
    eprintln!(
        "(raw ceiling: {blobs} prebuilt blobs of {per_blob} records, {} bytes each, over {} \
         partition(s), one Produce in flight per partition)",
        blob.len(),
        bodies.len()
    );
    let mut lat_us = latencies();
    let mut in_flight: HashMap<RequestId, (usize, Instant)> = HashMap::new();
    let (mut sent, mut acked) = (0u64, 0u64);
    let cpu = process_cpu_time();
    let start = Instant::now();
    for (i, (_, target, body)) in bodies.iter().enumerate() {
        if sent == blobs {
            break;
        }
        let id = d.request(target.clone(), ApiKey::PRODUCE, body.clone());
        in_flight.insert(id, (i, Instant::now()));
        sent += 1;
    }
    while acked < blobs {
        let (id, r) = d.answer()?;
        let Some((i, t)) = in_flight.remove(&id) else {
            continue;
        };
        let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
        check_produced(&r)?;
        acked += 1;
        lat_us.saturating_record_n(us, per_blob);
        if sent < blobs {
            let (_, target, body) = &bodies[i];
            let id = d.request(target.clone(), ApiKey::PRODUCE, body.clone());
            in_flight.insert(id, (i, Instant::now()));
            sent += 1;
        }
    }
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_since(cpu));
    d.close();
    let n = (blobs * per_blob) as f64;
    println!(
        "{} records sent, {:.1} records/sec ({:.2} MB/sec){}, {}.",
        blobs * per_blob,
        n / secs,
        n * a.value.len() as f64 / secs / 1e6,
        cpu_per_record(cpu, blobs * per_blob),
        latency_summary(&lat_us)
    );
    Ok(())
}

fn check_produced(r: &RawResponse) -> CliResult {
    let body = r
        .body
        .clone()
        .ok_or_else(|| CliError(format!("Produce failed: {:?}", r.header)))?;
    let resp = ProduceResponse::decode(&mut Reader::new(body))
        .map_err(|e| CliError(format!("undecodable Produce answer: {e}")))?;
    for p in resp.responses.iter().flat_map(|t| &t.partitions) {
        if p.error_code != ErrorCode::NONE {
            return fail(format!(
                "Produce to partition {} failed: {}",
                p.partition, p.error_code
            ));
        }
    }
    Ok(())
}

/// Where one partition's read stands.
struct PartRead {
    partition: i32,
    target: Target,
    next: i64,
    end: i64,
}

fn fetch_body(topic: &str, partition: i32, first: i64, count: i64, max_bytes: i32) -> Bytes {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 0,
        isolation_level: 0,
        session_id: 0,
        topic_partitions: vec![FetchTopic {
            topic: topic_name(topic),
            partitions: (first..first + count)
                .map(|o| FetchPartition {
                    partition,
                    current_leader_epoch: -1,
                    fetch_offset: o,
                    log_start_offset: -1,
                    partition_max_bytes: max_bytes,
                })
                .collect(),
        }],
    }
    .to_bytes()
}

fn decode_fetch(r: &RawResponse) -> CliResult<FetchResponse> {
    let body = r
        .body
        .clone()
        .ok_or_else(|| CliError(format!("Fetch failed: {:?}", r.header)))?;
    FetchResponse::decode(&mut Reader::new(body))
        .map_err(|e| CliError(format!("undecodable Fetch answer: {e}")))
}

/// The share of `blob`'s bytes that are record values (decodes this one blob in full).
fn value_share_of(blob: &Bytes) -> f64 {
    let values: usize = blob_records(blob.clone())
        .filter_map(Result::ok)
        .map(|r| r.record.value.map_or(0, |v| v.len()))
        .sum();
    values as f64 / blob.len().max(1) as f64
}

/// `perf consume --raw`.
pub fn consume(config: ClientConfig, a: &RawConsume) -> CliResult {
    let mut d = Driver::connect(config)?;
    let leaders = d.leaders(a.topic)?;
    // Where each partition starts and ends: one empty-budget entry answers both.
    let mut parts = Vec::new();
    for &(partition, leader) in &leaders {
        let target = Target::Broker(leader);
        let id = d.request(
            target.clone(),
            ApiKey::FETCH,
            fetch_body(a.topic, partition, 0, 1, 0),
        );
        let (got, r) = d.answer()?;
        if got != id {
            return fail("an unexpected answer");
        }
        let resp = decode_fetch(&r)?;
        let Some(p) = resp.responses.first().and_then(|t| t.partitions.first()) else {
            return fail("an empty Fetch answer");
        };
        if p.error_code != ErrorCode::NONE {
            return fail(format!(
                "Fetch of partition {partition} failed: {}",
                p.error_code
            ));
        }
        parts.push(PartRead {
            partition,
            target,
            next: p.log_start_offset,
            end: p.high_watermark,
        });
    }
    let blobs: i64 = parts.iter().map(|p| p.end - p.next).sum();
    eprintln!(
        "(raw ceiling: {blobs} blobs in {} partition(s), {} single-blob entries a Fetch, {} \
         Fetches in flight)",
        parts.len(),
        a.entries,
        a.in_flight
    );
    let entries = i64::try_from(a.entries.max(1)).unwrap_or(16);
    let (mut n, mut blob_bytes) = (0u64, 0u64);
    // Value bytes per blob byte, from the first blob: MB/sec counts values, as `perf consume`.
    let mut value_share: Option<f64> = None;
    let mut in_flight = 0usize;
    let (mut asked, mut blobs_read) = (0u64, 0u64);
    let mut turn = 0usize;
    let cpu = process_cpu_time();
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    loop {
        // Keep `in_flight` Fetches out while records are wanted and blobs are left; asked
        // blobs count at the records per blob seen so far (1 before the first answer), so the
        // run reads about `records`, not `in_flight` requests more.
        let per_blob = n.checked_div(blobs_read).unwrap_or(1);
        while in_flight < a.in_flight.max(1) && n + (asked - blobs_read) * per_blob < a.records {
            let Some(i) = (0..parts.len())
                .map(|k| (turn + k) % parts.len())
                .find(|&i| parts[i].next < parts[i].end)
            else {
                break;
            };
            turn = i + 1;
            let p = &mut parts[i];
            let count = entries.min(p.end - p.next);
            let body = fetch_body(a.topic, p.partition, p.next, count, 1);
            p.next += count;
            asked += u64::try_from(count).unwrap_or(0);
            let target = p.target.clone();
            d.request(target, ApiKey::FETCH, body);
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        let (_, r) = d.answer()?;
        in_flight -= 1;
        first.get_or_insert_with(Instant::now);
        let resp = decode_fetch(&r)?;
        for p in resp.responses.iter().flat_map(|t| &t.partitions) {
            if p.error_code != ErrorCode::NONE {
                return fail(format!(
                    "Fetch of partition {} failed: {}",
                    p.partition, p.error_code
                ));
            }
            if let Some(blob) = p.records.as_ref().filter(|b| !b.is_empty()) {
                n += declared_record_count(blob).map_err(|e| CliError(format!("bad blob: {e}")))?;
                blobs_read += 1;
                blob_bytes += blob.len() as u64;
                if value_share.is_none() {
                    value_share = Some(value_share_of(blob));
                }
            }
        }
    }
    let (total, cpu) = (start.elapsed().as_secs_f64(), cpu_since(cpu));
    d.close();
    if n < a.records {
        return fail(format!(
            "only {n} of {} records are in {} (the raw reader stops at the high watermark)",
            a.records, a.topic
        ));
    }
    let fetch = first.map_or(total, |f| f.elapsed().as_secs_f64()).max(1e-9);
    let bytes = blob_bytes as f64 * value_share.unwrap_or(1.0);
    println!(
        "{n} records consumed, {:.2} MB, {:.1} records/sec ({:.2} MB/sec){}; first record after {:.1} ms, then {:.1} records/sec ({:.2} MB/sec).",
        bytes / 1e6,
        n as f64 / total,
        bytes / total / 1e6,
        cpu_per_record(cpu, n),
        (total - fetch).max(0.0) * 1e3,
        n as f64 / fetch,
        bytes / fetch / 1e6
    );
    Ok(())
}
