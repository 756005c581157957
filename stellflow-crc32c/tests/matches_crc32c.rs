//! The fast paths agree with the `crc32c` crate for arbitrary lengths, alignments and initial
//! values, and `crc32c_combine` with appending.

use proptest::prelude::*;
use stellflow_crc32c::{crc32c, crc32c_append, crc32c_combine};

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn every_length_up_to_2k_and_every_alignment() {
    let data = bytes(2048 + 64, 7);
    for offset in 0..64 {
        for len in 0..=2048 {
            let d = &data[offset..offset + len];
            assert_eq!(crc32c(d), crc32c::crc32c(d), "offset {offset} len {len}");
        }
    }
}

#[test]
fn large_buffers() {
    for len in [1 << 16, (1 << 20) + 77, 3 << 20] {
        let d = bytes(len, len as u64);
        assert_eq!(crc32c(&d), crc32c::crc32c(&d));
        assert_eq!(
            crc32c_append(0xdead_beef, &d),
            crc32c::crc32c_append(0xdead_beef, &d)
        );
    }
}

proptest! {
    #[test]
    fn append_matches(crc: u32, offset in 0usize..64, len in 0usize..20_000, seed: u64) {
        let data = bytes(offset + len, seed);
        let d = &data[offset..];
        prop_assert_eq!(crc32c_append(crc, d), crc32c::crc32c_append(crc, d));
    }

    #[test]
    fn combine_matches(split in 0usize..5000, len in 0usize..5000, seed: u64) {
        let data = bytes(len, seed);
        let (a, b) = data.split_at(split.min(len));
        prop_assert_eq!(crc32c_combine(crc32c(a), crc32c(b), b.len()), crc32c::crc32c(&data));
    }

    #[test]
    fn combine_large_lengths(crc1: u32, crc2: u32, len in 0usize..(1 << 40)) {
        prop_assert_eq!(crc32c_combine(crc1, crc2, len), crc32c::crc32c_combine(crc1, crc2, len));
    }
}
