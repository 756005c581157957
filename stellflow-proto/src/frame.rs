//! Length-prefixed frames: an incremental decoder, one-pass encoders and payload splitters
//! (PROTOCOL.md §1.2, §2.3).
//!
//! A frame is an `int32` length (read **unsigned**, not counting itself) followed by that many
//! bytes: a request header and body, or a response header and an optional body.
//!
//! ```
//! use bytes::BytesMut;
//! use stellflow_proto::frame::{encode_request, split_request, FrameDecoder};
//! use stellflow_proto::header::RequestHeader;
//! use stellflow_proto::messages::{HeartbeatRequest, Request, RequestBody};
//!
//! let mut buf = BytesMut::new();
//! let header = RequestHeader::new(HeartbeatRequest::API_KEY, 7, Some("app"));
//! encode_request(&mut buf, &header, &HeartbeatRequest::default());
//!
//! let mut decoder = FrameDecoder::new();
//! let payload = decoder.decode(&mut buf).expect("ok").expect("one whole frame");
//! let (decoded, body) = split_request(payload).expect("ok");
//! assert_eq!(decoded, header);
//! let body = RequestBody::decode(decoded.api_key, decoded.api_version, body).expect("ok");
//! assert_eq!(body, RequestBody::Heartbeat(HeartbeatRequest::default()));
//! ```

use crate::api_key::ApiKey;
use crate::header::{RequestHeader, ResponseHeader};
use crate::messages::{EncodeBody, RequestBody};
use crate::wire::{DecodeError, Reader, SharedPiece, Wire};
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// The whole length, prefix included, of the frame `buf` starts with, once its length prefix
/// is in (`None` before).
pub fn frame_length(buf: &[u8]) -> Option<usize> {
    let prefix: [u8; LENGTH_PREFIX_LEN] = buf.get(..LENGTH_PREFIX_LEN)?.try_into().ok()?;
    Some((u32::from_be_bytes(prefix) as usize).saturating_add(LENGTH_PREFIX_LEN))
}

/// How many leading bytes of `buf`, which starts at a frame boundary, are whole frames, and
/// the whole length of the frame after them once its length prefix is in. A reader that
/// wants each frame in an allocation of its own sizes it from this; the length is the peer's
/// word, so bound it before allocating.
pub fn whole_frames(buf: &[u8]) -> (usize, Option<usize>) {
    let mut at = 0;
    loop {
        let Some(total) = buf.get(at..).and_then(frame_length) else {
            return (at, None);
        };
        if buf.len() - at < total {
            return (at, Some(total));
        }
        at += total;
    }
}

/// The server's default frame limit, **including** the 4-byte prefix (64 MiB): the largest
/// accepted frame length is `67_108_860`.
pub const DEFAULT_MAX_FRAME_LENGTH: usize = 67_108_864;

