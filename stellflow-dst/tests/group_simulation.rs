//! Group worlds in CI: 2–5 members of one consumer group joining, closing, crashing, pausing
//! past their session and cut off from the coordinator while a producer feeds keyed and
//! keyless records, with the group invariants of `stellflow_dst::group::watch` checked from
//! outside the clients. Each seed runs twice (same seed → same trace hash).
//!
//! * `cargo test -p stellflow-dst --test group_simulation` — the CI set: seeds
//!   `0..GROUP_CI_SEEDS` plus `GROUP_FRESH_SEEDS` from a start derived from the commit
//!   (printed as the `STELLFLOW_SIM_SEED_START=… STELLFLOW_SIM_SEEDS=…` that replays it).
//! * `STELLFLOW_SIM_SEEDS=N` / `STELLFLOW_SIM_SEED_START=S` — a soak of seeds `S..S+N`, the
//!   same variables as the `simulation` target's (either replaces the CI set).
//! * `STELLFLOW_SIM_SEED=<seed>` — replays one seed and prints its plan and trace hash.
//! * `STELLFLOW_GROUP_PLAN='<code>'` — replays one (e.g. shrunk) group plan.
//! * `STELLFLOW_SIM_TRACE=1` — with a replay, also prints the run's readable trace.
//!
//! A failing seed prints its plan, the violation and a shrunk plan that still fails.

#[path = "common/seeds.rs"]
mod seeds;

use seeds::{SeedWindow, check_twice, env_u64, run_seeds};
use std::io::Write;
use std::time::Instant;
use stellflow_dst::group::{
    GroupPlan, GroupReport, run_group_plan, run_group_plan_logged, shrink_group,
};

/// Fixed seeds the CI set runs (`0..GROUP_CI_SEEDS`).
const GROUP_CI_SEEDS: u64 = 60;
/// Fresh seeds the CI set runs besides, from a start that moves per commit.
const GROUP_FRESH_SEEDS: u64 = 20;
/// Threads the set is spread over.
const THREADS: u64 = 2;

/// Runs a plan twice; returns the first report and an error text on failure.
fn check_plan(plan: &GroupPlan) -> (GroupReport, Option<String>) {
    check_twice(
        || run_group_plan(plan),
        |r| r.violations.first().map(|v| format!("{v}")),
        |r| r.trace_hash,
    )
}

fn report_failure(plan: &GroupPlan, report: &GroupReport, msg: &str) -> String {
    let mut out = format!("FAILED {plan}\n  {msg}\n");
    for v in report.violations.iter().skip(1).take(3) {
        out.push_str(&format!("  also: {v}\n"));
    }
    if let Some(v) = report.violations.first()
        && std::env::var("STELLFLOW_SIM_NO_SHRINK").as_deref() != Ok("1")
    {
        let small = shrink_group(plan, v.invariant, 40);
        out.push_str(&format!("  shrunk to: {small}\n"));
    }
    out
}

/// What one thread counts over its seeds.
#[derive(Default)]
struct Totals {
    deliveries: u64,
    redeliveries: u64,
    tenures: u64,
    stale_overlaps: u64,
    stable_checks: u64,
    max_convergence_ms: u64,
    members: u64,
    acked: u64,
    events: u64,
}

