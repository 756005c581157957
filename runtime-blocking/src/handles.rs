//! [`Client`], [`Producer`], [`Consumer`] and [`Admin`]: the shared handles of
//! `stellflow-async`, each call run on the calling thread until it completes.

use crate::{
    AdminCall, AdminOutput, BatchDelivery, BatchOutcome, BrokerApiVersions, ClientConfig,
    ClusterMetadata, ClusterStatus, Committed, CommittedOffset, ConsumerRecord, Counters,
    DecommissionResult, Delivery, Events, FetchedBlob, ListedOffset, OffsetSpec, Options,
    PartitionOverride, Position, ReassertedPartition, Rebalance, Record, RecordMetadata,
    RequestOptions, Result, RevocationId, SeekTo, Target, TopicAdminResult, TopicDescription,
    TopicPartition,
};
use crate::{Blocking, block_on};
use std::sync::Arc;
use std::time::Duration;

/// Defines blocking methods that run the shared handle's `async` method of the same name.
macro_rules! blocking {
    ($($(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self $(, $arg: $ty)*) -> $ret {
            block_on(self.inner.$name($($arg),*))
        }
    )*};
}

/// Defines the methods that do no I/O by handing them to the shared handle.
macro_rules! forward {
    ($($(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self $(, $arg: $ty)*) -> $ret {
            self.inner.$name($($arg),*)
        }
    )*};
}

/// Defines `connect`, `connect_with` and `client` of a handle.
macro_rules! handle {
    ($handle:ident, $make:ident) => {
        impl $handle {
            /// Starts a client of its own with default [`Options`] (see [`Client::connect`]).
            pub fn connect(config: ClientConfig) -> Result<$handle> {
                Ok(Client::connect(config)?.$make())
            }

            /// Like `connect`, with adapter options.
            pub fn connect_with(config: ClientConfig, options: Options) -> Result<$handle> {
                Ok(Client::connect_with(config, options)?.$make())
            }

            /// The client this handle runs on (for the other handles, metadata and counters).
            pub fn client(&self) -> &Client {
                &self.client
            }
        }
    };
}

/// Closes the client when the last clone of it and of its handles is dropped.
#[derive(Debug)]
struct Owner(stellflow_async::Client<Blocking>);

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = block_on(self.0.close());
    }
}

/// A connection to a Stellflow cluster: one core, one driver thread and its sockets, shared by
/// every handle it hands out. Cheap to clone. Dropping the last clone (and the last handle)
/// closes it like [`Client::close`], blocking up to [`Options::close_timeout`].
#[derive(Debug, Clone)]
pub struct Client {
    owner: Arc<Owner>,
}

impl Client {
    /// Starts a driver for `config` with default [`Options`]. Returns at once: connections are
    /// opened on demand (commands wait for them within the core's request timeout).
    pub fn connect(config: ClientConfig) -> Result<Client> {
        Client::connect_with(config, Options::default())
    }

    /// Starts a driver for `config` with adapter `options`.
    pub fn connect_with(config: ClientConfig, options: Options) -> Result<Client> {
        let client = block_on(stellflow_async::Client::connect_with(config, options))?;
        Ok(Client {
            owner: Arc::new(Owner(client)),
        })
    }

    /// A producer handle (all of a client's producer handles share its one producer).
    pub fn producer(&self) -> Producer {
        Producer {
            inner: self.owner.0.producer(),
            client: self.clone(),
        }
    }

    /// A consumer handle (all of a client's consumer handles share its one consumer).
    pub fn consumer(&self) -> Consumer {
        Consumer {
            inner: self.owner.0.consumer(),
            client: self.clone(),
        }
    }

    /// An admin handle.
    pub fn admin(&self) -> Admin {
        Admin {
            inner: self.owner.0.admin(),
            client: self.clone(),
        }
    }

    /// A snapshot of the merged cluster metadata (brokers, topics, leaders).
    pub fn metadata(&self) -> ClusterMetadata {
        self.owner.0.metadata()
    }

    /// Asks for a metadata refresh now; the outcome shows in [`Client::metadata`].
    pub fn refresh_metadata(&self) -> Result<()> {
        self.owner.0.refresh_metadata()
    }

