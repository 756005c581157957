//! Errors, one enum per layer, each variant saying what the caller can do about it.
//!
//! * [`ConfigError`](crate::ConfigError) (in its own module, below the addresses it names):
//!   the configuration cannot work — fix it;
//! * [`InvalidTopicName`]: refused client-side before any request — pick another name;
//! * [`RequestError`]: one request failed — [`RequestError::is_retriable`] says whether sending it
//!   again may succeed;
//! * [`ConnectionError`]: the core closed a connection (it reconnects on demand by itself);
//! * [`AdminError`]: an admin command failed as a whole (per-partition errors are data in the
//!   typed result instead).
//!
//! Every error a user can receive answers `is_retriable()` (whether the same call may succeed
//! later), and those of writes answer `outcome_unknown()` (whether it may have been executed
//! although it failed: a timeout or a connection lost in flight). Each carries the last cause
//! the client saw: the address and failure of an unreachable broker
//! ([`RequestError::Unreachable`]), the bytes of a frame cut off when a connection closed
//! ([`RequestError::Disconnected`]), the reason a partition has no leader
//! ([`crate::producer::DeliveryError::Leaderless`]).

use crate::address::BrokerAddress;
use crate::metadata::LeaderlessReason;
use std::time::Duration;
use stellflow_proto::{ApiKey, DecodeError, ErrorCode};

/// A topic name the client refuses to send (DESIGN §3.11): the server would use it as a
/// directory name unchecked. Choose a name of 1–249 characters from `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidTopicName {
    /// The name is empty.
    #[error("topic name is empty")]
    Empty,
    /// The name is longer than allowed.
    #[error("topic name is {len} characters long, at most {max} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `.` and `..` would name the log directory itself or its parent.
    #[error("topic name {name:?} is reserved (it would name a directory of the broker)")]
    Reserved {
        /// The name.
        name: String,
    },
    /// A character outside `[A-Za-z0-9._-]`.
    #[error("topic name {name:?} contains {character:?}; only A-Z a-z 0-9 . _ - are allowed")]
    IllegalCharacter {
        /// The name.
        name: String,
        /// The first illegal character.
        character: char,
    },
}

/// Why one request failed. [`RequestError::is_retriable`] tells whether sending the same request
/// again (after a metadata refresh or a backoff) may succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No answer before the request's deadline. Retriable, but the outcome is unknown: the
    /// broker may still have executed it (a late answer is counted and dropped).
    #[error(
        "{api_key} request timed out after {after:?}; outcome unknown: the broker may have executed it"
    )]
    Timeout {
        /// The API called.
        api_key: ApiKey,
        /// How long it waited since the command.
        after: Duration,
    },
    /// The connection closed while the request was in flight. Retriable; the outcome is
    /// unknown (the broker may or may not have executed it).
    #[error(
        "connection to {address} lost while {api_key} was in flight ({cause}); outcome unknown: the broker may have executed it"
    )]
    Disconnected {
        /// The API called.
        api_key: ApiKey,
        /// The broker it was sent to.
        address: BrokerAddress,
        /// What ended the connection (connection reset, closed by the broker — with the bytes
        /// of a response frame received and declared when it closed in the middle of one).
        cause: String,
    },
    /// The request was never sent: no connection to its broker came up before its deadline.
    /// Retriable (the broker did not execute it); check that the address is right and the
    /// broker is running.
    #[error("{api_key} request not sent: broker {address} is unreachable ({cause})")]
    Unreachable {
        /// The API called.
        api_key: ApiKey,
        /// The broker's address.
        address: BrokerAddress,
        /// The last failure seen on the way to it (e.g. `connect failed: Connection refused`).
        cause: String,
    },
    /// The broker does not list this API in its ApiVersions answer, or no version both sides
    /// support exists. Not retriable on this broker.
    #[error("broker {address} does not support {api_key} at any version this client speaks")]
    UnsupportedApi {
        /// The API called.
        api_key: ApiKey,
        /// The broker.
        address: BrokerAddress,
    },
    /// The broker answered UNSUPPORTED_VERSION again after the connection renegotiated.
    #[error("broker {address} rejected {api_key} v{version} even after renegotiation")]
    UnsupportedVersion {
        /// The API called.
        api_key: ApiKey,
        /// The version sent.
        version: i16,
        /// The broker.
        address: BrokerAddress,
    },
    /// The broker failed the whole request: a 12-byte header with this error code and no body
    /// (PROTOCOL.md §2.3). Retriable when the code is.
    #[error("broker {address} failed the {api_key} request with {code}")]
    Broker {
        /// The API called.
        api_key: ApiKey,
        /// The request-level error code.
        code: ErrorCode,
        /// The broker.
        address: BrokerAddress,
    },
    /// The response body could not be decoded. Not retriable: report it (a broker bug or a
    /// protocol mismatch).
    #[error("malformed {api_key} response: {error}")]
    Decode {
        /// The API called.
        api_key: ApiKey,
        /// What the decoder found.
        error: DecodeError,
    },
    /// The request names a broker id the metadata does not know (yet). Retriable after a
    /// metadata refresh.
    #[error("broker {broker} is not in the cluster metadata")]
    UnknownBroker {
        /// The broker id.
        broker: i32,
    },
    /// The encoded request is larger than the server accepts (64 MiB including the length
    /// prefix). Not retriable: send less per request.
    #[error("{api_key} request of {size} bytes exceeds the server's limit of {max} bytes")]
    TooLarge {
        /// The API called.
        api_key: ApiKey,
        /// The frame size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The answer's frame was larger than `ClientConfig::max_response_frame`: the connection
    /// was closed without reading it. Not retriable as it is: ask for less per request, or
    /// raise the limit.
    #[error("the {api_key} answer of {size} bytes exceeds max_response_frame ({max} bytes)")]
    ResponseTooLarge {
        /// The API called.
        api_key: ApiKey,
        /// The announced frame size, length prefix included.
        size: u64,
        /// The configured limit.
        max: usize,
    },
    /// The client was closed before an answer came.
    #[error("the client was closed")]
    Closed,
}

