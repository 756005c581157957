//! Property tests for record data: round trips through the hot-path builder, the explicit v1
//! encoder and the SRFB envelope (none and gzip), and "never panics" for every decoder over
//! arbitrary and mutated input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use stellflow_proto::StrBytes;
use stellflow_proto::record::srfb::{self, SrfbParams};
use stellflow_proto::record::v1::{RecordFields, V1BatchFields, V1Batches};
use stellflow_proto::record::{
    BatchBuilder, BatchParams, BlobBatch, Compression, Envelope, Header, SrfbBatch, V1Batch,
    blob_records, split_blob,
};

/// One record as the producer hands it over.
#[derive(Debug, Clone)]
struct In {
    ts: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn bytes_opt(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max))
}

fn record_in() -> impl Strategy<Value = In> {
    (
        any::<i64>(),
        bytes_opt(40),
        bytes_opt(200),
        proptest::collection::vec(("[a-z\u{e9}\u{4e2d}]{0,8}", bytes_opt(16)), 0..3),
    )
        .prop_map(|(ts, key, value, headers)| In {
            ts,
            key,
            value,
            headers,
        })
}

fn params() -> impl Strategy<Value = BatchParams> {
    (
        any::<i64>(),
        any::<i64>(),
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        any::<i16>(),
    )
        .prop_map(|(ts, pid, epoch, seq, ple, attrs)| BatchParams {
            base_timestamp: ts,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            partition_leader_epoch: ple,
            // Compressed v1 batches are not readable; keep the codec bits 0.
            attributes: attrs & !0x07,
        })
}

fn envelope() -> impl Strategy<Value = Envelope> {
    prop_oneof![
        Just(Envelope::V1),
        Just(Envelope::Srfb(Compression::None)),
        Just(Envelope::Srfb(Compression::Gzip)),
    ]
}

fn build(params: BatchParams, envelope: Envelope, records: &[In]) -> Bytes {
    let mut b = BatchBuilder::with_capacity(params, envelope, 64);
    for r in records {
        let size_before = b.encoded_size();
        let expected = stellflow_proto::record::record_size(
            r.key.as_deref(),
            r.value.as_deref(),
            r.headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
        );
        b.append_with_headers(
            r.ts,
            r.key.as_deref(),
            r.value.as_deref(),
            r.headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
        )
        .unwrap();
        assert_eq!(
            b.encoded_size(),
            size_before + expected,
            "record_size is exact"
        );
    }
    b.finish().unwrap()
}

fn check_records(blob: Bytes, params: &BatchParams, records: &[In]) {
    let got: Vec<_> = blob_records(blob).collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), records.len());
    for (i, (g, want)) in got.iter().zip(records).enumerate() {
        assert_eq!(g.index_in_blob as usize, i);
        let r = &g.record;
        assert_eq!(r.timestamp, want.ts);
        assert_eq!(
            r.timestamp_delta,
            want.ts.wrapping_sub(params.base_timestamp)
        );
        assert_eq!(r.offset_delta as usize, i);
        assert_eq!(r.key.as_deref(), want.key.as_deref());
        assert_eq!(r.value.as_deref(), want.value.as_deref());
        let headers: Vec<_> = r.headers.iter().collect();
        let expected: Vec<_> = want
            .headers
            .iter()
            .map(|(k, v)| Header::new(k, v.as_deref()))
            .collect();
        assert_eq!(headers, expected);
        let raw: Vec<_> = r.headers.iter_raw().collect();
        assert_eq!(raw.len(), want.headers.len());
    }
}

fn record_fields() -> impl Strategy<Value = RecordFields> {
    (
        any::<i8>(),
        any::<i64>(),
        any::<i32>(),
        bytes_opt(40),
        bytes_opt(100),
        proptest::collection::vec(
            (proptest::option::of("[a-z0-9\u{fc}]{0,6}"), bytes_opt(10)),
            0..3,
        ),
    )
        .prop_map(|(attributes, td, od, key, value, headers)| RecordFields {
            attributes,
            timestamp_delta: td,
            offset_delta: od,
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers: headers
                .into_iter()
                .map(|(k, v)| Header {
                    key: k.map(StrBytes::from),
                    value: v.map(Bytes::from),
                })
                .collect(),
        })
}

