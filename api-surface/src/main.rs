//! Records the public API of every published library crate of the workspace, from rustdoc
//! JSON, and checks it against the files in `public-api/` (one per crate: every item,
//! every method of every type, every trait implementation but the blanket ones).
//!
//! ```text
//! cargo run -p stellflow-api-surface -- --toolchain <nightly> [--bless]
//! ```
//!
//! Without `--bless` it exits 1 when a crate's surface differs from its file, printing the
//! lines removed and added; with it, it rewrites the files. rustdoc's JSON output needs a
//! nightly toolchain, and its format changes between nightlies: the toolchain is an argument
//! (`.ci/run` pins one by its date), and a toolchain whose format this tool cannot read is
//! refused with both format versions named, never skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Where the recorded surfaces live, relative to the workspace root.
const RECORD_DIR: &str = "public-api";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("api-surface: {e}");
            ExitCode::from(2)
        }
    }
}

struct Args {
    toolchain: String,
    bless: bool,
}

fn args() -> Result<Args, String> {
    let mut toolchain = None;
    let mut bless = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bless" => bless = true,
            "--toolchain" => toolchain = Some(it.next().ok_or("--toolchain needs a value")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        toolchain: toolchain.ok_or("--toolchain <nightly> is required")?,
        bless,
    })
}

/// A library crate of the workspace that is published (no `publish = false`).
struct Published {
    name: String,
    lib_name: String,
}

fn workspace_root() -> PathBuf {
    // This crate sits one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn published(root: &Path) -> Result<Vec<Published>, String> {
    let out = Command::new("cargo")
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let mut crates = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        // `publish: null` means publishable anywhere; `[]` is `publish = false`.
        if !p["publish"].is_null() {
            continue;
        }
        let lib = p["targets"].as_array().into_iter().flatten().find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib"))
        });
        let (Some(name), Some(lib)) = (p["name"].as_str(), lib) else {
            continue; // a binary only (the CLI): its surface is its command line
        };
        crates.push(Published {
            name: name.to_owned(),
            lib_name: lib["name"].as_str().unwrap_or(name).replace('-', "_"),
        });
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// The crate's public API, one item per line, sorted.
fn surface(root: &Path, toolchain: &str, krate: &Published) -> Result<String, String> {
    let target = root.join("target").join("api-surface");
    let status = Command::new("cargo")
        .arg(format!("+{toolchain}"))
        .args([
            "rustdoc",
            "--quiet",
            "--lib",
            "-p",
            &krate.name,
            "--target-dir",
        ])
        .arg(&target)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .current_dir(root)
        // The outer `cargo run` names its own toolchain; the `+toolchain` above must win.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .status()
        .map_err(|e| format!("cannot run cargo +{toolchain} rustdoc: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo +{toolchain} rustdoc -p {} failed",
            krate.name
        ));
    }
    let json = target.join("doc").join(format!("{}.json", krate.lib_name));
    let api = public_api::Builder::from_rustdoc_json(&json)
        .omit_blanket_impls(true)
        .build()
        .map_err(|e| {
            format!(
                "{}: {e} (is {toolchain} the pinned nightly?)",
                json.display()
            )
        })?;
    let mut text = String::new();
    for item in api.items() {
        text.push_str(&item.to_string());
        text.push('\n');
    }
    Ok(text)
}

fn run() -> Result<bool, String> {
    let args = args()?;
    let root = workspace_root();
    let dir = root.join(RECORD_DIR);
    let crates = published(&root)?;
    if crates.is_empty() {
        return Err("no published library crate found".into());
    }
    let mut same = true;
    let mut expected = BTreeSet::new();
    for krate in &crates {
        let now = surface(&root, &args.toolchain, krate)?;
        let file = dir.join(format!("{}.txt", krate.name));
        expected.insert(file.clone());
        if args.bless {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::write(&file, &now).map_err(|e| format!("{}: {e}", file.display()))?;
            println!(
                "public API: recorded {} ({} items)",
                krate.name,
                now.lines().count()
            );
            continue;
        }
        let recorded = std::fs::read_to_string(&file).unwrap_or_default();
        if recorded == now {
            println!(
                "public API: {} unchanged ({} items)",
                krate.name,
                now.lines().count()
            );
            continue;
        }
        same = false;
        let was: BTreeSet<&str> = recorded.lines().collect();
        let is: BTreeSet<&str> = now.lines().collect();
        eprintln!(
            "public API of {} differs from {}/{}.txt:",
            krate.name, RECORD_DIR, krate.name
        );
        for gone in was.difference(&is) {
            eprintln!("  - {gone}");
        }
        for new in is.difference(&was) {
            eprintln!("  + {new}");
        }
    }
    // A file for a crate that is no longer published (or renamed) is stale.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "txt") && !expected.contains(&path) {
                if args.bless {
                    std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                } else {
                    same = false;
                    eprintln!("{} names no published crate", path.display());
                }
            }
        }
    }
    if !same {
        eprintln!(
            "If the change is intended, re-record with \
             `cargo run -p stellflow-api-surface -- --toolchain <the nightly .ci/run pins> --bless` \
             and commit {RECORD_DIR}/ (removed lines are breaking changes for users)."
        );
    }
    Ok(same)
}
