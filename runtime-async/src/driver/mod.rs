//! The driver task: the connections, connects and timers of one client, on any [`Runtime`].
//!
//! The driver alone owns each connection, whole ([`Connection`]: it opens, reads, writes and
//! closes it). It waits (one race of futures) for the earliest of socket readiness, a wake-up
//! from a handle, a finished connect, or the core's next deadline; after every input it fires
//! the core's timers, offers the lane to the core again, drains (see [`crate::state`]), does
//! the socket work the core asked for — its own drains' and the handles' ([`SocketWork`]) —
//! and wakes the callers that wait for records or buffer space. Connects run inside the driver's race,
//! so no task or thread is started per connection. When the last handle is gone (or
//! [`crate::Client::close`] asks), it closes the producer (delivering what is buffered, up to
//! `Options::close_timeout`) and the consumer (auto-commit), closes its sockets and ends.

mod connection;
mod read;
#[cfg(test)]
mod tests;

use crate::Runtime;
use crate::state::{SocketWork, State, StateLock};
use connection::Connection;
use futures_lite::future;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};
use stellflow_sansio::{CloseMode, ConnId, DisconnectReason};

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
    pub state: Arc<StateLock>,
    pub wake: async_channel::Receiver<()>,
    /// The open connections, ordered by id, so they are served in the same order on every
    /// run.
    conns: BTreeMap<ConnId, Connection<R>>,
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
    /// A driver for the state behind `state`, woken through `wake`.
    pub fn new(state: Arc<StateLock>, wake: async_channel::Receiver<()>) -> Self {
        let (conns, connecting) = (BTreeMap::new(), Vec::new());
        Driver {
            state,
            wake,
            conns,
            connecting,
        }
    }

    /// Runs until the client is closed or every handle is gone and the graceful close ended.
    pub async fn run(mut self) {
        let mut handles = Handles::Open;
        let mut closing: Option<Instant> = None;
        loop {
            // 1. Under the lock: let the core act on the time, write what it has, start the
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
        let state = self.state.clone();
        let mut st = state.lock();
        let now = R::now();
        if st.core_deadline.is_some_and(|t| t <= now) {
            st.client.handle_timeout(now);
        }
        st.retry_parked(now);
        self.drain(&mut st, now);
        if (handles == Handles::Gone || st.stop) && st.lane_empty() {
            let end = *closing.get_or_insert(now + st.options.close_timeout);
            if st.closing(now) || now >= end {
                st.client.close(now);
                self.drain(&mut st, now);
                st.shut_down();
                return None;
            }
            self.drain(&mut st, now);
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
        let writes: Vec<ConnId> = (self.conns.iter())
            .filter_map(|(id, c)| c.has_unsent().then_some(*id))
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
        let (wake, conns, connecting) = (&self.wake, &self.conns, &mut self.connecting);
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
            let (id, ready) = io_ready::<R>(conns, &writes).await;
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
            Wake::Connected(id, Ok(socket)) => {
                self.conns.insert(id, Connection::new(socket));
                self.state.lock().client.handle_connected(id, now);
            }
            Wake::Connected(id, Err(e)) => {
                let reason = DisconnectReason::connect_failed(&e);
                let mut st = self.state.lock();
                st.client.handle_disconnected(id, now, reason);
            }
            Wake::Timer => {}
            Wake::Io(id, Ready::Write) => {
                let Some(conn) = self.conns.get_mut(&id) else {
                    return;
                };
                if let Err(e) = conn.send_unsent() {
                    let state = self.state.clone();
                    self.lost(&mut state.lock(), id, now, DisconnectReason::io(&e));
                }
            }
            Wake::Io(id, Ready::Read) => self.read(id, now),
        }
    }

    /// Reads what connection `id` has and hands it to the core (see [`read::Reader`]); a
    /// connection that ended is closed.
    fn read(&mut self, id: ConnId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let (socket, state) = (&conn.socket, &*self.state);
        if let Some(reason) = conn.reader.read_all::<R>(socket, state, id, now) {
            let state = self.state.clone();
            self.lost(&mut state.lock(), id, now, reason);
        }
    }

    /// Drains the core (see [`State::drain`]) and does the socket work it asked for, the
    /// handles' drains' first, in order; a connection that fails meanwhile is closed and the
    /// core drained again.
    fn drain(&mut self, st: &mut State, now: Instant) {
        loop {
            st.drain(now);
            if st.socket_work.is_empty() {
                return;
            }
            while let Some(work) = st.socket_work.pop_front() {
                self.do_work(st, work, now);
            }
        }
    }

    /// Does one piece of socket work: writes bytes (a failed write ends the connection) or
    /// closes a connection.
    fn do_work(&mut self, st: &mut State, work: SocketWork, now: Instant) {
        match work {
            SocketWork::Write(id, bytes) => {
                let Some(conn) = self.conns.get_mut(&id) else {
                    return;
                };
                if let Err(e) = conn.send(bytes) {
                    self.lost(st, id, now, DisconnectReason::io(&e));
                }
            }
            SocketWork::Close(id, mode) => {
                let Some(conn) = self.conns.remove(&id) else {
                    return;
                };
                if mode == CloseMode::Abort
                    && let Err(e) = R::set_abort_on_close(&conn.socket)
                {
                    tracing::warn!(conn = id.0, "cannot reset the connection: {e}");
                }
            }
        }
    }

    /// Connection `id` failed or ended: it is closed and the core told why.
    fn lost(&mut self, st: &mut State, id: ConnId, now: Instant, reason: DisconnectReason) {
        if self.conns.remove(&id).is_some() {
            st.client.handle_disconnected(id, now, reason);
        }
    }
}

impl<R: Runtime> Drop for Driver<R> {
    /// The driver ended or its runtime dropped it: nothing will answer any more (records
    /// still on their way are reported by [`crate::state::State::shut_down`]).
    fn drop(&mut self) {
        self.state.lock().shut_down();
    }
}

/// The first connection that is writable (with bytes waiting) or readable.
async fn io_ready<R: Runtime>(
    conns: &BTreeMap<ConnId, Connection<R>>,
    writes: &[ConnId],
) -> (ConnId, Ready) {
    future::poll_fn(|cx| {
        for (id, c) in conns {
            if writes.contains(id) && R::poll_writable(&c.socket, cx).is_ready() {
                return Poll::Ready((*id, Ready::Write));
            }
            if R::poll_readable(&c.socket, cx).is_ready() {
                return Poll::Ready((*id, Ready::Read));
            }
        }
        Poll::Pending
    })
    .await
}
