//! The x86-64 fast paths: carry-less multiplication folding and a `pclmulqdq`-based shift.
//!
//! # The math (reflected bit order)
//!
//! A message is the polynomial whose highest-degree coefficient is bit 0 of byte 0; its raw
//! CRC (no initial or final XOR) is `M · x^32 mod P`. A 128-bit slot loaded from memory holds
//! `X = X_lo · x^64 + X_hi`, where `X_lo` is the first 8 bytes. Moving `X` forward by `D` bits
//! (onto the slot `D` bits later) multiplies it by `x^D`, and modulo `P` that is
//! `X_lo · (x^(64+D) mod P) + X_hi · (x^D mod P)`, of degree < 128: it fits the later slot.
//!
//! `pclmulqdq` on reflected operands returns the product with bit `k` holding the coefficient
//! of `x^(126-k)`, one lower than the slot convention (bit `k` for `x^(127-k)`); a 32-bit
//! reflected constant `c` in the low half of a 64-bit lane stands for `c · x^32`. So the
//! product of a lane with `c` is, as a slot, `lane · c · x^33`, and the constants are
//! `x^(D+31) mod P` for `X_lo` and `x^(D-33) mod P` for `X_hi`.
//!
//! After folding everything onto the last 16 bytes, `X · x^32 mod P` is two `crc32`
//! instructions: `crc32(crc32(0, X_lo), X_hi)`. The initial register (the inverted input CRC)
//! is XORed into the first 4 bytes, which is what a CRC register does to the message.
//!
//! Parts checksummed separately join by linearity: the register after part `A` followed by
//! `L` more bytes contributes `r_A · x^(8L) mod P` to the register after them, so a chunk split
//! into a folded part and `crc32` streams (each started from 0) is the XOR of every part's
//! register shifted by the bytes after it. A shift is one `pclmulqdq` by a constant and one
//! `crc32` to reduce (see [`mul_mod_clmul`]).

use crate::x_pow_mod;
use std::arch::x86_64::{
    __m128i, __m256i, _mm_clmulepi64_si128, _mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64,
    _mm_cvtsi32_si128, _mm_cvtsi128_si64, _mm_extract_epi64, _mm_loadu_si128, _mm_set_epi64x,
    _mm_xor_si128, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256,
    _mm256_loadu_si256, _mm256_set_epi64x, _mm256_xor_si256,
};

/// Whether the folding path can run: AVX2 and VPCLMULQDQ for the 256-bit lanes, PCLMULQDQ for
/// the last 128-bit folds, SSE4.2 for the `crc32` instruction. `is_x86_feature_detected!`
/// caches its answer, so this is a couple of loads.
#[inline]
pub(crate) fn has_fold() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("vpclmulqdq") && has_clmul()
}

/// Whether [`shift_clmul`] can run.
#[inline]
pub(crate) fn has_clmul() -> bool {
    is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("sse4.2")
}

/// Folding constants `(x^(D+31) mod P, x^(D-33) mod P)` for a distance of `bytes`.
const fn fold_keys(bytes: u32) -> (i64, i64) {
    let d = bytes * 8;
    (x_pow_mod(d + 31) as i64, x_pow_mod(d - 33) as i64)
}

const K128: (i64, i64) = fold_keys(128);
const K32: (i64, i64) = fold_keys(32);
const K16: (i64, i64) = fold_keys(16);

/// `x^(8·2^k - 1) mod P`: the zero-byte operators of [`crate::ZEROS`] divided by the `x` a
/// reflected `pclmulqdq` adds (see [`mul_mod_clmul`]).
const ZEROS_CLMUL: [u32; 64] = {
    let mut t = [0u32; 64];
    t[0] = x_pow_mod(7);
    let mut k = 1;
    while k < 64 {
        t[k] = crate::mul_mod(t[k - 1], crate::ZEROS[k - 1]);
        k += 1;
    }
    t
};

/// Folds CRC-32C over `data` (at least [`crate::FOLD_MIN_LEN`] bytes) after `crc`.
#[inline]
pub(crate) fn append_fold(crc: u32, data: &[u8]) -> u32 {
    debug_assert!(has_fold());
    // SAFETY: the caller checked `has_fold()`, so every feature `fold` is compiled for is
    // present on this CPU.
    !unsafe { fold(!crc, data) }
}

/// `crc · x^(8·len) mod P` with one carry-less multiplication per set bit of `len`.
#[inline]
pub(crate) fn shift_clmul(crc: u32, len: usize) -> u32 {
    debug_assert!(has_clmul());
    // SAFETY: the caller checked `has_clmul()`; `shift` touches no memory.
    unsafe { shift(crc, len) }
}

#[target_feature(enable = "pclmulqdq,sse4.2")]
fn shift(mut crc: u32, len: usize) -> u32 {
    let mut bits = len as u64;
    let mut k = 0;
    while bits != 0 {
        if bits & 1 != 0 {
            crc = mul_mod_clmul(crc, ZEROS_CLMUL[k]);
        }
        bits >>= 1;
        k += 1;
    }
    crc
}

