//! The blob splitter and the whole-blob record iterator, over both formats.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::record::{blob_records, split_blob};

fuzz_target!(|data: &[u8]| {
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
});
