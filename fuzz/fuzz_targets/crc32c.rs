//! Fuzz target `crc32c`: see `checks::crc32c`.
#![no_main]

#[path = "checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::crc32c(data));
