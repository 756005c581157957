//! Request-side types shared by every command: where a request goes ([`Target`]), its per-request
//! options ([`RequestOptions`]), its id ([`RequestId`]) and the raw answer ([`RawResponse`]).

use crate::address::BrokerAddress;
use bytes::Bytes;
use std::time::Duration;
use stellflow_proto::ApiKey;
use stellflow_proto::header::ResponseHeader;

/// The largest request frame the server accepts, length prefix included (PROTOCOL.md §1.2).
pub(crate) const MAX_REQUEST_FRAME: usize = 67_108_864;

/// Identifies one command (a raw request or an admin operation) in the events that answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Identifies one connection attempt. A reconnect gets a new id, so inputs for an old socket are
/// recognised and ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// Where to send a request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum Target {
    /// Any broker: the least loaded ready connection, else a bootstrap address.
    #[default]
    Any,
    /// The broker with this id (waits for metadata to learn its address, up to the deadline).
    Broker(i32),
    /// The broker at this address (e.g. a bootstrap address).
    Address(BrokerAddress),
}

/// W3C trace context sent in the request header (logging only on today's server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceId`: 32 lowercase hex characters.
    pub trace_id: Option<String>,
    /// `spanId`: 16 hex characters.
    pub span_id: Option<String>,
    /// `traceFlags`.
    pub trace_flags: i8,
}

/// Per-request options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// Trace id, span id and trace flags for this request.
    pub trace: Option<TraceContext>,
    /// Overrides the configured request timeout.
    pub timeout: Option<Duration>,
}

impl RequestOptions {
    /// Options with a trace context.
    pub fn traced(trace_id: &str, span_id: &str, trace_flags: i8) -> Self {
        RequestOptions {
            trace: Some(TraceContext {
                trace_id: Some(trace_id.to_owned()),
                span_id: Some(span_id.to_owned()),
                trace_flags,
            }),
            timeout: None,
        }
    }
}

/// The answer to a raw [`crate::Client::request`]: the response header and the body bytes, not
/// decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// The API called.
    pub api_key: ApiKey,
    /// The version sent.
    pub api_version: i16,
    /// The 12-byte response header (request-level error code included).
    pub header: ResponseHeader,
    /// The body; `None` when the broker sent the header alone (a request-level failure).
    pub body: Option<Bytes>,
    /// The broker that answered.
    pub address: BrokerAddress,
    /// Its id, when metadata has told us.
    pub broker_id: Option<i32>,
}
