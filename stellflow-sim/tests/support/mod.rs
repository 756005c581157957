//! Helpers shared by the sim's own integration tests: a tiny raw-protocol driver over the
//! sans-IO cluster (no client crate involved).
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use std::time::{Duration, Instant};
use stellflow_proto::frame::{FrameDecoder, encode_request, split_response};
use stellflow_proto::header::{RequestHeader, ResponseHeader};
use stellflow_proto::messages::Request;
use stellflow_proto::wire::Wire;
use stellflow_sim::{ConnId, SimCluster};

pub struct Harness {
    pub cluster: SimCluster,
    pub now: Instant,
    pub conn: ConnId,
    pub corr: i32,
    pub client_id: Option<String>,
}

impl Harness {
    pub fn new(cluster: SimCluster, now: Instant) -> Self {
        let mut cluster = cluster;
        let first = cluster.broker_ids()[0];
        let conn = cluster.connect(first, now).unwrap();
        Harness {
            cluster,
            now,
            conn,
            corr: 0,
            client_id: Some("test-client".into()),
        }
    }

    pub fn single() -> Self {
        let now = Instant::now();
        Harness::new(SimCluster::single(now, 1), now)
    }

    pub fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.cluster.handle_timeout(self.now);
    }

    pub fn connect(&mut self, broker: i32) -> ConnId {
        self.cluster.connect(broker, self.now).unwrap()
    }

    /// Sends raw bytes on `conn` and returns every response frame payload ready afterwards.
    pub fn send_raw_on(&mut self, conn: ConnId, bytes: &[u8]) -> Vec<Bytes> {
        let mut buf = BytesMut::from(bytes);
        self.cluster.handle_input(conn, self.now, &mut buf);
        self.take(conn)
    }

    pub fn take(&mut self, conn: ConnId) -> Vec<Bytes> {
        let mut out = BytesMut::new();
        self.cluster.take_replies(conn, &mut out);
        let mut dec = FrameDecoder::new();
        let mut frames = Vec::new();
        while let Ok(Some(f)) = dec.decode(&mut out) {
            frames.push(f);
        }
        frames
    }

    pub fn frame<R: Request>(&mut self, req: &R) -> (i32, BytesMut) {
        self.corr += 1;
        let mut h = RequestHeader::new(R::API_KEY, self.corr, self.client_id.as_deref());
        h.api_version = 0;
        let mut buf = BytesMut::new();
        encode_request(&mut buf, &h, req);
        (self.corr, buf)
    }

    pub fn call_on<R: Request>(
        &mut self,
        conn: ConnId,
        req: &R,
    ) -> (ResponseHeader, Option<R::Response>) {
        let (corr, buf) = self.frame(req);
        let frames = self.send_raw_on(conn, &buf);
        let f = frames
            .into_iter()
            .find(|f| f.get(..4) == Some(&corr.to_be_bytes()[..]))
            .expect("a response");
        decode::<R>(f)
    }

    pub fn call<R: Request>(&mut self, req: &R) -> (ResponseHeader, Option<R::Response>) {
        let conn = self.conn;
        self.call_on(conn, req)
    }

    /// Sends a request and expects no response right now.
    pub fn send<R: Request>(&mut self, req: &R) -> i32 {
        let (corr, buf) = self.frame(req);
        let conn = self.conn;
        let frames = self.send_raw_on(conn, &buf);
        assert!(frames.is_empty(), "unexpected response");
        corr
    }
}

pub fn decode<R: Request>(payload: Bytes) -> (ResponseHeader, Option<R::Response>) {
    let (h, body) = split_response(payload).unwrap();
    let body = body.map(|b| <R::Response as Wire>::from_bytes(b).unwrap());
    (h, body)
}

pub fn s(v: &str) -> Option<stellflow_proto::StrBytes> {
    Some(v.into())
}
