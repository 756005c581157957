//! The incremental frame decoder fed arbitrary bytes in arbitrary chunks, with a small limit so
//! the oversize path is reached too. Every payload it yields is then split as a response.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use stellflow_proto::FrameDecoder;
use stellflow_proto::frame::split_response;

fuzz_target!(|data: &[u8]| {
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
                    assert!(payload.len() + 4 <= 4096);
                    let _ = split_response(payload);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
