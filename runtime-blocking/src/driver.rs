//! The driver thread, the connection threads, and the state they share with the handles.
//!
//! The design is described in the crate docs: a reader and a writer thread per connection,
//! the core behind one mutex shared by the driver thread and the handles, one-shot slots for
//! outcomes, and the condvar [`Shared::changed`] signalled after every driver pass for callers
//! that wait for buffer space or records.

use crate::{AsRecord, Error, Options};
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use stellflow_sansio::adapter::{EventLog, IdMap};
use stellflow_sansio::{
    AdminResponse, Client, CommitId, ConnId, ConnectRequest, ConsumerEvent, DisconnectReason,
    Event, FlushId, Position, ProduceError, ProduceId, RecordMetadata, RequestId, TopicPartition,
};

/// Read chunk size; one chunk holds many small responses or a slice of a big one.
const READ_CHUNK: usize = 256 * 1024;

pub(crate) use crate::oneshot::Reply;
/// Committed positions.
pub(crate) type Committed = Vec<(TopicPartition, Position)>;

/// What the driver thread is told.
pub(crate) enum Msg {
    /// A socket connected; the stream is kept to shut it down.
    Up(ConnId, TcpStream),
    /// Bytes arrived.
    Input(ConnId, BytesMut),
    /// The socket failed or closed.
    Down(ConnId, DisconnectReason),
    /// A handle moved the core's next deadline earlier.
    Wake,
    /// The last handle is gone: close gracefully, then stop.
    Shutdown,
}

/// A record parked while the producer's buffer is full (an owned copy: the slow path only).
pub(crate) struct Waiting {
    pub record: crate::Record,
    pub size: usize,
    pub deadline: Instant,
    pub reply: Reply<RecordMetadata>,
    /// Flushes and closes called after this record was parked: they run once it has left the
    /// queue, so they cover it (see [`Inner::after_parked`]).
    pub then: Vec<Deferred>,
}

/// A producer command that must not overtake parked records.
pub(crate) enum Deferred {
    /// [`crate::Producer::flush`].
    Flush(Reply<()>),
    /// A graceful producer close ending at `deadline`; `reply` for [`crate::Producer::close`].
    Close {
        deadline: Instant,
        reply: Option<Reply<u64>>,
    },
}

struct Conn {
    writer: Sender<Bytes>,
    stream: Option<TcpStream>,
}

/// The callers waiting for an outcome, by the core's ids. Dropping a reply fails its caller
/// with [`Error::Shutdown`].
#[derive(Default)]
pub(crate) struct Replies {
    pub admin: IdMap<RequestId, Reply<AdminResponse>>,
    pub produced: IdMap<ProduceId, Reply<RecordMetadata>>,
    pub flushes: IdMap<FlushId, Reply<()>>,
    pub commits: IdMap<CommitId, Reply<Committed>>,
    pub producer_closed: Vec<Reply<u64>>,
    pub consumer_closed: Vec<Reply<()>>,
}

/// Everything behind the lock.
pub(crate) struct Inner {
    pub client: Client,
    conns: HashMap<ConnId, Conn>,
    out: BytesMut,
    tx: Sender<Msg>,
    options: Options,
    stop: Arc<AtomicBool>,
    /// The deadline the driver sleeps on (`None`: until a message).
    sleeping_until: Option<Instant>,
    pub closed: bool,
    pub replies: Replies,
    pub producer_done: bool,
    pub consumer_done: bool,
    /// [`crate::Client::close`] was called: nothing is left to deliver on drop.
    pub core_closed: bool,
    /// Records that found the producer's buffer full, oldest first, retried after every pass
    /// and failed with [`Error::BufferFull`] at their deadline (see [`crate::Producer::enqueue`]).
    pub waiting: VecDeque<Waiting>,
    /// Bytes of `waiting`, bounded by the producer's `buffer_memory`.
    pub waiting_bytes: usize,
    pub waiting_limit: usize,
    /// Set by the last handle's drop: the graceful close must end by then.
    closing: Option<Instant>,
    pub events: EventLog,
    /// The last failed connection attempt, cleared by the next successful one.
    pub connect_error: Option<String>,
}

