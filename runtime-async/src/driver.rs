//! The state a client's handles and its driver share, and the driver task.
//!
//! The core and everything waiting on it live behind one mutex ([`Shared`]). A handle runs its
//! command under the lock on its own task — a record is copied into its batch, and consumed
//! records are decoded, by the caller — then drains the core's outputs as the driver does
//! ([`State::settle`]) and wakes the driver only when it must re-plan (a connect to open, bytes
//! the socket did not take, a deadline earlier than the one it sleeps on). The driver task does
//! the rest: it reads the sockets, finishes connects, fires the core's timers, and after every
//! pass wakes the tasks that wait for records or buffer space.

use crate::Runtime;
use crate::producer::Record;
use crate::{Error, Options};
use async_channel as chan;
use bytes::{Buf, BytesMut};
use futures_lite::future;
use std::collections::{HashMap, VecDeque};
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use stellflow_sansio::adapter::{EventLog, IdMap, start_client};
use stellflow_sansio::{
    AdminError, AdminResponse, Client, ClientConfig, CommitId, ConnId, ConnectRequest,
    ConsumerEvent, ConsumerRecord, DisconnectReason, Event, FlushId, Position, ProduceError,
    ProduceId, RecordMetadata, RequestId, TopicPartition,
};

/// A one-shot answer to a handle (a channel of capacity one).
pub(crate) type Reply<T> = chan::Sender<T>;

/// Sends a one-shot answer; gives the value back when the receiver is gone.
pub(crate) fn answer<T>(tx: &Reply<T>, value: T) -> Result<(), T> {
    tx.try_send(value).map_err(|e| e.into_inner())
}

/// A one-shot channel.
pub(crate) fn oneshot<T>() -> (Reply<T>, chan::Receiver<T>) {
    chan::bounded(1)
}
/// A command parked behind records in the producer's lane.
pub(crate) type Job = Box<dyn FnOnce(&mut State, Instant) + Send>;
/// Committed positions.
pub(crate) type Committed = Vec<(TopicPartition, Position)>;
/// Where a record's outcome goes: a one-shot slot, one allocation per record.
pub(crate) type DeliveryTx = futures_channel::oneshot::Sender<Result<RecordMetadata, Error>>;

/// What waits in the producer's lane while the core's buffer is full: records, and the
/// commands that must stay behind them (flush, close).
enum Parked {
    Record(Pending),
    Job(Job),
}

/// A record on its way into the core.
pub(crate) struct Pending {
    pub record: Record,
    pub deadline: Instant,
    pub reply: DeliveryTx,
}

/// Records that may wait in the lane for buffer space (beyond it, `enqueue` waits).
const LANE: usize = 1024;
/// Size of a fresh read buffer (one allocation, shared by the record slices cut from it).
const READ_BUF: usize = 16 * 1024 * 1024;
/// Room a new frame starts with (a larger frame may need one copy).
const FRAME_ROOM: usize = 8 * 1024 * 1024 + 256 * 1024;
/// Most bytes read at a frame boundary (the next frame's length is not known yet).
const READ_MIN: usize = 64 * 1024;
/// Bytes read from one socket per wake-up before the core's outputs are drained.
const READ_BUDGET: usize = 8 * 1024 * 1024;

/// A socket's writing side as the shared state sees it (the runtime's type erased).
trait Transmit: Send + Sync {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
}

struct Sock<R: Runtime>(R::Socket);

impl<R: Runtime> Transmit for Sock<R> {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        R::try_write(&self.0, buf)
    }
}

/// A socket's reading side, the driver's own.
struct Reader<R: Runtime> {
    sock: Arc<Sock<R>>,
    /// Zeroed room the next reads land in, back to back.
    buf: BytesMut,
    /// What the core still wants of the frame it is receiving ([`Client::input_wanted`]).
    want: usize,
}

struct Conn {
    sock: Arc<dyn Transmit>,
    /// Bytes the socket did not take yet (only under backpressure).
    pending: BytesMut,
}

