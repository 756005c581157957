//! A hash map for the core's sequential ids ([`IdMap`]), hashed with one multiplication.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by the core's sequential ids, with one multiplication as the hash (SipHash
/// would cost more than the rest of a record's bookkeeping). Not for keys an attacker chooses.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes
            .iter()
            .for_each(|b| self.write_u64(self.0.rotate_left(8) ^ u64::from(*b)));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
