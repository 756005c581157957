//! The producer's documented defaults, pinned: the user guide's Kafka table and the
//! performance page quotes them; `producer.buffer_memory` is 32 MiB, Kafka's `buffer.memory`
//! (`docs/performance.md` says when to change it).
#![allow(clippy::unwrap_used)]

use std::time::Duration;
use stellflow_sansio::ClientConfig;

#[test]
fn producer_defaults_are_the_documented_ones() {
    let c = ClientConfig::new("a:9092").unwrap();
    assert_eq!(c.producer.buffer_memory, 32 * 1024 * 1024);
    assert_eq!(c.producer.batch_size, 1024 * 1024);
    assert_eq!(c.producer.linger, Duration::from_millis(5));
    assert_eq!(c.producer.max_in_flight_per_partition, 1);
    // A record as large as the largest request still fits in the buffer.
    assert!(c.producer.buffer_memory >= c.producer.max_request_size);
    // The Kafka key reads back the same figure.
    let props = c.to_kafka_properties();
    let bm = props.iter().find(|(k, _)| *k == "buffer.memory");
    assert_eq!(bm.map(|(_, v)| v.as_str()), Some("33554432"));
}

#[test]
fn the_guide_quotes_the_buffer_default() {
    let guide = include_str!("../../docs/guide.md");
    assert!(
        guide.contains("| `buffer.memory` | `producer.buffer_memory` (32 MiB"),
        "docs/guide.md's Kafka table names another buffer.memory default"
    );
}
