//! A pass's work follows what changed, not how many partitions a topic has: the same records
//! to the same few partitions cost the readiness passes as many partition visits on a topic
//! of 4,096 partitions as on one of 8.

use crate::{ProducerConfig, ProducerRecord};
use std::time::Duration;

#[path = "../../tests/common/mod.rs"]
#[allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)]
mod common;

/// Partition visits of the passes while 8 partitions of a topic of `partitions` get 100
/// rounds of one record each, a linger apart, and a flush.
fn visits(partitions: i32) -> u64 {
    let p = ProducerConfig {
        linger: Duration::from_millis(5),
        ..ProducerConfig::default()
    };
    let c = common::producer::client_config(1, p);
    let mut w = common::producer::topic_world(1, ("t", partitions, 1), c);
    let produce = |w: &mut common::World, p: i32| {
        let mut rec = ProducerRecord::new("t", b"v");
        rec.partition = Some(p);
        assert!(w.client.produce(w.now, &rec).is_ok());
    };
    // The first record learns the partitions: every partition is looked at once then.
    produce(&mut w, 0);
    common::producer::flush(&mut w);
    let before = w.client.producer.acc.candidates.visited;
    for _ in 0..100 {
        for p in 0..8 {
            produce(&mut w, p);
        }
        w.advance(Duration::from_millis(6));
    }
    common::producer::flush(&mut w);
    let sent = common::producer::outcomes(&mut w);
    assert_eq!(sent.len(), 801);
    assert!(sent.values().all(Result::is_ok));
    w.client.producer.acc.candidates.visited - before
}

#[test]
fn a_pass_looks_at_what_changed_not_at_every_partition() {
    let few = visits(8);
    let many = visits(4096);
    assert!(few >= 800, "every batch's partition was looked at: {few}");
    assert!(
        many <= few + few / 10,
        "4,096 partitions cost {many} visits, 8 partitions {few}"
    );
}