/// The lock, the condvar and the driver's channel, shared by the driver and every handle.
pub(crate) struct Shared {
    pub inner: Mutex<Inner>,
    /// Signalled after every driver pass (deliveries freed buffer space, records arrived).
    pub changed: Condvar,
    pub tx: Sender<Msg>,
}

impl Shared {
    /// `waiting_limit`: the bytes the overflow queue may hold (the producer's buffer size).
    pub fn new(client: Client, options: Options, waiting_limit: usize, tx: Sender<Msg>) -> Self {
        let inner = Inner {
            client,
            conns: HashMap::new(),
            out: BytesMut::with_capacity(64 * 1024),
            tx: tx.clone(),
            options,
            stop: Arc::new(AtomicBool::new(false)),
            sleeping_until: None,
            closed: false,
            replies: Replies::default(),
            producer_done: false,
            consumer_done: false,
            core_closed: false,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            waiting_limit,
            closing: None,
            events: EventLog::default(),
            connect_error: None,
        };
        Shared {
            inner: Mutex::new(inner),
            changed: Condvar::new(),
            tx,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a command under the lock, then drains and wakes the driver if needed.
    pub fn command<T>(&self, f: impl FnOnce(&mut Inner, Instant) -> T) -> T {
        let mut g = self.lock();
        let now = Instant::now();
        let r = f(&mut g, now);
        let wake = g.settle(now);
        drop(g);
        if wake {
            let _ = self.tx.send(Msg::Wake);
        }
        r
    }
}

impl Inner {
    /// Drains after a command; whether the driver must wake to re-plan its sleep.
    pub fn settle(&mut self, now: Instant) -> bool {
        self.drain(now);
        let wake = match (self.deadline(), self.sleeping_until) {
            (Some(t), Some(s)) if t < s => Some(t),
            (Some(t), None) => Some(t),
            _ => None,
        };
        // The driver re-plans when it wakes; until then, later commands need not wake it again.
        self.sleeping_until = wake.or(self.sleeping_until);
        wake.is_some()
    }

    /// When the driver must wake next: the core's deadline, the oldest parked record's, or the
    /// end of a graceful close.
    fn deadline(&mut self) -> Option<Instant> {
        let parked = self.waiting.front().map(|w| w.deadline);
        [self.client.poll_timeout(), parked, self.closing]
            .into_iter()
            .flatten()
            .min()
    }

    /// Offers the parked records to the producer again, in order; fails the expired ones.
    fn retry_waiting(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(w) = self.waiting.front() {
            let outcome = match w.record.with_record(|r| self.client.produce(now, r)) {
                Err(ProduceError::BufferFull { .. }) if w.deadline > now => break,
                Err(ProduceError::BufferFull { .. }) => {
                    Err(Error::BufferFull(self.options.max_block))
                }
                r => r.map_err(Error::from),
            };
            progress = true;
            let Some(w) = self.waiting.pop_front() else {
                break;
            };
            self.waiting_bytes -= w.size;
            match outcome {
                Ok(id) => drop(self.replies.produced.insert(id, w.reply)),
                Err(e) => w.reply.send(Err(e)),
            }
            for d in w.then {
                self.run_deferred(now, d);
            }
        }
        progress
    }

    /// Runs `d` now, or — when records are parked — once the newest of them has left the
    /// queue, so a flush or close covers every record enqueued before it.
    pub fn after_parked(&mut self, now: Instant, d: Deferred) {
        match self.waiting.back_mut() {
            Some(w) => w.then.push(d),
            None => self.run_deferred(now, d),
        }
    }

    fn run_deferred(&mut self, now: Instant, d: Deferred) {
        match d {
            Deferred::Flush(reply) => {
                let id = self.client.flush(now);
                self.replies.flushes.insert(id, reply);
            }
            Deferred::Close { deadline, reply } => {
                if self.producer_done {
                    if let Some(r) = reply {
                        r.send(Ok(0));
                    }
                    return;
                }
                self.replies.producer_closed.extend(reply);
                let timeout = deadline.saturating_duration_since(now);
                self.client.close_producer(now, timeout);
            }
        }
    }

    /// The drain rule: every output until a whole pass yields nothing.
    fn drain(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            while let Some(req) = self.client.poll_connect() {
                progress = true;
                self.open(req);
            }
            while let Some(conn) = self.client.poll_close() {
                progress = true;
                self.drop_conn(conn);
            }
            while let Some(conn) = self.client.poll_transmit(now, &mut self.out) {
                progress = true;
                let bytes = self.out.split().freeze();
                if let Some(c) = self.conns.get(&conn) {
                    // A dead writer reports the failure itself.
                    let _ = c.writer.send(bytes);
                }
            }
            while let Some(event) = self.client.poll_event() {
                progress = true;
                self.dispatch(event);
            }
            if !self.waiting.is_empty() {
                progress |= self.retry_waiting(now);
            }
            if !progress {
                break;
            }
        }
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Admin { id, result } => {
                if let Some(tx) = self.replies.admin.remove(&id) {
                    tx.send(result.map_err(Error::from));
                }
            }
            Event::Produced { id, result } => {
                if let Some(tx) = self.replies.produced.remove(&id) {
                    tx.send(result.map_err(Error::from));
                }
            }
            Event::Flushed { id } => {
                if let Some(tx) = self.replies.flushes.remove(&id) {
                    tx.send(Ok(()));
                }
            }
            Event::ProducerClosed { failed } => {
                self.producer_done = true;
                for tx in self.replies.producer_closed.drain(..) {
                    tx.send(Ok(failed));
                }
            }
            Event::Connected { .. } => self.connect_error = None,
            Event::Disconnected {
                address,
                reason: DisconnectReason::ConnectFailed(e),
                ..
            } => self.connect_error = Some(format!("cannot connect to {address}: {e}")),
            Event::Consumer(e) => self.consumer_event(e),
            _ => {}
        }
    }

