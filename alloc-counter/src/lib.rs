//! A counting global allocator for the tests and benchmarks that prove a hot path allocates
//! nothing per record (stellflow-proto `tests/alloc.rs`, stellflow-sansio `tests/alloc.rs` and
//! `benches/producer.rs`), and for the test that bounds the bytes a read path copies
//! (stellflow-sansio `tests/read_copy.rs`).
//!
//! Counts are **per thread**: [`allocations_during`] counts only what the calling thread
//! allocates while `f` runs, so the test harness's own threads (its reporter, other tests)
//! cannot make a figure flaky. Install it in the test or bench binary:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;
//!
//! let n = alloc_counter::allocations_during(|| {
//!     let v: Vec<u8> = Vec::with_capacity(16);
//!     std::hint::black_box(v);
//! });
//! assert_eq!(n, 1);
//! ```
//!
//! `unsafe` is needed by `GlobalAlloc`; every method only forwards to [`System`] and bumps a
//! thread-local counter (a `const`-initialised `Cell`, which never allocates or registers a
//! destructor, so it is safe to touch from inside the allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: during thread teardown the slot may be gone; such allocations are not counted.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    let _ = BYTES.try_with(|c| c.set(c.get().wrapping_add(bytes)));
}

/// The counting allocator: `System`, plus a per-thread count of allocations (`alloc`,
/// `alloc_zeroed` and `realloc` each count one; `dealloc` counts nothing) and of the bytes they
/// asked for (a `realloc` counts its whole new size).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the only
// other work is a thread-local counter increment, which does not allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations made so far by the calling thread (0 unless [`Counting`] is the global
/// allocator).
pub fn allocations() -> usize {
    ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

/// Bytes requested so far by the calling thread's allocations (0 unless [`Counting`] is the
/// global allocator); wraps around on overflow, so subtract two readings with `wrapping_sub`.
pub fn bytes_allocated() -> usize {
    BYTES.try_with(Cell::get).unwrap_or(0)
}

/// How many allocations the calling thread makes while `f` runs.
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let before = allocations();
    f();
    allocations() - before
}

/// Runs `f`, adds the calling thread's allocations meanwhile to `total`, and returns `f`'s
/// result.
pub fn counted<T>(total: &mut usize, f: impl FnOnce() -> T) -> T {
    let before = allocations();
    let r = f();
    *total += allocations() - before;
    r
}
