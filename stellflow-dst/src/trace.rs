//! The trace hash: a 64-bit FNV-1a digest of everything observable in a run (bytes on every
//! link, connects, disconnects, client events, virtual times). The same seed must always give
//! the same hash; CI runs every seed twice to prove it.

/// An incremental FNV-1a (64-bit) hash of a run's observable history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceHash {
    state: u64,
    records: u64,
}

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash {
            state: 0xcbf2_9ce4_8422_2325,
            records: 0,
        }
    }
}

impl TraceHash {
    /// Mixes `bytes` into the digest.
    pub fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.state ^= u64::from(*b);
            self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Mixes one record: a tag, a virtual time in microseconds and a payload.
    pub fn record(&mut self, tag: u8, micros: u64, payload: &[u8]) {
        self.records += 1;
        self.bytes(&[tag]);
        self.bytes(&micros.to_le_bytes());
        self.bytes(&(payload.len() as u64).to_le_bytes());
        self.bytes(payload);
    }

    /// The digest so far.
    pub fn value(&self) -> u64 {
        self.state
    }

    /// How many records were mixed in.
    pub fn records(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_matters() {
        let mut a = TraceHash::default();
        a.record(1, 0, b"x");
        a.record(2, 0, b"y");
        let mut b = TraceHash::default();
        b.record(2, 0, b"y");
        b.record(1, 0, b"x");
        assert_ne!(a.value(), b.value());
        assert_eq!(a.records(), 2);
    }
}
