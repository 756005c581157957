//! Consume, transform, produce in batches — at least once, with bounded retries and a clean
//! Ctrl-C.
//!
//! Reads `INPUT` as a member of `GROUP` and writes each record's value upper-cased to
//! `OUTPUT`, a batch at a time: every poll's records are transformed and sent with one
//! `send_all`, and once the batch's outcomes are in, the last input of each partition is
//! marked processed (marking a record marks every earlier record of its partition). With
//! `consumer.commit_marked_only` every commit takes only marked positions, so an input whose
//! output is not acknowledged is read again by the next run: nothing is lost (an output may be
//! written twice, the price of at-least-once).
//!
//! An output that failed is handled by what its error says ([`next_step`]):
//! - it may succeed if sent again (the producer gave up within its delivery timeout: a
//!   leader moving, an unreachable broker), or it may be in the log already (its request was
//!   never answered): it is **sent again**, at most [`Retries::resends`] times, waiting
//!   longer each time. Still failing, the service marks what was done before it and stops
//!   with the error: it never resends forever.
//! - this record can never be written (too large, refused as invalid): it is **set aside**
//!   (here printed as a dead letter) and counts as processed, so one bad record does not stop
//!   the service.
//! - anything else is about the service, not the record (the output topic does not exist,
//!   the producer was closed): the service marks what was done before it and **stops**.
//!
//! Ctrl-C stops taking batches: the batch in hand is finished (its outputs' outcomes, no
//! further resend) and marked, then `close` commits the marks and flushes the producer.
//!
//! ```sh
//! cargo run -p stellflow-tokio --example transform_batched_tokio -- 127.0.0.1:9092 input output my-group
//! ```
//!
//! It needs `stellflow-tokio` and tokio only (`features = ["macros", "rt-multi-thread",
//! "signal"]`). The crate's tests run [`run`] against the simulated broker.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::pin;
use std::time::Duration;
use stellflow_tokio::{
    Client, ClientConfig, Consumer, ConsumerRecord, DeliveryError, Error, ErrorCode, OffsetReset,
    ProduceError, Producer, Record,
};

/// The configuration of the service: a group member that commits only what it marked.
pub fn config(bootstrap: &str, group: &str) -> Result<ClientConfig, Error> {
    let mut config = ClientConfig::new(bootstrap)?;
    config.consumer.group_id = Some(group.to_owned());
    config.consumer.commit_marked_only = true; // Kafka: enable.auto.offset.store=false
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    Ok(config)
}

/// How often the failed outputs of a batch are sent again.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Resends after the first send; then the service stops with the last error.
    pub resends: u32,
    /// The pause before the first resend, doubled before each next one.
    pub first_pause: Duration,
}

impl Default for Retries {
    /// Three resends, after 1 s, 2 s and 4 s (each send itself may take up to the producer's
    /// `delivery_timeout`).
    fn default() -> Self {
        Retries {
            resends: 3,
            first_pause: Duration::from_secs(1),
        }
    }
}

/// What to do with an output that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Send it again: it may succeed, or it may be in the log already (a duplicate at worst).
    Resend,
    /// Set it aside and count its input as processed: this record can never be written.
    SetAside,
    /// Stop the service: the error is about the service, not this record.
    Stop,
}

