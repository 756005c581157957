//! ApiVersions negotiation: which version of each API to use on one connection.
//!
//! For each API the version is the highest in `[client min, client max] ∩ [broker min, broker
//! max]` (PROTOCOL.md §6). An API the broker does not list, or whose ranges do not meet, is
//! unusable on that broker and its requests fail with [`crate::RequestError::UnsupportedApi`].

use stellflow_proto::ApiKey;
use stellflow_proto::messages::ApiVersionsResponse;

/// An inclusive version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VersionRange {
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

/// The versions this client can encode: version 0 of all 20 APIs (the only version the
/// server has).
pub(crate) fn client_range(key: ApiKey) -> Option<VersionRange> {
    key.is_known().then_some(VersionRange { min: 0, max: 0 })
}

const SLOTS: usize = 56;

/// The negotiated version per API on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Versions {
    table: [Option<i16>; SLOTS],
}

impl Default for Versions {
    fn default() -> Self {
        Versions {
            table: [None; SLOTS],
        }
    }
}

impl Versions {
    /// Chooses versions from the broker's ranges.
    pub(crate) fn negotiate(broker: &ApiVersionsResponse) -> Self {
        Self::from_ranges(broker.api_versions.iter().map(|r| {
            (
                r.api_key,
                VersionRange {
                    min: r.min_version,
                    max: r.max_version,
                },
            )
        }))
    }

    /// Chooses versions from `(key, broker range)` pairs.
    pub(crate) fn from_ranges(ranges: impl IntoIterator<Item = (ApiKey, VersionRange)>) -> Self {
        let mut v = Versions::default();
        for (key, b) in ranges {
            let (Some(c), Some(slot)) = (client_range(key), slot(key)) else {
                continue;
            };
            let lo = c.min.max(b.min);
            let hi = c.max.min(b.max);
            if lo <= hi {
                v.table[slot] = Some(hi);
            }
        }
        v
    }

    /// The version to use for `key`, or `None` when the API is unusable on this broker.
    pub(crate) fn get(&self, key: ApiKey) -> Option<i16> {
        slot(key).and_then(|s| self.table[s])
    }
}

fn slot(key: ApiKey) -> Option<usize> {
    usize::try_from(key.0).ok().filter(|s| *s < SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_common_version() {
        let v = Versions::from_ranges([
            (ApiKey::METADATA, VersionRange { min: 0, max: 3 }),
            (ApiKey::PRODUCE, VersionRange { min: 1, max: 2 }),
            (ApiKey(99), VersionRange { min: 0, max: 0 }),
            (ApiKey(-1), VersionRange { min: 0, max: 0 }),
        ]);
        assert_eq!(v.get(ApiKey::METADATA), Some(0));
        assert_eq!(v.get(ApiKey::PRODUCE), None, "ranges do not meet");
        assert_eq!(v.get(ApiKey::FETCH), None, "not listed");
        assert_eq!(v.get(ApiKey(99)), None);
        assert_eq!(v.get(ApiKey(-5)), None);
    }

    #[test]
    fn all_server_keys_negotiate_to_zero() {
        let v = Versions::from_ranges(ApiKey::ALL.map(|k| (k, VersionRange { min: 0, max: 0 })));
        assert!(ApiKey::ALL.iter().all(|k| v.get(*k) == Some(0)));
    }
}
