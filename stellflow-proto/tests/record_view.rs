//! Borrowed record views (`BlobRecords::next_view`) and records built from their parts
//! (`BlobRecords::next_with`) yield exactly what the owned iteration yields: the same
//! records, indexes, keys, values, headers, errors and blob ends, over v1 blobs of several
//! batches and gzip SRFB envelopes.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use stellflow_proto::record::{BatchBuilder, BatchParams, Compression, Envelope, blob_records};

type Owned = (
    u32,
    u32,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Option<Vec<u8>>, Option<Vec<u8>>)>,
);

fn batch(envelope: Envelope, n: usize, base: usize) -> Bytes {
    let mut b = BatchBuilder::with_capacity(BatchParams::default(), envelope, 4096);
    for i in 0..n {
        let v = format!("value-{}", base + i);
        let k = format!("k{i}");
        if i % 3 == 0 {
            let h = [("h", Some(v.as_bytes()))];
            b.append_with_headers(i as i64, Some(k.as_bytes()), Some(v.as_bytes()), h)
                .unwrap();
        } else if i % 3 == 1 {
            b.append(i as i64, None, Some(v.as_bytes())).unwrap();
        } else {
            b.append(i as i64, Some(k.as_bytes()), None).unwrap();
        }
    }
    b.finish().unwrap()
}

fn owned(blob: Bytes) -> Vec<Result<Owned, String>> {
    blob_records(blob)
        .map(|r| {
            r.map(|r| {
                let h = r
                    .record
                    .headers
                    .iter_raw()
                    .map(|(k, v)| (k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)))
                    .collect();
                (
                    r.index_in_blob,
                    r.batch_index,
                    r.record.timestamp,
                    r.record.key.map(|k| k.to_vec()),
                    r.record.value.map(|v| v.to_vec()),
                    h,
                )
            })
            .map_err(|e| e.to_string())
        })
        .collect()
}

fn viewed(blob: Bytes) -> Vec<Result<Owned, String>> {
    let mut records = blob_records(blob);
    let mut out = Vec::new();
    while let Some(r) = records.next_view() {
        out.push(
            r.map(|r| {
                let h = r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)))
                    .collect();
                (
                    r.index_in_blob,
                    r.batch_index,
                    r.timestamp,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                    h,
                )
            })
            .map_err(|e| e.to_string()),
        );
    }
    assert!(records.next_view().is_none(), "fused");
    out
}

/// Whether each record the owned iteration yields is its blob's last (`at_end` after it).
fn owned_ends(blob: Bytes) -> Vec<bool> {
    let mut records = blob_records(blob);
    let mut out = Vec::new();
    while let Some(r) = records.next() {
        if r.is_ok() {
            out.push(records.at_end());
        }
    }
    out
}

/// The records built by `next_with`, and whether each was its blob's last.
fn built(blob: Bytes) -> (Vec<Result<Owned, String>>, Vec<bool>) {
    let format = stellflow_proto::record::sniff(&blob);
    let mut records = blob_records(blob);
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    while let Some(r) = records.next_with(|p| {
        assert_eq!(p.format(), format);
        let headers = p.headers();
        let h = headers
            .iter_raw()
            .map(|(k, v)| (k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)))
            .collect();
        let (key, value) = (p.key(), p.value());
        let len = key.as_ref().map_or(0, |k| k.len()) + value.as_ref().map_or(0, |v| v.len());
        assert_eq!(p.key_and_value_len(), len);
        ends.push(p.is_last_in_blob());
        (
            p.index_in_blob(),
            p.batch_index(),
            p.timestamp(),
            key.map(|k| k.to_vec()),
            value.map(|v| v.to_vec()),
            h,
        )
    }) {
        out.push(r.map_err(|e| e.to_string()));
    }
    assert!(records.next_with(|_| ()).is_none(), "fused");
    (out, ends)
}

#[test]
fn views_match_owned_records_over_formats_batches_and_corruption() {
    let mut v1 = batch(Envelope::V1, 7, 0).to_vec();
    v1.extend_from_slice(&batch(Envelope::V1, 5, 7));
    let blobs = [
        Bytes::from(v1.clone()),
        batch(Envelope::Srfb(Compression::Gzip), 9, 0),
        batch(Envelope::Srfb(Compression::None), 4, 0),
        Bytes::new(),
    ];
    for blob in blobs {
        let a = owned(blob.clone());
        assert_eq!(a, viewed(blob.clone()));
        assert_eq!((a, owned_ends(blob.clone())), built(blob));
    }
    // A corrupt second batch: the first batch's records, then the same error.
    let mut bad = v1.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let bad = Bytes::from(bad);
    let a = owned(bad.clone());
    assert!(a.last().unwrap().is_err());
    assert_eq!(a.len(), 8);
    assert_eq!(a, viewed(bad.clone()));
    let (b, ends) = built(bad.clone());
    assert_eq!(a, b);
    assert_eq!(ends, owned_ends(bad));
    assert!(
        !ends.contains(&true),
        "a corrupt remainder follows every record"
    );
}
