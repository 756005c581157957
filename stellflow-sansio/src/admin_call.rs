//! Admin commands and their answers, typed end to end: an [`AdminCall<T>`] starts as an
//! [`AdminId<T>`] and its [`AdminOutcome`] gives back a `T`.

use crate::admin_results::{
    BrokerApiVersions, ClusterStatus, CommittedOffset, DecommissionResult, ListedOffset,
    OffsetSpec, ReassertedPartition, TopicAdminResult, TopicDescription,
};
use crate::request::{RequestId, Target};
use std::fmt;
use std::marker::PhantomData;

/// What one command asks for (built only by the typed [`AdminCall`] constructors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdminRequest {
    ApiVersions {
        target: Target,
    },
    DescribeCluster {
        target: Target,
    },
    HealthCheck {
        target: Target,
    },
    DescribeTopics {
        topics: Vec<String>,
    },
    CreateTopic {
        topic: String,
        partitions: i32,
        target: Target,
    },
    DeleteTopic {
        topic: String,
        target: Target,
    },
    AlterPartition {
        change: PartitionOverride,
        target: Target,
    },
    ListOffsets {
        partitions: Vec<(String, i32, OffsetSpec)>,
    },
    DecommissionBroker {
        broker_id: i32,
        target: Target,
    },
    CommittedOffsets {
        group: String,
        partitions: Vec<(String, i32)>,
    },
    ReassertLeadership {
        broker_id: i32,
    },
}

/// What [`AdminCall::describe_topics`] finds: the topics, and the requested names no broker
/// knows.
pub(crate) type Described = (Vec<TopicDescription>, Vec<String>);

/// The finished result of a command, by result type (one variant per [`AdminOutput`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// ApiVersions (boxed: the largest result, and the rarest).
    ApiVersions(Box<BrokerApiVersions>),
    /// DescribeCluster and HealthCheck.
    Status(ClusterStatus),
    /// DescribeTopics: found, and missing names.
    Topics(Vec<TopicDescription>, Vec<String>),
    /// CreateTopic, DeleteTopic, AlterPartition.
    TopicAdmin(TopicAdminResult),
    /// ListOffsets.
    Offsets(Vec<ListedOffset>),
    /// Committed group offsets.
    Committed(Vec<CommittedOffset>),
    /// DecommissionBroker.
    Decommissioned(DecommissionResult),
    /// ReassertLeadership.
    Reasserted(Vec<ReassertedPartition>),
}

/// A controller-style override of one partition's leader, epoch, replicas and ISR, for
/// [`AdminCall::alter_partition`] (PROTOCOL.md §3.14). Use with care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOverride {
    /// Topic (validated client-side).
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// New leader id.
    pub leader_id: i32,
    /// Leader epoch, not lower than the log's current epoch.
    pub leader_epoch: i32,
    /// Replica ids.
    pub replicas: Vec<i32>,
    /// ISR ids.
    pub isr: Vec<i32>,
}

/// An admin command whose result is a `T`: run it with the client's `admin` (the core) or
/// the admin handle's `call` (the adapters); shortcuts such as `create_topic` build and run
/// one. The
/// constructors take borrowed arguments, as the adapters' admin handles do.
pub struct AdminCall<T> {
    pub(crate) request: AdminRequest,
    result: PhantomData<fn() -> T>,
}

impl<T> AdminCall<T> {
    fn new(request: AdminRequest) -> Self {
        AdminCall {
            request,
            result: PhantomData,
        }
    }

    /// The command's name (`"CreateTopic"`, `"ListOffsets"`, ...), as the adapters' `admin`
    /// span shows it.
    pub fn name(&self) -> &'static str {
        match &self.request {
            AdminRequest::ApiVersions { .. } => "ApiVersions",
            AdminRequest::DescribeCluster { .. } => "DescribeCluster",
            AdminRequest::HealthCheck { .. } => "HealthCheck",
            AdminRequest::DescribeTopics { .. } => "DescribeTopics",
            AdminRequest::CreateTopic { .. } => "CreateTopic",
            AdminRequest::DeleteTopic { .. } => "DeleteTopic",
            AdminRequest::AlterPartition { .. } => "AlterPartition",
            AdminRequest::ListOffsets { .. } => "ListOffsets",
            AdminRequest::DecommissionBroker { .. } => "DecommissionBroker",
            AdminRequest::CommittedOffsets { .. } => "CommittedOffsets",
            AdminRequest::ReassertLeadership { .. } => "ReassertLeadership",
        }
    }
}

