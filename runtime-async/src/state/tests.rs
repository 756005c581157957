//! Tests of the shared state: the lane's waking of batch sends waiting for room.

use super::*;
use crate::Record;
use crate::batch::Fed;
use crate::fake::WakeCount;
use std::time::Duration;
use stellflow_sansio::ClientConfig;

/// A batch send that finds the buffer full waits for room, and the driver's passes wake it
/// only once an eighth of `buffer_memory` (or the record's size, if larger) is free again:
/// not while the buffer stays full, and at once when it empties (here: the records
/// expire, as nothing answers) or at shutdown.
#[test]
fn a_batch_waiting_for_room_is_woken_once_there_is_room() {
    let mut config = ClientConfig::new("127.0.0.1:9").unwrap();
    config.producer.buffer_memory = 16 * 1024;
    config.producer.batch_size = 4 * 1024;
    config.producer.delivery_timeout = Duration::from_secs(1);
    let (link, _wake) = Link::new::<crate::fake::Fake>(config, Options::default()).unwrap();
    let mut st = link.state.lock();
    let now = Instant::now();
    let (reply, _rx) = oneshot::channel();
    let key = st.batches.open(reply, None);
    let mut records = (0..64).map(|i| Record::new("room", vec![i as u8; 1000]));
    let (mut held, mut fed) = (None, 0);
    let step = st.feed(now, key, &mut held, &mut records, 512, &mut fed);
    assert_eq!(step, Fed::WaitForRoom);
    assert!(held.is_some() && fed < 64, "the buffer held {fed} of 64");
    let count = Arc::new(WakeCount::default());
    let waker = Waker::from(count.clone());
    st.wait_for_room(&Context::from_waker(&waker));
    st.wait_for_room(&Context::from_waker(&waker));
    assert_eq!(st.room_waiters.len(), 1, "one registration per waker");
    // Driver passes while the buffer stays full: no wake-up.
    for _ in 0..3 {
        st.drain(now);
        st.wake_waiters();
    }
    assert_eq!(count.get(), 0, "woken without room");
    // The records expire (nothing answers): the buffer empties, and the next pass wakes.
    let later = now + Duration::from_secs(120);
    st.client.handle_timeout(later);
    st.drain(later);
    assert!(st.client.producer_buffered_bytes() <= st.room_mark);
    st.wake_waiters();
    assert_eq!(count.get(), 1, "not woken with room");
    // Shutdown wakes a waiter whatever the buffer holds.
    st.wait_for_room(&Context::from_waker(&waker));
    st.room_mark = 0;
    st.shut_down();
    assert_eq!(count.get(), 2, "not woken at shutdown");
}

/// Two clients made at once get different seeds (and so different default client ids).
#[test]
fn seeds_come_from_the_os_and_differ() {
    let seeds: std::collections::HashSet<u64> =
        (0..64).map(|_| crate::runtime::os_seed()).collect();
    assert_eq!(seeds.len(), 64);
}
