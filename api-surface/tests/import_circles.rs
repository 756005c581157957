//! Import circles between the modules of `stellflow-sansio/src`: which
//! top-level modules reach each other through `crate::`, `super::` and `self::` paths, and
//! which files of each of its directories (`consumer/`, `net/`, `producer/`, ...) do.
//!
//! `cargo test -p stellflow-api-surface --test import_circles -- --nocapture` prints every
//! circle (with the imports inside it, to see which to break). The test fails on any circle:
//! none is left, and none may come back. A second test holds the layers: nothing below the
//! client imports the client or a feature, and no feature imports another.
//!
//! How a path is read: comments are skipped; `use` trees are expanded (`crate::{a::B, c}`);
//! a path that names an item re-exported by `lib.rs` or a `mod.rs` (`crate::Client`,
//! `crate::consumer::Consumer`) counts as a use of the module that defines it, and those
//! `pub use` lines themselves are not counted (they are the re-export plumbing).

mod common;
use common::rust_files;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below `crate`, e.g. `["consumer", "group"]`.
type Module = Vec<String>;

/// The module a source file is, from its path below `src`.
fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    match file.as_str() {
        "lib.rs" | "mod.rs" => {}
        f => parts.push(f.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// The code of a file without its comments (line comments and doc comments).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads a path tail after `prefix::` at `s`: segments and `{..}` groups, expanded.
fn expand(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(i);
    if *i < s.len() && s[*i] == b'{' {
        *i += 1;
        let mut all = Vec::new();
        loop {
            skip_ws(i);
            if *i >= s.len() {
                return all;
            }
            if s[*i] == b'}' {
                *i += 1;
                return all;
            }
            if s[*i] == b',' {
                *i += 1;
                continue;
            }
            let before = *i;
            all.extend(expand(s, i));
            if *i == before {
                *i += 1; // `*`, `self as x`, anything not a path: step over it
            }
        }
    }
    let start = *i;
    while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
        *i += 1;
    }
    if *i == start {
        return vec![Vec::new()];
    }
    let name = String::from_utf8_lossy(&s[start..*i]).into_owned();
    if s[*i..].starts_with(b"::") {
        *i += 2;
        expand(s, i)
            .into_iter()
            .map(|mut tail| {
                tail.insert(0, name.clone());
                tail
            })
            .collect()
    } else {
        vec![vec![name]]
    }
}

/// Every absolute path (below `crate`) that `code` of module `me` names.
fn paths_in(code: &str, me: &Module) -> Vec<Vec<String>> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let at_word = i == 0 || !(s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_');
        let rest = &s[i..];
        let (base, len): (Option<Module>, usize) = if at_word && rest.starts_with(b"crate::") {
            (Some(Vec::new()), 7)
        } else if at_word && rest.starts_with(b"self::") {
            (Some(me.clone()), 6)
        } else if at_word && rest.starts_with(b"super::") {
            let mut base = me.clone();
            let mut j = i;
            while s[j..].starts_with(b"super::") {
                base.pop();
                j += 7;
            }
            (Some(base), j - i)
        } else {
            (None, 1)
        };
        i += len;
        if let Some(base) = base {
            for tail in expand(s, &mut i) {
                let mut p = base.clone();
                p.extend(tail);
                out.push(p);
            }
        }
    }
    out
}

/// Names re-exported by a module file (`pub use a::{B, C}` in `lib.rs` or a `mod.rs`), each
/// with the path it comes from.
fn reexports(code: &str, me: &Module) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    for stmt in code.split(';') {
        let t = stmt.trim();
        let Some(tree) = t.strip_prefix("pub use ") else {
            continue;
        };
        let s = tree.as_bytes();
        let mut i = 0;
        for tail in expand(s, &mut i) {
            let Some(name) = tail.last().cloned() else {
                continue;
            };
            let mut p = me.clone();
            p.extend(tail);
            map.insert(name, p);
        }
    }
    map
}

