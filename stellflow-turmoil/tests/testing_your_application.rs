//! Your service in a simulated Stellflow cluster: the complete test of the guide page
//! "Testing your application" (docs/testing-your-application.md), as a user copies it into
//! `tests/` of their crate. Dev-dependencies: `stellflow-turmoil`, and tokio with `rt`,
//! `time` and `macros`.

use std::collections::BTreeSet;
use std::time::Duration;
use stellflow_tokio::{
    Client, ClientConfig, Error, OffsetReset, Record, StreamExt, TopicPartition,
};
use stellflow_turmoil::SimulatedCluster;

/// The service under test, the same code `main` runs (in your crate: `use my_service::run`).
/// It upper-cases each input and marks it processed once its output is acknowledged.
async fn run(client: &Client) -> Result<(), Error> {
    let (consumer, producer) = (client.consumer(), client.producer());
    consumer.subscribe(&["input"])?;
    let mut inputs = consumer.clone();
    while let Some(input) = inputs.next().await {
        let input = input?;
        let value = input
            .value
            .as_deref()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let output = Record::new("output", value).with_optional_key(input.key.clone());
        producer.send(output).await?;
        consumer.mark_processed(&input)?;
    }
    Ok(())
}

/// The service's configuration (in your crate, the one `main` uses).
fn config(bootstrap: &str) -> Result<ClientConfig, Error> {
    let mut config = ClientConfig::new(bootstrap)?;
    config.consumer.group_id = Some("uppercase".into());
    config.consumer.commit_marked_only = true;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.consumer.session_timeout = Duration::from_secs(2); // handovers within a short world
    config.consumer.heartbeat_interval = Duration::from_millis(300);
    Ok(config)
}

const ORDERS: usize = 20;

/// One world: a 3-broker cluster, two instances of the service, a checker that writes the
/// inputs and reads until every output is there, and a crash of each kind. Returns the trace
/// hash, or what went wrong.
fn world(seed: u64) -> Result<u64, String> {
    let mut sim = stellflow_turmoil::builder(seed)
        .tick_duration(Duration::from_millis(10))
        .build();
    let cluster = SimulatedCluster::new(3, seed);
    for topic in ["input", "output"] {
        cluster
            .create_topic(topic, 3, 3)
            .map_err(|e| e.to_string())?;
    }
    cluster.install(&mut sim);
    for host in ["app-1", "app-2"] {
        let cluster = cluster.clone();
        sim.host(host, move || {
            let cluster = cluster.clone();
            async move {
                loop {
                    // Like a supervisor: the service starts again after it failed.
                    let client = cluster.connect(config(&cluster.bootstrap())?).await?;
                    let _ = run(&client).await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
    let checker = cluster.clone();
    sim.client("checker", async move {
        let mut config = ClientConfig::new(&checker.bootstrap())?;
        config.consumer.auto_offset_reset = OffsetReset::Earliest;
        let client = checker.connect(config).await?;
        for i in 0..ORDERS {
            let record = Record::new("input", format!("order-{i}")).with_key(format!("k{}", i % 4));
            while client.producer().send(record.clone()).await.is_err() {}
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let consumer = client.consumer();
        consumer.assign(
            &(0..3)
                .map(|p| TopicPartition::new("output", p))
                .collect::<Vec<_>>(),
        )?;
        let mut seen = BTreeSet::new();
        while seen.len() < ORDERS {
            for output in consumer.poll(Duration::from_millis(100)).await? {
                seen.insert(output.value);
            }
        }
        client.close().await?;
        Ok(())
    });
    let mut crashed = false;
    loop {
        let now = sim.elapsed();
        if now >= Duration::from_millis(500) && !crashed {
            crashed = true;
            sim.crash("app-1");
            cluster
                .crash_broker(&mut sim, 2)
                .map_err(|e| e.to_string())?;
            sim.partition("app-2", "broker-3");
        }
        if now >= Duration::from_millis(1500) && !sim.is_host_running("app-1") {
            sim.bounce("app-1");
            cluster
                .restart_broker(&mut sim, 2)
                .map_err(|e| e.to_string())?;
            sim.repair("app-2", "broker-3");
        }
        if now > Duration::from_secs(60) {
            return Err("outputs missing after a minute".into());
        }
        if sim.step().map_err(|e| e.to_string())? {
            return Ok(cluster.trace_hash());
        }
    }
}

#[test]
fn every_order_gets_its_output_through_crashes_and_a_partition() {
    for seed in 0..5 {
        let hash = world(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(world(seed), Ok(hash), "seed {seed} replays differently");
    }
}
