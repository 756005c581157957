//! The `opentelemetry` feature end to end, on tokio over loopback sockets: requests a handle
//! sends inside a span carry that span's ids in their request headers (the sim records every
//! header it receives; seeks included: the ListOffsets or OffsetFetch that resolves one), and a record produced inside a span with `TracePropagation` is read on
//! another client as a context of the same trace. On smol and blocking (the same handles'
//! code underneath), a Produce and a Fetch made inside a span carry its ids too.
//!
//! Run: `cargo test -p stellflow-adapter-tests --features otel --test otel`. With
//! `STELLFLOW_BROKER=host:port` it runs against that (real) broker instead: the record-level
//! propagation is checked the same way, the request headers cannot be (the real server neither
//! echoes nor logs them at its default level; the conformance case `trace_fields_accepted`
//! shows it accepts them).

use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use std::time::{Duration, Instant};
use stellflow_adapter_tests::{R, check, config, sim};
use stellflow_proto::header::RequestHeader;
use stellflow_sansio::ApiKey;
use stellflow_tokio as sf;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// Spans get real OpenTelemetry ids: an SDK tracer provider behind a tracing-opentelemetry
/// layer (nothing is exported).
fn install_tracing() {
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let tracer = provider.tracer("stellflow-otel-test");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
    // The tests of this file install the same subscriber: whichever comes first is the global one.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

fn span_context(span: &tracing::Span) -> SpanContext {
    span.context().span().span_context().clone()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `h` carries `sc`'s trace id, span id and flags.
fn carries(h: &RequestHeader, sc: &SpanContext) -> bool {
    let s = |v: &stellflow_sansio::NString| v.as_ref().map(|v| v.to_string());
    s(&h.trace_id) == Some(hex(&sc.trace_id().to_bytes()))
        && s(&h.span_id) == Some(hex(&sc.span_id().to_bytes()))
        && h.trace_flags as u8 == sc.trace_flags().to_u8()
}

#[test]
fn spans_reach_request_headers_and_records() -> R<()> {
    install_tracing();
    let server = sim()?;
    server.with_cluster(|c, _| c.record_headers(true))?;
    let real = std::env::var("STELLFLOW_BROKER").ok();
    let config = || -> R<sf::ClientConfig> {
        let mut c = config(&server)?;
        if let Some(addr) = &real {
            c.bootstrap = stellflow_sansio::parse_bootstrap(addr)?;
        }
        Ok(c)
    };
    let topic = match &real {
        Some(_) => format!("traced-{}", std::process::id()),
        None => "traced".to_owned(),
    };
    let topic = topic.as_str();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut pcfg = config()?;
        pcfg.hooks.producer(sf::TracePropagation);
        let producer = sf::Client::connect(pcfg).await?;

        let admin_span = tracing::info_span!("create-topic");
        let admin_sc = span_context(&admin_span);
        check(admin_sc.is_valid(), || {
            "the SDK gave the span no ids".into()
        })?;
        let created = producer
            .admin()
            .create_topic(topic, 1, sf::Target::Any)
            .instrument(admin_span)
            .await?;
        check(created.is_ok(), || format!("create: {created:?}"))?;

        let send_span = tracing::info_span!("send");
        let send_sc = span_context(&send_span);
        producer
            .producer()
            .send(sf::Record::new(topic, "hello"))
            .instrument(send_span)
            .await?;
        // A record sent outside any span: its Produce carries no trace.
        producer
            .producer()
            .send(sf::Record::new(topic, "plain"))
            .await?;

        // Another client reads it, polling inside a span, then commits inside another.
        let mut ccfg = config()?;
        ccfg.consumer.group_id = Some("traced-g".into());
        ccfg.consumer.enable_auto_commit = false;
        let consumer = sf::Consumer::connect(ccfg).await?;
        consumer.assign(&[sf::TopicPartition::new(topic, 0)])?;
        let poll_span = tracing::info_span!("poll");
        let poll_sc = span_context(&poll_span);
        let records = async {
            let end = Instant::now() + Duration::from_secs(20);
            let mut got = Vec::new();
            while got.len() < 2 && Instant::now() < end {
                got.extend(consumer.poll(Duration::from_millis(200)).await?);
            }
            Ok::<_, sf::Error>(got)
        }
        .instrument(poll_span)
        .await?;
        check(records.len() == 2, || format!("{} records", records.len()))?;
        let commit_span = tracing::info_span!("commit");
        let commit_sc = span_context(&commit_span);
        consumer.commit_sync().instrument(commit_span).await?;

        // Seeks inside a span: the ListOffsets that resolves `Beginning` and the OffsetFetch
        // that resolves `Committed` carry that span's ids (the call does not wait for them).
        let tp = sf::TopicPartition::new(topic, 0);
        let resolved = || async {
            let end = Instant::now() + Duration::from_secs(20);
            while consumer.position(&tp).is_none() && Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            check(consumer.position(&tp).is_some(), || {
                "a seek never resolved".into()
            })
        };
        let seek_span = tracing::info_span!("seek-beginning");
        let seek_sc = span_context(&seek_span);
        consumer
            .seek(&tp, sf::SeekTo::Beginning)
            .instrument(seek_span)
            .await?;
        resolved().await?;
        let seek_committed_span = tracing::info_span!("seek-committed");
        let seek_committed_sc = span_context(&seek_committed_span);
        consumer
            .seek(&tp, sf::SeekTo::Committed)
            .instrument(seek_committed_span)
            .await?;
        resolved().await?;

        // The record carries the producer's traceparent: the same trace, the send span.
        let cx =
            sf::otel::record_context(&records[0]).ok_or("the traced record has no traceparent")?;
        let got = cx.span().span_context().clone();
        check(got.trace_id() == send_sc.trace_id(), || {
            format!("record trace {} != {}", got.trace_id(), send_sc.trace_id())
        })?;
        check(
            got.span_id() == send_sc.span_id() && got.is_remote(),
            || format!("record span {:?}", got),
        )?;
        check(sf::otel::record_context(&records[1]).is_none(), || {
            "the untraced record has a traceparent".into()
        })?;

        if real.is_some() {
            consumer.client().close().await?;
            producer.close().await?;
            return Ok(()); // the real broker shows no headers
        }
        let headers: Vec<RequestHeader> = server
            .with_cluster(|c, _| c.take_headers())?
            .into_iter()
            .map(|(_, h)| h)
            .collect();
        let of = |key: ApiKey| headers.iter().filter(move |h| h.api_key == key);
        check(
            of(ApiKey::CREATE_TOPIC).any(|h| carries(h, &admin_sc)),
            || "CreateTopic without the admin span's ids".into(),
        )?;
        let produces: Vec<_> = of(ApiKey::PRODUCE).collect();
        check(produces.iter().any(|h| carries(h, &send_sc)), || {
            format!("no Produce with the send span's ids: {produces:?}")
        })?;
        check(produces.iter().any(|h| h.trace_id.is_none()), || {
            "the untraced Produce carries a trace".into()
        })?;
        check(of(ApiKey::FETCH).any(|h| carries(h, &poll_sc)), || {
            "no Fetch with the poll span's ids".into()
        })?;
        check(
            of(ApiKey::OFFSET_COMMIT).any(|h| carries(h, &commit_sc)),
            || "OffsetCommit without the commit span's ids".into(),
        )?;
        let list_offsets: Vec<_> = of(ApiKey::LIST_OFFSETS).collect();
        check(list_offsets.iter().any(|h| carries(h, &seek_sc)), || {
            format!("no ListOffsets with the seek span's ids: {list_offsets:?}")
        })?;
        // The consumer's own start (assign, no seek) carries none.
        check(list_offsets.iter().any(|h| h.trace_id.is_none()), || {
            "the ListOffsets of the start without a seek carries a trace".into()
        })?;
        check(
            of(ApiKey::OFFSET_FETCH).any(|h| carries(h, &seek_committed_sc)),
            || "no OffsetFetch with the seek-to-committed span's ids".into(),
        )?;
        // Requests of the client's own (metadata) carry none.
        check(of(ApiKey::METADATA).all(|h| h.trace_id.is_none()), || {
            "a metadata request carries a trace".into()
        })?;
        consumer.client().close().await?;
        producer.close().await?;
        Ok(())
    })
}

