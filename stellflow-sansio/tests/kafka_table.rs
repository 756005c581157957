//! The user guide's Kafka table (`docs/guide.md`, "Kafka-style configuration") and the key
//! table behind `ClientConfig::set` say the same thing: every key the guide lists is taken
//! (or, where the guide says it is refused, refused with `Unsupported`), every key taken is
//! listed, in the same order, and each one round-trips through `set`/`get` and
//! `to_kafka_properties`/`from_kafka_properties` with a value other than its default.

use stellflow_sansio::{ClientConfig, ConfigError};

/// The first column of every row of the guide's Kafka table: the backquoted names in it, and
/// the row's whole text.
fn guide_rows() -> Vec<(Vec<String>, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide.md");
    let guide = std::fs::read_to_string(path).expect("docs/guide.md");
    let mut lines = guide
        .lines()
        .skip_while(|l| !l.starts_with("| Kafka key |"))
        .skip(2); // the header and the `|---|` line
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        if !line.starts_with('|') {
            break;
        }
        let first = line.split('|').nth(1).unwrap_or_default();
        let names = first
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        rows.push((names, line.to_owned()));
    }
    assert!(rows.len() > 20, "the Kafka table has {} rows", rows.len());
    rows
}

/// A valid value for `key` other than `default` (the first candidate the key takes and reads
/// back unchanged).
fn another_value(config: &ClientConfig, key: &str, default: &str) -> String {
    let mut candidates: Vec<String> = Vec::new();
    match default {
        "true" => candidates.push("false".into()),
        "false" => candidates.push("true".into()),
        _ => {}
    }
    if let Ok(n) = default.parse::<u64>() {
        candidates.push(n.saturating_add(1).to_string());
        candidates.push(n.saturating_sub(1).to_string());
    }
    candidates.extend(
        ["1", "2", "earliest", "native-gzip", "x:1,y:2", "someone"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    for want in candidates {
        if want == default {
            continue;
        }
        let mut c = config.clone();
        if c.set(key, &want).is_ok()
            && c.get(key).as_deref() == Some(want.as_str())
            && c.validate().is_ok()
        {
            return want;
        }
    }
    panic!("no candidate value for {key} (default {default})");
}

#[test]
fn the_guides_kafka_table_is_the_key_table() {
    let rows = guide_rows();
    let default = ClientConfig::new("a:1").unwrap();
    let mut listed = Vec::new();
    for (names, row) in &rows {
        assert!(!names.is_empty(), "a row names no key: {row}");
        for name in names {
            let mut c = default.clone();
            match c.set(name, "0") {
                Err(ConfigError::UnknownKey { .. }) => {
                    panic!("the guide lists {name}, which ClientConfig::set does not know")
                }
                Err(ConfigError::Unsupported { .. }) => {
                    assert!(row.contains("refused"), "{name} is refused: say so: {row}");
                }
                _ => listed.push(name.clone()),
            }
        }
    }
    let keys: Vec<String> = ClientConfig::kafka_keys().map(str::to_owned).collect();
    assert_eq!(
        listed, keys,
        "the guide's table and the key table differ (or their order does)"
    );
}

#[test]
fn every_key_of_the_guide_round_trips() {
    let default = ClientConfig::new("a:1").unwrap();
    let names: Vec<String> = guide_rows()
        .into_iter()
        .flat_map(|(names, _)| names)
        .filter(|n| default.get(n).is_some())
        .collect();
    assert!(names.iter().any(|n| n == "max.poll.records"));
    assert!(names.iter().any(|n| n == "max.block.ms"));
    for key in &names {
        let before = default.get(key).unwrap();
        let want = another_value(&default, key, &before);
        let mut c = default.clone();
        c.set(key, &want).unwrap();
        assert_eq!(c.get(key).as_deref(), Some(want.as_str()), "{key}");
        assert_ne!(
            format!("{c:?}"),
            format!("{default:?}"),
            "{key}={want} changed no field"
        );
        let props = c.to_kafka_properties();
        assert!(
            props.iter().any(|(k, v)| k == key && *v == want),
            "{key} is not in to_kafka_properties as {want}"
        );
        let back = ClientConfig::from_kafka_properties(props.clone())
            .unwrap_or_else(|e| panic!("{key}={want}: {e}"));
        assert_eq!(back.to_kafka_properties(), props, "{key}");
        assert_eq!(format!("{back:?}"), format!("{c:?}"), "{key}");
    }
}

#[test]
fn the_adapter_limits_are_keys() {
    let c = ClientConfig::from_kafka_properties([
        ("bootstrap.servers", "a:1"),
        ("max.block.ms", "2500"),
        ("max.poll.records", "42"),
    ])
    .unwrap();
    assert_eq!(c.producer.max_block, std::time::Duration::from_millis(2500));
    assert_eq!(c.consumer.max_poll_records, 42);
    let e = ClientConfig::from_kafka_properties([
        ("bootstrap.servers", "a:1"),
        ("max.poll.records", "0"),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("max_poll_records"), "{e}");
}
