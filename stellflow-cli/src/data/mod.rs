//! The data commands, one file each: `produce`, `consume`, `offsets` and `demo`.

mod consume;
mod demo;
mod offsets;
mod produce;

pub use consume::{ConsumeArgs, consume};
pub use demo::demo;
pub use offsets::{OffsetsArgs, offsets};
pub use produce::{ProduceArgs, produce, reap};
