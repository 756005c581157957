//! Writing to the sockets: the bytes the core hands over, and those a socket did not take yet.

use super::State;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use stellflow_sansio::{ConnId, DisconnectReason};

/// A socket's writing side as the shared state sees it (the runtime's type erased).
pub(crate) trait Transmit: Send + Sync {
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize>;
    fn hand_over(&self, buf: &mut BytesMut) -> Option<std::io::Result<()>>;
    fn hand_over_shared(&self, bytes: &mut Bytes) -> Option<std::io::Result<()>>;
    fn set_abort_on_close(&self) -> std::io::Result<()>;
}

pub(crate) struct Conn {
    pub sock: Arc<dyn Transmit>,
    /// Bytes the socket did not take yet, in order (only under backpressure).
    pub pending: VecDeque<Bytes>,
}

impl State {
    /// Writes the bytes the core appended for `id`, straight from the reused buffer.
    pub(super) fn transmit(&mut self, id: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.pending.is_empty() {
            c.pending.push_back(self.out.split().freeze());
            return;
        }
        match write_some(&*c.sock, &mut self.out) {
            Ok(()) if self.out.is_empty() => {}
            Ok(()) => {
                c.pending.push_back(self.out.split().freeze());
                self.replan = true;
            }
            Err(e) => self.lost(id, now, DisconnectReason::io(&e)),
        }
    }

    /// Writes shared bytes the core handed over ([`Output::TransmitBytes`](stellflow_sansio::Output::TransmitBytes)) to `id`, after
    /// what is pending for it; what the socket does not take now waits, uncopied.
    pub(super) fn transmit_shared(&mut self, id: ConnId, mut bytes: Bytes, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !c.pending.is_empty() {
            c.pending.push_back(bytes);
            return;
        }
        match write_shared(&*c.sock, &mut bytes) {
            Ok(()) if bytes.is_empty() => {}
            Ok(()) => {
                c.pending.push_back(bytes);
                self.replan = true;
            }
            Err(e) => self.lost(id, now, DisconnectReason::io(&e)),
        }
    }

    /// Writes bytes a socket did not take earlier.
    pub fn write_pending(&mut self, id: ConnId, now: Instant) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        while let Some(front) = c.pending.front_mut() {
            if let Err(e) = write_shared(&*c.sock, front) {
                self.lost(id, now, DisconnectReason::io(&e));
                return;
            }
            if !front.is_empty() {
                return;
            }
            c.pending.pop_front();
        }
    }

    /// A connection failed or closed.
    pub fn lost(&mut self, id: ConnId, now: Instant, reason: DisconnectReason) {
        if self.conns.remove(&id).is_some() {
            self.replan = true;
            self.client.handle_disconnected(id, now, reason);
        }
    }
}

/// Writes as much of `buf` as the socket takes now.
fn write_some(sock: &dyn Transmit, buf: &mut BytesMut) -> std::io::Result<()> {
    match sock.hand_over(buf) {
        Some(r) => r,
        None => write_with(sock, buf),
    }
}

/// [`write_some`] for shared bytes.
fn write_shared(sock: &dyn Transmit, bytes: &mut Bytes) -> std::io::Result<()> {
    match sock.hand_over_shared(bytes) {
        Some(r) => r,
        None => write_with(sock, bytes),
    }
}

/// Writes `buf` with `try_write` until it is empty or the socket is full.
fn write_with(sock: &dyn Transmit, buf: &mut impl bytes::Buf) -> std::io::Result<()> {
    while buf.has_remaining() {
        match sock.try_write(buf.chunk()) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
