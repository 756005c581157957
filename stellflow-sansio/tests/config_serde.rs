//! The `serde` feature: `ClientConfig` as a flat map of Kafka-style keys, read and written
//! through the one key table (`cargo test -p stellflow-sansio --features serde --test
//! config_serde`).

use std::time::Duration;
use stellflow_sansio::{Acks, ClientConfig, OffsetReset};

fn load(json: &str) -> Result<ClientConfig, String> {
    serde_json::from_str::<ClientConfig>(json).map_err(|e| e.to_string())
}

#[test]
fn a_json_file_of_kafka_keys_loads() {
    let config = load(
        r#"{
            "bootstrap.servers": "a:9092,b:9093",
            "linger.ms": 5,
            "acks": "1",
            "enable.idempotence": true,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
            "max.poll.records": "42",
            "max.block.ms": 2500
        }"#,
    )
    .unwrap();
    assert_eq!(config.bootstrap.len(), 2);
    assert_eq!(config.producer.linger, Duration::from_millis(5));
    assert_eq!(config.producer.acks, Acks::Leader);
    assert!(config.producer.idempotence);
    assert_eq!(config.consumer.group_id.as_deref(), Some("billing"));
    assert_eq!(config.consumer.auto_offset_reset, OffsetReset::Earliest);
    assert_eq!(config.consumer.max_poll_records, 42);
    assert_eq!(config.producer.max_block, Duration::from_millis(2500));
    // What was not given keeps its default.
    let defaults = ClientConfig::new("a:9092").unwrap();
    assert_eq!(config.producer.batch_size, defaults.producer.batch_size);
}

#[test]
fn lists_and_nested_tables_are_read_as_the_flat_keys() {
    // A TOML file's `linger.ms = 5` is a table `linger` holding `ms`: the same key.
    let config = load(
        r#"{
            "bootstrap": {"servers": ["a:9092", "b:9093"]},
            "linger": {"ms": 7},
            "enable": {"idempotence": true, "auto": {"commit": false}},
            "retries": 3.0
        }"#,
    )
    .unwrap();
    assert_eq!(config.bootstrap.len(), 2);
    assert_eq!(config.producer.linger, Duration::from_millis(7));
    assert!(config.producer.idempotence);
    assert!(!config.consumer.enable_auto_commit);
    assert_eq!(config.producer.retries, 3);
}

#[test]
fn a_saved_configuration_loads_back_equal() {
    let mut config = ClientConfig::new("x:1,y:2").unwrap();
    config.set("linger.ms", "20").unwrap();
    config.set("enable.auto.offset.store", "false").unwrap();
    config.set("group.id", "g").unwrap();
    config.set("max.poll.records", "9").unwrap();
    let json = serde_json::to_value(&config).unwrap();
    // Numbers and booleans are written as such, the rest as text.
    assert_eq!(json["linger.ms"], serde_json::json!(20));
    assert_eq!(json["enable.auto.offset.store"], serde_json::json!(false));
    assert_eq!(json["bootstrap.servers"], serde_json::json!("x:1,y:2"));
    assert_eq!(json["max.poll.records"], serde_json::json!(9));
    let keys: Vec<&str> = ClientConfig::kafka_keys().collect();
    assert_eq!(json.as_object().unwrap().len(), keys.len());
    let back: ClientConfig = serde_json::from_value(json).unwrap();
    assert_eq!(back.to_kafka_properties(), config.to_kafka_properties());
    assert_eq!(format!("{back:?}"), format!("{config:?}"));
}

#[test]
fn errors_name_the_key_and_the_value() {
    let e = load(r#"{"bootstrap.servers": "a:1", "lingr.ms": 5}"#).unwrap_err();
    assert!(e.contains("\"lingr.ms\""), "{e}");
    let e = load(r#"{"bootstrap.servers": "a:1", "linger.ms": "soon"}"#).unwrap_err();
    assert!(e.contains("linger.ms") && e.contains("\"soon\""), "{e}");
    let e = load(r#"{"bootstrap.servers": "a:1", "linger.ms": 2.5}"#).unwrap_err();
    assert!(e.contains("linger.ms") && e.contains("2.5"), "{e}");
    let e = load(r#"{"bootstrap.servers": "a:1", "enable.idempotence": "yes"}"#).unwrap_err();
    assert!(
        e.contains("enable.idempotence") && e.contains("true or false"),
        "{e}"
    );
    let e = load(r#"{"bootstrap.servers": "a:1", "acks": null}"#).unwrap_err();
    assert!(e.contains("\"acks\""), "{e}");
    let e = load(r#"{"linger.ms": 5}"#).unwrap_err();
    assert!(e.contains("bootstrap.servers"), "{e}");
    let e = load(r#"{"bootstrap.servers": "a:1", "max.partition.fetch.bytes": 1}"#).unwrap_err();
    assert!(e.contains("max.partition.fetch.bytes"), "{e}");
    let e = load(r#"["bootstrap.servers"]"#).unwrap_err();
    assert!(e.contains("table of keys"), "{e}");
    // A valid value that breaks a rule of the whole configuration is caught too.
    let e = load(r#"{"bootstrap.servers": "a:1", "max.poll.records": 0}"#).unwrap_err();
    assert!(e.contains("max_poll_records"), "{e}");
}
