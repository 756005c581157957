//! Golden vectors: every case in `../shared/golden/INDEX.json` (relative to the repository root)
//! decodes to exactly its `fields` and re-encodes to exactly its `hex`; every `invalid_*` case is
//! rejected. The test fails if an indexed case is not exercised.
//!
//! Run with `--nocapture` to see the `golden: N cases` line. When the golden directory is absent
//! the test fails if `STELLFLOW_REQUIRE_GOLDEN=1`, and otherwise says loudly that it skipped.

mod batches;
mod messages;
mod util;

use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("shared")
        .join("golden")
}

#[test]
fn golden_vectors() {
    let dir = golden_dir();
    let index_path = dir.join("INDEX.json");
    if !index_path.exists() {
        if std::env::var("STELLFLOW_REQUIRE_GOLDEN").as_deref() == Ok("1") {
            panic!(
                "golden vectors not found at {} but STELLFLOW_REQUIRE_GOLDEN=1",
                index_path.display()
            );
        }
        eprintln!(
            "\n!!!!!! golden: SKIPPED — {} not found !!!!!!\n",
            index_path.display()
        );
        return;
    }
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).expect("read INDEX.json"))
            .expect("parse INDEX.json");
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