    fn consumer_event(&mut self, e: ConsumerEvent) {
        match &e {
            ConsumerEvent::CommitCompleted { id, result, .. } => {
                if let Some(tx) = self.replies.commits.remove(id) {
                    tx.send(result.clone().map_err(Error::from));
                }
            }
            ConsumerEvent::Closed => {
                self.consumer_done = true;
                for tx in self.replies.consumer_closed.drain(..) {
                    tx.send(Ok(()));
                }
            }
            _ => {}
        }
        self.events.push(e);
    }

    /// Starts the reader thread of a new connection (it connects, then spawns the writer).
    fn open(&mut self, req: ConnectRequest) {
        let (wtx, wrx) = std::sync::mpsc::channel();
        let (tx, opts, stop) = (self.tx.clone(), self.options.clone(), self.stop.clone());
        let address = req.address.to_string();
        let conn = req.conn;
        let spawned = std::thread::Builder::new()
            .name(format!("stellflow-conn-{}", conn.0))
            .spawn(move || run_conn(conn, &address, &tx, wrx, opts, &stop));
        if let Err(e) = spawned {
            let reason = DisconnectReason::ConnectFailed(format!("cannot spawn a thread: {e}"));
            self.client
                .handle_disconnected(conn, Instant::now(), reason);
            return;
        }
        let stream = None;
        self.conns.insert(
            conn,
            Conn {
                writer: wtx,
                stream,
            },
        );
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn)
            && let Some(s) = c.stream
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Applies one message from a connection thread.
    fn apply(&mut self, msg: Msg, now: Instant) {
        match msg {
            Msg::Up(conn, stream) => match self.conns.get_mut(&conn) {
                Some(c) => {
                    c.stream = Some(stream);
                    self.client.handle_connected(conn, now);
                }
                None => {
                    let _ = stream.shutdown(Shutdown::Both);
                }
            },
            Msg::Input(conn, mut chunk) => {
                if self.conns.contains_key(&conn) {
                    self.client.handle_input(conn, now, &mut chunk);
                }
            }
            Msg::Down(conn, reason) => {
                if self.conns.contains_key(&conn) {
                    self.drop_conn(conn);
                    self.client.handle_disconnected(conn, now, reason);
                }
            }
            Msg::Shutdown if self.core_closed => self.closing = Some(now),
            Msg::Shutdown if self.closing.is_none() => {
                // Deliver what is buffered and commit, then close (see `run_driver`).
                let deadline = now + self.options.close_timeout;
                self.closing = Some(deadline);
                let close = Deferred::Close {
                    deadline,
                    reply: None,
                };
                self.after_parked(now, close);
                if !self.consumer_done {
                    self.client.close_consumer(now);
                }
            }
            Msg::Wake | Msg::Shutdown => {}
        }
    }

