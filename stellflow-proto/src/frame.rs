//! Length-prefixed frames: an incremental decoder and an encoder (PROTOCOL.md §1.2).
