//! Property tests for headers, frames and message bodies: every request and response type
//! survives encode → decode unchanged (directly, through the dispatch enums and inside a frame),
//! and arbitrary bytes never panic the frame decoder, the header splitters or any body decoder.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use stellflow_proto::frame::{
    decode_request, encode_request, encode_response, split_request, split_response,
};
use stellflow_proto::messages::*;
use stellflow_proto::{
    ApiKey, ErrorCode, FrameDecoder, NBytes, NString, RequestHeader, ResponseHeader, StrBytes, Wire,
};

/// Values with an arbitrary-value strategy.
trait Arb: Sized + std::fmt::Debug {
    fn arb() -> BoxedStrategy<Self>;
}

macro_rules! arb_prim {
    ($($t:ty),*) => {$(
        impl Arb for $t {
            fn arb() -> BoxedStrategy<Self> {
                any::<$t>().boxed()
            }
        }
    )*};
}
arb_prim!(i8, i16, i32, i64, bool);

impl Arb for NString {
    fn arb() -> BoxedStrategy<Self> {
        proptest::option::of("\\PC{0,12}".prop_map(StrBytes::from)).boxed()
    }
}

impl Arb for NBytes {
    fn arb() -> BoxedStrategy<Self> {
        proptest::option::of(vec(any::<u8>(), 0..40).prop_map(Bytes::from)).boxed()
    }
}

impl Arb for ApiKey {
    fn arb() -> BoxedStrategy<Self> {
        any::<i16>().prop_map(ApiKey).boxed()
    }
}

impl Arb for ErrorCode {
    fn arb() -> BoxedStrategy<Self> {
        any::<i16>().prop_map(ErrorCode).boxed()
    }
}

impl<T: Arb + 'static> Arb for Vec<T> {
    fn arb() -> BoxedStrategy<Self> {
        vec(T::arb(), 0..4).boxed()
    }
}

/// Implements [`Arb`] for structs from their field lists (nested 2-tuples of strategies, so any
/// number of fields works).
macro_rules! arb_struct {
    ($($ty:ident { $($f:ident: $ft:ty),* $(,)? })*) => {$(
        impl Arb for $ty {
            fn arb() -> BoxedStrategy<Self> {
                arb_struct!(@nest $($ft),*)
                    .prop_map(|arb_struct!(@pat $($f),*)| $ty { $($f),* })
                    .boxed()
            }
        }
    )*};
    (@nest) => { Just(()) };
    (@nest $t:ty $(, $rest:ty)*) => { (<$t as Arb>::arb(), arb_struct!(@nest $($rest),*)) };
    (@pat) => { () };
    (@pat $f:ident $(, $rest:ident)*) => { ($f, arb_struct!(@pat $($rest),*)) };
}

