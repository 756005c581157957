//! Admin calls at the edges of the metadata: a call that needs a partition's
//! leader right after the topic was created or deleted on the same client.

mod common;

use common::World;
use stellflow_proto::ApiKey;
use stellflow_sansio::{AdminError, OffsetSpec, Target};

fn offsets(w: &mut World, topic: &str, partitions: &[i32]) -> Vec<Result<i64, AdminError>> {
    let now = w.now;
    let specs: Vec<_> = partitions
        .iter()
        .map(|&p| (topic, p, OffsetSpec::Latest))
        .collect();
    let id = w.client.list_offsets(now, &specs).unwrap();
    let Ok(o) = w.admin(id) else {
        panic!("ListOffsets failed as a whole")
    };
    o.into_iter().map(|l| l.result.map(|r| r.offset)).collect()
}

#[test]
fn list_offsets_right_after_create_topic_waits_for_the_metadata_that_names_it() {
    let mut w = World::new(1, "broker-1:9092");
    w.bootstrap();
    let id = w
        .client
        .create_topic(w.now, "fresh", 2, Target::Any)
        .unwrap();
    assert!(matches!(w.admin(id), Ok(r) if r.is_ok()));
    // Without the fix: UnknownPartition ("unknown to every broker asked") at once.
    let got = offsets(&mut w, "fresh", &[0, 1]);
    assert!(matches!(got[..], [Ok(0), Ok(0)]), "{got:?}");
}

#[test]
fn create_and_delete_topic_refresh_the_metadata() {
    let mut w = World::new(1, "broker-1:9092");
    w.bootstrap();
    let id = w.client.create_topic(w.now, "t", 1, Target::Any).unwrap();
    assert!(matches!(w.admin(id), Ok(r) if r.is_ok()));
    w.step();
    assert!(
        w.client.metadata().partition("t", 0).is_some(),
        "a created topic is in the metadata without waiting for its max age"
    );
    let id = w.client.delete_topic(w.now, "t", Target::Any).unwrap();
    assert!(matches!(w.admin(id), Ok(r) if r.is_ok()));
    w.step();
    assert!(w.client.metadata().partition("t", 0).is_none());
    // A partition that a fresh round does not name is unknown after one round, not at once
    // and not never.
    let rounds = w.client.counters().api(ApiKey::METADATA).requests;
    let got = offsets(&mut w, "t", &[0]);
    assert!(
        matches!(got[..], [Err(AdminError::UnknownPartition { .. })]),
        "{got:?}"
    );
    assert!(w.client.counters().api(ApiKey::METADATA).requests > rounds);
}