/// The Produce of a record sent inside a span and the Fetch of a poll inside another carry
/// their spans' ids, on smol (`.instrument`) and on blocking (the span entered on the calling
/// thread).
///
/// Fetching runs ahead of polls, so the Fetch that brought the record may have gone out before
/// the first poll set the poll's context; the test polls inside the span until a Fetch sent
/// since then shows up at the sim (or a deadline passes, and the test fails).
#[test]
fn smol_and_blocking_requests_carry_the_span() -> R<()> {
    install_tracing();
    let headers_of = |server: &stellflow_sim::SimServer| -> R<Vec<RequestHeader>> {
        let taken = server.with_cluster(|c, _| c.take_headers())?;
        Ok(taken.into_iter().map(|(_, h)| h).collect())
    };
    let fetch_with = |headers: &[RequestHeader], poll: &SpanContext| {
        headers
            .iter()
            .any(|h| h.api_key == ApiKey::FETCH && carries(h, poll))
    };
    let expect = |headers: &[RequestHeader], send: &SpanContext, poll: &SpanContext, who| {
        check(
            headers
                .iter()
                .any(|h| h.api_key == ApiKey::PRODUCE && carries(h, send)),
            || format!("{who}: no Produce with the send span's ids"),
        )?;
        check(fetch_with(headers, poll), || {
            format!("{who}: no Fetch with the poll span's ids")
        })
    };
    let deadline = || Instant::now() + Duration::from_secs(10);

    // smol
    let server = sim()?;
    server.with_cluster(|c, _| c.record_headers(true))?;
    let (send_span, poll_span) = (tracing::info_span!("send"), tracing::info_span!("poll"));
    let (send_sc, poll_sc) = (span_context(&send_span), span_context(&poll_span));
    let mut headers = Vec::new();
    smol::block_on(async {
        use stellflow_smol as s;
        let client = s::Client::connect(config(&server)?).await?;
        client
            .admin()
            .create_topic("traced", 1, s::Target::Any)
            .await?;
        let record = s::Record::new("traced", "hello");
        client.producer().send(record).instrument(send_span).await?;
        let consumer = client.consumer();
        consumer.assign(&[s::TopicPartition::new("traced", 0)])?;
        let got = consumer
            .poll(Duration::from_secs(10))
            .instrument(poll_span.clone())
            .await?;
        check(got.len() == 1, || format!("smol: {} records", got.len()))?;
        let end = deadline();
        while !fetch_with(&headers, &poll_sc) && Instant::now() < end {
            let more = consumer.poll(Duration::from_millis(100));
            more.instrument(poll_span.clone()).await?;
            headers.extend(headers_of(&server)?);
        }
        client.close().await?;
        Ok::<_, stellflow_adapter_tests::BoxError>(())
    })?;
    headers.extend(headers_of(&server)?);
    expect(&headers, &send_sc, &poll_sc, "smol")?;

    // blocking
    use stellflow_blocking as b;
    let server = sim()?;
    server.with_cluster(|c, _| c.record_headers(true))?;
    let (send_span, poll_span) = (tracing::info_span!("send"), tracing::info_span!("poll"));
    let (send_sc, poll_sc) = (span_context(&send_span), span_context(&poll_span));
    let mut headers = Vec::new();
    let client = b::Client::connect(config(&server)?)?;
    client.admin().create_topic("traced", 1, b::Target::Any)?;
    send_span.in_scope(|| client.producer().send(b::Record::new("traced", "hello")))?;
    let consumer = client.consumer();
    consumer.assign(&[b::TopicPartition::new("traced", 0)])?;
    let got = poll_span.in_scope(|| consumer.poll(Duration::from_secs(10)))?;
    check(got.len() == 1, || {
        format!("blocking: {} records", got.len())
    })?;
    let end = deadline();
    while !fetch_with(&headers, &poll_sc) && Instant::now() < end {
        poll_span.in_scope(|| consumer.poll(Duration::from_millis(100)))?;
        headers.extend(headers_of(&server)?);
    }
    client.close()?;
    headers.extend(headers_of(&server)?);
    expect(&headers, &send_sc, &poll_sc, "blocking")
}
