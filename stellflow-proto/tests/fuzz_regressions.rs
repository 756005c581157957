//! Replays every input kept under `fuzz/regressions/<target>/` through the same check the
//! cargo-fuzz target runs (`fuzz/fuzz_targets/checks.rs`), so a crash found once stays fixed.
//! The kept inputs are crashing inputs from past runs plus a sample of each target's
//! coverage-rich corpus.

#[allow(dead_code)]
#[path = "../../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        let data = std::fs::read(&path).expect("read input");
        check(&data);
        n += 1;
    }
    assert!(n > 0, "no inputs kept for fuzz target {target}");
    n
}

#[test]
fn frame_decoder_inputs() {
    replay("frame_decoder", checks::frame_decoder);
}

#[test]
fn response_decoder_inputs() {
    replay("responses", checks::responses);
}

#[test]
fn request_decoder_inputs() {
    replay("requests", checks::requests);
}

#[test]
fn v1_batch_inputs() {
    replay("v1_batch", checks::v1_batch);
}

#[test]
fn srfb_inputs() {
    replay("srfb", checks::srfb);
}

#[test]
fn splitter_inputs() {
    replay("splitter", checks::splitter);
}
