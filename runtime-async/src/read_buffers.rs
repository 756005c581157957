//! Large read buffers, reused once the client has dropped every byte read into them.
//!
//! The core keeps each response frame's bytes alive for as long as anything in it is: a
//! consumer's fetched blobs wait in its buffer (64 MiB by default) until they are polled. So a
//! reader that takes a fresh allocation for each large answer makes the allocator hand out
//! new memory all the time, and the kernel faults in and zeroes every page of every answer:
//! a large share of the client's CPU when consuming large records. [`ReadBuffers`] keeps an
//! empty handle on each large allocation it gave out; once the handle is the allocation's only
//! owner, the allocation is handed out again.
//!
//! Private to both crates that use it: `stellflow-blocking`'s `src/read_buffers.rs` is a
//! symbolic link to this file (packaging copies it), so that the type is not part of either
//! crate's published API.

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

/// Allocations smaller than this are not kept: the allocator serves them well.
const MIN_KEPT: usize = 64 * 1024;
/// Most allocations kept, and most bytes they may add up to: enough to cover what a consumer
/// holds by default (64 MiB buffered or asked for) in 8–16 MiB reads. An idle connection
/// keeps at most this much for its next answers.
const MAX_KEPT: usize = 12;
/// See `MAX_KEPT`.
const MAX_KEPT_BYTES: usize = 96 * 1024 * 1024;

/// Large read buffers of one connection, reused once nothing refers to their bytes.
///
/// For a runtime that reads frames itself (the blocking adapter's reader threads); the async
/// driver uses one per connection.
#[derive(Debug, Default)]
pub struct ReadBuffers {
    /// Handles on allocations given out earlier (each empty, sharing one allocation), oldest
    /// first, with the allocation's size.
    kept: VecDeque<(BytesMut, usize)>,
}

impl ReadBuffers {
    /// No buffers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer with room for at least `len` bytes: an allocation nothing refers to
    /// any more if a large enough one is kept, else a new one. Hand what is read into it to
    /// the client, then give the rest back with [`ReadBuffers::keep`].
    pub fn take(&mut self, len: usize) -> BytesMut {
        if len >= MIN_KEPT {
            let free = self.kept.iter_mut().position(|(handle, size)| {
                // Asking for more than the handle's own room succeeds only when it is the
                // allocation's sole owner; the handle then moves to the allocation's start.
                *size >= len && handle.try_reclaim(handle.capacity() + 1)
            });
            if let Some((buf, _)) = free.and_then(|i| self.kept.remove(i)) {
                return buf;
            }
        }
        BytesMut::with_capacity(len)
    }

    /// Keeps `rest` — what is left of a buffer from [`ReadBuffers::take`] (or of any
    /// allocation of `size` bytes) after the bytes read into it were split off — so that its
    /// allocation can be handed out again once those bytes are dropped. Drops the oldest
    /// handles beyond 12 allocations or 96 MiB.
    pub fn keep(&mut self, mut rest: BytesMut, size: usize) {
        if size < MIN_KEPT {
            return;
        }
        rest.clear();
        self.kept.push_back((rest, size));
        let mut total: usize = self.kept.iter().map(|(_, s)| s).sum();
        while self.kept.len() > MAX_KEPT || total > MAX_KEPT_BYTES {
            let Some((_, s)) = self.kept.pop_front() else {
                break;
            };
            total -= s;
        }
    }

    /// [`ReadBuffers::take`] as an empty vector, for reads that fill a vector's spare room
    /// without zeroing it (`std::io::Read::read_to_end`). No copy: the buffer is new or its
    /// allocation's only owner.
    pub fn take_vec(&mut self, len: usize) -> Vec<u8> {
        Vec::from(self.take(len))
    }

    /// A frame read into a vector from [`ReadBuffers::take_vec`], as the bytes to hand to the
    /// client (no copy); the vector's allocation is kept for reuse.
    pub fn frame(&mut self, frame: Vec<u8>) -> BytesMut {
        let size = frame.capacity();
        let mut frame = BytesMut::from(Bytes::from(frame));
        self.keep(frame.split_off(frame.len()), size);
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_KEPT, MAX_KEPT_BYTES, MIN_KEPT, ReadBuffers};
    use bytes::{Bytes, BytesMut};

    /// A read of `len` bytes into a buffer from `b`, split off as the driver hands it to the
    /// client, the rest kept: (the bytes read, where the allocation starts).
    fn read(b: &mut ReadBuffers, len: usize) -> (Bytes, *const u8) {
        let mut buf = b.take(len);
        let size = buf.capacity();
        let at = buf.as_ptr();
        buf.resize(len, 7);
        let frame = buf.split().freeze();
        b.keep(buf, size);
        (frame, at)
    }

    #[test]
    fn an_allocation_is_handed_out_again_once_every_byte_read_into_it_is_dropped() {
        let mut b = ReadBuffers::new();
        let (first, at) = read(&mut b, 1 << 20);
        // The client still holds part of the first read: a new allocation.
        let held = first.slice(10..20);
        drop(first);
        let (second, second_at) = read(&mut b, 1 << 20);
        assert_ne!(second_at, at);
        drop(second);
        // The second read is gone: its allocation again; the first one's is still held.
        let (third, third_at) = read(&mut b, 1 << 20);
        assert_eq!(third_at, second_at);
        assert_eq!(&held[..], &[7; 10][..]);
        drop((third, held));
        // Both free: the older first; a read larger than both gets a new allocation.
        let (_, fourth_at) = read(&mut b, 1 << 20);
        assert_eq!(fourth_at, at);
        let (_, big_at) = read(&mut b, 4 << 20);
        assert!(big_at != at && big_at != second_at);
    }

    #[test]
    fn small_allocations_are_not_kept_and_the_kept_ones_are_bounded() {
        let mut b = ReadBuffers::new();
        let _small = read(&mut b, MIN_KEPT - 1);
        assert_eq!(b.kept.len(), 0);
        let held: Vec<_> = (0..MAX_KEPT + 5)
            .map(|_| read(&mut b, MIN_KEPT).0)
            .collect();
        assert_eq!(b.kept.len(), MAX_KEPT);
        drop(held);
        let mut b = ReadBuffers::new();
        for _ in 0..4 {
            b.keep(BytesMut::new(), 40 << 20);
        }
        assert!(b.kept.iter().map(|(_, s)| s).sum::<usize>() <= MAX_KEPT_BYTES);
        assert_eq!(b.kept.len(), 2);
    }
}
