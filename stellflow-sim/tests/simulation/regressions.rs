//! Regression seeds: scenarios the simulation once failed on, kept with their plans.

use stellflow_sim::dst::{FaultPlan, run_plan};

fn assert_passes(code: &str) {
    let plan = FaultPlan::parse(code).expect("plan code parses");
    let a = run_plan(&plan);
    assert!(a.passed(), "{plan}\n{:#?}", a.violations);
    let b = run_plan(&plan);
    assert_eq!(a.trace_hash, b.trace_hash, "same plan, same trace");
}

/// Was a bug in stellflow-sansio (src/net.rs, `Net::expire`): when a request in flight timed
/// out, the connection was kept; on a silently dead connection (no FIN, no RST: a black hole)
/// every later request to that broker went to the same connection and timed out too, forever.
/// Found by dst seed 15 (shrunk: one broker, one client, one fault). Fixed: after two in-flight
/// timeouts in a row with nothing received the connection is closed and reopened.
#[test]
fn seed_15_black_hole_connection_is_abandoned() {
    assert_passes(
        "seed=15;b=1;c=1;p=1;rf=1;rt=1500;mif=64;lat=1901;jit=2300;split=50;ops=1;\
         safety=1025;wl=3262214744;f=1024:blackhole:6",
    );
}

/// The harness's first liveness bug (a produce goal never re-issued after a safety-phase
/// produce finished late), kept as a plain regression of the scenario that showed it.
#[test]
fn seed_17_crash_then_restart_produces_again() {
    assert_passes(
        "seed=17;b=1;c=2;p=1;rf=1;rt=3000;mif=4;lat=1127;jit=604;split=50;ops=13;\
         safety=13807;wl=3035855435;f=13199:crash:1,3761",
    );
}

/// A half-open connection (the broker vanished without a FIN) is noticed through the RST the
/// next write provokes, and the client recovers.
#[test]
fn seed_15_half_open_connection_recovers() {
    assert_passes(
        "seed=15;b=1;c=1;p=1;rf=1;rt=1500;mif=64;lat=1901;jit=2300;split=50;ops=1;\
         safety=1025;wl=3262214744;f=1024:halfopen:6",
    );
}

/// Was a bug in stellflow-sansio's consumer: after a broker crash the consumer client's
/// `poll_timeout()` stayed at or before `now` although `handle_timeout(now)` was called and
/// every output (records included) drained: a real driver spins at 100 % CPU and virtual time
/// never advances. Found by dst seed 55 (about a quarter of the seeds with a consumer); fixed
/// by the consumer's owner in 94c0127 ("no busy loop on past deadlines while the coordinator
/// is looked up").
#[test]
fn seed_55_consumer_poll_timeout_busy_loop() {
    assert_passes(
        "seed=55;b=1;c=2;p=3;rf=1;rt=1500;mif=64;lat=1993;jit=832;split=0;ops=15;\
         safety=10137;wl=2889213643;f=560:pause:1,3474;f=1862:crash:1,1748;\
         f=7438:halfopen:4;f=9091:close:-1,4",
    );
}

/// Was a bug in stellflow-sansio's consumer: right after `handle_timeout(now)` and a full
/// drain, `poll_timeout()` returned an instant ~497 ms in the past (a stale deadline). Found
/// by dst seed 97; fixed together with seed 55 in 94c0127.
#[test]
fn seed_97_consumer_poll_timeout_in_the_past() {
    assert_passes(
        "seed=97;b=2;c=2;p=2;rf=1;rt=1500;mif=4;lat=608;jit=1115;split=80;ops=18;\
         safety=13002;wl=3562920653;f=2071:delay:1,701,3028;f=3662:delay:0,559,2021;\
         f=4737:partition:1,457;f=6534:partition:1,1932;f=6968:close:-1,2;\
         f=10758:errors:-1,4,6,0;f=12648:drop:0,1",
    );
}

