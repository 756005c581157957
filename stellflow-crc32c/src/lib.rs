//! CRC-32C (Castagnoli, reflected polynomial `0x82F63B78`, initial value and final XOR
//! `0xFFFFFFFF`): the checksum of the v1 record batch.
//!
//! The functions match the [`crc32c`](https://docs.rs/crc32c) crate bit for bit (`crc32c`,
//! `crc32c_append`, `crc32c_combine`), only faster where the CPU allows:
//!
//! * On x86-64 with AVX2, VPCLMULQDQ, PCLMULQDQ and SSE4.2 (detected at run time), buffers of
//!   at least [`FOLD_MIN_LEN`] bytes are folded with 256-bit carry-less multiplications, four
//!   independent accumulators in flight; from 16 KiB on, four chains of the `crc32`
//!   instruction run beside the folds on a separate part of each chunk, and the partial CRCs are
//!   joined with carry-less shifts. The `crc32` instruction alone (the `crc32c` crate) peaks at
//!   8 bytes per cycle, and so do the folds alone on Zen 3; together they reach about 12 bytes
//!   per cycle, so large buffers go through at about 1.5× its speed (38 against 25 GB/s on one
//!   Zen 3 core; `benches/crc.rs`).
//! * Everything else (short buffers, other CPUs) goes to the `crc32c` crate, which uses the
//!   `crc32` instruction where it exists and tables otherwise.
//!
//! [`crc32c_combine`] costs one carry-less multiplication per set bit of the length on x86-64
//! (a table-driven portable loop elsewhere), so a writer can checksum a body as it is written
//! and prepend a header checksummed later.
//!
//! The folding is the textbook technique of Gopal et al., "Fast CRC Computation for Generic
//! Polynomials Using PCLMULQDQ Instruction" (Intel, 2009), widened to 256-bit lanes; running
//! `crc32` chains beside the folds is the idea of Peter Cawley's (Corsix) MIT-licensed
//! "fast-crc32" kernels. The code here is written from the math (in `x86.rs`), with every
//! constant computed at compile time.
//!
//! ```
//! assert_eq!(stellflow_crc32c::crc32c(b"123456789"), 0xE306_9283);
//! let (a, b) = (&b"12345"[..], &b"6789"[..]);
//! let whole = stellflow_crc32c::crc32c_append(stellflow_crc32c::crc32c(a), b);
//! let (crc_a, crc_b) = (stellflow_crc32c::crc32c(a), stellflow_crc32c::crc32c(b));
//! let combined = stellflow_crc32c::crc32c_combine(crc_a, crc_b, b.len());
//! assert_eq!(whole, combined);
//! ```

// The only module with unsafe code: runtime-detected intrinsics, each use commented.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86;

/// The reflected CRC-32C polynomial without its `x^32` term.
const POLY: u32 = 0x82F6_3B78;

/// Buffers at least this long take the folding path where the CPU has it; shorter ones are not
/// worth the setup and final reduction.
pub const FOLD_MIN_LEN: usize = 256;

/// The CRC-32C of `data`; the same as `crc32c_append(0, data)`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// The CRC-32C of the bytes checksummed into `crc` followed by `data`
/// (`crc32c_append(crc32c(a), b) == crc32c(a ++ b)`).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= FOLD_MIN_LEN && x86::has_fold() {
        return x86::append_fold(crc, data);
    }
    crc32c::crc32c_append(crc, data)
}

/// The CRC-32C of `a ++ b` from `crc1 = crc32c(a)`, `crc2 = crc32c(b)` and `len2 = b.len()`.
#[inline]
pub fn crc32c_combine(crc1: u32, crc2: u32, len2: usize) -> u32 {
    crc2 ^ shift(crc1, len2)
}

/// `crc · x^(8·len) mod P`: the effect of `len` zero bytes on a CRC register. Appending `b` to
/// `a` XORs this for `crc32c(a)` into `crc32c(b)` (the initial and final XORs cancel).
#[inline]
fn shift(crc: u32, len: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if x86::has_clmul() {
        return x86::shift_clmul(crc, len);
    }
    shift_portable(crc, len)
}

/// `a · x mod P` for a reflected `a` (bit `i` holds the coefficient of `x^(31-i)`).
const fn mul_x(a: u32) -> u32 {
    if a & 1 != 0 { (a >> 1) ^ POLY } else { a >> 1 }
}

/// `x^n mod P`, reflected. Linear in `n`: for constants only.
const fn x_pow_mod(n: u32) -> u32 {
    let mut v = 0x8000_0000; // x^0
    let mut i = 0;
    while i < n {
        v = mul_x(v);
        i += 1;
    }
    v
}

/// `x^n mod P`, reflected, by square-and-multiply.
const fn x_pow_mod_fast(mut n: u64) -> u32 {
    let mut r = 0x8000_0000; // x^0
    let mut p = 0x4000_0000; // x^1, squared at every bit of n
    while n != 0 {
        if n & 1 != 0 {
            r = mul_mod(r, p);
        }
        p = mul_mod(p, p);
        n >>= 1;
    }
    r
}

/// `a · b mod P`, both reflected, by Horner's rule from the `x^31` coefficient of `a` down.
const fn mul_mod(a: u32, b: u32) -> u32 {
    let mut r = 0;
    let mut i = 0;
    while i < 32 {
        r = mul_x(r);
        if (a >> i) & 1 != 0 {
            r ^= b;
        }
        i += 1;
    }
    r
}

/// `x^(8·2^k) mod P` for every `k`: the zero-byte operators for `len` are the product of the
/// entries for its set bits.
const ZEROS: [u32; 64] = {
    let mut t = [0u32; 64];
    t[0] = x_pow_mod(8);
    let mut k = 1;
    while k < 64 {
        t[k] = mul_mod(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
};

fn shift_portable(mut crc: u32, len: usize) -> u32 {
    let mut bits = len as u64;
    let mut k = 0;
    while bits != 0 {
        if bits & 1 != 0 {
            crc = mul_mod(crc, ZEROS[k]);
        }
        bits >>= 1;
        k += 1;
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn powers_agree() {
        for n in [0u32, 1, 7, 31, 32, 33, 95, 1000, 5000] {
            assert_eq!(x_pow_mod_fast(u64::from(n)), x_pow_mod(n), "n {n}");
        }
    }

    #[test]
    fn portable_shift_matches_appending_zeros() {
        for len in [0usize, 1, 3, 8, 100, 4096, 1 << 20] {
            let crc = crc32c(b"stellflow");
            let zeros = vec![0u8; len];
            let want = crc32c::crc32c_append(crc, &zeros) ^ crc32c::crc32c(&zeros);
            assert_eq!(shift_portable(crc, len), want, "len {len}");
            assert_eq!(shift(crc, len), want, "len {len}");
        }
    }
}