/// Everything behind the lock.
pub(crate) struct State {
    pub client: Client,
    pub options: Arc<Options>,
    pub admin: HashMap<RequestId, Reply<Result<AdminResponse, AdminError>>>,
    pub deliveries: IdMap<ProduceId, DeliveryTx>,
    pub flushes: HashMap<FlushId, Reply<()>>,
    pub commits: HashMap<CommitId, Reply<Result<Committed, Error>>>,
    pub producer_closed: (bool, Vec<Reply<()>>),
    pub consumer_closed: (bool, Vec<Reply<()>>),
    pub events: EventLog,
    /// The lane: records that found the buffer full and what must stay behind them.
    parked: VecDeque<Parked>,
    parked_records: usize,
    /// Tasks waiting for records, lane room or shutdown; woken after every driver pass.
    waiters: Vec<Waker>,
    conns: HashMap<ConnId, Conn>,
    out: BytesMut,
    /// Connects the driver must start.
    connects: Vec<ConnectRequest>,
    /// Something changed that the driver must see (connects, closes, unwritten bytes).
    replan: bool,
    /// The deadline the driver sleeps on.
    sleeping_until: Option<Instant>,
    /// The driver has stopped: every command fails with [`Error::Shutdown`].
    closed: bool,
}

impl State {
    /// Hands a record to the core, or parks it in the lane behind the others; gives it back
    /// when the lane is full.
    pub fn enqueue(&mut self, now: Instant, p: Pending) -> Option<Pending> {
        if self.parked.is_empty() {
            match p.record.with_borrowed(|rec| self.client.produce(now, rec)) {
                Ok(id) => drop(self.deliveries.insert(id, p.reply)),
                Err(ProduceError::BufferFull { .. }) => return self.park(p),
                Err(e) => drop(p.reply.send(Err(e.into()))),
            }
            return None;
        }
        self.park(p)
    }

    fn park(&mut self, p: Pending) -> Option<Pending> {
        if self.parked_records >= LANE {
            return Some(p);
        }
        self.parked_records += 1;
        self.parked.push_back(Parked::Record(p));
        self.replan = true; // the driver wakes at its deadline
        None
    }

    /// Runs `job` now, or behind the records waiting in the lane.
    pub fn in_lane(
        &mut self,
        now: Instant,
        job: impl FnOnce(&mut State, Instant) + Send + 'static,
    ) {
        match self.parked.is_empty() {
            true => job(self, now),
            false => self.parked.push_back(Parked::Job(Box::new(job))),
        }
    }

    /// Offers the lane to the core again, in order; fails the records whose time is up.
    fn retry_parked(&mut self, now: Instant) {
        while let Some(front) = self.parked.pop_front() {
            let p = match front {
                Parked::Job(job) => {
                    job(self, now);
                    continue;
                }
                Parked::Record(p) => p,
            };
            let outcome = match p.record.with_borrowed(|rec| self.client.produce(now, rec)) {
                Err(ProduceError::BufferFull { .. }) if now < p.deadline => {
                    self.parked.push_front(Parked::Record(p));
                    return;
                }
                Err(ProduceError::BufferFull { .. }) => {
                    Err(Error::BufferFull(self.options.max_block))
                }
                Err(e) => Err(e.into()),
                Ok(id) => Ok(id),
            };
            self.parked_records -= 1;
            match outcome {
                Ok(id) => drop(self.deliveries.insert(id, p.reply)),
                Err(e) => drop(p.reply.send(Err(e))),
            }
        }
    }

