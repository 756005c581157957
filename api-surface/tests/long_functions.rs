//! Functions over [`LIMIT`] lines in the core and the adapters: a long
//! function is cut into named steps, or carries its reason in [`ALLOWED`].
//!
//! `cargo test -p stellflow-api-surface --test long_functions -- --nocapture` prints every
//! function over the limit with its length. The test fails on one that is not listed in
//! [`ALLOWED`], and on a listed one that is no longer long (so the list does not rot).
//!
//! What is counted: every `fn` with a body in `stellflow-sansio/src` and `runtime-*/src`, from
//! the line of `fn` to the line of its closing brace. Test code (`#[cfg(test)] mod ..` blocks
//! and `#[test]` functions) is skipped: a test reads top to bottom as one story.

mod common;
use common::rust_files;

use std::path::{Path, PathBuf};

/// The longest a function may be without a reason listed below.
const LIMIT: usize = 80;

/// Functions allowed over [`LIMIT`]: `(file below the workspace, fn name, reason)`. A reason
/// "not cut yet" is a debt, not a reason: cut the function and drop its line.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "stellflow-sansio/src/admin/complete.rs",
        "single_result",
        "one flat arm per one-request admin answer, each decoding into its result type: a table",
    ),
    (
        "stellflow-sansio/src/admin/start.rs",
        "start",
        "one flat arm per admin command building its request: a table",
    ),
    (
        "stellflow-sansio/src/consumer_config.rs",
        "validate",
        "one independent check per field, in field order: a list",
    ),
    (
        "stellflow-sansio/src/metrics.rs",
        "publish",
        "one independent counter or gauge per figure, in order: a list",
    ),
];

/// One function found: where, its name and its length in lines.
#[derive(Debug)]
struct Found {
    file: String,
    name: String,
    line: usize,
    lines: usize,
}

