//! Consume, transform, produce — at least once, with no bookkeeping of your own (smol, or
//! any executor).
//!
//! Reads `INPUT` as a member of `GROUP`, writes each record's value upper-cased to `OUTPUT`,
//! and marks an input processed only once its output is acknowledged by the broker. With
//! `consumer.commit_marked_only` every commit (the auto-commit timer, the commit on close)
//! takes only marked positions, so whatever stops the service — a crash, `kill -9` between
//! the output's acknowledgement and the mark — the inputs whose outputs were not
//! acknowledged are read again by the next run: nothing is lost (an output may be written
//! twice, the price of at-least-once). With `COUNT` it stops after that many inputs and
//! closes (committing what it marked).
//!
//! ```sh
//! cargo run -p stellflow-smol --example transform_smol -- 127.0.0.1:9092 input output my-group [COUNT]
//! ```
//!
//! It needs `stellflow-smol` and smol only. The adapter suite runs [`run`] against the
//! simulated broker, and kills it between an acknowledgement and its mark.

use stellflow_smol::{
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

/// Processes inputs until `limit` of them are done (or forever, or until the consumer is
/// closed): each input's output is sent and acknowledged, `acked` is told, and only then is
/// the input marked processed. Returns how many inputs were processed.
pub async fn run(
    consumer: &Consumer,
    producer: &Producer,
    output_topic: &str,
    limit: Option<usize>,
    mut acked: impl FnMut(&ConsumerRecord),
) -> Result<usize, Error> {
    let mut inputs = consumer.clone(); // the consumer is a Stream of records
    let mut done = 0;
    while limit.is_none_or(|limit| done < limit) {
        let Some(input) = inputs.next().await else {
            break; // the consumer was closed
        };
        let input = input?;
        producer.send(transform(&input, output_topic)).await?; // waits for the broker's ack
        acked(&input);
        consumer.mark_processed(&input)?; // only now may a commit cover the input
        done += 1;
    }
    Ok(done)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bootstrap, input, output, group, count) = match args.as_slice() {
        [b, i, o, g] => (b, i, o, g, None),
        [b, i, o, g, n] => (b, i, o, g, Some(n.parse()?)),
        _ => return Err("usage: transform_smol BOOTSTRAP INPUT OUTPUT GROUP [COUNT]".into()),
    };
    smol::block_on(async {
        let client = Client::connect(config(bootstrap, group)?).await?;
        let (consumer, producer) = (client.consumer(), client.producer());
        consumer.subscribe(&[input.as_str()])?;
        run(&consumer, &producer, output, count, |input| {
            println!(
                "{}-{} {}#{} done",
                input.topic, input.partition, input.offset, input.index
            )
        })
        .await?;
        client.close().await?; // commits the marked positions, flushes the producer
        Ok(())
    })
}
