//! The loopback TCP server: real sockets, no async runtime.

mod support;

use bytes::{Bytes, BytesMut};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use stellflow_proto::ErrorCode;
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::*;
use stellflow_proto::wire::Wire;
use stellflow_sim::{ClusterConfig, ServerConfig, serve, serve_with};
use support::s;

struct Client {
    stream: TcpStream,
    buf: BytesMut,
    corr: i32,
}

impl Client {
    fn connect(addr: std::net::SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buf: BytesMut::new(),
            corr: 0,
        }
    }

    fn read_frame(&mut self) -> Option<Bytes> {
        let mut dec = FrameDecoder::new();
        loop {
            if let Some(f) = dec.decode(&mut self.buf).unwrap() {
                return Some(f);
            }
            let mut tmp = [0u8; 65536];
            let n = self.stream.read(&mut tmp).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    fn call<R: Request>(&mut self, req: &R) -> (ErrorCode, Option<R::Response>) {
        self.corr += 1;
        let mut out = BytesMut::new();
        encode_request(
            &mut out,
            &RequestHeader::new(R::API_KEY, self.corr, Some("t")),
            req,
        );
        self.stream.write_all(&out).unwrap();
        let f = self.read_frame().expect("response");
        let (h, body) = split_response(f).unwrap();
        assert_eq!(h.correlation_id, self.corr);
        (
            h.error_code,
            body.map(|b| R::Response::from_bytes(b).unwrap()),
        )
    }
}

#[test]
fn basic_apis_over_loopback() {
    let server = serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());
    let mut c = Client::connect(addr);
    let (code, v) = c.call(&ApiVersionsRequest::default());
    assert_eq!(code, ErrorCode::NONE);
    assert_eq!(v.unwrap().api_versions.len(), 20);
    let (_, m) = c.call(&MetadataRequest::default());
    let m = m.unwrap();
    assert_eq!(m.brokers[0].host.as_deref(), Some("127.0.0.1"));
    assert_eq!(m.brokers[0].port, i32::from(addr.port()));
    let (_, fc) = c.call(&FindCoordinatorRequest::default());
    assert_eq!(fc.unwrap().port, i32::from(addr.port()));
    let (_, ct) = c.call(&CreateTopicRequest {
        topic: s("t"),
        partition_count: 2,
        ..Default::default()
    });
    assert_eq!(ct.unwrap().partitions.len(), 2);
    let (_, p) = c.call(&ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 100,
        topic_data: vec![ProduceTopicData {
            topic: s("t"),
            partitions: vec![ProducePartitionData {
                partition: 1,
                records: Some(Bytes::from_static(b"blob")),
            }],
        }],
    });
    assert_eq!(p.unwrap().responses[0].partitions[0].base_offset, 0);
    let (_, f) = c.call(&FetchRequest {
        replica_id: -1,
        topic_partitions: vec![FetchTopic {
            topic: s("t"),
            partitions: vec![FetchPartition {
                partition: 1,
                current_leader_epoch: -1,
                fetch_offset: 0,
                log_start_offset: -1,
                partition_max_bytes: 1,
            }],
        }],
        ..Default::default()
    });
    assert_eq!(
        f.unwrap().responses[0].partitions[0].records.as_deref(),
        Some(&b"blob"[..])
    );
    let (_, l) = c.call(&ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            topic: s("t"),
            partitions: vec![ListOffsetsPartition {
                partition: 1,
                current_leader_epoch: -1,
                timestamp: -1,
                max_num_offsets: 1,
            }],
        }],
    });
    assert_eq!(l.unwrap().topics[0].partitions[0].offset, 1);
    let started = Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not prompt (loaded machine: generous bound)"
    );
    // The connection is closed by the shutdown.
    assert!(c.read_frame().is_none());
}

#[test]
fn malformed_frame_closes_the_socket() {
    let server = serve("127.0.0.1:0").unwrap();
    let mut c = Client::connect(server.local_addr());
    c.stream.write_all(&[0xff, 0xff, 0xff, 0xff]).unwrap();
    assert!(c.read_frame().is_none());
    // The server still serves other connections.
    let mut c2 = Client::connect(server.local_addr());
    assert_eq!(c2.call(&ApiVersionsRequest::default()).0, ErrorCode::NONE);
}

#[test]
fn multi_broker_server_and_control_calls() {
    let server = serve_with(
        "127.0.0.1:0",
        ServerConfig {
            cluster: ClusterConfig::with_brokers(2),
            seed: 9,
        },
    )
    .unwrap();
    assert_eq!(server.broker_addrs().len(), 2);
    server
        .with_cluster(|c, _| c.create_topic("t", 2, 2).unwrap())
        .unwrap();
    let b2 = server.broker_addrs()[1].1;
    let mut c = Client::connect(b2);
    let (_, m) = c.call(&MetadataRequest::default());
    let m = m.unwrap();
    let ports: Vec<i32> = m.brokers.iter().map(|b| b.port).collect();
    assert_eq!(
        ports,
        vec![i32::from(server.local_addr().port()), i32::from(b2.port())]
    );
    server
        .with_cluster(|c, now| c.crash(2, now).unwrap())
        .unwrap();
    assert!(c.read_frame().is_none());
    drop(server);
}

#[test]
fn drop_shuts_down_promptly() {
    let server = serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let _idle = Client::connect(addr);
    let started = Instant::now();
    drop(server);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not prompt (loaded machine: generous bound)"
    );
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
}
