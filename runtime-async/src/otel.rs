//! OpenTelemetry glue (the `opentelemetry` feature): the current span's context as the
//! client's [`TraceIds`], and a consumed record's `traceparent` back into an OpenTelemetry
//! `Context` the application can parent or link its processing span to.
//!
//! The context is `opentelemetry::Context`; the example makes a processing span its child
//! with `tracing-opentelemetry`.
//!
//! ```no_run
//! # use stellflow_async::{otel, ConsumerRecord};
//! # fn handle(record: &ConsumerRecord) {
//! use tracing_opentelemetry::OpenTelemetrySpanExt;
//! let span = tracing::info_span!("process", topic = %record.topic);
//! if let Some(parent) = otel::record_context(record) {
//!     let _ = span.set_parent(parent); // or span.add_link(...) to link instead
//! }
//! let _entered = span.enter();
//! // ... the record's processing is now in the producer's trace
//! # }
//! ```

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use stellflow_sansio::{ConsumerRecord, TraceIds};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The caller's current trace context: the current `tracing` span's (when a
/// tracing-opentelemetry layer records it), else the current OpenTelemetry context's;
/// `None` when neither holds a valid span context.
pub fn current() -> Option<TraceIds> {
    let span = tracing::Span::current();
    if !span.is_none()
        && let Some(ids) = trace_ids(&span.context())
    {
        return Some(ids);
    }
    trace_ids(&Context::current())
}

/// The span context of `cx` as the core's [`TraceIds`] (`None` when it is not valid).
pub fn trace_ids(cx: &Context) -> Option<TraceIds> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let ids = TraceIds::new(
        sc.trace_id().to_bytes(),
        sc.span_id().to_bytes(),
        sc.trace_flags().to_u8(),
    )?;
    let state = sc.trace_state().header();
    Some(if state.is_empty() {
        ids
    } else {
        ids.with_state(state)
    })
}

/// The remote span context of `ids` (what a record's `traceparent` names).
pub fn span_context(ids: &TraceIds) -> SpanContext {
    let state = ids
        .state
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    SpanContext::new(
        TraceId::from_bytes(ids.trace_id),
        SpanId::from_bytes(ids.span_id),
        TraceFlags::new(ids.flags),
        true,
        state,
    )
}

/// The context a consumed record carries in its W3C `traceparent` (and `tracestate`)
/// headers — what [`TracePropagation`](crate::TracePropagation) writes on the producing side — as
/// a context whose span is the producer's (remote): make the processing span its child
/// (`span.set_parent(cx)`) or link to it (`span.add_link(cx.span().span_context().clone())`).
/// `None` when the record has no valid `traceparent`.
pub fn record_context(record: &ConsumerRecord) -> Option<Context> {
    let ids = TraceIds::from_record_headers(&record.headers)?;
    Some(Context::new().with_remote_span_context(span_context(&ids)))
}
