//! Wire types and codecs for the Stellflow protocol.
//!
//! The bottom of the workspace: it depends on no other stellflow crate, and both sides build on
//! it — the client core (`stellflow-sansio`) and the simulated broker (`stellflow-sim`).
//!
//! Stellflow speaks a big-endian, fixed-width binary protocol (no varints, no tagged fields). This
//! crate holds everything needed to read and write it, with no state and no IO:
//!
//! * [`wire`]: primitives — integers, nullable strings and bytes, arrays — and the [`wire::Wire`]
//!   trait every message implements;
//! * [`ApiKey`] and [`ErrorCode`], the server's registries, unknown values preserved;
//! * headers, frames and the request/response bodies of all 20 APIs, both directions;
//! * record data: the v1 batch, the server-native SRFB envelope and the blob splitter;
//! * [`rng::Rng`], the workspace's one seeded generator (SplitMix64), here so that the client
//!   core and the simulated broker share it without depending on each other.
//!
//! Decoders work on [`bytes::Bytes`] and hand out payloads as zero-copy slices. They never panic
//! and never allocate from an untrusted length or count beyond what the bytes present can hold.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod api_key;
pub mod error_code;
mod registry_code;
pub mod wire;

pub use api_key::ApiKey;
pub use error_code::{ErrorClass, ErrorCode};
pub use wire::{DecodeError, Describe, FieldValue, NBytes, NString, Reader, StrBytes, Wire};

pub mod frame;
pub mod header;
pub mod messages;
pub mod record;
pub mod rng;

pub use frame::{FrameDecoder, FrameError};
pub use header::{RequestHeader, ResponseHeader};
pub use messages::{EncodeBody, Request, RequestBody, ResponseBody};
pub use record::{BatchBuilder, BatchError, BatchParams, BlobFormat, Envelope, blob_records};
