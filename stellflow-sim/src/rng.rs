//! The simulation's seeded random number generator: the workspace's one generator
//! ([`stellflow_proto::rng::Rng`]).
//!
//! The simulated broker never reads OS randomness: every random choice (generated member ids,
//! reordering and fault knobs, the simulation worlds of `stellflow-dst`) comes from a [`SimRng`]
//! seeded at construction, so a run with the same seed and the same inputs produces the same
//! bytes. It is the same generator the client core uses, so the workspace has exactly one.

pub use stellflow_proto::rng::Rng as SimRng;
