//! The [`Runtime`] trait: the few things the driver cannot do without a runtime.

use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::io;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use stellflow_sansio::BrokerAddress;

/// The first read of the default [`Runtime::try_read_buf`]: it zeroes this much room, and
/// twice as much for each following read that came back full.
const ZEROED_READ_FIRST: usize = 64 * 1024;
/// The most room the default [`Runtime::try_read_buf`] zeroes for one read.
const ZEROED_READ_MAX: usize = 2 * 1024 * 1024;

/// The error a [`Runtime::connect`] returns when `address`'s host name did not resolve, so
/// that the failure reads as a name that does not resolve, not as a refused connection
/// (every runtime's connect uses it).
pub fn unresolved(address: &BrokerAddress, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("the host {:?} did not resolve ({e})", address.host),
    )
}

/// What a runtime provides to the driver: a place to run, TCP connects, non-blocking socket
/// I/O with readiness, a timer, and the client's view of time and chance (its clock, the wall
/// clock that stamps records, the seed drawn when [`crate::Options::seed`] is unset).
/// Implemented by a marker type in each adapter crate (`stellflow_tokio::Tokio`,
/// `stellflow_smol::Smol`, `stellflow_blocking::Blocking`); nothing about Stellflow belongs
/// here.
///
/// Everything the client reads from its surroundings comes through this trait, so a runtime
/// whose clock and network are simulated (tokio inside a turmoil world, `stellflow-turmoil`)
/// runs the client deterministically: the driver, the handles and the core never call
/// `Instant::now`, `SystemTime::now` or the OS's randomness themselves.
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

    /// Completes at `deadline` (an instant of [`Runtime::now`]'s clock).
    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send;

    /// The client's clock: every `now` the core, the driver and the handles see, and the
    /// clock [`Runtime::sleep_until`] sleeps on. Default `Instant::now()`.
    fn now() -> Instant {
        Instant::now()
    }

    /// The wall clock (time since the Unix epoch) the core stamps records with, read once
    /// when a client starts (the core moves it on with [`Runtime::now`]). Default
    /// `SystemTime::now()`.
    fn since_epoch() -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }

    /// The seed of the core's random choices (backoff jitter, partitioner, the default
    /// `client_id`) when [`crate::Options::seed`] is unset. Default: drawn from the OS's
    /// randomness, so two clients started in the same instant never share one.
    fn seed() -> u64 {
        os_seed()
    }

    /// Reads what the socket has now into `buf` (`WouldBlock` when nothing; `Ok(0)` at EOF).
    fn try_read(socket: &Self::Socket, buf: &mut [u8]) -> io::Result<usize>;

    /// Reads what the socket has now, at most `limit` bytes (`buf`'s capacity is at least
    /// that), into the front of `buf`; returns how many, like [`Runtime::try_read`]. The
    /// caller splits them off the front (`split_to`). `buf` may hold room an earlier call
    /// zeroed and did not fill (its length): the default reads into that first, then zeroes
    /// new room and calls [`Runtime::try_read`] — 64 KiB first, twice as much (up to 2 MiB)
    /// after each read that filled its room — until the socket has no more or `limit` is
    /// read. So every byte of a buffer is zeroed once, however little each read returns
    /// (zeroing the whole room before every small read would cost more than the read). A
    /// runtime that can read into uninitialised room without `unsafe` of ours (tokio's
    /// `try_read_buf`) overrides it, skips zeroing, and is always given an empty `buf` to
    /// append to.
    fn try_read_buf(socket: &Self::Socket, buf: &mut BytesMut, limit: usize) -> io::Result<usize> {
        let mut total = 0;
        let mut room = ZEROED_READ_FIRST;
        loop {
            let want = room.min(limit - total);
            if buf.len() < total + want {
                buf.resize(total + want, 0);
            }
            let read = Self::try_read(socket, &mut buf[total..total + want]);
            let n = *read.as_ref().unwrap_or(&0);
            total += n;
            match read {
                // What came before is handed over; an error or EOF shows at the next call.
                Err(_) | Ok(0) if total > 0 => return Ok(total),
                Err(e) => return Err(e),
                Ok(n) if n < want || total == limit => return Ok(total),
                Ok(_) => room = (room * 2).min(ZEROED_READ_MAX),
            }
        }
    }

    /// Whether [`Runtime::try_read_vec`] reads without zeroing. When it does, the driver reads
    /// each large response frame straight into a vector of the frame's size instead of into
    /// its zeroed buffer. Default false.
    const READS_INTO_VEC: bool = false;

    /// Reads what the socket has now, at most `limit` bytes, appending them to `vec` (which
    /// has room for them) without zeroing its spare room; returns how many, like
    /// [`Runtime::try_read`]. Called only when [`Runtime::READS_INTO_VEC`] is true, so a
    /// runtime that sets it implements this (smol: `std::io::Read::read_to_end` on the std
    /// socket); the default fails with [`io::ErrorKind::Unsupported`].
    fn try_read_vec(
        _socket: &Self::Socket,
        _vec: &mut Vec<u8>,
        _limit: usize,
    ) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Writes what the socket takes now from `buf` (`WouldBlock` when nothing).
    fn try_write(socket: &Self::Socket, buf: &[u8]) -> io::Result<usize>;

    /// Makes the socket's close a reset: `SO_LINGER` set to zero, so that when the driver
    /// drops it the host sends an RST and discards the bytes the broker has not received
    /// instead of delivering them later (the core's `CloseMode::Abort`). Bytes the runtime
    /// itself still queues for the socket must be discarded too.
    fn set_abort_on_close(socket: &Self::Socket) -> io::Result<()>;

    /// Bounds how long the host may keep bytes written on the connected socket
    /// unacknowledged before it gives the connection up by itself (Linux, Android, Fuchsia:
    /// `TCP_USER_TIMEOUT`, e.g. socket2's `SockRef::set_tcp_user_timeout`), even while the
    /// process is stopped; the socket then fails (`ETIMEDOUT`). The core asks for it on the
    /// connections of a group member (`ConnectRequest::unacked_timeout`), so that a commit
    /// written while cut off from the coordinator is delivered within the lease margin or
    /// never. [`io::ErrorKind::Unsupported`] on a system without the option: the driver then
    /// logs once and goes on without the bound.
    fn set_unacked_timeout(socket: &Self::Socket, timeout: Duration) -> io::Result<()>;

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

    /// For a runtime that writes on threads of its own: takes all of `bytes` (the core's
    /// request bytes, or a record blob it keeps for a retry) without copying, leaving it
    /// empty. `None` (the default): the driver writes with [`Runtime::try_write`].
    fn hand_over(_socket: &Self::Socket, _bytes: &mut Bytes) -> Option<io::Result<()>> {
        None
    }
}

