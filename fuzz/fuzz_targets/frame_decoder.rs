//! Fuzz target `frame_decoder`: see `checks::frame_decoder`.
#![no_main]

#[path = "checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::frame_decoder(data));
