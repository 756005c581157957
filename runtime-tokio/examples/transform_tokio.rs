//! Consume, transform, produce — at least once, with no bookkeeping of your own.
//!
//! Reads `INPUT` as a member of `GROUP`, writes each record's value upper-cased to `OUTPUT`,
//! and marks an input processed only once its output is acknowledged by the broker. With
//! `consumer.commit_marked_only` every commit (the auto-commit timer, the commit on close)
//! takes only marked positions, so whatever stops the service — Ctrl-C, a crash, `kill -9`
//! between the output's acknowledgement and the mark — the inputs whose outputs were not
//! acknowledged are read again by the next run: nothing is lost (an output may be written
//! twice, the price of at-least-once).
//!
//! ```sh
//! cargo run -p stellflow-tokio --example transform_tokio -- 127.0.0.1:9092 input output my-group
//! ```
//!
//! It needs `stellflow-tokio` and tokio only (`features = ["macros", "rt-multi-thread",
//! "signal"]`). The service is one function, [`service`], which `main` calls with a client
//! connected to the real cluster and the `app_simulation` test of `stellflow-turmoil` calls,
//! unchanged, with a client of a simulated cluster: hundreds of seeded worlds of two or three
//! instances that crash and restart, brokers that crash and restart, partitions and latency,
//! each checked for lost outputs, per-key order and duplicates
//! (docs/testing-your-application.md). The adapter suite runs [`run`] against the simulated
//! broker, and kills it between an acknowledgement and its mark to show that nothing is lost.
//!
//! `STELLFLOW_APP_SIM_BUG=commit-early` plants a bug for that test to find: each input is
//! marked processed before its output is acknowledged ([`Planted::CommitEarly`]).

use stellflow_tokio::{
    Client, ClientConfig, Consumer, ConsumerRecord, Error, OffsetReset, Producer, Record, StreamExt,
};

/// The configuration of the service: a group member that commits only what it marked.
pub fn config(bootstrap: &str, group: &str) -> Result<ClientConfig, Error> {
    let mut config = ClientConfig::new(bootstrap)?;
    config.consumer.group_id = Some(group.to_owned());
    config.consumer.commit_marked_only = true; // Kafka: enable.auto.offset.store=false
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    Ok(config)
}

/// The transformation: the input's value upper-cased, under the same key.
pub fn transform(input: &ConsumerRecord, output_topic: &str) -> Record {
    let value = input
        .value
        .as_deref()
        .unwrap_or_default()
        .to_ascii_uppercase();
    Record::new(output_topic, value).with_optional_key(input.key.clone())
}

/// A bug planted on purpose, for the simulation test to show that it finds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Planted {
    /// The service as it should be.
    #[default]
    Nothing,
    /// An input is marked processed before its output is acknowledged: a commit may then
    /// cover an input whose output is never written (a crash, a send that fails).
    CommitEarly,
}

impl Planted {
    /// `STELLFLOW_APP_SIM_BUG=commit-early` plants [`Planted::CommitEarly`]; anything else
    /// (or nothing) plants nothing.
    pub fn from_env() -> Planted {
        match std::env::var("STELLFLOW_APP_SIM_BUG").as_deref() {
            Ok("commit-early") => Planted::CommitEarly,
            _ => Planted::Nothing,
        }
    }
}

/// The whole service on `client`: joins the group on `input` and processes every input
/// until the consumer is closed or a call fails (see [`process`]).
pub async fn service(
    client: &Client,
    input: &str,
    output: &str,
    planted: Planted,
    acked: impl FnMut(&ConsumerRecord),
) -> Result<usize, Error> {
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&[input])?;
    process(&consumer, &producer, output, None, planted, acked).await
}

/// Processes inputs until `limit` of them are done (or forever, or until the consumer is
/// closed): each input's output is sent and acknowledged, `acked` is told, and only then is
/// the input marked processed. Returns how many inputs were processed.
pub async fn run(
    consumer: &Consumer,
    producer: &Producer,
    output_topic: &str,
    limit: Option<usize>,
    acked: impl FnMut(&ConsumerRecord),
) -> Result<usize, Error> {
    process(
        consumer,
        producer,
        output_topic,
        limit,
        Planted::Nothing,
        acked,
    )
    .await
}

/// [`run`], with a bug planted or not.
pub async fn process(
    consumer: &Consumer,
    producer: &Producer,
    output_topic: &str,
    limit: Option<usize>,
    planted: Planted,
    mut acked: impl FnMut(&ConsumerRecord),
) -> Result<usize, Error> {
    let mut inputs = consumer.clone(); // the consumer is a Stream of records
    let mut done = 0;
    while limit.is_none_or(|limit| done < limit) {
        let Some(input) = inputs.next().await else {
            break; // the consumer was closed
        };
        let input = input?;
        if planted == Planted::CommitEarly {
            consumer.mark_processed(&input)?; // the bug: before the output is acknowledged
        }
        producer.send(transform(&input, output_topic)).await?; // waits for the broker's ack
        acked(&input);
        consumer.mark_processed(&input)?; // only now may a commit cover the input
        done += 1;
    }
    Ok(done)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, input, output, group] = args.as_slice() else {
        return Err("usage: transform_tokio BOOTSTRAP INPUT OUTPUT GROUP".into());
    };
    let client = Client::connect(config(bootstrap, group)?).await?;
    let service = service(&client, input, output, Planted::from_env(), |input| {
        println!(
            "{}-{} {}#{} done",
            input.topic, input.partition, input.offset, input.index
        )
    });
    tokio::select! {
        result = service => { result?; }
        _ = tokio::signal::ctrl_c() => eprintln!("Ctrl-C: closing"),
    }
    client.close().await?; // commits the marked positions, flushes the producer
    Ok(())
}
