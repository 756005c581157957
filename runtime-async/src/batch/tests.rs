//! Tests of batch sends: the outcome table, its iterators and the collecting of outcomes.

use super::{BatchDelivery, BatchOutcome, Batches, Segment};
use crate::Error;
use futures_channel::oneshot;
use std::sync::Arc;
use std::time::Duration;
use stellflow_sansio::{DeliveryError, ProduceId};

fn meta(index: u32) -> crate::RecordMetadata {
    crate::RecordMetadata {
        topic: "t".into(),
        partition: 0,
        offset: Some(7),
        index,
        timestamp: 0,
    }
}

/// Feeds `ids` to batch `key` as one run of records on their way, from its next index.
fn feed(b: &mut Batches, key: u64, ids: std::ops::Range<u64>) {
    let first = b.fed(key);
    b.note_waiting(key, ids.start, first, ids.clone().count());
    b.push_waiting(key, ids.count());
}

/// Opens a batch, feeds it `ids` and seals it; its answer comes on the receiver.
fn sealed(b: &mut Batches, ids: std::ops::Range<u64>) -> oneshot::Receiver<BatchOutcome> {
    let (tx, rx) = oneshot::channel();
    let key = b.open(tx, None);
    feed(b, key, ids);
    b.seal(key);
    rx
}

/// A core batch of `topic`-`partition` at `offset` (or failed) reporting `ids`, each with
/// timestamp `1000 + id`; returns the ids nobody's batch held (single sends).
fn report(
    b: &mut Batches,
    topic: &Arc<str>,
    partition: i32,
    result: Result<Option<i64>, &DeliveryError>,
    ids: &[u64],
) -> Vec<(u64, usize)> {
    let records: Vec<(u64, i64)> = ids.iter().map(|&id| (id, 1000 + id as i64)).collect();
    report_stamped(b, topic, partition, result, &records)
}

/// [`report`] with each record's id and timestamp given.
fn report_stamped(
    b: &mut Batches,
    topic: &Arc<str>,
    partition: i32,
    result: Result<Option<i64>, &DeliveryError>,
    records: &[(u64, i64)],
) -> Vec<(u64, usize)> {
    let segment = Segment {
        topic,
        partition,
        result,
    };
    let records = records.iter().map(|&(id, ts)| (ProduceId(id), ts));
    let mut singles = Vec::new();
    b.complete_batch(segment, records, |id, i| singles.push((id.0, i)));
    singles
}

/// A delivered record's partition, offset, index in its blob and timestamp.
type Written = (i32, Option<i64>, u32, i64);

/// Every way of reading `o` (by place, forwards, backwards, skipping, by value) gives the
/// same outcomes; returned as (partition, offset, index, timestamp), or `None` for an error.
fn read_all(o: &BatchOutcome) -> Vec<Option<Written>> {
    let key = |r: Result<crate::RecordMetadata, Error>| {
        r.ok()
            .map(|m| (m.partition, m.offset, m.index, m.timestamp))
    };
    let forward: Vec<_> = o.iter().map(key).collect();
    let mut backward: Vec<_> = o.iter().rev().map(key).collect();
    backward.reverse();
    assert_eq!(forward, backward);
    let by_place: Vec<_> = (0..o.len()).map(|i| key(o.get(i).unwrap())).collect();
    assert_eq!(forward, by_place);
    assert_eq!(o.clone().into_iter().map(key).collect::<Vec<_>>(), forward);
    let mut it = o.iter();
    for (i, want) in forward.iter().enumerate().step_by(3) {
        let got = if i == 0 { it.next() } else { it.nth(2) };
        assert_eq!(got.map(key).as_ref(), Some(want), "nth to {i}");
    }
    let failed: Vec<usize> = o.errors().map(|(i, _)| i).collect();
    let none: Vec<usize> = (0..forward.len())
        .filter(|&i| forward[i].is_none())
        .collect();
    assert_eq!(failed, none);
    assert_eq!(o.failed(), none.len());
    forward
}

