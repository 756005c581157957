//! InitProducerId (key 11): obtain an idempotent producer id (PROTOCOL.md §3.12).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// InitProducerId request.
    pub struct InitProducerIdRequest {
        /// Transactional id; null/blank falls back to the header's client id.
        pub transactional_id: NString,
    }
}

crate::wire_struct! {
    /// InitProducerId response.
    pub struct InitProducerIdResponse {
        /// Always 0.
        pub error_code: ErrorCode,
        /// The producer id bound to the key.
        pub producer_id: i64,
        /// Always 0.
        pub producer_epoch: i16,
    }
}
