//! The behavioural suite shared by the three runtime adapters (tokio, smol, blocking), run over
//! real loopback sockets against [`stellflow_sim::serve`].
//!
//! The suite is written once, as async functions generic over [`Adapter`]: a thin description
//! of an adapter's handles and their calls. Each adapter gets one file under `tests/` that
//! implements [`Adapter`] for a local marker type and expands [`suite!`], which generates one
//! `#[test]` per case:
//!
//! * `admin_round_trip` — api-versions, cluster, health, create, describe, list offsets, delete;
//! * `produce_consume_100k` — 100,000 keyed records over 6 partitions, each consumed exactly
//!   once at the `(partition, offset, index)` its delivery reported, in order per partition;
//! * `group_commit_resume` — subscribe, consume part, `commit_sync` (mid-blob), close; a second
//!   member of the group resumes exactly after the commit; also seek, position, pause, resume;
//! * `admin_committed_offsets` — a group member commits; `Admin::committed_offsets` reads the
//!   same positions back in request order, and `None` for a group that never committed;
//! * `broker_restart_mid_stream` — the sim broker restarts between two halves of a stream
//!   while producer and consumer are live; leadership is re-asserted through the Admin API;
//!   every record arrives exactly once;
//! * `broker_stops_answering` — the broker executes but never answers: admin calls, sends and
//!   commits fail with timeouts in bounded time, polls return empty, the producer's buffer
//!   stays bounded (`enqueue` fails with buffer-full after the max block time), nothing hangs,
//!   and the client recovers once the broker answers again.
//!
//! # Plugging in an adapter
//!
//! Async adapters with the tokio/smol API shape use [`impl_async_adapter!`]:
//!
//! ```ignore
//! struct Smol;
//! stellflow_adapter_tests::impl_async_adapter!(Smol, stellflow_smol, "smol",
//!     block_on = |f| smol::block_on(f), sleep = |d| async_io::Timer::after(d));
//! stellflow_adapter_tests::suite!(Smol);
//! ```
//!
//! A blocking adapter implements [`Adapter`] by hand: each `async fn` simply calls the blocking
//! method (no `.await` inside), `block_on` is [`block_on_blocking`], `sleep` is
//! `std::thread::sleep`. See `tests/blocking.rs`.
//!
//! Run: `cargo test -p stellflow-adapter-tests` (every adapter), or `--test tokio`,
//! `--test smol`, `--test async_std`.

use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    AdminResponse, BrokerApiVersions, ClientConfig, ClusterStatus, CommittedOffset, ConsumerRecord,
    Counters, ListedOffset, OffsetReset, OffsetSpec, Position, ReassertedPartition, RecordMetadata,
    SeekTo, TopicAdminResult, TopicDescription, TopicPartition,
};
use stellflow_sim::{Fault, FaultRule, SimServer};

/// Any error, as text and source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A result of an adapter call.
pub type R<T> = Result<T, BoxError>;

