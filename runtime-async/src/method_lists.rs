//! The handles' method lists for the adapters' pages (see [`handle_methods!`]).

/// The method list of one handle, as Markdown for the doc comment of an adapter's alias
/// (`#[doc = stellflow_async::handle_methods!(Producer)]`): rustdoc shows an alias's methods
/// only through JavaScript, so each adapter's page lists them itself, each linked to its full
/// documentation on the same page (`#method.name`, which the JavaScript fills in; a link into
/// this crate's pages would lead nowhere where the adapter's pages are built alone). CI checks
/// that every method of the handle is listed.
#[doc(hidden)]
#[macro_export]
macro_rules! handle_methods {
    (Client) => {
        r#"

# Methods

The same on every async adapter; each name links to the method's full documentation further
down this page (shown by the browser's JavaScript: these are the methods of the
runtime-neutral handle of `stellflow-async` that this type names).

- [`connect`](#method.connect): `async fn connect(config: ClientConfig) -> Result<Client>` — Starts a client with default Options.
- [`connect_with`](#method.connect_with): `async fn connect_with(config: ClientConfig, options: Options) -> Result<Client>` — Like Client::connect, with adapter options.
- [`producer`](#method.producer): `fn producer(&self) -> Producer` — A producer handle (all of a client's producer handles share its one producer).
- [`consumer`](#method.consumer): `fn consumer(&self) -> Consumer` — A consumer handle (all of a client's consumer handles share its one consumer).
- [`admin`](#method.admin): `fn admin(&self) -> Admin` — An admin handle.
- [`metadata`](#method.metadata): `fn metadata(&self) -> ClusterMetadata` — A snapshot of the merged cluster metadata (brokers, topics, leaders).
- [`refresh_metadata`](#method.refresh_metadata): `fn refresh_metadata(&self) -> Result<()>` — Asks for a metadata refresh now (the core also refreshes on errors and periodically).
- [`cluster_health`](#method.cluster_health): `fn cluster_health(&self) -> ClusterHealth` — The cluster's health now.
- [`counters`](#method.counters): `fn counters(&self) -> Counters` — A snapshot of the client's request and connection counters.
- [`connect_error`](#method.connect_error): `fn connect_error(&self) -> Option<String>` — The last failed connection attempt, if any (cleared by the next success).
- [`close`](#method.close): `async fn close(&self) -> Result<()>` — Ends the client without losing anything.
"#
    };
    (Producer) => {
        r#"

# Methods

The same on every async adapter; each name links to the method's full documentation further
down this page (shown by the browser's JavaScript: these are the methods of the
runtime-neutral handle of `stellflow-async` that this type names).

- [`connect`](#method.connect): `async fn connect(config: ClientConfig) -> Result<Producer>` — Starts a client of its own with default Options (see Client::connect).
- [`connect_with`](#method.connect_with): `async fn connect_with(config: ClientConfig, options: Options) -> Result<Producer>` — Like Producer::connect, with adapter options.
- [`client`](#method.client): `fn client(&self) -> &Client` — The client this handle runs on (for the other handles, metadata and counters).
- [`send`](#method.send): `async fn send(&self, record: Record) -> Result<RecordMetadata>` — Sends a record and waits for its outcome (see Producer::enqueue for the wait for buffer space).
- [`enqueue`](#method.enqueue): `async fn enqueue(&self, record: Record) -> Result<Delivery>` — Queues a record without waiting for its delivery.
- [`send_all`](#method.send_all): `async fn send_all<I>(&self, records: I) -> Result<BatchOutcome>` — Sends every record of records and waits for their outcomes (see Producer::enqueue_all).
- [`enqueue_all`](#method.enqueue_all): `async fn enqueue_all<I>(&self, records: I) -> Result<BatchDelivery>` — Queues every record of records (owned Records or references to them) in order, without waiting for their delivery, and returns one BatchDelivery for all of them.
- [`enqueue_all_within`](#method.enqueue_all_within): `async fn enqueue_all_within<I>(&self, records: I, max_block: Duration) -> Result<BatchDelivery>` — Producer::enqueue_all with this call's own bound on the wait for buffer room in place of producer.max_block.
- [`try_enqueue`](#method.try_enqueue): `fn try_enqueue(&self, record: Record) -> Result<Result<Delivery, Record>>` — Queues a record if that needs no wait — the core has buffer room, or the lane behind it has a free place (the record then waits there as with Producer::enqueue) — and gives it back (Ok(Err(record))) when the lane is full.
- [`flush`](#method.flush): `async fn flush(&self) -> Result<()>` — Sends every buffered record now and waits until every record enqueued before this call (those waiting in the lane included) has its outcome.
- [`close`](#method.close): `async fn close(&self) -> Result<()>` — Closes the producer.
"#
    };
    (Consumer) => {
        r#"

# Methods

The same on every async adapter; each name links to the method's full documentation further
down this page (shown by the browser's JavaScript: these are the methods of the
runtime-neutral handle of `stellflow-async` that this type names).

- [`connect`](#method.connect): `async fn connect(config: ClientConfig) -> Result<Consumer>` — Starts a client of its own with default Options (see Client::connect).
- [`connect_with`](#method.connect_with): `async fn connect_with(config: ClientConfig, options: Options) -> Result<Consumer>` — Like Consumer::connect, with adapter options.
- [`client`](#method.client): `fn client(&self) -> &Client` — The client this handle runs on (for the other handles, metadata and counters).
- [`assign`](#method.assign): `fn assign(&self, partitions: &[TopicPartition]) -> Result<()>` — Consumes exactly partitions (replaces any subscription).
- [`subscribe`](#method.subscribe): `fn subscribe(&self, topics: &[&str]) -> Result<()>` — Joins config.consumer.group_id and consumes the topics' partitions.
- [`subscribe_with_listener`](#method.subscribe_with_listener): `fn subscribe_with_listener(&self, topics: &[&str]) -> Result<()>` — Like Consumer::subscribe, with a rebalance listener (Kafka's `subscribe(topics, listener)`).
- [`rebalance`](#method.rebalance): `async fn rebalance(&self, timeout: Duration) -> Result<Option<Rebalance>>` — Waits up to timeout for the next rebalance of a subscription made with Consumer::subscribe_with_listener.
- [`revocation_done`](#method.revocation_done): `fn revocation_done(&self, id: RevocationId) -> Result<()>` — Lets the revocation id (Rebalance::Revoking) go on.
- [`assignment`](#method.assignment): `fn assignment(&self) -> Vec<TopicPartition>` — The partitions assigned now.
- [`poll`](#method.poll): `async fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>>` — Waits up to timeout for records and returns the ones available (at most `consumer.max_poll_records`).
- [`poll_max`](#method.poll_max): `async fn poll_max(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>>` — Like Consumer::poll, returning at most max records.
- [`poll_blobs`](#method.poll_blobs): `async fn poll_blobs(&self, timeout: Duration) -> Result<Vec<FetchedBlob>>` — Waits up to timeout for fetched blobs and returns every one ready, each handed over whole (FetchedBlob).
- [`recv`](#method.recv): `async fn recv(&self) -> Result<ConsumerRecord>` — Waits (without a time limit) for the next record.
- [`commit_sync`](#method.commit_sync): `async fn commit_sync(&self) -> Result<Committed>` — Commits the positions of every assigned partition and waits (retried within the request timeout).
- [`commit_positions`](#method.commit_positions): `async fn commit_positions(&self, positions: Committed) -> Result<Committed>` — Commits explicit positions (e.g. those of processed blobs) and waits.
- [`mark_processed`](#method.mark_processed): `fn mark_processed(&self, record: &ConsumerRecord) -> Result<()>` — Marks record, and every earlier record of its partition, as processed (rdkafka's `store_offset`).
- [`mark_position`](#method.mark_position): `fn mark_position(&self, tp: &TopicPartition, position: Position) -> Result<()>` — Like Consumer::mark_processed with an explicit position.
- [`marked`](#method.marked): `fn marked(&self, tp: &TopicPartition) -> Option<Position>` — The position marked processed for tp (see Consumer::mark_processed), if any.
- [`commit_async`](#method.commit_async): `fn commit_async(&self) -> Result<()>` — Starts a commit of every position without waiting for it and without retries (Kafka's `commitAsync`).
- [`seek`](#method.seek): `async fn seek(&self, tp: &TopicPartition, to: SeekTo) -> Result<()>` — Moves tp (its buffered records are dropped).
- [`offsets_for_times`](#method.offsets_for_times): `async fn offsets_for_times(&self, times: &[(TopicPartition, i64)]) -> Result<Vec<ListedOffset>>` — For each (partition, time in ms since the epoch), the first blob the broker appended at or after that time (Kafka's `offsetsForTimes`).
- [`position`](#method.position): `fn position(&self, tp: &TopicPartition) -> Option<Position>` — The next position poll returns from tp (None while it is being resolved or when tp is not assigned).
- [`committed`](#method.committed): `fn committed(&self, tp: &TopicPartition) -> Option<Position>` — The last committed position of tp this consumer knows.
- [`lag`](#method.lag): `fn lag(&self, tp: &TopicPartition) -> Option<i64>` — High watermark minus position of tp, from the latest fetch.
- [`pause`](#method.pause): `fn pause(&self, tp: &TopicPartition) -> Result<()>` — Stops fetching and delivering tp (buffered records are kept).
- [`resume`](#method.resume): `fn resume(&self, tp: &TopicPartition) -> Result<()>` — Resumes a paused partition.
- [`events`](#method.events): `fn events(&self) -> Events` — Takes the consumer events seen since the last call.
- [`close`](#method.close): `async fn close(&self) -> Result<()>` — Stops consuming (committing positions first when auto-commit is on) and waits for it.
"#
    };
    (Admin) => {
        r#"

# Methods

The same on every async adapter; each name links to the method's full documentation further
down this page (shown by the browser's JavaScript: these are the methods of the
runtime-neutral handle of `stellflow-async` that this type names).

- [`connect`](#method.connect): `async fn connect(config: ClientConfig) -> Result<Admin>` — Starts a client of its own with default Options (see Client::connect).
- [`connect_with`](#method.connect_with): `async fn connect_with(config: ClientConfig, options: Options) -> Result<Admin>` — Like Admin::connect, with adapter options.
- [`client`](#method.client): `fn client(&self) -> &Client` — The client this handle runs on (for the other handles).
- [`call`](#method.call): `async fn call<T>(&self, call: AdminCall<T>, opts: RequestOptions) -> Result<T>` — Runs any admin command with per-request options (trace context, timeout).
- [`api_versions`](#method.api_versions): `async fn api_versions(&self, target: Target) -> Result<BrokerApiVersions>` — The API versions one broker supports and the ones this client chose.
- [`describe_cluster`](#method.describe_cluster): `async fn describe_cluster(&self, target: Target) -> Result<ClusterStatus>` — DescribeCluster on one broker (its local view).
- [`health_check`](#method.health_check): `async fn health_check(&self, target: Target) -> Result<ClusterStatus>` — HealthCheck on one broker.
- [`describe_topics`](#method.describe_topics): `async fn describe_topics(&self, topics: &[&str]) -> Result<(Vec<TopicDescription>, Vec<String>)>` — Topics from a fresh metadata round (empty = all), and requested names no broker knows.
- [`create_topic`](#method.create_topic): `async fn create_topic(&self, topic: &str, partitions: i32, target: Target) -> Result<TopicAdminResult>` — CreateTopic on one broker (per-partition outcomes are in the result).
- [`delete_topic`](#method.delete_topic): `async fn delete_topic(&self, topic: &str, target: Target) -> Result<TopicAdminResult>` — DeleteTopic on one broker.
- [`alter_partition`](#method.alter_partition): `async fn alter_partition(&self, change: PartitionOverride, target: Target) -> Result<TopicAdminResult>` — AlterPartition.
- [`list_offsets`](#method.list_offsets): `async fn list_offsets(&self, partitions: &[(&str, i32, OffsetSpec)]) -> Result<Vec<ListedOffset>>` — ListOffsets for (topic, partition, spec) triples, routed to the leaders.
- [`committed_offsets`](#method.committed_offsets): `async fn committed_offsets(&self, group: &str, partitions: &[(&str, i32)]) -> Result<Vec<CommittedOffset>>` — The positions group committed for (topic, partition) pairs (FindCoordinator, then OffsetFetch on the coordinator), in request order.
- [`decommission_broker`](#method.decommission_broker): `async fn decommission_broker(&self, broker_id: i32, target: Target) -> Result<DecommissionResult>` — DecommissionBroker (a stub on today's server).
- [`reassert_leadership`](#method.reassert_leadership): `async fn reassert_leadership(&self, broker_id: i32) -> Result<Vec<ReassertedPartition>>` — Re-asserts leadership of a restarted broker's leaderless partitions.
- [`metadata`](#method.metadata): `fn metadata(&self) -> ClusterMetadata` — A snapshot of the merged cluster metadata (see Client::metadata).
- [`refresh_metadata`](#method.refresh_metadata): `fn refresh_metadata(&self) -> Result<()>` — Asks for a metadata refresh now (see Client::refresh_metadata).
- [`counters`](#method.counters): `fn counters(&self) -> Counters` — A snapshot of the client's counters (see Client::counters).
"#
    };
}