fn v1_fields() -> impl Strategy<Value = V1BatchFields> {
    (
        (any::<i32>(), any::<i32>(), any::<i16>(), any::<i32>()),
        (
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            any::<i16>(),
            any::<i32>(),
        ),
        proptest::collection::vec(record_fields(), 0..5),
    )
        .prop_map(
            |((bod, ple, attrs, lod), (bts, mts, pid, epoch, seq), records)| V1BatchFields {
                base_offset_delta: bod,
                partition_leader_epoch: ple,
                magic: 1,
                attributes: attrs & !0x07,
                last_offset_delta: lod,
                base_timestamp: bts,
                max_timestamp: mts,
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                records,
            },
        )
}

/// Runs every decoder over `bytes`, consuming everything they yield.
fn decode_everything(bytes: &Bytes) {
    if let Ok(b) = V1Batch::parse(bytes.clone()) {
        for r in b.records() {
            let Ok(r) = r else { break };
            r.headers.iter().for_each(drop);
            r.headers.iter_raw().for_each(drop);
        }
        let _ = V1BatchFields::from_batch(&b);
    }
    for b in V1Batches::new(bytes.clone()) {
        let Ok(b) = b else { break };
        b.records().for_each(drop);
    }
    let _ = SrfbBatch::validate(bytes.clone());
    let _ = srfb::server_view(bytes);
    let _ = srfb::SrfbHeader::parse(bytes);
    for b in split_blob(bytes.clone()) {
        match b {
            Ok(BlobBatch::V1(b)) => b.records().for_each(drop),
            Ok(BlobBatch::Srfb(s)) => V1Batches::new(s.content().clone()).for_each(drop),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let mut it = blob_records(bytes.clone());
    for r in it.by_ref() {
        match r {
            Ok(r) => r.record.headers.iter().for_each(drop),
            Err(e) => {
                let _ = e.to_string();
                break;
            }
        }
    }
    assert!(it.next().is_none(), "the record iterator is fused");
}

/// Mutations of a valid blob: byte flips, truncation, insertion; optionally with the checksums
/// repaired so the inner layers see the corruption.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Insert(i, x)),
    ]
}