    /// The cluster's health now: healthy, degraded, or unreachable since an instant, with
    /// every broker's last answer and last failure (see [`crate::HealthState`]). Once no
    /// broker has answered for `ClientConfig::unreachable_timeout`, a consumer's
    /// `poll`/`recv` return [`crate::ConsumerError::Unreachable`] once per outage.
    pub fn cluster_health(&self) -> crate::ClusterHealth {
        self.owner.0.cluster_health()
    }

    /// A snapshot of the client's request and connection counters.
    pub fn counters(&self) -> Counters {
        self.owner.0.counters()
    }

    /// The last failed connection attempt (`"cannot connect to host:port: why"`) while the
    /// most recent attempt failed: turns a timeout into a useful message.
    pub fn connect_error(&self) -> Option<String> {
        self.owner.0.connect_error()
    }

    /// Ends the client without losing anything: flushes and closes the producer (up to
    /// [`Options::close_timeout`]), closes the consumer (committing with auto-commit), then
    /// closes the sockets and waits for the driver to end. Every handle fails with
    /// [`crate::Error::Shutdown`] afterwards.
    pub fn close(&self) -> Result<()> {
        block_on(self.owner.0.close())
    }
}

/// Sends records. Cheap to clone; `Send + Sync`: any number of threads may send at once, in
/// call order per thread.
///
/// ```no_run
/// # fn main() -> Result<(), stellflow_blocking::Error> {
/// use stellflow_blocking::{ClientConfig, Producer, Record};
/// let producer = Producer::connect(ClientConfig::new("127.0.0.1:9092")?)?;
/// let meta = producer.send(Record::new("orders", "one").with_key("k"))?;
/// println!("written at {}-{} offset {:?} index {}", meta.topic, meta.partition, meta.offset, meta.index);
/// let pending: Vec<_> = (0..100)
///     .map(|i| producer.enqueue(Record::new("orders", format!("record {i}"))))
///     .collect::<Result<_, _>>()?;
/// producer.flush()?;
/// for p in pending { p.wait()?; }
/// producer.close()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Producer {
    inner: stellflow_async::Producer<Blocking>,
    client: Client,
}

handle!(Producer, producer);

impl Producer {
    blocking! {
        /// Sends `record` and blocks until it is acknowledged or fails (see
        /// [`Producer::enqueue`] for the wait for buffer space).
        fn send(&self, record: Record) -> Result<RecordMetadata>;
        /// Sends every buffered record at once and blocks until each record enqueued before
        /// this call (those in the lane included) has its outcome.
        fn flush(&self) -> Result<()>;
        /// Closes the producer: delivers what is buffered (up to [`Options::close_timeout`]),
        /// then refuses new records; [`crate::Error::Undelivered`] when some failed. Other
        /// handles of the client keep working.
        fn close(&self) -> Result<()>;
    }

    /// Queues `record` and returns its [`Delivery`] (call [`Delivery::wait`]) without
    /// waiting for the broker; records keep their call order. When the producer's buffer
    /// (`buffer_memory`) is full the record waits in a lane of up to 1024 records and this
    /// returns at once; the record then fails with [`crate::Error::BufferFull`] after
    /// [`ProducerConfig::max_block`](crate::ProducerConfig::max_block). Only a full lane blocks
    /// this call, up to `max_block`.
    pub fn enqueue(&self, record: Record) -> Result<Delivery> {
        // Straight into the core when no wait is needed: no future to build, move and poll
        // per record (moving it costs a copy of the record each time).
        match self.inner.try_enqueue(record)? {
            Ok(delivery) => Ok(delivery),
            Err(record) => block_on(self.inner.enqueue(record)),
        }
    }

    /// Sends every record of `records` (owned [`Record`]s or references to them) and blocks
    /// until each has its outcome: one per record, in the order given (a [`BatchOutcome`]; see
    /// [`Producer::enqueue_all`]).
    pub fn send_all<I>(&self, records: I) -> Result<BatchOutcome>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<Record>,
    {
        Ok(self.enqueue_all(records)?.wait())
    }

