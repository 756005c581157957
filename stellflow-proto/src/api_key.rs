//! The API key registry: the 20 APIs the server registers (0–13, 50–55).

/// An API key as it travels in the request header. Unknown keys are preserved as numbers.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ApiKey(pub i16);

macro_rules! api_keys {
    ($($name:ident = $code:expr, $text:expr;)*) => {
        impl ApiKey {
            $(
                #[doc = concat!("`", $text, "` (key ", stringify!($code), ").")]
                pub const $name: ApiKey = ApiKey($code);
            )*

            /// Every key the server registers, in the order ApiVersions lists them.
            pub const ALL: [ApiKey; 20] = [$(ApiKey::$name),*];

            /// The server's name for this key, or `None` for an unknown key.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some($text),)*
                    _ => None,
                }
            }
        }
    };
}

api_keys! {
    API_VERSIONS = 0, "ApiVersions";
    METADATA = 1, "Metadata";
    PRODUCE = 2, "Produce";
    FETCH = 3, "Fetch";
    LIST_OFFSETS = 4, "ListOffsets";
    OFFSET_COMMIT = 5, "OffsetCommit";
    OFFSET_FETCH = 6, "OffsetFetch";
    FIND_COORDINATOR = 7, "FindCoordinator";
    HEARTBEAT = 8, "Heartbeat";
    JOIN_GROUP = 9, "JoinGroup";
    SYNC_GROUP = 10, "SyncGroup";
    INIT_PRODUCER_ID = 11, "InitProducerId";
    BEGIN_TRANSACTION = 12, "BeginTransaction";
    END_TRANSACTION = 13, "EndTransaction";
    CREATE_TOPIC = 50, "CreateTopic";
    DELETE_TOPIC = 51, "DeleteTopic";
    ALTER_PARTITION = 52, "AlterPartition";
    DESCRIBE_CLUSTER = 53, "DescribeCluster";
    HEALTH_CHECK = 54, "HealthCheck";
    DECOMMISSION_BROKER = 55, "DecommissionBroker";
}

impl ApiKey {
    /// Whether the server registers this key.
    pub fn is_known(self) -> bool {
        self.name().is_some()
    }
}

crate::registry_code::impl_registry_code!(ApiKey, "UnknownApiKey");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_complete_and_unknowns_are_kept() {
        assert_eq!(ApiKey::ALL.len(), 20);
        assert!(ApiKey::ALL.iter().all(|k| k.is_known()));
        assert_eq!(ApiKey(14).name(), None);
        assert_eq!(format!("{:?}", ApiKey(999)), "UnknownApiKey(999)");
        assert_eq!(ApiKey::ALL[14], ApiKey::CREATE_TOPIC);
    }
}
