//! Records stellflow-sansio's public surface: every `pub mod` and `pub use` of the crate root,
//! compared with the checked-in `tests/public-api.txt`, so that a change to what the crate
//! exports shows up in review as a change to that file.
//!
//! After a deliberate change, rewrite the list with
//! `STELLFLOW_BLESS=1 cargo test -p stellflow-sansio --test public_api` and commit it.

use std::path::Path;

/// The names a `use` tree exports, each as its full path (`a::{B, c::D as E}` gives `a::B`
/// and `a::c::D as E`).
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').expect("a closing brace")];
        let prefix = join(prefix, head);
        // Split on the commas of this level only.
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&prefix, &inner[start..], out);
    } else if !tree.is_empty() {
        out.push(join(prefix, tree));
    }
}

fn join(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}::{path}"),
    }
}

/// The crate root's public modules and re-exports, one per line, sorted.
fn surface(lib: &str) -> Vec<String> {
    // Drop comments (doc comments included), then read item by item up to each `;`.
    let code: String = (lib.lines())
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for item in code.split(';') {
        let item = item.split_whitespace().collect::<Vec<_>>().join(" ");
        // Attributes (`#[cfg(..)]`, the crate's `#![..]`) may precede the item.
        let start = ["pub mod ", "pub use "]
            .iter()
            .filter_map(|k| item.rfind(k))
            .max();
        let Some(start) = start else { continue };
        let item = &item[start..];
        if let Some(name) = item.strip_prefix("pub mod ") {
            out.push(format!("mod {}", name.trim()));
        } else if let Some(tree) = item.strip_prefix("pub use ") {
            let mut names = Vec::new();
            expand("", tree, &mut names);
            out.extend(names.into_iter().map(|n| format!("use {n}")));
        }
    }
    out.sort();
    out
}

#[test]
fn public_surface_matches_the_recorded_list() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).expect("src/lib.rs");
    let now = surface(&lib).join("\n") + "\n";
    let file = dir.join("tests/public-api.txt");
    if std::env::var_os("STELLFLOW_BLESS").is_some() {
        std::fs::write(&file, &now).expect("write tests/public-api.txt");
        return;
    }
    let recorded = std::fs::read_to_string(&file).unwrap_or_default();
    if recorded != now {
        let (was, is): (Vec<&str>, Vec<&str>) = (recorded.lines().collect(), now.lines().collect());
        let gone: Vec<_> = was.iter().filter(|l| !is.contains(l)).collect();
        let new: Vec<_> = is.iter().filter(|l| !was.contains(l)).collect();
        panic!(
            "stellflow-sansio's public surface changed.\n  removed: {gone:?}\n  added: {new:?}\n\
             If that is intended, re-record it with \
             `STELLFLOW_BLESS=1 cargo test -p stellflow-sansio --test public_api` and commit \
             tests/public-api.txt (a breaking change for users when something was removed)."
        );
    }
}

#[test]
fn the_reader_sees_nested_trees_and_renames() {
    let lib = "//! doc\n#![doc = include_str!(\"p.md\")]\n#![forbid(unsafe_code)]\npub mod a;\n\
               mod hidden;\npub(crate) use x::Y;\n#[cfg(test)]\nmod tests;\n\
               pub use b::{C, d::{E, F as G}};\npub use h::I;\n";
    assert_eq!(
        surface(lib),
        [
            "mod a",
            "use b::C",
            "use b::d::E",
            "use b::d::F as G",
            "use h::I"
        ]
    );
}
