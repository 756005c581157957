//! The shared suite on stellflow-blocking: the same cases, every call blocking (`aw!` adds no
//! `.await`; a `Delivery` is waited for with `wait`).

use std::time::Duration;
use stellflow_blocking as sf;

macro_rules! aw {
    ($e:expr) => {
        $e
    };
}
macro_rules! delivered {
    ($e:expr) => {
        $e.wait()
    };
}

/// Runs a case: its body never awaits anything that is not ready at once.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    futures_lite::future::block_on(f)
}

fn sleep(d: Duration) {
    std::thread::sleep(d);
}

mod cases;
