//! The batched consume–transform–produce example (`examples/transform_batched_tokio.rs`) against
//! the simulated broker: every input gets its output and is committed, a record that can never
//! be written is set aside without stopping the service, a stop request ends it cleanly, and
//! an output that keeps failing ends it after the bounded resends with nothing marked.

#[allow(dead_code)]
#[path = "../examples/transform_batched_tokio.rs"]
mod service;

use service::{Retries, run};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stellflow_sim::{Fault, FaultRule};
use stellflow_tokio::{
    ApiKey, Client, ClientConfig, Error, ErrorCode, ProducerHook, Record, SeekTo, SentRecord,
    Target, TopicPartition,
};

/// How often the producer was given each output value.
#[derive(Default)]
struct SendCounter(Mutex<HashMap<Vec<u8>, usize>>);

impl ProducerHook for SendCounter {
    fn on_send(&self, sent: &SentRecord<'_>) {
        let value = sent.record.value.unwrap_or_default().to_vec();
        *self.0.lock().unwrap().entry(value).or_default() += 1;
    }
}

type R<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Inputs per test; one more, too large for the service's producer, in the first test.
const INPUTS: usize = 120;
/// Above the service's `max_request_size` (and far below the broker's limit).
const BIG: usize = 48 * 1024;

/// Creates the topics and writes the inputs over both partitions of `in`.
async fn setup(bootstrap: &str, outputs: bool, big: bool) -> R {
    let client = Client::connect(ClientConfig::new(bootstrap)?).await?;
    let admin = client.admin();
    admin.create_topic("in", 2, Target::Any).await?;
    if outputs {
        admin.create_topic("out", 1, Target::Any).await?;
    }
    let mut inputs: Vec<Record> = (0..INPUTS)
        .map(|i| Record::new("in", format!("value-{i}")).with_partition((i % 2) as i32))
        .collect();
    if big {
        inputs.insert(
            INPUTS / 2,
            Record::new("in", vec![b'x'; BIG]).with_partition(0),
        );
    }
    let outcome = client.producer().send_all(&inputs).await?;
    assert!(outcome.all_delivered(), "{:?}", outcome.first_error());
    client.close().await?;
    Ok(())
}

/// The example's configuration, tuned for a quick test.
fn service_config(bootstrap: &str) -> R<ClientConfig> {
    let mut config = service::config(bootstrap, "batched")?;
    config.consumer.auto_commit_interval = Duration::from_millis(100);
    config.consumer.session_timeout = Duration::from_secs(6);
    config.consumer.heartbeat_interval = Duration::from_millis(300);
    config.producer.max_request_size = 32 * 1024;
    Ok(config)
}

/// Reads `out` from its start until `n` records are there.
async fn outputs(bootstrap: &str, n: usize) -> R<Vec<Vec<u8>>> {
    let client = Client::connect(ClientConfig::new(bootstrap)?).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("out", 0)])?;
    consumer
        .seek(&TopicPartition::new("out", 0), SeekTo::Beginning)
        .await?;
    let mut values = Vec::new();
    while values.len() < n {
        for record in consumer.poll(Duration::from_millis(200)).await? {
            values.push(record.value.as_deref().unwrap_or_default().to_vec());
        }
    }
    client.close().await?;
    Ok(values)
}

/// A member of the group again: once it has its partitions, whatever a poll still returns was
/// not committed.
async fn uncommitted(bootstrap: &str) -> R<usize> {
    tokio::time::timeout(Duration::from_secs(60), rejoin(bootstrap)).await?
}

