//! A broker that restarts, dies, is never there, does not resolve or stops answering, and
//! a topic nobody created yet: each reported in bounded time, and the client recovers.

use super::*;

/// A broker restart between two halves of a stream, with leadership re-asserted via Admin.
pub async fn broker_restart_mid_stream() -> R<()> {
    const HALF: u32 = 5_000;
    let server = sim()?;
    let client = client(config(&server)?, Duration::from_secs(30)).await?;
    let (admin, producer, consumer) = (client.admin(), client.producer(), client.consumer());
    create_topic(&admin, "restart", 3).await?;
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("restart", p)).collect();
    consumer.assign(&tps)?;
    let mut pending = Vec::new();
    for i in 0..HALF {
        pending.push(aw!(producer.enqueue(record("restart", i)))?);
    }
    aw!(producer.flush())?;
    let mut got = poll_n(&consumer, HALF as usize, Duration::from_secs(60)).await?;
    check(got.len() == HALF as usize, || {
        format!("before restart: {}", got.len())
    })?;

    server.with_cluster(|c, now| c.restart(1, now))??;
    for i in HALF..2 * HALF {
        pending.push(aw!(producer.enqueue(record("restart", i)))?);
    }
    // Until leadership is re-asserted the broker refuses Produce and Fetch (error 9).
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        match aw!(admin.reassert_leadership(1)) {
            Ok(r) if !r.is_empty() && r.iter().all(|p| p.result.is_ok()) => break,
            other if Instant::now() > end => return Err(format!("reassert: {other:?}").into()),
            _ => aw!(sleep(Duration::from_millis(100))),
        }
    }
    aw!(producer.flush())?;
    for d in pending {
        delivered!(d)?;
    }
    got.extend(poll_n(&consumer, HALF as usize, Duration::from_secs(60)).await?);
    exactly_once(&got, 2 * HALF)?;
    aw!(client.close())?;
    Ok(())
}