/// Why a frame or its header could not be read. Every variant means the byte stream cannot be
/// trusted any more: close the connection (the server does the same, without a response).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix announces a frame larger than the limit. Close the connection; if the
    /// peer is legitimate (e.g. a Fetch answer over many partitions), raise the limit with
    /// [`FrameDecoder::with_max_frame_length`] or ask for less data per request.
    #[error(
        "frame length {length} (+4 prefix bytes) exceeds the limit of {max} bytes; close the connection or raise the limit"
    )]
    TooLong {
        /// The declared length, not counting the prefix.
        length: u32,
        /// The configured limit, counting the prefix.
        max: usize,
    },
    /// The request header is truncated or malformed. Close the connection.
    #[error("malformed request header: {0}; close the connection")]
    RequestHeader(#[source] DecodeError),
    /// The response is shorter than the 12-byte header. Close the connection and fail the
    /// requests in flight on it.
    #[error("malformed response header: {0}; close the connection")]
    ResponseHeader(#[source] DecodeError),
    /// A request body does not match its API's layout. The server closes the connection.
    #[error("malformed {api_key} v{api_version} request body: {source}; close the connection")]
    RequestBody {
        /// The API from the header.
        api_key: ApiKey,
        /// The version from the header.
        api_version: i16,
        /// What is wrong.
        #[source]
        source: DecodeError,
    },
}

/// Splits a byte stream into frame payloads.
///
/// Feed it everything read from the socket (one [`BytesMut`] per connection) and call
/// [`decode`](Self::decode) until it returns `Ok(None)`. It handles frames split at any byte and
/// many frames per read, returns each payload as a zero-copy [`Bytes`], and rejects an oversize
/// length before allocating anything for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameDecoder {
    max_frame_length: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A decoder with the server's default limit ([`DEFAULT_MAX_FRAME_LENGTH`]).
    pub fn new() -> Self {
        FrameDecoder {
            max_frame_length: DEFAULT_MAX_FRAME_LENGTH,
        }
    }

    /// A decoder that rejects frames whose length plus the 4-byte prefix exceeds `max`.
    pub fn with_max_frame_length(max: usize) -> Self {
        FrameDecoder {
            max_frame_length: max,
        }
    }

    /// The limit, counting the 4-byte prefix.
    pub fn max_frame_length(&self) -> usize {
        self.max_frame_length
    }

    /// Takes the next complete frame's payload (without the length prefix) off the front of
    /// `buf`. `Ok(None)` means more bytes are needed; `buf` then keeps what it has and may have
    /// reserved room for the rest of the frame (never beyond the limit).
    ///
    /// # Errors
    /// [`FrameError::TooLong`] when the length is over the limit; close the connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(total) = frame_length(buf) else {
            return Ok(None);
        };
        let length = total - LENGTH_PREFIX_LEN;
        if total > self.max_frame_length {
            return Err(FrameError::TooLong {
                length: u32::try_from(length).unwrap_or(u32::MAX),
                max: self.max_frame_length,
            });
        }
        if buf.len() < total {
            // Bounded by the limit checked above.
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        buf.advance(LENGTH_PREFIX_LEN);
        Ok(Some(buf.split_to(length).freeze()))
    }
}

/// Appends one request frame (length, header, body) to `buf` in one pass and returns the frame
/// size including the prefix.
///
/// The caller keeps `header.api_key` consistent with the body; [`Request::API_KEY`] names it
/// for typed bodies.
///
/// [`Request::API_KEY`]: crate::messages::Request::API_KEY
pub fn encode_request<B: EncodeBody + ?Sized>(
    buf: &mut BytesMut,
    header: &RequestHeader,
    body: &B,
) -> usize {
    write_frame(buf, |buf| {
        header.encode(buf);
        body.encode_body(buf);
    })
}

/// Appends one request frame as [`encode_request`] does, except that Produce record blobs of
/// `min_shared` bytes or more are left out of `buf` and pushed to `shared` with their place
/// (see [`SharedPiece`]): the frame is `buf`'s new bytes with each piece inserted at its
/// `at`. Returns the frame size including the prefix and the pieces.
///
/// ```
/// use bytes::{Bytes, BytesMut};
/// use stellflow_proto::frame::{encode_request, encode_request_sharing};
/// use stellflow_proto::header::RequestHeader;
/// use stellflow_proto::messages::*;
///
/// let blob = Bytes::from(vec![7u8; 100_000]);
/// let body = RequestBody::Produce(ProduceRequest {
///     transactional_id: None,
///     acks: 1,
///     timeout_ms: 1000,
///     topic_data: vec![ProduceTopicData {
///         topic: Some("t".into()),
///         partitions: vec![ProducePartitionData { partition: 0, records: Some(blob.clone()) }],
///     }],
/// });
/// let header = RequestHeader::new(ProduceRequest::API_KEY, 1, Some("app"));
/// let (mut buf, mut shared) = (BytesMut::new(), Vec::new());
/// let n = encode_request_sharing(&mut buf, &header, &body, 64 * 1024, &mut shared);
/// assert_eq!(shared.len(), 1);
/// assert_eq!(n, buf.len() + blob.len());
/// // Put back together, it is the frame `encode_request` writes.
/// let mut whole = BytesMut::new();
/// whole.extend_from_slice(&buf[..shared[0].at]);
/// whole.extend_from_slice(&shared[0].bytes);
/// whole.extend_from_slice(&buf[shared[0].at..]);
/// let mut copied = BytesMut::new();
/// encode_request(&mut copied, &header, &body);
/// assert_eq!(whole, copied);
/// ```
pub fn encode_request_sharing(
    buf: &mut BytesMut,
    header: &RequestHeader,
    body: &RequestBody,
    min_shared: usize,
    shared: &mut Vec<SharedPiece>,
) -> usize {
    let before = shared.len();
    write_frame_with(buf, |buf| {
        header.encode(buf);
        body.encode_sharing(buf, min_shared, shared);
        let pieces = shared.get(before..).unwrap_or_default();
        pieces.iter().map(|p| p.bytes.len()).sum()
    })
}

