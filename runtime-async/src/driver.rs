//! The driver task: socket reads, connects and timers for one client, on any [`Runtime`].
//!
//! It waits (one race of futures) for the earliest of socket readiness, a wake-up from a
//! handle, a finished connect, or the core's next deadline; after every input it fires the
//! core's timers, offers the lane to the core again, drains (see [`crate::state`]) and wakes
//! the callers that wait for records or buffer space. Connects run inside the driver's race,
//! so no task or thread is started per connection. When the last handle is gone (or
//! [`crate::Client::close`] asks), it closes the producer (delivering what is buffered, up to
//! `Options::close_timeout`) and the consumer (auto-commit), closes its sockets and ends.

use crate::Runtime;
use crate::read_buffers::ReadBuffers;
use crate::state::{Conn, Shared, State, Transmit};
use bytes::{Bytes, BytesMut};
use futures_lite::future;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io::{self, ErrorKind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};
use stellflow_proto::frame::whole_frames;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{ConnId, DisconnectReason};

/// Size of a fresh read buffer (one allocation, shared by the record slices cut from it).
const READ_BUF: usize = 16 * 1024 * 1024;
/// Room a new frame starts with (a larger frame may need one copy).
const FRAME_ROOM: usize = 8 * 1024 * 1024 + 256 * 1024;
/// Most bytes read at a frame boundary (the next frame's length is not known yet).
const READ_MIN: usize = 64 * 1024;
/// Frames at least this long (and at most [`VEC_FRAME_MAX`], the protocol's default frame
/// limit: a longer one goes to the core, which refuses it) are read into a vector of their own
/// by a runtime with [`Runtime::READS_INTO_VEC`].
const VEC_FRAME_MIN: usize = 256 * 1024;
/// See [`VEC_FRAME_MIN`].
const VEC_FRAME_MAX: usize = 64 * 1024 * 1024;
/// Bytes read from one socket per wake-up before the core's outputs are drained.
const READ_BUDGET: usize = 8 * 1024 * 1024;

struct Sock<R: Runtime>(R::Socket);

impl<R: Runtime> Transmit for Sock<R> {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        R::try_write(&self.0, buf)
    }
    fn hand_over(&self, buf: &mut BytesMut) -> Option<io::Result<()>> {
        R::hand_over(&self.0, buf)
    }
    fn hand_over_shared(&self, bytes: &mut Bytes) -> Option<io::Result<()>> {
        R::hand_over_shared(&self.0, bytes)
    }
    fn set_abort_on_close(&self) -> io::Result<()> {
        R::set_abort_on_close(&self.0)
    }
}

/// A socket's reading side, the driver's own.
struct Reader<R: Runtime> {
    sock: Arc<Sock<R>>,
    /// Room the next reads land in, back to back: its capacity. It may start with room a
    /// zeroing read left unfilled (see [`Runtime::try_read_buf`]).
    buf: BytesMut,
    /// Bytes of `buf`'s allocation.
    buf_size: usize,
    /// Earlier allocations of `buf`, reused once the client dropped what was read into them.
    buffers: ReadBuffers,
    /// A large frame being read into a vector of its own, and its total length (runtimes
    /// with [`Runtime::READS_INTO_VEC`] only).
    frame: Option<(Vec<u8>, usize)>,
    /// What the core still wants of the frame it is receiving (`DriverExt::input_wanted`), less
    /// what `held` has of it.
    want: usize,
    /// Bytes of the current frame read while a handle held the lock, not yet handed to the
    /// core: the front of `buf`'s allocation, right before `buf`.
    held: BytesMut,
}

impl<R: Runtime> Reader<R> {
    /// The reading side of `sock`, with nothing read yet.
    fn new(sock: Arc<Sock<R>>) -> Self {
        Reader {
            sock,
            buf: BytesMut::new(),
            buf_size: 0,
            buffers: ReadBuffers::new(),
            frame: None,
            want: 0,
            held: BytesMut::new(),
        }
    }

