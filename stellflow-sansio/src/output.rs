//! What the client asks of its driver: [`Output`], the answer of the one driver door
//! ([`Client::poll_output`](crate::Client::poll_output)), and the cursor that keeps the order
//! of one drain.

use crate::event::Event;
pub use crate::net::{CloseMode, CloseRequest};
use crate::net::{ConnectRequest, Transmitted};
use crate::request::ConnId;
use bytes::Bytes;
use std::time::Instant;

/// One thing the driver must do, from [`Client::poll_output`](crate::Client::poll_output).
///
/// Call `poll_output` again after acting on each one; [`Output::Timeout`] ends the drain.
#[must_use = "an output is work for the driver: a connection to open or close, bytes to send or an event; dropping it loses that work"]
#[derive(Debug)]
pub enum Output {
    /// Open a connection to `request.address`, then report back with
    /// [`Client::handle_connected`](crate::Client::handle_connected) or
    /// [`Client::handle_disconnected`](crate::Client::handle_disconnected) for `request.conn`.
    Connect(ConnectRequest),
    /// Close `request.conn` at once, as `request.mode` says (the core gave up on its stream;
    /// the matching [`Event::ConnectionError`] says why). Do not report it back as
    /// disconnected. A [`CloseMode::Abort`] must reset the socket, not just drop it.
    Close(CloseRequest),
    /// The bytes appended to the caller's buffer during this call go to this connection,
    /// after what earlier outputs gave it.
    ///
    /// One `Transmit` is one connection's bytes: a driver that writes per connection clears
    /// the buffer (or notes its length) before each call and writes what was added.
    Transmit(ConnId),
    /// These bytes go to this connection, right after what earlier outputs gave it: a large
    /// record blob of a Produce request, handed over without a copy (the client keeps it for a
    /// retry, so it is shared, and read-only). The rest of its frame comes in the
    /// [`Output::Transmit`]s around it; write each connection's outputs in the order they
    /// come.
    TransmitBytes(ConnId, Bytes),
    /// An outcome for the application: connection changes, metadata updates, admin and raw
    /// results, produce outcomes, consumer events.
    Event(Event),
    /// Nothing is left to do now. Call
    /// [`Client::handle_timeout`](crate::Client::handle_timeout) at this instant (`None`:
    /// no timer is armed; wait for socket readiness or a command). It holds until the next
    /// input or command, after which the driver drains again.
    Timeout(Option<Instant>),
}

impl Output {
    /// The output for what the router gave the driver to send.
    pub(crate) fn transmitted(t: Transmitted) -> Output {
        match t {
            Transmitted::Buffer(conn) => Output::Transmit(conn),
            Transmitted::Shared(conn, bytes) => Output::TransmitBytes(conn, bytes),
        }
    }
}

/// Where a drain is: the order outputs come in (connects, closes, transmits, events) and
/// whether this round moved anything (then another round follows before the timeout).
#[derive(Debug, Default)]
pub(crate) struct DrainCursor {
    /// The kind of output asked for next.
    pub(crate) step: DrainStep,
    /// Whether the round under way has given an output, or taken an event the client acts on
    /// itself (a round that does neither ends the drain).
    pub(crate) moved: bool,
}

/// The kinds of output, in the order one round of a drain gives them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainStep {
    /// Connections to open.
    #[default]
    Connect,
    /// Connections to close.
    Close,
    /// Bytes to send (each ask also runs the client's pass, which can create more outputs).
    Transmit,
    /// Events for the application.
    Event,
}
