//! Checks on the bytes a client actually puts on the wire, per connection: nothing but
//! ApiVersions before the ApiVersions answer arrived, every later request within the version
//! range the broker advertised, and no more requests in flight than configured.

use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::time::Duration;
use stellflow_proto::frame::{FrameDecoder, split_request, split_response};
use stellflow_proto::messages::{ApiVersionsResponse, ProduceRequest, ProduceResponse};
use stellflow_proto::record::blob_records;
use stellflow_proto::{ApiKey, Reader, Wire};

/// A request on the wire whose answer has not arrived (the client may have given up on it).
#[derive(Debug, Clone)]
pub struct Outstanding {
    /// Its API.
    pub api: ApiKey,
    /// The client's request-timeout counter when it was written.
    pub timeouts: u64,
    /// When it was written (virtual time since the start).
    pub sent_at: Duration,
    /// Its body, for the tapped API only.
    pub body: Option<Bytes>,
}

/// The observer of one connection's two byte streams.
#[derive(Debug, Default)]
pub struct LinkObserver {
    up: FrameDecoder,
    up_buf: BytesMut,
    down: FrameDecoder,
    down_buf: BytesMut,
    /// Version ranges from the ApiVersions answer, once it arrived.
    negotiated: Option<BTreeMap<i16, (i16, i16)>>,
    /// Requests sent and not answered, by correlation id.
    outstanding: BTreeMap<i32, Outstanding>,
    /// Requests seen on this connection.
    pub requests: u64,
    /// Keep the bodies of requests of this API ([`LinkObserver::tapped`]).
    pub tap: Option<ApiKey>,
    /// Bodies of tapped requests, in wire order.
    pub tapped: Vec<Bytes>,
    /// Keep a readable line per request and response frame ([`LinkObserver::frames`]).
    pub record_frames: bool,
    /// Readable lines of the frames seen since the owner last drained them.
    pub frames: Vec<String>,
}

impl LinkObserver {
    /// An observer that keeps the bodies of `tap` requests.
    pub fn tapping(tap: Option<ApiKey>) -> Self {
        LinkObserver {
            tap,
            ..LinkObserver::default()
        }
    }

    /// Keeps readable lines of the frames seen ([`LinkObserver::frames`]) when `on`.
    pub fn recording(mut self, on: bool) -> Self {
        self.record_frames = on;
        self
    }

    /// Client → broker bytes, in order. `timeouts` is the client's request-timeout counter now.
    pub fn on_request_bytes(
        &mut self,
        bytes: &[u8],
        at: Duration,
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
            self.on_request(frame, at, timeouts, max_in_flight)?;
        }
    }

    fn on_request(
        &mut self,
        frame: Bytes,
        at: Duration,
        timeouts: u64,
        max_in_flight: usize,
    ) -> Result<(), (&'static str, String)> {
        let (h, body) = split_request(frame)
            .map_err(|e| ("well-formed-requests", format!("request header: {e}")))?;
        self.requests += 1;
        if self.record_frames {
            let mut line = format!(
                "-> {:?} v{} corr {} ({} body bytes)",
                h.api_key,
                h.api_version,
                h.correlation_id,
                body.len()
            );
            if h.api_key == ApiKey::PRODUCE
                && let Ok(r) = ProduceRequest::decode(&mut Reader::new(body.clone()))
            {
                for t in &r.topic_data {
                    for p in &t.partitions {
                        let first = p
                            .records
                            .clone()
                            .and_then(|b| blob_records(b).next())
                            .and_then(|r| r.ok())
                            .and_then(|r| r.record.value)
                            .map(|v| String::from_utf8_lossy(&v).into_owned());
                        line.push_str(&format!(
                            " [{}-{} first {:?}]",
                            t.topic.as_deref().unwrap_or("?"),
                            p.partition,
                            first
                        ));
                    }
                }
            }
            self.frames.push(line);
        }
        if h.api_key == ApiKey::FETCH {
            super::fetch_check::check_fetch_request(&body)?;
        }
        let tapped = self.tap == Some(h.api_key);
        if tapped {
            self.tapped.push(body.clone());
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
            .insert(
                h.correlation_id,
                Outstanding {
                    api: h.api_key,
                    timeouts,
                    sent_at: at,
                    body: tapped.then_some(body),
                },
            )
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
            .filter(|o| o.timeouts == timeouts)
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
            let known = self.outstanding.remove(&h.correlation_id);
            if self.record_frames {
                let mut line = format!(
                    "<- {} corr {} error {}",
                    known
                        .as_ref()
                        .map_or("late answer".to_owned(), |o| format!("{:?}", o.api)),
                    h.correlation_id,
                    h.error_code.0
                );
                if known.as_ref().is_some_and(|o| o.api == ApiKey::PRODUCE)
                    && let Some(b) = body.clone()
                    && let Ok(r) = ProduceResponse::decode(&mut Reader::new(b))
                {
                    for t in &r.responses {
                        for p in &t.partitions {
                            line.push_str(&format!(
                                " [{}-{} error {} offset {}]",
                                t.topic.as_deref().unwrap_or("?"),
                                p.partition,
                                p.error_code.0,
                                p.base_offset
                            ));
                        }
                    }
                }
                self.frames.push(line);
            }
            let Some(Outstanding { api: key, .. }) = known else {
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

    /// Requests written and not answered yet, in correlation-id order.
    pub fn outstanding(&self) -> impl Iterator<Item = &Outstanding> {
        self.outstanding.values()
    }
}