arb_struct! {
    RequestHeader {
        api_key: ApiKey, api_version: i16, header_version: i16, correlation_id: i32,
        client_id: NString, trace_id: NString, span_id: NString, trace_flags: i8,
        tenant_id: NString, quota_key: NString, auth_context_id: NString, traffic_class: i8,
        traffic_tag: NString, flags: i16,
    }
    ResponseHeader {
        correlation_id: i32, header_version: i16, error_code: ErrorCode, throttle_time_ms: i32,
    }
    ApiVersionsRequest {
        client_software_name: NString, client_software_version: NString,
        supported_features: Vec<NString>,
    }
    ApiVersionsResponse {
        api_versions: Vec<ApiVersionRange>, broker_software_name: NString,
        broker_software_version: NString, supported_features: Vec<NString>,
    }
    ApiVersionRange { api_key: ApiKey, min_version: i16, max_version: i16 }
    MetadataRequest {
        topics: Vec<MetadataRequestTopic>, include_cluster_authorized_operations: bool,
        include_topic_authorized_operations: bool, allow_auto_topic_creation: bool,
    }
    MetadataRequestTopic { topic: NString }
    MetadataResponse {
        cluster_id: NString, controller_id: i32, brokers: Vec<MetadataBroker>,
        topics: Vec<MetadataTopic>, cluster_authorized_operations: i32,
    }
    MetadataBroker { broker_id: i32, host: NString, port: i32, rack: NString }
    MetadataTopic {
        error_code: ErrorCode, topic: NString, is_internal: bool,
        partitions: Vec<MetadataPartition>, topic_authorized_operations: i32,
    }
    MetadataPartition {
        error_code: ErrorCode, partition: i32, leader_id: i32, leader_epoch: i32,
        replica_nodes: Vec<i32>, isr_nodes: Vec<i32>, offline_replica_nodes: Vec<i32>,
    }
    ProduceRequest {
        transactional_id: NString, acks: i16, timeout_ms: i32, topic_data: Vec<ProduceTopicData>,
    }
    ProduceTopicData { topic: NString, partitions: Vec<ProducePartitionData> }
    ProducePartitionData { partition: i32, records: NBytes }
    ProduceResponse { responses: Vec<ProduceTopicResponse> }
    ProduceTopicResponse { topic: NString, partitions: Vec<ProducePartitionResponse> }
    ProducePartitionResponse {
        partition: i32, error_code: ErrorCode, base_offset: i64, current_leader_epoch: i32,
        log_append_time_ms: i64, log_start_offset: i64,
    }
    FetchRequest {
        replica_id: i32, max_wait_ms: i32, min_bytes: i32, max_bytes: i32, isolation_level: i8,
        session_id: i32, topic_partitions: Vec<FetchTopic>,
    }
    FetchTopic { topic: NString, partitions: Vec<FetchPartition> }
    FetchPartition {
        partition: i32, current_leader_epoch: i32, fetch_offset: i64, log_start_offset: i64,
        partition_max_bytes: i32,
    }
    FetchResponse { session_id: i32, responses: Vec<FetchTopicResponse> }
    FetchTopicResponse { topic: NString, partitions: Vec<FetchPartitionResponse> }
    FetchPartitionResponse {
        partition: i32, error_code: ErrorCode, high_watermark: i64, log_start_offset: i64,
        last_stable_offset: i64, aborted_transactions: Vec<AbortedTransaction>, records: NBytes,
    }
    AbortedTransaction { producer_id: i64, first_offset: i64 }
    ListOffsetsRequest { replica_id: i32, isolation_level: i8, topics: Vec<ListOffsetsTopic> }
    ListOffsetsTopic { topic: NString, partitions: Vec<ListOffsetsPartition> }
    ListOffsetsPartition {
        partition: i32, current_leader_epoch: i32, timestamp: i64, max_num_offsets: i32,
    }
    ListOffsetsResponse { topics: Vec<ListOffsetsTopicResponse> }
    ListOffsetsTopicResponse { topic: NString, partitions: Vec<ListOffsetsPartitionResponse> }
    ListOffsetsPartitionResponse {
        partition: i32, error_code: ErrorCode, leader_epoch: i32, timestamp: i64, offset: i64,
        offsets: Vec<i64>,
    }
    OffsetCommitRequest { group_id: NString, topics: Vec<OffsetCommitTopic> }
    OffsetCommitTopic { topic: NString, partitions: Vec<OffsetCommitPartition> }
    OffsetCommitPartition { partition: i32, offset: i64, metadata: NString }
    OffsetCommitResponse { topics: Vec<OffsetCommitTopicResponse> }
    OffsetCommitTopicResponse { topic: NString, partitions: Vec<OffsetCommitPartitionResponse> }
    OffsetCommitPartitionResponse { partition: i32, error_code: ErrorCode }
    OffsetFetchRequest { group_id: NString, topics: Vec<OffsetFetchTopic> }
    OffsetFetchTopic { topic: NString, partitions: Vec<OffsetFetchPartition> }
    OffsetFetchPartition { partition: i32 }
    OffsetFetchResponse { topics: Vec<OffsetFetchTopicResponse> }
    OffsetFetchTopicResponse { topic: NString, partitions: Vec<OffsetFetchPartitionResponse> }
    OffsetFetchPartitionResponse {
        partition: i32, offset: i64, metadata: NString, error_code: ErrorCode,
    }
    FindCoordinatorRequest { key: NString, key_type: i8 }
    FindCoordinatorResponse { error_code: ErrorCode, node_id: i32, host: NString, port: i32 }
    HeartbeatRequest { group_id: NString, generation_id: i32, member_id: NString }
    HeartbeatResponse { error_code: ErrorCode }
    JoinGroupRequest { group_id: NString, member_id: NString, session_timeout_ms: i32 }
    JoinGroupResponse {
        error_code: ErrorCode, generation_id: i32, member_id: NString, leader_id: NString,
    }
    SyncGroupRequest { group_id: NString, generation_id: i32, member_id: NString }
    SyncGroupResponse { error_code: ErrorCode, assignments: Vec<SyncGroupAssignment> }
    SyncGroupAssignment { topic: NString, partition: i32 }
    InitProducerIdRequest { transactional_id: NString }
    InitProducerIdResponse { error_code: ErrorCode, producer_id: i64, producer_epoch: i16 }
    BeginTransactionRequest { transactional_id: NString, producer_id: i64, producer_epoch: i16 }
    EndTransactionRequest {
        transactional_id: NString, producer_id: i64, producer_epoch: i16, commit: bool,
    }
    TransactionResponse {
        error_code: ErrorCode, producer_id: i64, producer_epoch: i16, transaction_state: NString,
    }
    CreateTopicRequest {
        topic: NString, partition_count: i32, partition: i32, leader_id: i32, leader_epoch: i32,
        replica_nodes: Vec<i32>, isr_nodes: Vec<i32>,
    }
    DeleteTopicRequest {
        topic: NString, partition_count: i32, partition: i32, leader_id: i32, leader_epoch: i32,
        replica_nodes: Vec<i32>, isr_nodes: Vec<i32>,
    }
    AlterPartitionRequest {
        topic: NString, partition_count: i32, partition: i32, leader_id: i32, leader_epoch: i32,
        replica_nodes: Vec<i32>, isr_nodes: Vec<i32>,
    }
    TopicAdminResponse { topic: NString, partitions: Vec<TopicAdminPartitionResult> }
    TopicAdminPartitionResult { partition: i32, error_code: ErrorCode, leader_epoch: i32 }
    DescribeClusterRequest {
        client_software_name: NString, client_software_version: NString,
        supported_features: Vec<NString>,
    }
    HealthCheckRequest {
        client_software_name: NString, client_software_version: NString,
        supported_features: Vec<NString>,
    }
    ClusterStatusResponse {
        error_code: ErrorCode, cluster_id: NString, broker_count: i32, topic_count: i32,
        partition_count: i32,
    }
    DecommissionBrokerRequest { broker_id: i32 }
    DecommissionBrokerResponse { error_code: ErrorCode, message: NString }
}

