//! A deliberately small raw client: one TCP connection, frames in and out, read timeouts, and
//! detection of "closed without a response". It knows nothing about Stellflow semantics beyond
//! the frame length prefix and the two header layouts (PROTOCOL.md §1.2, §2.1, §2.2). Frames are
//! written and read by hand so that malformed, oversize and pipelined input can be sent and a
//! close can be told apart from a timeout.

use bytes::{BufMut, Bytes, BytesMut};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use stellflow_proto::ApiKey;
use stellflow_proto::header::{RequestHeader, ResponseHeader};
use stellflow_proto::wire::{Reader, Wire};

use super::CaseResult;

/// Default read timeout: a response that does not arrive within this is a failure, not a stall.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Header fields a case may want to vary. Everything else is sent as null / 0.
#[derive(Debug, Clone)]
pub struct Hdr<'a> {
    pub api_key: i16,
    pub api_version: i16,
    pub header_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
    pub flags: i16,
}

impl<'a> Hdr<'a> {
    pub fn new(api_key: i16, correlation_id: i32, client_id: Option<&'a str>) -> Self {
        Hdr {
            api_key,
            api_version: 0,
            header_version: 2,
            correlation_id,
            client_id,
            flags: 0,
        }
    }
}

/// Appends the 14-field request header (PROTOCOL.md §2.1), encoded by the typed
/// `stellflow_proto::header::RequestHeader`; every optional string is null.
pub fn put_request_header(buf: &mut BytesMut, h: &Hdr<'_>) {
    let mut header = RequestHeader::new(ApiKey(h.api_key), h.correlation_id, h.client_id);
    header.api_version = h.api_version;
    header.header_version = h.header_version;
    header.flags = h.flags;
    header.encode(buf);
}

/// A complete request frame: length prefix (excluding itself), header, body.
pub fn request_frame(h: &Hdr<'_>, body: &[u8]) -> Bytes {
    let mut payload = BytesMut::new();
    put_request_header(&mut payload, h);
    payload.put_slice(body);
    frame(&payload)
}

/// Prefixes `payload` with its length (PROTOCOL.md §1.2: the length excludes itself).
pub fn frame(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 4);
    out.put_u32(payload.len() as u32);
    out.put_slice(payload);
    out.freeze()
}

/// One decoded response: the 12-byte header and whatever follows it.
#[derive(Debug, Clone)]
pub struct Resp {
    pub correlation_id: i32,
    pub header_version: i16,
    pub error_code: i16,
    pub throttle_time_ms: i32,
    /// The body bytes (may be empty: the empty-body rule, PROTOCOL.md §2.3).
    pub body: Bytes,
    /// The value of the frame length prefix as received.
    pub frame_length: u32,
}

impl Resp {
    /// A reader over the body.
    pub fn reader(&self) -> Reader {
        Reader::new(self.body.clone())
    }

    /// Checks the response carries the fixed header values (headerVersion 2, throttle 0) and the
    /// given error code with no body (a request-level failure, PROTOCOL.md §2.3).
    pub fn expect_header_only(&self, error_code: i16) -> CaseResult {
        self.expect_common()?;
        if self.error_code != error_code {
            return Err(format!(
                "header errorCode: expected {error_code}, got {} (corr {})",
                self.error_code, self.correlation_id
            ));
        }
        if !self.body.is_empty() {
            return Err(format!(
                "expected a header-only response (frameLength 12), got {} body bytes: {:02x?}",
                self.body.len(),
                &self.body[..self.body.len().min(32)]
            ));
        }
        if self.frame_length != 12 {
            return Err(format!(
                "header-only frameLength {} != 12",
                self.frame_length
            ));
        }
        Ok(())
    }

    /// Checks headerVersion 2, throttle 0 and header errorCode `error_code`, with a body present.
    pub fn expect_ok_body(&self, error_code: i16) -> CaseResult {
        self.expect_common()?;
        if self.error_code != error_code {
            return Err(format!(
                "header errorCode: expected {error_code}, got {} (body {} bytes)",
                self.error_code,
                self.body.len()
            ));
        }
        if self.body.is_empty() {
            return Err("expected a body after the header, got none".into());
        }
        Ok(())
    }

    fn expect_common(&self) -> CaseResult {
        if self.header_version != 2 {
            return Err(format!(
                "response headerVersion {} != 2",
                self.header_version
            ));
        }
        if self.throttle_time_ms != 0 {
            return Err(format!("throttleTimeMs {} != 0", self.throttle_time_ms));
        }
        if self.frame_length as usize != 12 + self.body.len() {
            return Err("frameLength does not match the payload".into());
        }
        Ok(())
    }
}

/// What a read produced.
#[derive(Debug)]
pub enum ReadOutcome {
    /// A complete frame.
    Frame(Resp),
    /// The peer closed the connection (EOF or reset) before a complete frame arrived.
    Closed,
}

