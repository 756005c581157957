//! [`Error`]: what every adapter call returns, each variant saying what the caller can do.

use std::time::Duration;
use stellflow_sansio::{
    AdminError, ConfigError, ConsumerError, DeliveryError, ProduceError, RequestError,
};

/// Everything that can go wrong in an adapter call (each adapter crate re-exports it as
/// `Error`). [`Error::is_retriable`] says whether the same call may succeed later.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
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
    /// An admin command failed.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A consumer command or commit failed.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// A raw request failed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// No buffer space within `producer.max_block`: the broker is slow or unreachable. Retry
    /// later, or raise `producer.buffer_memory` or `producer.max_block`.
    #[error("producer buffer stayed full for {0:?} (max_block); the broker is slow or unreachable")]
    BufferFull(Duration),
    /// A close ended with this many records not delivered (`Options::close_timeout` passed or
    /// the broker refused them); each one's delivery carries its own reason.
    #[error("closed with {0} records not delivered; their deliveries say why")]
    Undelivered(u64),
    /// The client's driver has stopped (the client was closed, its last handle dropped, or
    /// its runtime shut down): connect a new client.
    #[error("the client driver has stopped; connect a new client")]
    Shutdown,
    /// The driver could not be started (no runtime to spawn it on, or the OS refused a
    /// thread): call `connect` inside a runtime, or free resources and connect again.
    #[error("cannot start the client driver: {0}")]
    Spawn(String),
}

impl Error {
    /// Whether the same call may succeed if tried again later (the broker was unreachable,
    /// slow, or not the leader). Wrapped core errors are classified by the core: a delivery by
    /// [`DeliveryError::is_retriable`], which is false when the record may have been written
    /// ([`DeliveryError::outcome_unknown`]: sending it again may write it twice; check the log
    /// first).
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Admin(e) => e.is_retriable(),
            Error::Request(e) => e.is_retriable(),
            Error::Consumer(e) => e.is_retriable(),
            Error::Delivery(e) => e.is_retriable(),
            Error::Produce(ProduceError::BufferFull { .. }) | Error::BufferFull(_) => true,
            _ => false,
        }
    }
}

/// A result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The adapter asks the core's one rule: a record that may have been written is not
    /// retriable, even when the request that carried it timed out (decision 3).
    #[test]
    fn a_delivery_is_classified_by_the_core() {
        let timed_out = RequestError::Timeout {
            api_key: stellflow_sansio::ApiKey::PRODUCE,
            after: Duration::from_secs(1),
        };
        let cases = [
            DeliveryError::MaybeWritten {
                last: Box::new(DeliveryError::Request(timed_out.clone())),
            },
            DeliveryError::NotReplicated {
                offset: 1,
                index: 0,
            },
            DeliveryError::Request(timed_out),
            DeliveryError::Timeout {
                after: Duration::from_secs(1),
                last: None,
            },
            DeliveryError::Closed,
        ];
        let got: Vec<bool> = cases
            .iter()
            .map(|e| Error::Delivery(e.clone()).is_retriable())
            .collect();
        let core: Vec<bool> = cases.iter().map(DeliveryError::is_retriable).collect();
        assert_eq!(got, core);
        assert_eq!(got, [false, false, false, true, false]);
    }
}