impl<T> Clone for AdminCall<T> {
    fn clone(&self) -> Self {
        AdminCall::new(self.request.clone())
    }
}

impl<T> fmt::Debug for AdminCall<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AdminCall").field(&self.request).finish()
    }
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|t| (*t).to_owned()).collect()
}

impl AdminCall<BrokerApiVersions> {
    /// The API versions one broker supports, and the ones this client chose.
    pub fn api_versions(target: Target) -> Self {
        AdminCall::new(AdminRequest::ApiVersions { target })
    }
}

impl AdminCall<ClusterStatus> {
    /// DescribeCluster on one broker (its local view: counts, cluster id).
    pub fn describe_cluster(target: Target) -> Self {
        AdminCall::new(AdminRequest::DescribeCluster { target })
    }

    /// HealthCheck on one broker (always OK on today's server).
    pub fn health_check(target: Target) -> Self {
        AdminCall::new(AdminRequest::HealthCheck { target })
    }
}

impl AdminCall<Described> {
    /// Topics from a fresh metadata round over every known broker (empty = all topics), and
    /// the requested names no broker knows.
    pub fn describe_topics(topics: &[&str]) -> Self {
        AdminCall::new(AdminRequest::DescribeTopics {
            topics: owned(topics),
        })
    }
}

impl AdminCall<TopicAdminResult> {
    /// CreateTopic on one broker (the server creates it on that broker only); at least one
    /// partition.
    pub fn create_topic(topic: &str, partitions: i32, target: Target) -> Self {
        AdminCall::new(AdminRequest::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            target,
        })
    }

    /// DeleteTopic on one broker.
    pub fn delete_topic(topic: &str, target: Target) -> Self {
        AdminCall::new(AdminRequest::DeleteTopic {
            topic: topic.to_owned(),
            target,
        })
    }

    /// AlterPartition on one broker: applies `change` as a controller would (use with care).
    pub fn alter_partition(change: PartitionOverride, target: Target) -> Self {
        AdminCall::new(AdminRequest::AlterPartition { change, target })
    }
}

impl AdminCall<Vec<ListedOffset>> {
    /// ListOffsets for `(topic, partition, spec)` triples, routed to each partition's leader
    /// and batched per broker; results in request order.
    pub fn list_offsets(partitions: &[(&str, i32, OffsetSpec)]) -> Self {
        let partitions = partitions.iter().map(|(t, p, s)| ((*t).to_owned(), *p, *s));
        AdminCall::new(AdminRequest::ListOffsets {
            partitions: partitions.collect(),
        })
    }
}

impl AdminCall<Vec<CommittedOffset>> {
    /// The positions `group` committed for `(topic, partition)` pairs, in request order:
    /// FindCoordinator (on any broker), then OffsetFetch on the coordinator's host:port, as the
    /// consumer does. Mid-blob commits decode to their record index (DESIGN §3.1).
    pub fn committed_offsets(group: &str, partitions: &[(&str, i32)]) -> Self {
        let partitions = partitions.iter().map(|(t, p)| ((*t).to_owned(), *p));
        AdminCall::new(AdminRequest::CommittedOffsets {
            group: group.to_owned(),
            partitions: partitions.collect(),
        })
    }
}

impl AdminCall<DecommissionResult> {
    /// DecommissionBroker (a stub on today's server).
    pub fn decommission_broker(broker_id: i32, target: Target) -> Self {
        AdminCall::new(AdminRequest::DecommissionBroker { broker_id, target })
    }
}

impl AdminCall<Vec<ReassertedPartition>> {
    /// After a broker restarted on its data, every partition it recovered reports leader 0 and
    /// refuses Produce/Fetch with 9 (PROTOCOL.md §8 item 20). This asks that broker for its
    /// view, then sends one AlterPartition per leaderless partition it holds, naming itself as
    /// leader with the partition's current epoch and `replicas = isr = [broker]`. One entry per
    /// leaderless partition found (empty when it had none).
    pub fn reassert_leadership(broker_id: i32) -> Self {
        AdminCall::new(AdminRequest::ReassertLeadership { broker_id })
    }
}

