//! The request side (what the simulated broker decodes): a whole request payload — header and
//! body — parsed the way the server does.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::frame::decode_request;

fuzz_target!(|data: &[u8]| {
    let _ = decode_request(Bytes::copy_from_slice(data));
});
