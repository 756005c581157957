//! The suite's case against a real broker (named by `STELLFLOW_BROKER`, skipped when unset).

use super::*;

/// Against the real broker named by `STELLFLOW_BROKER` (skipped when unset): seek by time
/// and `offsets_for_times` find the first blob after a time, and `close` leaves every
/// enqueued record in the log.
pub async fn real_broker_seek_and_close() -> R<()> {
    let Ok(bootstrap) = std::env::var("STELLFLOW_BROKER") else {
        return Ok(());
    };
    let mut cfg = ClientConfig::new(&bootstrap)?;
    cfg.consumer.auto_offset_reset = sf::OffsetReset::Earliest;
    let topic = format!("adapters-{}-{}", std::process::id(), now_ms()?);
    let client = client(cfg.clone(), Duration::from_secs(30)).await?;
    create_topic(&client.admin(), &topic, 1).await?;
    for i in 0..10 {
        aw!(client.producer().send(record(&topic, i)))?;
    }
    aw!(sleep(Duration::from_millis(50)));
    let ms = now_ms()?;
    aw!(sleep(Duration::from_millis(50)));
    let later = aw!(client.producer().send(record(&topic, 10)))?;
    let tp = TopicPartition::new(&topic, 0);
    let found = aw!(client.consumer().offsets_for_times(&[(tp.clone(), ms)]))?;
    let info = found[0].result.clone()?;
    check(Some(info.offset) == later.offset && !info.no_match, || {
        format!("offsets_for_times {info:?}, the record after that time is at {later:?}")
    })?;
    let consumer = client.consumer();
    consumer.assign(std::slice::from_ref(&tp))?;
    seek_and_check(&consumer, &tp, ms, 10).await?;
    for i in 11..2_011 {
        drop(aw!(client.producer().enqueue(record(&topic, i)))?);
    }
    aw!(client.close())?;
    let reader = self::client(cfg, Duration::from_secs(30)).await?;
    let consumer = reader.consumer();
    consumer.assign(std::slice::from_ref(&tp))?;
    let got = poll_n(&consumer, 2_011, Duration::from_secs(60)).await?;
    exactly_once(&got, 2_011)?;
    aw!(reader.close())?;
    Ok(())
}
