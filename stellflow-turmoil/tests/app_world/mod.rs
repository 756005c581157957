//! One seeded world of the at-least-once transformer: a 3-broker simulated cluster, two or
//! three instances of the service (`stellflow-tokio`'s `transform_tokio` example, unchanged),
//! a feeder that writes the inputs and a checker that reads the outputs, faults drawn from
//! the seed; and the checks of what a user of the service wants.

pub mod checks;
pub mod faults;

use crate::transform_tokio::{self, Planted};
use faults::{FAULT_WINDOW, Fault, Plan, Step};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stellflow_tokio::{ClientConfig, OffsetReset, Record, TopicPartition};
use stellflow_turmoil::SimulatedCluster;

pub const BROKERS: i32 = 3;
pub const PARTITIONS: i32 = 3;
pub const KEYS: usize = 4;
pub const PER_KEY: usize = 6;
pub const GROUP: &str = "transformers";
const INPUT: &str = "input";
const OUTPUT: &str = "output";
/// A world that has not seen every output by then has lost some.
const WORLD_LIMIT: Duration = Duration::from_secs(30);
/// Virtual time of one step of a world: a round trip takes one or two.
const TICK: Duration = Duration::from_millis(10);
/// How long a failed service waits before it starts again (a supervisor's restart delay).
const RESTART_DELAY: Duration = Duration::from_millis(200);

/// One input processed: its output acknowledged by an instance, as the service's `acked`
/// callback saw it.
#[derive(Debug, Clone)]
pub struct Processed {
    /// Which start of a service (a new client: after a crash, a restart or a failed call).
    pub run: u64,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// What the hosts of a world write down for the checks.
#[derive(Debug, Default)]
pub struct Log {
    pub processed: Vec<Processed>,
    /// Starts of the service so far.
    pub runs: u64,
    /// Output values per output partition, in log order, as the checker read them.
    pub outputs: BTreeMap<i32, Vec<String>>,
    /// The group's committed input offset per partition, sampled between steps: (number of
    /// inputs processed so far, partition, committed offset).
    pub commits: Vec<(usize, i32, i64)>,
}

/// What a world came to.
pub struct Report {
    pub trace_hash: u64,
    pub trace_events: u64,
    pub processed: usize,
    pub duplicates: usize,
    pub virtual_time: Duration,
}

/// The value of input `seq` of key `key`.
pub fn input_value(key: usize, seq: usize) -> String {
    format!("k{key}-{seq}")
}

/// The service's configuration in these worlds: the example's, with timeouts short enough
/// for a world of seconds.
fn service_config(bootstrap: &str) -> ClientConfig {
    let mut config = transform_tokio::config(bootstrap, GROUP).expect("a valid configuration");
    quick(&mut config);
    config.consumer.session_timeout = Duration::from_millis(1500);
    config.consumer.heartbeat_interval = Duration::from_millis(250);
    config.consumer.auto_commit_interval = Duration::from_millis(200);
    config
}

/// Timeouts of a world of seconds: a send cut off from its broker for over a second fails
/// (and the service starts again), as sends do when a partition outlasts the delivery timeout.
fn quick(config: &mut ClientConfig) {
    config.request_timeout = Duration::from_millis(500);
    config.producer.delivery_timeout = Duration::from_secs(1);
    config.producer.ack_timeout = Duration::from_millis(500);
}

/// Runs world `seed`; `Err` names what went wrong (with the plan and the trace hash).
pub fn run(seed: u64, planted: Planted) -> Result<Report, String> {
    let plan = Plan::new(seed, BROKERS, PARTITIONS);
    let mut sim = stellflow_turmoil::builder(seed)
        .tick_duration(TICK)
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::from_millis(2))
        .build();
    let cluster = SimulatedCluster::new(BROKERS as usize, seed);
    for topic in [INPUT, OUTPUT] {
        cluster
            .create_topic(topic, PARTITIONS, BROKERS as usize)
            .expect("topics");
    }
    cluster.install(&mut sim);
    let log = Arc::new(Mutex::new(Log::default()));
    for i in 1..=plan.instances {
        add_instance(&mut sim, &cluster, &log, i, planted);
    }
    add_checker(&mut sim, &cluster, &log);
    let outcome = drive(&mut sim, &cluster, &log, &plan);
    let hash = cluster.trace_hash();
    let fail = |what: String| format!("{what}\nplan: {plan}trace hash {hash:016x}");
    let virtual_time = outcome.map_err(fail)?;
    let log = log.lock().unwrap();
    let duplicates = checks::check(&log).map_err(fail)?;
    Ok(Report {
        trace_hash: hash,
        trace_events: cluster.trace_events(),
        processed: log.processed.len(),
        duplicates,
        virtual_time,
    })
}