    /// Takes up to `max` records the core has ready.
    pub fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(r) = self.client.poll_record() else {
                break;
            };
            if out.is_empty() {
                out.reserve(max.min(16 * 1024));
            }
            out.push(r);
        }
        out
    }

    /// Wakes `cx` after the driver's next pass.
    pub fn wait(&mut self, cx: &Context<'_>) {
        if !self.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            self.waiters.push(cx.waker().clone());
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Admin { id, result } => {
                if let Some(tx) = self.admin.remove(&id) {
                    let _ = answer(&tx, result);
                }
            }
            Event::Produced { id, result } => {
                if let Some(tx) = self.deliveries.remove(&id) {
                    let _ = tx.send(result.map_err(Error::from));
                }
            }
            Event::Flushed { id } => {
                if let Some(tx) = self.flushes.remove(&id) {
                    let _ = answer(&tx, ());
                }
            }
            Event::ProducerClosed { .. } => {
                self.producer_closed.0 = true;
                self.producer_closed.1.drain(..).for_each(|tx| {
                    let _ = answer(&tx, ());
                });
            }
            Event::Consumer(ConsumerEvent::CommitCompleted { id, result, kind }) => {
                match self.commits.remove(&id) {
                    Some(tx) => drop(answer(&tx, result.map_err(Error::from))),
                    None => self
                        .events
                        .push(ConsumerEvent::CommitCompleted { id, result, kind }),
                }
            }
            Event::Consumer(ConsumerEvent::Closed) => {
                self.consumer_closed.0 = true;
                self.consumer_closed.1.drain(..).for_each(|tx| {
                    let _ = answer(&tx, ());
                });
            }
            Event::Consumer(e) => self.events.push(e),
            _ => {}
        }
    }

    /// The drain rule: take every output of the core until a whole pass yields nothing.
    fn drain(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            while let Some(req) = self.client.poll_connect() {
                (progress, self.replan) = (true, true);
                self.connects.push(req);
            }
            while let Some(id) = self.client.poll_close() {
                (progress, self.replan) = (true, true);
                self.conns.remove(&id);
            }
            progress |= self.transmit(now);
            while let Some(e) = self.client.poll_event() {
                progress = true;
                self.on_event(e);
            }
            if !progress {
                return;
            }
        }
    }

    /// Drains after a handle's command; whether the driver must wake to re-plan.
    fn settle(&mut self, now: Instant) -> bool {
        self.drain(now);
        let deadline = self.deadline();
        let earlier = deadline.is_some_and(|t| self.sleeping_until.is_none_or(|s| t < s));
        let wake = std::mem::take(&mut self.replan) || earlier;
        if wake {
            // The driver re-plans when it wakes; until then, later commands need not wake it.
            self.sleeping_until = deadline.or(self.sleeping_until);
        }
        wake
    }

    /// When the driver must wake even if nothing happens.
    fn deadline(&mut self) -> Option<Instant> {
        let parked = self.parked.iter().find_map(|p| match p {
            Parked::Record(p) => Some(p.deadline),
            Parked::Job(_) => None,
        });
        [self.client.poll_timeout(), parked]
            .into_iter()
            .flatten()
            .min()
    }

    /// Writes what the core has to send, straight from the reused buffer.
    fn transmit(&mut self, now: Instant) -> bool {
        let mut any = false;
        loop {
            self.out.clear();
            let Some(id) = self.client.poll_transmit(now, &mut self.out) else {
                return any;
            };
            any = true;
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if !c.pending.is_empty() {
                c.pending.extend_from_slice(&self.out);
                continue;
            }
            match write_some(&*c.sock, &mut self.out) {
                Ok(()) if self.out.is_empty() => {}
                Ok(()) => (c.pending, self.replan) = (self.out.split(), true),
                Err(e) => self.lost(id, now, DisconnectReason::Io(e.to_string())),
            }
        }
    }

    fn write_pending(&mut self, id: ConnId, now: Instant) {
        if let Some(c) = self.conns.get_mut(&id)
            && let Err(e) = write_some(&*c.sock, &mut c.pending)
        {
            self.lost(id, now, DisconnectReason::Io(e.to_string()));
        }
    }

    fn lost(&mut self, id: ConnId, now: Instant, reason: DisconnectReason) {
        if self.conns.remove(&id).is_some() {
            self.replan = true;
            self.client.handle_disconnected(id, now, reason);
        }
    }

    /// Gracefully closes what is open; true once both producer and consumer are closed.
    fn closing(&mut self, now: Instant) -> bool {
        if !self.producer_closed.0 {
            self.client.close_producer(now, self.options.close_timeout);
        }
        if !self.consumer_closed.0 {
            self.client.close_consumer(now);
        }
        self.producer_closed.0 && self.consumer_closed.0
    }

    /// Fails everything still waiting with [`Error::Shutdown`] (dropping the reply senders).
    fn shut_down(&mut self) {
        self.closed = true;
        self.admin.clear();
        self.deliveries.clear();
        self.flushes.clear();
        self.commits.clear();
        self.producer_closed.1.clear();
        self.consumer_closed.1.clear();
        self.parked.clear();
        self.conns.clear();
        self.waiters.drain(..).for_each(Waker::wake);
    }
}

/// The lock every handle and the driver share.
pub(crate) struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Connected<S> = (ConnId, io::Result<S>);

/// The driver task.
pub(crate) struct Driver<R: Runtime> {
    shared: Arc<Shared>,
    socks: HashMap<ConnId, Reader<R>>,
    wake: chan::Receiver<()>,
    connected_tx: chan::Sender<Connected<R::Socket>>,
    connected_rx: chan::Receiver<Connected<R::Socket>>,
}

/// The handles' side of a driver: cheap to clone; the driver ends when the last clone is gone.
#[derive(Clone)]
pub(crate) struct Link {
    shared: Arc<Shared>,
    /// Wakes the driver (capacity one: one pending wake-up is enough).
    wake: chan::Sender<()>,
    pub options: Arc<Options>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closed", &self.wake.is_closed())
            .finish()
    }
}

