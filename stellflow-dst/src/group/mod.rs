//! Group worlds: two to five members of one consumer group subscribed to a multi-partition
//! topic while a producer feeds it keyed and keyless records, with members joining late,
//! closing gracefully, crashing (dropped without close), pausing past their session (not
//! driven at all, as under SIGSTOP) and cut off from the coordinator, and connection resets
//! and slow responses besides. The group invariants are checked from outside the clients —
//! what each member delivered and when, the assignment it reports, and the committed
//! positions in the coordinator's offset store — as [`watch`] describes: convergence within
//! the stated bound once membership is stable, no committed position past a record nobody
//! delivered, redelivery only across a handover and at most from the old owner's last commit,
//! and never two members with the same view delivering one partition at once.
//!
//! A plan ([`GroupPlan`]) comes from a seed, prints itself, replays
//! (`STELLFLOW_GROUP_PLAN`) and shrinks ([`shrink_group`]) as the fault plans of
//! [`crate::run_plan`] do. One file per job: `plan.rs` (plans), `member.rs` (a member as an
//! application runs it), `feed.rs` (the producer), `watch.rs` (the invariants), `run.rs`
//! (the phases and shrinking), `scale.rs` (large groups: convergence and
//! the registry's cost).

mod feed;
mod member;
mod plan;
mod run;
pub mod scale;
pub mod watch;

pub use member::{CLOSE_WAIT, COMMIT_EVERY, GROUP, Listener, bootstrap_config, member_config};
pub use plan::{GroupEvent, GroupPlan, GroupScenario, MAX_MEMBERS, PlannedEvent};
pub use run::{
    GROUP_LIVENESS, GroupReport, SAMPLE_EVERY, run_group_plan, run_group_plan_logged, shrink_group,
};
pub use watch::{CONVERGENCE_HEARTBEATS, GroupCounts, GroupWatch};
