//! The client's trace methods: the context of the commands being made and of the Fetch
//! requests (the types are in [`crate::trace`]).

use super::Client;
use crate::request::TraceContext;
use crate::trace::TraceIds;

impl Client {
    /// The trace context of the application call the commands after this one belong to,
    /// until the next call (`None`: none). A driver that knows the caller's current span (the
    /// adapters, with their `opentelemetry` feature) sets it around each command; the core
    /// itself never looks for one.
    ///
    /// It goes into the request header's `traceId`, `spanId` and `traceFlags`
    /// (PROTOCOL.md §2.1) of what those commands send:
    ///
    /// * a record ([`crate::Client::produce`]) keeps it until its batch is sent; a Produce
    ///   request carries the context of its **first** batch that has one, and a batch that of
    ///   its first record that has one (a request carries one context, and several spans'
    ///   records may share it; retries keep it);
    /// * an OffsetCommit carries its commit command's ([`crate::Client::commit`] and the
    ///   other commit calls; auto-commits and the close commit carry none);
    /// * admin commands' requests and raw requests carry it unless their
    ///   [`crate::RequestOptions::trace`] names one.
    ///
    /// Producer hooks see it too ([`crate::ProducerHook::add_headers`]): with
    /// [`crate::TracePropagation`] registered, records carry it in a `traceparent` header.
    pub fn set_trace(&mut self, trace: Option<TraceIds>) {
        self.shared.trace = trace;
    }

    /// The trace context the Fetch requests sent from now on carry (`None`: none). Fetching
    /// runs ahead of the application's polls, so no Fetch belongs to one poll; the adapters
    /// call this on every poll with the poll's span, so a Fetch carries the context of the
    /// latest poll made before it was sent.
    pub fn set_fetch_trace(&mut self, trace: Option<TraceIds>) {
        let c = &mut self.consumer;
        if c.fetch_trace != trace {
            c.fetch_options.trace = trace.as_ref().map(TraceContext::from);
            c.fetch_trace = trace;
        }
    }
}