    /// Replaces `buf` with room for at least `len` bytes, keeping the old allocation for
    /// reuse.
    fn renew(&mut self, len: usize) {
        let old = std::mem::replace(&mut self.buf, self.buffers.take(len));
        self.buffers.keep(old, self.buf_size);
        self.buf_size = self.buf.capacity();
    }
}

/// Whether a failure to bound a connection's unacknowledged bytes was logged.
static UNBOUNDED_LOGGED: AtomicBool = AtomicBool::new(false);

/// Logs, once per process, that the host's retransmissions could not be bounded
/// ([`Runtime::set_unacked_timeout`]): the connection works, without the bound.
fn bound_unacked(result: io::Result<()>, timeout: Duration) {
    let Err(e) = result else {
        return;
    };
    if UNBOUNDED_LOGGED.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        ?timeout,
        error = %e,
        "the host cannot bound unacknowledged bytes (TCP_USER_TIMEOUT, Linux only): a group \
         member stopped (SIGSTOP) while cut off from its coordinator may have a commit \
         retransmitted after another member took its partitions over; logged once"
    );
}

type Connecting<S> = Pin<Box<dyn Future<Output = io::Result<S>> + Send>>;

/// The driver task of one client.
pub(crate) struct Driver<R: Runtime> {
    pub shared: Arc<Shared>,
    pub wake: async_channel::Receiver<()>,
    /// Ordered by id, so the sockets are served in the same order on every run.
    socks: BTreeMap<ConnId, Reader<R>>,
    connecting: Vec<(ConnId, Connecting<R::Socket>)>,
}

/// Whether the client's handles can still send the driver messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handles {
    /// Some handle is alive: the driver listens to the channel.
    Open,
    /// Every handle is gone (the channel closed): the driver closes the client gracefully.
    Gone,
}

/// What woke the driver.
enum Wake<S> {
    /// A handle's message ([`Handles::Open`]), or the channel closed ([`Handles::Gone`]).
    Handles(Handles),
    /// A connection attempt ended.
    Connected(ConnId, io::Result<S>),
    /// A socket is ready.
    Io(ConnId, Ready),
    /// The deadline passed.
    Timer,
}

/// What a ready socket is ready for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ready {
    /// Bytes to read (or its end).
    Read,
    /// Room for the bytes pending for it.
    Write,
}

impl<R: Runtime> Driver<R> {
    /// A driver for the state behind `shared`, woken through `wake`.
    pub fn new(shared: Arc<Shared>, wake: async_channel::Receiver<()>) -> Self {
        let (socks, connecting) = (BTreeMap::new(), Vec::new());
        Driver {
            shared,
            wake,
            socks,
            connecting,
        }
    }

    /// Runs until the client is closed or every handle is gone and the graceful close ended.
    pub async fn run(mut self) {
        let mut handles = Handles::Open;
        let mut closing: Option<Instant> = None;
        loop {
            // 1. Under the lock: let the core act on the time, send what it has, start the
            //    connections it asks for and see what to wait on; the run ends here once the
            //    graceful close is over.
            let Some((deadline, writes)) = self.plan(handles, &mut closing) else {
                return;
            };
            // 2. Outside the lock: wait for the first of a handle's message, a socket ready,
            //    a connection made, or the deadline.
            let woke = self.wait(handles, deadline, writes).await;
            // 3. Take what woke the driver in.
            self.on_wake(woke, &mut handles);
        }
    }