/// `a · b · x mod P` for reflected `a`, `b`. The 64-bit product `q` (bit `k` = coefficient of
/// `x^(62-k)` in `a · b`) read as a reflected 64-bit polynomial is `a · b · x = Q1 · x^32 + Q0`
/// with `Q1` its low and `Q0` its high 32 bits, and `crc32(0, Q1)` is `Q1 · x^32 mod P`.
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn mul_mod_clmul(a: u32, b: u32) -> u32 {
    let q = _mm_clmulepi64_si128(
        _mm_cvtsi32_si128(a as i32),
        _mm_cvtsi32_si128(b as i32),
        0x00,
    );
    let q = _mm_cvtsi128_si64(q) as u64;
    _mm_crc32_u32(0, q as u32) ^ (q >> 32) as u32
}

/// One 256-bit fold: both 128-bit lanes of `x` move forward by the distance of `k` onto `y`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
fn fold256(x: __m256i, k: __m256i, y: __m256i) -> __m256i {
    let lo = _mm256_clmulepi64_epi128(x, k, 0x00);
    let hi = _mm256_clmulepi64_epi128(x, k, 0x11);
    _mm256_xor_si256(_mm256_xor_si256(lo, hi), y)
}

/// One 128-bit fold, as [`fold256`].
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn fold128(x: __m128i, k: __m128i, y: __m128i) -> __m128i {
    let lo = _mm_clmulepi64_si128(x, k, 0x00);
    let hi = _mm_clmulepi64_si128(x, k, 0x11);
    _mm_xor_si128(_mm_xor_si128(lo, hi), y)
}