#[test]
fn group_simulation_seeds() {
    if let Ok(code) = std::env::var("STELLFLOW_GROUP_PLAN") {
        let plan = GroupPlan::parse(&code).expect("STELLFLOW_GROUP_PLAN does not parse");
        replay(&plan);
        return;
    }
    if std::env::var("STELLFLOW_SIM_PLAN").is_ok() {
        println!(
            "dst groups: STELLFLOW_SIM_PLAN replays a fault plan of the simulation target; nothing to run here"
        );
        return;
    }
    if let Some(seed) = env_u64("STELLFLOW_SIM_SEED") {
        replay(&GroupPlan::from_seed(seed));
        return;
    }
    let window = SeedWindow::from_env("dst groups", GROUP_CI_SEEDS, GROUP_FRESH_SEEDS, 0x26);
    let started = Instant::now(); // wall clock for the seeds/s report only, never in a world
    let outcome = run_seeds(&window.seeds(), THREADS, |seed, totals: &mut Totals| {
        let plan = GroupPlan::from_seed(seed);
        let (report, failure) = check_plan(&plan);
        let c = report.counts;
        totals.deliveries += c.deliveries;
        totals.redeliveries += c.redeliveries;
        totals.tenures += c.tenures;
        totals.stale_overlaps += c.stale_overlaps;
        totals.stable_checks += c.stable_checks;
        totals.max_convergence_ms = totals.max_convergence_ms.max(c.max_convergence_ms);
        totals.members += report.members as u64;
        totals.acked += report.acked as u64;
        totals.events += plan.events.len() as u64;
        failure.map(|msg| report_failure(&plan, &report, &msg))
    });
    let secs = started.elapsed().as_secs_f64();
    let ran = outcome.ran;
    let sum = |f: fn(&Totals) -> u64| outcome.tallies.iter().map(f).sum::<u64>();
    let max_conv = outcome
        .tallies
        .iter()
        .map(|t| t.max_convergence_ms)
        .max()
        .unwrap_or(0);
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "dst groups: {ran} seeds x2 runs ({}), {secs:.1} s wall, {:.1} seeds/s ({THREADS} threads)",
        window.describe(),
        ran as f64 / secs.max(1e-9)
    );
    let _ = writeln!(
        out,
        "dst groups: {} members, {} events, {} records acknowledged, {} deliveries ({} redelivered across handovers), {} tenures, {} stable-window samples, {} overlaps exempt as stale, slowest convergence {max_conv} ms",
        sum(|t| t.members),
        sum(|t| t.events),
        sum(|t| t.acked),
        sum(|t| t.deliveries),
        sum(|t| t.redeliveries),
        sum(|t| t.tenures),
        sum(|t| t.stable_checks),
        sum(|t| t.stale_overlaps),
    );
    outcome.assert_passed("group seeds");
    let _ = writeln!(out, "RESULT dst-group-seeds {ran}");
}

fn replay(plan: &GroupPlan) {
    println!("{plan}");
    if std::env::var("STELLFLOW_SIM_TRACE").as_deref() == Ok("1") {
        let (_, log) = run_group_plan_logged(plan);
        for line in log {
            println!("{line}");
        }
    }
    let (report, failure) = check_plan(plan);
    println!(
        "trace hash {:#x}, {} members, {} acknowledged, {:?} virtual, counts {:?}, stats {:?}",
        report.trace_hash,
        report.members,
        report.acked,
        report.elapsed,
        report.counts,
        report.stats
    );
    if let Some(msg) = failure {
        panic!("{}", report_failure(plan, &report, &msg));
    }
}

