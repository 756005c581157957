//! The SRFB validator (including bounded gzip inflation).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::record::SrfbBatch;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = SrfbBatch::validate(Bytes::copy_from_slice(data)) {
        assert!(batch.content().len() as i64 == i64::from(batch.header().uncompressed_length));
    }
});
