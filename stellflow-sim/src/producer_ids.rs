//! The producer-id allocator (PROTOCOL.md §3.12).
//!
//! One in-memory counter per broker process, starting at 1. A key (transactionalId if
//! non-blank, else clientId, else `"anonymous"`) keeps its id for the life of the process.
//! InitProducerId *and every Produce request* allocate for their key; the epoch is always 0.

use std::collections::HashMap;

/// The key used when neither a transactionalId nor a clientId is given.
pub const ANONYMOUS: &str = "anonymous";

/// Whether a string is blank the way Java's `String.isBlank` sees it.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

/// The producer key of a request: `transactional_id` if non-blank, else `client_id` if
/// non-blank, else `None`.
pub fn producer_key<'a>(
    transactional_id: Option<&'a str>,
    client_id: Option<&'a str>,
) -> Option<&'a str> {
    transactional_id
        .filter(|s| !is_blank(s))
        .or(client_id.filter(|s| !is_blank(s)))
}

/// Allocates producer ids per key.
#[derive(Debug, Clone)]
pub struct ProducerIdAllocator {
    next: i64,
    by_key: HashMap<String, i64>,
}

impl Default for ProducerIdAllocator {
    fn default() -> Self {
        ProducerIdAllocator {
            next: 1,
            by_key: HashMap::new(),
        }
    }
}

impl ProducerIdAllocator {
    /// A fresh allocator (counter at 1), as after a broker start.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of the request key derived from `transactional_id`/`client_id` (see
    /// [`producer_key`], falling back to `"anonymous"`), allocating one on first use.
    pub fn id_for(&mut self, transactional_id: Option<&str>, client_id: Option<&str>) -> i64 {
        let key = producer_key(transactional_id, client_id).unwrap_or(ANONYMOUS);
        if let Some(id) = self.by_key.get(key) {
            return *id;
        }
        let id = self.next;
        self.next += 1;
        self.by_key.insert(key.to_owned(), id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_counter() {
        let mut a = ProducerIdAllocator::new();
        assert_eq!(a.id_for(None, Some("c1")), 1);
        assert_eq!(a.id_for(Some(" "), Some("c1")), 1);
        assert_eq!(a.id_for(Some("tx"), Some("c1")), 2);
        assert_eq!(a.id_for(Some("tx"), Some("other")), 2);
        assert_eq!(a.id_for(None, None), 3);
        assert_eq!(a.id_for(Some(""), Some("")), 3);
        assert_eq!(a.id_for(None, Some("anonymous")), 3);
    }

    #[test]
    fn blank() {
        assert!(is_blank(""));
        assert!(is_blank(" \t"));
        assert!(!is_blank(" a"));
        assert_eq!(producer_key(Some(""), Some("c")), Some("c"));
        assert_eq!(producer_key(None, Some("  ")), None);
    }
}
