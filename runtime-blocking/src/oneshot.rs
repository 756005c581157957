//! [`Pending`] and its [`Reply`]: a one-shot slot, one allocation per outcome (cheaper than a
//! channel on the per-record path).

use crate::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

struct State<T> {
    value: Option<Result<T>>,
    /// The reply was dropped without a value (the driver stopped).
    dropped: bool,
    /// Someone waits on the condvar (so a send must notify).
    waiting: bool,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The driver's side: fills the [`Pending`] once. Dropping it unfilled fails the waiter with
/// [`Error::Shutdown`].
pub(crate) struct Reply<T>(Option<Arc<Slot<T>>>);

impl<T> Reply<T> {
    /// Delivers the outcome.
    pub fn send(mut self, value: Result<T>) {
        if let Some(slot) = self.0.take() {
            let mut s = slot.lock();
            s.value = Some(value);
            if s.waiting {
                slot.ready.notify_all();
            }
        }
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            let mut s = slot.lock();
            s.dropped = true;
            if s.waiting {
                slot.ready.notify_all();
            }
        }
    }
}

/// An outcome that has not arrived yet (the blocking counterpart of a future): from
/// [`crate::Producer::enqueue`] and [`crate::Consumer::commit_async`]. Dropping it does not
/// cancel anything.
pub struct Pending<T>(Arc<Slot<T>>);

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

/// A reply and the [`Pending`] that waits on it.
pub(crate) fn pending<T>() -> (Reply<T>, Pending<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            value: None,
            dropped: false,
            waiting: false,
        }),
        ready: Condvar::new(),
    });
    (Reply(Some(slot.clone())), Pending(slot))
}

impl<T> Pending<T> {
    /// Blocks until the outcome arrives.
    pub fn wait(self) -> Result<T> {
        self.wait_until(None).unwrap_or(Err(Error::Shutdown))
    }

    /// Blocks up to `timeout`; `None` when the outcome has not arrived by then.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<T>> {
        self.wait_until(Some(Instant::now() + timeout))
    }

    /// The outcome if it has arrived, without blocking (it is handed out once; later calls
    /// return `Some(Err(Error::Shutdown))`).
    pub fn try_wait(&self) -> Option<Result<T>> {
        let mut s = self.0.lock();
        match s.value.take() {
            Some(v) => {
                s.dropped = true;
                Some(v)
            }
            None if s.dropped => Some(Err(Error::Shutdown)),
            None => None,
        }
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Option<Result<T>> {
        let mut s = self.0.lock();
        loop {
            if let Some(v) = s.value.take() {
                s.dropped = true;
                return Some(v);
            }
            if s.dropped {
                return Some(Err(Error::Shutdown));
            }
            s.waiting = true;
            s = match deadline {
                None => self.0.ready.wait(s).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.checked_duration_since(Instant::now())?;
                    let r = self.0.ready.wait_timeout(s, left);
                    r.unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
    }
}
