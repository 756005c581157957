//! Dropping the last handle stops every thread (a test binary of its own, so that no other
//! test starts or stops threads meanwhile).

use std::time::{Duration, Instant};
use stellflow_blocking::{Client, ClientConfig, Record, Target};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

#[test]
fn dropping_the_last_handle_stops_every_thread() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let before = threads();
    let config = ClientConfig::new(&server.local_addr().to_string()).unwrap();
    let client = Client::connect(config).unwrap();
    let (admin, producer) = (client.admin(), client.producer());
    admin.create_topic("t", 1, Target::Any).unwrap();
    producer.send(Record::new("t", "v")).unwrap();
    if before > 0 {
        assert!(threads() > before);
    }
    let started = Instant::now();
    drop((client, admin, producer));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not prompt (loaded machine: generous bound)"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(threads(), before, "threads left behind");
}
