//! The blocking adapter against the loopback sim broker over real sockets.

use std::collections::HashSet;
use std::time::{Duration, Instant};
use stellflow_blocking::{
    Acks, Client, ClientConfig, Error, OffsetReset, OffsetSpec, Options, Record, SeekTo, Target,
    TopicPartition,
};

fn config(server: &stellflow_sim::SimServer) -> ClientConfig {
    let mut c = ClientConfig::new(&server.local_addr().to_string()).unwrap();
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.producer.acks = Acks::Leader;
    c
}

#[test]
fn admin_round_trip() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let admin = Client::connect(config(&server)).unwrap().admin();
    let v = admin.api_versions(Target::Any).unwrap();
    assert!(!v.apis.is_empty());
    assert_eq!(admin.describe_cluster(Target::Any).unwrap().broker_count, 1);
    assert!(admin.create_topic("t1", 3, Target::Any).unwrap().is_ok());
    let (topics, missing) = admin.describe_topics(&["t1", "nope"]).unwrap();
    assert_eq!(topics[0].partitions.len(), 3);
    assert_eq!(missing, vec!["nope".to_string()]);
    let offs = admin
        .list_offsets(&[("t1", 0, OffsetSpec::Latest)])
        .unwrap();
    assert_eq!(offs[0].result.as_ref().unwrap().offset, 0);
    assert!(admin.delete_topic("t1", Target::Any).unwrap().is_ok());
    assert!(matches!(
        admin.create_topic("../x", 1, Target::Any),
        Err(Error::Admin(_))
    ));
}

#[test]
fn produce_and_consume_exactly() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let client = Client::connect(config(&server)).unwrap();
    client
        .admin()
        .create_topic("orders", 6, Target::Any)
        .unwrap();
    let producer = client.producer();
    let n = 20_000;
    let pending: Vec<_> = (0..n)
        .map(|i| {
            producer
                .enqueue(Record::new("orders", format!("v{i}")).with_key(format!("k{}", i % 97)))
                .unwrap()
        })
        .collect();
    producer.flush().unwrap();
    for p in pending {
        assert!(p.wait().unwrap().offset.is_some());
    }
    let one = producer
        .send(Record::new("orders", "last").with_partition(2))
        .unwrap();
    assert_eq!(one.partition, 2);

    let consumer = Client::connect(config(&server)).unwrap().consumer();
    consumer
        .assign(
            &(0..6)
                .map(|p| TopicPartition::new("orders", p))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < n + 1 && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(200)).unwrap() {
            let v = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            assert!(seen.insert(v), "duplicate");
        }
    }
    assert_eq!(seen.len(), n + 1);
    let tp = TopicPartition::new("orders", 2);
    consumer.seek(&tp, SeekTo::Beginning).unwrap();
    consumer.pause(&tp).unwrap();
    consumer.resume(&tp).unwrap();
    consumer.close().unwrap();
}

#[test]
fn group_commit_and_resume() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let mut cfg = config(&server);
    cfg.consumer.group_id = Some("g".into());
    cfg.consumer.enable_auto_commit = false;
    let client = Client::connect(cfg.clone()).unwrap();
    client.admin().create_topic("t", 1, Target::Any).unwrap();
    let producer = client.producer();
    for i in 0..10 {
        drop(producer.enqueue(Record::new("t", format!("{i}"))).unwrap());
    }
    producer.flush().unwrap();
    let consumer = client.consumer();
    consumer.subscribe(&["t"]).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 4 && Instant::now() < deadline {
        got.extend(consumer.poll(Duration::from_millis(100)).unwrap());
    }
    let fourth = &got[3];
    consumer
        .commit_positions(vec![(TopicPartition::new("t", 0), fourth.next_position())])
        .unwrap();
    drop((consumer, producer, client));

    let consumer = Client::connect(cfg).unwrap().consumer();
    consumer.assign(&[TopicPartition::new("t", 0)]).unwrap();
    let mut rest = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rest.len() < 6 && Instant::now() < deadline {
        rest.extend(consumer.poll(Duration::from_millis(100)).unwrap());
    }
    let values: Vec<_> = rest.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(
        values,
        (4..10)
            .map(|i| format!("{i}").into())
            .collect::<Vec<bytes::Bytes>>()
    );
}

#[test]
fn unreachable_broker_times_out_with_a_reason() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = ClientConfig::new(&format!("127.0.0.1:{port}")).unwrap();
    cfg.request_timeout = Duration::from_millis(800);
    let mut options = Options::default();
    options.close_timeout = Duration::from_millis(500);
    let client = Client::connect_with(cfg, options).unwrap();
    let started = Instant::now();
    assert!(client.admin().describe_cluster(Target::Any).is_err());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(client.connect_error().unwrap().contains("cannot connect"));
    let started = Instant::now();
    drop(client);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not prompt (loaded machine: generous bound)"
    );
}

#[test]
fn explicit_close_then_drop_is_prompt() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let client = Client::connect(config(&server)).unwrap();
    client.admin().describe_cluster(Target::Any).unwrap();
    client.close().unwrap();
    assert!(matches!(
        client.admin().describe_cluster(Target::Any),
        Err(Error::Shutdown)
    ));
    let started = Instant::now();
    drop(client);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not prompt (loaded machine: generous bound)"
    );
}

#[test]
fn handles_are_send_sync_and_cheap_to_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Client>();
    check::<stellflow_blocking::Producer>();
    check::<stellflow_blocking::Consumer>();
    check::<stellflow_blocking::Admin>();
    fn send<T: Send>() {}
    send::<stellflow_blocking::Delivery>();
}

/// Regression: `flush` (and `close`) covered only the records inside the core's buffer, not
/// those parked in the overflow queue while the buffer was full, so `flush` could return
/// before records enqueued ahead of it had their outcomes.
#[test]
fn flush_and_close_cover_parked_records() {
    let server = stellflow_sim::serve("127.0.0.1:0").unwrap();
    let mut c = config(&server);
    c.producer.batch_size = 4 * 1024;
    c.producer.buffer_memory = 8 * 1024;
    let client = Client::connect(c).unwrap();
    client
        .admin()
        .create_topic("parked", 1, Target::Any)
        .unwrap();
    let producer = client.producer();
    let value = stellflow_blocking::bytes::Bytes::from(vec![7u8; 3000]);
    // More than the buffer holds: the last records wait in the overflow queue.
    let enqueue_twelve = || -> Vec<_> {
        (0..12)
            .map(|_| {
                producer
                    .enqueue(Record::new("parked", value.clone()))
                    .unwrap()
            })
            .collect()
    };
    for round in 0..20 {
        let mut pending = enqueue_twelve();
        producer.flush().unwrap();
        for (i, p) in pending.iter_mut().enumerate() {
            let outcome = p.try_wait();
            assert!(
                matches!(outcome, Some(Ok(_))),
                "round {round}, record {i}: {outcome:?} after flush"
            );
        }
    }
    let mut pending = enqueue_twelve();
    producer.close().unwrap();
    for p in &mut pending {
        assert!(
            matches!(p.try_wait(), Some(Ok(_))),
            "close delivers parked records"
        );
    }
}