/// The broker crashes and refuses connections: `recv` returns the unreachable error (naming
/// the broker) within `unreachable_timeout` + 2 s, once per outage, `cluster_health` says
/// unreachable, and consumption goes on by itself once the broker is back.
pub async fn cluster_unreachable_then_back() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "gone", 1).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("gone", 0)])?;
    aw!(client.producer().send(record("gone", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;
    check(
        client.cluster_health().state == sf::HealthState::Healthy,
        || format!("before the crash: {:?}", client.cluster_health()),
    )?;

    server.with_cluster(|c, now| c.crash(1, now))??;
    let crashed = Instant::now();
    let r = aw!(consumer.recv());
    let took = crashed.elapsed();
    let address = server.local_addr().to_string();
    match &r {
        Err(Error::Consumer(ConsumerError::Unreachable(e))) => {
            check(e.to_string().contains(&address), || format!("{e}"))?
        }
        other => return Err(format!("recv after the crash: {other:?}").into()),
    }
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    check(r.as_ref().is_err_and(Error::is_retriable), || {
        "the unreachable error is retriable".into()
    })?;
    let health = client.cluster_health();
    check(
        matches!(health.state, sf::HealthState::Unreachable { .. }),
        || format!("{health:?}"),
    )?;
    // Once per outage: the next poll waits and comes back empty.
    let again = aw!(consumer.poll(Duration::from_millis(500)))?;
    check(again.is_empty(), || format!("{again:?}"))?;

    server.with_cluster(|c, now| {
        c.restart(1, now)?;
        c.reassert_leadership(1)
    })??;
    aw!(client.producer().send(record("gone", 1)))?;
    let next = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(next.len() == 1 && index_of(&next[0])? == 1, || {
        format!("after the restart: {next:?}")
    })?;
    let health = client.cluster_health();
    check(
        !matches!(health.state, sf::HealthState::Unreachable { .. }),
        || format!("{health:?}"),
    )?;
    aw!(client.close())?;
    Ok(())
}

/// The cluster dies under a group member: its `recv` returns the unreachable error within
/// `unreachable_timeout` + 2 s, and an admin call made during the outage fails with the same
/// cause within the same bound instead of waiting out its request timeout.
pub async fn dead_cluster_reaches_group_member_and_admin() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    cfg.request_timeout = Duration::from_secs(30);
    cfg.consumer.group_id = Some("dead-g".into());
    // A close commit is retried until rebalance_timeout (Kafka's close waits for it too).
    cfg.consumer.enable_auto_commit = false;
    cfg.consumer.session_timeout = Duration::from_secs(30);
    cfg.consumer.heartbeat_interval = Duration::from_secs(1);
    let client = client(cfg, Duration::from_secs(5)).await?;
    create_topic(&client.admin(), "dead", 2).await?;
    let consumer = client.consumer();
    consumer.subscribe(&["dead"])?;
    aw!(client.producer().send(record("dead", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;

    server.with_cluster(|c, now| c.crash(1, now))??;
    let crashed = Instant::now();
    let r = aw!(consumer.recv());
    let took = crashed.elapsed();
    check(
        matches!(&r, Err(Error::Consumer(ConsumerError::Unreachable(_)))),
        || format!("recv after the crash: {r:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    let asked = Instant::now();
    let d = aw!(client.admin().describe_cluster(Target::Any));
    let took = asked.elapsed();
    check(
        d.as_ref()
            .is_err_and(|e| e.is_retriable() && e.to_string().contains("unreachable")),
        || format!("describe_cluster during the outage: {d:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    // Closing does not wait to free the member's registry slot, which nothing can write.
    let asked = Instant::now();
    aw!(client.close())?;
    let took = asked.elapsed();
    check(took <= Duration::from_secs(4), || {
        format!("close took {took:?}")
    })?;
    Ok(())
}

/// Nothing listens at the bootstrap address from the start: a consumer's first `poll`, and
/// an admin call, fail with the unreachable error within `unreachable_timeout` + 2 s.
pub async fn dead_cluster_before_the_first_poll() -> R<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut cfg = ClientConfig::new(&format!("127.0.0.1:{port}"))?;
    cfg.unreachable_timeout = Duration::from_secs(2);
    cfg.request_timeout = Duration::from_secs(30);
    let start = Instant::now();
    let client = client(cfg, Duration::from_secs(5)).await?;
    let consumer = client.consumer();
    consumer.assign(&[TopicPartition::new("t", 0)])?;
    let admin = client.admin();
    let d = aw!(admin.describe_cluster(Target::Any));
    check(
        d.as_ref()
            .is_err_and(|e| e.to_string().contains("Connection refused")),
        || format!("describe_cluster: {d:?}"),
    )?;
    let end = Instant::now() + Duration::from_secs(10);
    let error = loop {
        match aw!(consumer.poll(Duration::from_millis(200))) {
            Err(e) => break e,
            Ok(r) => check(r.is_empty() && Instant::now() < end, || {
                format!("no unreachable error: {r:?}")
            })?,
        }
    };
    let took = start.elapsed();
    check(
        matches!(&error, Error::Consumer(ConsumerError::Unreachable(_))),
        || format!("{error:?}"),
    )?;
    check(took <= Duration::from_secs(4), || format!("took {took:?}"))?;
    aw!(client.close())?;
    Ok(())
}

/// Assigning a topic no broker knows: a `TopicUnknown` event, then a poll error naming the
/// topic after `consumer.missing_topic_wait` (+ a metadata round), and the topic, once
/// created, is consumed without any call.
pub async fn missing_topic_reported_then_picked_up() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.consumer.missing_topic_wait = Duration::from_secs(1);
    let client = client(cfg, Duration::from_secs(5)).await?;
    let consumer = client.consumer();
    let asked = Instant::now();
    consumer.assign(&[TopicPartition::new("later", 0)])?;
    let r = aw!(consumer.recv());
    let took = asked.elapsed();
    check(
        matches!(&r, Err(Error::Consumer(ConsumerError::UnknownTopic { topic, .. })) if topic == "later"),
        || format!("recv on a missing topic: {r:?}"),
    )?;
    check(took <= Duration::from_secs(5), || format!("took {took:?}"))?;
    let events = consumer.events();
    check(
        (events.events.iter())
            .any(|e| matches!(e, ConsumerEvent::TopicUnknown { topic, .. } if topic == "later")),
        || format!("no TopicUnknown event: {:?}", events.events),
    )?;
    create_topic(&client.admin(), "later", 1).await?;
    aw!(client.producer().send(record("later", 0)))?;
    let got = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(got.len() == 1, || {
        "the topic created later was not consumed".into()
    })?;
    aw!(client.close())?;
    Ok(())
}

/// A host name that does not resolve is reported as such, not as a refused connection.
pub async fn unresolvable_host_says_so() -> R<()> {
    let client = client(
        ClientConfig::new("no-such-host.invalid:9092")?,
        Duration::from_secs(5),
    )
    .await?;
    let end = Instant::now() + Duration::from_secs(20);
    let error = loop {
        if let Some(e) = client.connect_error() {
            break e;
        }
        check(Instant::now() < end, || "no connect error".into())?;
        aw!(sleep(Duration::from_millis(20)));
    };
    check(
        error.contains("\"no-such-host.invalid\" did not resolve"),
        || error.clone(),
    )?;
    let health = client.cluster_health();
    let cause = health.brokers.first().and_then(|b| b.last_cause.clone());
    check(cause.is_some_and(|c| c.contains("did not resolve")), || {
        format!("{health:?}")
    })?;
    aw!(client.close())?;
    Ok(())
}

/// The broker executes requests but never answers: admin calls, sends and commits fail in
/// bounded time, polls return empty, the buffer stays bounded, and the client recovers.
pub async fn broker_stops_answering() -> R<()> {
    let server = sim()?;
    let mut cfg = config(&server)?;
    cfg.request_timeout = Duration::from_millis(800);
    cfg.producer.delivery_timeout = Duration::from_secs(2);
    cfg.producer.ack_timeout = Duration::from_millis(500);
    cfg.producer.batch_size = 16 * 1024;
    cfg.producer.buffer_memory = 64 * 1024;
    cfg.consumer.group_id = Some("stall".into());
    cfg.consumer.rebalance_timeout = Duration::from_secs(2);
    let client = client(cfg, Duration::from_millis(300)).await?;
    let (admin, producer, consumer) = (client.admin(), client.producer(), client.consumer());
    create_topic(&admin, "stall", 1).await?;
    consumer.assign(&[TopicPartition::new("stall", 0)])?;
    aw!(producer.send(record("stall", 0)))?;
    let first = poll_n(&consumer, 1, Duration::from_secs(20)).await?;
    check(first.len() == 1, || "the first record never arrived".into())?;

    silence(&server)?;
    let bounded = |t: Instant, limit: u64, what: &str| {
        check(t.elapsed() < Duration::from_secs(limit), || {
            format!("{what} took {:?}", t.elapsed())
        })
    };
    let t = Instant::now();
    let r = aw!(admin.describe_cluster(Target::Any));
    check(r.as_ref().is_err_and(Error::is_retriable), || {
        format!("describe_cluster: {r:?}")
    })?;
    bounded(t, 10, "describe_cluster")?;
    let t = Instant::now();
    let r = aw!(producer.send(record("stall", 1)));
    check(r.is_err(), || format!("send answered: {r:?}"))?;
    bounded(t, 15, "send")?;
    let t = Instant::now();
    let polled = aw!(consumer.poll(Duration::from_millis(300)))?;
    check(polled.is_empty(), || "records from a silent broker".into())?;
    bounded(t, 5, "poll")?;

    // Beyond `buffer_memory` records wait at most `max_block`, then fail with buffer-full;
    // every record gets an error outcome in bounded time.
    let t = Instant::now();
    let (mut outcomes, mut pending) = (Vec::new(), Vec::new());
    for i in 0..2_000u32 {
        let r = Record::new("stall", vec![b'x'; 1024]).with_key(i.to_string());
        match aw!(producer.enqueue(r)) {
            Ok(d) => pending.push(d),
            Err(e) => outcomes.push(Err(e)),
        }
    }
    for d in pending {
        outcomes.push(delivered!(d).map(drop));
    }
    let full = outcomes
        .iter()
        .filter(|r| matches!(r, Err(Error::BufferFull(_))));
    let full = full.count();
    check(outcomes.iter().all(Result::is_err), || {
        "delivered to a silent broker".into()
    })?;
    check(full > 0, || {
        format!("no buffer-full outcome among {:?}", outcomes.first())
    })?;
    bounded(t, 60, "filling the buffer")?;
    // A batch meets the same full buffer: it waits for room up to `max_block` for the whole
    // call, then every record not queued fails with buffer-full at its index.
    let t = Instant::now();
    let batch = (0..500u32).map(|i| Record::new("stall", vec![b'y'; 1024]).with_key(i.to_string()));
    let outcomes = aw!(producer.send_all(batch))?;
    check(outcomes.len() == 500, || {
        format!("{} outcomes", outcomes.len())
    })?;
    let full = outcomes
        .errors()
        .filter(|(_, e)| matches!(e, Error::BufferFull(_)));
    let full = full.count();
    check(full > 0 && outcomes.delivered() == 0, || {
        format!(
            "batch to a silent broker: {full} buffer-full of {:?}",
            outcomes.get(0)
        )
    })?;
    check(outcomes.failed() == 500, || {
        format!("{} failed of 500", outcomes.failed())
    })?;
    bounded(t, 30, "the batch")?;
    let c = admin.counters();
    check(c.requests_in_flight <= 64, || {
        format!("in flight: {}", c.requests_in_flight)
    })?;

    server.with_cluster(|c, _| c.clear_faults())?;
    let end = Instant::now() + Duration::from_secs(30);
    while aw!(admin.describe_cluster(Target::Any)).is_err() {
        check(Instant::now() < end, || {
            "no recovery after the broker came back".into()
        })?;
        aw!(sleep(Duration::from_millis(100)));
    }
    Ok(())
}
