//! Keeps `docs/observability.md` honest: every `tracing` span and event the client emits
//! (every `tracing::<level>!` and `tracing::<level>_span!` in the core's and the adapters'
//! sources) has a row in its tables with the same kind, level and message or span name, and
//! every row names one that exists; and every metric the core emits (the `stellflow.` names
//! in `stellflow-sansio/src/metrics.rs`) has a row in its metrics table, and every row names one.
//! The spans of calls on one partition (`send`, `seek`) carry the topic and partition the docs
//! list, with the call's values (read from a blocking client on the simulated broker).

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

/// The metric names the core emits: the `"stellflow.…"` literals of its metrics module's code.
fn metrics_emitted() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../stellflow-sansio/src/metrics.rs");
    let text = std::fs::read_to_string(path).expect("metrics.rs");
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for piece in line.split('"').skip(1).step_by(2) {
            if piece.starts_with("stellflow.") {
                names.insert(piece.to_owned());
            }
        }
    }
    names
}

/// The first column of the metrics table (`| metric | kind | labels | meaning |`).
fn metrics_documented() -> BTreeSet<String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md");
    let text = std::fs::read_to_string(doc).expect("docs/observability.md");
    let table = text.split("## Metrics").nth(1).expect("a Metrics section");
    let mut names = BTreeSet::new();
    for line in table.lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        if cols.len() >= 5 && cols[1].starts_with("`stellflow.") {
            names.insert(cols[1].trim_matches('`').to_owned());
        }
    }
    names
}

#[test]
fn every_metric_is_documented() {
    let (code, doc) = (metrics_emitted(), metrics_documented());
    assert!(
        code.len() >= 15,
        "the scan found only {} metrics",
        code.len()
    );
    let missing: Vec<_> = code.difference(&doc).collect();
    let stale: Vec<_> = doc.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/observability.md's metrics table is out of date.\nemitted but not listed: {missing:#?}\nlisted but not emitted: {stale:#?}"
    );
}

/// A span's name and its fields as `name=value`.
type Opened = (String, Vec<String>);

/// Every span opened on this thread.
#[derive(Clone, Default)]
struct SpanLog(std::sync::Arc<std::sync::Mutex<Vec<Opened>>>);

struct Fields(Vec<String>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanLog {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = Fields(Vec::new());
        attrs.record(&mut fields);
        let name = attrs.metadata().name().to_owned();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name, fields.0));
    }
}

/// The fields column of the spans table's row for `name`.
fn documented_span_fields(name: &str) -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/observability.md");
    let text = std::fs::read_to_string(doc).expect("docs/observability.md");
    let row = text.lines().find(|l| {
        let cols: Vec<&str> = l.split('|').map(str::trim).collect();
        cols.len() >= 5 && cols[1] == "span" && cols[3] == format!("`{name}`")
    });
    row.unwrap_or_else(|| panic!("no row for span {name}"))
        .split('|')
        .nth(4)
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn spans_of_partition_calls_carry_topic_and_partition() -> stellflow_adapter_tests::R<()> {
    use stellflow_adapter_tests::check;
    use stellflow_blocking::{Client, ClientConfig, Record, SeekTo, Target, TopicPartition};
    use tracing_subscriber::layer::SubscriberExt;
    for name in ["send", "seek"] {
        let fields = documented_span_fields(name);
        check(
            fields.contains("`topic`") && fields.contains("`partition`"),
            || format!("the docs' `{name}` row lists no topic and partition: {fields}"),
        )?;
    }
    let log = SpanLog::default();
    let subscriber = tracing_subscriber::registry().with(log.clone());
    let server = stellflow_adapter_tests::sim()?;
    tracing::subscriber::with_default(subscriber, || -> stellflow_adapter_tests::R<()> {
        let client = Client::connect(ClientConfig::new(&server.local_addr().to_string())?)?;
        client.admin().create_topic("spans", 3, Target::Any)?;
        client
            .producer()
            .send(Record::new("spans", "v").with_partition(2))?;
        let consumer = client.consumer();
        let tp = TopicPartition::new("spans", 1);
        consumer.assign(std::slice::from_ref(&tp))?;
        consumer.seek(&tp, SeekTo::Beginning)?;
        client.close()?;
        Ok(())
    })?;
    let spans = log.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for (name, partition) in [("send", "partition=2"), ("seek", "partition=1")] {
        let found = spans.iter().any(|(n, f)| {
            n == name && f.iter().any(|x| x == "topic=spans") && f.iter().any(|x| x == partition)
        });
        check(found, || {
            let named: Vec<_> = spans.iter().filter(|(n, _)| n == name).collect();
            format!("no `{name}` span with topic=spans {partition}: {named:?}")
        })?;
    }
    Ok(())
}