    /// Queues every record of `records` in order and returns one [`BatchDelivery`] for all of
    /// them (call [`BatchDelivery::wait`]), without waiting for the broker: Kafka's
    /// `send(List<ProducerRecord>)`, at a few allocations a call rather than one a record.
    /// Records keep their order per partition, behind every record queued before the call.
    /// When the producer's buffer (`buffer_memory`) is full this blocks until there is room,
    /// up to [`ProducerConfig::max_block`](crate::ProducerConfig::max_block) for the whole call;
    /// the records not queued by then have [`crate::Error::BufferFull`] as their outcome.
    pub fn enqueue_all<I>(&self, records: I) -> Result<BatchDelivery>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<Record>,
    {
        block_on(self.inner.enqueue_all(records))
    }

    /// [`Producer::enqueue_all`] with this call's own bound on the wait for buffer room in
    /// place of `producer.max_block` (rdkafka's `send(record, queue_timeout)`): code with a
    /// deadline of its own passes what is left of it, so a full buffer never blocks the call
    /// past the deadline. The records not queued within `max_block` have
    /// [`crate::Error::BufferFull`] as their outcome.
    pub fn enqueue_all_within<I>(
        &self,
        records: I,
        max_block: std::time::Duration,
    ) -> Result<BatchDelivery>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<Record>,
    {
        block_on(self.inner.enqueue_all_within(records, max_block))
    }

    /// Queues `record` if that needs no wait and gives it back (`Ok(Err(record))`) when the
    /// lane is full; never blocks (see [`Producer::enqueue`]).
    pub fn try_enqueue(&self, record: Record) -> Result<std::result::Result<Delivery, Record>> {
        self.inner.try_enqueue(record)
    }
}

/// Reads records: manual assignment ([`Consumer::assign`], recommended on today's server) or
/// group subscription ([`Consumer::subscribe`], needs `config.consumer.group_id`). Cheap to
/// clone; `Send + Sync` (clones share one consumer: each record is delivered to one caller).
/// Records stay in the core's bounded buffer until taken, so a slow caller slows fetching down
/// instead of growing memory.
///
/// ```no_run
/// # fn main() -> Result<(), stellflow_blocking::Error> {
/// use std::time::Duration;
/// use stellflow_blocking::{ClientConfig, Consumer, OffsetReset, TopicPartition};
/// let mut config = ClientConfig::new("127.0.0.1:9092")?;
/// config.consumer.group_id = Some("billing".into());
/// config.consumer.auto_offset_reset = OffsetReset::Earliest;
/// let consumer = Consumer::connect(config)?;
/// consumer.assign(&[TopicPartition::new("orders", 0)])?;
/// for record in consumer.poll(Duration::from_secs(1))? {
///     println!("{}-{} @{}.{}", record.topic, record.partition, record.offset, record.index);
/// }
/// consumer.commit_sync()?;
/// consumer.close()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Consumer {
    inner: stellflow_async::Consumer<Blocking>,
    client: Client,
}

handle!(Consumer, consumer);

