//! Golden checks for headers, frames and message bodies (every area but record batches).
//!
//! Each valid case is decoded with the crate's own types, described as a field tree, turned into
//! golden-shaped JSON (see `util::to_json`) and compared with `fields`; then the decoded value is
//! re-encoded and must give exactly `hex`. Every `invalid_*` case must be rejected: frames by a
//! [`FrameDecoder`] with the server's 64 MiB limit, headers and bodies by decoding (truncation
//! or an array count larger than the bytes present).
//!
//! **Lenient cases** (the request bodies with `unreadTrailingBytes`): our request decoders
//! behave like the server — negative lengths are null, negative counts are empty, Metadata bools
//! are `byte == 1`, other bools non-zero, malformed UTF-8 becomes U+FFFD, trailing bytes are
//! ignored, unknown keys and versions ≠ 0 give an opaque body — because the simulated broker
//! must be faithful. So their decoded fields are asserted like any other case; since their bytes
//! are not canonical, the re-encoding must instead be a fixed point (it decodes to the same
//! value).
//!
//! Mapping from our types to the golden names, beyond snake_case → lowerCamelCase:
//! * `RequestHeader::api_key` is the golden `apiKeyCode`;
//! * `MetadataTopic::is_internal` is `internal`;
//! * `BeginTransaction` requests have no `commit` on the wire; the server's record always says
//!   `false`, so that key is added before comparing;
//! * an opaque body keeps the header's key as sent, while the server's record reports an
//!   unregistered key as UNKNOWN (-32768); the check maps it.

use crate::util::{same_bytes, same_json, to_json};
use bytes::{Bytes, BytesMut};
use serde_json::Value;
use stellflow_proto::frame::{decode_request, encode_request, encode_response, split_response};
use stellflow_proto::{
    ApiKey, Describe, FrameDecoder, FrameError, Reader, RequestBody, RequestHeader, ResponseBody,
    ResponseHeader, Wire,
};

/// The server's UNKNOWN api-key sentinel.
const UNKNOWN_API_KEY: i64 = -32768;

/// Checks one case; `Err` says what differs.
pub fn check(case: &Value, hex: &[u8]) -> Result<(), String> {
    let kind = case["kind"].as_str().ok_or("case without kind")?;
    let fields = &case["fields"];
    let lenient = case.get("unreadTrailingBytes").is_some();
    let bytes = Bytes::copy_from_slice(hex);
    match kind {
        "request_header" => {
            let header: RequestHeader = decode_all(bytes)?;
            same_json("request header", &request_header_json(&header), fields)?;
            same_bytes("request header", &header.to_bytes(), hex)
        }
        "response_header" => {
            let header: ResponseHeader = decode_all(bytes)?;
            same_json("response header", &to_json(&header.describe()), fields)?;
            same_bytes("response header", &header.to_bytes(), hex)
        }
        "request_body" => {
            let (key, version) = key_and_version(case)?;
            let body = RequestBody::decode(key, version, bytes)
                .map_err(|e| format!("request body rejected: {e}"))?;
            same_json("request body", &request_body_json(&body), fields)?;
            let mut again = BytesMut::new();
            body.encode(&mut again);
            if lenient {
                let redecoded = RequestBody::decode(key, version, again.freeze())
                    .map_err(|e| format!("canonical re-encoding rejected: {e}"))?;
                if redecoded != body {
                    return Err(format!(
                        "canonical re-encoding is not a fixed point: {redecoded:?} vs {body:?}"
                    ));
                }
                Ok(())
            } else {
                same_bytes("request body", &again, hex)
            }
        }
        "response_body" => {
            let (key, _) = key_and_version(case)?;
            let body = typed_response(key, bytes)?;
            same_json("response body", &to_json(&body.describe()), fields)?;
            let mut again = BytesMut::new();
            body.encode(&mut again);
            same_bytes("response body", &again, hex)
        }
        "frame" => check_frames(case, hex),
        "invalid_frame" => {
            let mut buf = BytesMut::from(hex);
            match FrameDecoder::new().decode(&mut buf) {
                Err(FrameError::TooLong { .. }) => Ok(()),
                other => Err(format!("invalid frame accepted: {other:?}")),
            }
        }
        "invalid_request_header" => match RequestHeader::decode(&mut Reader::new(bytes)) {
            Err(_) => Ok(()),
            Ok(h) => Err(format!("invalid request header accepted: {h:?}")),
        },
        "invalid_request_body" => {
            let (key, version) = key_and_version(case)?;
            match RequestBody::decode(key, version, bytes) {
                Err(_) => Ok(()),
                Ok(b) => Err(format!("invalid request body accepted: {b:?}")),
            }
        }
        other => Err(format!("kind {other} is not a message case")),
    }
}

