//! One member of a consumer group, for failover measurements against a real broker: it
//! subscribes to a topic and writes one line per record to stdout,
//! `unix_ms partition offset index`, and rebalances to stderr, with session 6 s and heartbeat
//! 500 ms. Start several, kill one with SIGKILL, start another, and compare the outputs
//! (docs/groups.md, Timings).
//!
//! ```text
//! cargo run --release -p stellflow-tokio --example group_member -- 127.0.0.1:9092 orders g1
//! ```

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stellflow_tokio::{ClientConfig, Consumer, OffsetReset};

fn ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bootstrap, topic, group] = args.as_slice() else {
        return Err("usage: group_member BOOTSTRAP TOPIC GROUP".into());
    };
    let mut config = ClientConfig::new(bootstrap)?;
    config.consumer.group_id = Some(group.clone());
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.consumer.session_timeout = Duration::from_secs(6);
    config.consumer.heartbeat_interval = Duration::from_millis(500);
    config.consumer.auto_commit_interval = Duration::from_secs(1);
    let consumer = Consumer::connect(config).await?;
    consumer.subscribe(&[topic.as_str()])?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    eprintln!("{} start", ms());
    loop {
        for r in consumer.poll(Duration::from_millis(100)).await? {
            writeln!(out, "{} {} {} {}", ms(), r.partition, r.offset, r.index)?;
        }
        out.flush()?;
        for e in consumer.events() {
            eprintln!("{} {e:?}", ms());
        }
    }
}