impl RequestError {
    /// Whether sending the same request again may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            RequestError::Timeout { .. }
            | RequestError::Disconnected { .. }
            | RequestError::Unreachable { .. }
            | RequestError::UnknownBroker { .. } => true,
            RequestError::Broker { code, .. } => code.is_retriable(),
            _ => false,
        }
    }

    /// Whether the broker may have executed the request although no answer came (a timeout,
    /// or a connection lost while it was in flight): retrying a write may then write twice.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            RequestError::Timeout { .. } | RequestError::Disconnected { .. }
        )
    }

    /// Whether the error hints that the metadata (leaders, brokers) is stale.
    pub fn wants_metadata_refresh(&self) -> bool {
        match self {
            RequestError::Disconnected { .. }
            | RequestError::Unreachable { .. }
            | RequestError::UnknownBroker { .. } => true,
            RequestError::Broker { code, .. } => {
                code.class() == stellflow_proto::ErrorClass::RefreshMetadataAndRetry
            }
            _ => false,
        }
    }
}

/// Why the client closed a connection on its own. The client reconnects on demand with
/// backoff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// A response frame is larger than `max_response_frame`. Raise the limit or ask for less
    /// data per request.
    #[error("response frame of {size} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The announced frame size, length prefix included.
        size: u64,
        /// The configured limit.
        max: usize,
    },
    /// A response frame could not be parsed at all (shorter than a response header). The
    /// stream cannot be trusted any more.
    #[error("malformed response frame: {0}")]
    Malformed(DecodeError),
    /// ApiVersions failed, so no version can be chosen for this broker.
    #[error("version negotiation failed: {0}")]
    Negotiation(String),
    /// The peer's first answer is not a well-formed ApiVersions response (an absurd frame
    /// length, a correlation id never sent, a body that does not decode): whatever listens
    /// there is not a Stellflow broker. Check the address; the core retries it only at the
    /// reconnect cap (`reconnect_backoff_max`).
    #[error("the peer is not a Stellflow broker: {detail}")]
    NotStellflow {
        /// What its first answer looked like.
        detail: String,
    },
    /// Requests in flight timed out this many times in a row with nothing received on the
    /// connection: it is presumed dead (a black hole) and reopened.
    #[error("{timeouts} requests timed out in a row with nothing received; reconnecting")]
    Unresponsive {
        /// The timeouts in a row.
        timeouts: u32,
    },
    /// A group member withdrew the writes still unanswered on its coordinator connection
    /// (its lease lapsed, or a commit or registry write stayed unanswered past the lease
    /// margin): the connection is reset so that none of them
    /// lands later, after another member took its partitions over, and a fresh one is opened.
    #[error("unanswered writes withdrawn ({reason}); the connection is reset")]
    WritesWithdrawn {
        /// Why the writes could no longer be trusted to land in time.
        reason: &'static str,
    },
}

impl ConnectionError {
    /// Whether a new connection may work where this one failed (the core reconnects by
    /// itself): true except for an oversize frame, which needs a larger `max_response_frame`.
    pub fn is_retriable(&self) -> bool {
        !matches!(self, ConnectionError::FrameTooLarge { .. })
    }
}

impl InvalidTopicName {
    /// Never: the name must be changed.
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// An admin command failed as a whole. Per-partition outcomes are data inside the typed
/// result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// A topic name was refused before any request (fix the name).
    #[error(transparent)]
    InvalidTopic(#[from] InvalidTopicName),
    /// An argument is out of range (fix the argument).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The request failed (see [`RequestError::is_retriable`]).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The partition has no usable leader to route to. Retry after a metadata refresh, or
    /// re-assert leadership if the reason says the broker restarted.
    #[error("{topic}-{partition} has no leader: {reason}")]
    Leaderless {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// Why.
        reason: LeaderlessReason,
    },
    /// The topic or partition is not in the metadata of any broker asked.
    #[error("{topic}-{partition} is unknown to every broker asked")]
    UnknownPartition {
        /// Topic.
        topic: String,
        /// Partition (−1: the whole topic).
        partition: i32,
    },
}

impl AdminError {
    /// Whether running the same command again may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            AdminError::Request(e) => e.is_retriable(),
            AdminError::Leaderless { .. } | AdminError::UnknownPartition { .. } => true,
            _ => false,
        }
    }
}