/// Appends one response frame to `buf` in one pass: the header, then the body if there is
/// one (`None` gives a 12-byte header-only frame, the server's request-level error answer).
/// Returns the frame size including the prefix.
pub fn encode_response<B: EncodeBody + ?Sized>(
    buf: &mut BytesMut,
    header: &ResponseHeader,
    body: Option<&B>,
) -> usize {
    write_frame(buf, |buf| {
        header.encode(buf);
        if let Some(body) = body {
            body.encode_body(buf);
        }
    })
}

/// Appends a header-only response frame (16 bytes): how the server answers a request-level
/// error. Same as [`encode_response`] with `None`, without naming a body type.
pub fn encode_response_header_only(buf: &mut BytesMut, header: &ResponseHeader) -> usize {
    encode_response::<RequestBody>(buf, header, None)
}

/// Writes a length placeholder, the payload, then patches the length.
fn write_frame(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut)) -> usize {
    write_frame_with(buf, |buf| {
        payload(buf);
        0
    })
}

/// [`write_frame`] for a payload that returns how many of its bytes it left out of `buf`
/// (see [`encode_request_sharing`]); the frame size counts them.
fn write_frame_with(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut) -> usize) -> usize {
    let start = buf.len();
    buf.put_u32(0);
    let left_out = payload(buf);
    let total = buf.len() - start + left_out;
    let length = u32::try_from(total - LENGTH_PREFIX_LEN).unwrap_or(u32::MAX);
    if let Some(prefix) = buf.get_mut(start..start + LENGTH_PREFIX_LEN) {
        prefix.copy_from_slice(&length.to_be_bytes());
    }
    total
}

/// Splits a request payload (a frame without its length) into the header and the body bytes.
///
/// # Errors
/// [`FrameError::RequestHeader`] when the header is truncated; close the connection.
pub fn split_request(payload: Bytes) -> Result<(RequestHeader, Bytes), FrameError> {
    let mut r = Reader::new(payload);
    let header = RequestHeader::decode(&mut r).map_err(FrameError::RequestHeader)?;
    Ok((header, r.into_rest()))
}

/// Splits a request payload and decodes its body the way the server does (unknown keys and
/// versions other than 0 give [`RequestBody::Opaque`]).
///
/// # Errors
/// [`FrameError::RequestHeader`] or [`FrameError::RequestBody`]; the server closes the
/// connection on both.
pub fn decode_request(payload: Bytes) -> Result<(RequestHeader, RequestBody), FrameError> {
    let (header, body) = split_request(payload)?;
    let body = RequestBody::decode(header.api_key, header.api_version, body).map_err(|source| {
        FrameError::RequestBody {
            api_key: header.api_key,
            api_version: header.api_version,
            source,
        }
    })?;
    Ok((header, body))
}

