//! Events: everything the core reports to its driver and users, as [`crate::Output::Event`].

use crate::address::BrokerAddress;
use crate::admin_call::AdminOutcome;
use crate::error::{AdminError, ConnectionError, RequestError};
use crate::request::{ConnId, RawResponse, RequestId};
use std::time::Duration;

/// Why the driver reports a connection as gone, in [`crate::Client::handle_disconnected`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The connection could not be established.
    ConnectFailed(IoFailure),
    /// The peer closed the connection (EOF).
    PeerClosed,
    /// A read or write failed.
    Io(IoFailure),
    /// The core closed it (see [`crate::Output::Close`]).
    Core(ConnectionError),
}

impl DisconnectReason {
    /// [`DisconnectReason::ConnectFailed`] from the error the connect attempt returned.
    pub fn connect_failed(error: &std::io::Error) -> Self {
        DisconnectReason::ConnectFailed(IoFailure::from(error))
    }

    /// [`DisconnectReason::Io`] from the error a read or write returned.
    pub fn io(error: &std::io::Error) -> Self {
        DisconnectReason::Io(IoFailure::from(error))
    }
}

/// An I/O failure as the driver saw it: the [`std::io::ErrorKind`] to act on and the
/// error's text to show (an [`std::io::Error`] itself is neither `Clone` nor `Eq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFailure {
    /// The kind of the error (`ConnectionRefused`, `ConnectionReset`, `TimedOut`, ...).
    pub kind: std::io::ErrorKind,
    /// The error's text, as its `Display` printed it.
    pub message: String,
}

impl IoFailure {
    /// A failure of `kind` with the text `message`.
    pub fn new(kind: std::io::ErrorKind, message: impl Into<String>) -> Self {
        IoFailure {
            kind,
            message: message.into(),
        }
    }
}

impl From<&std::io::Error> for IoFailure {
    fn from(error: &std::io::Error) -> Self {
        IoFailure::new(error.kind(), error.to_string())
    }
}

impl From<std::io::Error> for IoFailure {
    fn from(error: std::io::Error) -> Self {
        IoFailure::from(&error)
    }
}

impl std::fmt::Display for IoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DisconnectReason::ConnectFailed(e) => write!(f, "connect failed: {e}"),
            DisconnectReason::PeerClosed => f.write_str("closed by the broker"),
            DisconnectReason::Io(e) => write!(f, "I/O error: {e}"),
            DisconnectReason::Core(e) => write!(f, "closed by the client: {e}"),
        }
    }
}

/// An outcome reported by the core.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A connection finished version negotiation and carries requests now.
    Connected {
        /// The connection.
        conn: ConnId,
        /// The broker address.
        address: BrokerAddress,
        /// The broker id, when metadata has told us.
        broker_id: Option<i32>,
    },
    /// A connection is gone; requests in flight on it failed with a retriable error.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// The broker address.
        address: BrokerAddress,
        /// Why.
        reason: DisconnectReason,
        /// When the core will try again if it still needs the broker (backoff with jitter).
        retry_in: Duration,
    },
    /// The core closed a connection because the stream broke (e.g. an oversize frame). The
    /// driver must drop the socket: its id also comes out as [`crate::Output::Close`].
    ConnectionError {
        /// The connection.
        conn: ConnId,
        /// The broker address.
        address: BrokerAddress,
        /// What went wrong.
        error: ConnectionError,
    },
    /// A metadata refresh round finished and the merged view changed or was confirmed. Read it
    /// with [`crate::Client::metadata`].
    MetadataUpdated {
        /// Brokers known.
        brokers: usize,
        /// Topics known.
        topics: usize,
        /// Partitions without a usable leader.
        leaderless: usize,
    },
    /// The outcome of an admin command.
    Admin {
        /// The id the command returned.
        id: RequestId,
        /// The answer: [`AdminOutcome::take`] with the command's [`crate::AdminId`] gives its
        /// typed result.
        result: Result<AdminOutcome, AdminError>,
    },
    /// The outcome of a raw [`crate::Client::request`].
    Response {
        /// The id the command returned.
        id: RequestId,
        /// The raw answer.
        result: Result<RawResponse, RequestError>,
    },
    /// The outcome of one [`crate::Client::produce`] (exactly one per accepted record).
    Produced {
        /// The id `produce` returned.
        id: crate::delivery::ProduceId,
        /// Where the record was written, or why it was not.
        result: Result<crate::delivery::RecordMetadata, crate::delivery::DeliveryError>,
    },
    /// The outcome of every record of one batch at once, in place of their
    /// [`Event::Produced`] events, for a driver that asked for it
    /// ([`crate::DriverExt::set_batch_outcomes`]). A record that fails before it reaches a batch
    /// still has its own [`Event::Produced`].
    ProducedBatch(crate::delivery::ProducedBatch),
    /// Every record produced before the [`crate::Client::flush`] with this id has its outcome.
    Flushed {
        /// The id `flush` returned.
        id: crate::delivery::FlushId,
    },
    /// The producer finished closing ([`crate::Client::close_producer`] or the client's
    /// `close`): nothing more will be sent.
    ProducerClosed {
        /// Records that failed with [`crate::delivery::DeliveryError::Closed`].
        failed: u64,
    },
    /// The cluster's health changed (healthy, degraded, unreachable); the same as
    /// [`crate::Client::cluster_health`] returns now.
    HealthChanged(crate::health::ClusterHealth),
    /// A consumer notification (rebalances, positions, commits, group state). Records
    /// themselves come from [`crate::Client::poll_record`].
    Consumer(crate::consumer_event::ConsumerEvent),
}
