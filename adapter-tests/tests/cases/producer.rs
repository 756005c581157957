//! Writing through the adapter's producer: batches in call order, `close` and dropping the
//! handles lose nothing, and the conversions into a `Record`.

use super::*;
use bytes::Bytes;

/// `send_all` / `enqueue_all`: a batch of keyed records over three partitions, between single
/// sends, with one record refused at once (a bad topic name), through a producer buffer of a
/// fraction of the batch (the call waits for room many times). Every outcome comes back at its
/// record's index, the refused one as its error; each partition's records are in the log in
/// call order (singles before the batch, then the batch, then the single after it); an empty
/// batch completes at once.
pub async fn batch_send_in_order() -> R<()> {
    const N: u32 = 5_000;
    let server = sim()?;
    // A buffer far smaller than the batch: the call waits for room again and again.
    let mut cfg = config(&server)?;
    cfg.producer.buffer_memory = 32 * 1024;
    cfg.producer.batch_size = 8 * 1024;
    let client = client(cfg, Duration::from_secs(20)).await?;
    create_topic(&client.admin(), "batch", 3).await?;
    let producer = client.producer();
    let before = aw!(producer.enqueue(record("batch", 0)))?;
    let mut records: Vec<Record> = (1..N).map(|i| record("batch", i)).collect();
    records.insert(100, Record::new("bad topic!", "refused"));
    let batch = aw!(producer.enqueue_all(records.iter()))?;
    check(batch.len() == N as usize, || {
        format!("batch of {}", batch.len())
    })?;
    let after = aw!(producer.enqueue(record("batch", N)))?;
    let empty = aw!(producer.send_all(Vec::<Record>::new()))?;
    check(empty.is_empty(), || format!("empty batch: {empty:?}"))?;
    let outcomes = delivered!(batch);
    let (first, last) = (delivered!(before)?, delivered!(after)?);
    check(outcomes.len() == N as usize, || {
        format!("{} outcomes", outcomes.len())
    })?;
    check(
        matches!(outcomes.get(100), Some(Err(Error::Produce(_)))),
        || format!("the bad topic's outcome: {:?}", outcomes.get(100)),
    )?;
    check(
        outcomes.failed() == 1 && matches!(outcomes.first_error(), Some((100, _))),
        || format!("failed: {:?}", outcomes.first_error()),
    )?;
    // Where each record 0..=N landed, in call order.
    let mut written = vec![first];
    for (i, o) in outcomes.into_iter().enumerate() {
        if i != 100 {
            written.push(o.map_err(|e| format!("record {i}: {e}"))?);
        }
    }
    written.push(last);
    let consumer = client.consumer();
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("batch", p)).collect();
    consumer.assign(&tps)?;
    let got = poll_n(&consumer, N as usize + 1, Duration::from_secs(60)).await?;
    exactly_once(&got, N + 1)?;
    let mut last_seen = std::collections::HashMap::new();
    for r in &got {
        let i = index_of(r)?;
        let m = &written[i as usize];
        check(
            m.partition == r.partition && m.offset == Some(r.offset) && m.index == r.index,
            || {
                format!(
                    "record {i}: outcome {m:?}, consumed at {}#{}",
                    r.offset, r.index
                )
            },
        )?;
        if let Some(prev) = last_seen.insert(r.partition, i) {
            check(prev < i, || {
                format!("partition {}: record {i} after {prev}", r.partition)
            })?;
        }
    }
    aw!(client.close())?;
    Ok(())
}

/// `close` flushes and waits: every enqueued record (outcomes never awaited) is in the log
/// afterwards, read back by another client.
pub async fn close_loses_nothing() -> R<()> {
    const N: u32 = 20_000;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "close", 2).await?;
    let client = client(config(&server)?, Duration::from_secs(30)).await?;
    let producer = client.producer();
    for i in 0..N {
        drop(aw!(producer.enqueue(record("close", i)))?);
    }
    aw!(client.close())?;
    read_back(&server, "close", N).await
}

/// Dropping every handle delivers the buffered records in the background (blocking: the drop
/// waits for it).
pub async fn drop_delivers() -> R<()> {
    const N: u32 = 5_000;
    let server = sim()?;
    let admin = aw!(sf::Admin::connect(config(&server)?))?;
    create_topic(&admin, "dropped", 1).await?;
    let producer = aw!(sf::Producer::connect(config(&server)?))?;
    for i in 0..N {
        drop(aw!(producer.enqueue(record("dropped", i)))?);
    }
    drop(producer);
    read_back(&server, "dropped", N).await
}

/// Reads `topic` from the start with a new client and checks records `0..n` exactly once.
async fn read_back(server: &SimServer, topic: &str, n: u32) -> R<()> {
    let client = client(config(server)?, Duration::from_secs(5)).await?;
    let (topics, _) = aw!(client.admin().describe_topics(&[topic]))?;
    let tps: Vec<_> = (0..topics[0].partitions.len() as i32)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let consumer = client.consumer();
    consumer.assign(&tps)?;
    let got = poll_n(&consumer, n as usize, Duration::from_secs(60)).await?;
    exactly_once(&got, n)?;
    aw!(client.close())?;
    Ok(())
}

/// Generic over nothing: makes the `Bytes` and `Record` conversions part of the API checked
/// here (a `Vec`, `String`, `&'static str` or `Bytes` value converts without copying).
#[test]
fn record_conversions() {
    let r = Record::new("t", Bytes::from_static(b"v")).with_key("k");
    assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
}
