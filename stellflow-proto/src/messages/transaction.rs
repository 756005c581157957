//! BeginTransaction (key 12) and EndTransaction (key 13) (PROTOCOL.md §3.13).
//!
//! The two requests differ by one byte: only EndTransaction carries `commit` (any non-zero byte
//! decodes as true). Both answer with [`TransactionResponse`].

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// BeginTransaction request (no commit byte on the wire).
    pub struct BeginTransactionRequest {
        /// Transactional id; (re)binds the producer id to it.
        pub transactional_id: NString,
        /// Producer id.
        pub producer_id: i64,
        /// Producer epoch.
        pub producer_epoch: i16,
    }
}

crate::wire_struct! {
    /// EndTransaction request.
    pub struct EndTransactionRequest {
        /// Transactional id (not examined by the server).
        pub transactional_id: NString,
        /// Producer id.
        pub producer_id: i64,
        /// Producer epoch.
        pub producer_epoch: i16,
        /// true = commit, false = abort.
        pub commit: bool,
    }
}

crate::wire_struct! {
    /// Response to BeginTransaction and EndTransaction (the error is mirrored in the header).
    pub struct TransactionResponse {
        /// Error code.
        pub error_code: ErrorCode,
        /// Echo of the request.
        pub producer_id: i64,
        /// Echo of the request.
        pub producer_epoch: i16,
        /// `"ONGOING"`, `"COMMITTED"`, `"ABORTED"` or `"FAILED"`.
        pub transaction_state: NString,
    }
}
