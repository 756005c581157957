//! Request and response headers (PROTOCOL.md §2).
//!
//! There is exactly one request-header layout (14 fields, at least 28 bytes) and one
//! response-header layout (4 fields, always 12 bytes). The server ignores `header_version` and
//! `flags`; clients send 2 and 0.

use crate::api_key::ApiKey;
use crate::error_code::ErrorCode;
use crate::wire::NString;

/// The header version every client sends and the server always answers with.
pub const HEADER_VERSION: i16 = 2;

crate::wire_struct! {
    /// The request header: 14 fields in wire order, sent before every request body.
    ///
    /// Build one with [`RequestHeader::new`] and set the optional tracing/tenancy fields
    /// directly.
    ///
    /// ```
    /// use stellflow_proto::{ApiKey, header::RequestHeader};
    /// let mut h = RequestHeader::new(ApiKey::METADATA, 7, Some("my-app"));
    /// h.tenant_id = Some("tenant-a".into());
    /// assert_eq!(h.header_version, 2);
    /// ```
    pub struct RequestHeader {
        /// The API being called (unknown keys are kept as numbers).
        pub api_key: ApiKey,
        /// The API version; only 0 exists on today's server.
        pub api_version: i16,
        /// The header layout version; not examined by the server, send 2.
        pub header_version: i16,
        /// Echoed in the response; match responses by it.
        pub correlation_id: i32,
        /// Client id: the idempotent-producer and InitProducerId key when there is no
        /// transactional id.
        pub client_id: NString,
        /// W3C trace id (32 lowercase hex characters), logging only.
        pub trace_id: NString,
        /// W3C span id (16 hex characters), logging only.
        pub span_id: NString,
        /// W3C trace flags; ignored by the server.
        pub trace_flags: i8,
        /// Tenant id; ignored by the server.
        pub tenant_id: NString,
        /// Quota bucket (quotas are disabled on the shipped server).
        pub quota_key: NString,
        /// Authentication context id; no effect on the shipped server.
        pub auth_context_id: NString,
        /// Traffic class, logging only.
        pub traffic_class: i8,
        /// Traffic tag, logging only.
        pub traffic_tag: NString,
        /// Flags; no bits are defined, send 0.
        pub flags: i16,
    }
}

impl RequestHeader {
    /// The smallest encoded request header: every string null (PROTOCOL.md §2.1).
    pub const MIN_LEN: usize = 28;

    /// A client request header for `api_key` version 0: header version 2, flags 0, every
    /// optional string null except `client_id`.
    pub fn new(api_key: ApiKey, correlation_id: i32, client_id: Option<&str>) -> Self {
        RequestHeader {
            api_key,
            api_version: 0,
            header_version: HEADER_VERSION,
            correlation_id,
            client_id: client_id.map(Into::into),
            ..RequestHeader::default()
        }
    }
}

crate::wire_struct! {
    /// The response header: always exactly 12 bytes.
    ///
    /// A request-level failure is this header alone, with no body; whether a body follows is
    /// decided by the bytes left, never by `error_code` (see [`crate::frame::split_response`]).
    pub struct ResponseHeader {
        /// Copied from the request.
        pub correlation_id: i32,
        /// Always 2 from today's server.
        pub header_version: i16,
        /// Request-level error; mirrors the body error for some APIs.
        pub error_code: ErrorCode,
        /// Always 0 from today's server.
        pub throttle_time_ms: i32,
    }
}

impl ResponseHeader {
    /// The encoded size of every response header.
    pub const LEN: usize = 12;

    /// A response header as the server writes it: header version 2, no throttling.
    pub fn new(correlation_id: i32, error_code: ErrorCode) -> Self {
        ResponseHeader {
            correlation_id,
            header_version: HEADER_VERSION,
            error_code,
            throttle_time_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Wire;
    use bytes::Bytes;

    #[test]
    fn minimal_request_header_is_28_bytes() {
        let h = RequestHeader::new(ApiKey::HEARTBEAT, 1, None);
        let b = h.to_bytes();
        assert_eq!(b.len(), RequestHeader::MIN_LEN);
        assert_eq!(RequestHeader::MIN_SIZE, RequestHeader::MIN_LEN);
        assert_eq!(RequestHeader::from_bytes(b), Ok(h));
    }

    #[test]
    fn truncated_request_header_is_rejected() {
        let b = RequestHeader::new(ApiKey::HEARTBEAT, 1, Some("c")).to_bytes();
        for cut in 0..b.len() {
            assert!(
                RequestHeader::from_bytes(b.slice(..cut)).is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn response_header_is_12_bytes() {
        let h = ResponseHeader::new(-5, ErrorCode(2));
        let b = h.to_bytes();
        assert_eq!(b.len(), ResponseHeader::LEN);
        assert_eq!(
            b,
            Bytes::from_static(&[0xff, 0xff, 0xff, 0xfb, 0, 2, 0, 2, 0, 0, 0, 0])
        );
        assert_eq!(ResponseHeader::from_bytes(b), Ok(h));
    }
}