/// Frames: one frame, or `{frames: [...]}` for several in one byte stream. The stream must split
/// into the same payloads when fed whole and one byte at a time, each payload must describe as
/// its golden entry, and re-encoding every frame into one buffer must give the stream back.
fn check_frames(case: &Value, hex: &[u8]) -> Result<(), String> {
    let expected: Vec<&Value> = match case["fields"].get("frames") {
        Some(Value::Array(frames)) => frames.iter().collect(),
        _ => vec![&case["fields"]],
    };
    let to_server = match case["direction"].as_str() {
        Some("client_to_server") => true,
        Some("server_to_client") => false,
        other => return Err(format!("frame with direction {other:?}")),
    };
    let (key, _) = key_and_version(case)?;

    let whole = split_frames(hex, hex.len())?;
    let bytewise = split_frames(hex, 1)?;
    if whole != bytewise {
        return Err("frames differ when fed one byte at a time".into());
    }
    if whole.len() != expected.len() {
        return Err(format!(
            "{} frames decoded, {} expected",
            whole.len(),
            expected.len()
        ));
    }

    let mut again = BytesMut::new();
    for (payload, golden) in whole.into_iter().zip(expected) {
        let frame_length = payload.len();
        let (header_json, body_json) = if to_server {
            let (header, body) =
                decode_request(payload).map_err(|e| format!("request frame rejected: {e}"))?;
            encode_request(&mut again, &header, &body);
            (request_header_json(&header), request_body_json(&body))
        } else {
            let (header, body) =
                split_response(payload).map_err(|e| format!("response frame rejected: {e}"))?;
            let body = body.map(|b| typed_response(key, b)).transpose()?;
            encode_response(&mut again, &header, body.as_ref());
            let body_json = body.map_or(Value::Null, |b| to_json(&b.describe()));
            (to_json(&header.describe()), body_json)
        };
        let ours = serde_json::json!({
            "frameLength": frame_length,
            "header": header_json,
            "body": body_json,
        });
        same_json("frame", &ours, golden)?;
    }
    same_bytes("frame", &again, hex)
}

/// Feeds `stream` to a frame decoder in chunks of `chunk` bytes; every byte must be used.
fn split_frames(stream: &[u8], chunk: usize) -> Result<Vec<Bytes>, String> {
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        while let Some(payload) = decoder
            .decode(&mut buf)
            .map_err(|e| format!("frame rejected: {e}"))?
        {
            out.push(payload);
        }
    }
    if buf.is_empty() {
        Ok(out)
    } else {
        Err(format!("{} bytes left after the last frame", buf.len()))
    }
}

/// Decodes a `T` and requires every byte to be used.
fn decode_all<T: Wire>(bytes: Bytes) -> Result<T, String> {
    let mut r = Reader::new(bytes);
    let value = T::decode(&mut r).map_err(|e| format!("rejected: {e}"))?;
    match r.remaining() {
        0 => Ok(value),
        n => Err(format!("{n} bytes left unread")),
    }
}

fn key_and_version(case: &Value) -> Result<(ApiKey, i16), String> {
    let key = case["apiKey"].as_i64().ok_or("case without apiKey")?;
    let version = case["apiVersion"].as_i64().unwrap_or(0);
    let key = i16::try_from(key).map_err(|e| e.to_string())?;
    let version = i16::try_from(version).map_err(|e| e.to_string())?;
    Ok((ApiKey(key), version))
}

/// A response body that must decode with a typed layout (never opaque).
fn typed_response(key: ApiKey, bytes: Bytes) -> Result<ResponseBody, String> {
    match ResponseBody::decode(key, bytes) {
        Ok(ResponseBody::Opaque { .. }) => Err(format!("no response type for {key:?}")),
        Ok(body) => Ok(body),
        Err(e) => Err(format!("response body rejected: {e}")),
    }
}

fn request_header_json(header: &RequestHeader) -> Value {
    let mut json = to_json(&header.describe());
    if let Some(map) = json.as_object_mut()
        && let Some(code) = map.remove("apiKey")
    {
        map.insert("apiKeyCode".into(), code);
    }
    json
}

fn request_body_json(body: &RequestBody) -> Value {
    let mut json = to_json(&body.describe());
    if let Some(map) = json.as_object_mut() {
        match body {
            RequestBody::BeginTransaction(_) => {
                map.insert("commit".into(), Value::Bool(false));
            }
            RequestBody::Opaque { api_key, .. } if !api_key.is_known() => {
                map.insert("apiKey".into(), Value::from(UNKNOWN_API_KEY));
            }
            _ => {}
        }
    }
    json
}