fn mutate(blob: &[u8], mutations: &[Mutation], fix_checksums: bool) -> Bytes {
    let mut b = blob.to_vec();
    for m in mutations {
        if b.is_empty() {
            break;
        }
        match *m {
            Mutation::Flip(i, x) => {
                let i = i % b.len();
                b[i] ^= x;
            }
            Mutation::Truncate(i) => b.truncate(i % b.len()),
            Mutation::Insert(i, x) => {
                let i = i % (b.len() + 1);
                b.insert(i, x);
            }
        }
    }
    if fix_checksums {
        if srfb::is_srfb(&b) && b.len() >= 37 {
            let crc = crc32fast::hash(&b[37..]);
            b[33..37].copy_from_slice(&crc.to_be_bytes());
        } else if b.len() >= 17 {
            let crc = crc32c::crc32c(&b[17..]);
            b[13..17].copy_from_slice(&crc.to_be_bytes());
            let len = (b.len() - 8) as i32;
            b[4..8].copy_from_slice(&len.to_be_bytes());
        }
    }
    Bytes::from(b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn builder_round_trips(
        params in params(),
        envelope in envelope(),
        records in proptest::collection::vec(record_in(), 1..8),
    ) {
        let blob = build(params, envelope, &records);
        // The v1 batch inside (directly or as the SRFB content) carries the params.
        let batch = match split_blob(blob.clone()).next().unwrap().unwrap() {
            BlobBatch::V1(b) => b,
            BlobBatch::Srfb(s) => {
                let h = *s.header();
                prop_assert_eq!(h.record_count as usize, records.len());
                prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence),
                    (params.producer_id, params.producer_epoch, params.base_sequence));
                V1Batch::parse(s.content().clone()).unwrap()
            }
            _ => unreachable!(),
        };
        let h = *batch.header();
        prop_assert_eq!(h.record_count as usize, records.len());
        prop_assert_eq!(h.last_offset_delta as usize, records.len() - 1);
        prop_assert_eq!(h.max_timestamp, records.iter().map(|r| r.ts).max().unwrap());
        prop_assert_eq!(h.base_timestamp, params.base_timestamp);
        prop_assert_eq!(h.partition_leader_epoch, params.partition_leader_epoch);
        prop_assert_eq!(h.attributes, params.attributes);
        check_records(blob, &params, &records);
    }

    #[test]
    fn empty_v1_batch_round_trips(params in params()) {
        let blob = build(params, Envelope::V1, &[]);
        let batch = V1Batch::parse(blob.clone()).unwrap();
        prop_assert_eq!(batch.header().record_count, 0);
        prop_assert_eq!(batch.header().max_timestamp, params.base_timestamp);
        prop_assert_eq!(blob_records(blob).count(), 0);
    }

    #[test]
    fn explicit_encoder_round_trips(fields in v1_fields()) {
        let bytes = fields.to_bytes().unwrap();
        let batch = V1Batch::parse(bytes.clone()).unwrap();
        prop_assert_eq!(batch.header().batch_length as usize, bytes.len() - 8);
        let back = V1BatchFields::from_batch(&batch).unwrap();
        prop_assert_eq!(&back, &fields);
        // Re-encoding the decoded fields is byte-identical.
        prop_assert_eq!(back.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn srfb_round_trips(
        content in proptest::collection::vec(any::<u8>(), 0..2000),
        gzip in any::<bool>(),
        pid in any::<i64>(), epoch in any::<i16>(), seq in any::<i32>(), count in 1..i32::MAX,
    ) {
        let compression = if gzip { Compression::Gzip } else { Compression::None };
        let params = SrfbParams { producer_id: pid, producer_epoch: epoch, base_sequence: seq, record_count: count };
        let mut out = BytesMut::new();
        srfb::encode(&params, compression, &content, &mut out).unwrap();
        let blob = out.freeze();
        let b = SrfbBatch::validate(blob.clone()).unwrap();
        let h = *b.header();
        prop_assert_eq!(&b.content()[..], &content[..]);
        prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.record_count), (pid, epoch, seq, count));
        prop_assert_eq!(h.compression(), Some(compression));
        prop_assert_eq!(h.uncompressed_length as usize, content.len());
        prop_assert_eq!(h.payload_length as usize, blob.len() - 37);
        let view = srfb::server_view(&blob).unwrap();
        prop_assert!(view.stable_format);
        prop_assert_eq!(view.fingerprint, h.crc);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        decode_everything(&Bytes::from(bytes));
    }

    #[test]
    fn srfb_prefixed_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        bytes.splice(0..0, *b"SRFB\x00\x01");
        decode_everything(&Bytes::from(bytes));
    }

    #[test]
    fn mutated_blobs_never_panic(
        params in params(),
        envelope in envelope(),
        records in proptest::collection::vec(record_in(), 1..5),
        mutations in proptest::collection::vec(mutation(), 1..4),
        fix in any::<bool>(),
    ) {
        let blob = build(params, envelope, &records);
        decode_everything(&mutate(&blob, &mutations, fix));
    }

    #[test]
    fn mutated_batch_sequences_never_panic(
        records in proptest::collection::vec(record_in(), 1..4),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        let one = build(BatchParams::default(), Envelope::V1, &records);
        let mut two = one.to_vec();
        two.extend_from_slice(&one);
        let all: Vec<_> = blob_records(Bytes::from(two.clone())).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(all.len(), 2 * records.len());
        prop_assert!(all.iter().enumerate().all(|(i, r)| r.index_in_blob as usize == i));
        decode_everything(&mutate(&two, &mutations, false));
    }
}
