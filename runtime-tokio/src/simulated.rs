//! The tokio runtime's socket with the `turmoil` feature: tokio's TCP stream, or, when the
//! client runs on a host of a turmoil simulation, turmoil's simulated one.

use crate::bytes::BytesMut;
use crate::stream::SocketIo;
use std::future::Future;
use std::io::{self, ErrorKind};
use std::pin::pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use stellflow_async::BrokerAddress;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

/// Most bytes one read of a simulated stream takes (its room is zeroed first).
const SIMULATED_READ: usize = 16 * 1024;

/// A connection of the [`crate::Tokio`] runtime built with the `turmoil` feature: a tokio
/// `TcpStream`, or inside a turmoil simulation (`turmoil::in_simulation()`) a
/// `turmoil::net::TcpStream` to a simulated host. Only the driver uses it.
#[derive(Debug)]
pub struct Socket(Inner);

#[derive(Debug)]
enum Inner {
    Tcp(TcpStream),
    /// turmoil's stream reads through `&mut` (its writes and readiness through `&`): the
    /// driver is its only reader, so the lock is never contended.
    Simulated(Mutex<turmoil::net::TcpStream>),
}

/// Whether the calling task runs on a host of a turmoil simulation.
pub(crate) fn in_simulation() -> bool {
    turmoil::in_simulation()
}

/// A seed drawn from the simulation's wall clock, the same on every replay of a world.
pub(crate) fn seed(since_epoch: Duration) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(since_epoch)
}

impl Socket {
    /// The simulated stream (the lock cannot be poisoned in a way that matters: the stream
    /// has no invariant a panic could break).
    fn simulated(s: &Mutex<turmoil::net::TcpStream>) -> MutexGuard<'_, turmoil::net::TcpStream> {
        s.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connects to `address` on the simulated network within `limit`.
    pub(crate) async fn connect_simulated(
        address: BrokerAddress,
        limit: Duration,
    ) -> io::Result<Socket> {
        let connect = turmoil::net::TcpStream::connect((address.host.as_str(), address.port));
        match tokio::time::timeout(limit, connect).await {
            Ok(stream) => Ok(Socket(Inner::Simulated(Mutex::new(stream?)))),
            Err(_) => Err(io::Error::new(ErrorKind::TimedOut, "connect timed out")),
        }
    }

    /// A tokio stream.
    pub(crate) fn tcp(stream: TcpStream) -> Socket {
        Socket(Inner::Tcp(stream))
    }

    /// The tokio stream of a connection outside a simulation; `None` for a simulated one.
    pub fn tcp_stream(&self) -> Option<&TcpStream> {
        SocketIo::as_tcp(self)
    }
}

impl SocketIo for Socket {
    fn as_tcp(&self) -> Option<&TcpStream> {
        match &self.0 {
            Inner::Tcp(s) => Some(s),
            Inner::Simulated(_) => None,
        }
    }

    /// What the socket has now, into `buf` (`WouldBlock` when nothing, `Ok(0)` at its end).
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.0 {
            Inner::Tcp(s) => SocketIo::try_read(s, buf),
            Inner::Simulated(s) => {
                let mut stream = Self::simulated(s);
                let mut read = ReadBuf::new(buf);
                // Readiness is waited on through `poll_readable`, which registers the
                // driver's waker again before it sleeps.
                let mut cx = Context::from_waker(Waker::noop());
                match pin!(&mut *stream).poll_read(&mut cx, &mut read) {
                    Poll::Ready(Ok(())) => Ok(read.filled().len()),
                    Poll::Ready(Err(e)) => Err(e),
                    Poll::Pending => Err(ErrorKind::WouldBlock.into()),
                }
            }
        }
    }

    /// Like [`Socket::try_read`], into `buf`'s spare room, at most `limit` bytes.
    fn try_read_buf(&self, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        match &self.0 {
            Inner::Tcp(s) => SocketIo::try_read_buf(s, buf, limit),
            Inner::Simulated(_) => {
                let at = buf.len();
                buf.resize(at + limit.min(SIMULATED_READ), 0);
                let read = self.try_read(&mut buf[at..]);
                buf.truncate(at + *read.as_ref().unwrap_or(&0));
                read
            }
        }
    }

    /// Writes what the socket takes now (`WouldBlock` when nothing).
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match &self.0 {
            Inner::Tcp(s) => SocketIo::try_write(s, buf),
            Inner::Simulated(s) => Self::simulated(s).try_write(buf),
        }
    }

    /// Ready when the socket may be readable.
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.0 {
            Inner::Tcp(s) => s.poll_read_ready(cx),
            Inner::Simulated(s) => {
                // A peek keeps what it finds for the next read.
                let mut byte = [0u8; 1];
                let mut peek = ReadBuf::new(&mut byte);
                Self::simulated(s).poll_peek(cx, &mut peek).map_ok(|_| ())
            }
        }
    }

    /// Ready when the socket may be writable.
    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.0 {
            Inner::Tcp(s) => s.poll_write_ready(cx),
            Inner::Simulated(s) => pin!(Self::simulated(s).writable()).poll(cx),
        }
    }
}