/// Instance `i`: the service on host `app-<i>`, started again (a new client) whenever it
/// fails, and from scratch when the host restarts after a crash.
fn add_instance(
    sim: &mut turmoil::Sim<'_>,
    cluster: &SimulatedCluster,
    log: &Arc<Mutex<Log>>,
    i: usize,
    planted: Planted,
) {
    let (cluster, log) = (cluster.clone(), log.clone());
    let config = service_config(&cluster.bootstrap());
    sim.host(format!("app-{i}"), move || {
        let (cluster, log, config) = (cluster.clone(), log.clone(), config.clone());
        async move {
            loop {
                let run = {
                    let mut log = log.lock().unwrap();
                    log.runs += 1;
                    log.runs
                };
                let client = cluster.connect(config.clone()).await?;
                let acked = |input: &stellflow_tokio::ConsumerRecord| {
                    let value = String::from_utf8_lossy(input.value.as_deref().unwrap_or_default());
                    cluster.observe(format!("app-{i} {value}").as_bytes());
                    log.lock().unwrap().processed.push(Processed {
                        run,
                        partition: input.partition,
                        offset: input.offset,
                        value: value.into_owned(),
                    });
                };
                // Ends only with an error: the process would exit, and its supervisor start
                // it again. The dropped client closes in the background.
                let _ = transform_tokio::service(&client, INPUT, OUTPUT, planted, acked).await;
                drop(client);
                tokio::time::sleep(RESTART_DELAY).await;
            }
        }
    });
}

/// The checker: writes the inputs (each key's in order, a little apart, trying a failed
/// send again), then reads the outputs until every input's output is there.
fn add_checker(sim: &mut turmoil::Sim<'_>, cluster: &SimulatedCluster, log: &Arc<Mutex<Log>>) {
    let (cluster, log) = (cluster.clone(), log.clone());
    sim.client("checker", async move {
        let mut config = ClientConfig::new(&cluster.bootstrap())?;
        config.consumer.auto_offset_reset = OffsetReset::Earliest;
        quick(&mut config);
        let client = cluster.connect(config).await?;
        let producer = client.producer();
        for seq in 0..PER_KEY {
            for key in 0..KEYS {
                let record = Record::new(INPUT, input_value(key, seq)).with_key(format!("k{key}"));
                while producer.send(record.clone()).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // Spread over the time the faults start in.
                tokio::time::sleep(FAULT_WINDOW / (KEYS * PER_KEY) as u32).await;
            }
        }
        let consumer = client.consumer();
        let outputs: Vec<TopicPartition> = (0..PARTITIONS)
            .map(|p| TopicPartition::new(OUTPUT, p))
            .collect();
        consumer.assign(&outputs)?;
        let mut seen = BTreeSet::new();
        while seen.len() < KEYS * PER_KEY {
            let Ok(records) = consumer.poll(Duration::from_millis(100)).await else {
                continue;
            };
            let mut log = log.lock().unwrap();
            for r in records {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                seen.insert(value.to_string());
                log.outputs
                    .entry(r.partition)
                    .or_default()
                    .push(value.into_owned());
            }
        }
        client.close().await?;
        Ok(())
    });
}

