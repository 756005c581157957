//! [`Admin`]: every admin operation of the core, blocking until its typed result.

use crate::{
    AdminRequest, AdminResponse, BrokerApiVersions, Client, ClusterStatus, CommittedOffset, Error,
    ListedOffset, OffsetSpec, ReassertedPartition, RequestOptions, Result, Target,
    TopicAdminResult, TopicDescription,
};
use stellflow_sansio::DecommissionResult;

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

macro_rules! expect {
    ($e:expr, $p:pat => $v:expr) => {
        match $e? {
            $p => Ok($v),
            other => Err(Error::Unexpected(format!("{other:?}"))),
        }
    };
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

    fn go(&self, request: AdminRequest) -> Result<AdminResponse> {
        self.request(request, RequestOptions::default())
    }

    /// The API versions one broker supports and the ones this client chose.
    pub fn api_versions(&self, target: Target) -> Result<BrokerApiVersions> {
        expect!(self.go(AdminRequest::ApiVersions { target }), AdminResponse::ApiVersions(v) => v)
    }

    /// DescribeCluster on one broker (its local view).
    pub fn describe_cluster(&self, target: Target) -> Result<ClusterStatus> {
        expect!(self.go(AdminRequest::DescribeCluster { target }), AdminResponse::Cluster(c) => c)
    }

    /// HealthCheck on one broker.
    pub fn health_check(&self, target: Target) -> Result<ClusterStatus> {
        expect!(self.go(AdminRequest::HealthCheck { target }), AdminResponse::Health(c) => c)
    }

    /// Topics from a fresh metadata round (empty = all), and the requested names no broker
    /// knows.
    pub fn describe_topics(&self, topics: &[&str]) -> Result<(Vec<TopicDescription>, Vec<String>)> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        expect!(self.go(AdminRequest::DescribeTopics { topics }),
            AdminResponse::Topics { topics, missing } => (topics, missing))
    }

    /// CreateTopic on one broker (per-partition outcomes are in the result).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<TopicAdminResult> {
        let topic = topic.to_owned();
        expect!(self.go(AdminRequest::CreateTopic { topic, partitions, target }),
            AdminResponse::TopicCreated(r) => r)
    }

    /// DeleteTopic on one broker.
    pub fn delete_topic(&self, topic: &str, target: Target) -> Result<TopicAdminResult> {
        let topic = topic.to_owned();
        expect!(self.go(AdminRequest::DeleteTopic { topic, target }), AdminResponse::TopicDeleted(r) => r)
    }

    /// AlterPartition: a controller-style override of one partition (use with care). Build the
    /// request as [`AdminRequest::AlterPartition`].
    pub fn alter_partition(&self, request: AdminRequest) -> Result<TopicAdminResult> {
        expect!(self.go(request), AdminResponse::PartitionAltered(r) => r)
    }

    /// ListOffsets, routed to each partition's leader; results in request order.
    pub fn list_offsets(
        &self,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<Vec<ListedOffset>> {
        let partitions = partitions
            .iter()
            .map(|(t, p, s)| ((*t).to_owned(), *p, *s))
            .collect();
        expect!(self.go(AdminRequest::ListOffsets { partitions }), AdminResponse::Offsets(o) => o)
    }

    /// The positions `group` committed for `(topic, partition)` pairs (FindCoordinator, then
    /// OffsetFetch on the coordinator), in request order; `None` where nothing is committed.
    /// Reads only: no consumer joins the group.
    pub fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<CommittedOffset>> {
        let group = group.to_owned();
        let partitions = partitions
            .iter()
            .map(|(t, p)| ((*t).to_owned(), *p))
            .collect();
        expect!(self.go(AdminRequest::CommittedOffsets { group, partitions }),
            AdminResponse::CommittedOffsets(c) => c)
    }

    /// DecommissionBroker (a stub on today's server).
    pub fn decommission_broker(
        &self,
        broker_id: i32,
        target: Target,
    ) -> Result<DecommissionResult> {
        expect!(self.go(AdminRequest::DecommissionBroker { broker_id, target }),
            AdminResponse::Decommissioned(r) => r)
    }

    /// Re-asserts the leadership of a restarted broker's leaderless partitions.
    pub fn reassert_leadership(&self, broker_id: i32) -> Result<Vec<ReassertedPartition>> {
        expect!(self.go(AdminRequest::ReassertLeadership { broker_id }),
            AdminResponse::LeadershipReasserted(r) => r)
    }
}
