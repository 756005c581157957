//! The producer's memory: the bytes of records it holds, counted against `buffer_memory`,
//! and the buffers and record lists of settled batches kept for the next ones, so that the
//! produce path does not allocate.

use super::ProduceError;
use super::batch::{BATCH_OVERHEAD, Batch, BatchRecord};
use bytes::BytesMut;

/// Buffered bytes and recycled batch memory.
#[derive(Debug)]
pub(crate) struct BufferPool {
    /// Bytes of records held (waiting, in batches, in flight, being retried).
    buffered: usize,
    buffers: Vec<BytesMut>,
    record_lists: Vec<Vec<BatchRecord>>,
    /// `producer.batch_size`: a smaller buffer is not kept.
    batch_size: usize,
    /// `producer.buffer_memory`.
    buffer_memory: usize,
    /// `producer.max_request_size`.
    max_request_size: usize,
    /// How many buffers are kept at most.
    max_buffers: usize,
}

impl BufferPool {
    pub(crate) fn new(batch_size: usize, buffer_memory: usize, max_request_size: usize) -> Self {
        BufferPool {
            buffered: 0,
            buffers: Vec::new(),
            record_lists: Vec::new(),
            batch_size,
            buffer_memory,
            max_request_size,
            max_buffers: (buffer_memory / batch_size.max(1)).clamp(1, 64),
        }
    }

    /// Bytes of records held now.
    pub(crate) fn buffered(&self) -> usize {
        self.buffered
    }

    /// Refuses a record of `size` bytes that no request could carry or the buffer could
    /// never hold, or that does not fit in the buffer now.
    pub(crate) fn check(&self, size: usize) -> Result<(), ProduceError> {
        let overhead = BATCH_OVERHEAD + 512;
        let max = self.max_request_size.saturating_sub(overhead);
        if size > max {
            return Err(ProduceError::RecordTooLarge {
                size,
                max,
                setting: "producer.max_request_size",
                configured: self.max_request_size,
                overhead,
            });
        }
        if size > self.buffer_memory {
            return Err(ProduceError::RecordTooLarge {
                size,
                max: self.buffer_memory,
                setting: "producer.buffer_memory",
                configured: self.buffer_memory,
                overhead: 0,
            });
        }
        if self.buffered + size > self.buffer_memory {
            return Err(ProduceError::BufferFull {
                buffered: self.buffered,
                needed: size,
                limit: self.buffer_memory,
            });
        }
        Ok(())
    }

    /// `size` more bytes are held.
    #[inline]
    pub(crate) fn hold(&mut self, size: usize) {
        self.buffered += size;
    }

    /// `size` bytes are no longer held.
    pub(crate) fn free(&mut self, size: usize) {
        self.buffered = self.buffered.saturating_sub(size);
    }

    /// Nothing is held any more (the producer was aborted).
    pub(crate) fn clear(&mut self) {
        self.buffered = 0;
    }

    /// An empty buffer of at least `want` bytes of capacity.
    pub(crate) fn buffer(&mut self, want: usize) -> BytesMut {
        match self.buffers.pop() {
            Some(mut b) if b.capacity() >= want => {
                b.clear();
                b
            }
            _ => BytesMut::with_capacity(want),
        }
    }

    /// An empty list for a batch's records.
    pub(crate) fn record_list(&mut self) -> Vec<BatchRecord> {
        self.record_lists.pop().unwrap_or_default()
    }

    /// Takes a settled batch's memory back and frees its bytes.
    pub(crate) fn recycle(&mut self, mut batch: Batch) {
        self.free(batch.bytes);
        let mut records = std::mem::take(&mut batch.records);
        if self.record_lists.len() < 64 {
            records.clear();
            self.record_lists.push(records);
        }
        let blob = std::mem::take(&mut batch.blob);
        let buf = match batch.builder.take() {
            Some(b) => b.finish_into().ok(),
            None => blob.try_into_mut().ok(),
        };
        if let Some(buf) = buf
            && buf.capacity() >= self.batch_size
            && self.buffers.len() < self.max_buffers
        {
            self.buffers.push(buf);
        }
    }
}
