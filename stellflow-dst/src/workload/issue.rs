//! Issuing the raw workload's commands: admin calls, metadata refreshes and raw
//! Produce/Fetch requests, each Produce to the partition's leader in the client's metadata,
//! recorded with its bound in the outcome book.

use super::*;

impl RawWorkload {
    pub(super) fn issue(&mut self, world: &mut World, op: Op) {
        let now = world.now();
        let c = self.client;
        match op {
            Op::Produce {
                partition,
                records,
                acks,
            } => {
                // Only to the leader the client knows: a Produce to any other broker makes
                // that broker create the partition locally (PROTOCOL.md §8 item 21), a second
                // log with its own offsets. Wait for metadata instead.
                match leader(world, c, partition) {
                    Some(broker) if !self.busy.contains(&partition) => {
                        self.produce(world, broker, partition, records, acks, false);
                    }
                    _ => self.deferred.push_back(op),
                }
            }
            Op::Fetch { partition } => {
                let offset = self
                    .last_offset
                    .get(&partition)
                    .map_or(0, |o| self.rng.below(*o as u64 + 1) as i64);
                let body = FetchRequest {
                    replica_id: -1,
                    max_wait_ms: 0,
                    min_bytes: 0,
                    max_bytes: 1 << 20,
                    isolation_level: 0,
                    session_id: 0,
                    topic_partitions: vec![FetchTopic {
                        topic: Some(TOPIC.into()),
                        partitions: vec![FetchPartition {
                            partition,
                            current_leader_epoch: -1,
                            fetch_offset: offset,
                            log_start_offset: -1,
                            partition_max_bytes: 1,
                        }],
                    }],
                }
                .to_bytes();
                let target = leader_target(world, c, partition);
                let id = world.client(c).request(
                    now,
                    target,
                    ApiKey::FETCH,
                    None,
                    body,
                    &RequestOptions::default(),
                );
                self.issued(world, id, Cmd::Fetch { partition, offset }, "fetch");
            }
            Op::DescribeCluster => {
                let id = world.client(c).describe_cluster(now, Target::Any);
                self.admin_issued(world, id, false);
            }
            Op::ListOffsets { partition } => {
                let spec = if self.rng.chance(0.5) {
                    OffsetSpec::Latest
                } else {
                    OffsetSpec::Earliest
                };
                let id = world
                    .client(c)
                    .list_offsets(now, &[(TOPIC, partition, spec)]);
                self.admin_issued(world, id, false);
            }
            Op::DescribeTopics => {
                let id = world.client(c).describe_topics(now, &[TOPIC]);
                self.admin_issued(world, id, false);
            }
            Op::ApiVersions => {
                let id = world.client(c).api_versions(now, Target::Any);
                self.admin_issued(world, id, false);
            }
            Op::HealthCheck => {
                let id = world.client(c).health_check(now, Target::Any);
                self.admin_issued(world, id, false);
            }
            Op::CreateTopic => {
                self.seq += 1;
                let name = format!("n{}-{}", c.0, self.seq);
                let id = world.client(c).create_topic(now, &name, 1, Target::Any);
                self.admin_issued(world, id, false);
            }
            Op::Refresh => world.client(c).refresh_metadata(now),
        }
    }

    pub(super) fn produce(
        &mut self,
        world: &mut World,
        broker: i32,
        partition: i32,
        records: u32,
        acks: i16,
        goal: bool,
    ) {
        let c = self.client;
        let now = world.now();
        self.seq += 1;
        let ts = 1_700_000_000_000 + world.elapsed().as_millis() as i64;
        let mut b = BatchBuilder::new(BatchParams {
            base_timestamp: ts,
            ..BatchParams::default()
        });
        for r in 0..records {
            let value = format!("c{}-p{partition}-s{}-r{r}", c.0, self.seq);
            if b.append(ts, None, Some(value.as_bytes())).is_err() {
                return;
            }
        }
        let Ok(blob) = b.finish() else { return };
        let body = ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 500,
            topic_data: vec![ProduceTopicData {
                topic: Some(TOPIC.into()),
                partitions: vec![ProducePartitionData {
                    partition,
                    records: Some(blob.clone()),
                }],
            }],
        }
        .to_bytes();
        let id = world.client(c).request(
            now,
            Target::Broker(broker),
            ApiKey::PRODUCE,
            None,
            body,
            &RequestOptions::default(),
        );
        self.busy.insert(partition);
        self.issued(
            world,
            id,
            Cmd::Produce {
                partition,
                blob,
                acks,
                goal,
            },
            "produce",
        );
    }

    fn issued(&mut self, world: &World, id: RequestId, cmd: Cmd, what: &str) {
        // Raw requests: the deadline counts from the command; allow scheduling slack.
        let bound = self.request_timeout + Duration::from_millis(50);
        self.book.issued(
            id,
            world.elapsed(),
            bound,
            format!("{what} {:?}", self.client),
        );
        self.cmds.insert(id, cmd);
    }

    pub(super) fn admin_issued<T>(
        &mut self,
        world: &mut World,
        id: Result<stellflow_sansio::AdminId<T>, stellflow_sansio::AdminError>,
        goal: bool,
    ) {
        match id.map(|a| a.id()) {
            Ok(id) => {
                // An admin op may need a metadata round and then its request.
                let bound = self.request_timeout * 3 + Duration::from_secs(1);
                self.book.issued(
                    id,
                    world.elapsed(),
                    bound,
                    format!("admin {:?}", self.client),
                );
                self.cmds.insert(id, Cmd::Admin { goal });
            }
            Err(_) if goal => self.retry_at = Some(world.elapsed() + Duration::from_millis(100)),
            Err(_) => {}
        }
    }
}

/// The leader of `t0-partition` in client `c`'s metadata, if it knows one.
pub(super) fn leader(world: &mut World, c: ClientId, partition: i32) -> Option<i32> {
    world
        .client(c)
        .metadata()
        .partition(TOPIC, partition)
        .and_then(|p| p.leader().ok())
}

/// Where a request about `t0-partition` goes: its known leader, else any broker (fine for
/// reads; never used for Produce, which waits for a known leader).
fn leader_target(world: &mut World, c: ClientId, partition: i32) -> Target {
    leader(world, c, partition).map_or(Target::Any, Target::Broker)
}
