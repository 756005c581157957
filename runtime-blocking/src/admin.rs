//! [`Admin`]: every admin operation of the core, blocking until its typed result.

use crate::{
    AdminRequest, AdminResponse, BrokerApiVersions, Client, ClusterStatus, CommittedOffset,
    ListedOffset, OffsetSpec, ReassertedPartition, RequestOptions, Result, Target,
    TopicAdminResult, TopicDescription,
};
use stellflow_sansio::{AdminCall, DecommissionResult};

/// Admin operations. Cheap to clone; `Send + Sync`.
///
/// ```no_run
/// # fn main() -> Result<(), stellflow_blocking::Error> {
/// use stellflow_blocking::{Admin, ClientConfig, Target};
/// let admin = Admin::connect(ClientConfig::new("127.0.0.1:9092")?)?;
/// admin.create_topic("orders", 6, Target::Any)?;
/// let (topics, _missing) = admin.describe_topics(&["orders"])?;
/// assert_eq!(topics[0].partitions.len(), 6);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    pub(crate) fn new(client: Client) -> Self {
        Admin { client }
    }

    /// Starts a client of its own for `config` (see [`Client::connect`]).
    pub fn connect(config: crate::ClientConfig) -> Result<Admin> {
        Ok(Client::connect(config)?.admin())
    }

    /// The request/connection counters of the client (DESIGN §6 metrics).
    pub fn counters(&self) -> stellflow_sansio::Counters {
        self.client.counters()
    }

    /// The client this handle runs on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs any admin command and waits for its typed result (the core's request timeout
    /// bounds the wait).
    pub fn request(&self, request: AdminRequest, opts: RequestOptions) -> Result<AdminResponse> {
        self.client
            .call(|i, now, tx| {
                let id = i.client.admin(now, request, &opts)?;
                i.replies.admin.insert(id, tx);
                Ok(())
            })?
            .wait()
    }

    /// Runs `call` with default options and takes its typed result out of the answer.
    fn go<T>(&self, call: AdminCall<T>) -> Result<T> {
        Ok((call.take)(
            self.request(call.request, RequestOptions::default())?,
        )?)
    }

    /// The API versions one broker supports and the ones this client chose.
    pub fn api_versions(&self, target: Target) -> Result<BrokerApiVersions> {
        self.go(AdminCall::api_versions(target))
    }

    /// DescribeCluster on one broker (its local view).
    pub fn describe_cluster(&self, target: Target) -> Result<ClusterStatus> {
        self.go(AdminCall::describe_cluster(target))
    }

    /// HealthCheck on one broker.
    pub fn health_check(&self, target: Target) -> Result<ClusterStatus> {
        self.go(AdminCall::health_check(target))
    }

    /// Topics from a fresh metadata round (empty = all), and the requested names no broker
    /// knows.
    pub fn describe_topics(&self, topics: &[&str]) -> Result<(Vec<TopicDescription>, Vec<String>)> {
        self.go(AdminCall::describe_topics(topics))
    }

    /// CreateTopic on one broker (per-partition outcomes are in the result).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<TopicAdminResult> {
        self.go(AdminCall::create_topic(topic, partitions, target))
    }

    /// DeleteTopic on one broker.
    pub fn delete_topic(&self, topic: &str, target: Target) -> Result<TopicAdminResult> {
        self.go(AdminCall::delete_topic(topic, target))
    }

    /// AlterPartition: a controller-style override of one partition (use with care). Build the
    /// request as [`AdminRequest::AlterPartition`].
    pub fn alter_partition(&self, request: AdminRequest) -> Result<TopicAdminResult> {
        self.go(AdminCall::alter_partition(request))
    }

    /// ListOffsets, routed to each partition's leader; results in request order.
    pub fn list_offsets(
        &self,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<Vec<ListedOffset>> {
        self.go(AdminCall::list_offsets(partitions))
    }

    /// The positions `group` committed for `(topic, partition)` pairs (FindCoordinator, then
    /// OffsetFetch on the coordinator), in request order; `None` where nothing is committed.
    /// Reads only: no consumer joins the group.
    pub fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<CommittedOffset>> {
        self.go(AdminCall::committed_offsets(group, partitions))
    }

    /// DecommissionBroker (a stub on today's server).
    pub fn decommission_broker(
        &self,
        broker_id: i32,
        target: Target,
    ) -> Result<DecommissionResult> {
        self.go(AdminCall::decommission_broker(broker_id, target))
    }

    /// Re-asserts the leadership of a restarted broker's leaderless partitions.
    pub fn reassert_leadership(&self, broker_id: i32) -> Result<Vec<ReassertedPartition>> {
        self.go(AdminCall::reassert_leadership(broker_id))
    }
}