    /// One planning pass under the lock: what to wait for (the deadline, the connections
    /// with bytes to write), or `None` once the client is closed and shut down.
    fn plan(
        &mut self,
        handles: Handles,
        closing: &mut Option<Instant>,
    ) -> Option<(Instant, Vec<ConnId>)> {
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let now = R::now();
        if st.core_deadline.is_some_and(|t| t <= now) {
            st.client.handle_timeout(now);
        }
        st.retry_parked(now);
        st.drain(now);
        if (handles == Handles::Gone || st.stop) && st.lane_empty() {
            let end = *closing.get_or_insert(now + st.options.close_timeout);
            if st.closing(now) || now >= end {
                st.client.close(now);
                st.drain(now);
                st.shut_down();
                return None;
            }
            st.drain(now);
        }
        st.wake_waiters();
        for req in std::mem::take(&mut st.connects) {
            let limit = st.options.connect_timeout;
            let (connect, bound) = (R::connect(req.address, limit), req.unacked_timeout);
            self.connecting.push((
                req.conn,
                Box::pin(async move {
                    let socket = connect.await?;
                    if let Some(timeout) = bound {
                        bound_unacked(R::set_unacked_timeout(&socket, timeout), timeout);
                    }
                    Ok(socket)
                }),
            ));
        }
        self.socks.retain(|id, _| st.conns.contains_key(id));
        let writes: Vec<ConnId> = (st.conns.iter())
            .filter_map(|(id, c)| (!c.pending.is_empty()).then_some(*id))
            .collect();
        let deadline = [st.deadline(), *closing].into_iter().flatten().min();
        let deadline = deadline.unwrap_or_else(|| now + Duration::from_secs(3600));
        st.sleeping_until = Some(deadline);
        st.replan = false;
        Some((deadline, writes))
    }

    /// Waits for the first of a handle's message (while `handles` is open), a socket ready
    /// (to write, for those in `writes`), a connection attempt ended, or `deadline`.
    async fn wait(
        &mut self,
        handles: Handles,
        deadline: Instant,
        writes: Vec<ConnId>,
    ) -> Wake<R::Socket> {
        let (wake, socks, connecting) = (&self.wake, &self.socks, &mut self.connecting);
        let handles = async move {
            match handles {
                Handles::Open => Wake::Handles(match wake.recv().await {
                    Ok(()) => Handles::Open,
                    Err(_) => Handles::Gone,
                }),
                Handles::Gone => future::pending().await,
            }
        };
        let connected = future::poll_fn(|cx| {
            for i in 0..connecting.len() {
                if let Poll::Ready(r) = connecting[i].1.as_mut().poll(cx) {
                    return Poll::Ready(Wake::Connected(connecting.swap_remove(i).0, r));
                }
            }
            Poll::Pending
        });
        let io = async move {
            let (id, ready) = io_ready::<R>(socks, &writes).await;
            Wake::Io(id, ready)
        };
        let timer = async move {
            R::sleep_until(deadline).await;
            Wake::Timer
        };
        future::race(future::race(handles, io), future::or(connected, timer)).await
    }

    /// Takes in what woke the driver; a handles' channel closed sets `handles` to gone.
    fn on_wake(&mut self, woke: Wake<R::Socket>, handles: &mut Handles) {
        let now = R::now();
        match woke {
            Wake::Handles(h) => *handles = h,
            Wake::Connected(id, Ok(stream)) => {
                let sock = Arc::new(Sock::<R>(stream));
                self.socks.insert(id, Reader::new(sock.clone()));
                let mut st = self.shared.lock();
                st.conns.insert(
                    id,
                    Conn {
                        sock,
                        pending: VecDeque::new(),
                    },
                );
                st.client.handle_connected(id, now);
            }
            Wake::Connected(id, Err(e)) => {
                let reason = DisconnectReason::connect_failed(&e);
                self.shared
                    .lock()
                    .client
                    .handle_disconnected(id, now, reason);
            }
            Wake::Timer => {}
            Wake::Io(id, Ready::Write) => self.shared.lock().write_pending(id, now),
            Wake::Io(id, Ready::Read) => self.read(id, now),
        }
    }

