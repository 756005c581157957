//! A broker must survive any bytes: seeded random garbage and mutated valid frames of every API
//! never panic the sim, and every connection either answers or is closed.

mod support;

use bytes::BytesMut;
use stellflow_proto::ApiKey;
use stellflow_proto::header::RequestHeader;
use stellflow_proto::messages::*;
use stellflow_sim::rng::SimRng;
use support::Harness;

fn valid_frames() -> Vec<BytesMut> {
    let mut out = Vec::new();
    let mut push = |key: ApiKey, body: &dyn Fn(&mut BytesMut)| {
        use stellflow_proto::wire::Wire;
        let mut payload = BytesMut::new();
        RequestHeader::new(key, 1, Some("fuzz")).encode(&mut payload);
        body(&mut payload);
        let mut b = BytesMut::new();
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        b.extend_from_slice(&payload);
        out.push(b);
    };
    use stellflow_proto::wire::Wire;
    push(ApiKey::PRODUCE, &|b| {
        ProduceRequest {
            acks: -1,
            timeout_ms: 5,
            topic_data: vec![ProduceTopicData {
                topic: Some("t".into()),
                partitions: vec![ProducePartitionData {
                    partition: 0,
                    records: Some(stellflow_sim::srfb::build(1, 0, 0, 1, b"x").into()),
                }],
            }],
            ..Default::default()
        }
        .encode(b)
    });
    push(ApiKey::FETCH, &|b| FetchRequest::default().encode(b));
    push(ApiKey::METADATA, &|b| MetadataRequest::default().encode(b));
    push(ApiKey::LIST_OFFSETS, &|b| {
        ListOffsetsRequest::default().encode(b)
    });
    push(ApiKey::JOIN_GROUP, &|b| {
        JoinGroupRequest::default().encode(b)
    });
    push(ApiKey::ALTER_PARTITION, &|b| {
        AlterPartitionRequest::default().encode(b)
    });
    push(ApiKey::CREATE_TOPIC, &|b| {
        CreateTopicRequest {
            topic: Some("c".into()),
            partition_count: 3,
            ..Default::default()
        }
        .encode(b)
    });
    push(ApiKey::END_TRANSACTION, &|b| {
        EndTransactionRequest::default().encode(b)
    });
    out
}

#[test]
fn random_and_mutated_input_never_panics() {
    let mut rng = SimRng::new(2024);
    let frames = valid_frames();
    for round in 0..300 {
        let mut h = Harness::single();
        for _ in 0..8 {
            let mut data = if rng.chance(0.3) {
                let n = rng.below(64) as usize;
                (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
            } else {
                let mut f = frames[rng.below(frames.len() as u64) as usize].to_vec();
                for _ in 0..=rng.below(4) {
                    let i = rng.below(f.len() as u64) as usize;
                    f[i] = rng.next_u64() as u8;
                }
                if rng.chance(0.2) {
                    f.truncate(rng.below(f.len() as u64) as usize);
                }
                f
            };
            // Keep the declared length plausible half of the time so bodies get decoded.
            if data.len() >= 4 && rng.chance(0.5) {
                let len = (data.len() - 4) as u32;
                data[..4].copy_from_slice(&len.to_be_bytes());
            }
            let conn = h.conn;
            let _ = h.send_raw_on(conn, &data);
            h.advance(3);
            if !h.cluster.is_open(conn) {
                h.cluster.disconnect(conn);
                h.conn = h.connect(1);
            }
        }
        assert!(round < 300);
    }
}
