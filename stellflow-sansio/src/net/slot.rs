//! One broker connection slot ([`Slot`], its [`ConnState`]): its address, state machine,
//! queue of requests waiting to be sent, in-flight table, receive buffer and negotiated
//! versions.
//!
//! A slot lives as long as the client; the socket behind it comes and goes. States:
//!
//! ```text
//! Idle ──demand──▶ Connecting ──connected──▶ Negotiating ──ApiVersions ok──▶ Ready
//!   ▲                  │                         │                            │
//!   └── backoff ◀──────┴──────── disconnected ◀──┴────────────────────────────┘
//! ```
//!
//! Requests queue in the slot while it is not ready; only the ApiVersions request goes out
//! while negotiating.

use crate::address::BrokerAddress;
use crate::backoff::Backoff;
use crate::inflight::InFlight;
use crate::negotiate::Versions;
use crate::request::ConnId;
use bytes::BytesMut;
use std::collections::VecDeque;
use std::time::Instant;
use stellflow_proto::frame::FrameDecoder;
use stellflow_proto::messages::ApiVersionsResponse;

/// Where a slot's connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnState {
    /// No socket and none wanted yet.
    Idle,
    /// Waiting out a reconnect backoff until the instant.
    Backoff(Instant),
    /// The driver was asked to connect.
    Connecting(ConnId),
    /// Connected; its ApiVersions is to be sent or in flight.
    Negotiating(ConnId, Negotiation),
    /// Negotiated; requests flow.
    Ready(ConnId),
}

/// Where a connection's version negotiation is ([`ConnState::Negotiating`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Negotiation {
    /// The ApiVersions request is still to be written.
    ToSend,
    /// The ApiVersions request is written; its answer is awaited.
    InFlight,
}

impl ConnState {
    /// The current socket's id, if there is one.
    pub(super) fn conn(&self) -> Option<ConnId> {
        match *self {
            ConnState::Connecting(c) | ConnState::Negotiating(c, _) | ConnState::Ready(c) => {
                Some(c)
            }
            _ => None,
        }
    }

    /// Whether a socket is open (connected, negotiating or ready).
    pub(super) fn is_open(&self) -> bool {
        matches!(self, ConnState::Negotiating(..) | ConnState::Ready(_))
    }
}

/// One broker's connection slot.
#[derive(Debug)]
pub(super) struct Slot<R> {
    /// The dialled address.
    pub address: BrokerAddress,
    /// The broker id, once metadata names this address.
    pub broker_id: Option<i32>,
    /// Connection state.
    pub state: ConnState,
    /// Requests waiting to be written.
    pub queue: VecDeque<R>,
    /// Requests written and not answered.
    pub in_flight: InFlight<R>,
    /// Reconnect backoff.
    pub backoff: Backoff,
    /// Earliest instant of the next connection attempt.
    pub next_attempt: Option<Instant>,
    /// Bytes received and not yet framed.
    pub rx: BytesMut,
    /// Splits `rx` into frames and enforces the size limit.
    pub decoder: FrameDecoder,
    /// Versions negotiated on the current connection.
    pub versions: Option<Versions>,
    /// The broker's last ApiVersions answer.
    pub api_versions: Option<ApiVersionsResponse>,
    /// Requests in flight on the current connection that timed out since the last bytes came
    /// in on it; at [`SILENT_TIMEOUTS_TO_CLOSE`] the connection is given up (a black hole).
    pub silent_timeouts: u32,
    /// The newest connection on which an answer (any response frame) arrived, and when the
    /// first answer on it arrived.
    pub last_answer_conn: Option<(ConnId, Instant)>,
}

/// In-flight timeouts in a row with nothing received after which a connection is closed and
/// reopened: a silently dead connection (no FIN, no RST) would otherwise take every later
/// request to its broker into the same void. One timeout alone keeps the connection (a slow
/// answer is counted and dropped when it comes).
pub(super) const SILENT_TIMEOUTS_TO_CLOSE: u32 = 2;

impl<R> Slot<R> {
    /// A fresh, idle slot.
    pub(super) fn new(
        address: BrokerAddress,
        max_in_flight: usize,
        max_frame: usize,
        backoff: Backoff,
    ) -> Self {
        Slot {
            address,
            broker_id: None,
            state: ConnState::Idle,
            queue: VecDeque::new(),
            in_flight: InFlight::new(max_in_flight),
            backoff,
            next_attempt: None,
            rx: BytesMut::new(),
            decoder: FrameDecoder::with_max_frame_length(max_frame),
            versions: None,
            api_versions: None,
            silent_timeouts: 0,
            last_answer_conn: None,
        }
    }

    /// Requests waiting or in flight.
    pub(super) fn load(&self) -> usize {
        self.queue.len() + self.in_flight.len()
    }

    /// Whether anything needs this connection.
    pub(super) fn wanted(&self) -> bool {
        !self.queue.is_empty()
    }
}
