//! Trace context the application hands in: [`TraceIds`], a W3C trace context in binary form,
//! its `traceparent` text form, and how it reaches request headers and records.
//!
//! The core reads no ambient context (no thread-local, no global): a driver that knows the
//! application's current span (the adapters, with their `opentelemetry` feature) passes its ids
//! in with the command, through [`crate::DriverExt::with_trace`] (produce, commits, admin and raw
//! requests) and [`crate::DriverExt::set_fetch_trace`] (the Fetch requests a poll leads to). The
//! request header then carries them in its `traceId`/`spanId`/`traceFlags` fields
//! (PROTOCOL.md §2.1); a record carries them only when a hook writes them into its headers
//! ([`crate::TracePropagation`] writes `traceparent` and `tracestate`).

use crate::request::TraceContext;
use std::fmt::Write as _;
use std::sync::Arc;

/// The W3C `traceparent` record header's key.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C `tracestate` record header's key.
pub const TRACESTATE: &str = "tracestate";

/// A span's trace context in binary form: trace id, span id, trace flags and the optional
/// `tracestate` text. Cheap to clone (the state is shared). Ids of all zeros are invalid in
/// W3C trace context; [`TraceIds::new`] refuses them.
///
/// ```
/// # use stellflow_sansio::TraceIds;
/// let t = TraceIds::parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
///     .unwrap();
/// assert!(t.sampled());
/// assert_eq!(t.traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceIds {
    /// The 16-byte trace id.
    pub trace_id: [u8; 16],
    /// The 8-byte span id.
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
    /// The W3C `tracestate` (vendor key/value pairs), when there is one.
    pub state: Option<Arc<str>>,
}

impl TraceIds {
    /// Ids with these parts and no `tracestate`; `None` when either id is all zeros (an
    /// invalid context, which W3C says to ignore).
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> Option<Self> {
        (trace_id != [0; 16] && span_id != [0; 8]).then_some(TraceIds {
            trace_id,
            span_id,
            flags,
            state: None,
        })
    }

    /// Whether the sampled flag is set.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as 32 lowercase hex digits (the request header's `traceId`).
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The span id as 16 lowercase hex digits (the request header's `spanId`).
    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The W3C `traceparent` value: `00-<trace id>-<span id>-<flags>` (55 characters).
    pub fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.span_id);
        s.push('-');
        push_hex(&mut s, &[self.flags]);
        s
    }

    /// Parses a W3C `traceparent` value (version 00, or a later version's first four
    /// fields as the spec asks); `None` when it is malformed or its ids are all zeros.
    pub fn parse_traceparent(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?.trim();
        let mut parts = text.split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version.eq_ignore_ascii_case("ff") {
            return None;
        }
        // Version 00 has exactly four fields; later versions may append more.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        let mut f = [0u8; 1];
        unhex(trace, &mut trace_id)?;
        unhex(span, &mut span_id)?;
        unhex(flags, &mut f)?;
        TraceIds::new(trace_id, span_id, f[0])
    }

    /// The context a consumed record carries in its `traceparent` (and `tracestate`)
    /// headers, as [`crate::TracePropagation`] writes them: `None` when it has no valid
    /// `traceparent`.
    pub fn from_record_headers(headers: &stellflow_proto::record::Headers) -> Option<Self> {
        let mut ids = None;
        let mut state = None;
        for (k, v) in headers.iter_raw() {
            match k {
                Some(k) if k.eq_ignore_ascii_case(TRACEPARENT.as_bytes()) => {
                    ids = v.and_then(TraceIds::parse_traceparent);
                }
                Some(k) if k.eq_ignore_ascii_case(TRACESTATE.as_bytes()) => {
                    state = v.and_then(|v| std::str::from_utf8(v).ok()).map(Arc::from);
                }
                _ => {}
            }
        }
        ids.map(|mut t: TraceIds| {
            t.state = state.filter(|s: &Arc<str>| !s.is_empty());
            t
        })
    }

    /// Sets the `tracestate`.
    pub fn with_state(mut self, state: impl Into<Arc<str>>) -> Self {
        let state = state.into();
        self.state = (!state.is_empty()).then_some(state);
        self
    }
}

impl From<&TraceIds> for TraceContext {
    /// The request-header form: hex ids and the flags.
    fn from(t: &TraceIds) -> Self {
        TraceContext {
            trace_id: Some(t.trace_id_hex()),
            span_id: Some(t.span_id_hex()),
            trace_flags: t.flags as i8,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
}

/// Decodes exactly `out.len() * 2` hex digits into `out`.
fn unhex(text: &str, out: &mut [u8]) -> Option<()> {
    let digits = text.as_bytes();
    if digits.len() != out.len() * 2 {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let [hi, lo] = pair else { return None };
        *o = (nibble(*hi)? << 4) | nibble(*lo)?;
    }
    Some(())
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trip_and_refusals() {
        let t = TraceIds::new([0xab; 16], [0x01; 8], 1).unwrap();
        let text = t.traceparent();
        assert_eq!(text.len(), 55);
        assert_eq!(TraceIds::parse_traceparent(text.as_bytes()), Some(t));
        for bad in [
            "",
            "00-abc-def-01",
            "00-00000000000000000000000000000000-0101010101010101-01",
            "00-abababababababababababababababab-0000000000000000-01",
            "ff-abababababababababababababababab-0101010101010101-01",
            "00-abababababababababababababababab-0101010101010101-01-extra",
            "00-zzabababababababababababababababab-0101010101010101-01",
        ] {
            assert_eq!(TraceIds::parse_traceparent(bad.as_bytes()), None, "{bad}");
        }
        // A later version may append fields.
        let later = "01-abababababababababababababababab-0101010101010101-01-x";
        assert!(TraceIds::parse_traceparent(later.as_bytes()).is_some());
    }

    #[test]
    fn request_header_form() {
        let t = TraceIds::new([0x0f; 16], [0xa0; 8], 1).unwrap();
        let c = TraceContext::from(&t);
        assert_eq!(c.trace_id.as_deref(), Some("0f".repeat(16).as_str()));
        assert_eq!(c.span_id.as_deref(), Some("a0".repeat(8).as_str()));
        assert_eq!(c.trace_flags, 1);
    }
}
