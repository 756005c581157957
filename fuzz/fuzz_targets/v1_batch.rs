//! The v1 batch decoder: parse, then walk every record and header.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::record::V1Batch;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = V1Batch::parse(Bytes::copy_from_slice(data)) {
        for record in batch.records() {
            let Ok(record) = record else { break };
            let _ = record.key.as_ref().map(|k| k.len());
            let _ = record.value.as_ref().map(|v| v.len());
            let _ = record.headers.iter().count();
        }
    }
});