impl Consumer {
    forward! {
        /// Consumes exactly `partitions` (replaces any subscription). Does not wait.
        fn assign(&self, partitions: &[TopicPartition]) -> Result<()>;
        /// Joins `config.consumer.group_id` and consumes the topics' partitions. Does not wait.
        fn subscribe(&self, topics: &[&str]) -> Result<()>;
        /// Like [`Consumer::subscribe`], with a rebalance listener: every rebalance is kept
        /// for [`Consumer::rebalance`], and a revocation waits (at most
        /// `consumer.revocation_timeout`) for [`Consumer::revocation_done`]; meanwhile the
        /// partitions are still this member's, to commit and flush. Does not wait.
        fn subscribe_with_listener(&self, topics: &[&str]) -> Result<()>;
        /// Lets the revocation `id` ([`Rebalance::Revoking`]) go on; an unknown or past id is
        /// ignored.
        fn revocation_done(&self, id: RevocationId) -> Result<()>;
        /// The partitions assigned now.
        fn assignment(&self) -> Vec<TopicPartition>;
        /// Starts a commit of every position without waiting for it and without retries
        /// (Kafka's `commitAsync`); its outcome shows up in [`Consumer::events`].
        fn commit_async(&self) -> Result<()>;
        /// Marks `record`, and every earlier record of its partition, as processed (rdkafka's
        /// `store_offset`). With `config.consumer.commit_marked_only` set (Kafka:
        /// `enable.auto.offset.store=false`), every commit — auto-commit, the commit before
        /// a revocation, the one on close, [`Consumer::commit_sync`] — takes only marked
        /// positions, so a record delivered but not marked is read again after a crash: mark
        /// an input once its outputs are acknowledged. Marks are exact mid-blob and only move
        /// forward; a seek or a revocation forgets the partition's mark. Does no I/O.
        /// Errors: [`crate::ConsumerError::MarkingOff`] without `commit_marked_only`,
        /// [`crate::ConsumerError::NotAssigned`] once the partition was revoked.
        fn mark_processed(&self, record: &ConsumerRecord) -> Result<()>;
        /// Like [`Consumer::mark_processed`] with an explicit position: everything of `tp`
        /// before `position` is processed (e.g. [`FetchedBlob::next_position`] after a blob).
        fn mark_position(&self, tp: &TopicPartition, position: Position) -> Result<()>;
        /// The position marked processed for `tp` (see [`Consumer::mark_processed`]), if any.
        fn marked(&self, tp: &TopicPartition) -> Option<Position>;
        /// The next position `poll` returns from `tp` (`None` while it is being resolved or
        /// when `tp` is not assigned).
        fn position(&self, tp: &TopicPartition) -> Option<Position>;
        /// The last committed position of `tp` this consumer knows.
        fn committed(&self, tp: &TopicPartition) -> Option<Position>;
        /// High watermark minus position of `tp`, from the latest fetch.
        fn lag(&self, tp: &TopicPartition) -> Option<i64>;
        /// Stops fetching and delivering `tp` (buffered records are kept).
        fn pause(&self, tp: &TopicPartition) -> Result<()>;
        /// Resumes a paused partition.
        fn resume(&self, tp: &TopicPartition) -> Result<()>;
        /// Takes the consumer events seen since the last call: rebalances, resolved
        /// positions, fetch errors, group warnings, and the outcomes of commits nobody waits
        /// for; at most [`Events::CAP`] are kept and the returned value's
        /// [`dropped`](Events::dropped) field counts the rest.
        fn events(&self) -> Events;
    }

    blocking! {
        /// Waits up to `timeout` for records and returns the ones available (at most
        /// [`ConsumerConfig::max_poll_records`](crate::ConsumerConfig::max_poll_records)); empty
        /// when none came in time; [`crate::ConsumerError::Closed`] after [`Consumer::close`].
        fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>>;
        /// Like [`Consumer::poll`], returning at most `max` records.
        fn poll_max(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>>;
        /// Waits up to `timeout` for fetched blobs and returns every one ready, each handed
        /// over whole: iterating a [`FetchedBlob`] decodes its records on the calling thread
        /// with no per-record [`ConsumerRecord`]; [`FetchedBlob::next_view`] reads each record
        /// as a borrowed [`RecordView`](crate::RecordView), with no allocation or reference
        /// count per record (the fastest way to read small records). Taking a blob delivers
        /// all of it (commits count it as `poll` counts the same records); a corrupt remainder
        /// is an `Err` in its iteration.
        fn poll_blobs(&self, timeout: Duration) -> Result<Vec<FetchedBlob>>;
        /// Waits up to `timeout` for the next rebalance of a subscription made with
        /// [`Consumer::subscribe_with_listener`]; `None` when none came in time.
        fn rebalance(&self, timeout: Duration) -> Result<Option<Rebalance>>;
        /// Waits (without a time limit) for the next record; [`crate::ConsumerError::Closed`]
        /// after [`Consumer::close`].
        fn recv(&self) -> Result<ConsumerRecord>;
        /// Commits the positions of every assigned partition (mid-blob included; with
        /// `consumer.commit_marked_only` the positions marked by [`Consumer::mark_processed`])
        /// and waits for the outcome; retriable failures are retried within the request timeout.
        fn commit_sync(&self) -> Result<Committed>;
        /// Commits explicit positions (e.g. [`ConsumerRecord::next_position`] of the last
        /// processed record) like [`Consumer::commit_sync`].
        fn commit_positions(&self, positions: Committed) -> Result<Committed>;
        /// Moves `tp` (its buffered records are dropped); the core resolves the target (for
        /// [`SeekTo::Timestamp`], ListOffsets by time on the leader) without blocking the call.
        fn seek(&self, tp: &TopicPartition, to: SeekTo) -> Result<()>;
        /// For each `(partition, time in ms)`, the first blob appended at or after that time
        /// (Kafka's `offsetsForTimes`), in request order.
        fn offsets_for_times(&self, times: &[(TopicPartition, i64)]) -> Result<Vec<ListedOffset>>;
        /// Stops consuming (committing positions first with auto-commit) and waits for it.
        fn close(&self) -> Result<()>;
    }
}

/// Cluster and topic administration. Cheap to clone; `Send + Sync`. Every call blocks until
/// the broker's answer, bounded by the core's request timeout.
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
    inner: stellflow_async::Admin<Blocking>,
    client: Client,
}

