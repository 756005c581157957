//! Fuzz target `srfb`: see `checks::srfb`.
#![no_main]

#[path = "checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::srfb(data));
