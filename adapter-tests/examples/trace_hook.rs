//! Record-level trace propagation written as a producer hook (what the built-in
//! `TracePropagation` does): the hook writes the send's trace context into the record as a W3C
//! `traceparent` header, and a consumer on another client makes its processing span a child of
//! it. Spans get real ids from the OpenTelemetry SDK behind a tracing-opentelemetry layer;
//! runs against an in-process simulated broker.
//!
//! ```sh
//! cargo run -p stellflow-adapter-tests --features otel --example trace_hook
//! ```

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use std::time::Duration;
use stellflow_tokio::{
    ClientConfig, HeaderSink, OffsetReset, ProducerHook, ProducerRecord, Record, TRACEPARENT,
    Target, TopicPartition, TraceIds, otel,
};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// Writes `traceparent` into every record sent inside a span.
struct Traceparent;

impl ProducerHook for Traceparent {
    fn add_headers(
        &self,
        record: &ProducerRecord<'_>,
        trace: Option<&TraceIds>,
        headers: &mut HeaderSink,
    ) {
        let already = record.headers.iter().any(|(k, _)| *k == TRACEPARENT);
        if let (Some(t), false) = (trace, already) {
            headers.push(TRACEPARENT, Some(t.traceparent().as_bytes()));
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("trace_hook"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;

    let server = stellflow_sim::serve("127.0.0.1:0")?;
    let mut config = ClientConfig::new(&server.local_addr().to_string())?;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let mut producing = config.clone();
    producing.hooks.producer(Traceparent);

    let producer = stellflow_tokio::Client::connect(producing).await?;
    let created = producer
        .admin()
        .create_topic("orders", 1, Target::Any)
        .await?;
    if !created.is_ok() {
        return Err(format!("create: {created:?}").into());
    }
    let span = tracing::info_span!("checkout");
    let trace_id = span.context().span().span_context().trace_id();
    producer
        .producer()
        .send(Record::new("orders", "order-42"))
        .instrument(span)
        .await?;
    producer.close().await?;

    let consumer = stellflow_tokio::Consumer::connect(config).await?;
    consumer.assign(&[TopicPartition::new("orders", 0)])?;
    let records = loop {
        let r = consumer.poll(Duration::from_secs(5)).await?;
        if !r.is_empty() {
            break r;
        }
    };
    for record in &records {
        let span = tracing::info_span!("process", offset = record.offset);
        if let Some(parent) = otel::record_context(record) {
            span.set_parent(parent)?;
        }
        let processing = span.context().span().span_context().trace_id();
        println!(
            "sent in trace {trace_id}, processed in trace {processing}: {}",
            if processing == trace_id {
                "the same trace"
            } else {
                "a different trace"
            }
        );
    }
    consumer.client().close().await?;
    Ok(())
}
