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

/// Where a run is on one input partition.
#[derive(Debug, Clone, Copy)]
struct RunAt {
    /// Its last offset there.
    offset: i64,
    /// That input's index in `Log::processed`.
    at: usize,
    /// The handover the run last went through there: the window from the last input
    /// processed before it to the first after it (indices in `Log::processed`).
    handover: Option<(usize, usize)>,
}

/// Checks each input partition's processing, run by run (a run: one start of the service
/// reading the partition forward). An input is processed again only across a handover (a
/// run begins, or another run processed the partition since this run last did) and only if
/// it came after the group's last commit before that handover (the lowest offset committed
/// between the two), so what is processed again is at most the records since the last
/// commit. Returns how many inputs were processed again.
fn duplicates(log: &Log) -> Result<usize, String> {
    let mut runs: BTreeMap<(i32, u64), RunAt> = BTreeMap::new(); // (partition, run)
    // partition: (run, index in `processed`) of its last input processed by anyone
    let mut latest: BTreeMap<i32, (u64, usize)> = BTreeMap::new();
    let mut highest: BTreeMap<i32, i64> = BTreeMap::new();
    let mut again = 0;
    for (i, p) in log.processed.iter().enumerate() {
        let own = runs.get(&(p.partition, p.run)).copied();
        let handover = match (own, latest.get(&p.partition)) {
            // The run goes on: through a new handover if another run processed the
            // partition since (the run lost it after its own last input there: an input it
            // still finishes, as a zombie), else still in the one it last went through.
            (Some(own), Some(&(run, _))) if p.offset > own.offset => {
                if run != p.run {
                    Some((own.at, i))
                } else {
                    own.handover
                }
            }
            // The run begins (or starts over): after whoever processed the partition last.
            (_, Some(&(_, k))) => Some((k, i)),
            (_, None) => None,
        };
        let repeated = highest
            .get(&p.partition)
            .is_some_and(|&top| p.offset <= top);
        if repeated {
            let Some((since, at)) = handover else {
                return Err(format!(
                    "duplicates: {} (input partition {} offset {}) processed again by run {} \
                     with no handover\n{}",
                    p.value,
                    p.partition,
                    p.offset,
                    p.run,
                    history(log, p.partition)
                ));
            };
            let committed = committed_at_handover(log, p.partition, since, at);
            if p.offset < committed {
                return Err(format!(
                    "duplicates: {} (input partition {} offset {}) processed again by run {}, \
                     though the group had committed {committed} when the partition changed \
                     hands\n{}",
                    p.value,
                    p.partition,
                    p.offset,
                    p.run,
                    history(log, p.partition)
                ));
            }
            again += 1;
        }
        let at = RunAt {
            offset: p.offset,
            at: i,
            handover,
        };
        runs.insert((p.partition, p.run), at);
        latest.insert(p.partition, (p.run, i));
        let top = highest.entry(p.partition).or_insert(p.offset);
        *top = (*top).max(p.offset);
    }
    Ok(again)
}

/// The group's committed offset of `partition` at a handover somewhere between the
/// `stopped`-th and the `resumed`-th input processed: the lowest it was in that window.
fn committed_at_handover(log: &Log, partition: i32, stopped: usize, resumed: usize) -> i64 {
    let of_partition = || log.commits.iter().filter(|(_, p, _)| *p == partition);
    let at_stop = (of_partition().filter(|(at, _, _)| *at <= stopped))
        .map(|(_, _, offset)| *offset)
        .next_back()
        .unwrap_or(-1);
    (of_partition().filter(|(at, _, _)| *at > stopped && *at <= resumed))
        .map(|(_, _, offset)| *offset)
        .fold(at_stop, i64::min)
}

/// What happened to `partition`, in order: each input processed (run:offset) and each
/// commit seen (`commit offset`).
fn history(log: &Log, partition: i32) -> String {
    let mut out = format!("input partition {partition}:");
    let mut commits = log
        .commits
        .iter()
        .filter(|(_, p, _)| *p == partition)
        .peekable();
    for (i, p) in log.processed.iter().enumerate() {
        while let Some((_, _, offset)) = commits.next_if(|(at, _, _)| *at <= i) {
            out += &format!(" [commit {offset}]");
        }
        if p.partition == partition {
            out += &format!(" {}:{}", p.run, p.offset);
        }
    }
    for (_, _, offset) in commits {
        out += &format!(" [commit {offset}]");
    }
    out
}
