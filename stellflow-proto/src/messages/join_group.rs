//! JoinGroup (key 9): join a consumer group and get a generation (PROTOCOL.md §3.9).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// JoinGroup request.
    pub struct JoinGroupRequest {
        /// Group id (created on first use).
        pub group_id: NString,
        /// Member id; null or blank lets the server generate one.
        pub member_id: NString,
        /// Session timeout in milliseconds.
        pub session_timeout_ms: i32,
    }
}

crate::wire_struct! {
    /// JoinGroup response.
    pub struct JoinGroupResponse {
        /// Always 0.
        pub error_code: ErrorCode,
        /// The new generation (bumped on every JoinGroup).
        pub generation_id: i32,
        /// This member's id; use it in all later calls.
        pub member_id: NString,
        /// The group leader's member id.
        pub leader_id: NString,
    }
}
