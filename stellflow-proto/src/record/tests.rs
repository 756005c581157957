//! Unit tests for the record layer against the worked examples of PROTOCOL.md §4.5.

use super::*;
use bytes::Bytes;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const EXAMPLE_D: &str = "00000000 00000050 ffffffff 01 0391f52b 0000 00000000
    0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001
    0000001b 00 0000000000000000 00000000 ffffffff 00000002 6869 00000000";

#[test]
fn builder_writes_example_d() {
    let ts = 1_700_000_000_000;
    let mut b = BatchBuilder::new(BatchParams {
        base_timestamp: ts,
        ..BatchParams::default()
    });
    b.append(ts, None, Some(b"hi")).unwrap();
    assert_eq!(b.encoded_size(), 88);
    let batch = b.finish().unwrap();
    assert_eq!(&batch[..], &unhex(EXAMPLE_D)[..]);
    let parsed = V1Batch::parse(batch).unwrap();
    assert_eq!(parsed.header().crc32c, 0x0391_f52b);
    let recs: Vec<_> = parsed.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].key, None);
    assert_eq!(recs[0].timestamp, ts);
}

#[test]
fn srfb_encodes_example_a() {
    let params = SrfbParams {
        producer_id: 1,
        producer_epoch: 0,
        base_sequence: 0,
        record_count: 1,
    };
    let mut out = bytes::BytesMut::new();
    srfb::encode(&params, Compression::None, b"hello", &mut out).unwrap();
    let expected = unhex(
        "53524642 0001 00 0000000000000001 0000 00000000 00000001 00000005 00000005 3610a686
         68656c6c6f",
    );
    assert_eq!(&out[..], &expected[..]);
    let b = SrfbBatch::validate(out.freeze()).unwrap();
    assert_eq!(b.header().crc, 0x3610_a686);
}

#[test]
fn srfb_envelope_round_trips_records_with_and_without_gzip() {
    for c in [Compression::None, Compression::Gzip] {
        let mut b = BatchBuilder::with_capacity(
            BatchParams {
                producer_id: 7,
                producer_epoch: 1,
                base_sequence: 10,
                ..BatchParams::default()
            },
            Envelope::Srfb(c),
            1024,
        );
        for i in 0..5u8 {
            b.append_with_headers(i64::from(i), Some(&[i]), Some(&[i; 40]), [("h", Some([i]))])
                .unwrap();
        }
        let blob = b.finish().unwrap();
        assert_eq!(sniff(&blob), BlobFormat::Srfb);
        let view = srfb::server_view(&blob).unwrap();
        assert!(view.stable_format && view.is_idempotent());
        assert_eq!(view.record_count, 5);
        let recs: Vec<_> = blob_records(blob).collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 5);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.index_in_blob as usize, i);
            assert_eq!(r.record.value.as_deref(), Some(&[i as u8; 40][..]));
            let h: Vec<_> = r.record.headers.iter().collect();
            assert_eq!(h, vec![Header::new("h", Some(&[i as u8]))]);
        }
    }
}

