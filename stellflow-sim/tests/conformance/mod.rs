//! The conformance harness: context, assertion macros, shared helpers and the case table.

use std::net::SocketAddr;

/// A case's outcome: `Err` carries a human-readable reason.
pub type CaseResult = Result<(), String>;

/// Fails the case unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!("{} [line {}]", format!($($arg)+), line!()));
        }
    };
}

/// Fails the case unless `actual == expected`.
macro_rules! ensure_eq {
    ($actual:expr, $expected:expr, $($arg:tt)+) => {{
        let (actual, expected) = (&$actual, &$expected);
        if actual != expected {
            return Err(format!(
                "{}: expected {:?}, got {:?} [line {}]",
                format!($($arg)+),
                expected,
                actual,
                line!()
            ));
        }
    }};
}

pub mod cases;
pub mod client;
pub mod proto;

use client::Conn;
use proto::*;

/// Which broker the suite talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The in-process simulated broker, started fresh for this run.
    Sim,
    /// A broker named by `STELLFLOW_BROKER` (possibly long-lived, possibly shared).
    External,
}

/// What a case gets: where the broker is and how to name things uniquely.
pub struct Ctx {
    pub addr: SocketAddr,
    pub target: Target,
    /// `conf-<pid>-<nanos>`: unique per run.
    pub run_prefix: String,
    /// The case's name (used in topic and group names).
    pub case: &'static str,
    /// Notes a case wants printed (e.g. which branch of a conditional check ran).
    pub notes: std::cell::RefCell<Vec<String>>,
}

impl Ctx {
    /// A new connection with read timeouts.
    pub fn conn(&self) -> Result<Conn, String> {
        Conn::connect(self.addr)
    }

    /// A unique name for this run and case: `conf-<pid>-<nanos>-<case>-<suffix>`.
    pub fn name(&self, suffix: &str) -> String {
        format!(
            "{}-{}-{}",
            self.run_prefix,
            self.case.replace('_', "-"),
            suffix
        )
    }

    pub fn note(&self, s: impl Into<String>) {
        self.notes.borrow_mut().push(s.into());
    }
}

/// One scripted behaviour.
pub struct Case {
    pub name: &'static str,
    /// The PROTOCOL.md section(s) the case checks.
    pub section: &'static str,
    pub run: fn(&Ctx) -> CaseResult,
}

// ---------------------------------------------------------------------------------------------
// Shared helpers (each asserts the success path of the call it makes)
// ---------------------------------------------------------------------------------------------

/// Produces one blob and returns its offset; fails unless errorCode is 0.
pub fn produce_ok(c: &mut Conn, topic: &str, partition: i32, blob: &[u8]) -> Result<i64, String> {
    let r = c.call(PRODUCE, &produce_one(topic, partition, 1, blob))?;
    let p = parse_produce_one(&r)?;
    ensure_eq!(p.error, 0, "Produce errorCode for {topic}/{partition}");
    Ok(p.base_offset)
}

/// Produces one blob and returns the partition answer whatever its error.
pub fn produce_raw(
    c: &mut Conn,
    topic: &str,
    partition: i32,
    blob: &[u8],
) -> Result<ProducePartResp, String> {
    let r = c.call(PRODUCE, &produce_one(topic, partition, 1, blob))?;
    parse_produce_one(&r)
}

/// Metadata for the named topics (empty = all).
pub fn metadata(c: &mut Conn, topics: &[&str]) -> Result<MetadataResp, String> {
    let r = c.call(METADATA, &metadata_req(topics))?;
    ensure_eq!(r.error_code, 0, "Metadata header errorCode");
    parse_metadata(&r)
}

/// The broker we are talking to, as its Metadata lists it (single node: exactly one entry).
pub fn self_broker(c: &mut Conn, probe_topic: &str) -> Result<BrokerMd, String> {
    let md = metadata(c, &[probe_topic])?;
    ensure_eq!(
        md.brokers.len(),
        1,
        "brokers in a single-node Metadata answer"
    );
    Ok(md.brokers[0].clone())
}

/// Creates a topic and checks the answer lists partitions `0..n` with no error.
pub fn create_topic(c: &mut Conn, topic: &str, n: i32) -> CaseResult {
    let r = c.call(CREATE_TOPIC, &create_topic_req(topic, n))?;
    let a = parse_topic_admin(&r)?;
    let expected: Vec<(i32, i16, i32)> = (0..n).map(|p| (p, 0, 0)).collect();
    ensure_eq!(a.results, expected, "CreateTopic {topic} results");
    Ok(())
}

/// Best-effort cleanup of a topic this case created.
pub fn delete_topic(c: &mut Conn, topic: &str) -> CaseResult {
    let r = c.call(DELETE_TOPIC, &delete_topic_req(topic))?;
    parse_topic_admin(&r).map(|_| ())
}