/// A stretch of one core batch (consecutive ids, one timestamp) is kept as one span
/// however long, with no slot per record; spans that answer out of call order read in
/// call order; a timestamp change or a short stretch splits them, short ones kept per
/// record.
#[test]
fn stretches_of_a_core_batch_are_spans() {
    let mut b = Batches::default();
    let mut rx = sealed(&mut b, 0..1000);
    let t: Arc<str> = "t".into();
    let stamped = |ids: std::ops::Range<u64>, ts: i64| -> Vec<(u64, i64)> {
        ids.map(|id| (id, ts)).collect()
    };
    // Partition 1 answers first with the call's last 300; partition 0's 700 come in
    // two blobs, the second with two timestamps and a stretch of two.
    assert_eq!(
        report_stamped(&mut b, &t, 1, Ok(Some(20)), &stamped(700..1000, 9)),
        []
    );
    assert_eq!(
        report_stamped(&mut b, &t, 0, Ok(Some(10)), &stamped(0..500, 7)),
        []
    );
    let mut last = stamped(500..690, 7);
    last.extend(stamped(690..698, 8));
    last.extend(stamped(698..700, 9));
    assert_eq!(report_stamped(&mut b, &t, 0, Ok(Some(30)), &last), []);
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!(got.spans.len(), 4, "{:?}", got.spans);
    assert_eq!(
        got.slots.len(),
        1000,
        "the stretch of two is kept per record"
    );
    let want: Vec<_> = (0..1000u32)
        .map(|i| {
            Some(match i {
                0..500 => (0, Some(10), i, 7),
                500..690 => (0, Some(30), i - 500, 7),
                690..698 => (0, Some(30), i - 500, 8),
                698..700 => (0, Some(30), i - 500, 9),
                _ => (1, Some(20), i - 700, 9),
            })
        })
        .collect();
    assert_eq!(read_all(&got), want);
    assert_eq!((got.delivered(), got.failed()), (1000, 0));
    assert!(b.open.is_empty() && b.runs.runs.is_empty());

    // One blob for one call: one span and no slots at all.
    let mut rx = sealed(&mut b, 1000..1512);
    report_stamped(&mut b, &t, 0, Ok(Some(40)), &stamped(1000..1512, 3));
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!((got.spans.len(), got.slots.len()), (1, 0));
    assert_eq!(read_all(&got)[511], Some((0, Some(40), 511, 3)));
}

/// Spans mixed with refusals, a failed core batch and records that never had an outcome
/// (the client stopped): each record reads its own outcome, and the errors are exactly
/// the records that failed, in call order.
#[test]
fn spans_refusals_failures_and_shutdown_read_in_call_order() {
    let mut b = Batches::default();
    let (tx, mut rx) = oneshot::channel();
    let key = b.open(tx, None);
    feed(&mut b, key, 0..10);
    b.push_refused(key, Error::BufferFull(Duration::ZERO), 3);
    feed(&mut b, key, 10..30);
    b.seal(key);
    let t: Arc<str> = "t".into();
    let e = DeliveryError::Timeout {
        after: Duration::from_secs(1),
        last: None,
    };
    let stamped =
        |ids: std::ops::Range<u64>| -> Vec<(u64, i64)> { ids.map(|id| (id, 5)).collect() };
    report_stamped(&mut b, &t, 0, Ok(Some(1)), &stamped(0..10));
    report_stamped(&mut b, &t, 1, Err(&e), &stamped(10..18));
    // 18..30 never answer.
    b.shut_down();
    let got = rx.try_recv().unwrap().expect("answered at shutdown");
    assert_eq!(got.len(), 33);
    let read = read_all(&got);
    assert!((0..10).all(|i| read[i] == Some((0, Some(1), i as u32, 5))));
    assert!(read[10..].iter().all(Option::is_none));
    assert_eq!((got.delivered(), got.failed()), (10, 23));
    let kinds: Vec<&str> = got
        .errors()
        .map(|(_, e)| match e {
            Error::BufferFull(_) => "full",
            Error::Delivery(_) => "delivery",
            Error::Shutdown => "shutdown",
            _ => "other",
        })
        .collect();
    let mut want = vec!["full"; 3];
    want.extend(["delivery"; 8]);
    want.extend(["shutdown"; 12]);
    assert_eq!(kinds, want);
    assert!(matches!(
        got.first_error(),
        Some((10, Error::BufferFull(_)))
    ));
}

