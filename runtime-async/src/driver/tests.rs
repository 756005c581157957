//! Tests of the driver's reading while a handle holds the client's lock.

use super::*;
use crate::fake::{Fake, WakeCount, socket};
use crate::state::Link;
use crate::{ClientConfig, Options};
use connection::Connection;
use std::task::Context;
use std::time::Duration;
use stellflow_sansio::DriverExt;

/// A driver of the fake runtime with one connection the core opened (its first request
/// sent), and that connection's id.
fn connected() -> (Driver<Fake>, ConnId) {
    let config = ClientConfig::new("127.0.0.1:9").unwrap();
    let (link, wake) = Link::new::<Fake>(config, Options::default()).unwrap();
    let mut driver = Driver::<Fake>::new(link.state.clone(), wake);
    let now = Instant::now();
    let state = link.state.clone();
    let mut st = state.lock();
    st.client.handle_timeout(now);
    driver.drain(&mut st, now);
    let id = st.connects.pop().expect("a bootstrap connect").conn;
    driver
        .conns
        .insert(id, Connection::new(socket(0, 64 * 1024, false)));
    st.client.handle_connected(id, now);
    driver.drain(&mut st, now);
    drop(st);
    (driver, id)
}

/// A frame of `len` bytes arrives in pieces while a handle holds the client's lock: the
/// driver drains the socket anyway, hands nothing over until the lock is free, then hands
/// over every byte it read, once, and the core wants exactly the rest of the frame. A
/// caller waiting for records is woken when the frame ends, by the read itself.
#[test]
fn reads_on_while_the_lock_is_taken_and_hands_every_byte_over_after() {
    let (mut driver, id) = connected();
    let flag = Arc::new(WakeCount::default());
    let waker = std::task::Waker::from(flag.clone());
    driver.state.lock().wait(&Context::from_waker(&waker));
    let shared = driver.state.clone();
    let sock = driver.conns[&id].socket.clone();
    let len = 2 * 1024 * 1024;
    let feed = |bytes: usize| {
        let mut s = sock.lock().unwrap();
        let from = s.data.len();
        let frame = (len as u32)
            .to_be_bytes()
            .into_iter()
            .chain(std::iter::repeat(7));
        let new: Vec<u8> = frame.skip(from).take(bytes).collect();
        s.data.extend_from_slice(&new);
    };
    let received = || shared.lock().client.counters().bytes_received;
    let base = received();
    // 100 KiB with the lock free: handed over as read.
    feed(100 * 1024);
    driver.read(id, Instant::now());
    assert_eq!(received() - base, 100 * 1024);
    assert_eq!(shared.lock().client.input_wanted(id), len + 4 - 100 * 1024);
    // 600 KiB more while a handle holds the lock.
    let guard = shared.lock();
    feed(600 * 1024);
    let reading = std::thread::spawn(move || {
        driver.read(id, Instant::now());
        driver
    });
    let end = Instant::now() + Duration::from_secs(20);
    while sock.lock().unwrap().at < 700 * 1024 {
        assert!(
            Instant::now() < end,
            "the driver stopped reading at the lock"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(guard.client.counters().bytes_received - base, 100 * 1024);
    drop(guard);
    let mut driver = reading.join().unwrap();
    assert_eq!(
        received() - base,
        700 * 1024,
        "every byte read, handed over once"
    );
    assert_eq!(shared.lock().client.input_wanted(id), len + 4 - 700 * 1024);
    assert!(driver.conns[&id].reader.held.is_empty());
    assert_eq!(flag.get(), 0, "woken inside a frame");
    // The rest of the frame, the lock free again.
    feed(len + 4 - 700 * 1024);
    driver.read(id, Instant::now());
    assert_eq!(received() - base, len as u64 + 4);
    assert_eq!(shared.lock().client.input_wanted(id), 0);
    assert_eq!(flag.get(), 1, "not woken at the frame's end");
}