/// What a failed output's error calls for.
pub fn next_step(error: &Error) -> NextStep {
    match error {
        // Its request was never answered: it may be in the log, or not. Sending it again
        // keeps it at least once.
        Error::Delivery(e) if e.outcome_unknown() => NextStep::Resend,
        e if e.is_retriable() => NextStep::Resend,
        Error::Produce(ProduceError::RecordTooLarge { .. })
        | Error::Delivery(DeliveryError::Encode(_)) => NextStep::SetAside,
        Error::Delivery(DeliveryError::Broker { code })
            if [ErrorCode::MESSAGE_TOO_LARGE, ErrorCode::INVALID_RECORD].contains(code) =>
        {
            NextStep::SetAside
        }
        _ => NextStep::Stop,
    }
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

/// Processes batches until `stop` completes (or the consumer is closed); `set_aside` is told
/// of every input whose output can never be written. Returns how many inputs were processed,
/// or the error that stopped the service (after marking what was done before it).
pub async fn run(
    consumer: &Consumer,
    producer: &Producer,
    output_topic: &str,
    retries: Retries,
    stop: impl Future<Output = ()>,
    mut set_aside: impl FnMut(&ConsumerRecord, &Error),
) -> Result<usize, Error> {
    let mut stop = pin!(stop);
    let mut stopping = false;
    let mut processed = 0;
    while !stopping {
        let inputs = tokio::select! {
            inputs = consumer.poll(Duration::from_secs(1)) => inputs?, // cancel-safe
            () = &mut stop => break,
        };
        if inputs.is_empty() {
            continue;
        }
        let outputs: Vec<Record> = inputs
            .iter()
            .map(|input| transform(input, output_topic))
            .collect();
        let mut done = vec![false; inputs.len()];
        let mut pending: Vec<usize> = (0..inputs.len()).collect();
        let mut pause = retries.first_pause;
        let mut resends = 0;
        let failure = loop {
            let outcome = producer
                .send_all(pending.iter().map(|&i| &outputs[i]))
                .await?;
            let mut again = Vec::new();
            let mut last = None;
            let mut fatal = None;
            for (&i, result) in pending.iter().zip(outcome.iter()) {
                let error = match result {
                    Ok(_) => {
                        done[i] = true;
                        continue;
                    }
                    Err(error) => error,
                };
                match next_step(&error) {
                    NextStep::Resend => {
                        again.push(i);
                        last = Some(error);
                    }
                    NextStep::SetAside => {
                        set_aside(&inputs[i], &error);
                        done[i] = true;
                    }
                    NextStep::Stop => {
                        fatal.get_or_insert(error);
                    }
                }
            }
            if fatal.is_some() || again.is_empty() {
                break fatal;
            }
            if resends == retries.resends || stopping {
                break last;
            }
            resends += 1;
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = &mut stop, if !stopping => {
                    stopping = true; // Ctrl-C while waiting: no further resend
                    break last;
                }
            }
            pause = pause.saturating_mul(2);
            pending = again;
        };
        processed += mark_done(consumer, &inputs, &done)?;
        if let Some(error) = failure {
            return Err(error);
        }
    }
    Ok(processed)
}

/// Marks, for each partition, the last input of the batch's leading run of done inputs: an
/// input not done, and every later input of its partition, stay unmarked and are read again
/// by the next run. Returns how many inputs the marks cover.
fn mark_done(
    consumer: &Consumer,
    inputs: &[ConsumerRecord],
    done: &[bool],
) -> Result<usize, Error> {
    let mut last: HashMap<(&str, i32), &ConsumerRecord> = HashMap::new();
    let mut blocked: HashSet<(&str, i32)> = HashSet::new();
    let mut covered = 0;
    for (input, &done) in inputs.iter().zip(done) {
        let partition = (&*input.topic, input.partition);
        if blocked.contains(&partition) {
            continue;
        }
        if done {
            last.insert(partition, input);
            covered += 1;
        } else {
            blocked.insert(partition);
        }
    }
    for input in last.into_values() {
        consumer.mark_processed(input)?;
    }
    Ok(covered)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, input, output, group] = args.as_slice() else {
        return Err("usage: transform_batched_tokio BOOTSTRAP INPUT OUTPUT GROUP".into());
    };
    let client = Client::connect(config(bootstrap, group)?).await?;
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&[input.as_str()])?;
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await; // no signal handler: run until an error
        }
        eprintln!("Ctrl-C: finishing the batch in hand, then closing");
    };
    let result = run(
        &consumer,
        &producer,
        output,
        Retries::default(),
        ctrl_c,
        |input, e| {
            eprintln!(
                "dead letter: {}-{} {}#{}: {e}",
                input.topic, input.partition, input.offset, input.index
            )
        },
    )
    .await;
    // Commits the marked positions and flushes the producer, also after an error.
    client.close().await?;
    let processed = result?;
    eprintln!("{processed} inputs processed");
    Ok(())
}
