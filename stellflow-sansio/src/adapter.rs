//! What the runtime adapters (`stellflow-blocking`, `stellflow-tokio`, `stellflow-smol`) share
//! on top of the core: the one [`AdapterError`] their handles return (each re-exports it as
//! `Error`), the [`IdMap`] they keep their waiting callers in, the [`EventLog`] behind their
//! `Consumer::events`, and [`start_client`].
//!
//! Nothing here does I/O or reads a clock: like the rest of the core, it is given the time.

use crate::admin::UnexpectedResponse;
use crate::{
    AdminError, Client, ClientConfig, ConfigError, ConsumerError, ConsumerEvent, DeliveryError,
    ProduceError, RequestError,
};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The error every call of a runtime adapter returns (re-exported there as `Error`). Each
/// variant says what the caller can do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// The configuration cannot work: fix the named setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The record was refused at once (bad topic or partition, too large, closed); nothing was
    /// queued.
    #[error(transparent)]
    Produce(#[from] ProduceError),
    /// The record was queued but not delivered.
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    /// An admin command failed ([`AdminError::is_retriable`] says whether to try again).
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A consumer command or commit failed.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// A raw request failed ([`RequestError::is_retriable`] says whether to retry).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// No buffer space within the adapter's `Options::max_block`: the broker is slow or
    /// unreachable. Retry later, or raise `producer.buffer_memory` or `max_block`.
    #[error("producer buffer stayed full for {0:?} (max_block); the broker is slow or unreachable")]
    BufferFull(Duration),
    /// The client's driver has stopped (its last handle was dropped, the client was closed or
    /// its runtime shut down): connect a new client.
    #[error("the client driver has stopped; connect a new client")]
    Shutdown,
    /// No outcome within the time the caller allowed; the operation may still complete.
    #[error("no outcome within {0:?}")]
    Timeout(Duration),
    /// The driver thread of the blocking adapter could not be started (the OS refused a
    /// thread): free resources and connect again.
    #[error("cannot start the driver thread: {0}")]
    Spawn(String),
    /// The core answered with a result of another kind (a bug: please report it).
    #[error("unexpected answer from the core: {0}")]
    Unexpected(String),
}

impl From<UnexpectedResponse> for AdapterError {
    fn from(e: UnexpectedResponse) -> Self {
        AdapterError::Unexpected(e.to_string())
    }
}

/// A map keyed by the core's sequential ids ([`crate::ProduceId`], [`crate::RequestId`], …)
/// with [`IdHasher`]: a multiplicative hash is enough for them (SipHash would cost more than
/// the rest of a record's bookkeeping). Make one with `IdMap::default()`.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`]: one multiplication per `u64`. Not for keys an attacker chooses.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The consumer events an adapter keeps for its `Consumer::events` call: the newest
/// [`EventLog::CAP`], the oldest dropped first, so a caller that never asks costs bounded memory.
#[derive(Debug, Default)]
pub struct EventLog(VecDeque<ConsumerEvent>);

impl EventLog {
    /// How many events are kept.
    pub const CAP: usize = 1024;

    /// Keeps `event`, dropping the oldest one when [`EventLog::CAP`] are kept already.
    pub fn push(&mut self, event: ConsumerEvent) {
        if self.0.len() == Self::CAP {
            self.0.pop_front();
            tracing::debug!("oldest consumer event dropped: nobody reads Consumer::events");
        }
        self.0.push_back(event);
    }

    /// Every kept event, oldest first; the log is empty afterwards.
    pub fn take(&mut self) -> Vec<ConsumerEvent> {
        self.0.drain(..).collect()
    }
}

/// Creates the core for a driver: [`Client::new`], then [`Client::set_wall_clock`] with
/// `wall`, the wall-clock time at `now` (the caller reads both clocks; the core reads none).
pub fn start_client(
    config: ClientConfig,
    now: Instant,
    wall: SystemTime,
    seed: u64,
) -> Result<Client, ConfigError> {
    let mut client = Client::new(config, now, seed)?;
    if let Ok(d) = wall.duration_since(UNIX_EPOCH) {
        client.set_wall_clock(now, i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    }
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AdminResponse;

    #[test]
    fn id_map_and_unexpected_answer() {
        let mut m: IdMap<u64, u32> = IdMap::default();
        m.insert(7, 1);
        assert_eq!(m.get(&7), Some(&1));
        let mut log = EventLog::default();
        for _ in 0..EventLog::CAP + 1 {
            log.push(ConsumerEvent::Closed);
        }
        assert_eq!(log.take().len(), EventLog::CAP);
        assert!(log.take().is_empty());
        let e: AdapterError = AdminResponse::Offsets(Vec::new())
            .into_cluster()
            .unwrap_err()
            .into();
        assert!(matches!(e, AdapterError::Unexpected(_)));
        assert!(e.to_string().contains("Offsets"), "{e}");
    }
}
