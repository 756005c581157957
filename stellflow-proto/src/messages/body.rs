//! The API table: ties every request type to its key and response type, and the dispatch enums
//! [`RequestBody`] / [`ResponseBody`] that decode a body by API key.

use super::*;
use crate::api_key::ApiKey;
use crate::wire::{DecodeError, Describe, FieldValue, Reader, Wire};
use bytes::{Bytes, BytesMut};

/// A request body type: names its API key and the body type of its response.
///
/// Every request is version 0 (the only version the server has).
///
/// ```
/// use stellflow_proto::messages::{HeartbeatRequest, Request};
/// use stellflow_proto::ApiKey;
/// assert_eq!(HeartbeatRequest::API_KEY, ApiKey::HEARTBEAT);
/// ```
///
/// APIs that share a wire layout still get one type each (DescribeCluster and HealthCheck both
/// use the ApiVersions request layout; CreateTopic, DeleteTopic and AlterPartition share one
/// layout), so the type alone says which API is meant. Shared *responses* are one type
/// ([`TransactionResponse`], [`TopicAdminResponse`], [`ClusterStatusResponse`]).
pub trait Request: Wire + Describe {
    /// The API this request calls.
    const API_KEY: ApiKey;
    /// The API version this type encodes (always 0).
    const API_VERSION: i16 = 0;
    /// The body type of a successful response.
    type Response: Wire + Describe;
}

/// Anything that can be written as a message body: every [`Wire`] type plus the dispatch
/// enums. The frame encoders take this.
pub trait EncodeBody {
    /// Appends the body bytes to `buf`.
    fn encode_body(&self, buf: &mut BytesMut);
}

impl<T: Wire> EncodeBody for T {
    fn encode_body(&self, buf: &mut BytesMut) {
        self.encode(buf);
    }
}

