//! The shared suite and the stream on stellflow-smol under smol's executor.

use std::time::Duration;
use stellflow_smol as sf;

macro_rules! aw {
    ($e:expr) => {
        $e.await
    };
}
macro_rules! delivered {
    ($e:expr) => {
        $e.await
    };
}

use smol::block_on;

async fn sleep(d: Duration) {
    smol::Timer::after(d).await;
}

mod cases;
#[path = "cases/stream.rs"]
mod stream;
