//! Request and response bodies of all 20 APIs (PROTOCOL.md §3).
