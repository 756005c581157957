//! `api-versions`, `cluster`, `topics …` and `broker`.

use crate::{CliResult, Env, fail};
use clap::Subcommand;
use stellflow_blocking::{ErrorCode, Target};

/// `stellflow topics …`
#[derive(Subcommand, Debug)]
pub enum TopicsCmd {
    /// Every topic with its partition count.
    List,
    /// Partitions, leaders, epochs, replicas and ISR of topics.
    Describe {
        /// Topics (all when none given).
        topics: Vec<String>,
    },
    /// Create a topic.
    Create {
        /// Topic name (1-249 characters of A-Z a-z 0-9 . _ -).
        topic: String,
        /// Partition count.
        #[arg(long, short = 'p', default_value_t = 1)]
        partitions: i32,
        /// Create it on this broker id (default: any; today's server creates a topic on the
        /// broker asked only).
        #[arg(long)]
        broker: Option<i32>,
    },
    /// Delete a topic.
    Delete {
        /// Topic name.
        topic: String,
        /// Delete it on this broker id (default: any).
        #[arg(long)]
        broker: Option<i32>,
    },
    /// Re-assert the leadership of a restarted broker's leaderless partitions.
    ReassertLeaders {
        /// The restarted broker's id (default: every broker).
        #[arg(long)]
        broker: Option<i32>,
    },
}

/// The broker to ask; an id the cluster metadata does not list fails at once (instead of
/// after the request timeout).
fn target(env: &Env, broker: Option<i32>) -> CliResult<Target> {
    match broker {
        None => Ok(Target::Any),
        Some(id) if env.client.metadata().brokers.contains_key(&id) => Ok(Target::Broker(id)),
        Some(id) => {
            let known: Vec<i32> = env.client.metadata().brokers.keys().copied().collect();
            fail(format!("unknown broker id {id}: the cluster has {known:?}"))
        }
    }
}

/// `stellflow api-versions`
pub fn api_versions(env: &Env, broker: Option<i32>) -> CliResult {
    let v = env.client.admin().api_versions(target(env, broker)?)?;
    let id = v.broker_id.map_or("?".into(), |i| i.to_string());
    println!(
        "broker {id} at {} ({} {})",
        v.address,
        v.software_name.as_deref().unwrap_or("unknown software"),
        v.software_version.as_deref().unwrap_or("")
    );
    println!(
        "{:<24} {:>4} {:>4} {:>4} {:>6}",
        "API", "KEY", "MIN", "MAX", "USED"
    );
    for a in &v.apis {
        let used = a.chosen.map_or("-".into(), |c| c.to_string());
        let name = a.api_key.name().unwrap_or("unknown");
        let key = a.api_key.0;
        println!(
            "{name:<24} {key:>4} {:>4} {:>4} {used:>6}",
            a.min_version, a.max_version
        );
    }
    Ok(())
}

/// `stellflow cluster`
pub fn cluster(env: &Env) -> CliResult {
    let admin = env.client.admin();
    let c = admin.describe_cluster(Target::Any)?;
    let (topics, _) = admin.describe_topics(&[])?;
    let meta = env.client.metadata();
    println!(
        "cluster {} — {} broker(s), {} topic(s), {} partition(s) in the merged metadata",
        c.cluster_id.as_deref().unwrap_or("(no id)"),
        meta.brokers.len(),
        topics.len(),
        topics.iter().map(|t| t.partitions.len()).sum::<usize>()
    );
    for b in meta.brokers.values() {
        println!("  broker {:>3}  {}", b.id, b.address);
    }
    let leaderless: Vec<_> = meta.leaderless().collect();
    for (t, p) in &leaderless {
        let why = p
            .leaderless
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        println!("  leaderless {t}-{}: {why}", p.partition);
    }
    println!(
        "asked {}: it reports {} broker(s), {} topic(s), {} partition(s) locally",
        c.address, c.broker_count, c.topic_count, c.partition_count
    );
    Ok(())
}

