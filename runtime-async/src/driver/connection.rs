//! One connection as the driver owns it, whole: the socket, its reading side
//! ([`Reader`]) and the bytes the socket has not taken yet.

use super::read::Reader;
use crate::Runtime;
use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io;

/// A connection the driver opened and alone reads, writes and closes.
pub(super) struct Connection<R: Runtime> {
    pub socket: R::Socket,
    /// Where reads land and what of the current frame is still to come.
    pub reader: Reader,
    /// Bytes the core handed over that the socket did not take yet, in order (only under
    /// backpressure: the driver writes the rest when the socket is writable).
    pub unsent: VecDeque<Bytes>,
}

impl<R: Runtime> Connection<R> {
    /// A connection over `socket`, with nothing read or written yet.
    pub fn new(socket: R::Socket) -> Self {
        Connection {
            socket,
            reader: Reader::new(),
            unsent: VecDeque::new(),
        }
    }

    /// Sends `bytes` after what is unsent: as much as the socket takes now, the rest kept
    /// (uncopied) for when it is writable.
    pub fn send(&mut self, mut bytes: Bytes) -> io::Result<()> {
        if self.unsent.is_empty() {
            write_some::<R>(&self.socket, &mut bytes)?;
            if bytes.is_empty() {
                return Ok(());
            }
        }
        self.unsent.push_back(bytes);
        Ok(())
    }

    /// Writes what the socket did not take earlier, as much as it takes now.
    pub fn send_unsent(&mut self) -> io::Result<()> {
        while let Some(front) = self.unsent.front_mut() {
            write_some::<R>(&self.socket, front)?;
            if !front.is_empty() {
                return Ok(());
            }
            self.unsent.pop_front();
        }
        Ok(())
    }

    /// Whether bytes wait for the socket to be writable.
    pub fn has_unsent(&self) -> bool {
        !self.unsent.is_empty()
    }
}

/// Writes as much of `bytes` as the socket takes now: handed over whole to a runtime that
/// writes on threads of its own, else with `try_write` until the socket is full.
fn write_some<R: Runtime>(socket: &R::Socket, bytes: &mut Bytes) -> io::Result<()> {
    if let Some(r) = R::hand_over(socket, bytes) {
        return r;
    }
    while bytes.has_remaining() {
        match R::try_write(socket, bytes.chunk()) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes.advance(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
