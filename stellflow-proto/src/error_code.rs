//! The server's error-code table (PROTOCOL.md §5) and how a client should react to each code.
//!
//! Codes 21 and 22 follow the **server** (`OUT_OF_ORDER_SEQUENCE`, `DUPLICATE_SEQUENCE`), not the
//! docs or the official SDKs. Unknown codes are preserved as numbers, never mapped to a name.

/// An error code as it travels on the wire.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ErrorCode(pub i16);

/// What a client should do about an error code. Each code has exactly one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Not an error (code 0).
    None,
    /// Refresh metadata (the leader or the topic may have moved), then retry.
    RefreshMetadataAndRetry,
    /// Retry the same request after a backoff.
    RetryAfterBackoff,
    /// Retrying as-is cannot succeed: report it to the caller.
    Fatal,
}

macro_rules! error_codes {
    ($($name:ident = $code:expr, $class:ident, $doc:expr;)*) => {
        impl ErrorCode {
            $(
                #[doc = $doc]
                pub const $name: ErrorCode = ErrorCode($code);
            )*

            /// The server's name for this code, or `None` for a code the server does not define.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// How a client should react to this code. Unknown codes are fatal.
            pub fn class(self) -> ErrorClass {
                match self.0 {
                    $($code => ErrorClass::$class,)*
                    _ => ErrorClass::Fatal,
                }
            }
        }
    };
}

error_codes! {
    NONE = 0, None, "Success.";
    UNKNOWN_SERVER_ERROR = 1, Fatal, "Handler exception (header-only), or \"not a member\" for SyncGroup/Heartbeat. A Produce may have been partly applied.";
    UNSUPPORTED_VERSION = 2, Fatal, "`apiVersion ≠ 0` on keys 0–4 (header-only).";
    INVALID_REQUEST = 3, Fatal, "Bad `acks`, `maxNumOffsets ≤ 0`, `partitionCount ≤ 0`, or EndTransaction outside a transaction.";
    AUTHENTICATION_FAILED = 4, Fatal, "Authentication failed (never sent by the shipped server).";
    AUTHORIZATION_FAILED = 5, Fatal, "Authorization failed (never sent by the shipped server).";
    THROTTLED = 6, RetryAfterBackoff, "Quota exceeded (never sent by the shipped server).";
    BROKER_NOT_AVAILABLE = 7, RefreshMetadataAndRetry, "Produce `acks=-1` replication wait timed out — **the data was written** and the offset is real; a blind retry duplicates it.";
    LEADER_NOT_AVAILABLE = 8, RefreshMetadataAndRetry, "No leader (never sent by the shipped server).";
    NOT_LEADER_OR_FOLLOWER = 9, RefreshMetadataAndRetry, "This broker does not lead the partition (or the ListOffsets epoch does not match).";
    UNKNOWN_TOPIC_OR_PARTITION = 10, RefreshMetadataAndRetry, "The broker has no such topic or partition.";
    OFFSET_OUT_OF_RANGE = 11, Fatal, "ListOffsets: no blob at or after that timestamp (never sent by Fetch).";
    MESSAGE_TOO_LARGE = 12, Fatal, "Never sent by the shipped server.";
    RECORD_LIST_TOO_LARGE = 13, Fatal, "Never sent by the shipped server.";
    INVALID_RECORD = 14, Fatal, "Empty or null records, or a malformed SRFB batch (CRC, lengths, version, compression, gzip).";
    CORRUPT_MESSAGE = 15, Fatal, "Never sent by the shipped server (CRC failures are reported as 14).";
    COORDINATOR_NOT_AVAILABLE = 16, RetryAfterBackoff, "Never sent by the shipped server; re-run FindCoordinator, then retry.";
    NOT_COORDINATOR = 17, RetryAfterBackoff, "Never sent by the shipped server; re-run FindCoordinator, then retry.";
    CONCURRENT_TRANSACTIONS = 18, Fatal, "The producer id is bound to another producer key: use a distinct producer identity.";
    FENCED_INSTANCE_ID = 19, Fatal, "Group: wrong generation or expired member (rejoin). Producer: stale epoch (fatal for that producer instance).";
    FEATURE_NOT_ENABLED = 20, Fatal, "Unknown `apiKey` (header-only).";
    OUT_OF_ORDER_SEQUENCE = 21, Fatal, "Idempotent SRFB batch with an unexpected sequence, or a known sequence re-sent with other content: reset the producer's sequences.";
    DUPLICATE_SEQUENCE = 22, None, "Never sent (duplicates are answered as success with the original offset); if seen, treat as success.";
}

impl ErrorCode {
    /// Whether this is code 0.
    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// Whether the code is any failure.
    pub fn is_err(self) -> bool {
        self.0 != 0
    }

    /// Whether the request may be retried (after a metadata refresh or a backoff).
    pub fn is_retriable(self) -> bool {
        matches!(
            self.class(),
            ErrorClass::RefreshMetadataAndRetry | ErrorClass::RetryAfterBackoff
        )
    }
}

crate::registry_code::impl_registry_code!(ErrorCode, "UnknownErrorCode");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_table_for_21_and_22() {
        assert_eq!(ErrorCode(21).name(), Some("OUT_OF_ORDER_SEQUENCE"));
        assert_eq!(ErrorCode(22).name(), Some("DUPLICATE_SEQUENCE"));
        assert_eq!(ErrorCode(23).name(), None);
        assert_eq!(format!("{:?}", ErrorCode(27)), "UnknownErrorCode(27)");
    }

    #[test]
    fn classification() {
        assert_eq!(
            ErrorCode::NOT_LEADER_OR_FOLLOWER.class(),
            ErrorClass::RefreshMetadataAndRetry
        );
        assert_eq!(ErrorCode::THROTTLED.class(), ErrorClass::RetryAfterBackoff);
        assert_eq!(ErrorCode::INVALID_RECORD.class(), ErrorClass::Fatal);
        assert_eq!(ErrorCode(-5).class(), ErrorClass::Fatal);
        assert!(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.is_retriable());
        assert!(!ErrorCode::FENCED_INSTANCE_ID.is_retriable());
    }
}
