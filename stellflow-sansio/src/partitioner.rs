//! Partitioners: where a record without an explicit partition goes (DESIGN §3.3).
//!
//! * Keyed records (a non-empty key): [`KeyedPartitioner::JavaHash`] by default, bit-exact with
//!   the official Java SDK (`Arrays.hashCode` over the key's *signed* bytes, then
//!   `Math.floorMod` by the partition count), or [`KeyedPartitioner::Fnv1a`], bit-exact with the
//!   Go SDK (FNV-1a 32-bit, unsigned remainder). Both hash over *all* partitions of the topic,
//!   not only those with a leader, so a key always lands on the same partition.
//! * Keyless records (no key, or an empty key): [`KeylessPartitioner::Sticky`] by default (stay
//!   on one partition until its batch closes, then pick another at random from the client's
//!   seed), or [`KeylessPartitioner::RoundRobin`].
//! * A custom [`Partitioner`] replaces both (see [`crate::Client::set_partitioner`]).

use std::fmt;

/// How records with a non-empty key are partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyedPartitioner {
    /// The Java SDK's choice: `floorMod(Arrays.hashCode(key), partitions)`.
    #[default]
    JavaHash,
    /// The Go SDK's choice: `fnv1a32(key) % partitions` (unsigned).
    Fnv1a,
}

impl KeyedPartitioner {
    /// The partition of `key` among `partitions` (> 0) partitions.
    ///
    /// ```
    /// # use stellflow_sansio::KeyedPartitioner;
    /// // Arrays.hashCode(new byte[]{(byte) 0x80}) = 31 - 128 = -97; floorMod(-97, 4) = 3.
    /// assert_eq!(KeyedPartitioner::JavaHash.partition(&[0x80], 4), 3);
    /// ```
    pub fn partition(self, key: &[u8], partitions: i32) -> i32 {
        let n = partitions.max(1);
        match self {
            KeyedPartitioner::JavaHash => java_hash(key).rem_euclid(n),
            KeyedPartitioner::Fnv1a => (fnv1a32(key) % n as u32) as i32,
        }
    }
}

/// How records without a key (or with an empty key) are partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeylessPartitioner {
    /// Stay on one partition until its current batch closes (full or sent), then move to
    /// another one chosen at random: big batches, few requests.
    #[default]
    Sticky,
    /// Each record to the next partition in turn.
    RoundRobin,
}

/// `java.util.Arrays.hashCode(byte[])`: `31 * h + b` over signed bytes, starting at 1, with
/// Java's wrapping 32-bit arithmetic.
pub fn java_hash(key: &[u8]) -> i32 {
    key.iter().fold(1i32, |h, &b| {
        h.wrapping_mul(31).wrapping_add(i32::from(b as i8))
    })
}

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
pub fn fnv1a32(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A custom partitioner for records without an explicit partition. Install one with the
/// client's `set_partitioner`; it then decides for keyed and keyless records alike.
///
/// ```
/// # use stellflow_sansio::Partitioner;
/// #[derive(Debug)]
/// struct FirstByte;
/// impl Partitioner for FirstByte {
///     fn partition(&mut self, _topic: &str, key: Option<&[u8]>, partitions: i32) -> i32 {
///         key.and_then(|k| k.first()).map_or(0, |b| i32::from(*b) % partitions)
///     }
/// }
/// assert_eq!(FirstByte.partition("t", Some(b"\x05"), 4), 1);
/// ```
pub trait Partitioner: fmt::Debug + Send {
    /// The partition in `0..partitions` for a record of `topic`. `key` is `None` for a record
    /// without a key or with an empty one. A value outside the range is reduced with
    /// `rem_euclid`.
    fn partition(&mut self, topic: &str, key: Option<&[u8]>, partitions: i32) -> i32;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `Arrays.hashCode` written the slow, obvious way with 64-bit math and masking.
    fn java_reference(key: &[u8]) -> i32 {
        let mut h: i64 = 1;
        for &b in key {
            let signed = if b >= 0x80 {
                i64::from(b) - 256
            } else {
                i64::from(b)
            };
            h = (31 * h + signed) & 0xffff_ffff;
        }
        if h >= 1 << 31 {
            (h - (1 << 32)) as i32
        } else {
            h as i32
        }
    }

    fn floor_mod(a: i32, n: i32) -> i32 {
        let r = a % n;
        if r < 0 { r + n } else { r }
    }

    #[test]
    fn java_hash_matches_reference() {
        let keys: [&[u8]; 6] = [
            b"",
            b"a",
            b"\x80",
            b"\xff\x01",
            b"key-1",
            &[0x80, 0x81, 0xfe, 0xff],
        ];
        for k in keys {
            assert_eq!(java_hash(k), java_reference(k), "{k:?}");
            for n in [3, 4, 7] {
                assert_eq!(
                    KeyedPartitioner::JavaHash.partition(k, n),
                    floor_mod(java_reference(k), n)
                );
            }
        }
        let long: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        assert_eq!(java_hash(&long), java_reference(&long));
    }

    #[test]
    fn hand_derived_vectors() {
        // [0x80]: 31 * 1 + (-128) = -97.
        assert_eq!(java_hash(&[0x80]), -97);
        // "a": 31 + 97 = 128.
        assert_eq!(java_hash(b"a"), 128);
        // [0xff, 0x01]: 31 - 1 = 30; 31 * 30 + 1 = 931 = 7 * 133.
        assert_eq!(java_hash(&[0xff, 0x01]), 931);
        let p = |k: &[u8], n| KeyedPartitioner::JavaHash.partition(k, n);
        assert_eq!([p(&[0x80], 3), p(&[0x80], 4), p(&[0x80], 7)], [2, 3, 1]);
        assert_eq!([p(b"a", 3), p(b"a", 4), p(b"a", 7)], [2, 0, 2]);
        assert_eq!(
            [p(&[0xff, 1], 3), p(&[0xff, 1], 4), p(&[0xff, 1], 7)],
            [1, 3, 0]
        );
        let k4 = [0x80, 0x81, 0xfe, 0xff];
        assert_eq!(java_hash(&k4), -3_011_837);
        assert_eq!([p(&k4, 3), p(&k4, 4), p(&k4, 7)], [1, 3, 4]);
    }

    #[test]
    fn fnv1a_vectors() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c); // the published FNV-1a 32 test vector
        assert_eq!(fnv1a32(&[0x80]), 0x850b_939f);
        let p = |k: &[u8], n| KeyedPartitioner::Fnv1a.partition(k, n);
        assert_eq!([p(&[0x80], 3), p(&[0x80], 4), p(&[0x80], 7)], [0, 3, 6]);
        assert_eq!([p(b"a", 3), p(b"a", 4), p(b"a", 7)], [1, 0, 5]);
        let k4 = [0x80, 0x81, 0xfe, 0xff];
        assert_eq!(fnv1a32(&k4), 0xe78b_e909);
        assert_eq!([p(&k4, 3), p(&k4, 4), p(&k4, 7)], [0, 1, 1]);
    }
}
