//! DescribeCluster (53) and HealthCheck (54) (PROTOCOL.md §3.15).
//!
//! Both requests use the ApiVersions request layout (its bytes must be present even though the
//! server ignores them); each has its own type so that it names its API key. Both answer with
//! [`ClusterStatusResponse`].

use crate::error_code::ErrorCode;
use crate::wire::NString;

macro_rules! cluster_status_request {
    ($(#[$meta:meta])* $name:ident) => {
        crate::wire_struct! {
            $(#[$meta])*
            pub struct $name {
                /// Client software name (ignored).
                pub client_software_name: NString,
                /// Client software version (ignored).
                pub client_software_version: NString,
                /// Client feature strings (ignored).
                pub supported_features: Vec<NString>,
            }
        }
    };
}

cluster_status_request! {
    /// DescribeCluster request (ApiVersions request layout).
    DescribeClusterRequest
}

cluster_status_request! {
    /// HealthCheck request (ApiVersions request layout).
    HealthCheckRequest
}

crate::wire_struct! {
    /// Response to DescribeCluster and HealthCheck (a broker-local view).
    pub struct ClusterStatusResponse {
        /// Always 0.
        pub error_code: ErrorCode,
        /// Cluster id (hard-coded on today's server).
        pub cluster_id: NString,
        /// Brokers in this broker's metadata cache.
        pub broker_count: i32,
        /// Topics in this broker's local metadata.
        pub topic_count: i32,
        /// Partitions in this broker's local metadata.
        pub partition_count: i32,
    }
}