/// Steps the world until the checker is done, applying the plan; the virtual time it took.
fn drive(
    sim: &mut turmoil::Sim<'_>,
    cluster: &SimulatedCluster,
    log: &Arc<Mutex<Log>>,
    plan: &Plan,
) -> Result<Duration, String> {
    let mut next = 0;
    let mut down_brokers = BTreeSet::new();
    let mut down_instances = BTreeSet::new();
    let mut committed = BTreeMap::new();
    loop {
        let now = sim.elapsed();
        while next < plan.steps.len() && plan.steps[next].0 <= now {
            apply(
                sim,
                cluster,
                plan.steps[next].1,
                &mut down_brokers,
                &mut down_instances,
            );
            next += 1;
        }
        if now > WORLD_LIMIT {
            let log = log.lock().unwrap();
            let missing = checks::missing(&log);
            return Err(format!(
                "lost: no output after {WORLD_LIMIT:?} for {} inputs: {missing:?}",
                missing.len()
            ));
        }
        sample_commits(cluster, log, &mut committed);
        match sim.step() {
            Ok(true) => return Ok(sim.elapsed()),
            Ok(false) => {}
            Err(e) => return Err(format!("a host failed: {e}")),
        }
    }
}

/// Writes down the group's committed input offsets when they moved.
fn sample_commits(
    cluster: &SimulatedCluster,
    log: &Arc<Mutex<Log>>,
    last: &mut BTreeMap<i32, i64>,
) {
    let now: Vec<(i32, i64)> = cluster.with_model(|m| {
        let Some(coordinator) = m.broker(1) else {
            return Vec::new();
        };
        (0..PARTITIONS)
            .map(|p| {
                (
                    p,
                    coordinator
                        .offsets()
                        .fetch(Some(GROUP), Some(INPUT), p)
                        .offset,
                )
            })
            .collect()
    });
    for (p, offset) in now {
        if last.get(&p) != Some(&offset) {
            last.insert(p, offset);
            let mut log = log.lock().unwrap();
            let done = log.processed.len();
            log.commits.push((done, p, offset));
        }
    }
}

/// Applies one step of the plan (a crash of what is down already, or the end of a crash that
/// did not happen, does nothing).
fn apply(
    sim: &mut turmoil::Sim<'_>,
    cluster: &SimulatedCluster,
    step: Step,
    down_brokers: &mut BTreeSet<i32>,
    down_instances: &mut BTreeSet<usize>,
) {
    let app = |i: usize| format!("app-{i}");
    let broker = |id: i32| cluster.host_name(id).expect("a broker").to_owned();
    match step {
        Step::Start(Fault::CrashInstance { instance, .. }) => {
            if down_instances.insert(instance) {
                sim.crash(app(instance));
            }
        }
        Step::End(Fault::CrashInstance { instance, .. }) => {
            if down_instances.remove(&instance) {
                sim.bounce(app(instance));
            }
        }
        Step::Start(Fault::CrashBroker { broker: id, .. }) => {
            if down_brokers.insert(id) {
                cluster.crash_broker(sim, id).expect("a broker");
            }
        }
        Step::End(Fault::CrashBroker { broker: id, .. }) => {
            if down_brokers.remove(&id) {
                cluster.restart_broker(sim, id).expect("a broker");
            }
        }
        Step::Start(Fault::Partition {
            instance,
            broker: id,
            ..
        }) => sim.partition(app(instance), broker(id)),
        Step::End(Fault::Partition {
            instance,
            broker: id,
            ..
        }) => sim.repair(app(instance), broker(id)),
        Step::Start(Fault::Latency {
            instance,
            broker: id,
            max,
            ..
        }) => sim.set_link_max_message_latency(app(instance), broker(id), max),
        Step::End(Fault::Latency {
            instance,
            broker: id,
            ..
        }) => sim.set_link_max_message_latency(app(instance), broker(id), Duration::from_millis(2)),
        Step::Start(Fault::MoveLeader { partition, to }) => {
            cluster.move_leader(INPUT, partition, to);
        }
        Step::End(Fault::MoveLeader { .. }) => {}
    }
}
