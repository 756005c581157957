//! The core's `tracing` lines as each runtime's users see them: a healthy produce →
//! consume round trip logs nothing above `debug`; a broker restart logs the lost connection,
//! the reconnect and the metadata that follows (the leaderless partition with its reason).
//!
//! One global subscriber captures every line; each test gives its clients ids with its own
//! prefix and reads only the lines inside their `stellflow{client_id=…}` spans.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

#[derive(Clone)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c = Capture(Arc::new(Mutex::new(Vec::new())));
        let w = c.clone();
        tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
            .init();
        c
    })
}

/// `(level, line)` of every captured line of the clients whose id starts with `prefix`.
fn lines(prefix: &str) -> Vec<(String, String)> {
    let all = capture()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let needle = format!("client_id={prefix}");
    String::from_utf8_lossy(&all)
        .lines()
        .filter(|l| l.contains(&needle))
        .map(|l| {
            let level = l.split_whitespace().nth(1).unwrap_or("").to_owned();
            (level, l.to_owned())
        })
        .collect()
}

/// Asserts that the healthy round trip logged something, and nothing above debug.
fn check_healthy(prefix: &str) {
    let seen = lines(prefix);
    assert!(
        seen.iter().any(|(_, l)| l.contains("ready")),
        "the capture works: a connection became ready: {seen:#?}"
    );
    let loud: Vec<_> = seen
        .iter()
        .filter(|(level, _)| !matches!(level.as_str(), "DEBUG" | "TRACE"))
        .collect();
    assert!(
        loud.is_empty(),
        "a healthy round trip logs nothing above debug: {loud:#?}"
    );
}

/// Waits until the clients of `prefix` logged a lost connection, a reconnect, and the
/// metadata that followed it.
fn check_restart(prefix: &str) {
    let start = Instant::now();
    let want = [
        ("WARN", "connection lost"),
        ("INFO", "reconnected"),
        ("DEBUG", "metadata updated"),
        ("WARN", "partition has no leader"),
    ];
    loop {
        let seen = lines(prefix);
        let lost = seen.iter().position(|(_, l)| l.contains("connection lost"));
        let after: Vec<_> = lost.map_or(&[][..], |i| &seen[i..]).to_vec();
        let missing: Vec<_> = want
            .iter()
            .filter(|(lv, text)| !after.iter().any(|(l, line)| l == lv && line.contains(text)))
            .collect();
        if missing.is_empty() {
            let leaderless = after
                .iter()
                .find(|(_, l)| l.contains("partition has no leader"))
                .unwrap();
            assert!(
                leaderless.1.contains("restarted on its data"),
                "{leaderless:?}"
            );
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "missing {missing:?} after the restart: {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn restart(server: &stellflow_sim::SimServer) {
    server
        .with_cluster(|c, now| c.restart(1, now))
        .expect("sim server")
        .expect("restart");
}

macro_rules! async_scenario {
    ($krate:ident, $prefix:expr) => {{
        use $krate::{Client, ClientConfig, OffsetReset, Record, Target, TopicPartition};
        let prefix: &str = $prefix;
        let server = stellflow_sim::serve("127.0.0.1:0").expect("sim server");
        let mut config = ClientConfig::new(&server.local_addr().to_string()).unwrap();
        config.consumer.auto_offset_reset = OffsetReset::Earliest;
        config.header.client_id = Some(format!("{prefix}c"));
        let client = Client::connect(config).await.unwrap();
        client
            .admin()
            .create_topic("t", 1, Target::Any)
            .await
            .unwrap();
        client
            .producer()
            .send(Record::new("t", "hello"))
            .await
            .unwrap();
        let consumer = client.consumer();
        consumer.assign(&[TopicPartition::new("t", 0)]).unwrap();
        let mut got = 0;
        let start = Instant::now();
        while got == 0 {
            got += consumer
                .poll(Duration::from_millis(200))
                .await
                .unwrap()
                .len();
            assert!(start.elapsed() < Duration::from_secs(30), "no record");
        }
        check_healthy(prefix);
        restart(&server);
        // The client stays alive (its driver reconnects by itself) while the log is read.
        (client, server)
    }};
}

#[test]
fn tokio_logs_a_restart_and_stays_quiet_when_healthy() {
    let prefix = "trace-tokio-";
    capture();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _alive = rt.block_on(async { async_scenario!(stellflow_tokio, prefix) });
    check_restart(prefix);
}

#[test]
fn smol_logs_a_restart_and_stays_quiet_when_healthy() {
    let prefix = "trace-smol-";
    capture();
    let _alive = smol::block_on(async { async_scenario!(stellflow_smol, prefix) });
    check_restart(prefix);
}

#[test]
fn blocking_logs_a_restart_and_stays_quiet_when_healthy() {
    use stellflow_blocking::{Client, ClientConfig, OffsetReset, Record, Target, TopicPartition};
    let prefix = "trace-blocking-";
    capture();
    let server = stellflow_sim::serve("127.0.0.1:0").expect("sim server");
    let mut config = ClientConfig::new(&server.local_addr().to_string()).unwrap();
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.header.client_id = Some(format!("{prefix}c"));
    let client = Client::connect(config).unwrap();
    client.admin().create_topic("t", 1, Target::Any).unwrap();
    client.producer().send(Record::new("t", "hello")).unwrap();
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("t", 0)]).unwrap();
    let start = Instant::now();
    while consumer
        .poll(Duration::from_millis(200))
        .unwrap()
        .is_empty()
    {
        assert!(start.elapsed() < Duration::from_secs(30), "no record");
    }
    check_healthy(prefix);
    restart(&server);
    check_restart(prefix);
}