/// A seed from the OS's randomness (std's hasher keys are drawn from it), so two clients
/// made in the same instant never share one (nor the default `client_id` derived from it):
/// the default [`Runtime::seed`], for a runtime that draws from the OS only outside a
/// simulation.
pub fn os_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::{Runtime, ZEROED_READ_FIRST};
    use crate::fake::{Fake, Held, socket};
    use bytes::BytesMut;
    use std::io::{self, ErrorKind};
    use std::sync::{Arc, Mutex};

    /// One call as the driver makes it: the bytes read, split off the front of `buf`.
    fn read(s: &Arc<Mutex<Held>>, buf: &mut BytesMut, limit: usize) -> io::Result<BytesMut> {
        Fake::try_read_buf(s, buf, limit).map(|n| buf.split_to(n))
    }

    #[test]
    fn the_default_read_takes_what_the_socket_holds_in_growing_rooms_up_to_the_limit() {
        // 5 MB waiting: one call reads it all, in rooms of 64 KiB, 128, 256, 512 KiB, 1 MiB,
        // 2 MiB and 2 MiB (the last one not filled: the socket is empty).
        let s = socket(5_000_000, usize::MAX, false);
        let mut buf = BytesMut::with_capacity(8 << 20);
        let got = read(&s, &mut buf, 8 << 20).unwrap();
        assert_eq!(&got[..], &s.lock().unwrap().data[..]);
        assert_eq!(s.lock().unwrap().reads, 7);
        assert_eq!(
            read(&s, &mut buf, 1 << 20).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        // The limit holds even when the socket has more.
        let s = socket(5_000_000, 1 << 20, false);
        let mut buf = BytesMut::with_capacity(1 << 20);
        assert_eq!(read(&s, &mut buf, 100_000).unwrap().len(), 100_000);
        // A read that does not fill its room ends the call: the socket had no more.
        let s = socket(3_000_000, 100_000, false);
        let mut buf = BytesMut::with_capacity(4 << 20);
        assert_eq!(read(&s, &mut buf, 4 << 20).unwrap().len(), 65_536 + 100_000);
        let s = socket(1000, 1 << 20, false);
        let mut buf = BytesMut::with_capacity(1 << 20);
        assert_eq!(read(&s, &mut buf, 1 << 20).unwrap().len(), 1000);
        assert_eq!(s.lock().unwrap().reads, 1);
    }

    #[test]
    fn room_zeroed_and_left_unfilled_is_read_into_by_the_next_call() {
        // 1000 bytes arrive at a time: the first call zeroes 64 KiB and fills 1000 of it;
        // each later call reads into what is left and zeroes only as much new room as the
        // bytes it took, so the zeroed room ahead stays at 64 KiB - 1000.
        let s = socket(10_000, 1000, false);
        let mut buf = BytesMut::with_capacity(1 << 20);
        let mut all = Vec::new();
        for _ in 0..10 {
            all.extend_from_slice(&read(&s, &mut buf, 1 << 20).unwrap());
            assert_eq!(buf.len(), ZEROED_READ_FIRST - 1000);
        }
        assert_eq!(all, s.lock().unwrap().data);
    }

    #[test]
    fn eof_after_data_hands_the_data_over_first() {
        let s = socket(200_000, 1 << 20, true);
        let mut buf = BytesMut::with_capacity(1 << 20);
        assert_eq!(read(&s, &mut buf, 1 << 20).unwrap().len(), 200_000);
        assert_eq!(read(&s, &mut buf, 1 << 20).unwrap().len(), 0);
    }
}
