//! The record formats' two checksums, computed with the widest SIMD the CPU offers.
//!
//! The v1 batch carries a CRC-32C (Castagnoli) and the SRFB envelope a CRC-32 (ISO-HDLC, the
//! zlib one) (PROTOCOL.md §4). A consumer checks one over every byte it reads and a producer
//! computes one over every byte it sends, so their speed is the codec's: `crc-fast` folds with
//! VPCLMULQDQ/AVX-512 where present and falls back to the CRC32 instruction, then to tables,
//! about twice as fast as the `crc32c` crate (`cargo bench -p stellflow-proto --bench codec`
//! prints both, the `crc32c-1MiB` lines).

use crc_fast::{CrcAlgorithm, checksum};

/// CRC-32C of `data`, as the v1 batch stores it.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    // A 32-bit algorithm's checksum fits in the low half.
    checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// CRC-32 (ISO-HDLC) of `data`, as the SRFB envelope stores it.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    checksum(CrcAlgorithm::Crc32IsoHdlc, data) as u32
}

#[cfg(test)]
mod tests {
    /// The catalogue check values ("123456789") of both algorithms, and both computed alike
    /// over lengths that cross every SIMD block size.
    #[test]
    fn check_values_and_every_length() {
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
        let data: Vec<u8> = (0..4099u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [0, 1, 7, 15, 16, 31, 63, 64, 127, 255, 256, 1023, 4099] {
            let d = &data[..len];
            assert_eq!(
                super::crc32c(d),
                crc32c::crc32c(d),
                "crc32c over {len} bytes"
            );
            assert_eq!(
                super::crc32(d),
                crc32fast::hash(d),
                "crc32 over {len} bytes"
            );
        }
    }
}
