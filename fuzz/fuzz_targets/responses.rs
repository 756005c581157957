//! Every response decoder: the first two bytes pick the API key (any i16, so unknown keys are
//! covered), the rest is the body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::{ApiKey, Describe, ResponseBody};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let key = ApiKey(i16::from_be_bytes([data[0], data[1]]));
    // Map most inputs onto a registered key so the real decoders get the traffic.
    let key = if key.is_known() {
        key
    } else {
        ApiKey::ALL[usize::from(data[1]) % ApiKey::ALL.len()]
    };
    let body = Bytes::copy_from_slice(&data[2..]);
    if let Ok(decoded) = ResponseBody::decode(key, body) {
        let _ = decoded.describe();
        let mut out = bytes::BytesMut::new();
        decoded.encode(&mut out);
    }
});