enum Wake<S> {
    Handles(bool),
    Connected(Option<Connected<S>>),
    Io(ConnId, bool),
    Timer,
}

impl Link {
    /// Creates the client and starts its driver with [`Runtime::spawn`].
    pub fn start<R: Runtime>(config: ClientConfig, options: Options) -> Result<Link, Error> {
        let now = Instant::now();
        let wall = std::time::SystemTime::now();
        let client = start_client(config, now, wall, crate::seed(&options))?;
        let options = Arc::new(options);
        let (wake_tx, wake) = chan::bounded(1);
        let (connected_tx, connected_rx) = chan::unbounded();
        let shared = Arc::new(Shared(Mutex::new(State {
            client,
            options: options.clone(),
            admin: HashMap::new(),
            deliveries: HashMap::default(),
            flushes: HashMap::new(),
            commits: HashMap::new(),
            producer_closed: (false, Vec::new()),
            consumer_closed: (false, Vec::new()),
            events: EventLog::default(),
            parked: VecDeque::new(),
            parked_records: 0,
            waiters: Vec::new(),
            conns: HashMap::new(),
            out: BytesMut::new(),
            connects: Vec::new(),
            replan: false,
            sleeping_until: None,
            closed: false,
        })));
        let driver = Driver::<R> {
            shared: shared.clone(),
            socks: HashMap::new(),
            wake,
            connected_tx,
            connected_rx,
        };
        R::spawn("stellflow-driver", driver.run()).map_err(|_| Error::Shutdown)?;
        Ok(Link {
            shared,
            wake: wake_tx,
            options,
        })
    }

    /// Runs `f` under the lock, drains, and wakes the driver when it must re-plan.
    pub fn with<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> Result<T, Error> {
        let mut st = self.shared.lock();
        if st.closed {
            return Err(Error::Shutdown);
        }
        let now = Instant::now();
        let r = f(&mut st, now);
        let wake = st.settle(now);
        drop(st);
        if wake {
            let _ = self.wake.try_send(());
        }
        Ok(r)
    }

    /// Runs `f` and waits for the answer it sends (now or later).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, Reply<T>) + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot();
        self.with(|st, now| f(st, now, tx))?;
        rx.recv().await.map_err(|_| Error::Shutdown)
    }

    /// Like [`Link::call`], behind every record sent before it.
    pub async fn call_in_lane<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, Reply<T>) + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot();
        self.with(|st, now| st.in_lane(now, move |st, now| f(st, now, tx)))?;
        rx.recv().await.map_err(|_| Error::Shutdown)
    }

    /// Runs `f` and returns its result.
    pub async fn query<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> Result<T, Error> {
        self.with(f)
    }
}

impl<R: Runtime> Driver<R> {
    async fn run(mut self) {
        let mut handles = true;
        let mut closing: Option<Instant> = None;
        loop {
            let (deadline, writes) = {
                let shared = self.shared.clone();
                let mut st = shared.lock();
                let now = Instant::now();
                if st.client.poll_timeout().is_some_and(|t| t <= now) {
                    st.client.handle_timeout(now);
                }
                st.retry_parked(now);
                st.drain(now);
                if !handles && st.parked.is_empty() {
                    let end = *closing.get_or_insert(now + st.options.close_timeout);
                    if st.closing(now) || now >= end {
                        st.client.close(now);
                        st.drain(now);
                        st.shut_down();
                        return;
                    }
                    st.drain(now);
                }
                st.waiters.drain(..).for_each(Waker::wake);
                for req in std::mem::take(&mut st.connects) {
                    self.connect(&mut st, now, req);
                }
                self.socks.retain(|id, _| st.conns.contains_key(id));
                let writes: Vec<ConnId> = (st.conns.iter())
                    .filter_map(|(id, c)| (!c.pending.is_empty()).then_some(*id))
                    .collect();
                let deadline = [st.deadline(), closing].into_iter().flatten().min();
                let deadline = deadline.unwrap_or_else(|| now + Duration::from_secs(3600));
                st.sleeping_until = Some(deadline);
                st.replan = false;
                (deadline, writes)
            };
            let woke = {
                let (wake, socks) = (&self.wake, &self.socks);
                let handles = async move {
                    match handles {
                        true => Wake::Handles(wake.recv().await.is_ok()),
                        false => future::pending().await,
                    }
                };
                let connected = async { Wake::Connected(self.connected_rx.recv().await.ok()) };
                let io = async move {
                    let (id, write) = io_ready::<R>(socks, &writes).await;
                    Wake::Io(id, write)
                };
                let timer = async move {
                    R::sleep_until(deadline).await;
                    Wake::Timer
                };
                future::race(future::race(handles, io), future::or(connected, timer)).await
            };
            let now = Instant::now();
            match woke {
                Wake::Handles(open) => handles = open,
                Wake::Connected(Some((id, Ok(stream)))) => {
                    let sock = Arc::new(Sock::<R>(stream));
                    let (buf, want) = (BytesMut::new(), 0);
                    let reader = Reader {
                        sock: sock.clone(),
                        buf,
                        want,
                    };
                    self.socks.insert(id, reader);
                    let mut st = self.shared.lock();
                    let pending = BytesMut::new();
                    st.conns.insert(id, Conn { sock, pending });
                    st.client.handle_connected(id, now);
                }
                Wake::Connected(Some((id, Err(e)))) => {
                    let reason = DisconnectReason::ConnectFailed(e.to_string());
                    self.shared
                        .lock()
                        .client
                        .handle_disconnected(id, now, reason);
                }
                Wake::Connected(None) | Wake::Timer => {}
                Wake::Io(id, true) => self.shared.lock().write_pending(id, now),
                Wake::Io(id, false) => self.read(id, now),
            }
        }
    }