    /// Closes the client, every socket, and fails every waiter with [`Error::Shutdown`].
    fn shut_down(&mut self, now: Instant) {
        self.client.close(now);
        self.drain(now);
        self.closed = true;
        self.stop.store(true, Ordering::SeqCst);
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.drop_conn(c);
        }
        // Dropping the replies fails their callers with `Error::Shutdown`.
        self.replies = Replies::default();
        self.waiting.clear();
    }
}

/// The driver thread: sleep until a message or the core's deadline, apply, drain, repeat.
pub(crate) fn run_driver(shared: Arc<Shared>, rx: Receiver<Msg>) {
    loop {
        let until = shared.lock().sleeping_until;
        let msg = match until {
            None => rx.recv().unwrap_or(Msg::Shutdown),
            Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => Msg::Wake,
                Err(RecvTimeoutError::Disconnected) => Msg::Shutdown,
            },
        };
        let mut g = shared.lock();
        let now = Instant::now();
        g.apply(msg, now);
        // Apply whatever else is queued before draining once.
        while let Ok(m) = rx.try_recv() {
            g.apply(m, now);
        }
        if g.client.poll_timeout().is_some_and(|t| t <= now) {
            g.client.handle_timeout(now);
        }
        g.drain(now);
        g.sleeping_until = g.deadline();
        if let Some(end) = g.closing
            && (now >= end || (g.producer_done && g.consumer_done))
        {
            g.shut_down(now);
            drop(g);
            shared.changed.notify_all();
            return;
        }
        drop(g);
        shared.changed.notify_all();
    }
}

fn connect(address: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = None;
    for a in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(ErrorKind::NotFound, "no address resolved")))
}

/// One connection's reader thread: connect, start the writer, then read until EOF or error.
fn run_conn(
    conn: ConnId,
    address: &str,
    tx: &Sender<Msg>,
    wrx: Receiver<Bytes>,
    opts: Options,
    stop: &AtomicBool,
) {
    let setup = connect(address, opts.connect_timeout).and_then(|s| {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(opts.read_timeout))?;
        s.set_write_timeout(Some(opts.write_timeout))?;
        Ok((s.try_clone()?, s.try_clone()?, s))
    });
    let (mut reader, writer, kept) = match setup {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Msg::Down(
                conn,
                DisconnectReason::ConnectFailed(e.to_string()),
            ));
            return;
        }
    };
    let wtx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("stellflow-write-{}", conn.0))
        .spawn(move || run_writer(conn, writer, &wrx, &wtx));
    if let Err(e) = spawned {
        let _ = tx.send(Msg::Down(conn, DisconnectReason::Io(e.to_string())));
        return;
    }
    if tx.send(Msg::Up(conn, kept)).is_err() {
        return;
    }
    // `buf`'s length is zeroed free space: reads go into it and each filled prefix is split
    // off (no copy). It is refilled once little is left, reusing the allocation when the core
    // has dropped every slice of the earlier chunks.
    let mut buf = BytesMut::new();
    let reason = loop {
        if buf.len() < READ_CHUNK / 16 {
            buf.clear();
            buf.reserve(READ_CHUNK);
            buf.resize(buf.capacity(), 0);
        }
        match reader.read(&mut buf) {
            Ok(0) => break DisconnectReason::PeerClosed,
            Ok(n) => {
                if tx.send(Msg::Input(conn, buf.split_to(n))).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break DisconnectReason::Io(e.to_string()),
        }
    };
    let _ = tx.send(Msg::Down(conn, reason));
}

/// One connection's writer thread: writes what the driver hands over, in order.
fn run_writer(conn: ConnId, mut stream: TcpStream, rx: &Receiver<Bytes>, tx: &Sender<Msg>) {
    while let Ok(bytes) = rx.recv() {
        if let Err(e) = stream.write_all(&bytes) {
            let _ = stream.shutdown(Shutdown::Both);
            let _ = tx.send(Msg::Down(conn, DisconnectReason::Io(e.to_string())));
            return;
        }
    }
}
