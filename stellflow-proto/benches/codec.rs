//! Codec throughput next to a memcpy of the same bytes, measured in the same run.
//!
//! `cargo bench -p stellflow-proto --bench codec` prints one `RESULT <name> <value> <unit>` line
//! per figure: v1 encode (the producer's builder) and decode (CRC checked, every key and value
//! touched) at 100 B and 1 KiB values, the CRC-32C of the 1 KiB-value batch alone, SRFB+gzip
//! encode and decode, and frame decoding. A ratio `x-memcpy` is codec throughput divided by
//! memcpy throughput over the same bytes.

use bytes::{Bytes, BytesMut};
use std::hint::black_box;
use std::time::{Duration, Instant};
use stellflow_proto::frame::FrameDecoder;
use stellflow_proto::record::{
    BatchBuilder, BatchParams, Compression, Envelope, V1Batch, blob_records,
};

/// Rounds per figure; codec and memcpy alternate, and the best round of each counts, so
/// other load on the machine disturbs both alike.
const ROUNDS: usize = 7;
/// Length of one round.
const ROUND: Duration = Duration::from_millis(70);
/// Blob size the producer aims for (its default `batch_size`).
const BATCH_BYTES: usize = 1 << 20;
const KEY_LEN: usize = 16;

/// Seconds per call of `f` over one round.
fn round(f: &mut impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut iters = 0u64;
    while start.elapsed() < ROUND {
        for _ in 0..4 {
            f();
        }
        iters += 4;
    }
    start.elapsed().as_secs_f64() / iters as f64
}

/// Best seconds per call of `codec`, and of a memcpy of `src` into a preallocated buffer,
/// measured in alternating rounds after a warm-up.
fn compare(src: &[u8], mut codec: impl FnMut()) -> (f64, f64) {
    let mut dst = vec![0u8; src.len()];
    let mut memcpy = || {
        dst.copy_from_slice(black_box(src));
        black_box(&mut dst);
    };
    for _ in 0..3 {
        codec();
        memcpy();
    }
    let (mut best_codec, mut best_memcpy) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        best_memcpy = best_memcpy.min(round(&mut memcpy));
        best_codec = best_codec.min(round(&mut codec));
    }
    (best_codec, best_memcpy)
}

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT {name} {value:.3} {unit}");
}

/// Reports a codec figure over `bytes` bytes and `records` records next to a memcpy.
fn report(name: &str, secs: f64, memcpy_secs: f64, bytes: usize, records: usize) {
    result(name, memcpy_secs / secs, "x-memcpy");
    result(
        &format!("{name}-throughput"),
        bytes as f64 / secs / 1e6,
        "MB/s",
    );
    result(
        &format!("{name}-records"),
        records as f64 / secs,
        "records/s",
    );
}

/// Deterministic values that compress like typical JSON-ish payloads (not all zeros).
fn values(n: usize, len: usize) -> Vec<Vec<u8>> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let words: [&[u8]; 8] = [
        b"{\"id\":",
        b"\"amount\":",
        b"12345",
        b"\"name\":\"",
        b"order",
        b"\",",
        b"true",
        b"}",
    ];
    (0..n)
        .map(|_| {
            let mut v = Vec::with_capacity(len + 16);
            while v.len() < len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.extend_from_slice(words[(x % 8) as usize]);
                v.push(b'0' + (x >> 8) as u8 % 10);
            }
            v.truncate(len);
            v
        })
        .collect()
}

fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("key-{i:012}").into_bytes())
        .collect()
}

/// Builds one blob of `keys`/`values` into `buf` (cleared first) and returns the buffer.
fn build(buf: BytesMut, envelope: Envelope, keys: &[Vec<u8>], values: &[Vec<u8>]) -> BytesMut {
    let params = BatchParams {
        base_timestamp: 1_700_000_000_000,
        ..BatchParams::default()
    };
    let mut b = BatchBuilder::in_buffer(buf, params, envelope);
    for (i, (k, v)) in keys.iter().zip(values).enumerate() {
        let appended = b.append(1_700_000_000_000 + i as i64, Some(k), Some(v));
        black_box(appended.is_ok());
    }
    b.finish_into().unwrap_or_default()
}

fn touch_blob(blob: &Bytes) -> u64 {
    let mut sum = 0u64;
    for r in blob_records(blob.clone()) {
        let Ok(r) = r else { break };
        sum += u64::from(
            r.record
                .key
                .as_ref()
                .and_then(|k| k.first().copied())
                .unwrap_or(0),
        );
        sum += u64::from(
            r.record
                .value
                .as_ref()
                .and_then(|v| v.last().copied())
                .unwrap_or(0),
        );
    }
    sum
}