/// `stellflow topics …`
pub fn topics(env: &Env, cmd: TopicsCmd) -> CliResult {
    let admin = env.client.admin();
    match cmd {
        TopicsCmd::List => {
            let (topics, _) = admin.describe_topics(&[])?;
            for t in topics {
                println!("{}\t{} partition(s)", t.name, t.partitions.len());
            }
        }
        TopicsCmd::Describe { topics } => {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let (found, missing) = admin.describe_topics(&names)?;
            if let Some(m) = missing.first() {
                return fail(format!("unknown topic {m:?}"));
            }
            for t in found {
                println!("{}  ({} partition(s))", t.name, t.partitions.len());
                for p in t.partitions {
                    let leader = match p.leader() {
                        Ok(l) => l.to_string(),
                        Err(why) => format!("none ({why})"),
                    };
                    println!(
                        "  partition {:>3}  leader {leader}  epoch {}  replicas {:?}  isr {:?}",
                        p.partition, p.leader_epoch, p.replicas, p.isr
                    );
                }
            }
        }
        TopicsCmd::Create {
            topic,
            partitions,
            broker,
        } => {
            let r = admin.create_topic(&topic, partitions, target(env, broker)?)?;
            if let Some(bad) = r.partitions.iter().find(|p| !p.error_code.is_ok()) {
                return fail(format!(
                    "broker {} refused to create {topic:?}: {} (partition {})",
                    r.address, bad.error_code, bad.partition
                ));
            }
            println!(
                "created topic {topic} with {partitions} partition(s) on {}",
                r.address
            );
        }
        TopicsCmd::Delete { topic, broker } => {
            let r = admin.delete_topic(&topic, target(env, broker)?)?;
            if let Some(bad) = r.partitions.iter().find(|p| !p.error_code.is_ok()) {
                if bad.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
                    return fail(format!("unknown topic {topic:?}"));
                }
                return fail(format!(
                    "broker {} refused to delete {topic:?}: {}",
                    r.address, bad.error_code
                ));
            }
            println!("deleted topic {topic} on {}", r.address);
        }
        TopicsCmd::ReassertLeaders { broker } => {
            let ids: Vec<i32> = match broker {
                Some(b) => {
                    target(env, Some(b))?;
                    vec![b]
                }
                None => env.client.metadata().brokers.keys().copied().collect(),
            };
            for id in ids {
                let parts = admin.reassert_leadership(id)?;
                println!("broker {id}: {} leaderless partition(s)", parts.len());
                for p in parts {
                    let outcome = match &p.result {
                        Ok(()) => "re-asserted".to_owned(),
                        Err(e) => format!("failed: {e}"),
                    };
                    println!(
                        "  {}-{} epoch {}: {outcome}",
                        p.topic, p.partition, p.leader_epoch
                    );
                }
            }
        }
    }
    Ok(())
}

/// `stellflow broker`: serves until SIGINT or SIGTERM (Ctrl-C), then shuts the broker down
/// and returns (exit 0). A second signal while shutting down exits at once with 1.
pub fn broker(host: &str, port: u16, brokers: usize) -> CliResult {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    if brokers == 0 {
        return fail("--brokers must be at least 1");
    }
    // Registered before listening, so a signal right after the address is printed counts.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let config = stellflow_sim::ServerConfig {
        cluster: stellflow_sim::ClusterConfig::with_brokers(brokers),
        ..stellflow_sim::ServerConfig::default()
    };
    let server = stellflow_sim::serve_with(&format!("{host}:{port}"), config)
        .map_err(|e| crate::CliError(format!("cannot listen on {host}:{port}: {e}")))?;
    for (id, addr) in server.broker_addrs() {
        println!("sim broker {id} listening on {addr}");
    }
    println!(
        "try: stellflow --bootstrap {} cluster    (Ctrl-C stops the broker)",
        server.local_addr()
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server.shutdown();
    eprintln!("stellflow: interrupted; the sim broker has stopped");
    Ok(())
}
