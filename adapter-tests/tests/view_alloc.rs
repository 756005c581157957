//! Allocations per record on the consumer's view path (`Consumer::poll_blobs`, each record
//! read in place with `FetchedBlob::next_view`), end to end through an adapter: the fetches
//! the driver sends, the answers it reads and hands to the core, the blobs handed over and
//! the records read from them. The client runs on a current-thread tokio runtime, so the
//! driver's work is on the test's thread and counted (`alloc-counter` counts per thread); the
//! loopback sim broker runs on threads of its own and is not.
//!
//! Run with `cargo test -p stellflow-adapter-tests --test view_alloc -- --nocapture` for the
//! figures (`RESULT adapter-allocs-per-record-views X` beside the `poll` path's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use stellflow_tokio::{
    Acks, Client, ClientConfig, Consumer, OffsetReset, Record, Target, TopicPartition,
};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Records read in the counted part (after a warm-up of [`WARM`]).
const N: usize = 200_000;
const WARM: usize = 20_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Reads `n` records through views, summing their value bytes (so each record is touched);
/// returns the records read (whole blobs: a little more than `n`) and the bytes.
async fn views(consumer: &Consumer, n: usize) -> (usize, usize) {
    let (mut got, mut bytes) = (0, 0);
    while got < n {
        let blobs = consumer.poll_blobs(Duration::from_secs(10)).await.unwrap();
        assert!(!blobs.is_empty(), "stalled after {got} records");
        for mut blob in blobs {
            while let Some(r) = blob.next_view() {
                bytes += r.expect("valid record").value.map_or(0, <[u8]>::len);
                got += 1;
            }
        }
    }
    (got, bytes)
}

/// The same through `poll` (one `ConsumerRecord` per record), for comparison.
async fn records(consumer: &Consumer, n: usize) -> (usize, usize) {
    let (mut got, mut bytes) = (0, 0);
    while got < n {
        let records = consumer.poll(Duration::from_secs(10)).await.unwrap();
        assert!(!records.is_empty(), "stalled after {got} records");
        for r in records {
            bytes += r.value.map_or(0, |v| v.len());
            got += 1;
        }
    }
    (got, bytes)
}

/// Sends `n` records of 100 B to `topic` in batches, and waits for every outcome.
async fn fill(client: &Client, topic: &str, n: usize) {
    let producer = client.producer();
    let record = Record::new(topic, bytes::Bytes::from(vec![b'v'; 100]));
    let mut pending = Vec::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        left -= k;
        pending.push(
            producer
                .enqueue_all(std::iter::repeat_n(&record, k))
                .await
                .unwrap(),
        );
    }
    producer.flush().await.unwrap();
    for d in pending {
        for o in d.await {
            o.expect("delivered");
        }
    }
}

/// Allocations per record read from the start of `topic` by `read`, on a client of its own
/// (warm-up not counted).
async fn per_record<F, Fut>(config: &ClientConfig, topic: &str, read: F) -> f64
where
    F: Fn(Consumer, usize) -> Fut,
    Fut: std::future::Future<Output = (Consumer, usize, usize)>,
{
    let client = Client::connect(config.clone()).await.unwrap();
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new(topic, 0)]).unwrap();
    // Warm up: the fetch connection, the read buffers, the tables' capacity.
    let (consumer, _, _) = read(consumer, WARM).await;
    let before = alloc_counter::allocations();
    let (consumer, got, bytes) = read(consumer, N).await;
    let allocations = alloc_counter::allocations() - before;
    assert!(
        got >= N && bytes >= 100 * N,
        "read {got} records, {bytes} B"
    );
    drop(consumer);
    client.close().await.unwrap();
    allocations as f64 / got as f64
}

/// At most 0.01 allocations per record on the view path: a few per fetch, per answer and per
/// `poll_blobs` call, none per record (no `ConsumerRecord`, no reference count).
#[test]
fn view_path_allocates_per_fetch_not_per_record() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let mut config = stellflow_tokio::ClientConfig::new(&server.local_addr().to_string()).unwrap();
    config.producer.acks = Acks::Leader;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    // A `poll_blobs` takes every blob buffered: a smaller buffer keeps the warm-up from
    // taking most of the topic (64 MiB is ~500 000 records of 100 B).
    config.consumer.max_buffered_bytes = 4 * 1024 * 1024;
    runtime().block_on(async {
        let client = Client::connect(config.clone()).await.unwrap();
        let admin = client.admin();
        for topic in ["views", "records"] {
            let created = admin.create_topic(topic, 1, Target::Any).await.unwrap();
            assert!(created.is_ok(), "{created:?}");
            // More than read: each read may take up to a buffer's worth past its count.
            fill(&client, topic, WARM + N + 100_000).await;
        }
        client.close().await.unwrap();
        let view = per_record(&config, "views", |c, n| async move {
            let (got, bytes) = views(&c, n).await;
            (c, got, bytes)
        })
        .await;
        let record = per_record(&config, "records", |c, n| async move {
            let (got, bytes) = records(&c, n).await;
            (c, got, bytes)
        })
        .await;
        println!("RESULT adapter-allocs-per-record-views {view:.4}");
        println!("RESULT adapter-allocs-per-record-poll {record:.4}");
        assert!(
            view <= 0.01,
            "{view:.4} allocations per record on the view path"
        );
    });
}
