//! Zero allocations per record: appending records to a reserved builder, and decoding a blob
//! while touching every key, value and header, allocate a number of times that does not depend
//! on the number of records (appending: not at all).
//!
//! The counting global allocator (`alloc-counter`) counts per thread, so only this test's own
//! allocations are seen, whatever the harness's other threads do.
#![allow(clippy::unwrap_used)]

use alloc_counter::allocations_during;
use bytes::Bytes;
use stellflow_proto::record::{
    BatchBuilder, BatchParams, Compression, Envelope, V1Batch, blob_records,
};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const VALUE: [u8; 100] = [7; 100];
const HEADER_VALUE: [u8; 8] = [1; 8];

/// Allocations for: appending `n` records, finishing, decoding the batch directly, and
/// iterating the blob — each touching every key, value and header.
fn measure(n: usize, envelope: Envelope) -> [usize; 4] {
    let params = BatchParams {
        base_timestamp: 1_000,
        ..BatchParams::default()
    };
    let mut builder = BatchBuilder::with_capacity(params, envelope, n * 200 + 200);
    let keys: Vec<[u8; 8]> = (0..n as u64).map(u64::to_be_bytes).collect();
    let append = allocations_during(|| {
        for (i, key) in keys.iter().enumerate() {
            builder
                .append_with_headers(
                    1_000 + i as i64,
                    Some(key),
                    Some(&VALUE),
                    [("trace", Some(&HEADER_VALUE[..]))],
                )
                .unwrap();
        }
    });
    let mut blob = Bytes::new();
    let finish = allocations_during(|| blob = builder.finish().unwrap());

    let mut sum = 0u64;
    let touch = |sum: &mut u64, r: &stellflow_proto::record::Record| {
        *sum += u64::from(r.key.as_ref().unwrap()[7]);
        *sum += u64::from(r.value.as_ref().unwrap()[99]);
        for h in r.headers.iter() {
            *sum += h.key.as_ref().unwrap().len() as u64;
            *sum += u64::from(h.value.as_ref().unwrap()[0]);
        }
    };
    let decode = allocations_during(|| {
        if envelope == Envelope::V1 {
            let batch = V1Batch::parse(blob.clone()).unwrap();
            for r in batch.records() {
                touch(&mut sum, &r.unwrap());
            }
        }
    });
    let iterate = allocations_during(|| {
        for r in blob_records(blob.clone()) {
            touch(&mut sum, &r.unwrap().record);
        }
    });
    let passes = if envelope == Envelope::V1 { 2 } else { 1 };
    // Per record: key byte, value byte 7, header key length 5, header value byte 1.
    let per_pass: u64 = keys.iter().map(|k| u64::from(k[7]) + 7 + 5 + 1).sum();
    assert_eq!(sum, passes * per_pass, "every record was touched");
    [append, finish, decode, iterate]
}

#[test]
fn allocations_do_not_depend_on_the_record_count() {
    for envelope in [
        Envelope::V1,
        Envelope::Srfb(Compression::None),
        Envelope::Srfb(Compression::Gzip),
    ] {
        // Warm up lazily initialised state (CPU feature detection and the like).
        measure(3, envelope);
        let small = measure(10, envelope);
        let large = measure(5_000, envelope);
        println!(
            "{envelope:?}: [append, finish, decode, iterate] allocations: 10 records {small:?}, 5000 records {large:?}"
        );
        assert_eq!(small[0], 0, "appending to a reserved builder allocates");
        assert_eq!(large[0], 0, "appending to a reserved builder allocates");
        if envelope != Envelope::Srfb(Compression::Gzip) {
            // Gzip output grows with the input; everything else is a constant.
            assert_eq!(
                small[1], large[1],
                "finish allocations depend on the record count"
            );
        }
        assert_eq!(small[2], large[2], "decoding allocates per record");
        assert_eq!(small[3], large[3], "the blob iterator allocates per record");
    }
}
