//! The committed-offset store of one broker (PROTOCOL.md §3.6–§3.7).
//!
//! Commits need no membership and are never validated. The store survives a broker restart
//! (the server rewrites a snapshot file on every commit), except that a null metadata reads back
//! as `""` afterwards. It is never shared between brokers.

use std::collections::HashMap;

type Key = (Option<String>, Option<String>, i32);

/// A committed position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The committed offset (stored verbatim, negative values included).
    pub offset: i64,
    /// The committed metadata (`None` = committed as null, before a restart).
    pub metadata: Option<String>,
}

/// Committed offsets keyed by `(group, topic, partition)`.
#[derive(Debug, Clone, Default)]
pub struct OffsetStore {
    offsets: HashMap<Key, Committed>,
}

impl OffsetStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores a commit (always succeeds).
    pub fn commit(
        &mut self,
        group: Option<&str>,
        topic: Option<&str>,
        partition: i32,
        offset: i64,
        metadata: Option<&str>,
    ) {
        self.offsets.insert(
            (
                group.map(str::to_owned),
                topic.map(str::to_owned),
                partition,
            ),
            Committed {
                offset,
                metadata: metadata.map(str::to_owned),
            },
        );
    }

    /// The committed position, or `{-1, ""}` when nothing was committed.
    pub fn fetch(&self, group: Option<&str>, topic: Option<&str>, partition: i32) -> Committed {
        self.offsets
            .get(&(
                group.map(str::to_owned),
                topic.map(str::to_owned),
                partition,
            ))
            .cloned()
            .unwrap_or(Committed {
                offset: -1,
                metadata: Some(String::new()),
            })
    }

    /// What survives a restart: everything, with null metadata turned into `""`.
    pub fn after_restart(&self) -> OffsetStore {
        let mut out = self.clone();
        for c in out.offsets.values_mut() {
            if c.metadata.is_none() {
                c.metadata = Some(String::new());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_fetch_restart() {
        let mut s = OffsetStore::new();
        assert_eq!(
            s.fetch(Some("g"), Some("t"), 0),
            Committed {
                offset: -1,
                metadata: Some(String::new())
            }
        );
        s.commit(Some("g"), Some("t"), 0, -7, None);
        assert_eq!(
            s.fetch(Some("g"), Some("t"), 0),
            Committed {
                offset: -7,
                metadata: None
            }
        );
        let r = s.after_restart();
        assert_eq!(
            r.fetch(Some("g"), Some("t"), 0).metadata.as_deref(),
            Some("")
        );
        s.commit(None, None, 3, 5, Some("m"));
        assert_eq!(s.fetch(None, None, 3).offset, 5);
    }
}
