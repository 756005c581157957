//! The driver: owns the [`Client`] and its sockets, runs the drain rule, and answers the
//! handles' commands. Commands are closures run against [`State`]; outcomes that arrive later
//! (admin results, deliveries, flushes, commits, polls) wait in [`State`]'s maps.

use crate::Runtime;
use crate::producer::Record;
use crate::{Error, Options};
use async_channel as chan;
use bytes::{Buf, BytesMut};
use futures_lite::future;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, ErrorKind};
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use stellflow_sansio::{
    AdminError, AdminResponse, Client, ClientConfig, CommitId, ConnId, ConsumerError,
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
/// A command: runs on the driver with the client state and the current time.
pub(crate) type Job = Box<dyn FnOnce(&mut State, Instant) + Send>;
/// Committed positions.
pub(crate) type Committed = Vec<(TopicPartition, Position)>;

/// Producer-lane messages: records and the commands that must stay ordered after them.
pub(crate) enum LaneMsg {
    Record(Pending),
    Job(Job),
}

/// Where a record's outcome goes: a one-shot slot, one allocation per record.
pub(crate) type DeliveryTx = futures_channel::oneshot::Sender<Result<RecordMetadata, Error>>;

/// A record on its way into the core.
pub(crate) struct Pending {
    pub record: Record,
    pub deadline: Instant,
    pub reply: DeliveryTx,
}

/// A consumer poll waiting for records.
pub(crate) struct PollWaiter {
    pub max: usize,
    pub deadline: Instant,
    pub reply: Reply<Result<Vec<ConsumerRecord>, Error>>,
}

/// Notable consumer events kept for [`crate::Consumer::events`] (oldest dropped beyond this).
const EVENT_LOG: usize = 1024;
/// Size of a fresh read buffer (one allocation, shared by the record slices cut from it).
const READ_BUF: usize = 4 * 1024 * 1024;
/// Room below which the read buffer is replaced.
const READ_MIN: usize = 64 * 1024;
/// Bytes read from one socket per wake-up before the other sources get a turn.
const READ_BUDGET: usize = 8 * 1024 * 1024;
/// Records a poll's vector is sized for up front.
const POLL_PRESIZE: usize = 16 * 1024;
/// Commands taken from a channel before the next drain.
const BATCH: usize = 1024;

/// The hasher of the deliveries map: the core's ids are sequential, so a multiplication is
/// enough (SipHash would cost more than the rest of a record's bookkeeping).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes
            .iter()
            .for_each(|b| self.write_u64(self.0.rotate_left(8) ^ u64::from(*b)));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Everything the commands may touch.
pub(crate) struct State {
    pub client: Client,
    pub options: Arc<Options>,
    pub admin: HashMap<RequestId, Reply<Result<AdminResponse, AdminError>>>,
    pub deliveries: HashMap<ProduceId, DeliveryTx, BuildHasherDefault<IdHasher>>,
    pub flushes: HashMap<FlushId, Reply<()>>,
    pub commits: HashMap<CommitId, Reply<Result<Committed, Error>>>,
    pub producer_closed: (bool, Vec<Reply<()>>),
    pub consumer_closed: (bool, Vec<Reply<()>>),
    pub polls: VecDeque<PollWaiter>,
    pub events: VecDeque<ConsumerEvent>,
    stash: VecDeque<ConsumerRecord>,
    blocked: Option<Pending>,
}

impl State {
    /// Hands a record to the core; gives it back when the buffer is full and time remains.
    fn produce(&mut self, now: Instant, p: Pending) -> Option<Pending> {
        match p.record.with_borrowed(|rec| self.client.produce(now, rec)) {
            Ok(id) => {
                self.deliveries.insert(id, p.reply);
            }
            Err(ProduceError::BufferFull { .. }) if now < p.deadline => return Some(p),
            Err(ProduceError::BufferFull { .. }) => {
                let _ = p.reply.send(Err(Error::BufferFull(self.options.max_block)));
            }
            Err(e) => {
                let _ = p.reply.send(Err(e.into()));
            }
        }
        None
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
                    None => self.log(ConsumerEvent::CommitCompleted { id, result, kind }),
                }
            }
            Event::Consumer(ConsumerEvent::Closed) => {
                self.consumer_closed.0 = true;
                self.consumer_closed.1.drain(..).for_each(|tx| {
                    let _ = answer(&tx, ());
                });
            }
            Event::Consumer(e) => self.log(e),
            _ => {}
        }
    }

    fn log(&mut self, e: ConsumerEvent) {
        if self.events.len() == EVENT_LOG {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Answers waiting polls that have records or reached their deadline.
    fn serve_polls(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(w) = self.polls.front() {
            if w.reply.is_closed() {
                self.polls.pop_front();
                continue;
            }
            let mut out = Vec::with_capacity(w.max.min(POLL_PRESIZE));
            while out.len() < w.max {
                match self.stash.pop_front().or_else(|| self.client.poll_record()) {
                    Some(r) => out.push(r),
                    None => break,
                }
            }
            let closed = self.consumer_closed.0;
            if out.is_empty() && now < w.deadline && !closed {
                break;
            }
            progress = true;
            let Some(w) = self.polls.pop_front() else {
                break;
            };
            let answer = match out.is_empty() && closed {
                true => Err(Error::Consumer(ConsumerError::Closed)),
                false => Ok(out),
            };
            if let Err(Ok(back)) = crate::driver::answer(&w.reply, answer) {
                back.into_iter()
                    .rev()
                    .for_each(|r| self.stash.push_front(r));
            }
        }
        progress
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
}

struct Conn<S> {
    stream: S,
    /// Bytes the socket did not take yet (only under backpressure).
    pending: BytesMut,
}

type Connected<S> = (ConnId, io::Result<S>);

/// The driver task.
pub(crate) struct Driver<R: Runtime> {
    st: State,
    conns: HashMap<ConnId, Conn<R::Socket>>,
    out: BytesMut,
    inbuf: BytesMut,
    ctl: chan::Receiver<Job>,
    lane: chan::Receiver<LaneMsg>,
    connected_tx: chan::Sender<Connected<R::Socket>>,
    connected_rx: chan::Receiver<Connected<R::Socket>>,
    runtime: PhantomData<R>,
}

/// The handles' side of a driver: cheap to clone; the driver ends when the last clone is gone.
#[derive(Clone)]
pub(crate) struct Link {
    ctl: chan::Sender<Job>,
    pub lane: chan::Sender<LaneMsg>,
    pub options: Arc<Options>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closed", &self.ctl.is_closed())
            .finish()
    }
}

enum Wake<S> {
    Job(Option<Job>),
    Lane(Option<LaneMsg>),
    Connected(Option<Connected<S>>),
    Io(ConnId, bool),
    Timer,
}

impl Link {
    /// Creates the client and starts its driver with [`Runtime::spawn`].
    pub fn start<R: Runtime>(config: ClientConfig, options: Options) -> Result<Link, Error> {
        let now = Instant::now();
        let mut client = Client::new(config, now, crate::seed(&options))?;
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            client.set_wall_clock(now, i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        }
        let options = Arc::new(options);
        let (ctl_tx, ctl) = chan::unbounded();
        let (lane_tx, lane) = chan::bounded(BATCH);
        let (connected_tx, connected_rx) = chan::unbounded();
        let st = State {
            client,
            options: options.clone(),
            admin: HashMap::new(),
            deliveries: HashMap::default(),
            flushes: HashMap::new(),
            commits: HashMap::new(),
            producer_closed: (false, Vec::new()),
            consumer_closed: (false, Vec::new()),
            polls: VecDeque::new(),
            events: VecDeque::new(),
            stash: VecDeque::new(),
            blocked: None,
        };
        let driver = Driver::<R> {
            st,
            conns: HashMap::new(),
            out: BytesMut::new(),
            inbuf: BytesMut::new(),
            ctl,
            lane,
            connected_tx,
            connected_rx,
            runtime: PhantomData,
        };
        R::spawn("stellflow-driver", driver.run()).map_err(|_| Error::Shutdown)?;
        Ok(Link {
            ctl: ctl_tx,
            lane: lane_tx,
            options,
        })
    }

    /// Runs `f` on the driver and waits for the answer it sends.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, Reply<T>) + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot();
        let job: Job = Box::new(move |st, now| f(st, now, tx));
        self.ctl.try_send(job).map_err(|_| Error::Shutdown)?;
        rx.recv().await.map_err(|_| Error::Shutdown)
    }

    /// Like [`Link::call`], behind every record sent before it.
    pub async fn call_in_lane<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, Reply<T>) + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot();
        let job: Job = Box::new(move |st, now| f(st, now, tx));
        let sent = self.lane.send(LaneMsg::Job(job)).await;
        sent.map_err(|_| Error::Shutdown)?;
        rx.recv().await.map_err(|_| Error::Shutdown)
    }

    /// Runs `f` on the driver and returns its result.
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant) -> T + Send + 'static,
    ) -> Result<T, Error> {
        self.call(move |st, now, tx| drop(answer(&tx, f(st, now))))
            .await
    }
}