    /// Reads what the socket has (outside the lock) and hands each read to the core without
    /// copying: reads land back to back in one buffer, so the core joins a frame split across
    /// reads in place. Reads stop at the end of the frame the core is receiving; a new frame
    /// starts only with [`FRAME_ROOM`] bytes of room, so a frame up to that size never
    /// straddles two buffers and is never copied. On a runtime with
    /// [`Runtime::READS_INTO_VEC`] (whose buffer reads zero their room first), a large frame
    /// that begins at a read's frame boundary is read on into a vector of its own instead,
    /// without zeroing, and handed over whole (its first bytes, at most [`READ_MIN`], copied).
    /// Inside a frame, a read that finds the client's lock taken (a handle is polling) keeps
    /// its bytes and reads on; they go to the core, joined, once the lock is free, the frame
    /// ends or the socket is empty, so a busy handle never stops the socket being drained.
    fn read(&mut self, id: ConnId, now: Instant) {
        let Some(r) = self.socks.get_mut(&id) else {
            return;
        };
        let shared = &*self.shared;
        let mut budget = READ_BUDGET;
        let gone = loop {
            // 1. One read, by the first of three ways that applies: bytes the runtime read
            //    for us already; else the large frame being read into its own vector; else
            //    a read into the connection's buffer.
            let step = r
                .take_ready(shared, id, now)
                .or_else(|| r.read_frame_vec(shared, id, now))
                .unwrap_or_else(|| r.read_into_buf(shared, id, now));
            // 2. Read on until the socket is empty, it ends, or the pass's byte budget is
            //    spent (so one busy connection does not starve the others).
            match step {
                ReadStep::Read(n) => {
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        break None;
                    }
                }
                ReadStep::Stop(gone) => break gone,
                ReadStep::Dropped => return,
            }
        };
        // 3. Bytes held while the lock was busy go to the core now, and a socket that ended
        //    ends its connection.
        if r.held.is_empty() && gone.is_none() {
            return;
        }
        let mut st = self.shared.lock();
        if !r.held.is_empty() && st.conns.contains_key(&id) {
            r.want = hand_in(&mut st, id, now, &mut r.held);
        }
        if let Some(reason) = gone {
            st.lost(id, now, reason);
        }
    }
}

/// What one read of [`Driver::read`] came to.
enum ReadStep {
    /// This many bytes were read (handed to the core, or held): read on.
    Read(usize),
    /// Stop reading: the socket is empty (`None`) or it ended (why).
    Stop(Option<DisconnectReason>),
    /// The core dropped the connection meanwhile: nothing more to do.
    Dropped,
}

impl ReadStep {
    /// The step for a failed read: an empty socket, or the end of the connection.
    fn failed(e: &io::Error) -> Self {
        match e.kind() {
            ErrorKind::WouldBlock => ReadStep::Stop(None),
            _ => ReadStep::Stop(Some(DisconnectReason::io(e))),
        }
    }
}

impl<R: Runtime> Reader<R> {
    /// Bytes the runtime read for us already (a completion-based runtime), handed to the
    /// core; `None` when it holds none.
    fn take_ready(&mut self, shared: &Shared, id: ConnId, now: Instant) -> Option<ReadStep> {
        Some(match R::take_read(&self.sock.0)? {
            Ok(chunk) if chunk.is_empty() => ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
            Ok(mut chunk) => {
                let n = chunk.len();
                let mut st = shared.lock();
                if !st.conns.contains_key(&id) {
                    return Some(ReadStep::Dropped);
                }
                hand_in(&mut st, id, now, &mut chunk);
                ReadStep::Read(n)
            }
            Err(e) => ReadStep::failed(&e),
        })
    }

    /// A read on into the large frame's own vector, handed to the core whole once complete;
    /// `None` when no such frame is being read.
    fn read_frame_vec(&mut self, shared: &Shared, id: ConnId, now: Instant) -> Option<ReadStep> {
        let (vec, total) = self.frame.as_mut()?;
        Some(
            match R::try_read_vec(&self.sock.0, vec, *total - vec.len()) {
                Ok(0) => ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
                Ok(n) => {
                    if let Some((vec, _)) = self.frame.take_if(|(v, t)| v.len() == *t) {
                        let mut chunk = self.buffers.frame(vec);
                        let mut st = shared.lock();
                        if !st.conns.contains_key(&id) {
                            return Some(ReadStep::Dropped);
                        }
                        self.want = hand_in(&mut st, id, now, &mut chunk);
                    }
                    ReadStep::Read(n)
                }
                Err(e) => ReadStep::failed(&e),
            },
        )
    }