/// Outcomes land at their record's index whatever order they come in, and the batch is
/// answered only once it is sealed and nothing is on its way.
#[test]
fn answers_in_call_order_once_sealed_and_complete() {
    let mut b = Batches::default();
    let (tx, mut rx) = oneshot::channel();
    let key = b.open(tx, None);
    b.note_waiting(key, 10, 0, 1);
    b.push_waiting(key, 1);
    b.push_refused(key, Error::BufferFull(Duration::ZERO), 1);
    assert_eq!(b.fed(key), 2);
    b.note_waiting(key, 11, 2, 1);
    b.push_waiting(key, 1);
    let (k, third) = b.take_record(11).unwrap();
    assert_eq!((k, third), (key, 2));
    b.complete(key, third, Ok(meta(1)));
    let (_, first) = b.take_record(10).unwrap();
    assert_eq!(first, 0);
    b.complete(key, first, Ok(meta(0)));
    assert_eq!(b.take_record(10), None, "one outcome per id");
    assert!(rx.try_recv().unwrap().is_none(), "not sealed yet");
    b.seal(key);
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!((got.len(), got.delivered(), got.failed()), (3, 2, 1));
    assert_eq!(got.get(0).unwrap().unwrap(), meta(0));
    assert!(matches!(got.get(1), Some(Err(Error::BufferFull(_)))));
    assert_eq!(got.get(2).unwrap().unwrap(), meta(1));
    assert!(got.get(3).is_none());
    assert!(matches!(got.first_error(), Some((1, Error::BufferFull(_)))));
    assert!(b.open.is_empty());
    assert_eq!(b.waiting(), 0);
    assert!(b.runs.runs.is_empty(), "complete runs leave");
}

/// One call's records spread over two partitions and several core batches, with a record
/// refused at once in the middle and a single send's id among them: every record reads
/// its own partition, offset, index in its blob and timestamp, in call order; a core
/// batch is one entry of the outcome, not one per record; the single send goes back.
#[test]
fn core_batches_fill_the_outcome_in_call_order() {
    let mut b = Batches::default();
    let (tx, mut rx) = oneshot::channel();
    let key = b.open(tx, None);
    // Call order: ids 1..=4 (index 0..4), a refused record (index 4), ids 6..=8 (5..8);
    // id 5 is a single send of another caller.
    feed(&mut b, key, 1..5);
    b.push_refused(key, Error::Shutdown, 1);
    feed(&mut b, key, 6..9);
    b.seal(key);
    let t: Arc<str> = "t".into();
    // Partition 0 gets the even ids, partition 1 the odd ones (and the single send).
    assert!(report(&mut b, &t, 1, Ok(Some(50)), &[1, 3, 5]) == [(5, 2)]);
    assert_eq!(report(&mut b, &t, 0, Ok(Some(20)), &[2, 4]), []);
    assert!(rx.try_recv().unwrap().is_none(), "6..=8 on their way");
    assert_eq!(report(&mut b, &t, 0, Ok(Some(22)), &[6, 8]), []);
    assert_eq!(report(&mut b, &t, 1, Ok(None), &[7]), []);
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!(got.sources.len(), 5, "four core batches and one refusal");
    assert_eq!(
        std::mem::size_of::<super::outcome::PackedOutcome>(),
        16,
        "16 bytes a record"
    );
    let expect = [
        (1, Some(50), 0, 1),
        (0, Some(20), 0, 2),
        (1, Some(50), 1, 3),
        (0, Some(20), 1, 4),
        (-1, None, 0, 0),
        (0, Some(22), 0, 6),
        (1, None, 0, 7),
        (0, Some(22), 1, 8),
    ];
    assert_eq!(got.len(), expect.len());
    for (i, (o, &(partition, offset, index, id))) in got.iter().zip(&expect).enumerate() {
        if partition < 0 {
            assert!(matches!(o, Err(Error::Shutdown)), "record {i}: {o:?}");
            continue;
        }
        let m = o.unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(
            (m.partition, m.offset, m.index, m.timestamp),
            (partition, offset, index, 1000 + id),
            "record {i}"
        );
        assert_eq!(&*m.topic, "t");
    }
    assert_eq!((got.delivered(), got.failed()), (7, 1));
    let errors: Vec<usize> = got.errors().map(|(i, _)| i).collect();
    assert_eq!(errors, [4]);
    let by_value = got.clone().into_vec();
    assert_eq!(format!("{by_value:?}"), format!("{got:?}"));
    assert_eq!(got.into_iter().rev().count(), 8);
    assert!(b.open.is_empty() && b.runs.runs.is_empty());
}