impl<R: Runtime> Driver<R> {
    async fn run(mut self) {
        let (mut ctl_open, mut lane_open) = (true, true);
        let mut closing: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if self.st.client.poll_timeout().is_some_and(|t| t <= now) {
                self.st.client.handle_timeout(now);
            }
            if let Some(p) = self.st.blocked.take() {
                self.st.blocked = self.st.produce(now, p);
            }
            self.drain(now);
            if !ctl_open && !lane_open && self.st.blocked.is_none() {
                let deadline = *closing.get_or_insert(now + self.st.options.close_timeout);
                if self.st.closing(now) || now >= deadline {
                    self.st.client.close(now);
                    self.drain(now);
                    return;
                }
                self.drain(now);
            }
            let wake = self.next_deadline(closing);
            let blocked = self.st.blocked.is_some();
            let woke = {
                let (ctl, lane, conns) = (&self.ctl, &self.lane, &self.conns);
                let job = async move {
                    match ctl_open {
                        true => Wake::Job(ctl.recv().await.ok()),
                        false => future::pending().await,
                    }
                };
                let msg = async move {
                    match lane_open && !blocked {
                        true => Wake::Lane(lane.recv().await.ok()),
                        false => future::pending().await,
                    }
                };
                let connected = async { Wake::Connected(self.connected_rx.recv().await.ok()) };
                let io = async move {
                    let (id, write) = io_ready::<R>(conns).await;
                    Wake::Io(id, write)
                };
                let timer = async move {
                    R::sleep_until(wake).await;
                    Wake::Timer
                };
                future::race(
                    future::race(job, msg),
                    future::race(io, future::or(connected, timer)),
                )
                .await
            };
            let now = Instant::now();
            match woke {
                Wake::Job(None) => ctl_open = false,
                Wake::Lane(None) => lane_open = false,
                Wake::Job(Some(job)) => {
                    job(&mut self.st, now);
                    for _ in 0..BATCH {
                        let Ok(job) = self.ctl.try_recv() else { break };
                        job(&mut self.st, now);
                    }
                }
                Wake::Lane(Some(msg)) => {
                    self.lane_msg(now, msg);
                    while self.st.blocked.is_none() {
                        let Ok(msg) = self.lane.try_recv() else { break };
                        self.lane_msg(now, msg);
                    }
                }
                Wake::Connected(Some((id, Ok(stream)))) => {
                    let pending = BytesMut::new();
                    self.conns.insert(id, Conn { stream, pending });
                    self.st.client.handle_connected(id, now);
                }
                Wake::Connected(Some((id, Err(e)))) => {
                    let reason = DisconnectReason::ConnectFailed(e.to_string());
                    self.st.client.handle_disconnected(id, now, reason);
                }
                Wake::Connected(None) | Wake::Timer => {}
                Wake::Io(id, true) => self.write_pending(id, now),
                Wake::Io(id, false) => self.read(id, now),
            }
        }
    }

    fn lane_msg(&mut self, now: Instant, msg: LaneMsg) {
        match msg {
            LaneMsg::Record(p) => self.st.blocked = self.st.produce(now, p),
            LaneMsg::Job(job) => job(&mut self.st, now),
        }
    }

    /// When the loop must wake up even if nothing happens.
    fn next_deadline(&mut self, closing: Option<Instant>) -> Instant {
        let st = &mut self.st;
        [
            st.client.poll_timeout(),
            st.blocked.as_ref().map(|p| p.deadline),
            st.polls.iter().map(|w| w.deadline).min(),
            closing,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))
    }

    /// The drain rule: take every output of the core until a whole pass yields nothing.
    fn drain(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            while let Some(req) = self.st.client.poll_connect() {
                progress = true;
                let (tx, limit) = (self.connected_tx.clone(), self.st.options.connect_timeout);
                let (conn, connect) = (req.conn, R::connect(req.address, limit));
                let task = async move { drop(tx.try_send((conn, connect.await))) };
                let spawned = R::spawn("stellflow-connect", task);
                if let Err(e) = spawned {
                    let reason = DisconnectReason::ConnectFailed(e.to_string());
                    self.st.client.handle_disconnected(req.conn, now, reason);
                }
            }
            while let Some(id) = self.st.client.poll_close() {
                progress = true;
                self.conns.remove(&id);
            }
            progress |= self.transmit(now);
            while let Some(e) = self.st.client.poll_event() {
                progress = true;
                self.st.on_event(e);
            }
            progress |= self.st.serve_polls(now);
            if !progress {
                return;
            }
        }
    }

    /// Writes what the core has to send, straight from the reused buffer.
    fn transmit(&mut self, now: Instant) -> bool {
        let mut any = false;
        loop {
            self.out.clear();
            let Some(id) = self.st.client.poll_transmit(now, &mut self.out) else {
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
            match write_some::<R>(&c.stream, &mut self.out) {
                Ok(()) if self.out.is_empty() => {}
                Ok(()) => c.pending = self.out.split(),
                Err(e) => self.lost(id, now, DisconnectReason::Io(e.to_string())),
            }
        }
    }

    fn write_pending(&mut self, id: ConnId, now: Instant) {
        if let Some(c) = self.conns.get_mut(&id)
            && let Err(e) = write_some::<R>(&c.stream, &mut c.pending)
        {
            self.lost(id, now, DisconnectReason::Io(e.to_string()));
        }
    }

    /// Reads what the socket has and hands each read to the core without copying: reads land
    /// back to back in one zeroed buffer, so the core joins a frame split across reads in
    /// place; a fresh buffer is taken only when little room is left.
    fn read(&mut self, id: ConnId, now: Instant) {
        let (mut gone, mut budget) = (None, READ_BUDGET);
        while let Some(c) = self.conns.get(&id) {
            if self.inbuf.len() < READ_MIN {
                self.inbuf.clear();
                self.inbuf.reserve(READ_BUF);
                self.inbuf.resize(self.inbuf.capacity(), 0);
            }
            match R::try_read(&c.stream, &mut self.inbuf) {
                Ok(0) => gone = Some(DisconnectReason::PeerClosed),
                Ok(n) => {
                    let mut chunk = self.inbuf.split_to(n);
                    self.st.client.handle_input(id, now, &mut chunk);
                    budget = budget.saturating_sub(n);
                    if budget > 0 {
                        continue;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => gone = Some(DisconnectReason::Io(e.to_string())),
            }
            break;
        }
        if let Some(reason) = gone {
            self.lost(id, now, reason);
        }
    }

    fn lost(&mut self, id: ConnId, now: Instant, reason: DisconnectReason) {
        if self.conns.remove(&id).is_some() {
            self.st.client.handle_disconnected(id, now, reason);
        }
    }
}

/// Writes as much of `buf` as the socket takes now.
fn write_some<R: Runtime>(stream: &R::Socket, buf: &mut BytesMut) -> io::Result<()> {
    while !buf.is_empty() {
        match R::try_write(stream, buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first connection that is writable (with bytes waiting) or readable.
async fn io_ready<R: Runtime>(conns: &HashMap<ConnId, Conn<R::Socket>>) -> (ConnId, bool) {
    future::poll_fn(|cx| {
        for (id, c) in conns {
            if !c.pending.is_empty() && R::poll_writable(&c.stream, cx).is_ready() {
                return Poll::Ready((*id, true));
            }
            if R::poll_readable(&c.stream, cx).is_ready() {
                return Poll::Ready((*id, false));
            }
        }
        Poll::Pending
    })
    .await
}