macro_rules! api_table {
    ($( $variant:ident: $key:ident, $req:ty => $resp:ty; )*) => {
        $(
            impl Request for $req {
                const API_KEY: ApiKey = ApiKey::$key;
                type Response = $resp;
            }

            impl From<$req> for RequestBody {
                fn from(body: $req) -> Self {
                    RequestBody::$variant(body)
                }
            }
        )*

        /// A decoded request body of any API, as a broker receives it.
        ///
        /// Decoding follows the server: a known key at version 0 is decoded with its layout;
        /// an unknown key or any other version is kept as [`RequestBody::Opaque`] (the server
        /// then answers with a header-only error, or — for FindCoordinator, DescribeCluster
        /// and HealthCheck — runs the handler anyway).
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum RequestBody {
            $(
                #[doc = concat!("`", stringify!($key), "` request.")]
                $variant($req),
            )*
            /// A body the server has no codec for: unknown key, or a version other than 0.
            Opaque {
                /// The key from the header, kept as sent (the server's record says UNKNOWN,
                /// -32768, for unregistered keys).
                api_key: ApiKey,
                /// The version from the header.
                api_version: i16,
                /// The raw body bytes.
                payload: Bytes,
            },
        }

        impl RequestBody {
            /// Decodes a request body for `(api_key, api_version)`. Trailing bytes are
            /// ignored; a body shorter than its layout is an error (the server closes the
            /// connection).
            pub fn decode(api_key: ApiKey, api_version: i16, body: Bytes) -> Result<Self, DecodeError> {
                if api_version == 0 {
                    $(
                        if api_key == ApiKey::$key {
                            let mut r = Reader::new(body);
                            return Ok(RequestBody::$variant(<$req as Wire>::decode(&mut r)?));
                        }
                    )*
                }
                Ok(RequestBody::Opaque { api_key, api_version, payload: body })
            }

            /// The API key of this body.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $( RequestBody::$variant(_) => ApiKey::$key, )*
                    RequestBody::Opaque { api_key, .. } => *api_key,
                }
            }

            /// The API version of this body (0 except for opaque bodies).
            pub fn api_version(&self) -> i16 {
                match self {
                    RequestBody::Opaque { api_version, .. } => *api_version,
                    _ => 0,
                }
            }

            /// Appends the body bytes (an opaque body is written verbatim).
            pub fn encode(&self, buf: &mut BytesMut) {
                match self {
                    $( RequestBody::$variant(b) => b.encode(buf), )*
                    RequestBody::Opaque { payload, .. } => buf.extend_from_slice(payload),
                }
            }

            /// Appends the body bytes as [`RequestBody::encode`] does, leaving Produce record
            /// blobs of `min_shared` bytes or more out of `buf` (pushed to `shared`, see
            /// [`crate::wire::SharedPiece`]); other bodies are written whole.
            pub fn encode_sharing(
                &self,
                buf: &mut BytesMut,
                min_shared: usize,
                shared: &mut Vec<crate::wire::SharedPiece>,
            ) {
                match self {
                    RequestBody::Produce(p) => p.encode_sharing(buf, min_shared, shared),
                    other => other.encode(buf),
                }
            }
        }

        impl Describe for RequestBody {
            fn describe(&self) -> FieldValue {
                match self {
                    $( RequestBody::$variant(b) => b.describe(), )*
                    RequestBody::Opaque { api_key, api_version, payload } => FieldValue::Struct(vec![
                        ("api_key", api_key.describe()),
                        ("api_version", api_version.describe()),
                        ("payload", FieldValue::Bytes(Some(payload.clone()))),
                    ]),
                }
            }
        }

        impl EncodeBody for RequestBody {
            fn encode_body(&self, buf: &mut BytesMut) {
                self.encode(buf);
            }
        }

        /// A decoded response body of any API, as a client receives it.
        ///
        /// Only decode a body when bytes follow the 12-byte header (see
        /// [`crate::frame::split_response`]); a header-only response has no body.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum ResponseBody {
            $(
                #[doc = concat!("`", stringify!($key), "` response.")]
                $variant($resp),
            )*
            /// A body for a key this crate does not know, kept verbatim.
            Opaque {
                /// The key of the request this answers.
                api_key: ApiKey,
                /// The raw body bytes.
                payload: Bytes,
            },
        }

        impl ResponseBody {
            /// Decodes the version-0 response body of `api_key`. Trailing bytes are ignored
            /// (forward compatibility); an unknown key gives [`ResponseBody::Opaque`].
            pub fn decode(api_key: ApiKey, body: Bytes) -> Result<Self, DecodeError> {
                $(
                    if api_key == ApiKey::$key {
                        let mut r = Reader::new(body);
                        return Ok(ResponseBody::$variant(<$resp as Wire>::decode(&mut r)?));
                    }
                )*
                Ok(ResponseBody::Opaque { api_key, payload: body })
            }

            /// The API key this body answers.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $( ResponseBody::$variant(_) => ApiKey::$key, )*
                    ResponseBody::Opaque { api_key, .. } => *api_key,
                }
            }

            /// Appends the body bytes (an opaque body is written verbatim).
            pub fn encode(&self, buf: &mut BytesMut) {
                match self {
                    $( ResponseBody::$variant(b) => b.encode(buf), )*
                    ResponseBody::Opaque { payload, .. } => buf.extend_from_slice(payload),
                }
            }
        }

        impl Describe for ResponseBody {
            fn describe(&self) -> FieldValue {
                match self {
                    $( ResponseBody::$variant(b) => b.describe(), )*
                    ResponseBody::Opaque { api_key, payload } => FieldValue::Struct(vec![
                        ("api_key", api_key.describe()),
                        ("payload", FieldValue::Bytes(Some(payload.clone()))),
                    ]),
                }
            }
        }

        impl EncodeBody for ResponseBody {
            fn encode_body(&self, buf: &mut BytesMut) {
                self.encode(buf);
            }
        }
    };
}

