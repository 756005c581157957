//! Keeps `docs/observability.md` honest: every `tracing` span and event the client emits
//! (every `tracing::<level>!` and `tracing::<level>_span!` in the core's and the adapters'
//! sources) has a row in its tables with the same kind, level and message or span name, and
//! every row names one that exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

type Item = (String, String, String); // kind, level, text

const LEVELS: [&str; 5] = ["trace", "debug", "info", "warn", "error"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The string literals at the top level of the macro call whose arguments start at `i`,
/// with `\`-newline continuations joined.
fn literals(s: &[u8], mut i: usize) -> Vec<String> {
    let (mut depth, mut lits) = (1, Vec::new());
    while depth > 0 && i < s.len() {
        match s[i] {
            b'"' => {
                let mut j = i + 1;
                let mut text = Vec::new();
                while j < s.len() && s[j] != b'"' {
                    if s[j] == b'\\' && s.get(j + 1) == Some(&b'\n') {
                        j += 2;
                        while j < s.len() && (s[j] == b' ' || s[j] == b'\t') {
                            j += 1;
                        }
                        continue;
                    }
                    if s[j] == b'\\' {
                        text.extend_from_slice(&s[j..(j + 2).min(s.len())]);
                        j += 2;
                        continue;
                    }
                    text.push(s[j]);
                    j += 1;
                }
                if depth == 1 {
                    lits.push(String::from_utf8_lossy(&text).into_owned());
                }
                i = j + 1;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    lits
}

fn emitted() -> BTreeSet<Item> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["stellflow-sansio/src", "runtime-async/src"] {
        sources(&root.join(dir), &mut files);
    }
    let mut items = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        for line_start in text.match_indices('\n').map(|(i, _)| i + 1) {
            let line = &text[line_start..];
            let line = &line[..line.find('\n').unwrap_or(line.len())];
            let code = line.trim_start();
            if code.starts_with("//") {
                continue; // doc examples and comments
            }
            let mut from = 0;
            while let Some(at) = line[from..].find("tracing::") {
                let rest = &line[from + at + "tracing::".len()..];
                from += at + "tracing::".len();
                for level in LEVELS {
                    for (suffix, kind) in [("_span!(", "span"), ("!(", "event")] {
                        let head = format!("{level}{suffix}");
                        if rest.starts_with(&head) {
                            let args = line_start + from + head.len();
                            let lits = literals(text.as_bytes(), args);
                            let t = if kind == "span" {
                                lits.first()
                            } else {
                                lits.last()
                            };
                            let t = t.cloned().unwrap_or_default();
                            items.insert((kind.to_owned(), level.to_owned(), t));
                        }
                    }
                }
            }
        }
    }
    items
}

fn documented() -> BTreeSet<Item> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md");
    let text = std::fs::read_to_string(doc).expect("docs/observability.md");
    let mut items = BTreeSet::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| kind | level | `text` | ... |`
        if cols.len() >= 4 && (cols[1] == "span" || cols[1] == "event") {
            let t = cols[3].trim_matches('`').to_owned();
            items.insert((cols[1].to_owned(), cols[2].to_owned(), t));
        }
    }
    items
}

#[test]
fn every_span_and_event_is_documented() {
    let (code, doc) = (emitted(), documented());
    assert!(code.len() > 40, "the scan found only {} items", code.len());
    let missing: Vec<_> = code.difference(&doc).collect();
    let stale: Vec<_> = doc.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/observability.md is out of date.\nemitted but not listed: {missing:#?}\nlisted but not emitted: {stale:#?}"
    );
}
