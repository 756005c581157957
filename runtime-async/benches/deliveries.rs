//! The adapters' per-record bookkeeping: a waiting caller inserted per produce id and removed
//! when its outcome arrives, with `LIVE` ids waiting at once (a full producer buffer of
//! 100-byte records holds ~300 000). Compares a `HashMap` with a multiplicative id hash (what
//! the adapters used) and [`SeqMap`], on the same ids in the same run.
//!
//! Run: `cargo bench -p stellflow-async --bench deliveries`. Prints
//! `RESULT deliveries-hashmap-ns-per-record X`, `RESULT deliveries-seqmap-ns-per-record X`,
//! and the same for ids completing out of order within a window of 4 096 (several partitions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

// The adapters' private delivery table, compiled into the bench by path.
#[allow(dead_code, unused_imports)]
#[path = "../src/seq_map.rs"]
mod seq_map;
use seq_map::SeqMap;

const LIVE: u64 = 73 * 4096; // ~300 000; whole windows
const TOTAL: u64 = 1220 * 4096; // ~5 M

/// One multiplication per `u64` (the adapters' id hash).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("u64 keys only")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The id removed at step `i`: in order, or shuffled within windows of 4 096.
fn removed(i: u64, shuffled: bool) -> u64 {
    if !shuffled {
        return i;
    }
    let w = i & !4095;
    w | ((i & 4095).wrapping_mul(2_654_435_761) & 4095)
}

fn run(
    label: &str,
    shuffled: bool,
    mut insert: impl FnMut(u64),
    mut remove: impl FnMut(u64) -> bool,
) {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let mut found = 0u64;
        for id in 0..TOTAL {
            insert(id);
            if id >= LIVE {
                found += u64::from(remove(removed(id - LIVE, shuffled)));
            }
        }
        for id in TOTAL - LIVE..TOTAL {
            found += u64::from(remove(removed(id, shuffled)));
        }
        assert_eq!(found, TOTAL, "{label}: every id found once");
        best = best.min(start.elapsed().as_secs_f64() * 1e9 / TOTAL as f64);
    }
    println!("RESULT deliveries-{label}-ns-per-record {best:.1}");
}

fn main() {
    for (shuffled, suffix) in [(false, ""), (true, "-window")] {
        let mut h: HashMap<u64, u64, BuildHasherDefault<IdHasher>> = HashMap::default();
        let h = std::cell::RefCell::new(&mut h);
        run(
            &format!("hashmap{suffix}"),
            shuffled,
            |id| {
                h.borrow_mut().insert(id, id);
            },
            |id| h.borrow_mut().remove(&id).is_some(),
        );
        let mut s = SeqMap::default();
        let s = std::cell::RefCell::new(&mut s);
        run(
            &format!("seqmap{suffix}"),
            shuffled,
            |id| {
                s.borrow_mut().insert(id, id);
            },
            |id| s.borrow_mut().remove(id).is_some(),
        );
    }
}
