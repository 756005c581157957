//! The behavioural suite shared by the three runtime adapters (tokio, smol — also under
//! async-std's executor — and blocking), run over real loopback sockets against
//! [`stellflow_sim::serve`].
//!
//! Every case is written once, in `tests/cases/` (one module per subject: `admin`, `producer`,
//! `consumer`, `groups`, `faults`, `hooks`, `real_broker`; the shared helpers and the list of
//! cases in `mod.rs`), against the one adapter API: the same method names, arguments and
//! results on every runtime. Each file under `tests/`
//! names its adapter crate `sf`, defines `aw!` (`.await` for the async adapters, nothing for
//! the blocking one), `delivered!` (a `Delivery` awaited or waited for), `block_on` and
//! `sleep`, and includes the cases, which expand to one `#[test]` each. The async files also
//! include `tests/cases/stream.rs` (the consumer as a `Stream`); `tests/tokio.rs` adds the
//! tokio-only shutdown rules, and `tests/api.rs` checks that the handles of every adapter
//! have the same method names.
//!
//! Run: `cargo test -p stellflow-adapter-tests` (every adapter), or `--test tokio`,
//! `--test smol`, `--test async_std`, `--test blocking`.

use bytes::Bytes;
use std::collections::HashMap;
use std::time::Duration;
use stellflow_sansio::{ClientConfig, ConsumerRecord, OffsetReset, Position};
use stellflow_sim::SimServer;

/// Any error, as text and source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A result of a case.
pub type R<T> = Result<T, BoxError>;

/// Aborts the test process when a case runs longer than its limit: a hang is a failure, never
/// a stuck CI run.
#[derive(Debug)]
pub struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    /// Starts the watchdog for `name`.
    pub fn new(name: &'static str, secs: u64) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(Duration::from_secs(secs))
            {
                eprintln!("{name}: still running after {secs} s, aborting (a hang)");
                std::process::abort();
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A loopback sim broker (one broker, id 1).
pub fn sim() -> R<SimServer> {
    Ok(stellflow_sim::serve("127.0.0.1:0")?)
}

/// A client configuration for `server` with test-friendly backoffs.
pub fn config(server: &SimServer) -> R<ClientConfig> {
    let mut c = ClientConfig::new(&server.local_addr().to_string())?;
    c.metadata_refresh_backoff_max = Duration::from_millis(300);
    c.reconnect_backoff_max = Duration::from_millis(300);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.fetch_backoff_max = Duration::from_millis(50);
    Ok(c)
}

/// `Ok` when `ok`, else the error `what` describes.
pub fn check(ok: bool, what: impl FnOnce() -> String) -> R<()> {
    if ok { Ok(()) } else { Err(what().into()) }
}

/// Record `i`'s key and value.
pub fn payload(i: u32) -> (Bytes, Bytes) {
    let key = Bytes::from(format!("key-{i}"));
    let value = Bytes::from(format!("value-{i:08}-{}", "x".repeat((i % 7) as usize)));
    (key, value)
}

/// The index of a record made by [`payload`], checked against its content.
pub fn index_of(r: &ConsumerRecord) -> R<u32> {
    let v = r.value.as_deref().ok_or("record without value")?;
    let s = std::str::from_utf8(v)?;
    let i: u32 = s.get(6..14).ok_or("short value")?.parse()?;
    let (k, want) = payload(i);
    check(r.key.as_deref() == Some(&k[..]) && v == &want[..], || {
        format!("record {i} has wrong content: {r:?}")
    })?;
    Ok(i)
}

/// Checks that `got` holds records `0..n` exactly once each, in order per partition.
pub fn exactly_once(got: &[ConsumerRecord], n: u32) -> R<Vec<u32>> {
    let mut seen = vec![false; n as usize];
    let mut last: HashMap<i32, (u32, Position)> = HashMap::new();
    let mut order = Vec::with_capacity(got.len());
    for r in got {
        let i = index_of(r)?;
        let slot = seen
            .get_mut(i as usize)
            .ok_or("record index out of range")?;
        check(!*slot, || format!("record {i} consumed twice"))?;
        *slot = true;
        let pos = Position::new(r.offset, r.index);
        if let Some((pi, ppos)) = last.insert(r.partition, (i, pos)) {
            check(pi < i && ppos < pos, || {
                format!(
                    "partition {} out of order: {pi}@{ppos} then {i}@{pos}",
                    r.partition
                )
            })?;
        }
        order.push(i);
    }
    let missing = seen.iter().filter(|s| !**s).count();
    check(missing == 0, || {
        format!("{missing} of {n} records never consumed")
    })?;
    Ok(order)
}

/// The repository README: its Rust code blocks (the quickstart of each adapter) run as
/// doctests of this crate, so the README cannot drift from the API.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The user guide (`docs/guide.md`): its Rust code blocks run as doctests too.
#[doc = include_str!("../../docs/guide.md")]
#[cfg(doctest)]
pub struct GuideDoctests;
/// A producer and consumer hook that counts every call it gets, per record and per commit,
/// so a case can check that each came exactly once.
#[derive(Debug, Default)]
pub struct Tally {
    /// `on_send` calls per produce id.
    pub sends: std::sync::Mutex<HashMap<u64, u32>>,
    /// `on_acknowledgement` calls per produce id, and how many of them were errors.
    pub acks: std::sync::Mutex<HashMap<u64, (u32, u32)>>,
    /// `on_consume` calls per record (partition, blob offset, index in blob).
    pub consumed: std::sync::Mutex<HashMap<(i32, i64, u32), u32>>,
    /// `on_commit` calls per commit id, and how many of them were errors.
    pub commits: std::sync::Mutex<HashMap<u64, (u32, u32)>>,
}

fn bump<K: std::hash::Hash + Eq>(m: &std::sync::Mutex<HashMap<K, u32>>, k: K) {
    *m.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(k)
        .or_default() += 1;
}

fn bump2<K: std::hash::Hash + Eq>(m: &std::sync::Mutex<HashMap<K, (u32, u32)>>, k: K, err: bool) {
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    let e = m.entry(k).or_default();
    e.0 += 1;
    e.1 += u32::from(err);
}

impl stellflow_sansio::ProducerHook for Tally {
    fn on_send(&self, r: &stellflow_sansio::SentRecord<'_>) {
        bump(&self.sends, r.id.0);
    }
    fn on_acknowledgement(&self, a: &stellflow_sansio::Acknowledgement<'_>) {
        bump2(&self.acks, a.id.0, a.result.is_err());
    }
}

impl stellflow_sansio::ConsumerHook for Tally {
    fn on_consume(&self, records: &[ConsumerRecord]) {
        for r in records {
            bump(&self.consumed, (r.partition, r.offset, r.index));
        }
    }
    fn on_commit(&self, c: &stellflow_sansio::CommitOutcome<'_>) {
        bump2(&self.commits, c.id.0, c.result.is_err());
    }
}