fn v1_figures(label: &str, value_len: usize) {
    let n = BATCH_BYTES / (value_len + KEY_LEN + 29);
    let keys = keys(n);
    let values = values(n, value_len);
    let blob = build(BytesMut::new(), Envelope::V1, &keys, &values).freeze();

    let mut buf = BytesMut::with_capacity(blob.len());
    let (encode, memcpy) = compare(&blob, || {
        buf.clear();
        buf = build(std::mem::take(&mut buf), Envelope::V1, &keys, &values);
        black_box(&buf);
    });
    result(
        &format!("memcpy-{label}"),
        blob.len() as f64 / memcpy / 1e6,
        "MB/s",
    );
    report(&format!("v1-encode-{label}"), encode, memcpy, blob.len(), n);
    if value_len == 1024 {
        crc_figures(&blob);
    }

    let (decode, memcpy) = compare(&blob, || {
        let mut sum = 0u64;
        if let Ok(batch) = V1Batch::parse(blob.clone()) {
            for r in batch.records() {
                let Ok(r) = r else { break };
                sum += u64::from(r.key.as_ref().and_then(|k| k.first().copied()).unwrap_or(0));
                sum += u64::from(
                    r.value
                        .as_ref()
                        .and_then(|v| v.last().copied())
                        .unwrap_or(0),
                );
            }
        }
        black_box(sum);
    });
    report(&format!("v1-decode-{label}"), decode, memcpy, blob.len(), n);

    let (blob_iter, memcpy) = compare(&blob, || {
        black_box(touch_blob(&blob));
    });
    report(
        &format!("blob-records-{label}"),
        blob_iter,
        memcpy,
        blob.len(),
        n,
    );
}

/// The CRC-32C over the ~1 MiB batch alone (v1 encode and decode each pay it once), computed
/// by `crc-fast` as the codec does, next to the `crc32c` crate the codec used before and a
/// memcpy of the same bytes.
fn crc_figures(blob: &Bytes) {
    let (crc, memcpy) = compare(blob, || {
        black_box(crc_fast::checksum(
            crc_fast::CrcAlgorithm::Crc32Iscsi,
            black_box(blob),
        ));
    });
    let (before, _) = compare(blob, || {
        black_box(crc32c::crc32c(black_box(blob)));
    });
    result("crc32c-1MiB", blob.len() as f64 / crc / 1e6, "MB/s");
    result(
        "crc32c-1MiB-crc32c-crate",
        blob.len() as f64 / before / 1e6,
        "MB/s",
    );
    result(
        "crc32c-1MiB-memcpy",
        blob.len() as f64 / memcpy / 1e6,
        "MB/s",
    );
}

fn srfb_gzip_figures(label: &str, value_len: usize) {
    let n = BATCH_BYTES / (value_len + KEY_LEN + 29);
    let keys = keys(n);
    let values = values(n, value_len);
    let envelope = Envelope::Srfb(Compression::Gzip);
    let blob = build(BytesMut::new(), envelope, &keys, &values).freeze();
    let plain = build(BytesMut::new(), Envelope::V1, &keys, &values).freeze();
    // Throughput counts uncompressed batch bytes; the memcpy copies the same amount.
    result(
        &format!("srfb-gzip-ratio-{label}"),
        plain.len() as f64 / blob.len() as f64,
        "x-compression",
    );
    let mut buf = BytesMut::with_capacity(plain.len());
    let (encode, memcpy) = compare(&plain, || {
        buf.clear();
        buf = build(std::mem::take(&mut buf), envelope, &keys, &values);
        black_box(&buf);
    });
    report(
        &format!("srfb-gzip-encode-{label}"),
        encode,
        memcpy,
        plain.len(),
        n,
    );
    let (decode, memcpy) = compare(&plain, || {
        black_box(touch_blob(&blob));
    });
    report(
        &format!("srfb-gzip-decode-{label}"),
        decode,
        memcpy,
        plain.len(),
        n,
    );

    let none = build(
        BytesMut::new(),
        Envelope::Srfb(Compression::None),
        &keys,
        &values,
    )
    .freeze();
    let (decode_none, memcpy) = compare(&none, || {
        black_box(touch_blob(&none));
    });
    report(
        &format!("srfb-none-decode-{label}"),
        decode_none,
        memcpy,
        none.len(),
        n,
    );
}

/// Decodes a read buffer of back-to-back frames (copying the stream into the buffer first, as
/// a socket read does) next to a plain memcpy of the stream.
fn frame_figures(label: &str, payload_len: usize) {
    let frames = (4 << 20) / (payload_len + 4);
    let mut stream = Vec::with_capacity(frames * (payload_len + 4));
    let payload = values(1, payload_len).pop().unwrap_or_default();
    for _ in 0..frames {
        stream.extend_from_slice(&(payload_len as u32).to_be_bytes());
        stream.extend_from_slice(&payload);
    }
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::with_capacity(stream.len());
    let (decode, memcpy) = compare(&stream, || {
        buf.clear();
        buf.extend_from_slice(&stream);
        let mut n = 0usize;
        while let Ok(Some(frame)) = decoder.decode(&mut buf) {
            n += frame.len();
        }
        black_box(n);
        // Every frame is dropped: reclaim the whole buffer for the next round.
        buf.reserve(stream.len());
    });
    report(
        &format!("frame-decode-{label}"),
        decode,
        memcpy,
        stream.len(),
        frames,
    );
}

fn main() {
    // `cargo test --benches` runs this binary with `--bench` absent; keep that quick.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let started = Instant::now();
    v1_figures("100B", 100);
    v1_figures("1KiB", 1024);
    srfb_gzip_figures("1KiB", 1024);
    frame_figures("1KiB", 1024);
    result("bench-wall-time", started.elapsed().as_secs_f64(), "s");
}
