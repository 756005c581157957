//! The async consumer as a `futures::Stream` of records (async adapters only).

use super::{block_on, sf};
use futures_lite::StreamExt;
use sf::{Client, Options, Record, TopicPartition};
use std::time::Duration;
use stellflow_adapter_tests::{R, Watchdog, check, config, exactly_once, payload, sim};

/// 1,000 records read through the stream, then `close` ends it.
async fn consumer_stream() -> R<()> {
    let server = sim()?;
    let client = Client::connect_with(config(&server)?, Options::default()).await?;
    client
        .admin()
        .create_topic("stream", 2, sf::Target::Any)
        .await?;
    for i in 0..1_000 {
        let (k, v) = payload(i);
        drop(
            client
                .producer()
                .enqueue(Record::new("stream", v).with_key(k))
                .await?,
        );
    }
    client.producer().flush().await?;
    let consumer = client.consumer();
    consumer.assign(&[
        TopicPartition::new("stream", 0),
        TopicPartition::new("stream", 1),
    ])?;
    let mut stream = consumer.clone();
    let mut got = Vec::new();
    while got.len() < 1_000 {
        let next = futures_lite::future::or(stream.next(), async {
            async_io::Timer::after(Duration::from_secs(30)).await;
            None
        });
        got.push(next.await.ok_or("the stream ended or stalled")??);
    }
    exactly_once(&got, 1_000)?;
    consumer.close().await?;
    check(stream.next().await.is_none(), || {
        "the stream goes on after close".into()
    })?;
    client.close().await?;
    Ok(())
}

/// The broker crashes: the stream yields the unreachable error as an item, once, and goes on
/// with the records once the broker is back.
async fn stream_yields_unreachable() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    let client = Client::connect_with(cfg, Options::default()).await?;
    client
        .admin()
        .create_topic("s-gone", 1, sf::Target::Any)
        .await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("s-gone", 0)])?;
    server.with_cluster(|c, now| c.crash(1, now))??;
    let mut stream = consumer.clone();
    let next = futures_lite::future::or(stream.next(), async {
        async_io::Timer::after(Duration::from_secs(10)).await;
        None
    });
    match next.await {
        Some(Err(sf::Error::Consumer(sf::ConsumerError::Unreachable(_)))) => {}
        other => return Err(format!("the stream yielded {other:?}").into()),
    }
    server.with_cluster(|c, now| {
        c.restart(1, now)?;
        c.reassert_leadership(1)
    })??;
    let (k, v) = payload(0);
    client
        .producer()
        .send(Record::new("s-gone", v).with_key(k))
        .await?;
    let next = futures_lite::future::or(stream.next(), async {
        async_io::Timer::after(Duration::from_secs(20)).await;
        None
    });
    let r = next.await.ok_or("the stream ended or stalled")??;
    exactly_once(&[r], 1)?;
    client.close().await?;
    Ok(())
}

#[test]
fn stream_yields_the_unreachable_error() {
    let _dog = Watchdog::new("stream_yields_the_unreachable_error", 240);
    block_on(stream_yields_unreachable()).expect("stream_yields_the_unreachable_error");
}

#[test]
fn stream_of_records() {
    let _dog = Watchdog::new("stream_of_records", 240);
    block_on(consumer_stream()).expect("stream_of_records");
}
