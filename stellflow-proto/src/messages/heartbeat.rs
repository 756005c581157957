//! Heartbeat (key 8): keep a group membership alive (PROTOCOL.md §3.11).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// Heartbeat request.
    pub struct HeartbeatRequest {
        /// Group id.
        pub group_id: NString,
        /// Generation the member believes is current.
        pub generation_id: i32,
        /// Member id from JoinGroup.
        pub member_id: NString,
    }
}

crate::wire_struct! {
    /// Heartbeat response (the error is mirrored in the header).
    pub struct HeartbeatResponse {
        /// 0, 1 (not a member) or 19 (generation moved / expired).
        pub error_code: ErrorCode,
    }
}