api_table! {
    ApiVersions: API_VERSIONS, ApiVersionsRequest => ApiVersionsResponse;
    Metadata: METADATA, MetadataRequest => MetadataResponse;
    Produce: PRODUCE, ProduceRequest => ProduceResponse;
    Fetch: FETCH, FetchRequest => FetchResponse;
    ListOffsets: LIST_OFFSETS, ListOffsetsRequest => ListOffsetsResponse;
    OffsetCommit: OFFSET_COMMIT, OffsetCommitRequest => OffsetCommitResponse;
    OffsetFetch: OFFSET_FETCH, OffsetFetchRequest => OffsetFetchResponse;
    FindCoordinator: FIND_COORDINATOR, FindCoordinatorRequest => FindCoordinatorResponse;
    Heartbeat: HEARTBEAT, HeartbeatRequest => HeartbeatResponse;
    JoinGroup: JOIN_GROUP, JoinGroupRequest => JoinGroupResponse;
    SyncGroup: SYNC_GROUP, SyncGroupRequest => SyncGroupResponse;
    InitProducerId: INIT_PRODUCER_ID, InitProducerIdRequest => InitProducerIdResponse;
    BeginTransaction: BEGIN_TRANSACTION, BeginTransactionRequest => TransactionResponse;
    EndTransaction: END_TRANSACTION, EndTransactionRequest => TransactionResponse;
    CreateTopic: CREATE_TOPIC, CreateTopicRequest => TopicAdminResponse;
    DeleteTopic: DELETE_TOPIC, DeleteTopicRequest => TopicAdminResponse;
    AlterPartition: ALTER_PARTITION, AlterPartitionRequest => TopicAdminResponse;
    DescribeCluster: DESCRIBE_CLUSTER, DescribeClusterRequest => ClusterStatusResponse;
    HealthCheck: HEALTH_CHECK, HealthCheckRequest => ClusterStatusResponse;
    DecommissionBroker: DECOMMISSION_BROKER, DecommissionBrokerRequest => DecommissionBrokerResponse;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_key_has_a_typed_request_and_response() {
        for key in ApiKey::ALL {
            // A zero-filled body long enough for any layout decodes for every key.
            let body = Bytes::from(vec![0u8; 64]);
            let req = RequestBody::decode(key, 0, body.clone()).expect("decodes");
            assert!(!matches!(req, RequestBody::Opaque { .. }), "{key:?}");
            assert_eq!(req.api_key(), key);
            let resp = ResponseBody::decode(key, body).expect("decodes");
            assert!(!matches!(resp, ResponseBody::Opaque { .. }), "{key:?}");
            assert_eq!(resp.api_key(), key);
        }
    }

    #[test]
    fn unknown_key_or_version_is_opaque() {
        let payload = Bytes::from_static(&[1, 2, 3]);
        let b = RequestBody::decode(ApiKey(999), 0, payload.clone()).expect("opaque");
        assert_eq!(
            b,
            RequestBody::Opaque {
                api_key: ApiKey(999),
                api_version: 0,
                payload: payload.clone()
            }
        );
        let b = RequestBody::decode(ApiKey::PRODUCE, 1, payload.clone()).expect("opaque");
        assert_eq!(b.api_version(), 1);
        let mut buf = BytesMut::new();
        b.encode(&mut buf);
        assert_eq!(buf.freeze(), payload);
    }

    #[test]
    fn begin_has_no_commit_byte_and_end_reads_any_non_zero_as_true() {
        let begin = BeginTransactionRequest {
            transactional_id: None,
            producer_id: 1,
            producer_epoch: 0,
        };
        assert_eq!(begin.to_bytes().len(), 12);
        let end = EndTransactionRequest::from_bytes(Bytes::from_static(&[
            0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xfe,
        ]))
        .expect("decodes");
        assert!(end.commit);
    }

    #[test]
    fn truncated_bodies_are_errors() {
        assert!(RequestBody::decode(ApiKey::HEARTBEAT, 0, Bytes::new()).is_err());
        assert!(RequestBody::decode(ApiKey::DESCRIBE_CLUSTER, 0, Bytes::new()).is_err());
        assert!(ResponseBody::decode(ApiKey::PRODUCE, Bytes::from_static(&[0, 0, 0, 1])).is_err());
    }
}
