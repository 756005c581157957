//! The [`Admin`] handle: every admin operation of the core, awaited.

use crate::state::Link;
use crate::{Client, ClientConfig, ClusterMetadata, Counters, Options, Result, Runtime};
use stellflow_sansio::{
    AdminCall, AdminError, AdminOutcome, AdminOutput, BrokerApiVersions, ClusterStatus,
    CommittedOffset, DecommissionResult, ListedOffset, OffsetSpec, PartitionOverride,
    ReassertedPartition, RequestOptions, Target, TopicAdminResult, TopicDescription,
};
use tracing::Instrument;

/// Runs one admin command and waits for its typed result.
pub(crate) async fn run<T>(link: &Link, call: AdminCall<T>, opts: RequestOptions) -> Result<T>
where
    T: AdminOutput + Send + 'static,
{
    let span = tracing::debug_span!("admin", call = call.name());
    let mut opts = opts;
    if opts.trace.is_none() {
        // Made inside a span: its requests carry the span's ids.
        opts.trace = crate::trace::current().as_ref().map(Into::into);
    }
    let start = move |st: &mut crate::state::State, now, tx: crate::state::ReplySender<_>| {
        match st.client.admin(now, call, &opts) {
            // The answer is routed by its id and taken with the same typed id. The core gives
            // each id exactly its own outcome; were it ever another's, `tx` would be dropped
            // unanswered and the caller would see `Error::Shutdown`, not a wrong value.
            Ok(id) => {
                let deliver = move |result: std::result::Result<AdminOutcome, AdminError>| {
                    if let Some(r) = result.map(|o| o.take(id).ok()).transpose() {
                        let _ = tx.send(r);
                    }
                };
                drop(st.admin.insert(id.id(), Box::new(deliver)));
            }
            Err(e) => drop(tx.send(Err(e))),
        }
    };
    Ok(link.call(start).instrument(span).await??)
}

/// Cluster and topic administration. Cheap to clone. `R` is the runtime that drives the
/// client; the adapter crates name it for you (`stellflow_tokio::Admin`, …). Every call waits
/// for the broker's answer, bounded by the core's request timeout; dropping the future before
/// the answer does not undo a command already sent (cancel safety).
///
/// Examples with an adapter's names are on its aliases (`stellflow_tokio::Admin`, ...).
#[derive(Debug, Clone)]
pub struct Admin<R: Runtime> {
    pub(crate) client: Client<R>,
}

impl<R: Runtime> Admin<R> {
    /// Starts a client of its own with default [`Options`] (see `Client::connect`).
    pub async fn connect(config: ClientConfig) -> Result<Admin<R>> {
        Ok(Client::connect(config).await?.admin())
    }

    /// Like [`Admin::connect`](#method.connect), with adapter options.
    pub async fn connect_with(config: ClientConfig, options: Options) -> Result<Admin<R>> {
        Ok(Client::connect_with(config, options).await?.admin())
    }

    /// The client this handle runs on (for the other handles).
    pub fn client(&self) -> &Client<R> {
        &self.client
    }

    /// Runs any admin command with per-request options (trace context, timeout), e.g.
    /// `admin.call(AdminCall::describe_cluster(Target::Any), opts)`.
    pub async fn call<T>(&self, call: AdminCall<T>, opts: RequestOptions) -> Result<T>
    where
        T: AdminOutput + Send + 'static,
    {
        run(&self.client.link, call, opts).await
    }

    async fn go<T: AdminOutput + Send + 'static>(&self, call: AdminCall<T>) -> Result<T> {
        run(&self.client.link, call, RequestOptions::default()).await
    }

    /// The API versions one broker supports and the ones this client chose.
    pub async fn api_versions(&self, target: Target) -> Result<BrokerApiVersions> {
        self.go(AdminCall::api_versions(target)).await
    }

    /// DescribeCluster on one broker (its local view).
    pub async fn describe_cluster(&self, target: Target) -> Result<ClusterStatus> {
        self.go(AdminCall::describe_cluster(target)).await
    }

    /// HealthCheck on one broker.
    pub async fn health_check(&self, target: Target) -> Result<ClusterStatus> {
        self.go(AdminCall::health_check(target)).await
    }

    /// Topics from a fresh metadata round (empty = all), and requested names no broker knows.
    pub async fn describe_topics(
        &self,
        topics: &[&str],
    ) -> Result<(Vec<TopicDescription>, Vec<String>)> {
        self.go(AdminCall::describe_topics(topics)).await
    }

    /// CreateTopic on one broker (per-partition outcomes are in the result).
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        target: Target,
    ) -> Result<TopicAdminResult> {
        self.go(AdminCall::create_topic(topic, partitions, target))
            .await
    }

    /// DeleteTopic on one broker.
    pub async fn delete_topic(&self, topic: &str, target: Target) -> Result<TopicAdminResult> {
        self.go(AdminCall::delete_topic(topic, target)).await
    }

    /// AlterPartition: overrides one partition's leader, epoch, replicas and ISR on one broker
    /// (a controller operation: use with care).
    pub async fn alter_partition(
        &self,
        change: PartitionOverride,
        target: Target,
    ) -> Result<TopicAdminResult> {
        self.go(AdminCall::alter_partition(change, target)).await
    }

    /// ListOffsets for `(topic, partition, spec)` triples, routed to the leaders; results in
    /// request order.
    pub async fn list_offsets(
        &self,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> Result<Vec<ListedOffset>> {
        self.go(AdminCall::list_offsets(partitions)).await
    }

    /// The positions `group` committed for `(topic, partition)` pairs (FindCoordinator, then
    /// OffsetFetch on the coordinator), in request order; `None` where nothing is committed.
    /// Reads only: no consumer joins the group.
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<CommittedOffset>> {
        self.go(AdminCall::committed_offsets(group, partitions))
            .await
    }

    /// DecommissionBroker (a stub on today's server).
    pub async fn decommission_broker(
        &self,
        broker_id: i32,
        target: Target,
    ) -> Result<DecommissionResult> {
        self.go(AdminCall::decommission_broker(broker_id, target))
            .await
    }

    /// Re-asserts leadership of a restarted broker's leaderless partitions.
    pub async fn reassert_leadership(&self, broker_id: i32) -> Result<Vec<ReassertedPartition>> {
        self.go(AdminCall::reassert_leadership(broker_id)).await
    }

    /// A snapshot of the merged cluster metadata (see `Client::metadata`).
    pub fn metadata(&self) -> ClusterMetadata {
        self.client.metadata()
    }

    /// Asks for a metadata refresh now (see `Client::refresh_metadata`).
    pub fn refresh_metadata(&self) -> Result<()> {
        self.client.refresh_metadata()
    }

    /// A snapshot of the client's counters (see `Client::counters`).
    pub fn counters(&self) -> Counters {
        self.client.counters()
    }
}
