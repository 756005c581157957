//! Golden vectors: every case in `data/INDEX.json` (beside this file) decodes to exactly its
//! `fields` and re-encodes to exactly its `hex`; every `invalid_*` case is rejected. The test fails
//! if an indexed case is not exercised, or if the vectors are missing.
//!
//! The vectors (`data/`, with their README and `CROSS_CHECK.md`) are bytes produced by the real
//! server's own codecs, copied into this package unchanged so the test runs from a fresh clone or
//! a published tarball. Every run prints `golden: N cases`. To check another copy of the vectors
//! (say, a newer set), point `STELLFLOW_GOLDEN_DIR` at its directory.

mod batches;
mod messages;
mod util;

use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    match std::env::var_os("STELLFLOW_GOLDEN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("golden")
            .join("data"),
    }
}

/// A plain `main` (`harness = false` in Cargo.toml), so the `golden: N cases` line shows in
/// every `cargo test` run, not only with `--nocapture`; a failed case panics (exit code 101).
fn main() {
    golden_vectors();
}

fn golden_vectors() {
    let dir = golden_dir();
    let index_path = dir.join("INDEX.json");
    let index_text = std::fs::read_to_string(&index_path).unwrap_or_else(|e| {
        panic!(
            "cannot read the golden index {}: {e} (the vectors live in tests/golden/data of \
             stellflow-proto; restore them from the repository)",
            index_path.display()
        )
    });
    let index: serde_json::Value = serde_json::from_str(&index_text).expect("parse INDEX.json");
    let cases = index["cases"].as_array().expect("cases array");
    let declared = index["caseCount"].as_u64().expect("caseCount") as usize;
    assert_eq!(
        cases.len(),
        declared,
        "INDEX.json caseCount disagrees with its list"
    );

    let mut failures = Vec::new();
    let mut exercised = 0usize;
    for entry in cases {
        let file = entry["file"].as_str().expect("file");
        let case: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).expect("read case"))
                .expect("parse case");
        let hex = util::unhex(case["hex"].as_str().expect("hex"));
        let area = entry["area"].as_str().expect("area");
        let result = match area {
            "record_batch_stable" | "record_batch_v1" => batches::check(&case, &hex),
            _ => messages::check(&case, &hex),
        };
        match result {
            Ok(()) => exercised += 1,
            Err(e) => failures.push(format!("{file}: {e}")),
        }
    }
    println!("golden: {exercised} cases");
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(exercised, declared, "not every indexed case was exercised");
}
