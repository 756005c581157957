//! The [`Runtime`] trait: the few things the driver cannot do without a runtime.

use bytes::BytesMut;
use std::future::Future;
use std::io;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_sansio::BrokerAddress;

/// Most bytes the default [`Runtime::try_read_buf`] zeroes (and so reads) in one call; the
/// driver reads again while the socket has more.
const ZEROED_READ_MAX: usize = 2 * 1024 * 1024;

/// What a runtime provides to the driver: a place to run, TCP connects, non-blocking socket
/// I/O with readiness, and a timer. Implemented by a marker type in each adapter crate
/// (`stellflow_tokio::Tokio`, `stellflow_smol::Smol`, `stellflow_blocking::Blocking`);
/// nothing about Stellflow belongs here.
pub trait Runtime: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// A connected, non-blocking TCP stream (TCP_NODELAY set).
    type Socket: Send + Sync + 'static;

    /// Runs the driver `task` to completion in the background.
    fn spawn(name: &'static str, task: impl Future<Output = ()> + Send + 'static)
    -> io::Result<()>;

    /// Opens a TCP connection to `address` within `limit`. The driver polls it among its
    /// other work, so it must not block the thread.
    fn connect(
        address: BrokerAddress,
        limit: Duration,
    ) -> impl Future<Output = io::Result<Self::Socket>> + Send + 'static;

    /// Completes at `deadline`.
    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send;

    /// Reads what the socket has now into `buf` (`WouldBlock` when nothing; `Ok(0)` at EOF).
    fn try_read(socket: &Self::Socket, buf: &mut [u8]) -> io::Result<usize>;

    /// Reads what the socket has now, at most `limit` bytes, appending them to `buf` (which
    /// has room for them); returns how many, like [`Runtime::try_read`]. The default zeroes
    /// room first and calls [`Runtime::try_read`], at most 2 MiB at a time: a read returns
    /// what the socket holds, often far less than the rest of a large frame (`limit`), and
    /// zeroing all of that before every read would zero the same bytes again at each read.
    /// (A smaller cap costs more in reads than it saves in zeroing: with 256 KiB, smol read
    /// 100-byte records ~10 % slower than with 2 MiB.) A runtime that can read into
    /// uninitialised room without `unsafe` of ours (tokio's `try_read_buf`) overrides it and
    /// skips zeroing altogether.
    fn try_read_buf(socket: &Self::Socket, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        let start = buf.len();
        buf.resize(start + limit.min(ZEROED_READ_MAX), 0);
        let read = Self::try_read(socket, &mut buf[start..]);
        buf.truncate(start + read.as_ref().map_or(0, |n| *n));
        read
    }

    /// Writes what the socket takes now from `buf` (`WouldBlock` when nothing).
    fn try_write(socket: &Self::Socket, buf: &[u8]) -> io::Result<usize>;

    /// Ready when the socket may be readable (registers `cx` otherwise).
    fn poll_readable(socket: &Self::Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Ready when the socket may be writable (registers `cx` otherwise).
    fn poll_writable(socket: &Self::Socket, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// For a runtime that reads on threads of its own (the blocking one): the next chunk it
    /// read, handed over without copying — empty at EOF, `WouldBlock` when none is queued.
    /// `None` (the default): the driver reads with [`Runtime::try_read`].
    fn take_read(_socket: &Self::Socket) -> Option<io::Result<BytesMut>> {
        None
    }

    /// For a runtime that writes on threads of its own: takes all of `bytes` without copying.
    /// `None` (the default): the driver writes with [`Runtime::try_write`].
    fn hand_over(_socket: &Self::Socket, _bytes: &mut BytesMut) -> Option<io::Result<()>> {
        None
    }
}