/// [`uncommitted`] without its time limit.
async fn rejoin(bootstrap: &str) -> R<usize> {
    let client = Client::connect(service_config(bootstrap)?).await?;
    let consumer = client.consumer();
    consumer.subscribe(&["in"])?;
    let mut left = 0;
    while consumer.assignment().len() < 2 {
        left += consumer.poll(Duration::from_millis(100)).await?.len();
    }
    for _ in 0..10 {
        left += consumer.poll(Duration::from_millis(100)).await?.len();
    }
    client.close().await?;
    Ok(left)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_input_gets_its_output_and_a_bad_record_is_set_aside() -> R {
    let sim = stellflow_sim::serve("127.0.0.1:0")?;
    let bootstrap = sim.local_addr().to_string();
    setup(&bootstrap, true, true).await?;

    let client = Client::connect(service_config(&bootstrap)?).await?;
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&["in"])?;
    // The stop request (Ctrl-C in the example) comes once every output is in `out`.
    let all_out = {
        let bootstrap = bootstrap.clone();
        async move {
            outputs(&bootstrap, INPUTS).await.expect("read the outputs");
        }
    };
    let mut set_aside = Vec::new();
    let service = run(
        &consumer,
        &producer,
        "out",
        Retries::default(),
        all_out,
        |input, e| {
            set_aside.push((input.value.as_ref().map_or(0, |v| v.len()), e.to_string()));
        },
    );
    let processed = tokio::time::timeout(Duration::from_secs(60), service).await??;
    client.close().await?;

    assert_eq!(
        processed,
        INPUTS + 1,
        "every input, the one set aside included"
    );
    assert_eq!(set_aside.len(), 1, "{set_aside:?}");
    assert_eq!(set_aside[0].0, BIG);
    assert!(
        set_aside[0].1.contains("max_request_size"),
        "{}",
        set_aside[0].1
    );
    let mut got: Vec<String> = outputs(&bootstrap, INPUTS)
        .await?
        .into_iter()
        .map(|v| String::from_utf8(v).unwrap())
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..INPUTS).map(|i| format!("VALUE-{i}")).collect();
    want.sort();
    assert_eq!(got, want, "each input's output, once");
    assert_eq!(
        uncommitted(&bootstrap).await?,
        0,
        "the close committed every mark"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_that_keeps_failing_stops_the_service_after_the_bounded_resends() -> R {
    let sim = stellflow_sim::serve("127.0.0.1:0")?;
    let bootstrap = sim.local_addr().to_string();
    setup(&bootstrap, true, false).await?;
    // Every Produce request is answered "not the leader" from now on: the producer retries
    // within its delivery timeout, the example resends twice, then stops.
    sim.with_cluster(|cluster, _| {
        cluster.inject_fault(FaultRule::random(
            ApiKey::PRODUCE,
            1.0,
            Fault::PartitionError(ErrorCode::NOT_LEADER_OR_FOLLOWER),
        ))
    })?;
    let mut config = service_config(&bootstrap)?;
    config.producer.delivery_timeout = Duration::from_millis(400);
    config.request_timeout = Duration::from_millis(400);
    let sends = Arc::new(SendCounter::default());
    config.hooks.producer_shared(sends.clone());
    let client = Client::connect(config).await?;
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&["in"])?;
    let retries = Retries {
        resends: 2,
        first_pause: Duration::from_millis(50),
    };
    let started = std::time::Instant::now();
    let never = std::future::pending::<()>();
    let service = run(&consumer, &producer, "out", retries, never, |input, e| {
        panic!("nothing is set aside: {input:?}: {e}")
    });
    let result = tokio::time::timeout(Duration::from_secs(60), service).await?;
    let error = result.expect_err("the service stops");
    assert!(error.is_retriable(), "{error}");
    // Each output of the batch was given to the producer three times: sent and resent twice.
    let counts = sends.0.lock().unwrap().clone();
    assert!(!counts.is_empty());
    assert!(counts.values().all(|&n| n == 3), "{counts:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "bounded: {:?}",
        started.elapsed()
    );
    client.close().await?;
    sim.with_cluster(|cluster, _| cluster.clear_faults())?;
    assert_eq!(
        uncommitted(&bootstrap).await?,
        INPUTS,
        "nothing was marked: every input is read again"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_output_topic_stops_the_service_at_once() -> R {
    let sim = stellflow_sim::serve("127.0.0.1:0")?;
    let bootstrap = sim.local_addr().to_string();
    setup(&bootstrap, false, false).await?;
    let mut config = service_config(&bootstrap)?;
    config.producer.metadata_max_wait = Duration::from_millis(300);
    let client = Client::connect(config).await?;
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&["in"])?;
    let never = std::future::pending::<()>();
    let service = run(
        &consumer,
        &producer,
        "out",
        Retries::default(),
        never,
        |input, e| panic!("nothing is set aside: {input:?}: {e}"),
    );
    let error: Error = tokio::time::timeout(Duration::from_secs(60), service)
        .await?
        .expect_err("the service stops");
    assert!(error.to_string().contains("out"), "{error}");
    client.close().await?;
    assert_eq!(uncommitted(&bootstrap).await?, INPUTS);
    Ok(())
}
