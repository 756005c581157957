//! The scripted cases, grouped by PROTOCOL.md area. Each module exposes `cases()`.

pub mod admin;
pub mod fetch;
pub mod fresh;
pub mod groups;
pub mod list_offsets;
pub mod metadata;
pub mod produce;
pub mod producer;
pub mod registry;
pub mod transport;
