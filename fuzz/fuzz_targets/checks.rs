//! The property each fuzz target checks, shared by the cargo-fuzz targets and by the replay test
//! in `stellflow-proto/tests/fuzz_regressions.rs` (which runs every input kept under
//! `fuzz/regressions/<target>/`). Each function must return normally for any input: a panic is
//! a bug.

use bytes::{Bytes, BytesMut};
use stellflow_proto::frame::{decode_request, split_response};
use stellflow_proto::record::{SrfbBatch, V1Batch, blob_records, split_blob};
use stellflow_proto::{ApiKey, Describe, FrameDecoder, ResponseBody};

/// The incremental frame decoder fed arbitrary bytes in chunks of 1..=17 bytes (the first byte
/// picks the size), with a 4 KiB limit so the oversize path is reached; every payload it yields
/// is split as a response.
pub fn frame_decoder(data: &[u8]) {
    let Some((&chunk_seed, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk_seed % 17) + 1;
    let mut decoder = FrameDecoder::with_max_frame_length(4096);
    let mut buf = BytesMut::new();
    for piece in rest.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(payload)) => {
                    assert!(
                        payload.len() + 4 <= 4096,
                        "frame over the limit was accepted"
                    );
                    let _ = split_response(payload);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Every response decoder: the first two bytes pick the API key (unknown keys are folded onto
/// a registered one), the rest is the body. A decoded body must describe and re-encode.
pub fn responses(data: &[u8]) {
    let [hi, lo, body @ ..] = data else {
        return;
    };
    let key = ApiKey(i16::from_be_bytes([*hi, *lo]));
    let key = if key.is_known() {
        key
    } else {
        ApiKey::ALL[usize::from(*lo) % ApiKey::ALL.len()]
    };
    if let Ok(decoded) = ResponseBody::decode(key, Bytes::copy_from_slice(body)) {
        let _ = decoded.describe();
        let mut out = BytesMut::new();
        decoded.encode(&mut out);
    }
}

/// The request side (what the simulated broker decodes): a whole request payload, header and
/// body, parsed the way the server does.
pub fn requests(data: &[u8]) {
    let _ = decode_request(Bytes::copy_from_slice(data));
}

/// The v1 batch decoder: parse, then walk every record and its headers.
pub fn v1_batch(data: &[u8]) {
    if let Ok(batch) = V1Batch::parse(Bytes::copy_from_slice(data)) {
        for record in batch.records() {
            let Ok(record) = record else { break };
            let _ = record.key.as_ref().map(|k| k.len());
            let _ = record.value.as_ref().map(|v| v.len());
            let _ = record.headers.iter().count();
        }
    }
}

/// The SRFB validator, including bounded gzip inflation: accepted content always has the
/// declared uncompressed length.
pub fn srfb(data: &[u8]) {
    if let Ok(batch) = SrfbBatch::validate(Bytes::copy_from_slice(data)) {
        assert_eq!(
            batch.content().len() as i64,
            i64::from(batch.header().uncompressed_length),
            "content length disagrees with the header"
        );
    }
}

/// The blob splitter and the whole-blob record iterator over both formats: record indexes
/// strictly increase.
pub fn splitter(data: &[u8]) {
    let blob = Bytes::copy_from_slice(data);
    for batch in split_blob(blob.clone()) {
        if batch.is_err() {
            break;
        }
    }
    let mut last = None;
    for record in blob_records(blob) {
        let Ok(record) = record else { break };
        if let Some(prev) = last {
            assert!(record.index_in_blob > prev, "indexes must increase");
        }
        last = Some(record.index_in_blob);
    }
}
