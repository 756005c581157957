//! The admin commands on [`Client`]: thin delegations to the admin feature
//! ([`crate::admin`]) that keep the drain rule (a command that started runs what became
//! possible), and the shortcuts that build each [`AdminCall`].

use super::Client;
use crate::admin_call::{AdminCall, AdminId, AdminOutput, Described};
use crate::admin_results::{
    BrokerApiVersions, ClusterStatus, CommittedOffset, DecommissionResult, ListedOffset,
    OffsetSpec, ReassertedPartition, TopicAdminResult,
};
use crate::error::AdminError;
use crate::request::{RequestOptions, Target};
use std::time::Instant;

impl Client {
    /// Starts an admin command with per-request options (trace context, timeout). Validation
    /// errors (bad topic names, bad arguments) are returned at once; everything else arrives as
    /// one [`crate::Event::Admin`] whose outcome [`AdminOutcome::take`] turns into the `T`.
    ///
    /// [`AdminOutcome::take`]: crate::AdminOutcome::take
    pub fn admin<T: AdminOutput>(
        &mut self,
        now: Instant,
        call: AdminCall<T>,
        opts: &RequestOptions,
    ) -> Result<AdminId<T>, AdminError> {
        let bounded = self.outage_options(opts);
        let opts = bounded.as_ref().unwrap_or(opts);
        let id = (self.admin).start(&mut self.shared, now, call.request, opts)?;
        self.process(now);
        Ok(AdminId::new(id))
    }

    /// Starts the ApiVersions call of one broker ([`AdminCall::api_versions`]).
    pub fn api_versions(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<BrokerApiVersions>, AdminError> {
        self.admin(
            now,
            AdminCall::api_versions(target),
            &RequestOptions::default(),
        )
    }

    /// Starts DescribeCluster on one broker ([`AdminCall::describe_cluster`]).
    pub fn describe_cluster(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<ClusterStatus>, AdminError> {
        self.admin(
            now,
            AdminCall::describe_cluster(target),
            &RequestOptions::default(),
        )
    }

    /// Starts HealthCheck on one broker ([`AdminCall::health_check`]).
    pub fn health_check(
        &mut self,
        now: Instant,
        target: Target,
    ) -> Result<AdminId<ClusterStatus>, AdminError> {
        self.admin(
            now,
            AdminCall::health_check(target),
            &RequestOptions::default(),
        )
    }

    /// Starts describing topics from a fresh metadata round ([`AdminCall::describe_topics`]);
    /// empty = all.
    pub fn describe_topics(
        &mut self,
        now: Instant,
        topics: &[&str],
    ) -> Result<AdminId<Described>, AdminError> {
        self.admin(
            now,
            AdminCall::describe_topics(topics),
            &RequestOptions::default(),
        )
    }

    /// Starts CreateTopic on one broker ([`AdminCall::create_topic`]).
    pub fn create_topic(
        &mut self,
        now: Instant,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<AdminId<TopicAdminResult>, AdminError> {
        let call = AdminCall::create_topic(topic, partitions, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts DeleteTopic on one broker ([`AdminCall::delete_topic`]).
    pub fn delete_topic(
        &mut self,
        now: Instant,
        topic: &str,
        target: Target,
    ) -> Result<AdminId<TopicAdminResult>, AdminError> {
        let call = AdminCall::delete_topic(topic, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts ListOffsets routed to the leaders ([`AdminCall::list_offsets`]).
    pub fn list_offsets(
        &mut self,
        now: Instant,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<AdminId<Vec<ListedOffset>>, AdminError> {
        let call = AdminCall::list_offsets(partitions);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts reading a group's committed positions ([`AdminCall::committed_offsets`]).
    pub fn committed_offsets(
        &mut self,
        now: Instant,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<AdminId<Vec<CommittedOffset>>, AdminError> {
        let call = AdminCall::committed_offsets(group, partitions);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts DecommissionBroker ([`AdminCall::decommission_broker`]).
    pub fn decommission_broker(
        &mut self,
        now: Instant,
        broker_id: i32,
        target: Target,
    ) -> Result<AdminId<DecommissionResult>, AdminError> {
        let call = AdminCall::decommission_broker(broker_id, target);
        self.admin(now, call, &RequestOptions::default())
    }

    /// Starts re-asserting the leadership of a restarted broker's leaderless partitions
    /// ([`AdminCall::reassert_leadership`]).
    pub fn reassert_leadership(
        &mut self,
        now: Instant,
        broker_id: i32,
    ) -> Result<AdminId<Vec<ReassertedPartition>>, AdminError> {
        let call = AdminCall::reassert_leadership(broker_id);
        self.admin(now, call, &RequestOptions::default())
    }
}