/// Splits a response payload into the 12-byte header and the body bytes, if any.
///
/// Whether a body exists is decided by the bytes left after the header, never by its error
/// code (PROTOCOL.md §2.3): `None` means a header-only answer.
///
/// # Errors
/// [`FrameError::ResponseHeader`] when fewer than 12 bytes are present; close the connection.
pub fn split_response(payload: Bytes) -> Result<(ResponseHeader, Option<Bytes>), FrameError> {
    let mut r = Reader::new(payload);
    let header = ResponseHeader::decode(&mut r).map_err(FrameError::ResponseHeader)?;
    let rest = r.into_rest();
    Ok((header, (!rest.is_empty()).then_some(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use crate::messages::{HeartbeatRequest, HeartbeatResponse};

    /// `buf` with every piece put back at its place.
    fn reassemble(buf: &[u8], pieces: &[SharedPiece]) -> Vec<u8> {
        let (mut out, mut from) = (Vec::new(), 0);
        for p in pieces {
            out.extend_from_slice(&buf[from..p.at]);
            out.extend_from_slice(&p.bytes);
            from = p.at;
        }
        out.extend_from_slice(&buf[from..]);
        out
    }

    #[test]
    fn a_frame_with_shared_blobs_reassembles_to_the_copied_frame() {
        use crate::messages::{ProducePartitionData, ProduceRequest, ProduceTopicData};
        let blob = |n: usize, b: u8| Some(Bytes::from(vec![b; n]));
        let part = |partition, records| ProducePartitionData { partition, records };
        // Two topics; blobs below, at and above the limit, and a null one.
        let body = RequestBody::Produce(ProduceRequest {
            transactional_id: Some("tx".into()),
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![
                ProduceTopicData {
                    topic: Some("a".into()),
                    partitions: vec![part(0, blob(999, 1)), part(1, blob(1000, 2))],
                },
                ProduceTopicData {
                    topic: Some("b".into()),
                    partitions: vec![part(0, None), part(3, blob(5000, 3)), part(4, blob(10, 4))],
                },
            ],
        });
        let header = RequestHeader::new(ApiKey::PRODUCE, 42, Some("c"));
        let mut copied = BytesMut::new();
        let whole = encode_request(&mut copied, &header, &body);
        // Something before the frame in the buffer: positions are the buffer's.
        let mut buf = BytesMut::from(&b"earlier"[..]);
        let mut shared = Vec::new();
        let n = encode_request_sharing(&mut buf, &header, &body, 1000, &mut shared);
        assert_eq!(n, whole);
        let sizes: Vec<usize> = shared.iter().map(|p| p.bytes.len()).collect();
        assert_eq!(sizes, [1000, 5000]);
        assert_eq!(buf.len() - 7 + 6000, whole);
        let out = reassemble(&buf, &shared);
        assert_eq!(&out[..7], b"earlier");
        assert_eq!(&out[7..], &copied[..]);
        // Nothing shared when every blob is under the limit, and for other bodies.
        let (mut small, mut none) = (BytesMut::new(), Vec::new());
        encode_request_sharing(&mut small, &header, &body, 5001, &mut none);
        assert!(none.is_empty());
        assert_eq!(small, copied);
    }

    fn two_frames() -> (Bytes, Vec<Bytes>) {
        let mut buf = BytesMut::new();
        let mut payloads = Vec::new();
        for corr in [7, 8] {
            let header = RequestHeader::new(ApiKey::HEARTBEAT, corr, Some("c"));
            let body = HeartbeatRequest {
                group_id: Some("g".into()),
                generation_id: corr,
                member_id: None,
            };
            let start = buf.len();
            let n = encode_request(&mut buf, &header, &body);
            assert_eq!(n, buf.len() - start);
            payloads.push(Bytes::copy_from_slice(&buf[start + 4..]));
        }
        (buf.freeze(), payloads)
    }

    fn drain(dec: &mut FrameDecoder, buf: &mut BytesMut, out: &mut Vec<Bytes>) {
        while let Some(frame) = dec.decode(buf).expect("valid frames") {
            out.push(frame);
        }
    }

    #[test]
    fn split_at_every_byte_boundary() {
        let (stream, payloads) = two_frames();
        for cut in 0..=stream.len() {
            let mut dec = FrameDecoder::new();
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            buf.extend_from_slice(&stream[..cut]);
            drain(&mut dec, &mut buf, &mut out);
            buf.extend_from_slice(&stream[cut..]);
            drain(&mut dec, &mut buf, &mut out);
            assert_eq!(out, payloads, "cut at {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn one_byte_at_a_time_and_many_per_read() {
        let (stream, payloads) = two_frames();
        let mut dec = FrameDecoder::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for b in stream.iter() {
            buf.put_u8(*b);
            drain(&mut dec, &mut buf, &mut out);
        }
        assert_eq!(out, payloads);

        let mut many = BytesMut::new();
        for _ in 0..50 {
            many.extend_from_slice(&stream);
        }
        let mut out = Vec::new();
        drain(&mut dec, &mut many, &mut out);
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn oversize_is_rejected_without_allocating() {
        for (prefix, length) in [
            ([0x03, 0xff, 0xff, 0xfd], 67_108_861u32),
            ([0xff, 0xff, 0xff, 0xff], u32::MAX),
            ([0x7f, 0xff, 0xff, 0xff], i32::MAX as u32),
        ] {
            let mut buf = BytesMut::with_capacity(4);
            buf.extend_from_slice(&prefix);
            let cap = buf.capacity();
            let err = FrameDecoder::new().decode(&mut buf).expect_err("must fail");
            assert_eq!(
                err,
                FrameError::TooLong {
                    length,
                    max: DEFAULT_MAX_FRAME_LENGTH
                }
            );
            assert_eq!(buf.capacity(), cap, "nothing reserved");
        }
        // The largest accepted length is 67_108_860: it waits for more bytes.
        let mut buf = BytesMut::from(&[0x03, 0xff, 0xff, 0xfc][..]);
        assert_eq!(FrameDecoder::new().decode(&mut buf), Ok(None));
        assert!(buf.capacity() <= DEFAULT_MAX_FRAME_LENGTH + 64);
    }

    #[test]
    fn custom_limit_counts_the_prefix() {
        let mut dec = FrameDecoder::with_max_frame_length(16);
        let mut ok = BytesMut::from(&[0, 0, 0, 12][..]);
        ok.extend_from_slice(&[0; 12]);
        assert_eq!(
            dec.decode(&mut ok).map(|f| f.map(|b| b.len())),
            Ok(Some(12))
        );
        let mut bad = BytesMut::from(&[0, 0, 0, 13][..]);
        assert!(dec.decode(&mut bad).is_err());
    }

    #[test]
    fn empty_body_rule_uses_remaining_bytes_not_error_code() {
        let mut buf = BytesMut::new();
        let header = ResponseHeader::new(3, ErrorCode(19));
        encode_response_header_only(&mut buf, &header);
        assert_eq!(buf.len(), 16);
        let payload = FrameDecoder::new()
            .decode(&mut buf)
            .expect("ok")
            .expect("frame");
        assert_eq!(split_response(payload), Ok((header.clone(), None)));

        // A non-zero header error with a body (Heartbeat mirrors its error): the body is kept.
        let body = HeartbeatResponse {
            error_code: ErrorCode(19),
        };
        encode_response(&mut buf, &header, Some(&body));
        let payload = FrameDecoder::new()
            .decode(&mut buf)
            .expect("ok")
            .expect("frame");
        let (h, rest) = split_response(payload).expect("ok");
        assert_eq!(h, header);
        assert_eq!(rest, Some(Bytes::from_static(&[0, 19])));

        // Success with no body is also header-only.
        let ok = ResponseHeader::new(4, ErrorCode::default());
        encode_response_header_only(&mut buf, &ok);
        let payload = FrameDecoder::new()
            .decode(&mut buf)
            .expect("ok")
            .expect("frame");
        assert_eq!(split_response(payload), Ok((ok, None)));
    }

    #[test]
    fn short_payloads_are_header_errors() {
        assert!(matches!(
            split_response(Bytes::from_static(&[0; 11])),
            Err(FrameError::ResponseHeader(_))
        ));
        assert!(matches!(
            split_request(Bytes::from_static(&[0; 27])),
            Err(FrameError::RequestHeader(_))
        ));
        let mut buf = BytesMut::new();
        let header = RequestHeader::new(ApiKey::HEARTBEAT, 1, None);
        let empty = RequestBody::Opaque {
            api_key: ApiKey::HEARTBEAT,
            api_version: 0,
            payload: Bytes::new(),
        };
        encode_request(&mut buf, &header, &empty);
        let payload = FrameDecoder::new()
            .decode(&mut buf)
            .expect("ok")
            .expect("frame");
        assert!(matches!(
            decode_request(payload),
            Err(FrameError::RequestBody { .. })
        ));
    }

    fn length_prefixed(body: usize) -> Vec<u8> {
        let mut f = (body as u32).to_be_bytes().to_vec();
        f.extend((0..body).map(|i| i as u8));
        f
    }

    #[test]
    fn whole_frames_counts_complete_frames_and_names_the_partial_one() {
        let mut buf = length_prefixed(10);
        buf.extend(length_prefixed(0));
        let whole = buf.len();
        assert_eq!(whole_frames(&buf), (whole, None));
        // The next frame's prefix is in, its body is not.
        let mut more = buf.clone();
        more.extend(&length_prefixed(1_000_000)[..100]);
        assert_eq!(whole_frames(&more), (whole, Some(1_000_004)));
        // Only part of the prefix: no length known yet.
        let mut short = buf.clone();
        short.extend([0, 0]);
        assert_eq!(whole_frames(&short), (whole, None));
        assert_eq!(whole_frames(&[]), (0, None));
        // A hostile prefix names a length; the caller bounds what it allocates.
        assert_eq!(whole_frames(&[0xff; 4]), (0, Some(u32::MAX as usize + 4)));
        assert_eq!(frame_length(&[0, 0, 1, 0, 9]), Some(260));
    }
}