#[test]
fn records_are_indexed_across_back_to_back_batches() {
    let mut blob = Vec::new();
    for n in [2, 3] {
        let mut b = BatchBuilder::new(BatchParams::default());
        for _ in 0..n {
            b.append(0, None, Some(b"x")).unwrap();
        }
        blob.extend_from_slice(&b.finish().unwrap());
    }
    let recs: Vec<_> = blob_records(Bytes::from(blob))
        .map(|r| r.map(|r| (r.index_in_blob, r.batch_index)))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(recs, vec![(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]);
}

#[test]
fn corrupt_input_names_the_problem() {
    let mut bytes = unhex(EXAMPLE_D);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let err = V1Batch::parse(Bytes::from(bytes)).unwrap_err();
    assert!(matches!(err, BatchError::V1Crc { .. }), "{err}");
    assert!(err.to_string().contains("CRC-32C"));

    let err = blob_records(Bytes::from_static(b"SRFB"))
        .next()
        .unwrap()
        .unwrap_err();
    assert_eq!(err, BatchError::SrfbHeaderIncomplete { len: 4 });
}

#[test]
fn empty_srfb_is_refused() {
    let b =
        BatchBuilder::with_capacity(BatchParams::default(), Envelope::Srfb(Compression::None), 0);
    assert_eq!(b.finish().unwrap_err(), BatchError::EmptySrfb);
}

#[test]
fn gzip_bomb_is_bounded() {
    let content = vec![0u8; 1 << 20];
    let mut out = bytes::BytesMut::new();
    srfb::encode(
        &SrfbParams::default(),
        Compression::Gzip,
        &content,
        &mut out,
    )
    .unwrap();
    // Claim a much smaller uncompressed length: inflation must stop just past it.
    let payload = out.split_off(srfb::SRFB_HEADER_LEN);
    let err = srfb::inflate_bounded(&payload, 10).unwrap_err();
    assert_eq!(
        err,
        BatchError::UncompressedLength {
            declared: 10,
            actual: 11,
            more: true
        }
    );
}

#[test]
fn incremental_crc_matches_over_large_batches() {
    for (n, len) in [(3000usize, 37usize), (200, 1500), (40, 70_000)] {
        let mut b = BatchBuilder::with_capacity(BatchParams::default(), Envelope::V1, 16);
        for i in 0..n {
            let v = vec![(i % 251) as u8; len + i % 13];
            b.append_with_headers(i as i64, Some(&v[..3]), Some(&v), [("k", Some(&v[..1]))])
                .unwrap();
        }
        let blob = b.finish().unwrap();
        assert_eq!(blob_records(blob).filter(Result::is_ok).count(), n);
    }
}

/// A v1 batch of `n` one-byte values.
fn batch_of(n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchParams::default());
    for _ in 0..n {
        b.append(0, None, Some(b"x")).unwrap();
    }
    b.finish().unwrap().to_vec()
}

/// `(index_in_blob, at_end())` after each record, and the error that ended the walk.
fn lasts(blob: Vec<u8>) -> (Vec<(u32, bool)>, Option<BatchError>) {
    let mut out = Vec::new();
    let mut records = blob_records(Bytes::from(blob));
    while let Some(r) = records.next() {
        match r {
            Ok(r) => out.push((r.index_in_blob, records.at_end())),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[test]
fn last_in_blob_is_known_without_decoding_ahead() {
    // One batch; batches back to back; a batch followed by an empty one.
    assert_eq!(lasts(batch_of(3)).0, [(0, false), (1, false), (2, true)]);
    let two = [batch_of(2), batch_of(1)].concat();
    assert_eq!(lasts(two), (vec![(0, false), (1, false), (2, true)], None));
    let empty = v1::V1BatchFields::default();
    let mut trailing_empty = bytes::BytesMut::from(&batch_of(2)[..]);
    empty.encode(&mut trailing_empty).unwrap();
    let (recs, err) = lasts(trailing_empty.to_vec());
    assert_eq!((recs, err), (vec![(0, false), (1, true)], None));
    // The SRFB envelope's content the same way.
    let mut b = BatchBuilder::with_capacity(
        BatchParams::default(),
        Envelope::Srfb(Compression::Gzip),
        64,
    );
    b.append(0, None, Some(b"a")).unwrap();
    b.append(0, None, Some(b"b")).unwrap();
    assert_eq!(
        lasts(b.finish().unwrap().to_vec()).0,
        [(0, false), (1, true)]
    );
}

#[test]
fn the_record_before_a_corrupt_remainder_is_not_the_last() {
    // Garbage after the last batch: the record before it is not known as the last, and the
    // walk ends with the error.
    let (recs, err) = lasts([batch_of(2), b"xx".to_vec()].concat());
    assert_eq!(recs, [(0, false), (1, false)]);
    assert!(err.is_some());
    // Bytes left over inside the batch (its length and CRC cover them).
    let mut bad = batch_of(2);
    bad.extend_from_slice(b"yy");
    let len = i32::from_be_bytes(bad[4..8].try_into().unwrap()) + 2;
    bad[4..8].copy_from_slice(&len.to_be_bytes());
    let crc = super::checksum::crc32c(&bad[17..]);
    bad[13..17].copy_from_slice(&crc.to_be_bytes());
    let (recs, err) = lasts(bad);
    assert_eq!(recs, [(0, false), (1, false)]);
    assert!(
        matches!(err, Some(BatchError::V1TrailingBytes { extra: 2, .. })),
        "{err:?}"
    );
}
