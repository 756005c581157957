//! What the [`crate::Tokio`] runtime asks of its socket, for tokio's stream and (with the
//! `turmoil` feature) the socket that may be a simulated one.

use crate::bytes::{BufMut, BytesMut};
use std::io;
use std::task::{Context, Poll};
use tokio::net::TcpStream;

/// Non-blocking reads and writes with readiness, as the driver makes them.
pub(crate) trait SocketIo {
    /// What the socket has now, into `buf` (`WouldBlock` when nothing, `Ok(0)` at its end).
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// Like [`SocketIo::try_read`], appended to `buf` (at most `limit` bytes).
    fn try_read_buf(&self, buf: &mut BytesMut, limit: usize) -> io::Result<usize>;
    /// Writes what the socket takes now (`WouldBlock` when nothing).
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Ready when the socket may be readable (registers `cx` otherwise).
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Ready when the socket may be writable (registers `cx` otherwise).
    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// The tokio stream, if this is one (a simulated socket has none).
    fn as_tcp(&self) -> Option<&TcpStream>;
}

impl SocketIo for TcpStream {
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::try_read(self, buf)
    }
    fn try_read_buf(&self, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        // Into the buffer's spare room, not zeroed first.
        TcpStream::try_read_buf(self, &mut (&mut *buf).limit(limit))
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, buf)
    }
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready(cx)
    }
    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_ready(cx)
    }
    fn as_tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}
