//! Request and response headers (PROTOCOL.md §2).