/// Consecutive ids of one run are taken together: a span stops where the run ends (the
/// next call's records, even with the next ids), where an id is skipped, and where the
/// run waits for nothing more; each record still lands at its own place.
#[test]
fn spans_of_consecutive_ids_stop_at_run_ends_and_gaps() {
    let mut b = Batches::default();
    let (tx1, mut rx1) = oneshot::channel();
    let (tx2, mut rx2) = oneshot::channel();
    let k1 = b.open(tx1, None);
    let k2 = b.open(tx2, None);
    feed(&mut b, k1, 0..6);
    feed(&mut b, k2, 6..9);
    b.seal(k1);
    b.seal(k2);
    let t: Arc<str> = "t".into();
    // Ids 4..=7 cross from call 1's run into call 2's; 1 and 3 went elsewhere.
    assert_eq!(report(&mut b, &t, 0, Ok(Some(10)), &[0, 2, 4, 5, 6, 7]), []);
    // Out of blob order, and an id nobody waits for in the middle.
    assert_eq!(report(&mut b, &t, 1, Ok(Some(20)), &[3, 1, 9, 8]), [(9, 2)]);
    let (one, two) = (
        rx1.try_recv().unwrap().expect("answered"),
        rx2.try_recv().unwrap().expect("answered"),
    );
    let got = |o: &BatchOutcome| -> Vec<(i32, u32, i64)> {
        o.iter()
            .map(|m| m.map(|m| (m.partition, m.index, m.timestamp)).unwrap())
            .collect()
    };
    assert_eq!(
        got(&one),
        [
            (0, 0, 1000),
            (1, 1, 1001),
            (0, 1, 1002),
            (1, 0, 1003),
            (0, 2, 1004),
            (0, 3, 1005)
        ]
    );
    assert_eq!(got(&two), [(0, 4, 1006), (0, 5, 1007), (1, 3, 1008)]);
    assert_eq!(b.waiting(), 0);
    assert!(b.open.is_empty() && b.runs.runs.is_empty());
    // A run that waits for nothing more takes no further record.
    let (tx3, _rx3) = oneshot::channel();
    let k3 = b.open(tx3, None);
    feed(&mut b, k3, 20..22);
    assert_eq!(report(&mut b, &t, 0, Ok(Some(30)), &[20, 21]), []);
    assert_eq!(
        report(&mut b, &t, 0, Ok(Some(32)), &[20, 21]),
        [(20, 0), (21, 1)]
    );
}

/// A core batch that failed gives each of its records (and only those) its error, read as
/// today's `Error::Delivery`; the other records of the call keep theirs.
#[test]
fn a_failed_core_batch_fails_each_of_its_records() {
    let mut b = Batches::default();
    let mut rx = sealed(&mut b, 0..6);
    let t: Arc<str> = "t".into();
    let e = DeliveryError::Timeout {
        after: Duration::from_secs(1),
        last: None,
    };
    report(&mut b, &t, 0, Ok(Some(3)), &[0, 2, 4]);
    report(&mut b, &t, 1, Err(&e), &[1, 3, 5]);
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!((got.delivered(), got.failed()), (3, 3));
    for (i, o) in got.iter().enumerate() {
        match o {
            Ok(m) => assert!(i % 2 == 0 && m.index == i as u32 / 2),
            Err(Error::Delivery(d)) => assert!(i % 2 == 1 && d == e),
            Err(other) => panic!("record {i}: {other}"),
        }
    }
    let errors: Vec<(usize, String)> = got.errors().map(|(i, e)| (i, e.to_string())).collect();
    let text = Error::Delivery(e).to_string();
    assert_eq!(errors, [(1, text.clone()), (3, text.clone()), (5, text)]);
    assert_eq!(got.sources.len(), 2);
}

/// Records still on their way when the client stops read `Shutdown` (a sealed batch is
/// answered with what is known); a batch not sealed yet is dropped.
#[test]
fn shutdown_answers_sealed_batches_with_what_is_known() {
    let mut b = Batches::default();
    let (tx, mut rx) = oneshot::channel();
    let (tx2, mut rx2) = oneshot::channel();
    let key = b.open(tx, None);
    let open = b.open(tx2, None);
    feed(&mut b, key, 0..3);
    feed(&mut b, open, 3..4);
    b.seal(key);
    report(&mut b, &"t".into(), 0, Ok(Some(1)), &[1]);
    b.shut_down();
    let got = rx.try_recv().unwrap().expect("answered");
    assert_eq!((got.len(), got.delivered(), got.failed()), (3, 1, 2));
    assert!(matches!(got.get(0), Some(Err(Error::Shutdown))));
    assert_eq!(got.get(1).unwrap().unwrap().offset, Some(1));
    assert!(matches!(got.first_error(), Some((0, Error::Shutdown))));
    assert_eq!(got.errors().map(|(i, _)| i).collect::<Vec<_>>(), [0, 2]);
    assert!(rx2.try_recv().is_err(), "an unsealed batch is dropped");
    assert_eq!(b.waiting(), 0);
}