/// The id of a started admin command whose result is a `T`: the [`crate::Event::Admin`] with
/// [`AdminId::id`] answers it, and [`AdminOutcome::take`] with this id gives the `T`.
pub struct AdminId<T> {
    id: RequestId,
    result: PhantomData<fn() -> T>,
}

impl<T> AdminId<T> {
    pub(crate) fn new(id: RequestId) -> Self {
        AdminId {
            id,
            result: PhantomData,
        }
    }

    /// The id the answering [`crate::Event::Admin`] carries.
    pub fn id(&self) -> RequestId {
        self.id
    }
}

impl<T> Clone for AdminId<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for AdminId<T> {}

impl<T> PartialEq for AdminId<T> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl<T> Eq for AdminId<T> {}

impl<T> fmt::Debug for AdminId<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AdminId").field(&self.id.0).finish()
    }
}

/// The successful answer to one admin command, as [`crate::Event::Admin`] carries it; take
/// the typed result out with [`AdminOutcome::take`] and the command's [`AdminId`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminOutcome {
    id: RequestId,
    value: Outcome,
}

impl AdminOutcome {
    pub(crate) fn new(id: RequestId, value: Outcome) -> Self {
        AdminOutcome { id, value }
    }

    /// The result, untyped (for the core's own checks).
    pub(crate) fn value(&self) -> &Outcome {
        &self.value
    }

    /// The command this answers.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The typed result, when this answers the command `id` names; otherwise the outcome
    /// comes back unchanged (it answers another command).
    pub fn take<T: AdminOutput>(self, id: AdminId<T>) -> Result<T, AdminOutcome> {
        if self.id != id.id {
            return Err(self);
        }
        let AdminOutcome { id, value } = self;
        T::from_outcome(value).map_err(|value| AdminOutcome { id, value })
    }
}

mod sealed {
    /// Implemented by the result types of admin commands only.
    pub trait Sealed: Sized {
        /// The typed result, or the outcome back when it holds another type.
        fn from_outcome(outcome: super::Outcome) -> Result<Self, super::Outcome>;
    }
}

/// A result type of an admin command (the `T` of [`AdminCall<T>`]); sealed.
pub trait AdminOutput: sealed::Sealed {}

/// Connects each result type to its [`Outcome`] variant.
macro_rules! outputs {
    ($($ty:ty => $variant:ident;)*) => {$(
        impl sealed::Sealed for $ty {
            fn from_outcome(outcome: Outcome) -> Result<Self, Outcome> {
                match outcome {
                    Outcome::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
        }
        impl AdminOutput for $ty {}
    )*};
}

outputs! {
    ClusterStatus => Status;
    TopicAdminResult => TopicAdmin;
    Vec<ListedOffset> => Offsets;
    Vec<CommittedOffset> => Committed;
    DecommissionResult => Decommissioned;
    Vec<ReassertedPartition> => Reasserted;
}

impl sealed::Sealed for BrokerApiVersions {
    fn from_outcome(outcome: Outcome) -> Result<Self, Outcome> {
        match outcome {
            Outcome::ApiVersions(v) => Ok(*v),
            other => Err(other),
        }
    }
}

impl AdminOutput for BrokerApiVersions {}

impl sealed::Sealed for Described {
    fn from_outcome(outcome: Outcome) -> Result<Self, Outcome> {
        match outcome {
            Outcome::Topics(found, missing) => Ok((found, missing)),
            other => Err(other),
        }
    }
}

impl AdminOutput for Described {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::BrokerAddress;
    use stellflow_proto::ErrorCode;

    fn status() -> ClusterStatus {
        ClusterStatus {
            address: BrokerAddress::new("b", 1),
            broker_id: Some(1),
            error_code: ErrorCode::NONE,
            cluster_id: None,
            broker_count: 1,
            topic_count: 0,
            partition_count: 0,
        }
    }

    #[test]
    fn an_outcome_gives_its_typed_result_to_its_own_id_only() {
        let asked: AdminId<ClusterStatus> = AdminId::new(RequestId(7));
        let other: AdminId<ClusterStatus> = AdminId::new(RequestId(8));
        let outcome = AdminOutcome::new(RequestId(7), Outcome::Status(status()));
        let back = outcome
            .clone()
            .take(other)
            .expect_err("not the answer to 8");
        assert_eq!(back, outcome);
        assert_eq!(outcome.take(asked), Ok(status()));
    }
}
