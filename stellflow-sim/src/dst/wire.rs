//! Checks on the bytes a client actually puts on the wire, per connection: nothing but
//! ApiVersions before the ApiVersions answer arrived, every later request within the version
//! range the broker advertised, and no more requests in flight than configured.

use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use stellflow_proto::frame::{FrameDecoder, split_request, split_response};
use stellflow_proto::messages::ApiVersionsResponse;
use stellflow_proto::{ApiKey, Reader, Wire};

/// The observer of one connection's two byte streams.
#[derive(Debug, Default)]
pub struct LinkObserver {
    up: FrameDecoder,
    up_buf: BytesMut,
    down: FrameDecoder,
    down_buf: BytesMut,
    /// Version ranges from the ApiVersions answer, once it arrived.
    negotiated: Option<BTreeMap<i16, (i16, i16)>>,
    /// Requests sent and not answered: correlation id → (api key, client timeouts at send).
    outstanding: BTreeMap<i32, (ApiKey, u64)>,
    /// Requests seen on this connection.
    pub requests: u64,
    /// Keep the bodies of requests of this API ([`LinkObserver::tapped`]).
    pub tap: Option<ApiKey>,
    /// Bodies of tapped requests, in wire order.
    pub tapped: Vec<Bytes>,
}

impl LinkObserver {
    /// An observer that keeps the bodies of `tap` requests.
    pub fn tapping(tap: Option<ApiKey>) -> Self {
        LinkObserver {
            tap,
            ..LinkObserver::default()
        }
    }

    /// Client → broker bytes, in order. `timeouts` is the client's request-timeout counter now.
    pub fn on_request_bytes(
        &mut self,
        bytes: &[u8],
        timeouts: u64,
        max_in_flight: usize,
    ) -> Result<(), (&'static str, String)> {
        self.up_buf.extend_from_slice(bytes);
        loop {
            let frame = match self.up.decode(&mut self.up_buf) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => return Err(("well-formed-requests", format!("framing: {e}"))),
            };
            self.on_request(frame, timeouts, max_in_flight)?;
        }
    }

    fn on_request(
        &mut self,
        frame: Bytes,
        timeouts: u64,
        max_in_flight: usize,
    ) -> Result<(), (&'static str, String)> {
        let (h, body) = split_request(frame)
            .map_err(|e| ("well-formed-requests", format!("request header: {e}")))?;
        self.requests += 1;
        if self.tap == Some(h.api_key) {
            self.tapped.push(body);
        }
        match &self.negotiated {
            None if h.api_key != ApiKey::API_VERSIONS => {
                return Err((
                    "api-versions-first",
                    format!(
                        "{:?} v{} (corr {}) sent before ApiVersions completed",
                        h.api_key, h.api_version, h.correlation_id
                    ),
                ));
            }
            Some(ranges) if h.api_key != ApiKey::API_VERSIONS => match ranges.get(&h.api_key.0) {
                Some((lo, hi)) if (*lo..=*hi).contains(&h.api_version) => {}
                other => {
                    return Err((
                        "negotiated-versions",
                        format!(
                            "{:?} v{} sent, broker advertised {:?}",
                            h.api_key, h.api_version, other
                        ),
                    ));
                }
            },
            _ => {}
        }
        if self
            .outstanding
            .insert(h.correlation_id, (h.api_key, timeouts))
            .is_some()
        {
            return Err((
                "unique-correlation-ids",
                format!("correlation id {} reused while in flight", h.correlation_id),
            ));
        }
        // Requests sent since the client's last timeout are certainly still in flight.
        let sure = self
            .outstanding
            .values()
            .filter(|(_, t)| *t == timeouts)
            .count();
        if sure > max_in_flight {
            return Err((
                "max-in-flight",
                format!("{sure} requests in flight on one connection, limit {max_in_flight}"),
            ));
        }
        Ok(())
    }

    /// Broker → client bytes, in order, as they are delivered to the client.
    pub fn on_response_bytes(&mut self, bytes: &[u8]) -> Result<(), (&'static str, String)> {
        self.down_buf.extend_from_slice(bytes);
        loop {
            let frame = match self.down.decode(&mut self.down_buf) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => return Err(("well-formed-responses", format!("framing: {e}"))),
            };
            let (h, body) = split_response(frame)
                .map_err(|e| ("well-formed-responses", format!("response header: {e}")))?;
            let Some((key, _)) = self.outstanding.remove(&h.correlation_id) else {
                continue; // a late answer to a request the client already gave up on
            };
            if key == ApiKey::API_VERSIONS
                && h.error_code.0 == 0
                && let Some(body) = body
                && let Ok(r) = ApiVersionsResponse::decode(&mut Reader::new(body))
            {
                self.negotiated = Some(
                    r.api_versions
                        .iter()
                        .map(|v| (v.api_key.0, (v.min_version, v.max_version)))
                        .collect(),
                );
            }
        }
    }

    /// Whether the ApiVersions answer arrived.
    pub fn negotiated(&self) -> bool {
        self.negotiated.is_some()
    }
}
