//! Golden checks for record batches (`record_batch_stable`, `record_batch_v1`).
//!
//! * v1: every valid case decodes to exactly its `fields` (header, records, headers), the
//!   explicit encoder turns those `fields` back into exactly `hex`, and the blob record iterator
//!   yields the same records; every invalid case is rejected by the decoder and the iterator.
//! * SRFB: every valid case validates to its header fields, `payload` and
//!   `uncompressedPayload`; re-encoding the uncompressed payload gives exactly `hex` (for gzip:
//!   the same header fields and inflated content, since another deflate gives other bytes);
//!   every invalid case is rejected; the opaque cases are recognised as not SRFB with the
//!   server's fingerprint.

use super::util::{hex, unhex};
use bytes::{Bytes, BytesMut};
use serde_json::Value;
use stellflow_proto::StrBytes;
use stellflow_proto::record::srfb::{self, Compression, SrfbBatch, SrfbParams};
use stellflow_proto::record::v1::{RecordFields, V1Batch, V1BatchFields, V1Batches};
use stellflow_proto::record::{BlobFormat, Header, blob_records, sniff};

/// Checks one case; `Err` says what differs.
pub fn check(case: &Value, hex_bytes: &[u8]) -> Result<(), String> {
    let kind = str_field(case, "kind")?;
    let bytes = Bytes::copy_from_slice(hex_bytes);
    // `record_batch_v1` cases say "documented v1 RecordBatch…"; `record_batch_stable` cases
    // are SRFB or opaque to the server.
    let is_stable = !str_field(case, "format")?.starts_with("documented v1");
    match (kind, is_stable) {
        ("invalid_record_batch", false) => check_v1_invalid(bytes),
        ("invalid_record_batch", true) => check_stable_invalid(bytes),
        ("record_batch", false) => check_v1(&case["fields"], bytes),
        ("record_batch", true) => check_stable(&case["fields"], bytes),
        (k, _) => Err(format!("unexpected kind {k}")),
    }
}

// ---------- JSON helpers ----------

fn str_field<'a>(v: &'a Value, k: &str) -> Result<&'a str, String> {
    v[k].as_str().ok_or_else(|| format!("missing string {k}"))
}

fn int(v: &Value, k: &str) -> Result<i64, String> {
    match &v[k] {
        Value::Number(n) => n.as_i64().ok_or_else(|| format!("{k}: not an integer")),
        Value::String(s) => s.parse().map_err(|e| format!("{k}: {e}")),
        other => Err(format!("{k}: expected an integer, got {other}")),
    }
}

fn num<T: TryFrom<i64>>(v: &Value, k: &str) -> Result<T, String> {
    T::try_from(int(v, k)?).map_err(|_| format!("{k}: out of range"))
}

fn nbytes(v: &Value, k: &str) -> Result<Option<Bytes>, String> {
    match &v[k] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(Bytes::from(unhex(s)))),
        other => Err(format!("{k}: expected hex or null, got {other}")),
    }
}

fn expect_eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: decoded {got:?}, golden {want:?}"))
    }
}

// ---------- v1 ----------

