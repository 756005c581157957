//! The [`Admin`] handle: every admin operation of the core, awaited.

use crate::driver::Link;
use crate::{ClientConfig, Error, Options, Runtime};
use std::marker::PhantomData;
use stellflow_sansio::{
    AdminCall, AdminRequest, AdminResponse, BrokerApiVersions, ClusterMetadata, ClusterStatus,
    CommittedOffset, Counters, DecommissionResult, ListedOffset, OffsetSpec, ReassertedPartition,
    RequestOptions, Target, TopicAdminResult, TopicDescription,
};

/// Cluster and topic administration. Cheap to clone. `R` is the runtime that drives the
/// client; the adapter crates name it for you (`stellflow_tokio::Admin`, …).
///
/// ```no_run
/// # async fn f() -> Result<(), stellflow_tokio::Error> {
/// use stellflow_tokio::{Admin, ClientConfig, Target};
/// let admin = Admin::connect(ClientConfig::new("127.0.0.1:9092")?).await?;
/// admin.create_topic("orders", 6, Target::Any).await?;
/// let (topics, missing) = admin.describe_topics(&["orders"]).await?;
/// assert_eq!(topics[0].partitions.len(), 6);
/// # let _ = missing; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Admin<R: Runtime> {
    link: Link,
    runtime: PhantomData<R>,
}

impl<R: Runtime> Admin<R> {
    /// Starts a client on the runtime `R` with default [`Options`].
    pub async fn connect(config: ClientConfig) -> Result<Admin<R>, Error> {
        Self::connect_with(config, Options::default()).await
    }

    /// Like [`Admin::connect`], with adapter options.
    pub async fn connect_with(config: ClientConfig, options: Options) -> Result<Admin<R>, Error> {
        Ok(Admin::from_link(Link::start::<R>(config, options)?))
    }

    pub(crate) fn from_link(link: Link) -> Admin<R> {
        Admin {
            link,
            runtime: PhantomData,
        }
    }

    /// Runs any admin command with per-request options (trace context, timeout).
    pub async fn request(
        &self,
        request: AdminRequest,
        opts: RequestOptions,
    ) -> Result<AdminResponse, Error> {
        let result = self
            .link
            .call(
                move |st, now, tx| match st.client.admin(now, request, &opts) {
                    Ok(id) => drop(st.admin.insert(id, tx)),
                    Err(e) => drop(crate::driver::answer(&tx, Err(e))),
                },
            )
            .await?;
        Ok(result?)
    }

    /// Runs `call` with default options and takes its typed result out of the answer.
    async fn go<T>(&self, call: AdminCall<T>) -> Result<T, Error> {
        let response = self
            .request(call.request, RequestOptions::default())
            .await?;
        Ok((call.take)(response)?)
    }

    /// The API versions one broker supports and the ones this client chose.
    pub async fn api_versions(&self, target: Target) -> Result<BrokerApiVersions, Error> {
        self.go(AdminCall::api_versions(target)).await
    }

    /// DescribeCluster on one broker (its local view).
    pub async fn describe_cluster(&self, target: Target) -> Result<ClusterStatus, Error> {
        self.go(AdminCall::describe_cluster(target)).await
    }

    /// HealthCheck on one broker.
    pub async fn health_check(&self, target: Target) -> Result<ClusterStatus, Error> {
        self.go(AdminCall::health_check(target)).await
    }

    /// Topics from a fresh metadata round (empty = all), and requested names no broker knows.
    pub async fn describe_topics(
        &self,
        topics: &[&str],
    ) -> Result<(Vec<TopicDescription>, Vec<String>), Error> {
        self.go(AdminCall::describe_topics(topics)).await
    }

    /// CreateTopic on one broker.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<TopicAdminResult, Error> {
        self.go(AdminCall::create_topic(topic, partitions, target))
            .await
    }

    /// DeleteTopic on one broker.
    pub async fn delete_topic(
        &self,
        topic: &str,
        target: Target,
    ) -> Result<TopicAdminResult, Error> {
        self.go(AdminCall::delete_topic(topic, target)).await
    }

    /// AlterPartition: overrides one partition's leader, epoch, replicas and ISR on one broker
    /// (a controller operation: use with care). `assignment` is `(replicas, isr)`.
    pub async fn alter_partition(
        &self,
        topic: &str,
        partition: i32,
        leader: (i32, i32),
        assignment: (Vec<i32>, Vec<i32>),
        target: Target,
    ) -> Result<TopicAdminResult, Error> {
        let req = AdminRequest::AlterPartition {
            topic: topic.to_owned(),
            partition,
            leader_id: leader.0,
            leader_epoch: leader.1,
            replicas: assignment.0,
            isr: assignment.1,
            target,
        };
        self.go(AdminCall::alter_partition(req)).await
    }

    /// ListOffsets for `(topic, partition, spec)` triples, routed to the leaders.
    pub async fn list_offsets(
        &self,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<Vec<ListedOffset>, Error> {
        self.go(AdminCall::list_offsets(partitions)).await
    }

    /// The positions `group` committed for `(topic, partition)` pairs (FindCoordinator, then
    /// OffsetFetch on the coordinator), in request order; `None` where nothing is committed.
    /// Reads only: no consumer joins the group.
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<CommittedOffset>, Error> {
        self.go(AdminCall::committed_offsets(group, partitions))
            .await
    }

    /// DecommissionBroker (a stub on today's server).
    pub async fn decommission_broker(
        &self,
        broker_id: i32,
        target: Target,
    ) -> Result<DecommissionResult, Error> {
        self.go(AdminCall::decommission_broker(broker_id, target))
            .await
    }

    /// Re-asserts leadership of a restarted broker's leaderless partitions.
    pub async fn reassert_leadership(
        &self,
        broker_id: i32,
    ) -> Result<Vec<ReassertedPartition>, Error> {
        self.go(AdminCall::reassert_leadership(broker_id)).await
    }

    /// Asks for a metadata refresh now (the core also refreshes on errors and periodically).
    pub async fn refresh_metadata(&self) -> Result<(), Error> {
        self.link
            .query(|st, now| st.client.refresh_metadata(now))
            .await
    }

    /// A snapshot of the merged cluster metadata.
    pub async fn metadata(&self) -> Result<ClusterMetadata, Error> {
        self.link.query(|st, _| st.client.metadata().clone()).await
    }

    /// A snapshot of the client's counters (DESIGN §6 metrics).
    pub async fn counters(&self) -> Result<Counters, Error> {
        self.link.query(|st, _| st.client.counters().clone()).await
    }
}
