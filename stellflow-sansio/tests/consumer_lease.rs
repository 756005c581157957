//! Record leases (`DriverExt::lease_records` / `RecordLease::decode` / `DriverExt::redeem_lease`):
//! the same records, positions and counters as `poll_records`; nothing moves until a lease is
//! redeemed; a lease whose records were taken or moved meanwhile delivers nothing.

mod common;
mod consumer_support;

use consumer_support::*;
use std::time::Duration;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{Position, SeekTo, TopicPartition};

/// The positions of `tps`, in order.
fn positions(w: &common::World, tps: &[TopicPartition]) -> Vec<Option<Position>> {
    tps.iter().map(|tp| w.client.position(tp)).collect()
}

#[test]
fn leases_deliver_the_records_poll_records_gives() {
    for max in [1, 7, 500] {
        let (mut w, exp, tps) = two_partitions_of_30_blobs();
        let n: usize = exp.values().map(Vec::len).sum();
        let mut got = Got::new();
        let (mut blob_ends, mut largest) = (0, 0);
        w.run_until(Duration::from_secs(60), |w| {
            while let Some(mut lease) = w.client.lease_records(max) {
                let before = positions(w, &tps);
                let buffered = w.client.buffered_bytes();
                lease.decode();
                let now = positions(w, &tps);
                assert_eq!(
                    before, now,
                    "a lease moves no position before it is redeemed"
                );
                assert_eq!(buffered, w.client.buffered_bytes());
                let records = w
                    .client
                    .redeem_lease(lease)
                    .expect("nothing else took records");
                assert!(
                    records.len() <= max,
                    "{} records for a lease of {max}",
                    records.len()
                );
                largest = largest.max(records.len());
                if let Some(last) = records.last() {
                    let tp = TopicPartition::new(&last.topic, last.partition);
                    assert_eq!(w.client.position(&tp), Some(last.next_position()));
                }
                for r in &records {
                    blob_ends += usize::from(r.last_in_blob);
                    keep(&mut got, r);
                }
            }
            count(&got) >= n
        });
        assert_exact(&exp, &got);
        assert_eq!(
            blob_ends, 60,
            "one last_in_blob record per blob (max {max})"
        );
        assert_eq!(w.client.counters().consumer_records, n as u64);
        assert_eq!(w.client.buffered_bytes(), 0);
        for tp in &tps {
            assert_eq!(w.client.position(tp), Some(Position::blob(30)));
        }
        if max == 500 {
            assert!(
                largest > 23,
                "leases of 500 never spanned blobs ({largest})"
            );
        }
    }
}

/// A lease goes stale, and its redemption delivers nothing and changes nothing, when the
/// records it lent were taken meanwhile (a record polled, another lease redeemed first) or
/// moved (a seek, a pause that changes the front of the queue); dropping a lease delivers
/// nothing either. Whatever the mix, every record arrives exactly once.
#[test]
fn a_stale_or_dropped_lease_delivers_nothing() {
    let (mut w, exp, tps) = two_partitions_of_30_blobs();
    let n: usize = exp.values().map(Vec::len).sum();
    let mut got = Got::new();
    let mut turn = 0;
    let mut stale = [0; 5];
    w.run_until(Duration::from_secs(60), |w| {
        while let Some(mut lease) = w.client.lease_records(5) {
            turn += 1;
            // Each partition seeks only a few times: seeking every few records would keep
            // dropping the partition whose blobs arrive second before it is read.
            let case = match turn % 6 {
                2 if stale[2] >= 8 => 5,
                case => case,
            };
            match case {
                0 => {
                    // A record polled in between.
                    if let Some(r) = w.client.poll_record() {
                        keep(&mut got, &r);
                    }
                }
                1 => {
                    // Another lease, redeemed first.
                    let mut other = w.client.lease_records(3).unwrap();
                    other.decode();
                    for r in w.client.redeem_lease(other).unwrap() {
                        keep(&mut got, &r);
                    }
                }
                2 => {
                    // Each partition seeks to where it is: its buffered blobs are dropped
                    // and fetched again.
                    for tp in &tps {
                        let at = w.client.position(tp).unwrap();
                        w.client.seek(w.now, tp, SeekTo::Position(at)).unwrap();
                    }
                }
                3 => {
                    // The first partition paused and resumed: its blobs go aside and come
                    // back behind the other's. The lease is stale when that changed the front
                    // of the queue, and delivers when it did not (the same records are first).
                    w.client.pause(&tps[0]).unwrap();
                    w.client.resume(&tps[0]).unwrap();
                }
                4 => {
                    // Dropped without redeeming: nothing moves, and nothing is delivered (the
                    // exactness check below would miss its records otherwise).
                    let before = positions(w, &tps);
                    lease.decode();
                    drop(lease);
                    let now = positions(w, &tps);
                    assert_eq!(before, now, "a dropped lease moved a position");
                    continue;
                }
                _ => {}
            }
            lease.decode();
            let before = positions(w, &tps);
            match w.client.redeem_lease(lease) {
                Some(records) => {
                    assert!(
                        matches!(case, 3 | 5),
                        "a lease redeemed after case {case} delivered"
                    );
                    records.iter().for_each(|r| keep(&mut got, r));
                }
                None => {
                    stale[case] += 1;
                    let now = positions(w, &tps);
                    assert_eq!(before, now, "a stale lease moved a position");
                }
            }
        }
        count(&got) >= n
    });
    assert_exact(&exp, &got);
    for (case, times) in stale.iter().enumerate().take(4) {
        assert!(
            *times > 0,
            "case {case} never made a lease stale: {stale:?}"
        );
    }
    assert_eq!(w.client.counters().consumer_records, n as u64);
}

/// A lease that starts inside a blob (its first records polled one by one) yields the rest of
/// it, from the next index on.
#[test]
fn a_lease_takes_up_a_blob_where_polling_left_it() {
    let (mut w, exp, _) = two_partitions_of_30_blobs();
    let n: usize = exp.values().map(Vec::len).sum();
    let mut got = Got::new();
    let mut mid_blob = 0;
    w.run_until(Duration::from_secs(60), |w| {
        loop {
            let Some(first) = w.client.poll_record() else {
                return count(&got) >= n;
            };
            keep(&mut got, &first);
            let Some(mut lease) = w.client.lease_records(4) else {
                return count(&got) >= n;
            };
            lease.decode();
            let records = w.client.redeem_lease(lease).unwrap();
            if !first.last_in_blob
                && let Some(next) = records.first()
            {
                assert_eq!((next.offset, next.index), (first.offset, first.index + 1));
                mid_blob += 1;
            }
            records.iter().for_each(|r| keep(&mut got, r));
        }
    });
    assert_exact(&exp, &got);
    assert!(mid_blob > 10, "only {mid_blob} leases began inside a blob");
}