    /// A read into the connection's buffer, up to the end of the frame the core is
    /// receiving (or [`READ_MIN`] at a frame boundary); a large frame that begins in it goes
    /// on into a vector of its own, and mid-frame bytes are held while the lock is busy.
    fn read_into_buf(&mut self, shared: &Shared, id: ConnId, now: Instant) -> ReadStep {
        let at_boundary = self.want == 0;
        let limit = match self.want {
            0 if self.buf.capacity() < FRAME_ROOM => {
                // Not zeroed: the runtime reads into the spare room (or zeroes only what
                // one read may fill, right before it).
                self.renew(READ_BUF);
                READ_MIN
            }
            0 => READ_MIN,
            want if self.buf.capacity() < want => {
                self.renew(READ_BUF.max(want));
                want
            }
            want => want,
        };
        let room = limit.min(self.buf.capacity());
        let n = match R::try_read_buf(&self.sock.0, &mut self.buf, room) {
            Ok(0) => return ReadStep::Stop(Some(DisconnectReason::PeerClosed)),
            Ok(n) => n,
            Err(e) => return ReadStep::failed(&e),
        };
        // The bytes read are the front of `buf`; zeroed room may follow them.
        let mut chunk = self.buf.split_to(n);
        if R::READS_INTO_VEC && at_boundary {
            // A large frame that only begins here is read on into a vector of its own (no
            // zeroing); the whole frames before it go to the core.
            let (whole, partial) = whole_frames(&chunk);
            if let Some(total) = partial.filter(|t| (VEC_FRAME_MIN..=VEC_FRAME_MAX).contains(t)) {
                let head = chunk.split_off(whole);
                let mut vec = self.buffers.take_vec(total);
                vec.extend_from_slice(&head);
                self.frame = Some((vec, total));
            }
        }
        // Mid-frame, a busy lock (a handle decoding records) does not stop the reading: the
        // bytes are held, joined in place, until the lock is free.
        let mid_frame = self.frame.is_none() && n < self.want;
        let st = if mid_frame {
            shared.try_lock()
        } else {
            Some(shared.lock())
        };
        self.held.unsplit(chunk);
        let Some(mut st) = st else {
            self.want -= n;
            return ReadStep::Read(n);
        };
        if !st.conns.contains_key(&id) {
            return ReadStep::Dropped;
        }
        self.want = hand_in(&mut st, id, now, &mut self.held);
        ReadStep::Read(n)
    }
}

/// Hands `bytes` (all of them) to the core; what it then wants of its current frame. At a
/// frame's end the callers waiting for records are woken at once, not after the rest of the
/// read pass (which may go on for [`READ_BUDGET`] bytes).
fn hand_in(st: &mut State, id: ConnId, now: Instant, bytes: &mut BytesMut) -> usize {
    let mut chunk = std::mem::take(bytes);
    st.client.handle_input(id, now, &mut chunk);
    let want = st.client.input_wanted(id);
    if want == 0 {
        st.wake_waiters();
    }
    want
}

impl<R: Runtime> Drop for Driver<R> {
    /// The driver ended or its runtime dropped it: nothing will answer any more (records
    /// still on their way are reported by [`crate::state::State::shut_down`]).
    fn drop(&mut self) {
        self.shared.lock().shut_down();
    }
}

