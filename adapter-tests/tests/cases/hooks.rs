//! Producer and consumer hooks, each called exactly once per event.

use super::*;

/// Producer and consumer hooks are called exactly once per record sent, per outcome (a
/// failed delivery reaching `on_acknowledgement` as an error), per record consumed and per
/// commit.
pub async fn hooks_called_once() -> R<()> {
    use std::sync::Arc;
    use stellflow_adapter_tests::Tally;
    const N: usize = 500;
    let server = sim()?;
    let tally = Arc::new(Tally::default());
    let mut cfg = config(&server)?;
    cfg.consumer.group_id = Some("hooks-g".into());
    cfg.consumer.enable_auto_commit = false;
    cfg.hooks
        .producer_shared(tally.clone())
        .consumer_shared(tally.clone());
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "hooks", 2).await?;
    let written = produce_keyed(&client, "hooks", N as u32).await?;
    check(written.len() == N, || format!("{} written", written.len()))?;
    // One delivery fails: the broker answers its Produce with a header-only error 1.
    let rule = FaultRule {
        broker: None,
        api_key: Some(sf::ApiKey::PRODUCE),
        fault: Fault::HeaderOnly(sf::ErrorCode::UNKNOWN_SERVER_ERROR),
        probability: 1.0,
        remaining: Some(1),
    };
    server.with_cluster(|c, _| c.inject_fault(rule))?;
    let failed = aw!(client.producer().send(record("hooks", 9_999)));
    check(failed.is_err(), || format!("the faulted send: {failed:?}"))?;
    let consumer = client.consumer();
    consumer.assign(&[
        TopicPartition::new("hooks", 0),
        TopicPartition::new("hooks", 1),
    ])?;
    let got = poll_n(&consumer, N, Duration::from_secs(30)).await?;
    check(got.len() == N, || format!("consumed {}", got.len()))?;
    aw!(consumer.commit_sync())?;
    aw!(consumer.commit_sync())?;
    aw!(client.close())?;

    let sends = tally.sends.lock().map_err(|e| e.to_string())?.clone();
    let acks = tally.acks.lock().map_err(|e| e.to_string())?.clone();
    check(
        sends.len() == N + 1 && sends.values().all(|n| *n == 1),
        || format!("on_send: {} ids, counts {:?}", sends.len(), counts(&sends)),
    )?;
    check(
        acks.len() == N + 1 && acks.values().all(|(n, _)| *n == 1),
        || format!("on_acknowledgement: {} ids", acks.len()),
    )?;
    check(sends.keys().all(|id| acks.contains_key(id)), || {
        "an acknowledgement for another id than sent".into()
    })?;
    let errors: u32 = acks.values().map(|(_, e)| e).sum();
    check(errors == 1, || {
        format!("{errors} acknowledgements were errors")
    })?;
    let consumed = tally.consumed.lock().map_err(|e| e.to_string())?.clone();
    check(
        consumed.len() == N && consumed.values().all(|n| *n == 1),
        || format!("on_consume: {} records", consumed.len()),
    )?;
    for r in &got {
        check(
            consumed.contains_key(&(r.partition, r.offset, r.index)),
            || format!("record {}/{}#{} not seen", r.partition, r.offset, r.index),
        )?;
    }
    let commits = tally.commits.lock().map_err(|e| e.to_string())?.clone();
    check(
        commits.len() == 2 && commits.values().all(|c| *c == (1, 0)),
        || format!("on_commit: {commits:?}"),
    )?;
    Ok(())
}

fn counts(m: &std::collections::HashMap<u64, u32>) -> Vec<u32> {
    let mut v: Vec<u32> = m.values().copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}