/// The source with comments, string and char literals blanked to spaces (newlines kept), so
/// braces are counted on code only.
fn blank_non_code(text: &str) -> Vec<u8> {
    let s = text.as_bytes();
    let mut out = s.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(s.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(s.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0usize;
            let mut j = i;
            while j < s.len() {
                if s[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if s[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (rest.starts_with(b"r#") || rest.starts_with(b"r\""))
            && (i == 0 || !(s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_'))
        {
            let hashes = rest[1..].iter().take_while(|&&b| b == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                i += 1; // a raw identifier (`r#type`)
                continue;
            }
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = i + 2 + hashes;
            let end = s[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(s.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != b'"' {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if rest[0] == b'\'' {
            // A char literal (`'{'`, `'\n'`, `'\u{7b}'`) or a lifetime (`'a`).
            let end = if rest.get(1) == Some(&b'\\') {
                rest[2..]
                    .iter()
                    .position(|&b| b == b'\'')
                    .map(|p| i + 2 + p)
            } else if rest.get(2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                // Multi-byte chars: a `'` within four bytes closes it.
                (2..=5)
                    .find(|&k| rest.get(k) == Some(&b'\'') && !rest[1].is_ascii())
                    .map(|k| i + k)
            };
            match end {
                Some(e) => {
                    blank(&mut out, i, e + 1);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The byte index of the `}` closing the `{` at `open`, in blanked code.
fn closing(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    code.len()
}

fn line_of(code: &[u8], at: usize) -> usize {
    code[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every function with a body in `text` that is not test code.
fn functions(file: &str, text: &str) -> Vec<Found> {
    let code = blank_non_code(text);
    // Test blocks: `#[cfg(test)]` then `mod name {`, and `#[test]` functions.
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    let as_str = String::from_utf8_lossy(&code).into_owned();
    for (marker, what) in [("#[cfg(test)]", &b"mod"[..]), ("#[test]", &b"fn"[..])] {
        let mut from = 0;
        while let Some(p) = as_str[from..].find(marker) {
            let at = from + p + marker.len();
            from = at;
            let tail = as_str[at..].trim_start();
            let tail = tail.strip_prefix("pub(crate) ").unwrap_or(tail);
            let tail = tail.strip_prefix("async ").unwrap_or(tail);
            if tail.as_bytes().starts_with(what)
                && let Some(open) = as_str[at..].find(['{', ';']).map(|q| at + q)
                && code[open] == b'{'
            {
                skipped.push((at, closing(&code, open)));
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < code.len() {
        let at_fn = code[i..].starts_with(b"fn ")
            && (i == 0 || !is_word(code[i - 1]))
            && !skipped.iter().any(|&(a, b)| a <= i && i <= b);
        if !at_fn {
            i += 1;
            continue;
        }
        let name_start = i + 3;
        let name_end = name_start
            + code[name_start..]
                .iter()
                .take_while(|&&b| is_word(b))
                .count();
        let name = String::from_utf8_lossy(&code[name_start..name_end]).into_owned();
        // The body: the first `{` (or `;`, no body) outside `(..)`, `[..]` and `<..>`.
        let mut depth = 0i32;
        let mut j = name_end;
        let mut open = None;
        while j < code.len() {
            match code[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                b';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        if let Some(open) = open
            && !name.is_empty()
        {
            let close = closing(&code, open);
            let first = line_of(&code, i);
            let last = line_of(&code, close.min(code.len() - 1));
            out.push(Found {
                file: file.to_owned(),
                name,
                line: first,
                lines: last - first + 1,
            });
        }
        i = name_end;
    }
    out
}

/// The functions over [`LIMIT`] in the checked source folders.
fn long_functions() -> Vec<Found> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![root.join("stellflow-sansio/src")];
    let mut runtimes: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("workspace root readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("runtime-"))
        })
        .map(|p| p.join("src"))
        .collect();
    runtimes.sort();
    dirs.extend(runtimes);
    let mut files = Vec::new();
    for d in &dirs {
        rust_files(d, &mut files);
    }
    files.sort();
    assert!(files.len() > 20, "too few sources read below {root:?}");
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("below the root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(f).expect("readable source");
        found.extend(
            functions(&rel, &text)
                .into_iter()
                .filter(|f| f.lines > LIMIT),
        );
    }
    found
}

#[test]
fn the_scanner_counts_bodies_and_skips_test_code() {
    let text = r##"
fn short() -> u8 {
    let c = '{';
    let s = "}}}";
    let r = r#"{"#;
    // }
    1
}

fn generic<'a, T: Into<&'a str>>(t: T) -> impl Fn() -> u8 where T: Clone {
    move || { 2 }
}

trait X { fn declared(&self); }

#[cfg(test)]
mod tests {
    fn inside_tests() {}
}

#[test]
fn a_test() {}
"##;
    let got: Vec<(String, usize)> = functions("x.rs", text)
        .into_iter()
        .map(|f| (f.name, f.lines))
        .collect();
    assert_eq!(got, [("short".to_owned(), 7), ("generic".to_owned(), 3)]);
}

#[test]
fn no_function_is_long_without_a_listed_reason() {
    let found = long_functions();
    let mut unlisted = Vec::new();
    for f in &found {
        let listed = ALLOWED
            .iter()
            .any(|&(file, name, _)| file == f.file && name == f.name);
        println!(
            "{:>4} lines  {}:{} fn {}{}",
            f.lines,
            f.file,
            f.line,
            f.name,
            if listed { "  (allowed)" } else { "" }
        );
        if !listed {
            unlisted.push(format!(
                "{}:{} fn {} ({} lines)",
                f.file, f.line, f.name, f.lines
            ));
        }
    }
    let stale: Vec<String> = ALLOWED
        .iter()
        .filter(|&&(file, name, _)| !found.iter().any(|f| f.file == file && f.name == name))
        .map(|&(file, name, _)| format!("{file} fn {name}"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "functions over {LIMIT} lines: cut them into named steps, or list them with a reason in ALLOWED:\n{}",
        unlisted.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed in ALLOWED but no longer over {LIMIT} lines (drop them from the list): {stale:?}"
    );
}
