//! Large groups in CI, in virtual time (`stellflow_dst::group::scale`): a group of 16
//! members over 128 partitions converges after a join, a close and a crash within the
//! session timeout plus three heartbeat intervals, and its members send at most twice the
//! group requests per second of a 4-member group's. Virtual time is exact, so these are
//! bounds on the protocol, not timings of the machine. The full matrix (5 to 100 members
//! over 1,024 partitions) is `cargo run --release -p stellflow-dst --example group_scale`.

use std::time::Duration;
use stellflow_dst::group::scale::{ScaleConfig, ScaleReport, run_scale};

fn group(members: usize) -> ScaleReport {
    run_scale(ScaleConfig {
        seed: 44,
        members,
        partitions: 128,
        session: Duration::from_secs(4),
        heartbeat: Duration::from_millis(500),
        steady_heartbeats: 10,
    })
}

#[test]
fn a_larger_group_converges_within_the_bound_at_the_same_request_rate() {
    let bound = Duration::from_secs(4) + 3 * Duration::from_millis(500);
    let small = group(4);
    let large = group(16);
    for (name, r) in [("4 members", &small), ("16 members", &large)] {
        assert!(r.slowest_change() <= bound, "{name}: {r:?}");
        assert!(r.steady_requests_per_member_s > 0.0, "{name}: {r:?}");
    }
    assert!(
        large.change_requests_per_member_s <= 2.0 * small.change_requests_per_member_s,
        "{large:?}\n{small:?}"
    );
    assert!(
        large.steady_requests_per_member_s <= 2.0 * small.steady_requests_per_member_s,
        "{large:?}\n{small:?}"
    );
    // A read answers every slot: what one member reads grows with the members it must see.
    assert!(
        large.bytes_per_read > small.bytes_per_read,
        "{large:?}\n{small:?}"
    );
}
