//! The wire layer the cases speak: API keys, request bodies, strict response parsers and record
//! data, for the v0 layouts of PROTOCOL.md §3 and §4.
//!
//! Built on the typed messages of `stellflow-proto`; record data and deliberately malformed input
//! are built from the wire primitives. Parsers are strict: every response body must be consumed
//! exactly, with no bytes left over, and they return plain structs the cases compare as a whole.

mod records;
mod requests;
mod responses;

pub use records::*;
pub use requests::*;
pub use responses::*;

// API keys (PROTOCOL.md §2).
pub const API_VERSIONS: i16 = 0;
pub const METADATA: i16 = 1;
pub const PRODUCE: i16 = 2;
pub const FETCH: i16 = 3;
pub const LIST_OFFSETS: i16 = 4;
pub const OFFSET_COMMIT: i16 = 5;
pub const OFFSET_FETCH: i16 = 6;
pub const FIND_COORDINATOR: i16 = 7;
pub const HEARTBEAT: i16 = 8;
pub const JOIN_GROUP: i16 = 9;
pub const SYNC_GROUP: i16 = 10;
pub const INIT_PRODUCER_ID: i16 = 11;
pub const BEGIN_TRANSACTION: i16 = 12;
pub const END_TRANSACTION: i16 = 13;
pub const CREATE_TOPIC: i16 = 50;
pub const DELETE_TOPIC: i16 = 51;
pub const ALTER_PARTITION: i16 = 52;
pub const DESCRIBE_CLUSTER: i16 = 53;
pub const HEALTH_CHECK: i16 = 54;
pub const DECOMMISSION_BROKER: i16 = 55;
