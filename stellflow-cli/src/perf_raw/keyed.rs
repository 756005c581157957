//! `perf produce --raw --keys N`: the broker's ceiling for keyed records over many partitions.
//!
//! The run's records are spread over the partitions exactly as `perf produce --keys N` spreads
//! them (record `i` carries `key-{i mod N}`, placed by the producer's keyed partitioner), with
//! the same value size and keys of the length of the longest key. Each partition's records go
//! in blobs of up to the batch size: the fullest batches a producer with that `batch_size`
//! could build whatever its linger. As in the plain ceiling, each request carries one blob and
//! a partition has one request in flight at a time (the producer's default ordering), while
//! every other partition's requests go at once; all are encoded before the clock starts.

use super::{Driver, RawProduce, build_blob, check_produced};
use crate::CliResult;
use crate::cpu::{cpu_per_record, cpu_since, process_cpu_time};
use crate::perf::{latencies, latency_summary};
use bytes::Bytes;
use std::collections::HashMap;
use std::time::Instant;
use stellflow_proto::ApiKey;
use stellflow_sansio::{KeyedPartitioner, RequestId, Target};

/// How the keyed ceiling spreads the records.
pub(crate) struct KeyedSpread {
    /// Distinct keys (`key-0` … `key-{keys-1}`, in turn).
    pub keys: u32,
    /// The producer's keyed partitioner.
    pub partitioner: KeyedPartitioner,
}

/// A Produce request built before the run.
struct Planned {
    target: Target,
    body: Bytes,
    /// The index (into the partition list) of its partition.
    part: usize,
    records: u64,
}

/// Records per partition: record `i` goes where `key-{i mod keys}` hashes among `count`
/// partitions.
fn spread(records: u64, keys: u32, partitioner: KeyedPartitioner, count: i32) -> Vec<u64> {
    let mut per = vec![0u64; usize::try_from(count).unwrap_or(0)];
    let keys = u64::from(keys.max(1));
    for k in 0..keys.min(records) {
        let p = partitioner.partition(format!("key-{k}").as_bytes(), count);
        let n = records / keys + u64::from(k < records % keys);
        if let Some(c) = per.get_mut(usize::try_from(p).unwrap_or(usize::MAX)) {
            *c += n;
        }
    }
    per
}

/// Every request of the run, in the order they may go: the first blob of every partition,
/// then the second, and so on.
fn plan(
    a: &RawProduce,
    s: &KeyedSpread,
    leaders: &[(i32, i32)],
    timeout_ms: i32,
) -> CliResult<(Vec<Planned>, u64)> {
    let count = leaders.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
    let per_part = spread(a.records, s.keys, s.partitioner, count);
    let key = format!("key-{}", s.keys.saturating_sub(1));
    let (_, per_blob) = build_blob(a.value, Some(key.as_bytes()), a.blob_bytes, a.envelope)?;
    let mut blobs: HashMap<u64, Bytes> = HashMap::new();
    let records_of = |i: usize| {
        let p = usize::try_from(leaders[i].0).unwrap_or(usize::MAX);
        per_part.get(p).copied().unwrap_or(0)
    };
    let waves = (0..leaders.len())
        .map(|i| records_of(i).div_ceil(per_blob))
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for w in 0..waves {
        for (i, &(partition, leader)) in leaders.iter().enumerate() {
            let n = records_of(i).saturating_sub(w * per_blob).min(per_blob);
            if n == 0 {
                continue;
            }
            let blob = match blobs.get(&n) {
                Some(b) => b.clone(),
                None => {
                    let b = super::blob_of_count(a.value, key.as_bytes(), n, a.envelope)?;
                    blobs.insert(n, b.clone());
                    b
                }
            };
            out.push(Planned {
                target: Target::Broker(leader),
                body: super::one_blob_request(a, timeout_ms, partition, blob),
                part: i,
                records: n,
            });
        }
    }
    Ok((out, per_blob))
}

/// Runs the keyed ceiling on a connected driver and prints the same line as the plain one.
pub(super) fn produce(mut d: Driver, a: &RawProduce, s: &KeyedSpread) -> CliResult {
    let leaders = d.leaders(a.topic)?;
    let timeout_ms = i32::try_from(d.timeout.as_millis()).unwrap_or(i32::MAX);
    let (plan, per_blob) = plan(a, s, &leaders, timeout_ms)?;
    let total: u64 = plan.iter().map(|r| r.records).sum();
    eprintln!(
        "(raw keyed ceiling: {total} records of {} keys over {} partition(s) in {} prebuilt \
         blobs of up to {per_blob} records, one a request, one in flight per partition)",
        s.keys,
        leaders.len(),
        plan.len(),
    );
    let mut lat_us = latencies();
    let mut busy = vec![false; leaders.len()];
    let mut pending: Vec<usize> = (0..plan.len()).collect();
    let mut in_flight: HashMap<RequestId, (usize, Instant)> = HashMap::new();
    let mut acked = 0u64;
    let cpu = process_cpu_time();
    let start = Instant::now();
    loop {
        // Send, in plan order, the first waiting request of every partition with none in
        // flight (a partition's blobs go in order).
        let mut k = 0;
        while k < pending.len() {
            let r = &plan[pending[k]];
            if busy[r.part] {
                k += 1;
                continue;
            }
            busy[r.part] = true;
            let id = d.request(r.target.clone(), ApiKey::PRODUCE, r.body.clone());
            in_flight.insert(id, (pending.remove(k), Instant::now()));
        }
        if acked == total {
            break;
        }
        let (id, answer) = d.answer()?;
        let Some((r, t)) = in_flight.remove(&id) else {
            continue;
        };
        check_produced(&answer)?;
        let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
        lat_us.saturating_record_n(us, plan[r].records);
        acked += plan[r].records;
        busy[plan[r].part] = false;
    }
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_since(cpu));
    d.close();
    let n = total as f64;
    println!(
        "{total} records sent, {:.1} records/sec ({:.2} MB/sec){}, {}.",
        n / secs,
        n * a.value.len() as f64 / secs / 1e6,
        cpu_per_record(cpu, total),
        latency_summary(&lat_us)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::spread;
    use stellflow_sansio::KeyedPartitioner;

    #[test]
    fn records_spread_as_their_keys_hash() {
        let per = spread(10, 4, KeyedPartitioner::JavaHash, 3);
        assert_eq!(per.iter().sum::<u64>(), 10);
        let mut want = [0u64; 3];
        for i in 0..10u64 {
            let key = format!("key-{}", i % 4);
            want[KeyedPartitioner::JavaHash.partition(key.as_bytes(), 3) as usize] += 1;
        }
        assert_eq!(per, want);
    }
}
