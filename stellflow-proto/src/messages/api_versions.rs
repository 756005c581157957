//! ApiVersions (key 0): which API versions the broker supports (PROTOCOL.md §3.1, §6).

use crate::api_key::ApiKey;
use crate::wire::NString;

crate::wire_struct! {
    /// ApiVersions request. The server ignores every field; send an empty feature list.
    pub struct ApiVersionsRequest {
        /// Client software name (informational).
        pub client_software_name: NString,
        /// Client software version (informational).
        pub client_software_version: NString,
        /// Client feature strings (ignored by the server).
        pub supported_features: Vec<NString>,
    }
}

crate::wire_struct! {
    /// ApiVersions response: the version range of every registered API.
    pub struct ApiVersionsResponse {
        /// One entry per API, in key order (0–13, 50–55 on today's server).
        pub api_versions: Vec<ApiVersionRange>,
        /// Broker software name (`"stellflow-broker"`).
        pub broker_software_name: NString,
        /// Broker software version.
        pub broker_software_version: NString,
        /// Broker feature strings (not reliable on today's server, PROTOCOL.md §8).
        pub supported_features: Vec<NString>,
    }
}

crate::wire_struct! {
    /// The supported version range of one API.
    pub struct ApiVersionRange {
        /// The API.
        pub api_key: ApiKey,
        /// Lowest supported version.
        pub min_version: i16,
        /// Highest supported version.
        pub max_version: i16,
    }
}