/// One raw connection to the broker.
pub struct Conn {
    stream: TcpStream,
    next_corr: i32,
    /// The clientId sent by [`Conn::call`].
    pub client_id: Option<String>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| e.to_string())?;
        stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Conn {
            stream,
            next_corr: 1,
            client_id: Some("stellflow-conformance".to_owned()),
        })
    }

    pub fn with_client_id(mut self, client_id: Option<&str>) -> Conn {
        self.client_id = client_id.map(str::to_owned);
        self
    }

    pub fn set_read_timeout(&self, t: Duration) -> CaseResult {
        self.stream
            .set_read_timeout(Some(t))
            .map_err(|e| e.to_string())
    }

    /// Resets the connection (`SO_LINGER` zero, then close): the host sends an RST and
    /// discards whatever the broker has not received, as a client's abortive close does.
    pub fn abort(self) -> CaseResult {
        socket2::SockRef::from(&self.stream)
            .set_linger(Some(Duration::ZERO))
            .map_err(|e| format!("SO_LINGER: {e}"))
    }

    /// A fresh correlation id for this connection.
    pub fn corr(&mut self) -> i32 {
        let c = self.next_corr;
        self.next_corr = self.next_corr.wrapping_add(1);
        c
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> CaseResult {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("write failed: {e}"))
    }

    /// Writes a request with the given header and body, returning its correlation id.
    pub fn send(&mut self, h: &Hdr<'_>, body: &[u8]) -> Result<i32, String> {
        let f = request_frame(h, body);
        self.send_raw(&f)?;
        Ok(h.correlation_id)
    }

    /// Reads exactly `buf.len()` bytes; `Ok(false)` when the peer closed first.
    fn read_exact_or_closed(&mut self, buf: &mut [u8]) -> Result<bool, String> {
        let mut got = 0;
        while got < buf.len() {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => return Ok(false),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Ok(false);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(format!(
                        "read timed out after {:?} ({} of {} bytes read): no response and the connection is still open",
                        self.stream
                            .read_timeout()
                            .ok()
                            .flatten()
                            .unwrap_or_default(),
                        got,
                        buf.len()
                    ));
                }
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        Ok(true)
    }

    /// Reads one frame, or reports that the connection was closed.
    pub fn read(&mut self) -> Result<ReadOutcome, String> {
        let mut len = [0u8; 4];
        if !self.read_exact_or_closed(&mut len)? {
            return Ok(ReadOutcome::Closed);
        }
        let frame_length = u32::from_be_bytes(len);
        if frame_length < 12 {
            return Err(format!(
                "response frameLength {frame_length} is shorter than the 12-byte header"
            ));
        }
        if frame_length > 1 << 30 {
            return Err(format!("absurd response frameLength {frame_length}"));
        }
        let mut payload = vec![0u8; frame_length as usize];
        if !self.read_exact_or_closed(&mut payload)? {
            return Err("connection closed in the middle of a response frame".into());
        }
        let mut r = Reader::new(Bytes::from(payload));
        let header = ResponseHeader::decode(&mut r).map_err(|e| e.to_string())?;
        Ok(ReadOutcome::Frame(Resp {
            correlation_id: header.correlation_id,
            header_version: header.header_version,
            error_code: header.error_code.0,
            throttle_time_ms: header.throttle_time_ms,
            body: r.into_rest(),
            frame_length,
        }))
    }

    /// Reads one frame; a close is an error.
    pub fn recv(&mut self) -> Result<Resp, String> {
        match self.read()? {
            ReadOutcome::Frame(r) => Ok(r),
            ReadOutcome::Closed => Err("connection closed by the broker, no response".into()),
        }
    }

    /// Sends one request and reads its response, checking the correlation id.
    pub fn call_with(&mut self, h: &Hdr<'_>, body: &[u8]) -> Result<Resp, String> {
        self.send(h, body)?;
        let r = self.recv()?;
        if r.correlation_id != h.correlation_id {
            return Err(format!(
                "correlationId {} in response, {} sent",
                r.correlation_id, h.correlation_id
            ));
        }
        Ok(r)
    }

    /// Sends a v0 request for `api_key` with this connection's clientId.
    pub fn call(&mut self, api_key: i16, body: &[u8]) -> Result<Resp, String> {
        self.call_v(api_key, 0, body)
    }

    /// Sends a request with an explicit apiVersion.
    pub fn call_v(&mut self, api_key: i16, api_version: i16, body: &[u8]) -> Result<Resp, String> {
        let corr = self.corr();
        let cid = self.client_id.clone();
        let mut h = Hdr::new(api_key, corr, cid.as_deref());
        h.api_version = api_version;
        self.call_with(&h, body)
    }

    /// Expects the broker to close the connection without sending any response.
    pub fn expect_closed(&mut self) -> CaseResult {
        match self.read()? {
            ReadOutcome::Closed => Ok(()),
            ReadOutcome::Frame(r) => Err(format!(
                "expected the connection to be closed without a response, got a response (corr {}, error {}, {} body bytes)",
                r.correlation_id,
                r.error_code,
                r.body.len()
            )),
        }
    }
}
