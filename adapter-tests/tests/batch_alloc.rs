//! Allocations per record on the batch path (`Producer::enqueue_all`), end to end through an
//! adapter: the records' way into the core, the driver that sends them and reads the answers,
//! and the outcomes handed back. The client runs on a current-thread tokio runtime, so the
//! driver's work is on the test's thread and counted (`alloc-counter` counts per thread); the
//! loopback sim broker runs on threads of its own and is not.
//!
//! Run with `cargo test -p stellflow-adapter-tests --test batch_alloc -- --nocapture` for the
//! figures (`RESULT adapter-allocs-per-record-batch X` beside the single-send path's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stellflow_tokio::{Acks, Client, Record, Target};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const N: usize = 100_000;
const BATCH: usize = 1_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Sends `records` in batches of `BATCH` and returns the allocations per record.
async fn batches(client: &Client, records: &[Record]) -> f64 {
    let producer = client.producer();
    let mut pending = Vec::with_capacity(records.len() / BATCH + 1);
    // Every await lets the driver (on this thread) send, read and hand outcomes back: all of
    // it is counted.
    let before = alloc_counter::allocations();
    for chunk in records.chunks(BATCH) {
        pending.push(producer.enqueue_all(chunk.iter()).await.expect("queued"));
    }
    producer.flush().await.expect("flushed");
    for d in pending {
        for outcome in d.await {
            outcome.expect("delivered");
        }
    }
    (alloc_counter::allocations() - before) as f64 / records.len() as f64
}

/// The same records one `enqueue` each (a channel per record), for comparison.
async fn singles(client: &Client, records: &[Record]) -> f64 {
    let producer = client.producer();
    let before = alloc_counter::allocations();
    let mut pending = Vec::with_capacity(records.len());
    for r in records {
        pending.push(
            producer
                .try_enqueue(r.clone())
                .expect("open")
                .expect("room"),
        );
    }
    producer.flush().await.expect("flushed");
    for d in pending {
        d.await.expect("delivered");
    }
    (alloc_counter::allocations() - before) as f64 / records.len() as f64
}

/// At most 0.01 allocations per record on the batch path (a few per call of 1000 records and
/// per Produce request, none per record); the single-send path allocates at least one per
/// record (its channel), which is what this bound would catch coming back.
#[test]
fn batch_path_allocates_per_call_not_per_record() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let mut config = stellflow_tokio::ClientConfig::new(&server.local_addr().to_string()).unwrap();
    config.producer.acks = Acks::Leader;
    runtime().block_on(async {
        let client = Client::connect(config).await.unwrap();
        let admin = client.admin();
        let created = admin.create_topic("alloc", 1, Target::Any).await.unwrap();
        assert!(created.is_ok(), "{created:?}");
        let value = bytes::Bytes::from(vec![b'v'; 100]);
        let records: Vec<Record> = (0..N)
            .map(|_| Record::new("alloc", value.clone()))
            .collect();
        // Warm up: connections, metadata, the tables' capacity.
        batches(&client, &records[..10 * BATCH]).await;
        singles(&client, &records[..10 * BATCH]).await;
        let batch = batches(&client, &records).await;
        let single = singles(&client, &records).await;
        println!("RESULT adapter-allocs-per-record-batch {batch:.4}");
        println!("RESULT adapter-allocs-per-record-single {single:.4}");
        assert!(
            batch <= 0.01,
            "{batch:.4} allocations per record on the batch path"
        );
        assert!(
            single >= 1.0,
            "the single path's figure {single:.4} lost its channel?"
        );
        client.close().await.unwrap();
    });
}
