//! The shared suite and the stream on stellflow-smol under async-std's executor: async-std
//! users are served by stellflow-smol without it depending on the discontinued runtime
//! (async-std is a dev-dependency of this test crate only).

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

use async_std::task::block_on;

async fn sleep(d: Duration) {
    async_std::task::sleep(d).await;
}

mod cases;
#[path = "cases/stream.rs"]
mod stream;