/// Encode → decode gives the value back and uses every byte.
fn plain_round_trip<T: Wire + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = v.to_bytes();
    let mut r = stellflow_proto::Reader::new(bytes);
    let back = T::decode(&mut r).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, v);
    prop_assert_eq!(r.remaining(), 0);
    Ok(())
}

/// A request round-trips on its own, through [`RequestBody`] and inside a frame.
fn request_round_trip<T>(v: T, header: RequestHeader) -> Result<(), TestCaseError>
where
    T: Request + PartialEq + std::fmt::Debug + Into<RequestBody> + Clone,
{
    plain_round_trip(&v)?;
    let body: RequestBody = v.clone().into();
    prop_assert_eq!(body.api_key(), T::API_KEY);
    let decoded = RequestBody::decode(T::API_KEY, T::API_VERSION, v.to_bytes())
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&decoded, &body);

    let header = RequestHeader {
        api_key: T::API_KEY,
        api_version: T::API_VERSION,
        ..header
    };
    let mut buf = BytesMut::new();
    let n = encode_request(&mut buf, &header, &v);
    prop_assert_eq!(n, buf.len());
    let payload = FrameDecoder::new()
        .decode(&mut buf)
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .ok_or_else(|| TestCaseError::fail("no frame"))?;
    let (h, b) = decode_request(payload).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(h, header);
    prop_assert_eq!(b, body);
    Ok(())
}

