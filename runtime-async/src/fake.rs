//! A fake [`Runtime`] for unit tests: a socket is bytes in memory, read in pieces of a set
//! size, written into a sink.

use crate::Runtime;
use std::future::Future;
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use stellflow_sansio::BrokerAddress;

/// A socket holding `data`, handing out at most `per_read` bytes a read, then
/// `WouldBlock` (or EOF once `eof`); writes are taken whole and counted.
pub(crate) struct Held {
    /// Everything the peer sent so far (a test may append more).
    pub data: Vec<u8>,
    /// Bytes of `data` read.
    pub at: usize,
    pub per_read: usize,
    pub eof: bool,
    /// Read calls made.
    pub reads: usize,
    /// Bytes written.
    pub written: usize,
}

/// The fake runtime: its sockets are [`Held`].
#[derive(Debug, Clone)]
pub(crate) struct Fake;

impl Runtime for Fake {
    type Socket = Arc<Mutex<Held>>;
    fn spawn(_: &'static str, _: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        unreachable!("the default read needs no task")
    }
    #[allow(clippy::manual_async_fn)]
    fn connect(
        _: BrokerAddress,
        _: Duration,
    ) -> impl Future<Output = io::Result<Arc<Mutex<Held>>>> + Send + 'static {
        async { unreachable!("no connects") }
    }
    #[allow(clippy::manual_async_fn)]
    fn sleep_until(_: Instant) -> impl Future<Output = ()> + Send {
        async {}
    }
    fn try_read(socket: &Arc<Mutex<Held>>, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = socket.lock().unwrap();
        s.reads += 1;
        let n = buf.len().min(s.per_read).min(s.data.len() - s.at);
        if n == 0 && !buf.is_empty() && !s.eof {
            return Err(ErrorKind::WouldBlock.into());
        }
        let at = s.at;
        buf[..n].copy_from_slice(&s.data[at..at + n]);
        s.at += n;
        Ok(n)
    }
    fn try_write(socket: &Arc<Mutex<Held>>, buf: &[u8]) -> io::Result<usize> {
        socket.lock().unwrap().written += buf.len();
        Ok(buf.len())
    }
    fn set_abort_on_close(_: &Arc<Mutex<Held>>) -> io::Result<()> {
        Ok(())
    }
    fn set_unacked_timeout(_: &Arc<Mutex<Held>>, _: Duration) -> io::Result<()> {
        Ok(())
    }
    fn poll_readable(_: &Arc<Mutex<Held>>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_writable(_: &Arc<Mutex<Held>>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A socket holding `len` bytes of a repeating pattern (shared, so a test can add bytes to
/// a socket the driver owns).
pub(crate) fn socket(len: usize, per_read: usize, eof: bool) -> Arc<Mutex<Held>> {
    let data = (0..len).map(|i| (i % 251) as u8).collect();
    Arc::new(Mutex::new(Held {
        data,
        at: 0,
        per_read,
        eof,
        reads: 0,
        written: 0,
    }))
}

/// A waker that counts its wake-ups (`Waker::from(Arc::new(WakeCount::default()))`).
#[derive(Default)]
pub(crate) struct WakeCount(pub std::sync::atomic::AtomicUsize);

impl WakeCount {
    /// The wake-ups so far.
    pub fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl std::task::Wake for WakeCount {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
