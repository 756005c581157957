//! The trace context of an application call: what a handle reads from the caller's current
//! span (with the `opentelemetry` feature) and hands to the core with the command.
//!
//! Without the feature [`current`] is a constant `None` and the calls that pass it on are
//! compiled out of nothing more than a store of `None`: no lookup, no allocation.

use stellflow_sansio::TraceIds;

/// The caller's current trace context: the current `tracing` span's OpenTelemetry context
/// (tracing-opentelemetry), else the current OpenTelemetry context; `None` outside a span,
/// or always without the `opentelemetry` feature.
#[inline]
pub(crate) fn current() -> Option<TraceIds> {
    #[cfg(feature = "opentelemetry")]
    {
        crate::otel::current()
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        None
    }
}