/// A response round-trips on its own, through [`ResponseBody`] and inside a frame.
fn response_round_trip<T>(v: T, key: ApiKey, header: ResponseHeader) -> Result<(), TestCaseError>
where
    T: Wire + PartialEq + std::fmt::Debug,
{
    plain_round_trip(&v)?;
    let decoded =
        ResponseBody::decode(key, v.to_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(decoded.api_key(), key);
    let mut again = BytesMut::new();
    decoded.encode(&mut again);
    prop_assert_eq!(again.freeze(), v.to_bytes());

    let mut buf = BytesMut::new();
    encode_response(&mut buf, &header, Some(&v));
    let payload = FrameDecoder::new()
        .decode(&mut buf)
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .ok_or_else(|| TestCaseError::fail("no frame"))?;
    let (h, body) = split_response(payload).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(h, header);
    let body = body.ok_or_else(|| TestCaseError::fail("body lost"))?;
    let back = T::from_bytes(body).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(back, v);
    Ok(())
}

macro_rules! request_props {
    ($($name:ident: $ty:ty;)*) => {
        proptest! {
            $(
                #[test]
                fn $name(v in <$ty>::arb(), h in RequestHeader::arb()) {
                    request_round_trip(v, h)?;
                }
            )*
        }
    };
}

macro_rules! response_props {
    ($($name:ident: $ty:ty => $key:ident;)*) => {
        proptest! {
            $(
                #[test]
                fn $name(v in <$ty>::arb(), h in ResponseHeader::arb()) {
                    response_round_trip(v, ApiKey::$key, h)?;
                }
            )*
        }
    };
}

request_props! {
    api_versions_request: ApiVersionsRequest;
    metadata_request: MetadataRequest;
    produce_request: ProduceRequest;
    fetch_request: FetchRequest;
    list_offsets_request: ListOffsetsRequest;
    offset_commit_request: OffsetCommitRequest;
    offset_fetch_request: OffsetFetchRequest;
    find_coordinator_request: FindCoordinatorRequest;
    heartbeat_request: HeartbeatRequest;
    join_group_request: JoinGroupRequest;
    sync_group_request: SyncGroupRequest;
    init_producer_id_request: InitProducerIdRequest;
    begin_transaction_request: BeginTransactionRequest;
    end_transaction_request: EndTransactionRequest;
    create_topic_request: CreateTopicRequest;
    delete_topic_request: DeleteTopicRequest;
    alter_partition_request: AlterPartitionRequest;
    describe_cluster_request: DescribeClusterRequest;
    health_check_request: HealthCheckRequest;
    decommission_broker_request: DecommissionBrokerRequest;
}

response_props! {
    api_versions_response: ApiVersionsResponse => API_VERSIONS;
    metadata_response: MetadataResponse => METADATA;
    produce_response: ProduceResponse => PRODUCE;
    fetch_response: FetchResponse => FETCH;
    list_offsets_response: ListOffsetsResponse => LIST_OFFSETS;
    offset_commit_response: OffsetCommitResponse => OFFSET_COMMIT;
    offset_fetch_response: OffsetFetchResponse => OFFSET_FETCH;
    find_coordinator_response: FindCoordinatorResponse => FIND_COORDINATOR;
    heartbeat_response: HeartbeatResponse => HEARTBEAT;
    join_group_response: JoinGroupResponse => JOIN_GROUP;
    sync_group_response: SyncGroupResponse => SYNC_GROUP;
    init_producer_id_response: InitProducerIdResponse => INIT_PRODUCER_ID;
    begin_transaction_response: TransactionResponse => BEGIN_TRANSACTION;
    end_transaction_response: TransactionResponse => END_TRANSACTION;
    create_topic_response: TopicAdminResponse => CREATE_TOPIC;
    delete_topic_response: TopicAdminResponse => DELETE_TOPIC;
    alter_partition_response: TopicAdminResponse => ALTER_PARTITION;
    describe_cluster_response: ClusterStatusResponse => DESCRIBE_CLUSTER;
    health_check_response: ClusterStatusResponse => HEALTH_CHECK;
    decommission_broker_response: DecommissionBrokerResponse => DECOMMISSION_BROKER;
}

/// Bytes biased towards small lengths and counts, so decoders get past their first field.
fn noise() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..200),
        vec(
            prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()],
            0..200
        ),
    ]
}

proptest! {
    #[test]
    fn headers_round_trip(h in RequestHeader::arb(), r in ResponseHeader::arb()) {
        plain_round_trip(&h)?;
        plain_round_trip(&r)?;
    }

    #[test]
    fn frame_decoder_never_panics(
        chunks in vec(vec(any::<u8>(), 0..64), 0..8),
        max in prop_oneof![Just(stellflow_proto::frame::DEFAULT_MAX_FRAME_LENGTH), 0usize..256],
    ) {
        let mut decoder = FrameDecoder::with_max_frame_length(max);
        let mut buf = BytesMut::new();
        'feed: for chunk in chunks {
            buf.extend_from_slice(&chunk);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(payload)) => {
                        prop_assert!(payload.len() + 4 <= max);
                        let _ = split_request(payload.clone());
                        let _ = decode_request(payload.clone());
                        let _ = split_response(payload);
                    }
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
        }
    }

    #[test]
    fn response_decoders_never_panic(bytes in noise(), key in any::<i16>()) {
        let bytes = Bytes::from(bytes);
        for key in ApiKey::ALL {
            let _ = ResponseBody::decode(key, bytes.clone());
        }
        let _ = ResponseBody::decode(ApiKey(key), bytes.clone());
        let _ = split_response(bytes);
    }

    #[test]
    fn request_dispatch_never_panics(bytes in noise(), key in any::<i16>(), version in -1i16..2) {
        let bytes = Bytes::from(bytes);
        for k in ApiKey::ALL {
            if let Ok(body) = RequestBody::decode(k, 0, bytes.clone()) {
                // Whatever decodes re-encodes and decodes to the same value.
                let mut again = BytesMut::new();
                body.encode(&mut again);
                prop_assert_eq!(RequestBody::decode(k, 0, again.freeze()).ok(), Some(body));
            }
        }
        let _ = RequestBody::decode(ApiKey(key), version, bytes.clone());
        let _ = decode_request(bytes);
    }
}