/// The first connection that is writable (with bytes waiting) or readable.
async fn io_ready<R: Runtime>(
    socks: &BTreeMap<ConnId, Reader<R>>,
    writes: &[ConnId],
) -> (ConnId, Ready) {
    future::poll_fn(|cx| {
        for (id, s) in socks {
            if writes.contains(id) && R::poll_writable(&s.sock.0, cx).is_ready() {
                return Poll::Ready((*id, Ready::Write));
            }
            if R::poll_readable(&s.sock.0, cx).is_ready() {
                return Poll::Ready((*id, Ready::Read));
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{Fake, WakeCount, socket};
    use crate::state::Link;
    use crate::{ClientConfig, Options};
    use std::task::Context;
    use std::time::Duration;

    /// A driver of the fake runtime with one connection the core opened (its first request
    /// sent), and that connection's id.
    fn connected() -> (Driver<Fake>, ConnId) {
        let config = ClientConfig::new("127.0.0.1:9").unwrap();
        let (link, wake) = Link::new::<Fake>(config, Options::default()).unwrap();
        let mut driver = Driver::<Fake>::new(link.shared.clone(), wake);
        let now = Instant::now();
        let mut st = link.shared.lock();
        st.client.handle_timeout(now);
        st.drain(now);
        let id = st.connects.pop().expect("a bootstrap connect").conn;
        let sock = Arc::new(Sock::<Fake>(socket(0, 64 * 1024, false)));
        st.conns.insert(
            id,
            Conn {
                sock: sock.clone(),
                pending: VecDeque::new(),
            },
        );
        st.client.handle_connected(id, now);
        st.drain(now);
        drop(st);
        driver.socks.insert(id, Reader::new(sock));
        (driver, id)
    }

    /// A frame of `len` bytes arrives in pieces while a handle holds the client's lock: the
    /// driver drains the socket anyway, hands nothing over until the lock is free, then hands
    /// over every byte it read, once, and the core wants exactly the rest of the frame. A
    /// caller waiting for records is woken when the frame ends, by the read itself.
    #[test]
    fn reads_on_while_the_lock_is_taken_and_hands_every_byte_over_after() {
        let (mut driver, id) = connected();
        let flag = Arc::new(WakeCount::default());
        let waker = std::task::Waker::from(flag.clone());
        driver.shared.lock().wait(&Context::from_waker(&waker));
        let shared = driver.shared.clone();
        let sock = driver.socks[&id].sock.clone();
        let len = 2 * 1024 * 1024;
        let feed = |bytes: usize| {
            let mut s = sock.0.lock().unwrap();
            let from = s.data.len();
            let frame = (len as u32)
                .to_be_bytes()
                .into_iter()
                .chain(std::iter::repeat(7));
            let new: Vec<u8> = frame.skip(from).take(bytes).collect();
            s.data.extend_from_slice(&new);
        };
        let received = || shared.lock().client.counters().bytes_received;
        let base = received();
        // 100 KiB with the lock free: handed over as read.
        feed(100 * 1024);
        driver.read(id, Instant::now());
        assert_eq!(received() - base, 100 * 1024);
        assert_eq!(shared.lock().client.input_wanted(id), len + 4 - 100 * 1024);
        // 600 KiB more while a handle holds the lock.
        let guard = shared.lock();
        feed(600 * 1024);
        let reading = std::thread::spawn(move || {
            driver.read(id, Instant::now());
            driver
        });
        let end = Instant::now() + Duration::from_secs(20);
        while sock.0.lock().unwrap().at < 700 * 1024 {
            assert!(
                Instant::now() < end,
                "the driver stopped reading at the lock"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(guard.client.counters().bytes_received - base, 100 * 1024);
        drop(guard);
        let mut driver = reading.join().unwrap();
        assert_eq!(
            received() - base,
            700 * 1024,
            "every byte read, handed over once"
        );
        assert_eq!(shared.lock().client.input_wanted(id), len + 4 - 700 * 1024);
        assert!(driver.socks[&id].held.is_empty());
        assert_eq!(flag.get(), 0, "woken inside a frame");
        // The rest of the frame, the lock free again.
        feed(len + 4 - 700 * 1024);
        driver.read(id, Instant::now());
        assert_eq!(received() - base, len as u64 + 4);
        assert_eq!(shared.lock().client.input_wanted(id), 0);
        assert_eq!(flag.get(), 1, "not woken at the frame's end");
    }
}