/// Strongly connected components of more than one node (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The module graph of `src`: without `inside`, one node per top-level module (its files
/// joined); with `inside`, one node per file of that module, and nothing else.
fn graph(src: &Path, inside: Option<&str>) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules: BTreeSet<Module> = BTreeSet::new();
    let mut codes = Vec::new();
    let mut exports: BTreeMap<Module, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("below src");
        let me = module_of(rel);
        let code = code_of(&std::fs::read_to_string(f).expect("readable source"));
        let is_mod_file = matches!(
            rel.file_name().and_then(|n| n.to_str()),
            Some("lib.rs" | "mod.rs")
        );
        if is_mod_file {
            exports.insert(me.clone(), reexports(&code, &me));
        }
        modules.insert(me.clone());
        codes.push((me, code, is_mod_file));
    }
    // The module a path lands in: the longest module prefix, through re-exports.
    let resolve = |p: &[String]| -> Module {
        let mut p = p.to_vec();
        for _ in 0..8 {
            let mut k = p.len();
            while k > 0 && !modules.contains(&p[..k]) {
                k -= 1;
            }
            let module = p[..k].to_vec();
            let via = p
                .get(k)
                .and_then(|name| exports.get(&module).and_then(|m| m.get(name)));
            match via {
                Some(target) if target.as_slice() != p.as_slice() => {
                    let mut next = target.clone();
                    next.extend(p[k + 1..].iter().cloned());
                    p = next;
                }
                _ => return module,
            }
        }
        p
    };
    let node = |m: &Module| -> Option<String> {
        match inside {
            None => m.first().cloned(),
            Some(top) if m.first().map(String::as_str) == Some(top) && m.len() >= 2 => {
                Some(m[..2].join("::"))
            }
            Some(_) => None,
        }
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (me, code, is_mod_file) in &codes {
        let Some(from) = node(me) else { continue };
        // A module file's own `pub use` lines are re-export plumbing, not uses.
        let code = if *is_mod_file {
            code.split(';')
                .filter(|s| !s.trim_start().starts_with("pub use "))
                .collect::<Vec<_>>()
                .join(";")
        } else {
            code.clone()
        };
        let entry = g.entry(from.clone()).or_default();
        for p in paths_in(&code, me) {
            if let Some(to) = node(&resolve(&p))
                && to != from
            {
                entry.insert(to);
            }
        }
    }
    g
}

fn sansio_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stellflow-sansio/src")
}

#[test]
fn use_trees_expand_and_resolve_relative_to_the_file() {
    let me: Module = vec!["consumer".into(), "group".into()];
    let code = "use crate::{a::B, c::{d::E, F}};\nuse super::start::S;\nlet x = self::inner::f();";
    let got: BTreeSet<String> = paths_in(code, &me).iter().map(|p| p.join("::")).collect();
    let want: BTreeSet<String> = [
        "a::B",
        "c::d::E",
        "c::F",
        "consumer::start::S",
        "consumer::group::inner::f",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(got, want);
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
        .into_iter()
        .fold(BTreeMap::new(), |mut g, (x, y)| {
            g.entry(x.to_owned())
                .or_insert_with(BTreeSet::new)
                .insert(y.to_owned());
            g
        });
    let c = circles(&g);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0], ["a", "b", "c"].map(String::from).into());
}

#[test]
fn no_import_circle() {
    let src = sansio_src();
    let top = graph(&src, None);
    assert!(!top.is_empty(), "no modules read from {src:?}");
    // Every directory of the core, each on its own (its files as modules).
    let mut dirs: Vec<String> = std::fs::read_dir(&src)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert!(
        dirs.iter().any(|d| d == "consumer"),
        "no consumer/ in {src:?}"
    );
    let inner: Vec<_> = dirs.iter().map(|d| graph(&src, Some(d))).collect();
    assert!(
        inner.iter().all(|g| g.len() > 1),
        "a directory of {src:?} read as one file: {dirs:?}"
    );
    let mut found = circles(&top);
    for g in &inner {
        found.extend(circles(g));
    }
    for c in &found {
        println!("import circle ({} modules): {c:?}", c.len());
        // The imports inside the circle, to see which to break.
        for m in c {
            let to: Vec<&String> = std::iter::once(&top)
                .chain(&inner)
                .find_map(|g| g.get(m))
                .into_iter()
                .flatten()
                .filter(|t| c.contains(*t))
                .collect();
            println!("  {m} -> {to:?}");
        }
    }
    if found.is_empty() {
        println!("no import circle");
    }
    assert!(
        found.is_empty(),
        "import circles (break them: move the shared types down): {found:?}"
    );
}

/// The layering: the client is on top, the features (admin, producer, consumer) below it
/// import neither the client nor each other, and the low modules import no feature and not
/// the client.
#[test]
fn the_layers_hold() {
    let top = graph(&sansio_src(), None);
    let above = ["client", "admin", "producer", "consumer"];
    let mut wrong = Vec::new();
    for (from, to) in &top {
        for t in to.iter().filter(|t| above.contains(&t.as_str())) {
            if from != "client" {
                wrong.push(format!("{from} -> {t}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports of the client or a feature from below the client: {wrong:?}"
    );
}