/// Loads 32 bytes (unaligned).
#[inline]
#[target_feature(enable = "avx2")]
fn load256(b: &[u8; 32]) -> __m256i {
    // SAFETY: `b` is 32 readable bytes; the load has no alignment requirement.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

/// Loads 16 bytes (unaligned).
#[inline]
#[target_feature(enable = "sse2")]
fn load128(b: &[u8; 16]) -> __m128i {
    // SAFETY: `b` is 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// The 32-bit CRC register after `data`, starting from register `state` (the inverted CRC).
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn fold(mut state: u32, mut data: &[u8]) -> u32 {
    while let Some((chunk, rest)) = data.split_first_chunk::<HYBRID_CHUNK>() {
        state = hybrid_chunk(state, chunk);
        data = rest;
    }
    let (blocks, rest) = data.as_chunks::<128>();
    let Some((first, blocks)) = blocks.split_first() else {
        return scalar(state, data);
    };
    let first = first.as_chunks::<32>().0;
    let init = _mm256_set_epi64x(0, 0, 0, i64::from(state));
    let mut x0 = _mm256_xor_si256(load256(&first[0]), init);
    let mut x1 = load256(&first[1]);
    let mut x2 = load256(&first[2]);
    let mut x3 = load256(&first[3]);
    let k128 = _mm256_set_epi64x(K128.1, K128.0, K128.1, K128.0);
    for b in blocks {
        let b = b.as_chunks::<32>().0;
        x0 = fold256(x0, k128, load256(&b[0]));
        x1 = fold256(x1, k128, load256(&b[1]));
        x2 = fold256(x2, k128, load256(&b[2]));
        x3 = fold256(x3, k128, load256(&b[3]));
    }
    let (state, rest) = reduce(x0, x1, x2, x3, rest);
    scalar(state, rest)
}

/// Folds four 256-bit accumulators (128 consecutive bytes) and then `rest` (its 16-byte
/// blocks) into one 128-bit value and reduces it to a register. Returns the bytes left over.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn reduce(x0: __m256i, x1: __m256i, x2: __m256i, x3: __m256i, rest: &[u8]) -> (u32, &[u8]) {
    let k32 = _mm256_set_epi64x(K32.1, K32.0, K32.1, K32.0);
    let x1 = fold256(x0, k32, x1);
    let x2 = fold256(x1, k32, x2);
    let mut x = fold256(x2, k32, x3);
    let (chunks, rest) = rest.as_chunks::<32>();
    for c in chunks {
        x = fold256(x, k32, load256(c));
    }
    let k16 = _mm_set_epi64x(K16.1, K16.0);
    let mut x = fold128(
        _mm256_castsi256_si128(x),
        k16,
        _mm256_extracti128_si256(x, 1),
    );
    let (chunks, rest) = rest.as_chunks::<16>();
    for c in chunks {
        x = fold128(x, k16, load128(c));
    }
    let lo = _mm_cvtsi128_si64(x) as u64;
    let hi = _mm_extract_epi64(x, 1) as u64;
    (_mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32, rest)
}

/// The register after `data` with the `crc32` instruction alone.
#[inline]
#[target_feature(enable = "sse4.2")]
fn scalar(state: u32, data: &[u8]) -> u32 {
    let mut s = u64::from(state);
    let (words, rest) = data.as_chunks::<8>();
    for w in words {
        s = _mm_crc32_u64(s, u64::from_le_bytes(*w));
    }
    let mut s = s as u32;
    for &b in rest {
        s = _mm_crc32_u8(s, b);
    }
    s
}

/// Vector bytes per step of [`hybrid_chunk`] (four 256-bit accumulators).
const HYBRID_VEC: usize = 128;
/// Scalar `crc32` streams running beside the vector folds.
const HYBRID_STREAMS: usize = 4;
/// 8-byte words each stream takes per step.
const HYBRID_WORDS: usize = 4;
/// Steps per chunk.
const HYBRID_STEPS: usize = 64;
/// Bytes of one scalar stream per chunk.
const HYBRID_STREAM_LEN: usize = 8 * HYBRID_WORDS * HYBRID_STEPS;
/// Bytes per chunk: the vector part, then the streams one after another.
const HYBRID_CHUNK: usize = HYBRID_VEC * HYBRID_STEPS + HYBRID_STREAMS * HYBRID_STREAM_LEN;

/// `x^(8·m·HYBRID_STREAM_LEN - 1) mod P` for `m` in `0..=HYBRID_STREAMS` (index 0 unused): a
/// register followed by `m` streams, for [`mul_mod_clmul`].
const STREAM_SHIFTS: [u32; HYBRID_STREAMS + 1] = {
    let mut t = [0u32; HYBRID_STREAMS + 1];
    let mut m = 1;
    while m <= HYBRID_STREAMS {
        t[m] = crate::x_pow_mod_fast((8 * m * HYBRID_STREAM_LEN - 1) as u64);
        m += 1;
    }
    t
};

/// One chunk with the carry-less folds and `HYBRID_STREAMS` `crc32` chains interleaved: the
/// folds and the `crc32` instruction use different execution units, so their throughputs add
/// (the idea of Corsix's "fast-crc32" v4s3x3 kernels; written here from the math). The vector
/// part is reduced to a register, the streams (each started from 0) are appended by shifting
/// every register by the bytes that follow it.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn hybrid_chunk(state: u32, chunk: &[u8; HYBRID_CHUNK]) -> u32 {
    let (vec, streams) = chunk.split_at(HYBRID_VEC * HYBRID_STEPS);
    let vec: &[[u8; HYBRID_VEC]; HYBRID_STEPS] = match vec.as_chunks().0.try_into() {
        Ok(v) => v,
        Err(_) => return scalar(state, chunk),
    };
    let streams: &[[u8; HYBRID_STREAM_LEN]; HYBRID_STREAMS] = match streams.as_chunks().0.try_into()
    {
        Ok(s) => s,
        Err(_) => return scalar(state, chunk),
    };
    let words = streams.each_ref().map(|s| {
        let w: &[[u8; 8]; HYBRID_STREAM_LEN / 8] = s
            .as_chunks()
            .0
            .try_into()
            .unwrap_or(&[[0; 8]; HYBRID_STREAM_LEN / 8]);
        w
    });
    let mut c = [0u64; HYBRID_STREAMS];
    let first = vec[0].as_chunks::<32>().0;
    let init = _mm256_set_epi64x(0, 0, 0, i64::from(state));
    let mut x0 = _mm256_xor_si256(load256(&first[0]), init);
    let mut x1 = load256(&first[1]);
    let mut x2 = load256(&first[2]);
    let mut x3 = load256(&first[3]);
    let k128 = _mm256_set_epi64x(K128.1, K128.0, K128.1, K128.0);
    for step in 0..HYBRID_STEPS {
        if step > 0 {
            let b = vec[step].as_chunks::<32>().0;
            x0 = fold256(x0, k128, load256(&b[0]));
            x1 = fold256(x1, k128, load256(&b[1]));
            x2 = fold256(x2, k128, load256(&b[2]));
            x3 = fold256(x3, k128, load256(&b[3]));
        }
        for w in 0..HYBRID_WORDS {
            for (c, words) in c.iter_mut().zip(&words) {
                *c = _mm_crc32_u64(*c, u64::from_le_bytes(words[step * HYBRID_WORDS + w]));
            }
        }
    }
    // Register after the vector part, then stream `m` followed by `HYBRID_STREAMS - 1 - m`
    // more streams; the shifts are independent, so they overlap.
    let (state, _) = reduce(x0, x1, x2, x3, &[]);
    let mut out = mul_mod_clmul(state, STREAM_SHIFTS[HYBRID_STREAMS]);
    for (m, c) in c.iter().enumerate() {
        let follow = HYBRID_STREAMS - 1 - m;
        out ^= if follow == 0 {
            *c as u32
        } else {
            mul_mod_clmul(*c as u32, STREAM_SHIFTS[follow])
        };
    }
    out
}
