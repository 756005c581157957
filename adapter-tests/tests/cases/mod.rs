//! The suite's cases, written once against the one adapter API. The including file names its
//! adapter crate `sf` and defines `aw!`, `delivered!`, `block_on` and `sleep` (see the crate
//! docs). This file holds the helpers the cases share; the cases live in one module per
//! subject, and each becomes a `#[test]` at the bottom.

use super::{block_on, sf, sleep};
use sf::{
    AdminCall, Client, ClientConfig, ConsumerError, ConsumerEvent, Error, Events, OffsetSpec,
    Options, Position, Record, SeekTo, Target, TopicPartition,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use stellflow_adapter_tests::{R, Watchdog, check, config, exactly_once, index_of, payload, sim};
use stellflow_sim::{Fault, FaultRule, SimServer};

/// A client with test-friendly adapter options.
async fn client(mut config: ClientConfig, max_block: Duration) -> R<Client> {
    config.producer.max_block = max_block;
    let mut o = Options::default();
    o.close_timeout = Duration::from_secs(5);
    Ok(aw!(Client::connect_with(config, o))?)
}

fn record(topic: &str, i: u32) -> Record {
    let (k, v) = payload(i);
    Record::new(topic, v).with_key(k)
}

/// Produces records `0..n` of [`record`] to `topic`, flushes, and returns where each landed.
async fn produce_keyed(client: &Client, topic: &str, n: u32) -> R<Vec<sf::RecordMetadata>> {
    produce_all(client, (0..n).map(|i| record(topic, i))).await
}

/// Produces records `lo..hi` of [`record`] to `topic` and flushes.
async fn produce_keyed_range(client: &Client, topic: &str, lo: u32, hi: u32) -> R<()> {
    produce_all(client, (lo..hi).map(|i| record(topic, i))).await?;
    Ok(())
}

/// Enqueues every record, flushes, and returns where each landed.
async fn produce_all(
    client: &Client,
    records: impl IntoIterator<Item = Record>,
) -> R<Vec<sf::RecordMetadata>> {
    let producer = client.producer();
    let mut pending = Vec::new();
    for r in records {
        pending.push(aw!(producer.enqueue(r))?);
    }
    aw!(producer.flush())?;
    let mut written = Vec::with_capacity(pending.len());
    for d in pending {
        written.push(delivered!(d)?);
    }
    Ok(written)
}

/// Polls until `n` records came or `limit` passed.
async fn poll_n(c: &sf::Consumer, n: usize, limit: Duration) -> R<Vec<sf::ConsumerRecord>> {
    let end = Instant::now() + limit;
    let mut got = Vec::with_capacity(n);
    while got.len() < n && Instant::now() < end {
        got.extend(aw!(c.poll_max(Duration::from_millis(200), 500))?);
    }
    Ok(got)
}

async fn create_topic(a: &sf::Admin, topic: &str, partitions: i32) -> R<()> {
    let r = aw!(a.create_topic(topic, partitions, Target::Any))?;
    check(r.is_ok(), || format!("create {topic}: {r:?}"))
}

fn silence(server: &SimServer) -> R<()> {
    let rule = FaultRule {
        broker: None,
        api_key: None,
        fault: Fault::DropResponse,
        probability: 1.0,
        remaining: None,
    };
    Ok(server.with_cluster(|c, _| c.inject_fault(rule))?)
}

/// Waits until the consumer has a position for `tp`.
async fn positioned(c: &sf::Consumer, tp: &TopicPartition) -> R<Position> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = c.position(tp) {
            return Ok(p);
        }
        check(Instant::now() < end, || {
            format!("no start position for {tp}")
        })?;
        aw!(sleep(Duration::from_millis(20)));
    }
}

async fn seek_and_check(c: &sf::Consumer, tp: &TopicPartition, ms: i64, want: u32) -> R<()> {
    aw!(c.seek(tp, SeekTo::Timestamp(ms)))?;
    let got = poll_n(c, 1, Duration::from_secs(10)).await?;
    let first = got.first().map(index_of).transpose()?;
    check(first == Some(want), || {
        format!("seek to {ms} gave record {first:?}, not {want}")
    })
}

fn now_ms() -> R<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

mod admin;
mod consumer;
mod faults;
mod groups;
mod hooks;
mod producer;
mod real_broker;

use admin::*;
use consumer::*;
use faults::*;
use groups::*;
use hooks::*;
use producer::*;
use real_broker::*;

macro_rules! cases {
    ($($case:ident),*) => {
        mod run {
            use super::{Watchdog, block_on};
            $(
                #[test]
                fn $case() {
                    let _dog = Watchdog::new(stringify!($case), 240);
                    block_on(super::$case()).expect(stringify!($case));
                }
            )*
        }
    };
}

cases!(
    admin_round_trip,
    produce_consume_100k,
    poll_blobs_exactly_once,
    blob_paths_commit_as_poll_does,
    large_records_exactly_once,
    concurrent_pollers_exactly_once,
    group_commit_resume,
    listener_commits_before_revocation,
    admin_committed_offsets,
    broker_restart_mid_stream,
    broker_stops_answering,
    cluster_unreachable_then_back,
    dead_cluster_reaches_group_member_and_admin,
    dead_cluster_before_the_first_poll,
    missing_topic_reported_then_picked_up,
    unresolvable_host_says_so,
    batch_send_in_order,
    commit_retries_and_outage,
    calls_after_close,
    events_overflow_reported,
    seek_by_timestamp,
    close_loses_nothing,
    drop_delivers,
    real_broker_seek_and_close,
    hooks_called_once
);