fn v1_fields(f: &Value) -> Result<V1BatchFields, String> {
    let records = f["records"]
        .as_array()
        .ok_or("records: not an array")?
        .iter()
        .map(|r| {
            let headers = r["headers"]
                .as_array()
                .ok_or("headers: not an array")?
                .iter()
                .map(|h| {
                    Ok(Header {
                        key: match &h["key"] {
                            Value::Null => None,
                            Value::String(s) => Some(StrBytes::from(s.as_str())),
                            other => return Err(format!("header key: {other}")),
                        },
                        value: nbytes(h, "value")?,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(RecordFields {
                attributes: num(r, "attributes")?,
                timestamp_delta: int(r, "timestampDelta")?,
                offset_delta: num(r, "offsetDelta")?,
                key: nbytes(r, "key")?,
                value: nbytes(r, "value")?,
                headers,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(V1BatchFields {
        base_offset_delta: num(f, "baseOffsetDelta")?,
        partition_leader_epoch: num(f, "partitionLeaderEpoch")?,
        magic: num(f, "magic")?,
        attributes: num(f, "attributes")?,
        last_offset_delta: num(f, "lastOffsetDelta")?,
        base_timestamp: int(f, "baseTimestamp")?,
        max_timestamp: int(f, "maxTimestamp")?,
        producer_id: int(f, "producerId")?,
        producer_epoch: num(f, "producerEpoch")?,
        base_sequence: num(f, "baseSequence")?,
        records,
    })
}

/// Decoded `batch` equals the golden `f`, and encoding `f` gives the batch's bytes.
fn check_one_v1(batch: &V1Batch, f: &Value) -> Result<(), String> {
    let want = v1_fields(f)?;
    let h = batch.header();
    expect_eq(
        "batchLength",
        i64::from(h.batch_length),
        int(f, "batchLength")?,
    )?;
    expect_eq("crc32c", i64::from(h.crc32c as i32), int(f, "crc32c")?)?;
    expect_eq("recordCount", h.record_count as usize, want.records.len())?;
    let got = V1BatchFields::from_batch(batch).map_err(|e| format!("records: {e}"))?;
    expect_eq("fields", &got, &want)?;
    let encoded = want.to_bytes().map_err(|e| format!("encode: {e}"))?;
    if encoded != batch.as_bytes() {
        return Err(format!(
            "re-encoding differs:\n ours   {}\n golden {}",
            hex(&encoded),
            hex(batch.as_bytes())
        ));
    }
    Ok(())
}

fn check_v1(f: &Value, bytes: Bytes) -> Result<(), String> {
    expect_eq("sniffed format", sniff(&bytes), BlobFormat::V1)?;
    let golden_batches: Vec<&Value> = match f["batches"].as_array() {
        Some(list) => list.iter().collect(),
        None => {
            // A single batch must also parse as exactly one batch.
            V1Batch::parse(bytes.clone()).map_err(|e| format!("decode: {e}"))?;
            vec![f]
        }
    };
    let batches = V1Batches::new(bytes.clone())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("split: {e}"))?;
    expect_eq("batch count", batches.len(), golden_batches.len())?;
    for (batch, gf) in batches.iter().zip(&golden_batches) {
        check_one_v1(batch, gf)?;
    }
    // The blob iterator numbers the records across batches.
    let all: Vec<_> = blob_records(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("blob records: {e}"))?;
    let mut expected_values = Vec::new();
    for gf in &golden_batches {
        for r in v1_fields(gf)?.records {
            expected_values.push(r.value);
        }
    }
    expect_eq("blob record count", all.len(), expected_values.len())?;
    for (i, (r, v)) in all.iter().zip(&expected_values).enumerate() {
        expect_eq("index_in_blob", r.index_in_blob as usize, i)?;
        expect_eq("blob record value", &r.record.value, v)?;
    }
    Ok(())
}

fn check_v1_invalid(bytes: Bytes) -> Result<(), String> {
    if let Ok(b) = V1Batch::parse(bytes.clone()) {
        return Err(format!("accepted by the v1 decoder: {:?}", b.header()));
    }
    match blob_records(bytes).find_map(Result::err) {
        Some(_) => Ok(()),
        None => Err("the blob record iterator accepted it".into()),
    }
}

// ---------- SRFB ----------

fn check_stable(f: &Value, bytes: Bytes) -> Result<(), String> {
    if f.get("stableFormat").and_then(Value::as_bool) == Some(false) {
        // Opaque to the server: not SRFB, fingerprint = CRC-32 of all bytes.
        expect_eq("sniffed format", sniff(&bytes), BlobFormat::V1)?;
        let view = srfb::server_view(&bytes).map_err(|e| format!("server view: {e}"))?;
        expect_eq("stableFormat", view.stable_format, false)?;
        expect_eq(
            "fingerprint",
            i64::from(view.fingerprint as i32),
            int(f, "fingerprint")?,
        )?;
        return Ok(());
    }
    expect_eq("sniffed format", sniff(&bytes), BlobFormat::Srfb)?;
    expect_eq("magic", int(f, "magic")?, i64::from(srfb::SRFB_MAGIC))?;
    let batch = SrfbBatch::validate(bytes.clone()).map_err(|e| format!("validate: {e}"))?;
    let h = *batch.header();
    expect_eq("version", i64::from(h.version), int(f, "version")?)?;
    expect_eq(
        "compressionType",
        i64::from(h.compression),
        int(f, "compressionType")?,
    )?;
    expect_eq("producerId", h.producer_id, int(f, "producerId")?)?;
    expect_eq(
        "producerEpoch",
        i64::from(h.producer_epoch),
        int(f, "producerEpoch")?,
    )?;
    expect_eq(
        "baseSequence",
        i64::from(h.base_sequence),
        int(f, "baseSequence")?,
    )?;
    expect_eq(
        "recordCount",
        i64::from(h.record_count),
        int(f, "recordCount")?,
    )?;
    expect_eq(
        "uncompressedLength",
        i64::from(h.uncompressed_length),
        int(f, "uncompressedLength")?,
    )?;
    expect_eq(
        "payloadLength",
        i64::from(h.payload_length),
        int(f, "payloadLength")?,
    )?;
    expect_eq(
        "expectedCrc",
        i64::from(h.crc as i32),
        int(f, "expectedCrc")?,
    )?;
    let payload = nbytes(f, "payload")?.unwrap_or_default();
    let content = nbytes(f, "uncompressedPayload")?.unwrap_or_default();
    expect_eq("payload", batch.payload(), &payload)?;
    expect_eq("uncompressedPayload", batch.content(), &content)?;

    // Re-encode from the fields.
    let compression = h
        .compression()
        .ok_or_else(|| format!("compression {}", h.compression))?;
    let params = SrfbParams {
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        record_count: h.record_count,
    };
    let mut out = BytesMut::new();
    srfb::encode(&params, compression, &content, &mut out).map_err(|e| format!("encode: {e}"))?;
    match compression {
        Compression::Gzip => {
            let ours = SrfbBatch::validate(out.freeze())
                .map_err(|e| format!("our gzip encoding does not validate: {e}"))?;
            let o = ours.header();
            expect_eq(
                "re-encoded header (except payloadLength, crc)",
                (
                    o.version,
                    o.compression,
                    o.producer_id,
                    o.producer_epoch,
                    o.base_sequence,
                    o.record_count,
                    o.uncompressed_length,
                ),
                (
                    h.version,
                    h.compression,
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.record_count,
                    h.uncompressed_length,
                ),
            )?;
            expect_eq("re-encoded content", ours.content(), &content)?;
        }
        _ => {
            if out[..] != bytes[..] {
                return Err(format!(
                    "re-encoding differs:\n ours   {}\n golden {}",
                    hex(&out),
                    hex(&bytes)
                ));
            }
        }
    }
    let view = srfb::server_view(&bytes).map_err(|e| format!("server view: {e}"))?;
    expect_eq("server view stableFormat", view.stable_format, true)?;
    expect_eq("server view fingerprint", view.fingerprint, h.crc)?;
    Ok(())
}

fn check_stable_invalid(bytes: Bytes) -> Result<(), String> {
    expect_eq("sniffed format", sniff(&bytes), BlobFormat::Srfb)?;
    if let Ok(b) = SrfbBatch::validate(bytes.clone()) {
        return Err(format!("accepted by the SRFB validator: {:?}", b.header()));
    }
    if srfb::server_view(&bytes).is_ok() {
        return Err("the server view accepted it".into());
    }
    Ok(())
}