    fn connect(&self, st: &mut State, now: Instant, req: ConnectRequest) {
        let (tx, limit) = (self.connected_tx.clone(), st.options.connect_timeout);
        let (conn, connect) = (req.conn, R::connect(req.address, limit));
        let task = async move { drop(tx.try_send((conn, connect.await))) };
        if let Err(e) = R::spawn("stellflow-connect", task) {
            let reason = DisconnectReason::ConnectFailed(e.to_string());
            st.client.handle_disconnected(req.conn, now, reason);
        }
    }

    /// Reads what the socket has (outside the lock) and hands each read to the core without
    /// copying: reads land back to back in one buffer, so the core joins a frame split across
    /// reads in place. Reads stop at the end of the frame the core is receiving
    /// ([`Client::input_wanted`]); a new frame starts only with [`FRAME_ROOM`] bytes of room, so
    /// a frame up to that size never straddles two buffers and is never copied.
    fn read(&mut self, id: ConnId, now: Instant) {
        let Some(r) = self.socks.get_mut(&id) else {
            return;
        };
        let mut budget = READ_BUDGET;
        let gone = loop {
            let limit = match r.want {
                0 if r.buf.len() < FRAME_ROOM => {
                    // calloc'd: fresh pages need no zeroing pass, and untouched ones cost nothing.
                    r.buf = BytesMut::zeroed(READ_BUF);
                    READ_MIN
                }
                0 => READ_MIN,
                want if r.buf.len() < want => {
                    r.buf = BytesMut::zeroed(READ_BUF.max(want));
                    want
                }
                want => want,
            };
            let room = limit.min(r.buf.len());
            match R::try_read(&r.sock.0, &mut r.buf[..room]) {
                Ok(0) => break Some(DisconnectReason::PeerClosed),
                Ok(n) => {
                    let mut chunk = r.buf.split_to(n);
                    let mut st = self.shared.lock();
                    if !st.conns.contains_key(&id) {
                        return;
                    }
                    st.client.handle_input(id, now, &mut chunk);
                    r.want = st.client.input_wanted(id);
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        break None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break None,
                Err(e) => break Some(DisconnectReason::Io(e.to_string())),
            }
        };
        if let Some(reason) = gone {
            self.shared.lock().lost(id, now, reason);
        }
    }
}

impl<R: Runtime> Drop for Driver<R> {
    /// The driver ended or its runtime dropped it: nothing will answer any more.
    fn drop(&mut self) {
        self.shared.lock().shut_down();
    }
}

/// Writes as much of `buf` as the socket takes now.
fn write_some(sock: &dyn Transmit, buf: &mut BytesMut) -> io::Result<()> {
    while !buf.is_empty() {
        match sock.try_write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first connection that is writable (with bytes waiting) or readable.
async fn io_ready<R: Runtime>(
    socks: &HashMap<ConnId, Reader<R>>,
    writes: &[ConnId],
) -> (ConnId, bool) {
    future::poll_fn(|cx| {
        for (id, s) in socks {
            if writes.contains(id) && R::poll_writable(&s.sock.0, cx).is_ready() {
                return Poll::Ready((*id, true));
            }
            if R::poll_readable(&s.sock.0, cx).is_ready() {
                return Poll::Ready((*id, false));
            }
        }
        Poll::Pending
    })
    .await
}