/// A group of one member is trivially converged on any core (it owns every partition), so
/// the group invariants must hold through its pauses, isolations, resets and delays (joins
/// removed, and closes and crashes of the last member are skipped by the run): no false
/// alarm from the watch itself.
#[test]
fn one_member_worlds_pass() {
    let mut failures = Vec::new();
    for seed in 0..16 {
        let mut plan = GroupPlan::from_seed(seed);
        plan.scenario.members = 1;
        plan.events
            .retain(|e| !matches!(e.event, stellflow_dst::group::GroupEvent::Join));
        let report = run_group_plan(&plan);
        if let Some(v) = report.violations.first() {
            failures.push(format!("{plan}\n  {v}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs a group plan twice: it must pass, with the same trace both times.
fn assert_group_passes(code: &str) {
    let plan = GroupPlan::parse(code).expect("plan code parses");
    let a = run_group_plan(&plan);
    assert!(a.passed(), "{plan}\n{:#?}", a.violations);
    let b = run_group_plan(&plan);
    assert_eq!(a.trace_hash, b.trace_hash, "same plan, same trace");
}

/// Was a bug in the registry design (found by these worlds; shrunk from group seed 1114):
/// an auto-committing member paused past its session committed its stale position of a
/// partition another member owned by then, on the very wake-up that resumed it
/// (`group-commit-monotonic`: 45 -> 37). Fixed: the lease is checked before anything commits.
#[test]
fn seed_1114_resumed_member_commits_nothing_it_lost() {
    assert_group_passes(
        "seed=1114;b=1;p=2;m=4;session=3000;hb=500;lat=1704;jit=2186;split=50;records=86;\
         keyed=100;safety=21876;commit=2335797244;e=2833:crash:4;e=4360:crash:6;\
         e=12889:join:;e=17928:pause:0,6420;e=18758:join:;e=21875:close:4",
    );
}

/// Was a bug (group seed 2209, no faults): members started together took one registry slot,
/// each read its own write back and never saw the other, and two of them owned t0-2
/// (`group-redelivery`, then `group-converged`). Fixed: every write follows a read that found
/// the slot the member's own, and a member whose slot was overwritten drops its partitions
/// uncommitted and registers elsewhere (the core test
/// `a_member_whose_slot_another_overwrote_drops_its_partitions_and_registers_elsewhere`).
#[test]
fn seed_2209_members_started_together_own_disjoint_partitions() {
    assert_group_passes(
        "seed=2209;b=1;p=3;m=4;session=6000;hb=1000;lat=1307;jit=2837;split=20;records=56;\
         keyed=50;safety=12740;commit=3944481717",
    );
}

/// Was a bug (group seed 1278): a member back from isolation re-registered in the slot a
/// newer member took, and both owned t0-0 past the convergence bound (`group-converged`).
/// Fixed: its lease lapse forgets the slot even when it holds nothing, and it reads before
/// it writes.
#[test]
fn seed_1278_member_back_from_isolation_rejoins_as_a_new_member() {
    assert_group_passes(
        "seed=1278;b=1;p=2;m=2;session=6000;hb=1000;lat=911;jit=658;split=20;records=1;\
         keyed=50;safety=26340;commit=3499365985;e=15696:join:;e=17568:isolate:2,14894;\
         e=23863:join:;e=26339:close:4",
    );
}

/// Was a bug (group seed 1000223, `group-commit-monotonic`: t0-1 from (8, 0) back to
/// (6, 0)): a member cut off from the coordinator was closed while its close commit waited
/// for the coordinator; its lease lapsed meanwhile (a closing member's lease went
/// unchecked), the others took its partitions over and committed further, and on its return
/// its close commit wrote the old positions. Fixed: a lapsed lease ends a close without
/// committing (the core test
/// `a_member_closed_and_paused_past_its_session_commits_nothing_on_its_return`).
#[test]
fn seed_1000223_member_closed_while_cut_off_commits_nothing_on_its_return() {
    assert_group_passes(
        "seed=1000223;b=2;p=5;m=4;session=3000;hb=500;lat=816;jit=2166;split=50;records=48;\
         keyed=50;safety=20613;commit=2272078571;e=662:close:5;e=3701:isolate:4,3224;\
         e=5660:close:7;e=9511:close:2;e=9607:join:;e=9914:join:;e=15748:crash:6",
    );
}

/// Was the same bug (group seed 1000784, `group-commit-monotonic`: t0-4 from (6, 0) back
/// to (0, 0)): closed 2.6 s into a 7.5 s isolation, the member reached the coordinator
/// again after its lease and its session, and its queued close commit went out first.
#[test]
fn seed_1000784_member_closed_while_isolated_commits_nothing_after_its_lease() {
    assert_group_passes(
        "seed=1000784;b=1;p=6;m=3;session=6000;hb=1500;lat=1304;jit=491;split=50;records=51;\
         keyed=50;safety=14042;commit=1004328465;e=106:delay:154,1269;e=989:join:;\
         e=1670:isolate:0,7532;e=2894:join:;e=4300:crash:1;e=4309:close:4",
    );
}

/// Was a bug (group seed 3001548, `group-commit-monotonic`: t0-4 from (6, 0) back to
/// (3, 0)): a commit written just before the member was cut off from the coordinator was
/// still unanswered when its lease lapsed (so it could not be withdrawn); it then failed
/// with its connection, and its retry went out on the new connection with the position of
/// a partition another member owned by then. Fixed: a group member's retry carries only the
/// partitions it still owns.
#[test]
fn seed_3001548_a_commit_retried_after_a_lapsed_lease_leaves_out_what_was_lost() {
    assert_group_passes(
        "seed=3001548;b=2;p=5;m=3;session=3000;hb=1000;lat=772;jit=2909;split=0;records=152;\
         keyed=100;safety=18862;commit=223263872;e=2016:isolate:7,2461;e=5731:join:;\
         e=11378:join:;e=18304:pause:4,2998",
    );
}

/// The same bug (group seed 3002219, `group-commit-monotonic`: t0-1 from (44, 0) back to
/// (38, 0)), after an isolation of 2.9 s with a 3 s session.
#[test]
fn seed_3002219_a_retry_after_an_isolation_commits_nothing_lost() {
    assert_group_passes(
        "seed=3002219;b=2;p=2;m=2;session=3000;hb=1000;lat=1427;jit=1445;split=0;records=127;\
         keyed=0;safety=14391;commit=3553574410;e=525:delay:87,1730;e=1457:delay:83,1114;\
         e=5929:pause:2,2648;e=6362:join:;e=7394:join:;e=10077:isolate:2,2916;e=12363:join:",
    );
}

/// Was a bug (group seed 3003298, `group-commit-monotonic`: t0-1 from (18, 0) back to
/// (5, 0); shrunk): cut off from the coordinator, the member wrote a commit at 2.8 s and was
/// paused at 3.51 s (SIGSTOP), before its lease lapsed; the network held the commit until the
/// isolation ended at 6.07 s, after another member had taken the partition over and
/// committed. Fixed: a write unanswered for the lease margin (0.5 s) is withdrawn while the
/// member still runs: the core aborts the coordinator connection (`CloseMode::Abort`), and
/// the bytes its host had not delivered are discarded.
#[test]
fn seed_3003298_a_commit_held_across_a_pause_is_withdrawn_at_the_margin() {
    assert_group_passes(
        "seed=3003298;b=1;p=5;m=2;session=3000;hb=500;lat=464;jit=994;split=50;records=1;\
         keyed=50;safety=7536;commit=1948713837;e=425:join:;e=2191:isolate:7,3882;\
         e=3512:pause:7,7061",
    );
}

/// The same bug (group seed 3011227, `group-commit-monotonic`: t0-1 from (7, 0) back to
/// (3, 0); shrunk): cut off at 2.9 s, the member wrote an auto-commit at 3.0 s and was paused
/// at 4.49 s, before its lease lapsed; the held commit landed when the isolation ended at
/// 8.08 s, after the new owner's. Fixed the same way: withdrawn at 3.67 s (the margin is
/// 666 ms), while the member still ran.
#[test]
fn seed_3011227_a_commit_unanswered_at_the_lapse_is_withdrawn() {
    assert_group_passes(
        "seed=3011227;b=2;p=2;m=4;session=4000;hb=666;lat=1382;jit=850;split=0;records=20;\
         keyed=100;safety=11727;commit=1869666347;e=1849:crash:2;e=2908:isolate:5,5170;\
         e=4494:pause:2,9257",
    );
}

/// Was the last zombie-commit class (a soak of group seeds 60000000..60020499 failed these
/// six, all `group-commit-monotonic`; shrunk): cut off from the coordinator, a member wrote
/// an auto-commit and was paused (SIGSTOP) 50–690 ms later, inside the lease margin, so it
/// could never withdraw it; when the cut healed its host retransmitted the commit, which
/// landed after the new owner's. Fixed: every connection of a group client asks its host to
/// give unacknowledged bytes up after the lease margin (`ConnectRequest::unacked_timeout`,
/// `TCP_USER_TIMEOUT`), which the world's hosts honour as Linux does, paused or not. Each
/// plan fails with the timeout left out of the connect requests.
const ZOMBIE_RETRANSMISSIONS: [(&str, &str); 6] = [
    (
        "60000850 (the full seed: t0-4 from (12, 0) back to (6, 0); committed at 4.20 s, paused at 4.72 s, margin 750 ms)",
        "seed=60000850;b=1;p=2;m=2;session=3000;hb=1000;lat=149;jit=769;split=80;records=12;\
         keyed=0;safety=12450;commit=2099521586;e=4064:isolate:0,4958;e=4717:pause:0,4405",
    ),
    (
        "60010275 (the full seed: t0-1 from (9, 0) back to (5, 0); committed at 8.00 s, paused at 8.61 s, margin 1 s)",
        "seed=60010275;b=2;p=2;m=4;session=4000;hb=1333;lat=573;jit=1776;split=50;records=20;\
         keyed=80;safety=14680;commit=2777063965;e=6494:isolate:6,6933;e=8608:pause:6,5363",
    ),
    (
        "60010922 (the full seed: t0-4 from (8, 0) back to (1, 0); committed at 1.00 s, paused at 1.05 s, margin 750 ms)",
        "seed=60010922;b=1;p=1;m=3;session=3000;hb=1000;lat=563;jit=2919;split=80;records=1;\
         keyed=80;safety=9236;commit=1228808444;e=972:isolate:5,6672;e=1053:pause:2,6797",
    ),
    (
        "60016505 (the full seed: t0-1 from (16, 0) back to (7, 0); committed at 9.05 s, paused at 9.10 s, margin 833 ms)",
        "seed=60016505;b=1;p=2;m=2;session=5000;hb=833;lat=1717;jit=1465;split=0;records=3;\
         keyed=100;safety=21509;commit=2591878386;e=475:close:6;e=5547:join:;\
         e=8437:isolate:1,8031;e=9097:pause:5,10757",
    ),
    (
        "60017400 (the full seed: t0-2 from (17, 0) back to (12, 0); committed at 7.70 s, paused at 8.34 s, margin 750 ms)",
        "seed=60017400;b=1;p=1;m=2;session=3000;hb=750;lat=255;jit=1333;split=80;records=12;\
         keyed=50;safety=15522;commit=1587266088;e=7072:join:;e=7475:isolate:1,3710;\
         e=8343:pause:4,4188",
    ),
    (
        "60020278 (the full seed: t0-3 from (10, 0) back to (2, 0); committed at 6.81 s, paused at 7.50 s, margin 1.25 s)",
        "seed=60020278;b=1;p=4;m=2;session=5000;hb=1250;lat=1029;jit=793;split=50;records=90;\
         keyed=0;safety=18833;commit=4130447659;e=6371:isolate:6,5175;e=7503:pause:0,7856",
    ),
];

#[test]
fn a_commit_held_by_a_cut_while_its_member_is_paused_is_given_up_by_its_host() {
    for (what, code) in ZOMBIE_RETRANSMISSIONS {
        let plan = GroupPlan::parse(code).expect("plan code parses");
        let a = run_group_plan(&plan);
        assert!(a.passed(), "seed {what}\n{plan}\n{:#?}", a.violations);
        assert!(
            a.stats.user_timeouts > 0,
            "seed {what}: no host gave a connection up"
        );
        let b = run_group_plan(&plan);
        assert_eq!(a.trace_hash, b.trace_hash, "same plan, same trace");
    }
}

/// Static plans in CI (`GroupPlan::static_from_seed`): every member has its own
/// `group.instance.id`; some crashes are restarts under the same id within the session and
/// some joins start a second process with a live member's id. Every group invariant holds,
/// `group-static-one-deliverer` included, and the twins were fenced.
#[test]
fn static_group_simulation_seeds() {
    let seeds = env_u64("STELLFLOW_SIM_STATIC_SEEDS").unwrap_or(12);
    let mut failures = Vec::new();
    let (mut fenced, mut restarts) = (0, 0);
    for seed in 0..seeds {
        let plan = GroupPlan::static_from_seed(seed);
        let (report, err) = check_plan(&plan);
        if let Some(msg) = err {
            failures.push(report_failure(&plan, &report, &msg));
        }
        fenced += report.counts.fenced;
        restarts += report.counts.restarts_done;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        fenced > 0,
        "no twin was fenced: the set does not exercise fencing"
    );
    assert!(
        restarts > 0,
        "no restart finished: the set does not exercise restarts"
    );
}

/// Three static members over six partitions (session 10 s, heartbeat 500 ms); member 0
/// crashes 8 s in and starts again under its id 1 s later. Its new member gets exactly the
/// partitions it held, within the static lease (5 × 500 ms, less what the old member was already silent) plus a settling quarter
/// interval and a claim round of its start, and no other member is assigned anything
/// meanwhile. A dynamic member would wait for the session instead, or take others'.
#[test]
fn a_static_member_restarted_within_its_session_takes_back_its_own_partitions_at_once() {
    let plan = GroupPlan::parse(
        "seed=46;b=1;p=6;m=3;session=10000;hb=500;lat=300;jit=200;split=0;records=150;\
         keyed=0;safety=20000;commit=4294967295;static=1;e=8000:restart:0,1000",
    )
    .expect("plan code parses");
    let report = run_group_plan(&plan);
    assert!(report.passed(), "{plan}\n{:#?}", report.violations);
    let c = report.counts;
    assert_eq!(c.restarts_done, 1, "{c:?}");
    assert_eq!(c.restarts_given_other_partitions, 0, "{c:?}");
    assert_eq!(c.moved_during_restarts, 0, "{c:?}");
    assert!(c.max_restart_takeback_ms <= 2_500, "{c:?}");
}

/// Two live processes with one `group.instance.id`: the second fences the first, which
/// drops its partitions and fails with an error naming the id (checked by the member), and
/// the two never deliver one partition in turn (`group-static-one-deliverer`).
#[test]
fn a_second_live_member_with_the_same_instance_id_fences_the_first() {
    let plan = GroupPlan::parse(
        "seed=47;b=2;p=6;m=3;session=6000;hb=1000;lat=300;jit=500;split=20;records=150;\
         keyed=50;safety=20000;commit=0;static=1;e=7000:twin:1",
    )
    .expect("plan code parses");
    let report = run_group_plan(&plan);
    assert!(report.passed(), "{plan}\n{:#?}", report.violations);
    assert_eq!(report.counts.fenced, 1, "{:?}", report.counts);
}
