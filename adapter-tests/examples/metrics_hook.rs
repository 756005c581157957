//! A producer and consumer hook that counts records per topic into `metrics` counters —
//! `stellflow_records_sent{topic}`, `stellflow_records_failed` and
//! `stellflow_records_consumed{topic}` — registered on the configuration, so it sees every
//! record on any adapter. Runs against an in-process simulated broker and prints what a
//! capturing recorder saw.
//!
//! ```sh
//! cargo run -p stellflow-adapter-tests --example metrics_hook
//! ```

use metrics::Counter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stellflow_tokio::{
    Acknowledgement, ClientConfig, ConsumerHook, ConsumerRecord, OffsetReset, ProducerHook, Record,
    SentRecord, Target, TopicPartition,
};

/// Counts per topic. The counter handles are looked up once per topic, so a record costs a
/// map lookup and an atomic add, not a label allocation.
#[derive(Default)]
struct TopicCounts {
    sent: Mutex<HashMap<String, Counter>>,
    consumed: Mutex<HashMap<String, Counter>>,
}

fn counter(map: &Mutex<HashMap<String, Counter>>, name: &'static str, topic: &str) -> Counter {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(topic) {
        return c.clone();
    }
    let c = metrics::counter!(name, "topic" => topic.to_owned());
    map.insert(topic.to_owned(), c.clone());
    c
}

impl ProducerHook for TopicCounts {
    fn on_send(&self, sent: &SentRecord<'_>) {
        counter(&self.sent, "stellflow_records_sent", sent.record.topic).increment(1);
    }

    fn on_acknowledgement(&self, ack: &Acknowledgement<'_>) {
        if ack.result.is_err() {
            metrics::counter!("stellflow_records_failed").increment(1);
        }
    }
}

impl ConsumerHook for TopicCounts {
    fn on_consume(&self, records: &[ConsumerRecord]) {
        for r in records {
            counter(&self.consumed, "stellflow_records_consumed", &r.topic).increment(1);
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder)?;

    let server = stellflow_sim::serve("127.0.0.1:0")?;
    let mut config = ClientConfig::new(&server.local_addr().to_string())?;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let counts = Arc::new(TopicCounts::default());
    config
        .hooks
        .producer_shared(counts.clone())
        .consumer_shared(counts);

    let client = stellflow_tokio::Client::connect(config).await?;
    for (topic, n) in [("orders", 30u32), ("payments", 12)] {
        let created = client.admin().create_topic(topic, 1, Target::Any).await?;
        if !created.is_ok() {
            return Err(format!("create {topic}: {created:?}").into());
        }
        for i in 0..n {
            drop(
                client
                    .producer()
                    .enqueue(Record::new(topic, i.to_string()))
                    .await?,
            );
        }
    }
    client.producer().flush().await?;
    let consumer = client.consumer();
    consumer.assign(&[
        TopicPartition::new("orders", 0),
        TopicPartition::new("payments", 0),
    ])?;
    let mut got = 0;
    while got < 42 {
        got += consumer.poll(Duration::from_secs(5)).await?.len();
    }
    client.close().await?;

    let mut lines: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels: Vec<String> = (key.key().labels())
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            format!("{}{{{}}} = {value:?}", key.key().name(), labels.join(","))
        })
        .collect();
    lines.sort();
    lines.iter().for_each(|l| println!("{l}"));
    Ok(())
}
