//! The trace hash: one number for everything the brokers and the applications of a world
//! observed, so that two runs of one seed can be compared at a glance.

/// A running 64-bit hash of tagged events, eight bytes a step (each event's length goes in
/// first, so padding its last word is unambiguous). Two runs of a world are the same run when
/// their hashes match: every byte each broker received and sent, in order, went into it, and
/// every observation an application reported ([`crate::SimulatedCluster::observe`]).
#[derive(Debug, Clone)]
pub(crate) struct TraceHash {
    state: u64,
    events: u64,
}

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// An odd multiplier with well-spread bits (2^64 divided by the golden ratio).
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl TraceHash {
    /// The hash of no events.
    pub fn new() -> Self {
        TraceHash {
            state: OFFSET,
            events: 0,
        }
    }

    /// Adds one event: its kind, a number naming where it happened, its bytes.
    pub fn record(&mut self, kind: u8, at: u64, bytes: &[u8]) {
        self.events += 1;
        self.mix(u64::from(kind));
        self.mix(at);
        self.mix(bytes.len() as u64);
        self.feed(bytes);
    }

    fn feed(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w));
        }
    }

    fn mix(&mut self, word: u64) {
        self.state = (self.state ^ word).wrapping_mul(MULTIPLIER).rotate_left(29);
    }

    /// The hash so far.
    pub fn value(&self) -> u64 {
        self.state
    }

    /// Events recorded so far.
    pub fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::TraceHash;

    #[test]
    fn the_hash_tells_order_and_content_apart() {
        let hash = |events: &[(u8, u64, &[u8])]| {
            let mut t = TraceHash::new();
            for (k, at, b) in events {
                t.record(*k, *at, b);
            }
            t.value()
        };
        let a = hash(&[(b'i', 1, b"ab"), (b'o', 1, b"c")]);
        assert_eq!(a, hash(&[(b'i', 1, b"ab"), (b'o', 1, b"c")]));
        assert_ne!(a, hash(&[(b'o', 1, b"c"), (b'i', 1, b"ab")]));
        assert_ne!(a, hash(&[(b'i', 1, b"a"), (b'o', 1, b"bc")]));
        assert_ne!(a, hash(&[(b'i', 2, b"ab"), (b'o', 1, b"c")]));
    }
}
