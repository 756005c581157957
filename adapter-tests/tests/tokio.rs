//! The shared suite on stellflow-tokio (multi-threaded runtime, 2 workers), the stream, and
//! the tokio shutdown rules.

use std::future::Future;
use std::time::Duration;
use stellflow_tokio as sf;

macro_rules! aw {
    ($e:expr) => {
        $e.await
    };
}
macro_rules! delivered {
    ($e:expr) => {
        $e.await
    };
}

fn runtime() -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn block_on<T>(f: impl Future<Output = T>) -> T {
    runtime().block_on(f)
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

mod cases;
#[path = "cases/stream.rs"]
mod stream;

/// Enqueue N, `close().await`, return from the runtime: all N are in the log.
#[test]
fn close_then_leave_the_runtime() {
    use stellflow_adapter_tests::{config, sim};
    let server = sim().expect("sim");
    let cfg = config(&server).expect("config");
    let rt = runtime();
    rt.block_on(async {
        let client = sf::Client::connect(cfg.clone()).await?;
        client
            .admin()
            .create_topic("leave", 1, sf::Target::Any)
            .await?;
        let producer = client.producer();
        for i in 0..10_000u32 {
            drop(
                producer
                    .enqueue(sf::Record::new("leave", i.to_string()))
                    .await?,
            );
        }
        producer.close().await
    })
    .expect("enqueue and close");
    drop(rt); // what returning from `#[tokio::main]` does
    let end = block_on(async {
        let admin = sf::Admin::connect(cfg).await?;
        admin
            .list_offsets(&[("leave", 0, sf::OffsetSpec::Latest)])
            .await
    });
    let end = end.expect("list offsets")[0]
        .result
        .clone()
        .expect("offset")
        .offset;
    // Blobs, not records, get offsets: read the records back to count them.
    let got = block_on(async {
        let consumer = sf::Consumer::connect(config(&server)?).await?;
        consumer.assign(&[sf::TopicPartition::new("leave", 0)])?;
        let mut n = 0;
        while n < 10_000 {
            let batch = consumer.poll(Duration::from_secs(10)).await?;
            if batch.is_empty() {
                break;
            }
            n += batch.len();
        }
        Ok::<_, stellflow_adapter_tests::BoxError>(n)
    });
    assert!(end > 0);
    assert_eq!(got.expect("read back"), 10_000);
}

/// The runtime shuts down with records still buffered and no handle closed: the records are
/// lost, and that is reported — every outstanding delivery fails with `Shutdown` (and the
/// driver logs an error) — never silent.
#[test]
fn runtime_gone_with_records_buffered_is_reported() {
    use stellflow_adapter_tests::{config, sim};
    use stellflow_sim::{Fault, FaultRule};
    let server = sim().expect("sim");
    let mut cfg = config(&server).expect("config");
    cfg.producer.linger = Duration::from_secs(60); // keep them buffered
    let rt = runtime();
    let deliveries = rt
        .block_on(async {
            let client = sf::Client::connect(cfg).await?;
            client
                .admin()
                .create_topic("lost", 1, sf::Target::Any)
                .await?;
            let rule = FaultRule {
                broker: None,
                api_key: None,
                fault: Fault::DropResponse,
                probability: 1.0,
                remaining: None,
            };
            server.with_cluster(|c, _| c.inject_fault(rule))?;
            let mut d = Vec::new();
            for i in 0..100u32 {
                d.push(
                    client
                        .producer()
                        .enqueue(sf::Record::new("lost", i.to_string()))
                        .await?,
                );
            }
            Ok::<_, stellflow_adapter_tests::BoxError>(d)
        })
        .expect("enqueue");
    drop(rt);
    for d in deliveries {
        let r = d.wait();
        assert!(matches!(r, Err(sf::Error::Shutdown)), "{r:?}");
    }
}
