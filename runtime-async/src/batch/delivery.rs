//! The future a batch send answers with ([`BatchDelivery`]).

use super::outcome::BatchOutcome;
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The outcome of one `Producer::enqueue_all`: `.await` it (async) or [`BatchDelivery::wait`]
/// (blocking) for the [`BatchOutcome`] of every record, in the order the records were given —
/// the record's [`RecordMetadata`](crate::RecordMetadata) (partition, offset and index) or the error that stopped it.
/// It completes once every record has its outcome. Dropping it does not cancel the send; the
/// outcomes are then discarded.
#[derive(Debug)]
#[must_use = "dropping a BatchDelivery discards the records' outcomes (they are still sent)"]
pub struct BatchDelivery {
    pub(crate) rx: oneshot::Receiver<BatchOutcome>,
    pub(crate) len: usize,
}

impl BatchDelivery {
    /// How many records the batch holds (the length of its outcome).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no record (its outcome is then ready at once).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks the calling thread until every record's outcome is known (for blocking code;
    /// in async code `.await` the delivery instead).
    pub fn wait(self) -> BatchOutcome {
        futures_lite::future::block_on(self)
    }

    /// The outcomes if they are all known already (without waiting); `None` while some
    /// record is on its way. After it returned them once, every record reads
    /// [`Error::Shutdown`](crate::Error::Shutdown).
    pub fn try_wait(&mut self) -> Option<BatchOutcome> {
        match self.rx.try_recv() {
            Ok(r) => r,
            Err(_) => Some(self.lost()),
        }
    }

    /// The outcome when the client stopped before answering.
    fn lost(&self) -> BatchOutcome {
        BatchOutcome::shut_down(self.len)
    }
}

impl Future for BatchDelivery {
    type Output = BatchOutcome;

    /// Cancel safety: dropping the delivery only discards the outcomes.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(outcome)) => Poll::Ready(outcome),
            Poll::Ready(Err(_)) => Poll::Ready(self.lost()),
            Poll::Pending => Poll::Pending,
        }
    }
}
