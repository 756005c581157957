//! SyncGroup (key 10): fetch this member's partition assignment (PROTOCOL.md §3.10).

use crate::error_code::ErrorCode;
use crate::wire::NString;

crate::wire_struct! {
    /// SyncGroup request.
    pub struct SyncGroupRequest {
        /// Group id.
        pub group_id: NString,
        /// Generation from JoinGroup.
        pub generation_id: i32,
        /// Member id from JoinGroup.
        pub member_id: NString,
    }
}

crate::wire_struct! {
    /// SyncGroup response (always carries a body, errors included).
    pub struct SyncGroupResponse {
        /// 0, 1 or 19; mirrored in the header.
        pub error_code: ErrorCode,
        /// Assigned partitions (always empty on today's server).
        pub assignments: Vec<SyncGroupAssignment>,
    }
}

crate::wire_struct! {
    /// One assigned partition.
    pub struct SyncGroupAssignment {
        /// Topic name.
        pub topic: NString,
        /// Partition id.
        pub partition: i32,
    }
}
