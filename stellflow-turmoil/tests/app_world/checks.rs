//! What a user of the at-least-once transformer wants, checked on what a world wrote down:
//! every input's output appears, each key's outputs appear in the order of its inputs, and
//! an input is processed again only across a handover or a crash, and then only if it came
//! after the group's last commit.

use super::{KEYS, Log, PER_KEY, input_value};
use std::collections::{BTreeMap, BTreeSet};

/// The inputs whose outputs the checker has not read.
pub fn missing(log: &Log) -> Vec<String> {
    let seen: BTreeSet<String> = log.outputs.values().flatten().cloned().collect();
    (0..PER_KEY)
        .flat_map(|seq| (0..KEYS).map(move |key| input_value(key, seq)))
        .filter(|v| !seen.contains(&v.to_ascii_uppercase()))
        .collect()
}

/// Every check; `Ok` with the number of inputs processed more than once.
pub fn check(log: &Log) -> Result<usize, String> {
    let missing = missing(log);
    if !missing.is_empty() {
        return Err(format!("lost: no output for {missing:?}"));
    }
    per_key_order(log)?;
    duplicates(log)
}

/// Within each output partition, each key's first outputs come in the order of its inputs
/// (`K-0`, `K-1`, ...); an output already seen may come again (a duplicate), a later one
/// may not come before an earlier one.
fn per_key_order(log: &Log) -> Result<(), String> {
    for (partition, values) in &log.outputs {
        let mut next: BTreeMap<&str, usize> = BTreeMap::new();
        for value in values {
            let Some((key, seq)) = value.split_once('-') else {
                return Err(format!("an output not made from an input: {value:?}"));
            };
            let seq: usize = seq.parse().map_err(|_| format!("bad output {value:?}"))?;
            let expected = next.entry(key).or_default();
            if seq > *expected {
                return Err(format!(
                    "order: in output partition {partition}, {value} came before {key}-{expected}"
                ));
            }
            if seq == *expected {
                *expected += 1;
            }
        }
    }
    Ok(())
}

/// Splits each input partition's processing into runs (one start of the service reading
/// forward) and checks that a run begins no earlier than the group's commit before it:
/// what it processes again is what came after the last commit, and only a new run (a
/// handover or a crash) processes anything again. Returns how many were processed again.
fn duplicates(log: &Log) -> Result<usize, String> {
    let mut last: BTreeMap<i32, (u64, i64)> = BTreeMap::new(); // partition: (run, offset)
    let mut highest: BTreeMap<i32, i64> = BTreeMap::new();
    let mut again = 0;
    for (i, p) in log.processed.iter().enumerate() {
        let new_run = last
            .get(&p.partition)
            .is_none_or(|&(run, offset)| run != p.run || p.offset <= offset);
        if new_run && let Some(&top) = highest.get(&p.partition) {
            let committed = committed_before(log, i, p.partition);
            if p.offset < committed {
                return Err(format!(
                    "duplicates: run {} of input partition {} began at offset {} ({}), before \
                     the group's commit at {committed}; the last processed was at {top}",
                    p.run, p.partition, p.offset, p.value
                ));
            }
        }
        // Within a run offsets only grow, so an input processed again is in a later run.
        if highest
            .get(&p.partition)
            .is_some_and(|&top| p.offset <= top)
        {
            again += 1;
        }
        last.insert(p.partition, (p.run, p.offset));
        let top = highest.entry(p.partition).or_insert(p.offset);
        *top = (*top).max(p.offset);
    }
    Ok(again)
}

/// The group's committed offset of `partition` when the `done`-th input was processed.
fn committed_before(log: &Log, done: usize, partition: i32) -> i64 {
    (log.commits.iter())
        .filter(|(at, p, _)| *at <= done && *p == partition)
        .map(|(_, _, offset)| *offset)
        .next_back()
        .unwrap_or(-1)
}