/// ListOffsets for one partition; returns the partition answer.
pub fn list_offsets(
    c: &mut Conn,
    topic: &str,
    partition: i32,
    timestamp: i64,
    max_num: i32,
) -> Result<LoPartResp, String> {
    let r = c.call(
        LIST_OFFSETS,
        &list_offsets_one(topic, partition, timestamp, max_num),
    )?;
    let v = parse_list_offsets_parts(&r)?;
    ensure_eq!(v.len(), 1, "ListOffsets partition answers");
    Ok(v[0].clone())
}

/// Log end offset via ListOffsets LATEST.
pub fn log_end(c: &mut Conn, topic: &str, partition: i32) -> Result<i64, String> {
    let p = list_offsets(c, topic, partition, -1, 1)?;
    ensure_eq!(
        p.error,
        0,
        "ListOffsets LATEST errorCode for {topic}/{partition}"
    );
    Ok(p.offset)
}

/// Fetch of one entry; returns the partition answer.
pub fn fetch(
    c: &mut Conn,
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: i32,
) -> Result<FetchPartResp, String> {
    let r = c.call(FETCH, &fetch_one(topic, partition, offset, max_bytes))?;
    let v = parse_fetch_parts(&r)?;
    ensure_eq!(v.len(), 1, "Fetch partition answers");
    Ok(v[0].clone())
}

/// The records of a Fetch answer (never null on this server).
pub fn records(p: &FetchPartResp) -> Result<Vec<u8>, String> {
    match &p.records {
        Some(b) => Ok(b.to_vec()),
        None => Err("Fetch records is null (the server always writes length >= 0)".into()),
    }
}

/// Asserts a topic is unknown to Metadata (named request ⇒ 10, no partitions).
pub fn assert_topic_unknown(c: &mut Conn, topic: &str) -> CaseResult {
    let md = metadata(c, &[topic])?;
    ensure_eq!(md.topics.len(), 1, "Metadata topics for one named topic");
    ensure_eq!(
        md.topics[0].error,
        10,
        "Metadata errorCode for unknown topic {topic}"
    );
    ensure!(
        md.topics[0].partitions.is_empty(),
        "unknown topic {topic} lists partitions: {:?}",
        md.topics[0].partitions
    );
    Ok(())
}

/// InitProducerId for a key; returns the producer id (checks error 0, epoch 0).
pub fn init_pid(c: &mut Conn, transactional_id: Option<&str>) -> Result<i64, String> {
    let r = c.call(INIT_PRODUCER_ID, &init_producer_id_req(transactional_id))?;
    let v = parse_init_pid(&r)?;
    ensure_eq!(v.error, 0, "InitProducerId errorCode");
    ensure_eq!(v.epoch, 0, "InitProducerId producerEpoch");
    Ok(v.producer_id)
}

/// A connection whose clientId is a fresh key, and a producer id allocated for that key.
pub fn keyed_producer(ctx: &Ctx, suffix: &str) -> Result<(Conn, i64), String> {
    let key = ctx.name(suffix);
    let mut c = ctx.conn()?.with_client_id(Some(&key));
    let pid = init_pid(&mut c, None)?;
    Ok((c, pid))
}

/// Checks a Produce answer appended at `offset`: every field as a plain append sets it.
pub fn expect_appended(p: &ProducePartResp, offset: i64, what: &str) -> CaseResult {
    expect_produce_answer(p, 0, offset, what)
}

/// Checks a Produce answer rejected with `error`: nothing appended, every other field as the
/// server writes it for a rejection.
pub fn expect_rejected(p: &ProducePartResp, error: i16, what: &str) -> CaseResult {
    expect_produce_answer(p, error, -1, what)
}

/// Checks every field of a Produce partition answer; the fields other than errorCode and
/// baseOffset are the same for an append and a rejection on a single node.
fn expect_produce_answer(
    p: &ProducePartResp,
    error: i16,
    base_offset: i64,
    what: &str,
) -> CaseResult {
    ensure_eq!(
        (
            p.error,
            p.base_offset,
            p.leader_epoch,
            p.log_append_time,
            p.log_start
        ),
        (error, base_offset, 0, -1, 0),
        "{what}: (errorCode, baseOffset, currentLeaderEpoch, logAppendTimeMs, logStartOffset)"
    );
    Ok(())
}

/// Milliseconds since the Unix epoch, from the local clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A producer id nobody has used: large, derived from the run prefix hash and a salt.
pub fn unused_pid(ctx: &Ctx, salt: u64) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ctx.run_prefix.bytes().chain(ctx.case.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = h.wrapping_add(salt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // Keep it positive and far above any counter a broker could have reached.
    ((h >> 2) | (1 << 60)) as i64
}

/// All registered cases, in run order.
pub fn all_cases() -> Vec<Case> {
    let mut v = Vec::new();
    v.extend(cases::fresh::cases());
    v.extend(cases::transport::cases());
    v.extend(cases::metadata::cases());
    v.extend(cases::produce::cases());
    v.extend(cases::fetch::cases());
    v.extend(cases::list_offsets::cases());
    v.extend(cases::groups::cases());
    v.extend(cases::registry::cases());
    v.extend(cases::producer::cases());
    v.extend(cases::admin::cases());
    v
}
