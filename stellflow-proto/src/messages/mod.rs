//! Request and response bodies of all 20 APIs (PROTOCOL.md §3), one module per API family.
//!
//! Every body type implements [`Wire`](crate::wire::Wire) (encode/decode, trailing bytes
//! ignored, never panics) and [`Describe`](crate::wire::Describe). Field names are the
//! snake_case of the server's record components, in wire order. Request types implement
//! [`Request`], which names their API key and response type; [`RequestBody`] and
//! [`ResponseBody`] decode any body by API key.

pub mod api_versions;
mod body;
pub mod broker_admin;
pub mod cluster_status;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_fetch;
pub mod produce;
pub mod sync_group;
pub mod topic_admin;
pub mod transaction;

pub use api_versions::*;
pub use body::{EncodeBody, Request, RequestBody, ResponseBody};
pub use broker_admin::*;
pub use cluster_status::*;
pub use fetch::*;
pub use find_coordinator::*;
pub use heartbeat::*;
pub use init_producer_id::*;
pub use join_group::*;
pub use list_offsets::*;
pub use metadata::*;
pub use offset_commit::*;
pub use offset_fetch::*;
pub use produce::*;
pub use sync_group::*;
pub use topic_admin::*;
pub use transaction::*;
