//! The shared behavioural suite on stellflow-blocking: every `async fn` calls the blocking
//! method directly (no `.await` waits), run by [`stellflow_adapter_tests::block_on_blocking`].

use bytes::Bytes;
use std::time::Duration;
use stellflow_adapter_tests::{Adapter, R};
use stellflow_blocking as sb;
use stellflow_sansio::{
    AdminRequest, AdminResponse, BrokerApiVersions, ClientConfig, ClusterStatus, CommittedOffset,
    ConsumerRecord, Counters, ListedOffset, OffsetSpec, Position, ReassertedPartition,
    RecordMetadata, SeekTo, TopicAdminResult, TopicDescription, TopicPartition,
};

struct Blocking;

impl Adapter for Blocking {
    const NAME: &'static str = "blocking";
    type Admin = sb::Admin;
    type Producer = sb::Producer;
    type Consumer = sb::Consumer;
    type Delivery = sb::Pending<RecordMetadata>;

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        stellflow_adapter_tests::block_on_blocking(f)
    }
    async fn sleep(d: Duration) {
        std::thread::sleep(d);
    }
    async fn admin(config: ClientConfig) -> R<Self::Admin> {
        Ok(sb::Admin::connect(config)?)
    }
    async fn producer(config: ClientConfig, max_block: Duration) -> R<Self::Producer> {
        let mut o = sb::Options::default();
        o.max_block = max_block;
        o.close_timeout = Duration::from_secs(5);
        Ok(sb::Client::connect_with(config, o)?.producer())
    }
    async fn consumer(config: ClientConfig) -> R<Self::Consumer> {
        Ok(sb::Consumer::connect(config)?)
    }
    async fn api_versions(a: &Self::Admin) -> R<BrokerApiVersions> {
        Ok(a.api_versions(sb::Target::Any)?)
    }
    async fn describe_cluster(a: &Self::Admin) -> R<ClusterStatus> {
        Ok(a.describe_cluster(sb::Target::Any)?)
    }
    async fn health_check(a: &Self::Admin) -> R<ClusterStatus> {
        Ok(a.health_check(sb::Target::Any)?)
    }
    async fn create_topic(a: &Self::Admin, topic: &str, partitions: i32) -> R<TopicAdminResult> {
        Ok(a.create_topic(topic, partitions, sb::Target::Any)?)
    }
    async fn delete_topic(a: &Self::Admin, topic: &str) -> R<TopicAdminResult> {
        Ok(a.delete_topic(topic, sb::Target::Any)?)
    }
    async fn describe_topics(
        a: &Self::Admin,
        topics: &[&str],
    ) -> R<(Vec<TopicDescription>, Vec<String>)> {
        Ok(a.describe_topics(topics)?)
    }
    async fn list_offsets(
        a: &Self::Admin,
        partitions: &[(&str, i32, OffsetSpec)],
    ) -> R<Vec<ListedOffset>> {
        Ok(a.list_offsets(partitions)?)
    }
    async fn reassert_leadership(a: &Self::Admin, broker: i32) -> R<Vec<ReassertedPartition>> {
        Ok(a.reassert_leadership(broker)?)
    }
    async fn committed_offsets(
        a: &Self::Admin,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> R<Vec<CommittedOffset>> {
        Ok(a.committed_offsets(group, partitions)?)
    }
    async fn admin_request(a: &Self::Admin, request: AdminRequest) -> R<AdminResponse> {
        Ok(a.request(request, Default::default())?)
    }
    async fn counters(a: &Self::Admin) -> R<Counters> {
        Ok(a.counters())
    }
    async fn send(p: &Self::Producer, topic: &str, key: Bytes, value: Bytes) -> R<RecordMetadata> {
        Ok(p.send(sb::Record::new(topic, value).with_key(key))?)
    }
    async fn enqueue(
        p: &Self::Producer,
        topic: &str,
        key: Bytes,
        value: Bytes,
    ) -> R<Self::Delivery> {
        Ok(p.enqueue(sb::Record::new(topic, value).with_key(key))?)
    }
    async fn delivered(d: Self::Delivery) -> R<RecordMetadata> {
        Ok(d.wait()?)
    }
    async fn flush(p: &Self::Producer) -> R<()> {
        Ok(p.flush()?)
    }
    async fn close_producer(p: &Self::Producer) -> R<()> {
        Ok(p.close()?)
    }
    async fn assign(c: &Self::Consumer, partitions: Vec<TopicPartition>) -> R<()> {
        Ok(c.assign(partitions)?)
    }
    async fn subscribe(c: &Self::Consumer, topics: &[&str]) -> R<()> {
        Ok(c.subscribe(topics)?)
    }
    async fn poll(c: &Self::Consumer, timeout: Duration, max: usize) -> R<Vec<ConsumerRecord>> {
        Ok(c.poll_max(timeout, max)?)
    }
    async fn commit_sync(c: &Self::Consumer) -> R<Vec<(TopicPartition, Position)>> {
        Ok(c.commit_sync()?)
    }
    async fn commit_async(c: &Self::Consumer) -> R<()> {
        c.commit_async()?;
        Ok(())
    }
    async fn seek(c: &Self::Consumer, tp: TopicPartition, to: SeekTo) -> R<()> {
        Ok(c.seek(&tp, to)?)
    }
    async fn position(c: &Self::Consumer, tp: TopicPartition) -> R<Option<Position>> {
        Ok(c.position(&tp))
    }
    async fn pause(c: &Self::Consumer, tp: TopicPartition) -> R<()> {
        Ok(c.pause(&tp)?)
    }
    async fn resume(c: &Self::Consumer, tp: TopicPartition) -> R<()> {
        Ok(c.resume(&tp)?)
    }
    async fn close_consumer(c: &Self::Consumer) -> R<()> {
        Ok(c.close()?)
    }
}

stellflow_adapter_tests::suite!(Blocking);
