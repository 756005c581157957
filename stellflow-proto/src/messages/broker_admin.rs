//! DecommissionBroker (key 55): a stub on today's server (PROTOCOL.md §3.16).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// DecommissionBroker request.
    pub struct DecommissionBrokerRequest {
        /// The broker to decommission.
        pub broker_id: i32,
    }
}

crate::wire_struct! {
    /// DecommissionBroker response.
    pub struct DecommissionBrokerResponse {
        /// Always 0.
        pub error_code: ErrorCode,
        /// A human-readable message.
        pub message: NString,
    }
}