/// Was a bug in stellflow-sansio (metadata refresh): after a crash of broker 1 and its
/// restart with leadership re-asserted, the healed consumer never delivered 22 acknowledged
/// records of t0-0 within 30 s. The restarted consumer client's first metadata round missed
/// broker 1 (down, then in reconnect backoff), so t0-0 was missing from its view and its subscription, and
/// no round followed before `metadata_max_age`. Found by dst seed 137 (also 190, 340); fixed:
/// an incomplete round is retried after the backoff.
#[test]
fn seed_137_consumer_delivers_after_broker_restart() {
    assert_passes(
        "seed=137;b=3;c=1;p=2;rf=1;rt=3500;mif=1;lat=473;jit=512;split=50;ops=23;\
         safety=13522;wl=2908441982;f=147:delay:2,426,765;f=4685:errors:0,1,9,1;\
         f=6140:delay:2,79,900;f=6454:delay:-1,181,1713;f=8470:crash:1,3979;\
         f=9788:pause:1,4093;f=12047:halfopen:6",
    );
}

/// Idempotent producer, acks=-1, replication of one follower paused (so Produce answers 7
/// after the ack timeout) and two Produce responses dropped: a record ends up twice in the log
/// although no broker restarted and no leader moved. Found by dst seed 96 (shrunk: 3 brokers,
/// rf 3, one client). This is the server's design, not a client bug: a batch answered with 7 is
/// already appended but its sequence is not recorded (PROTOCOL.md §3.3.2, §8 item 12), so when
/// that answer is lost the client's retry is appended again. The invariant therefore allows
/// duplicates in plans that pause replication; this plan must pass under it.
#[test]
fn seed_96_idempotent_producer_no_duplicates() {
    assert_passes(
        "seed=96;b=3;c=1;p=1;rf=3;rt=1000;mif=4;lat=438;jit=372;split=0;ops=22;\
         safety=10329;wl=3132046581;f=4750:pause:3,4007;f=7803:drop:2,2",
    );
}

/// Found when `BlackHole` was added to the generated fault kinds (which reshuffles every
/// seed's plan): after the responses of four requests are dropped, a heartbeat that merely
/// timed out made the consumer drop its coordinator and rejoin the group on a healed network
/// (fixed in the consumer's group logic: a heartbeat timeout retries, only the session timeout
/// or a lost connection rejoins). Shrunk to one fault.
#[test]
fn seed_12_black_hole_set_group_session_stays_alive() {
    assert_passes(
        "seed=12;b=1;c=1;p=1;rf=1;rt=3500;mif=2;lat=1301;jit=1063;split=20;ops=1;\
         safety=13677;wl=3244850125;f=9766:drop:-1,4",
    );
}

/// Open issue from the seed set that also generates `BlackHole` (not the CI set yet): one
/// dropped SyncGroup response during the fault phase times out after the network healed, and
/// the member rejoins during the healthy idle phase ("SyncGroup failed"). Either the consumer
/// should retry SyncGroup instead of rejoining on a mere timeout (as it now does for
/// heartbeats), or the invariant's healthy window should start once the fault phase's
/// requests have timed out. Shrunk to one fault. Decide, fix, un-ignore, then generate
/// `BlackHole` from seeds.
#[test]
#[ignore = "open issue: rejoin after a timed-out SyncGroup on a healed network"]
fn seed_129_sync_group_timeout_keeps_session() {
    assert_passes(
        "seed=129;b=1;c=1;p=1;rf=1;rt=3500;mif=4;lat=1892;jit=1511;split=20;ops=4;\
         safety=12465;wl=3760159993;f=5164:drop:10,1",
    );
}

/// Open issue found by the `fault_plan` fuzz target in its first minute: with no fault at all
/// (3 brokers, rf 1, two clients, raw workload), offset 2 of `t0-2` is acknowledged for two
/// different blobs. Not diagnosed; a likely cause is a Produce reaching a broker that is not
/// the partition's replica, which the server (and the sim) answers by auto-creating the
/// partition locally (PROTOCOL.md §8 item 21) — then either the workload's routing or the
/// invariant (offsets are per broker log) is at fault, or the client routed before it knew
/// the leader.
#[test]
#[ignore = "open issue: acked-offsets-unique with no fault (fault_plan fuzz find)"]
fn fuzz_found_offset_acknowledged_for_two_blobs() {
    assert_passes(
        "seed=9079259047835729920;b=3;c=2;p=3;rf=1;rt=1000;mif=1;lat=50;jit=0;split=0;ops=4;\
         safety=3000;wl=0",
    );
}