/// `try_wait` gives the outcome once; after that every record reads `Shutdown`, and so
/// does a delivery whose batch was dropped unanswered.
#[test]
fn try_wait_twice_reads_shutdown() {
    let mut b = Batches::default();
    let (tx, rx) = oneshot::channel();
    let key = b.open(tx, None);
    feed(&mut b, key, 0..2);
    b.seal(key);
    let mut d = BatchDelivery { rx, len: 2 };
    assert!(d.try_wait().is_none(), "on its way");
    report(&mut b, &"t".into(), 0, Ok(Some(9)), &[0, 1]);
    let first = d.try_wait().expect("answered");
    assert_eq!(first.delivered(), 2);
    let again = d.try_wait().expect("lost");
    assert_eq!((again.len(), again.failed()), (2, 2));
    assert!(again.iter().all(|o| matches!(o, Err(Error::Shutdown))));
    let (tx, rx) = oneshot::channel::<BatchOutcome>();
    drop(tx);
    let lost = BatchDelivery { rx, len: 3 }.wait();
    assert_eq!((lost.len(), lost.delivered()), (3, 0));
    let empty = BatchOutcome::default();
    assert!(empty.is_empty() && empty.first_error().is_none() && empty.get(0).is_none());
}

/// Consecutive ids of one batch share a run; a gap in ids (another caller's record) or in
/// indexes (a refused record) or another batch starts a new one. Every id finds its
/// batch and place, in any order, and only ids of a batch are found.
#[test]
fn runs_map_ids_to_places_in_any_order() {
    let mut b = Batches::default();
    let (tx1, _rx1) = oneshot::channel();
    let (tx2, _rx2) = oneshot::channel();
    let k1 = b.open(tx1, None);
    let k2 = b.open(tx2, None);
    let mut expect = Vec::new();
    for id in 1..=5 {
        b.note_waiting(k1, id, (id - 1) as usize, 1);
        expect.push((id, k1, (id - 1) as usize));
    }
    // id 6 is a single send; 7..=8 go to batch 2; 9..=10 to batch 1 after a refused record.
    for id in 7..=8 {
        b.note_waiting(k2, id, (id - 7) as usize, 1);
        expect.push((id, k2, (id - 7) as usize));
    }
    for id in 9..=10 {
        b.note_waiting(k1, id, id as usize - 3, 1);
        expect.push((id, k1, id as usize - 3));
    }
    assert_eq!(b.runs.runs.len(), 3);
    assert_eq!(b.waiting(), 9);
    assert_eq!(b.take_record(6), None);
    assert_eq!(b.take_record(11), None);
    assert_eq!(b.take_record(0), None);
    // Completion order: interleaved partitions, backwards.
    expect.sort_by_key(|&(id, _, _)| (id % 3, std::cmp::Reverse(id)));
    for (id, key, index) in expect {
        assert_eq!(b.take_record(id), Some((key, index)), "id {id}");
    }
    assert_eq!(b.waiting(), 0);
    assert!(b.runs.runs.is_empty());
}

/// Two calls' records interleaved in one core batch: each call gets the core batch as an
/// entry of its own, and its records only.
#[test]
fn one_core_batch_serves_two_calls() {
    let mut b = Batches::default();
    let (tx1, mut rx1) = oneshot::channel();
    let (tx2, mut rx2) = oneshot::channel();
    let k1 = b.open(tx1, None);
    let k2 = b.open(tx2, None);
    feed(&mut b, k1, 0..2);
    feed(&mut b, k2, 2..4);
    feed(&mut b, k1, 4..6);
    b.seal(k1);
    b.seal(k2);
    report(&mut b, &"t".into(), 0, Ok(Some(0)), &[0, 1, 2, 3, 4, 5]);
    let (one, two) = (
        rx1.try_recv().unwrap().unwrap(),
        rx2.try_recv().unwrap().unwrap(),
    );
    let index = |o: &BatchOutcome| -> Vec<u32> { o.iter().map(|m| m.unwrap().index).collect() };
    assert_eq!(index(&one), [0, 1, 4, 5]);
    assert_eq!(index(&two), [2, 3]);
    // The call's two stretches of one core batch share its entry.
    assert_eq!((one.sources.len(), two.sources.len()), (1, 1));
}

/// An abandoned batch drops out of the table once its last record is in, keeping nothing.
#[test]
fn an_abandoned_batch_leaves_when_its_records_are_in() {
    let mut b = Batches::default();
    let (tx, rx) = oneshot::channel();
    let key = b.open(tx, None);
    feed(&mut b, key, 3..5);
    b.abandon(key);
    drop(rx);
    assert_eq!(b.open.len(), 1);
    let (k, i) = b.take_record(3).unwrap();
    b.complete(k, i, Ok(meta(0)));
    assert_eq!(b.open.len(), 1);
    assert!(b.open[&key].outcome.sources.is_empty(), "discarded");
    report(&mut b, &"t".into(), 0, Ok(Some(1)), &[4]);
    assert!(b.open.is_empty());
}
