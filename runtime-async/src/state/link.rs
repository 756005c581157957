//! The lock around the state ([`StateLock`]) and a handle's link to it ([`Link`]): running a
//! command under the lock, draining the core after it and waking the driver when needed.

use super::{Closing, IdMap, ReplySender, State};
use crate::batch::Batches;
use crate::seq_map::SeqMap;
use crate::{Error, Options, Runtime};
use bytes::BytesMut;
use futures_channel::oneshot;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use stellflow_sansio::DriverExt;
use stellflow_sansio::{Client, ClientConfig};

/// The client's [`State`] behind the one lock that every handle and the driver share.
pub(crate) struct StateLock(Mutex<State>);

impl StateLock {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if nobody holds it now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// The handles' side of a driver: cheap to clone; the driver ends when the last clone is gone
/// (or at [`crate::Client::close`]).
#[derive(Clone)]
pub(crate) struct Link {
    pub state: Arc<StateLock>,
    /// Wakes the driver (capacity one: one pending wake-up is enough).
    pub wake: async_channel::Sender<()>,
    pub options: Arc<Options>,
    /// The runtime's clock ([`Runtime::now`]).
    pub now: fn() -> Instant,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closed", &self.state.lock().closed)
            .finish()
    }
}

impl Link {
    /// Creates the core and the state a driver and its handles share; the caller starts the
    /// driver with the returned receiver.
    pub fn new<R: Runtime>(
        config: ClientConfig,
        options: Options,
    ) -> Result<(Link, async_channel::Receiver<()>), Error> {
        let now = R::now();
        let seed = options.seed.unwrap_or_else(R::seed);
        let mut options = options;
        options.max_block = config.producer.max_block;
        options.max_poll_records = config.consumer.max_poll_records;
        let mut client = Client::new(config, now, seed)?;
        // Outcomes a batch at a time: `on_batch` finds a batch's callers run by run.
        client.set_batch_outcomes(true);
        let wall_ms = i64::try_from(R::since_epoch().as_millis()).unwrap_or(i64::MAX);
        client.set_wall_clock(now, wall_ms);
        let options = Arc::new(options);
        let (wake, wake_rx) = async_channel::bounded(1);
        let state = State {
            client,
            options: options.clone(),
            admin: IdMap::default(),
            deliveries: SeqMap::default(),
            batches: Batches::default(),
            flushes: IdMap::default(),
            commits: IdMap::default(),
            producer_closed: Closing::default(),
            consumer_closed: Closing::default(),
            ended: Vec::new(),
            stop: false,
            events: VecDeque::new(),
            dropped_events: 0,
            listening: false,
            rebalances: VecDeque::new(),
            connect_error: None,
            parked: VecDeque::new(),
            parked_records: 0,
            waiters: Vec::new(),
            room_waiters: Vec::new(),
            room_mark: 0,
            socket_work: VecDeque::new(),
            out: BytesMut::new(),
            connects: Vec::new(),
            replan: false,
            sleeping_until: None,
            core_deadline: Some(now),
            closed: false,
        };
        let state = Arc::new(StateLock(Mutex::new(state)));
        Ok((
            Link {
                state,
                wake,
                options,
                now: R::now,
            },
            wake_rx,
        ))
    }

    /// Runs `f` under the lock, drains, and wakes the driver when it must re-plan.
    pub fn with<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> Result<T, Error> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Shutdown);
        }
        let now = (self.now)();
        let r = f(&mut st, now);
        let wake = st.settle(now);
        drop(st);
        if wake {
            let _ = self.wake.try_send(());
        }
        Ok(r)
    }

    /// Reads the state under the lock (no command, nothing to drain); works after shutdown.
    pub fn get<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.lock())
    }

    /// Runs `f` and waits for the answer it sends (now or later). Dropping the future does
    /// not undo the command; its answer is then discarded.
    pub async fn call<T>(
        &self,
        f: impl FnOnce(&mut State, Instant, ReplySender<T>),
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        self.with(|st, now| f(st, now, tx))?;
        rx.await.map_err(|_| Error::Shutdown)
    }

    /// Like [`Link::call`], behind every record sent before it.
    pub async fn call_in_lane<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State, Instant, ReplySender<T>) + Send + 'static,
    ) -> Result<T, Error> {
        self.call(|st, now, tx| st.in_lane(now, move |st, now| f(st, now, tx)))
            .await
    }
}