/// What the suite needs of an adapter: its handles and their calls. The methods mirror the
/// shared API shape (DESIGN §4). Async adapters forward to `.await`ed calls; a blocking one
/// calls its blocking methods inside the `async fn`s.
#[allow(async_fn_in_trait)]
pub trait Adapter: 'static {
    /// The adapter's name in messages.
    const NAME: &'static str;
    /// The admin handle.
    type Admin;
    /// The producer handle.
    type Producer;
    /// The consumer handle.
    type Consumer;
    /// What `enqueue` returns: the pending outcome of one record.
    type Delivery;

    /// Runs a test body to completion on the adapter's executor.
    fn block_on<T>(f: impl Future<Output = T>) -> T;
    /// Sleeps without blocking the adapter's executor.
    async fn sleep(d: Duration);

    /// A client with an admin handle.
    async fn admin(config: ClientConfig) -> R<Self::Admin>;
    /// A client with a producer handle; `max_block` bounds the wait for buffer space.
    async fn producer(config: ClientConfig, max_block: Duration) -> R<Self::Producer>;
    /// A client with a consumer handle.
    async fn consumer(config: ClientConfig) -> R<Self::Consumer>;

    /// `Admin::api_versions(Target::Any)`.
    async fn api_versions(a: &Self::Admin) -> R<BrokerApiVersions>;
    /// `Admin::describe_cluster(Target::Any)`.
    async fn describe_cluster(a: &Self::Admin) -> R<ClusterStatus>;
    /// `Admin::health_check(Target::Any)`.
    async fn health_check(a: &Self::Admin) -> R<ClusterStatus>;
    /// `Admin::create_topic(topic, partitions, Target::Any)`.
    async fn create_topic(a: &Self::Admin, topic: &str, partitions: i32) -> R<TopicAdminResult>;
    /// `Admin::delete_topic(topic, Target::Any)`.
    async fn delete_topic(a: &Self::Admin, topic: &str) -> R<TopicAdminResult>;
    /// `Admin::describe_topics(topics)`: found topics and missing names.
    async fn describe_topics(
        a: &Self::Admin,
        topics: &[&str],
    ) -> R<(Vec<TopicDescription>, Vec<String>)>;
    /// `Admin::list_offsets(partitions)`.
    async fn list_offsets(
        a: &Self::Admin,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> R<Vec<ListedOffset>>;
    /// `Admin::reassert_leadership(broker)`.
    async fn reassert_leadership(a: &Self::Admin, broker: i32) -> R<Vec<ReassertedPartition>>;
    /// `Admin::committed_offsets(group, partitions)`.
    async fn committed_offsets(
        a: &Self::Admin,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> R<Vec<CommittedOffset>>;
    /// `Admin::request(AdminRequest::DecommissionBroker { .. })`-style generic call, used to
    /// check that the generic entry point answers.
    async fn admin_request(
        a: &Self::Admin,
        request: stellflow_sansio::AdminRequest,
    ) -> R<AdminResponse>;
    /// The client's counters.
    async fn counters(a: &Self::Admin) -> R<Counters>;

    /// `Producer::send`: waits for the outcome.
    async fn send(p: &Self::Producer, topic: &str, key: Bytes, value: Bytes) -> R<RecordMetadata>;
    /// `Producer::enqueue`: waits for buffer space only.
    async fn enqueue(
        p: &Self::Producer,
        topic: &str,
        key: Bytes,
        value: Bytes,
    ) -> R<Self::Delivery>;
    /// Awaits one delivery.
    async fn delivered(d: Self::Delivery) -> R<RecordMetadata>;
    /// `Producer::flush`.
    async fn flush(p: &Self::Producer) -> R<()>;
    /// `Producer::close`.
    async fn close_producer(p: &Self::Producer) -> R<()>;

    /// `Consumer::assign`.
    async fn assign(c: &Self::Consumer, partitions: Vec<TopicPartition>) -> R<()>;
    /// `Consumer::subscribe`.
    async fn subscribe(c: &Self::Consumer, topics: &[&str]) -> R<()>;
    /// `Consumer::poll` returning at most `max` records.
    async fn poll(c: &Self::Consumer, timeout: Duration, max: usize) -> R<Vec<ConsumerRecord>>;
    /// `Consumer::commit_sync`: the committed positions.
    async fn commit_sync(c: &Self::Consumer) -> R<Vec<(TopicPartition, Position)>>;
    /// `Consumer::commit_async`.
    async fn commit_async(c: &Self::Consumer) -> R<()>;
    /// `Consumer::seek`.
    async fn seek(c: &Self::Consumer, tp: TopicPartition, to: SeekTo) -> R<()>;
    /// `Consumer::position`.
    async fn position(c: &Self::Consumer, tp: TopicPartition) -> R<Option<Position>>;
    /// `Consumer::pause`.
    async fn pause(c: &Self::Consumer, tp: TopicPartition) -> R<()>;
    /// `Consumer::resume`.
    async fn resume(c: &Self::Consumer, tp: TopicPartition) -> R<()>;
    /// `Consumer::close`.
    async fn close_consumer(c: &Self::Consumer) -> R<()>;
}

/// `block_on` for blocking adapters: runs a future whose awaits never wait.
pub fn block_on_blocking<T>(f: impl Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Implements [`Adapter`] for an async adapter crate with the shared API shape.
#[macro_export]
macro_rules! impl_async_adapter {
    ($name:ident, $krate:ident, $label:literal, block_on = $bo:expr, sleep = $sleep:expr) => {
        impl $crate::Adapter for $name {
            const NAME: &'static str = $label;
            type Admin = $krate::Admin;
            type Producer = $krate::Producer;
            type Consumer = $krate::Consumer;
            type Delivery = $krate::Delivery;

            fn block_on<T>(f: impl ::std::future::Future<Output = T>) -> T {
                ($bo)(f)
            }
            async fn sleep(d: ::std::time::Duration) {
                ($sleep)(d).await;
            }
            async fn admin(c: $krate::ClientConfig) -> $crate::R<Self::Admin> {
                Ok($krate::Admin::connect(c).await?)
            }
            async fn producer(
                c: $krate::ClientConfig,
                max_block: ::std::time::Duration,
            ) -> $crate::R<Self::Producer> {
                let mut o = $krate::Options::default();
                o.max_block = max_block;
                o.close_timeout = ::std::time::Duration::from_secs(5);
                Ok($krate::Producer::connect_with(c, o).await?)
            }
            async fn consumer(c: $krate::ClientConfig) -> $crate::R<Self::Consumer> {
                Ok($krate::Consumer::connect(c).await?)
            }
            async fn api_versions(
                a: &Self::Admin,
            ) -> $crate::R<stellflow_sansio::BrokerApiVersions> {
                Ok(a.api_versions($krate::Target::Any).await?)
            }
            async fn describe_cluster(
                a: &Self::Admin,
            ) -> $crate::R<stellflow_sansio::ClusterStatus> {
                Ok(a.describe_cluster($krate::Target::Any).await?)
            }
            async fn health_check(a: &Self::Admin) -> $crate::R<stellflow_sansio::ClusterStatus> {
                Ok(a.health_check($krate::Target::Any).await?)
            }
            async fn create_topic(
                a: &Self::Admin,
                t: &str,
                n: i32,
            ) -> $crate::R<stellflow_sansio::TopicAdminResult> {
                Ok(a.create_topic(t, n, $krate::Target::Any).await?)
            }
            async fn delete_topic(
                a: &Self::Admin,
                t: &str,
            ) -> $crate::R<stellflow_sansio::TopicAdminResult> {
                Ok(a.delete_topic(t, $krate::Target::Any).await?)
            }
            async fn describe_topics(
                a: &Self::Admin,
                t: &[&str],
            ) -> $crate::R<(Vec<stellflow_sansio::TopicDescription>, Vec<String>)> {
                Ok(a.describe_topics(t).await?)
            }
            async fn list_offsets(
                a: &Self::Admin,
                p: &[(&str, i32, stellflow_sansio::OffsetSpec)],
            ) -> $crate::R<Vec<stellflow_sansio::ListedOffset>> {
                Ok(a.list_offsets(p).await?)
            }
            async fn reassert_leadership(
                a: &Self::Admin,
                b: i32,
            ) -> $crate::R<Vec<stellflow_sansio::ReassertedPartition>> {
                Ok(a.reassert_leadership(b).await?)
            }
            async fn committed_offsets(
                a: &Self::Admin,
                g: &str,
                p: &[(&str, i32)],
            ) -> $crate::R<Vec<stellflow_sansio::CommittedOffset>> {
                Ok(a.committed_offsets(g, p).await?)
            }
            async fn admin_request(
                a: &Self::Admin,
                r: stellflow_sansio::AdminRequest,
            ) -> $crate::R<stellflow_sansio::AdminResponse> {
                Ok(a.request(r, Default::default()).await?)
            }
            async fn counters(a: &Self::Admin) -> $crate::R<stellflow_sansio::Counters> {
                Ok(a.counters().await?)
            }
            async fn send(
                p: &Self::Producer,
                t: &str,
                k: ::bytes::Bytes,
                v: ::bytes::Bytes,
            ) -> $crate::R<stellflow_sansio::RecordMetadata> {
                Ok(p.send($krate::Record::new(t, v).with_key(k)).await?)
            }
            async fn enqueue(
                p: &Self::Producer,
                t: &str,
                k: ::bytes::Bytes,
                v: ::bytes::Bytes,
            ) -> $crate::R<Self::Delivery> {
                Ok(p.enqueue($krate::Record::new(t, v).with_key(k)).await?)
            }
            async fn delivered(d: Self::Delivery) -> $crate::R<stellflow_sansio::RecordMetadata> {
                Ok(d.await?)
            }
            async fn flush(p: &Self::Producer) -> $crate::R<()> {
                Ok(p.flush().await?)
            }
            async fn close_producer(p: &Self::Producer) -> $crate::R<()> {
                Ok(p.close().await?)
            }
            async fn assign(
                c: &Self::Consumer,
                ps: Vec<stellflow_sansio::TopicPartition>,
            ) -> $crate::R<()> {
                Ok(c.assign(ps).await?)
            }
            async fn subscribe(c: &Self::Consumer, t: &[&str]) -> $crate::R<()> {
                Ok(c.subscribe(t).await?)
            }
            async fn poll(
                c: &Self::Consumer,
                timeout: ::std::time::Duration,
                max: usize,
            ) -> $crate::R<Vec<stellflow_sansio::ConsumerRecord>> {
                Ok(c.poll_max(timeout, max).await?)
            }
            async fn commit_sync(
                c: &Self::Consumer,
            ) -> $crate::R<Vec<(stellflow_sansio::TopicPartition, stellflow_sansio::Position)>>
            {
                Ok(c.commit_sync().await?)
            }
            async fn commit_async(c: &Self::Consumer) -> $crate::R<()> {
                Ok(c.commit_async().await?)
            }
            async fn seek(
                c: &Self::Consumer,
                tp: stellflow_sansio::TopicPartition,
                to: stellflow_sansio::SeekTo,
            ) -> $crate::R<()> {
                Ok(c.seek(tp, to).await?)
            }
            async fn position(
                c: &Self::Consumer,
                tp: stellflow_sansio::TopicPartition,
            ) -> $crate::R<Option<stellflow_sansio::Position>> {
                Ok(c.position(tp).await?)
            }
            async fn pause(
                c: &Self::Consumer,
                tp: stellflow_sansio::TopicPartition,
            ) -> $crate::R<()> {
                Ok(c.pause(tp).await?)
            }
            async fn resume(
                c: &Self::Consumer,
                tp: stellflow_sansio::TopicPartition,
            ) -> $crate::R<()> {
                Ok(c.resume(tp).await?)
            }
            async fn close_consumer(c: &Self::Consumer) -> $crate::R<()> {
                Ok(c.close().await?)
            }
        }
    };
}

/// Expands to one `#[test]` per suite case for the adapter `$a` (a type implementing
/// [`Adapter`]).
#[macro_export]
macro_rules! suite {
    ($a:ty) => {
        $crate::suite!(@case $a, admin_round_trip);
        $crate::suite!(@case $a, produce_consume_100k);
        $crate::suite!(@case $a, group_commit_resume);
        $crate::suite!(@case $a, admin_committed_offsets);
        $crate::suite!(@case $a, broker_restart_mid_stream);
        $crate::suite!(@case $a, broker_stops_answering);
        $crate::suite!(@case $a, commit_during_outage);
    };
    ($(#[$m:meta])* @case $a:ty, $case:ident) => {
        #[test]
        $(#[$m])*
        fn $case() {
            let _dog = $crate::Watchdog::new(stringify!($case), 240);
            <$a as $crate::Adapter>::block_on($crate::$case::<$a>()).expect(stringify!($case));
        }
    };
}

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

fn check(ok: bool, what: impl FnOnce() -> String) -> R<()> {
    if ok { Ok(()) } else { Err(what().into()) }
}

/// Polls until `n` records came or `limit` passed.
pub async fn poll_n<A: Adapter>(
    c: &A::Consumer,
    n: usize,
    limit: Duration,
) -> R<Vec<ConsumerRecord>> {
    let end = Instant::now() + limit;
    let mut got = Vec::with_capacity(n);
    while got.len() < n && Instant::now() < end {
        got.extend(A::poll(c, Duration::from_millis(200), 500).await?);
    }
    Ok(got)
}

/// Creates `topic` and waits until every partition has a leader in the metadata.
pub async fn create_topic<A: Adapter>(a: &A::Admin, topic: &str, partitions: i32) -> R<()> {
    let r = A::create_topic(a, topic, partitions).await?;
    check(r.is_ok(), || format!("create {topic}: {r:?}"))?;
    Ok(())
}

fn payload(i: u32) -> (Bytes, Bytes) {
    let key = Bytes::from(format!("key-{i}"));
    let value = Bytes::from(format!("value-{i:08}-{}", "x".repeat((i % 7) as usize)));
    (key, value)
}

fn index_of(r: &ConsumerRecord) -> R<u32> {
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
fn exactly_once(got: &[ConsumerRecord], n: u32) -> R<Vec<u32>> {
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

/// Admin round trip over every read-only and topic operation.
pub async fn admin_round_trip<A: Adapter>() -> R<()> {
    let server = sim()?;
    let admin = A::admin(config(&server)?).await?;
    let v = A::api_versions(&admin).await?;
    check(!v.apis.is_empty(), || {
        format!("{}: no APIs: {v:?}", A::NAME)
    })?;
    let c = A::describe_cluster(&admin).await?;
    check(c.broker_count == 1, || format!("cluster: {c:?}"))?;
    let h = A::health_check(&admin).await?;
    check(h.error_code.is_ok(), || format!("health: {h:?}"))?;
    create_topic::<A>(&admin, "admin-rt", 3).await?;
    let (topics, missing) = A::describe_topics(&admin, &["admin-rt", "nope"]).await?;
    check(topics.len() == 1 && topics[0].partitions.len() == 3, || {
        format!("describe: {topics:?}")
    })?;
    check(missing == ["nope"], || format!("missing: {missing:?}"))?;
    let producer = A::producer(config(&server)?, Duration::from_secs(5)).await?;
    let (k, v) = payload(1);
    let m = A::send(&producer, "admin-rt", k, v).await?;
    let offsets = A::list_offsets(
        &admin,
        &[
            ("admin-rt", m.partition, OffsetSpec::Earliest),
            ("admin-rt", m.partition, OffsetSpec::Latest),
        ],
    )
    .await?;
    let got: Vec<i64> = offsets
        .iter()
        .map(|o| o.result.as_ref().map(|i| i.offset).unwrap_or(-99))
        .collect();
    check(got == [0, 1], || format!("offsets {offsets:?}"))?;
    let req = stellflow_sansio::AdminRequest::DescribeCluster {
        target: stellflow_sansio::Target::Any,
    };
    let r = A::admin_request(&admin, req).await?;
    check(matches!(r, AdminResponse::Cluster(_)), || format!("{r:?}"))?;
    let d = A::delete_topic(&admin, "admin-rt").await?;
    check(d.is_ok(), || format!("delete: {d:?}"))?;
    let (topics, _) = A::describe_topics(&admin, &["admin-rt"]).await?;
    check(topics.is_empty(), || format!("still there: {topics:?}"))?;
    let bad = A::create_topic(&admin, "../escape", 1).await;
    check(bad.is_err(), || "an invalid topic name was accepted".into())?;
    A::close_producer(&producer).await?;
    Ok(())
}

/// 100,000 keyed records over 6 partitions, consumed back exactly.
pub async fn produce_consume_100k<A: Adapter>() -> R<()> {
    const N: u32 = 100_000;
    let server = sim()?;
    let admin = A::admin(config(&server)?).await?;
    create_topic::<A>(&admin, "bulk", 6).await?;
    let producer = A::producer(config(&server)?, Duration::from_secs(30)).await?;
    let mut pending = Vec::with_capacity(N as usize);
    for i in 0..N {
        let (k, v) = payload(i);
        pending.push(A::enqueue(&producer, "bulk", k, v).await?);
    }
    A::flush(&producer).await?;
    let mut written = Vec::with_capacity(N as usize);
    for d in pending {
        written.push(A::delivered(d).await?);
    }
    let parts: std::collections::BTreeSet<i32> = written.iter().map(|m| m.partition).collect();
    check(parts.len() == 6, || {
        format!("keyed records hit only {parts:?}")
    })?;

    let consumer = A::consumer(config(&server)?).await?;
    let tps: Vec<TopicPartition> = (0..6).map(|p| TopicPartition::new("bulk", p)).collect();
    A::assign(&consumer, tps).await?;
    let got = poll_n::<A>(&consumer, N as usize, Duration::from_secs(120)).await?;
    check(got.len() == N as usize, || {
        format!("consumed {} of {N}", got.len())
    })?;
    exactly_once(&got, N)?;
    for r in &got {
        let i = index_of(r)?;
        let m = &written[i as usize];
        check(
            m.partition == r.partition && m.offset == Some(r.offset) && m.index == r.index,
            || {
                format!(
                    "record {i}: delivered at {m:?}, consumed at {}#{}",
                    r.offset, r.index
                )
            },
        )?;
    }
    let extra = A::poll(&consumer, Duration::from_millis(300), 500).await?;
    check(extra.is_empty(), || {
        format!("{} records past the end", extra.len())
    })?;
    A::close_consumer(&consumer).await?;
    A::close_producer(&producer).await?;
    Ok(())
}

/// Group subscribe, consume part, commit mid-stream, resume exactly in a new member.
pub async fn group_commit_resume<A: Adapter>() -> R<()> {
    const N: u32 = 1_000;
    let server = sim()?;
    let admin = A::admin(config(&server)?).await?;
    create_topic::<A>(&admin, "grp", 3).await?;
    let producer = A::producer(config(&server)?, Duration::from_secs(10)).await?;
    for i in 0..N {
        let (k, v) = payload(i);
        drop(A::enqueue(&producer, "grp", k, v).await?);
    }
    A::flush(&producer).await?;

    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("grp-g".into());
    cfg.consumer.enable_auto_commit = false;
    let first = A::consumer(cfg.clone()).await?;
    A::subscribe(&first, &["grp"]).await?;
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < 300 && Instant::now() < end {
        got.extend(A::poll(&first, Duration::from_millis(200), 100).await?);
    }
    check((300..N as usize).contains(&got.len()), || {
        format!("first member got {}", got.len())
    })?;
    let committed = A::commit_sync(&first).await?;
    for (tp, pos) in &committed {
        let last = got.iter().rfind(|r| r.partition == tp.partition);
        if let Some(last) = last {
            // Right after the last record, or at the next blob when that record ended its blob.
            let next_blob = Position::blob(last.offset + 1);
            check(*pos == last.next_position() || *pos == next_blob, || {
                format!(
                    "{tp} committed {pos}, last record {}#{}",
                    last.offset, last.index
                )
            })?;
        }
        let now = A::position(&first, tp.clone()).await?;
        check(now == Some(*pos), || {
            format!("{tp}: position {now:?} != {pos}")
        })?;
    }
    check(committed.len() == 3, || format!("committed {committed:?}"))?;
    A::close_consumer(&first).await?;

    let second = A::consumer(cfg).await?;
    A::subscribe(&second, &["grp"]).await?;
    let rest = poll_n::<A>(&second, N as usize - got.len(), Duration::from_secs(60)).await?;
    got.extend(rest);
    exactly_once(&got, N)?;

    // seek, pause and resume on the live member.
    let tp = TopicPartition::new("grp", 0);
    A::pause(&second, tp.clone()).await?;
    A::seek(&second, tp.clone(), SeekTo::Beginning).await?;
    let paused = A::poll(&second, Duration::from_millis(300), 500).await?;
    check(paused.is_empty(), || "a paused partition delivered".into())?;
    A::resume(&second, tp.clone()).await?;
    let again = poll_n::<A>(&second, 1, Duration::from_secs(10)).await?;
    check(
        again.first().is_some_and(|r| r.offset == 0 && r.index == 0),
        || {
            format!(
                "seek to beginning gave {:?}",
                again.first().map(|r| (r.offset, r.index))
            )
        },
    )?;
    A::commit_async(&second).await?;
    A::close_consumer(&second).await?;
    A::close_producer(&producer).await?;
    Ok(())
}

/// `Admin::committed_offsets` reads back what a group member committed (mid-blob positions
/// included), in request order; a group that never committed has `None` everywhere.
pub async fn admin_committed_offsets<A: Adapter>() -> R<()> {
    let server = sim()?;
    let admin = A::admin(config(&server)?).await?;
    create_topic::<A>(&admin, "cmt", 2).await?;
    // One blob per partition (the flush sends them), so 30 records end inside a blob.
    let mut pcfg = config(&server)?;
    pcfg.producer.linger = Duration::from_secs(10);
    let producer = A::producer(pcfg, Duration::from_secs(10)).await?;
    for i in 0..200 {
        let (k, v) = payload(i);
        drop(A::enqueue(&producer, "cmt", k, v).await?);
    }
    A::flush(&producer).await?;
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("cmt-g".into());
    cfg.consumer.enable_auto_commit = false;
    let consumer = A::consumer(cfg).await?;
    A::subscribe(&consumer, &["cmt"]).await?;
    // Take a few records only, so that a position is likely inside a blob.
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while got.len() < 30 && Instant::now() < end {
        got.extend(A::poll(&consumer, Duration::from_millis(200), 30 - got.len()).await?);
    }
    check(got.len() == 30, || format!("consumed {}", got.len()))?;
    let committed = A::commit_sync(&consumer).await?;
    check(committed.iter().any(|(_, p)| p.index > 0), || {
        format!("no mid-blob position committed: {committed:?}")
    })?;

    // Asked in reverse partition order: answered in that order.
    let ask = [("cmt", 1), ("cmt", 0)];
    let read = A::committed_offsets(&admin, "cmt-g", &ask).await?;
    check(read.len() == 2, || format!("read {read:?}"))?;
    for (r, (topic, partition)) in read.iter().zip(ask) {
        check(r.topic == topic && r.partition == partition, || {
            format!("answer out of request order: {read:?}")
        })?;
        let tp = TopicPartition::new(topic, partition);
        let want = committed.iter().find(|(t, _)| *t == tp).map(|(_, p)| *p);
        check(r.result == Ok(want), || {
            format!("{tp}: committed {want:?}, admin read {:?}", r.result)
        })?;
    }
    let none = A::committed_offsets(&admin, "cmt-nobody", &ask).await?;
    check(
        none.len() == 2 && none.iter().all(|r| r.result == Ok(None)),
        || format!("a group that never committed: {none:?}"),
    )?;
    A::close_consumer(&consumer).await?;
    A::close_producer(&producer).await?;
    Ok(())
}

/// A broker restart between two halves of a stream, with leadership re-asserted via Admin.
pub async fn broker_restart_mid_stream<A: Adapter>() -> R<()> {
    const HALF: u32 = 5_000;
    let server = sim()?;
    let admin = A::admin(config(&server)?).await?;
    create_topic::<A>(&admin, "restart", 3).await?;
    let producer = A::producer(config(&server)?, Duration::from_secs(30)).await?;
    let consumer = A::consumer(config(&server)?).await?;
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("restart", p)).collect();
    A::assign(&consumer, tps).await?;

    let mut pending = Vec::new();
    for i in 0..HALF {
        let (k, v) = payload(i);
        pending.push(A::enqueue(&producer, "restart", k, v).await?);
    }
    A::flush(&producer).await?;
    let mut got = poll_n::<A>(&consumer, HALF as usize, Duration::from_secs(60)).await?;
    check(got.len() == HALF as usize, || {
        format!("before restart: {}", got.len())
    })?;

    server.with_cluster(|c, now| c.restart(1, now))??;
    for i in HALF..2 * HALF {
        let (k, v) = payload(i);
        pending.push(A::enqueue(&producer, "restart", k, v).await?);
    }
    // Until leadership is re-asserted the broker refuses Produce and Fetch (error 9).
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        match A::reassert_leadership(&admin, 1).await {
            Ok(r) if !r.is_empty() && r.iter().all(|p| p.result.is_ok()) => break,
            other if Instant::now() > end => return Err(format!("reassert: {other:?}").into()),
            _ => A::sleep(Duration::from_millis(100)).await,
        }
    }
    A::flush(&producer).await?;
    for d in pending {
        A::delivered(d).await?;
    }
    got.extend(poll_n::<A>(&consumer, HALF as usize, Duration::from_secs(60)).await?);
    exactly_once(&got, 2 * HALF)?;
    A::close_consumer(&consumer).await?;
    A::close_producer(&producer).await?;
    Ok(())
}

/// The broker executes requests but never answers.
pub async fn broker_stops_answering<A: Adapter>() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.request_timeout = Duration::from_millis(800);
    cfg.producer.delivery_timeout = Duration::from_secs(2);
    cfg.producer.ack_timeout = Duration::from_millis(500);
    cfg.producer.batch_size = 16 * 1024;
    cfg.producer.buffer_memory = 64 * 1024;
    cfg.consumer.group_id = Some("stall".into());
    cfg.consumer.rebalance_timeout = Duration::from_secs(2);
    let admin = A::admin(cfg.clone()).await?;
    create_topic::<A>(&admin, "stall", 1).await?;
    let producer = A::producer(cfg.clone(), Duration::from_millis(300)).await?;
    let consumer = A::consumer(cfg.clone()).await?;
    A::assign(&consumer, vec![TopicPartition::new("stall", 0)]).await?;
    let (k, v) = payload(0);
    A::send(&producer, "stall", k, v).await?;
    check(
        poll_n::<A>(&consumer, 1, Duration::from_secs(20))
            .await?
            .len()
            == 1,
        || "the first record never arrived".into(),
    )?;

    server.with_cluster(|c, _| {
        c.inject_fault(FaultRule {
            broker: None,
            api_key: None,
            fault: Fault::DropResponse,
            probability: 1.0,
            remaining: None,
        })
    })?;
    let bounded = |t: Instant, limit: u64, what: &str| {
        check(t.elapsed() < Duration::from_secs(limit), || {
            format!("{what} took {:?}", t.elapsed())
        })
    };
    let t = Instant::now();
    let r = A::describe_cluster(&admin).await;
    check(r.is_err(), || format!("describe_cluster answered: {r:?}"))?;
    bounded(t, 10, "describe_cluster")?;

    let t = Instant::now();
    let (k, v) = payload(1);
    let r = A::send(&producer, "stall", k, v).await;
    check(r.is_err(), || format!("send answered: {r:?}"))?;
    bounded(t, 15, "send")?;

    let t = Instant::now();
    let polled = A::poll(&consumer, Duration::from_millis(300), 500).await?;
    check(polled.is_empty(), || "records from a silent broker".into())?;
    bounded(t, 5, "poll")?;

    // The buffer stays bounded: beyond `buffer_memory` records wait at most `max_block` and
    // then fail with buffer-full; every record gets an error outcome in bounded time.
    let t = Instant::now();
    let (mut outcomes, mut pending) = (Vec::new(), Vec::new());
    for i in 0..2_000u32 {
        let value = Bytes::from(vec![b'x'; 1024]);
        match A::enqueue(&producer, "stall", Bytes::from(i.to_string()), value).await {
            Ok(d) => pending.push(d),
            Err(e) => outcomes.push(Err(e.to_string())),
        }
    }
    for d in pending {
        outcomes.push(A::delivered(d).await.map(|_| ()).map_err(|e| e.to_string()));
    }
    let full = outcomes
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.contains("full")));
    let full = full.count();
    check(outcomes.iter().all(Result::is_err), || {
        "a record was delivered to a silent broker".into()
    })?;
    check(full > 0, || {
        format!("no buffer-full outcome among {:?}", outcomes.first())
    })?;
    bounded(t, 60, "filling the buffer")?;
    let c = A::counters(&admin).await?;
    check(c.requests_in_flight <= 64, || {
        format!("in flight: {}", c.requests_in_flight)
    })?;

    // The broker answers again: the client recovers by itself.
    server.with_cluster(|c, _| c.clear_faults())?;
    let end = Instant::now() + Duration::from_secs(30);
    while A::describe_cluster(&admin).await.is_err() {
        check(Instant::now() < end, || {
            "no recovery after the broker came back".into()
        })?;
        A::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A group commit while the broker is silent fails in bounded time (`commit_sync` must not
/// wait forever for a coordinator that never answers).
pub async fn commit_during_outage<A: Adapter>() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.request_timeout = Duration::from_millis(800);
    cfg.consumer.group_id = Some("outage".into());
    cfg.consumer.rebalance_timeout = Duration::from_secs(2);
    let admin = A::admin(cfg.clone()).await?;
    create_topic::<A>(&admin, "outage", 1).await?;
    let consumer = A::consumer(cfg).await?;
    let tp = TopicPartition::new("outage", 0);
    A::assign(&consumer, vec![tp.clone()]).await?;
    let end = Instant::now() + Duration::from_secs(20);
    while A::position(&consumer, tp.clone()).await?.is_none() {
        check(Instant::now() < end, || "no start position".into())?;
        A::sleep(Duration::from_millis(50)).await;
    }
    server.with_cluster(|c, _| {
        c.inject_fault(FaultRule {
            broker: None,
            api_key: None,
            fault: Fault::DropResponse,
            probability: 1.0,
            remaining: None,
        })
    })?;
    let t = Instant::now();
    let r = A::commit_sync(&consumer).await;
    check(r.is_err(), || format!("commit answered: {r:?}"))?;
    check(t.elapsed() < Duration::from_secs(15), || {
        format!("commit took {:?}", t.elapsed())
    })
}

/// The repository README: its Rust code blocks (the quickstart of each adapter) run as
/// doctests of this crate, so the README cannot drift from the API.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