handle!(Admin, admin);

impl Admin {
    /// Runs any admin command with per-request options (trace context, timeout), e.g.
    /// `admin.call(AdminCall::describe_cluster(Target::Any), opts)`.
    pub fn call<T>(&self, call: AdminCall<T>, opts: RequestOptions) -> Result<T>
    where
        T: AdminOutput + Send + 'static,
    {
        block_on(self.inner.call(call, opts))
    }

    blocking! {
        /// The API versions one broker supports and the ones this client chose.
        fn api_versions(&self, target: Target) -> Result<BrokerApiVersions>;
        /// DescribeCluster on one broker (its local view).
        fn describe_cluster(&self, target: Target) -> Result<ClusterStatus>;
        /// HealthCheck on one broker.
        fn health_check(&self, target: Target) -> Result<ClusterStatus>;
        /// Topics from a fresh metadata round (empty = all), and requested names no broker
        /// knows.
        fn describe_topics(&self, topics: &[&str]) -> Result<(Vec<TopicDescription>, Vec<String>)>;
        /// CreateTopic on one broker (per-partition outcomes are in the result).
        fn create_topic(&self, topic: &str, partitions: i32, target: Target) -> Result<TopicAdminResult>;
        /// DeleteTopic on one broker.
        fn delete_topic(&self, topic: &str, target: Target) -> Result<TopicAdminResult>;
        /// AlterPartition: a controller-style override of one partition (use with care).
        fn alter_partition(&self, change: PartitionOverride, target: Target) -> Result<TopicAdminResult>;
        /// ListOffsets for `(topic, partition, spec)` triples, routed to the leaders; results
        /// in request order.
        fn list_offsets(&self, partitions: &[(&str, i32, OffsetSpec)]) -> Result<Vec<ListedOffset>>;
        /// The positions `group` committed for `(topic, partition)` pairs, in request order;
        /// `None` where nothing is committed. Reads only: no consumer joins the group.
        fn committed_offsets(&self, group: &str, partitions: &[(&str, i32)]) -> Result<Vec<CommittedOffset>>;
        /// DecommissionBroker (a stub on today's server).
        fn decommission_broker(&self, broker_id: i32, target: Target) -> Result<DecommissionResult>;
        /// Re-asserts the leadership of a restarted broker's leaderless partitions.
        fn reassert_leadership(&self, broker_id: i32) -> Result<Vec<ReassertedPartition>>;
    }

    forward! {
        /// A snapshot of the merged cluster metadata (see [`Client::metadata`]).
        fn metadata(&self) -> ClusterMetadata;
        /// Asks for a metadata refresh now (see [`Client::refresh_metadata`]).
        fn refresh_metadata(&self) -> Result<()>;
        /// A snapshot of the client's counters (see [`Client::counters`]).
        fn counters(&self) -> Counters;
    }
}
