//! FindCoordinator (key 7): which broker coordinates a group (PROTOCOL.md §3.8).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// FindCoordinator request (both fields are ignored by today's server).
    pub struct FindCoordinatorRequest {
        /// Group id.
        pub key: NString,
        /// 0 = group.
        pub key_type: i8,
    }
}

crate::wire_struct! {
    /// FindCoordinator response: every broker names itself. Connect by host and port.
    pub struct FindCoordinatorResponse {
        /// Always 0.
        pub error_code: ErrorCode,
        /// Always 0 (not a broker id; never route by it).
        pub node_id: i32,
        /// The coordinator's advertised host.
        pub host: NString,
        /// The coordinator's advertised port.
        pub port: i32,
    }
}
