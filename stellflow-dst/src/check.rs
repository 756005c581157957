//! Invariant violations and the bookkeeping that finds them: the outcome book (every command
//! gets exactly one outcome, in time) is here; wire checks live in [`super::wire`], log and
//! workload checks in [`super::workload`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A broken invariant: which one, when (virtual time since the start) and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Virtual time since the start of the world.
    pub at: Duration,
    /// A short stable name of the invariant (e.g. `"one-outcome"`).
    pub invariant: &'static str,
    /// What was observed.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant `{}` violated at {:?}: {}",
            self.invariant, self.at, self.detail
        )
    }
}

/// How many request timeouts a timed-out idempotent Produce may wait for its late answer before
/// its connection is given up: the client's documented rule (stellflow-sansio's producer docs),
/// stated here on its own so that the harness checks the documented bound rather than reading
/// the client's constant.
pub(crate) const LATE_ANSWER_TIMEOUTS: u32 = 2;

/// Tracks issued commands until their single outcome.
#[derive(Debug)]
pub struct OutcomeBook<K: Ord + Copy + fmt::Debug> {
    pending: BTreeMap<K, (Duration, Duration, String)>,
    done: BTreeMap<K, Duration>,
}

impl<K: Ord + Copy + fmt::Debug> Default for OutcomeBook<K> {
    fn default() -> Self {
        OutcomeBook {
            pending: BTreeMap::new(),
            done: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Copy + fmt::Debug> OutcomeBook<K> {
    /// A command `id` was issued at `at`; its outcome must come by `at + bound`.
    pub fn issued(&mut self, id: K, at: Duration, bound: Duration, what: String) {
        self.pending.insert(id, (at, at + bound, what));
    }

    /// An outcome for `id` arrived at `at`. Errors on a second outcome or an unknown id.
    pub fn outcome(&mut self, id: K, at: Duration) -> Result<String, String> {
        if let Some(first) = self.done.get(&id) {
            return Err(format!("{id:?} got a second outcome (first at {first:?})"));
        }
        match self.pending.remove(&id) {
            Some((_, _, what)) => {
                self.done.insert(id, at);
                Ok(what)
            }
            None => Err(format!("outcome for {id:?}, which was never issued")),
        }
    }

    /// The first command whose outcome is overdue at `now`.
    pub fn overdue(&self, now: Duration) -> Option<String> {
        self.pending
            .iter()
            .find(|(_, (_, due, _))| *due < now)
            .map(|(id, (at, due, what))| {
                format!("{id:?} ({what}) issued at {at:?} has no outcome by {due:?}")
            })
    }

    /// Commands still waiting for an outcome.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Commands that got their outcome.
    pub fn completed(&self) -> usize {
        self.done.len()
    }

    /// Whether `id` is still waiting.
    pub fn is_pending(&self, id: &K) -> bool {
        self.pending.contains_key(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_outcome() {
        let mut b = OutcomeBook::default();
        let s = Duration::from_secs(1);
        b.issued(1u64, Duration::ZERO, s, "x".into());
        assert!(b.overdue(s).is_none());
        assert!(b.overdue(s * 2).is_some());
        assert!(b.outcome(1, s).is_ok());
        assert!(b.outcome(1, s).is_err());
        assert!(b.outcome(2, s).is_err());
        assert_eq!((b.pending(), b.completed()), (0, 1));
    }
}
